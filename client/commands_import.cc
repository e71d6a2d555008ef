// `rbmrec import` (ratings) and `rbmrec items import` (titles): read a
// file, send it in batches, and account for every row the server stored,
// rejected or may have lost.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/command_context.h"

namespace rbmrec::client {
namespace {

// The sizes in gRPC's "Received message larger than max (X vs. Y)": the
// message's bytes and the receiver's limit (for rbmrec-server, its
// --max-message-mb); false when `status` is not that failure.
bool MessageTooLarge(const absl::Status& status, int64_t* bytes,
                     int64_t* limit) {
  if (status.code() != absl::StatusCode::kResourceExhausted) return false;
  const std::string message = absl::AsciiStrToLower(status.message());
  const absl::string_view marker = "larger than max (";
  const size_t at = absl::string_view(message).find(marker);
  if (at == absl::string_view::npos) return false;
  const absl::string_view rest =
      absl::string_view(message).substr(at + marker.size());
  const size_t vs = rest.find(" vs. ");
  const size_t close = rest.find(')');
  if (vs == absl::string_view::npos || close == absl::string_view::npos ||
      close < vs) {
    return false;
  }
  return absl::SimpleAtoi(rest.substr(0, vs), bytes) &&
         absl::SimpleAtoi(rest.substr(vs + 5, close - vs - 5), limit) &&
         *bytes > 0 && *limit > 0;
}

// One `import` run: the file read, how it was cut into batches, and the
// server's answer.
struct ImportRun {
  std::string file;
  int batch_size = 0;
  bool views = false;  // --kind view
  ReadResult read;
  int64_t rows_sent = 0;
  int64_t batches_expected = 0;
  ImportProgress last;  // the last progress report
  double seconds = 0;

  // The file line of the last row of the first `batches` batches.
  int64_t LastLineOf(int64_t batches) const {
    const int64_t rows = std::min(rows_sent, batches * batch_size);
    return rows > 0 ? read.rows[static_cast<size_t>(rows - 1)].line : 0;
  }
};

void PrintSafeToRerun(Context& ctx) {
  ctx.err() << "re-running the same import is safe: ratings are upserted "
               "by (user, item), so rows already stored are written again "
               "with the same values\n";
}

// Reads the flags and the file; on failure prints the error and returns its
// exit code in `exit_code`.
std::optional<ImportRun> ReadImport(Context& ctx, int* exit_code) {
  const ParsedArgs& args = ctx.args();
  ImportRun run;
  run.file = args.positional[0];
  absl::StatusOr<ReadOptions> options = GetReadOptions(args);
  if (!options.ok()) {
    *exit_code = ctx.UsageError(options.status());
    return std::nullopt;
  }
  absl::StatusOr<int64_t> batch = GetInt(args, "batch", 10000, 1, 10000000);
  if (!batch.ok()) {
    *exit_code = ctx.UsageError(batch.status());
    return std::nullopt;
  }
  run.batch_size = static_cast<int>(*batch);
  const std::string kind = args.Get("kind", "rating");
  if (kind != "rating" && kind != "view") {
    *exit_code = ctx.UsageError(absl::InvalidArgumentError(
        absl::StrCat("--kind: expected rating or view, got '", kind, "'")));
    return std::nullopt;
  }
  run.views = kind == "view";
  absl::StatusOr<ReadResult> read = ReadRatingsFile(run.file, *options);
  if (!read.ok()) {
    *exit_code = ctx.InputError(read.status());
    return std::nullopt;
  }
  PrintParseProblems(ctx, *read);
  if (read->rows.empty()) {
    *exit_code = ctx.InputError(absl::InvalidArgumentError(
        absl::StrCat(NoRowsReason(run.file, *read), "; nothing was sent")));
    return std::nullopt;
  }
  run.read = *std::move(read);
  run.rows_sent = static_cast<int64_t>(run.read.rows.size());
  run.batches_expected = (run.rows_sent + run.batch_size - 1) / run.batch_size;
  return run;
}

// The hint for a batch over the server's message size limit.
void PrintMessageSizeHint(Context& ctx, const ImportRun& run,
                          const std::optional<CommittedCounts>& committed,
                          int64_t bytes, int64_t limit) {
  // The rows of the batch that failed: the first one not committed
  // (batches are committed in order), else a full one.
  int64_t rows = run.batch_size;
  if (committed.has_value()) {
    const int64_t left = run.rows_sent - committed->batches * run.batch_size;
    if (left > 0) rows = std::min<int64_t>(rows, left);
  }
  // Rows per batch that fit, with a tenth to spare for longer rows.
  const int64_t fit = static_cast<int64_t>(0.9 * static_cast<double>(rows) *
                                           static_cast<double>(limit) /
                                           static_cast<double>(bytes));
  ctx.err() << "hint: a batch of " << FormatCount(rows) << " rows was "
            << FormatBytes(bytes) << ", over the server's limit of "
            << FormatBytes(limit) << " per message (its --max-message-mb); ";
  if (fit >= 1) {
    ctx.err() << "lower --batch from " << run.batch_size << " to " << fit
              << " or less\n";
  } else {
    ctx.err() << "even one row is too large: raise the server's "
                 "--max-message-mb\n";
  }
}

// A failed ImportRatings call: the error, hints, and what is certainly
// stored.
int ReportImportFailure(Context& ctx, const ImportRun& run,
                        const absl::Status& status) {
  const std::optional<CommittedCounts> committed = CommittedOf(status);
  const std::string reason = ErrorReasonOf(status);
  const int code = ctx.RpcError(status, {std::string(), true, committed});
  if (reason == "LIMIT_EXCEEDED") {
    ctx.err() << "hint: this import sent batches of " << run.batch_size
              << " rows; use --batch with the server's limit (in the "
                 "error above) or less\n";
  }
  int64_t bytes = 0;
  int64_t limit = 0;
  if (MessageTooLarge(status, &bytes, &limit)) {
    PrintMessageSizeHint(ctx, run, committed, bytes, limit);
  }
  if (committed.has_value()) {
    ctx.err() << "committed: " << FormatCount(committed->rows)
              << " rows in the first " << FormatCount(committed->batches)
              << " of " << FormatCount(run.last.batches_sent)
              << " batches sent are certainly stored";
    if (committed->batches > 0) {
      ctx.err() << " (" << TerminalSafe(run.file) << " up to line "
                << run.LastLineOf(committed->batches) << ")";
    }
    ctx.err() << "; later rows are not\n";
  } else if (run.last.rows_sent == 0) {
    ctx.err() << "committed: nothing (no batch was sent)\n";
  } else {
    ctx.err() << "committed: unknown (the server did not say; the "
                 "connection may have been lost): 0 rows are certainly "
                 "stored, up to "
              << FormatCount(run.last.rows_sent) << " sent rows may be\n";
  }
  PrintSafeToRerun(ctx);
  return code;
}

// The --json summary of a complete import.
std::string ImportJson(const ImportRun& run,
                       const v1::AddRatingsResponse& response, double rate) {
  Json rejected_rows = Json::array();
  for (const v1::RejectedRow& r : response.rejected_rows()) {
    rejected_rows.push_back(Json{
        {"line", SourceLine(run.read.rows, run.batch_size, r.batch(), r.row())},
        {"batch", r.batch()},
        {"row", r.row()},
        {"user_id", r.user_id()},
        {"item_id", r.item_id()},
        {"reason", r.reason()}});
  }
  Json j = Json::object();
  j["file"] = run.file;
  j["format"] = std::string(RatingFormatName(run.read.format));
  j["rows_read"] = run.rows_sent;
  j["lines_skipped"] = run.read.skipped;
  j["parse_problems"] = run.read.problems;
  j["rows_sent"] = run.rows_sent;
  j["accepted"] = response.accepted();
  j["rejected"] = response.rejected();
  j["replaced"] = response.replaced();
  j["views"] = response.views();
  j["batches"] = response.batches();
  j["rejected_rows"] = std::move(rejected_rows);
  j["seconds"] = JsonNumber(run.seconds);
  j["rows_per_second"] = JsonNumber(rate);
  return DumpJson(j);
}

// The text summary of a complete import, with the rejected rows.
void PrintImportText(Context& ctx, const ImportRun& run,
                     const v1::AddRatingsResponse& response, double rate) {
  ctx.out() << "accepted " << FormatCount(response.accepted()) << ", rejected "
            << FormatCount(response.rejected()) << ", replaced "
            << FormatCount(response.replaced());
  if (response.views() > 0) {
    ctx.out() << ", views " << FormatCount(response.views());
  }
  ctx.out() << " in " << FormatCount(response.batches()) << " batches, "
            << FormatDuration(run.seconds) << " ("
            << FormatCount(std::llround(rate)) << " rows/s)\n";
  if (response.rejected() == 0) return;
  ctx.out() << "rejected rows:\n";
  for (const v1::RejectedRow& r : response.rejected_rows()) {
    const int64_t source =
        SourceLine(run.read.rows, run.batch_size, r.batch(), r.row());
    ctx.out() << "  " << TerminalSafe(run.file) << ":" << source << ": user '"
              << TerminalSafe(r.user_id()) << "' item '"
              << TerminalSafe(r.item_id()) << "': " << TerminalSafe(r.reason())
              << "\n";
  }
  const int64_t more = response.rejected() - response.rejected_rows_size();
  if (more > 0) ctx.out() << "  ... and " << FormatCount(more) << " more\n";
}

// An answer whose counts do not add up to the rows sent: a server that
// stopped reading early (and still answered OK).
int ReportUnaccounted(Context& ctx, const ImportRun& run,
                      const v1::AddRatingsResponse& response) {
  const int64_t counted = response.accepted() + response.rejected();
  const int code =
      ctx.Fail(kExitRpc, "DATA_LOSS",
               absl::StrCat("the server counted ", FormatCount(counted),
                            " rows (", FormatCount(response.accepted()),
                            " accepted + ", FormatCount(response.rejected()),
                            " rejected) in ", FormatCount(response.batches()),
                            " batches, but this "
                            "import sent ",
                            FormatCount(run.rows_sent), " rows in ",
                            FormatCount(run.batches_expected),
                            " batches: ", FormatCount(run.rows_sent - counted),
                            " rows are unaccounted for and may not be stored"),
               {std::string(), true,
                CommittedCounts{response.batches(), response.accepted()}});
  ctx.err() << "committed: " << FormatCount(response.accepted())
            << " rows in the first " << FormatCount(response.batches())
            << " batches are certainly stored";
  if (response.batches() > 0) {
    ctx.err() << " (" << TerminalSafe(run.file) << " up to line "
              << run.LastLineOf(response.batches()) << ")";
  }
  ctx.err() << "\n";
  PrintSafeToRerun(ctx);
  return code;
}

}  // namespace

int RunImport(Context& ctx) {
  int exit_code = kExitOk;
  std::optional<ImportRun> run = ReadImport(ctx, &exit_code);
  if (!run.has_value()) return exit_code;
  if (!ctx.json()) {
    ctx.err() << "read " << FormatCount(run->rows_sent)
              << (run->views ? " views from " : " ratings from ")
              << TerminalSafe(run->file) << " ("
              << RatingFormatName(run->read.format) << ")\n";
  }

  ProgressLine line(ctx, "import: ");
  absl::StatusOr<v1::AddRatingsResponse> response = ctx.client().ImportRatings(
      run->read.rows, run->batch_size,
      [&](const ImportProgress& p) {
        run->last = p;
        line.Update(FormatImportProgress(p), p.done_sending);
      },
      run->views);
  line.Finish();
  run->seconds = line.elapsed_seconds();
  if (!response.ok()) return ReportImportFailure(ctx, *run, response.status());

  const double rate =
      run->seconds > 0 ? static_cast<double>(run->rows_sent) / run->seconds : 0;
  const bool complete =
      response->accepted() + response->rejected() == run->rows_sent &&
      response->batches() == run->batches_expected;
  if (!ctx.json()) {
    PrintImportText(ctx, *run, *response, rate);
  } else if (complete) {
    ctx.out() << ImportJson(*run, *response, rate) << "\n";
  }
  // Every row sent must be counted, in as many batches as were sent.
  if (!complete) return ReportUnaccounted(ctx, *run, *response);
  if (response->rejected() > 0 && !ctx.args().Has("allow-rejected")) {
    ctx.err() << "error: the server rejected "
              << FormatCount(response->rejected())
              << " rows (listed above); fix them and re-run the import (safe: "
                 "ratings are upserted), or pass --allow-rejected to accept "
                 "the rest as is\n";
    return kExitRejected;
  }
  return kExitOk;
}

// ---------------------------------------------------------------------------
// items import

int RunItemsImport(Context& ctx) {
  const ParsedArgs& args = ctx.args();
  const std::string& file = args.positional[0];
  absl::StatusOr<int64_t> batch = GetInt(args, "batch", 5000, 1, 10000000);
  if (!batch.ok()) return ctx.UsageError(batch.status());
  absl::StatusOr<std::vector<ItemInfo>> items = ReadItemsFile(file);
  if (!items.ok()) return ctx.InputError(items.status());

  const absl::Time start = absl::Now();
  int64_t stored = 0;
  int64_t calls = 0;
  v1::PutItemsRequest request;
  for (size_t i = 0; i < items->size(); ++i) {
    const ItemInfo& info = (*items)[i];
    v1::Item* item = request.add_items();
    item->set_item_id(info.item);
    item->set_title(info.title);
    if (!info.genres.empty()) {
      (*item->mutable_attributes())["genres"] = info.genres;
      for (absl::string_view genre :
           absl::StrSplit(info.genres, '|', absl::SkipEmpty())) {
        item->add_categories(std::string(genre));
      }
    }
    if (request.items_size() >= *batch || i + 1 == items->size()) {
      absl::StatusOr<v1::PutItemsResponse> response =
          ctx.client().PutItems(request);
      if (!response.ok()) {
        const int code = ctx.RpcError(response.status());
        if (ErrorReasonOf(response.status()) == "LIMIT_EXCEEDED") {
          ctx.err() << "hint: this import sent " << *batch
                    << " items per request; use a smaller --batch\n";
        }
        ctx.err() << "committed: the first " << FormatCount(stored)
                  << " items of the file (" << FormatCount(calls)
                  << " requests) are certainly stored; the failed request "
                     "stored nothing\n"
                  << "re-running the same import is safe: items are "
                     "upserted by id\n";
        return code;
      }
      stored += response->stored();
      ++calls;
      request.Clear();
    }
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (ctx.json()) {
    Json j = Json::object();
    j["file"] = file;
    j["items_read"] = static_cast<int64_t>(items->size());
    j["stored"] = stored;
    j["seconds"] = JsonNumber(seconds);
    ctx.out() << DumpJson(j) << "\n";
  } else {
    ctx.out() << "stored " << FormatCount(stored) << " items from "
              << TerminalSafe(file) << " in " << FormatDuration(seconds)
              << "\n";
  }
  return kExitOk;
}

// ---------------------------------------------------------------------------
// items hide / unhide

namespace {

int SetItemsHidden(Context& ctx, bool hidden) {
  v1::PutItemsRequest request;
  for (const std::string& arg : ctx.args().positional) {
    absl::StatusOr<std::string> id = IdArgument(arg, "ITEM");
    if (!id.ok()) return ctx.UsageError(id.status());
    if (hidden) {
      request.add_hide_item_ids(*id);
    } else {
      request.add_unhide_item_ids(*id);
    }
  }
  absl::StatusOr<v1::PutItemsResponse> response =
      ctx.client().PutItems(request);
  if (!response.ok()) return ctx.RpcError(response.status());
  if (ctx.json()) {
    Json j = Json::object();
    j[hidden ? "hidden" : "shown"] = response->stored();
    ctx.out() << DumpJson(j) << "\n";
  } else {
    ctx.out() << (hidden ? "hid " : "showed ")
              << FormatCount(response->stored()) << " items\n";
  }
  return kExitOk;
}

}  // namespace

int RunItemsHide(Context& ctx) { return SetItemsHidden(ctx, true); }
int RunItemsUnhide(Context& ctx) { return SetItemsHidden(ctx, false); }

}  // namespace rbmrec::client
