#include "client/commands.h"

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/cli.h"
#include "client/client.h"
#include "client/format.h"
#include "client/security.h"
#include "core/rating_scale.h"

namespace rbmrec::client {
namespace {

// What to do about a failure with the server's error `reason`; "" when
// there is nothing specific to say. (LIMIT_EXCEEDED is explained by the
// command, which knows the flag to change.)
std::string ReasonHint(absl::string_view reason) {
  if (reason == "STORAGE_FULL") {
    return "the server's disk (or its database's size limit) is full; free "
           "space on the server (e.g. 'rbmrec models prune'), then retry";
  }
  if (reason == "DATABASE_LOCKED") {
    return "another process holds the server's database write lock; retry "
           "in a moment";
  }
  if (reason == "MEMORY_LIMIT") {
    return "the training job would need more memory than the server allows; "
           "use fewer --hidden units or a smaller --batch-size or --ensemble";
  }
  if (reason == "MALFORMED_MESSAGE") {
    return "the server could not parse a request message; this client "
           "checks ids before sending, so please report this as a bug";
  }
  return "";
}

// Extra fields of a JSON error object.
struct ErrorDetails {
  std::string reason;   // the server's error reason; "" when none
  bool import = false;  // add committed_rows / committed_batches
  std::optional<CommittedCounts> committed;
};

// Everything a command needs.
class Context {
 public:
  Context(const ParsedArgs& args, const Environment& env, std::ostream& out,
          std::ostream& err, ClientSecurity security = {})
      : args_(args),
        env_(env),
        out_(out),
        err_(err),
        security_(std::move(security)) {}

  const ParsedArgs& args() const { return args_; }
  const Environment& env() const { return env_; }
  bool json() const { return args_.global.json; }
  std::ostream& out() { return out_; }
  std::ostream& err() { return err_; }
  TextStyle style() const {
    TextStyle s;
    s.unicode = env_.unicode;
    return s;
  }

  RbmrecClient& client() {
    if (client_ == nullptr) {
      RbmrecClient::Options options;
      options.timeout = absl::Seconds(args_.global.timeout_seconds);
      options.security = security_;
      client_ = std::make_unique<RbmrecClient>(args_.global.server, options);
    }
    return *client_;
  }

  // Prints an error (text on err; with --json also the error object on out)
  // and returns `exit_code`. `message` is printed as is in text: callers
  // pass server- or file-provided text through TerminalSafe.
  int Fail(int exit_code, absl::string_view code, absl::string_view message,
           const ErrorDetails& details = {}) {
    if (code.empty()) {
      err_ << "error: " << message << "\n";
    } else {
      err_ << "error: " << code << ": " << message << "\n";
    }
    if (json()) {
      JsonWriter w;
      w.BeginObject().Key("error").BeginObject();
      w.Key("code").String(code.empty() ? "INVALID_ARGUMENT" : code);
      w.Key("message").String(message);
      w.Key("exit_code").Int(exit_code);
      if (!details.reason.empty()) w.Key("reason").String(details.reason);
      if (details.import) {
        if (details.committed.has_value()) {
          w.Key("committed_rows").Int(details.committed->rows);
          w.Key("committed_batches").Int(details.committed->batches);
        } else {
          w.Key("committed_rows").Raw("null");
          w.Key("committed_batches").Raw("null");
        }
      }
      w.EndObject().EndObject();
      out_ << w.str() << "\n";
    }
    return exit_code;
  }
  // A bad argument or flag value: exit 1 with a pointer to the help.
  int UsageError(const absl::Status& status) {
    std::string message = TerminalSafe(status.message());
    const std::string help =
        args_.command != nullptr
            ? absl::StrCat("rbmrec ", absl::StrJoin(args_.command->path, " "),
                           " --help")
            : "rbmrec --help";
    if (!json()) message += absl::StrCat("\n(run '", help, "' for usage)");
    return Fail(kExitUsage, "", message);
  }
  // An unreadable or malformed input file: exit 1.
  int InputError(const absl::Status& status) {
    return Fail(kExitUsage, absl::StatusCodeToString(status.code()),
                TerminalSafe(status.message()));
  }
  // A failed RPC: exit 2, "error: <CODE>: <message>", then a hint for the
  // server's error reason or for the connection's TLS/token settings (if
  // any).
  int RpcError(const absl::Status& status, ErrorDetails details = {}) {
    details.reason = ErrorReasonOf(status);
    const int code = Fail(kExitRpc, absl::StatusCodeToString(status.code()),
                          TerminalSafe(status.message()), details);
    for (const std::string& hint :
         {ReasonHint(details.reason), SecurityHint(status, security_)}) {
      if (!hint.empty()) err_ << "hint: " << TerminalSafe(hint) << "\n";
    }
    return code;
  }
  // Prints a proto as the JSON output, or `text` otherwise; returns 0.
  int Print(const google::protobuf::Message& message, absl::string_view text) {
    if (json()) {
      out_ << ProtoToJson(message) << "\n";
    } else {
      out_ << text;
    }
    return kExitOk;
  }

 private:
  const ParsedArgs& args_;
  const Environment& env_;
  std::ostream& out_;
  std::ostream& err_;
  const ClientSecurity security_;
  std::unique_ptr<RbmrecClient> client_;
};

// Redraws a progress line on a terminal (at most every 100 ms), or prints
// one line every few seconds otherwise (not with --json).
class ProgressLine {
 public:
  ProgressLine(Context& ctx, std::string prefix)
      : ctx_(ctx), prefix_(std::move(prefix)), start_(absl::Now()) {}

  void Update(const std::string& text, bool force) {
    const absl::Time now = absl::Now();
    if (ctx_.env().stderr_is_tty) {
      if (!force && now - last_ < absl::Milliseconds(100)) return;
      ctx_.err() << "\r" << prefix_ << text << "\033[K";
      ctx_.err().flush();
      drawn_ = true;
    } else {
      if (ctx_.json()) return;
      if (!force && now - last_ < absl::Seconds(5)) return;
      ctx_.err() << prefix_ << text << "\n";
    }
    last_ = now;
  }
  // Ends a redrawn line with a newline.
  void Finish() {
    if (drawn_) ctx_.err() << "\n";
    drawn_ = false;
  }
  double elapsed_seconds() const {
    return absl::ToDoubleSeconds(absl::Now() - start_);
  }

 private:
  Context& ctx_;
  std::string prefix_;
  absl::Time start_;
  absl::Time last_ = absl::InfinitePast();
  bool drawn_ = false;
};

// ---------------------------------------------------------------------------
// import

absl::StatusOr<ReadOptions> GetReadOptions(const ParsedArgs& args) {
  ReadOptions options;
  absl::StatusOr<RatingFormat> format =
      ParseRatingFormat(args.Get("format", "auto"));
  if (!format.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--format: ", format.status().message()));
  }
  options.format = *format;
  options.lenient = args.Has("lenient");
  return options;
}

void PrintParseProblems(Context& ctx, const ReadResult& read) {
  if (read.skipped == 0) return;
  ctx.err() << "skipped " << FormatCount(read.skipped)
            << " malformed line(s):\n";
  for (const std::string& p : read.problems) {
    ctx.err() << "  " << TerminalSafe(p) << "\n";
  }
  if (read.skipped > static_cast<int64_t>(read.problems.size())) {
    ctx.err() << "  ... and "
              << FormatCount(read.skipped -
                             static_cast<int64_t>(read.problems.size()))
              << " more\n";
  }
}

// Why a rating file gave no rating to send, e.g. "no ratings in r.csv: it
// holds only a header (line 1)"; "" when it gave some.
std::string NoRowsReason(const std::string& file, const ReadResult& read) {
  if (!read.rows.empty()) return "";
  std::string why;
  if (read.skipped > 0) {
    why = absl::StrCat("all ", FormatCount(read.skipped),
                       " records are malformed (skipped by --lenient)");
  } else if (read.header_line > 0) {
    why = absl::StrCat("it holds only a header (line ", read.header_line, ")");
  } else {
    why = "it is empty (no line holds a rating)";
  }
  return absl::StrCat("no ratings in ", file, ": ", why);
}

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

int RunImport(Context& ctx) {
  const ParsedArgs& args = ctx.args();
  const std::string& file = args.positional[0];
  absl::StatusOr<ReadOptions> options = GetReadOptions(args);
  if (!options.ok()) return ctx.UsageError(options.status());
  absl::StatusOr<int64_t> batch = GetInt(args, "batch", 10000, 1, 10000000);
  if (!batch.ok()) return ctx.UsageError(batch.status());
  const int batch_size = static_cast<int>(*batch);

  absl::StatusOr<ReadResult> read = ReadRatingsFile(file, *options);
  if (!read.ok()) return ctx.InputError(read.status());
  PrintParseProblems(ctx, *read);
  if (read->rows.empty()) {
    return ctx.InputError(absl::InvalidArgumentError(
        absl::StrCat(NoRowsReason(file, *read), "; nothing was sent")));
  }
  if (!ctx.json()) {
    ctx.err() << "read " << FormatCount(static_cast<int64_t>(read->rows.size()))
              << " ratings from " << TerminalSafe(file) << " ("
              << RatingFormatName(read->format) << ")\n";
  }

  ProgressLine line(ctx, "import: ");
  ImportProgress last;
  absl::StatusOr<v1::AddRatingsResponse> response = ctx.client().ImportRatings(
      read->rows, batch_size, [&](const ImportProgress& p) {
        last = p;
        line.Update(FormatImportProgress(p), p.done_sending);
      });
  line.Finish();
  const double seconds = line.elapsed_seconds();
  const int64_t rows_sent = static_cast<int64_t>(read->rows.size());
  const int64_t batches_expected = (rows_sent + batch_size - 1) / batch_size;
  // The file line of the last row of the first `batches` batches.
  auto last_line_of = [&](int64_t batches) -> int64_t {
    const int64_t rows = std::min(rows_sent, batches * batch_size);
    return rows > 0 ? read->rows[static_cast<size_t>(rows - 1)].line : 0;
  };
  auto safe_to_rerun = [&]() {
    ctx.err() << "re-running the same import is safe: ratings are upserted "
                 "by (user, item), so rows already stored are written again "
                 "with the same values\n";
  };

  if (!response.ok()) {
    const std::optional<CommittedCounts> committed =
        CommittedOf(response.status());
    const std::string reason = ErrorReasonOf(response.status());
    const int code =
        ctx.RpcError(response.status(), {std::string(), true, committed});
    if (reason == "LIMIT_EXCEEDED") {
      ctx.err() << "hint: this import sent batches of " << batch_size
                << " rows; use --batch with the server's limit (in the "
                   "error above) or less\n";
    }
    int64_t bytes = 0;
    int64_t limit = 0;
    if (MessageTooLarge(response.status(), &bytes, &limit)) {
      // The rows of the batch that failed: the first one not committed
      // (batches are committed in order), else a full one.
      int64_t rows = batch_size;
      if (committed.has_value()) {
        const int64_t left = rows_sent - committed->batches * batch_size;
        if (left > 0) rows = std::min<int64_t>(rows, left);
      }
      // Rows per batch that fit, with a tenth to spare for longer rows.
      const int64_t fit = static_cast<int64_t>(0.9 * static_cast<double>(rows) *
                                               static_cast<double>(limit) /
                                               static_cast<double>(bytes));
      ctx.err() << "hint: a batch of " << FormatCount(rows) << " rows was "
                << FormatBytes(bytes) << ", over the server's limit of "
                << FormatBytes(limit)
                << " per message (its --max-message-mb); ";
      if (fit >= 1) {
        ctx.err() << "lower --batch from " << batch_size << " to " << fit
                  << " or less\n";
      } else {
        ctx.err() << "even one row is too large: raise the server's "
                     "--max-message-mb\n";
      }
    }
    if (committed.has_value()) {
      ctx.err() << "committed: " << FormatCount(committed->rows)
                << " rows in the first " << FormatCount(committed->batches)
                << " of " << FormatCount(last.batches_sent)
                << " batches sent are certainly stored";
      if (committed->batches > 0) {
        ctx.err() << " (" << TerminalSafe(file) << " up to line "
                  << last_line_of(committed->batches) << ")";
      }
      ctx.err() << "; later rows are not\n";
    } else if (last.rows_sent == 0) {
      ctx.err() << "committed: nothing (no batch was sent)\n";
    } else {
      ctx.err() << "committed: unknown (the server did not say; the "
                   "connection may have been lost): 0 rows are certainly "
                   "stored, up to "
                << FormatCount(last.rows_sent) << " sent rows may be\n";
    }
    safe_to_rerun();
    return code;
  }
  const double rate =
      seconds > 0 ? static_cast<double>(read->rows.size()) / seconds : 0;
  const int64_t counted = response->accepted() + response->rejected();

  if (ctx.json()) {
    JsonWriter w;
    w.BeginObject();
    w.Key("file").String(file);
    w.Key("format").String(std::string(RatingFormatName(read->format)));
    w.Key("rows_read").Int(rows_sent);
    w.Key("lines_skipped").Int(read->skipped);
    w.Key("parse_problems").BeginArray();
    for (const std::string& p : read->problems) w.String(p);
    w.EndArray();
    w.Key("rows_sent").Int(rows_sent);
    w.Key("accepted").Int(response->accepted());
    w.Key("rejected").Int(response->rejected());
    w.Key("replaced").Int(response->replaced());
    w.Key("batches").Int(response->batches());
    w.Key("rejected_rows").BeginArray();
    for (const v1::RejectedRow& r : response->rejected_rows()) {
      w.BeginObject();
      w.Key("line").Int(SourceLine(read->rows, batch_size, r.batch(), r.row()));
      w.Key("batch").Int(r.batch());
      w.Key("row").Int(r.row());
      w.Key("user_id").String(r.user_id());
      w.Key("item_id").String(r.item_id());
      w.Key("reason").String(r.reason());
      w.EndObject();
    }
    w.EndArray();
    w.Key("seconds").Double(seconds);
    w.Key("rows_per_second").Double(rate);
    w.EndObject();
    if (counted == rows_sent && response->batches() == batches_expected) {
      ctx.out() << w.str() << "\n";
    }
  } else {
    ctx.out() << "accepted " << FormatCount(response->accepted())
              << ", rejected " << FormatCount(response->rejected())
              << ", replaced " << FormatCount(response->replaced()) << " in "
              << FormatCount(response->batches()) << " batches, "
              << FormatDuration(seconds) << " ("
              << FormatCount(std::llround(rate)) << " rows/s)\n";
    if (response->rejected() > 0) {
      ctx.out() << "rejected rows:\n";
      for (const v1::RejectedRow& r : response->rejected_rows()) {
        const int64_t source =
            SourceLine(read->rows, batch_size, r.batch(), r.row());
        ctx.out() << "  " << TerminalSafe(file) << ":" << source << ": user '"
                  << TerminalSafe(r.user_id()) << "' item '"
                  << TerminalSafe(r.item_id())
                  << "': " << TerminalSafe(r.reason()) << "\n";
      }
      const int64_t more =
          response->rejected() - response->rejected_rows_size();
      if (more > 0) ctx.out() << "  ... and " << FormatCount(more) << " more\n";
    }
  }

  // Every row sent must be counted, in as many batches as were sent; a
  // server that stopped reading early (and still answered OK) is caught
  // here.
  if (counted != rows_sent || response->batches() != batches_expected) {
    const int code = ctx.Fail(
        kExitRpc, "DATA_LOSS",
        absl::StrCat("the server counted ", FormatCount(counted), " rows (",
                     FormatCount(response->accepted()), " accepted + ",
                     FormatCount(response->rejected()), " rejected) in ",
                     FormatCount(response->batches()),
                     " batches, but this "
                     "import sent ",
                     FormatCount(rows_sent), " rows in ",
                     FormatCount(batches_expected),
                     " batches: ", FormatCount(rows_sent - counted),
                     " rows are unaccounted for and may not be stored"),
        {std::string(), true,
         CommittedCounts{response->batches(), response->accepted()}});
    ctx.err() << "committed: " << FormatCount(response->accepted())
              << " rows in the first " << FormatCount(response->batches())
              << " batches are certainly stored";
    if (response->batches() > 0) {
      ctx.err() << " (" << TerminalSafe(file) << " up to line "
                << last_line_of(response->batches()) << ")";
    }
    ctx.err() << "\n";
    safe_to_rerun();
    return code;
  }
  if (response->rejected() > 0 && !args.Has("allow-rejected")) {
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
    JsonWriter w;
    w.BeginObject();
    w.Key("file").String(file);
    w.Key("items_read").Int(static_cast<int64_t>(items->size()));
    w.Key("stored").Int(stored);
    w.Key("seconds").Double(seconds);
    w.EndObject();
    ctx.out() << w.str() << "\n";
  } else {
    ctx.out() << "stored " << FormatCount(stored) << " items from "
              << TerminalSafe(file) << " in " << FormatDuration(seconds)
              << "\n";
  }
  return kExitOk;
}

// ---------------------------------------------------------------------------
// train

std::atomic<bool> g_interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free);

extern "C" void OnInterrupt(int) { g_interrupted.store(true); }

// Installs the SIGINT handler for the lifetime of the object. SA_RESETHAND:
// a second Ctrl-C terminates the process as usual.
class InterruptGuard {
 public:
  explicit InterruptGuard(bool enabled) : enabled_(enabled) {
    g_interrupted.store(false);
    if (!enabled_) return;
    struct sigaction action {};
    action.sa_handler = OnInterrupt;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESETHAND;
    sigaction(SIGINT, &action, &previous_);
  }
  ~InterruptGuard() {
    if (enabled_) sigaction(SIGINT, &previous_, nullptr);
  }
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

 private:
  bool enabled_;
  struct sigaction previous_ {};
};

int RunTrain(Context& ctx) {
  absl::StatusOr<v1::TrainRequest> request = BuildTrainRequest(ctx.args());
  if (!request.ok()) return ctx.UsageError(request.status());

  // The table goes to stdout, or to a terminal's stderr with --json.
  const bool json = ctx.json();
  const bool table = !json || ctx.env().stderr_is_tty;
  std::ostream& table_out = json ? ctx.err() : ctx.out();
  const bool live = ctx.env().stderr_is_tty;

  std::mutex mu;  // guards the streams and the fields below
  bool header_printed = false;
  bool status_drawn = false;
  v1::TrainProgress latest;
  absl::Time latest_at = absl::Now();
  std::vector<v1::TrainProgress> history;

  auto clear_status = [&]() {  // REQUIRES mu held
    if (status_drawn) {
      ctx.err() << "\r\033[K";
      ctx.err().flush();
      status_drawn = false;
    }
  };

  RbmrecClient& client = ctx.client();  // created before the watcher thread
  InterruptGuard guard(ctx.env().handle_signals);
  std::atomic<bool> done{false};
  std::thread watcher([&]() {
    bool cancel_sent = false;
    while (!done.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (g_interrupted.load() && !cancel_sent) {
        cancel_sent = true;
        {
          std::lock_guard<std::mutex> lock(mu);
          clear_status();
          ctx.err() << "cancelling the training job (Ctrl-C again to quit "
                       "without waiting)\n";
        }
        absl::StatusOr<v1::CancelTrainingResponse> r = client.CancelTraining();
        std::lock_guard<std::mutex> lock(mu);
        if (!r.ok()) {
          ctx.err() << "error: " << TerminalSafe(r.status().message()) << "\n";
        }
      }
      if (!live) continue;
      std::lock_guard<std::mutex> lock(mu);
      if (latest.state() != v1::TrainProgress::QUEUED &&
          latest.state() != v1::TrainProgress::RUNNING) {
        continue;
      }
      const double elapsed = latest.elapsed_seconds() +
                             absl::ToDoubleSeconds(absl::Now() - latest_at);
      ctx.err() << "\r"
                << (latest.state() == v1::TrainProgress::QUEUED
                        ? std::string("preparing")
                        : absl::StrCat("epoch ", latest.epoch() + 1, "/",
                                       latest.max_epochs()))
                << "  elapsed " << FormatDuration(elapsed) << "\033[K";
      ctx.err().flush();
      status_drawn = true;
    }
  });

  absl::StatusOr<v1::TrainProgress> last =
      client.Train(*request, [&](const v1::TrainProgress& p) {
        std::lock_guard<std::mutex> lock(mu);
        latest = p;
        latest_at = absl::Now();
        if (json) history.push_back(p);
        // One row per RUNNING message after an epoch. (Epoch numbers restart
        // for each member of an ensemble; terminal messages repeat the last
        // epoch.)
        const bool new_epoch =
            p.state() == v1::TrainProgress::RUNNING && p.epoch() > 0;
        if (!table || !new_epoch) return;
        clear_status();
        if (!header_printed) {
          table_out << EpochTableHeader();
          header_printed = true;
        }
        table_out << FormatEpochRow(p);
        table_out.flush();
      });
  done.store(true);
  watcher.join();
  {
    std::lock_guard<std::mutex> lock(mu);
    clear_status();
  }
  if (!last.ok()) return ctx.RpcError(last.status());

  const bool succeeded = last->state() == v1::TrainProgress::SUCCEEDED;
  if (json) {
    JsonWriter w;
    w.BeginObject();
    w.Key("result").Raw(ProtoToJson(*last));
    w.Key("progress").BeginArray();
    for (const auto& p : history) w.Raw(ProtoToJson(p));
    w.EndArray();
    w.EndObject();
    ctx.out() << w.str() << "\n";
  } else {
    ctx.out() << FormatTrainResult(*last);
  }
  if (!succeeded) {
    ctx.err() << "error: training " << TrainStateName(last->state());
    if (!last->message().empty()) {
      ctx.err() << ": " << TerminalSafe(last->message());
    }
    ctx.err() << "\n";
    return kExitRpc;
  }
  return kExitOk;
}

// ---------------------------------------------------------------------------
// predict, recommend

int RunPredict(Context& ctx) {
  absl::StatusOr<v1::PredictRatingsRequest> request =
      BuildPredictRequest(ctx.args());
  if (!request.ok()) return ctx.UsageError(request.status());
  absl::StatusOr<v1::PredictRatingsResponse> response =
      ctx.client().PredictRatings(*request);
  if (!response.ok()) return ctx.RpcError(response.status());
  return ctx.Print(*response, ctx.json() ? std::string()
                                         : FormatPredictions(
                                               *response, request->user_id(),
                                               request->method(), ctx.style()));
}

int RunRecommend(Context& ctx) {
  absl::StatusOr<v1::RecommendRequest> request =
      BuildRecommendRequest(ctx.args());
  if (!request.ok()) return ctx.UsageError(request.status());
  absl::StatusOr<v1::RecommendResponse> response =
      ctx.client().Recommend(*request);
  if (!response.ok()) return ctx.RpcError(response.status());
  return ctx.Print(
      *response, ctx.json()
                     ? std::string()
                     : FormatRecommendations(*response, *request, ctx.style()));
}

// ---------------------------------------------------------------------------
// evaluate

// The N of a LIMIT_EXCEEDED message ("... over the server's limit of N
// (--flag)"); 0 when it names none.
int64_t LimitInMessage(absl::string_view message) {
  constexpr absl::string_view kMarker = "over the server's limit of ";
  const size_t at = message.find(kMarker);
  if (at == absl::string_view::npos) return 0;
  const absl::string_view rest = message.substr(at + kMarker.size());
  size_t digits = 0;
  while (digits < rest.size() && absl::ascii_isdigit(rest[digits])) ++digits;
  int64_t limit = 0;
  if (!absl::SimpleAtoi(rest.substr(0, digits), &limit)) return 0;
  return limit;
}

bool IsLimitExceeded(const absl::Status& status) {
  return status.code() == absl::StatusCode::kResourceExhausted &&
         ErrorReasonOf(status) == "LIMIT_EXCEEDED";
}

int RunEvaluate(Context& ctx) {
  const ParsedArgs& args = ctx.args();
  const std::string& file = args.positional[0];
  absl::StatusOr<ReadOptions> options = GetReadOptions(args);
  if (!options.ok()) return ctx.UsageError(options.status());
  absl::StatusOr<int64_t> batch = GetInt(args, "batch", 1000, 1, 1000000);
  if (!batch.ok()) return ctx.UsageError(batch.status());
  v1::Method method = v1::METHOD_UNSPECIFIED;
  if (args.Has("method")) {
    absl::StatusOr<v1::Method> m = ParseMethod(args.Get("method", ""));
    if (!m.ok()) return ctx.UsageError(m.status());
    method = *m;
  }
  absl::StatusOr<int64_t> model =
      GetInt(args, "model", 0, 1, std::numeric_limits<int64_t>::max());
  if (!model.ok()) return ctx.UsageError(model.status());

  absl::StatusOr<ReadResult> read = ReadRatingsFile(file, *options);
  if (!read.ok()) return ctx.InputError(read.status());
  PrintParseProblems(ctx, *read);
  if (read->rows.empty()) {
    return ctx.InputError(absl::InvalidArgumentError(
        absl::StrCat(NoRowsReason(file, *read), "; nothing to evaluate")));
  }
  const std::vector<UserGroup> groups = GroupByUser(read->rows);

  EvalMetrics metrics;
  metrics.users = static_cast<int64_t>(groups.size());
  // Pin the version that answered first, so that a model published during
  // the evaluation (e.g. by online updates) does not mix in.
  int64_t version = *model;
  int64_t skipped_users = 0;
  // The first rating off the server's rating scale, and that scale.
  const RawRating* first_off_scale = nullptr;
  std::string off_scale_text;
  ProgressLine line(ctx, "evaluate: ");
  size_t step = static_cast<size_t>(*batch);
  const int64_t total = static_cast<int64_t>(read->rows.size());
  for (const UserGroup& group : groups) {
    size_t begin = 0;
    while (begin < group.rows.size()) {
      const size_t end = std::min(group.rows.size(), begin + step);
      v1::PredictRatingsRequest request;
      request.set_user_id(group.user);
      request.set_method(method);
      request.set_model_version(version);
      for (size_t i = begin; i < end; ++i) {
        request.add_item_ids(read->rows[group.rows[i]].item);
      }
      absl::StatusOr<v1::PredictRatingsResponse> response =
          ctx.client().PredictRatings(request);
      bool user_fallback = false;
      if (!response.ok() &&
          response.status().code() == absl::StatusCode::kNotFound) {
        // A user without stored ratings: predict as an anonymous user with
        // no ratings (the model's prior), counted as fallback.
        request.clear_user_id();
        response = ctx.client().PredictRatings(request);
        user_fallback = true;
        if (!response.ok() &&
            response.status().code() == absl::StatusCode::kInvalidArgument) {
          // The server predicts nothing for an anonymous user without
          // ratings: these ratings cannot be scored; say so below.
          metrics.n_skipped += static_cast<int64_t>(group.rows.size() - begin);
          ++skipped_users;
          break;
        }
      }
      if (!response.ok() && IsLimitExceeded(response.status()) &&
          end - begin > 1) {
        // The server takes fewer items per request (its
        // --max-predict-items): go on with requests it takes.
        const int64_t limit = LimitInMessage(response.status().message());
        step = limit >= 1 && static_cast<size_t>(limit) < end - begin
                   ? static_cast<size_t>(limit)
                   : (end - begin) / 2;
        line.Finish();
        ctx.err() << "note: " << TerminalSafe(response.status().message())
                  << "; going on with " << step
                  << " items per request (--batch " << step
                  << " avoids this retry)\n";
        continue;  // the same items again, in smaller requests
      }
      if (!response.ok()) {
        line.Finish();
        return ctx.RpcError(response.status());
      }
      if (response->predictions_size() != static_cast<int>(end - begin)) {
        line.Finish();
        return ctx.RpcError(absl::InternalError(absl::StrCat(
            "rpc PredictRatings: asked for ", end - begin, " items, got ",
            response->predictions_size(), " predictions")));
      }
      if (version == 0) version = response->model_version();
      // A rating off the server's scale cannot be compared with a
      // prediction on it: skipped and counted, not scored.
      const absl::StatusOr<RatingScale> scale =
          RatingScale::Create(response->scale().min(), response->scale().max(),
                              response->scale().step());
      for (size_t i = begin; i < end; ++i) {
        const RawRating& row = read->rows[group.rows[i]];
        if (scale.ok() && !scale->Index(row.rating).ok()) {
          ++metrics.n_skipped;
          ++metrics.n_off_scale;
          if (first_off_scale == nullptr) {
            first_off_scale = &row;
            off_scale_text = scale->ToString();
          }
          continue;
        }
        const v1::ItemPrediction& p =
            response->predictions(static_cast<int>(i - begin));
        metrics.Add(p.expected_rating(), row.rating,
                    user_fallback || p.fallback());
      }
      begin = end;
    }
    line.Update(absl::StrCat(FormatCount(metrics.n), "/", FormatCount(total),
                             " ratings"),
                metrics.n + metrics.n_skipped == total);
  }
  line.Finish();
  metrics.model_version = version;
  const int64_t skipped_no_ratings = metrics.n_skipped - metrics.n_off_scale;
  std::vector<std::string> reasons;
  if (skipped_no_ratings > 0) {
    reasons.push_back(absl::StrCat(
        FormatCount(skipped_no_ratings), " ratings of ",
        FormatCount(skipped_users),
        " users with no stored ratings (the server does not predict for a "
        "user without ratings)"));
  }
  if (metrics.n_off_scale > 0) {
    reasons.push_back(absl::StrCat(FormatCount(metrics.n_off_scale),
                                   " ratings off the server's rating scale ",
                                   off_scale_text, " (the first: ", file, ":",
                                   first_off_scale->line, ": rating ",
                                   FormatRating(first_off_scale->rating), ")"));
  }
  if (metrics.n == 0) {
    std::string message = absl::StrCat(
        "no rating of ", file, " could be evaluated: all ", FormatCount(total),
        " were skipped: ", absl::StrJoin(reasons, "; "));
    if (read->skipped > 0) {
      absl::StrAppend(&message, "; and ", FormatCount(read->skipped),
                      " malformed lines were skipped (--lenient)");
    }
    return ctx.Fail(kExitRpc, "FAILED_PRECONDITION", TerminalSafe(message));
  }
  for (const std::string& reason : reasons) {
    ctx.err() << "warning: skipped " << TerminalSafe(reason)
              << "; RMSE and MAE exclude them\n";
  }

  if (ctx.json()) {
    JsonWriter w;
    w.BeginObject();
    w.Key("file").String(file);
    w.Key("rmse").Double(metrics.rmse());
    w.Key("mae").Double(metrics.mae());
    w.Key("n").Int(metrics.n);
    w.Key("n_fallback").Int(metrics.n_fallback);
    w.Key("n_skipped").Int(metrics.n_skipped);
    w.Key("n_skipped_no_ratings").Int(skipped_no_ratings);
    w.Key("n_skipped_off_scale").Int(metrics.n_off_scale);
    w.Key("users").Int(metrics.users);
    w.Key("model_version").Int(metrics.model_version);
    w.Key("method").String(method == v1::MEAN_FIELD ? "MEAN_FIELD" : "EXACT");
    w.Key("lines_skipped").Int(read->skipped);
    w.Key("seconds").Double(line.elapsed_seconds());
    w.EndObject();
    ctx.out() << w.str() << "\n";
  } else {
    ctx.out() << FormatEvalMetrics(metrics);
  }
  return kExitOk;
}

// ---------------------------------------------------------------------------
// models, stats, health, deletions

int RunModels(Context& ctx) {
  v1::ListModelsRequest request;
  request.set_verify(ctx.args().Has("verify"));
  absl::StatusOr<v1::ListModelsResponse> response =
      ctx.client().ListModels(request);
  if (!response.ok()) return ctx.RpcError(response.status());
  return ctx.Print(*response,
                   ctx.json() ? std::string() : FormatModels(*response));
}

// The VERSION argument of the `models` subcommands: an integer >= 1.
absl::StatusOr<int64_t> VersionArgument(const Context& ctx) {
  absl::StatusOr<int64_t> version =
      ParseInt(ctx.args().positional[0], "VERSION");
  if (version.ok() && *version < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("VERSION: must be >= 1, got ", ctx.args().positional[0]));
  }
  return version;
}

int RunModelsActivate(Context& ctx) {
  absl::StatusOr<int64_t> version = VersionArgument(ctx);
  if (!version.ok()) return ctx.UsageError(version.status());
  absl::StatusOr<v1::ModelInfo> info = ctx.client().ActivateModel(*version);
  if (!info.ok()) return ctx.RpcError(info.status());
  return ctx.Print(
      *info, ctx.json() ? std::string()
                        : absl::StrCat("activated ", FormatModelInfo(*info)));
}

int RunModelsDelete(Context& ctx) {
  absl::StatusOr<int64_t> version = VersionArgument(ctx);
  if (!version.ok()) return ctx.UsageError(version.status());
  v1::DeleteModelRequest request;
  request.set_version(*version);
  request.set_force(ctx.args().Has("force"));
  absl::StatusOr<v1::DeleteModelResponse> response =
      ctx.client().DeleteModel(request);
  if (!response.ok()) return ctx.RpcError(response.status());
  return ctx.Print(*response,
                   absl::StrCat("deleted model v", *version, " (freed ",
                                FormatBytes(response->freed_bytes()), ")\n"));
}

int RunModelsPin(Context& ctx, bool pinned) {
  absl::StatusOr<int64_t> version = VersionArgument(ctx);
  if (!version.ok()) return ctx.UsageError(version.status());
  absl::StatusOr<v1::ModelInfo> info = ctx.client().PinModel(*version, pinned);
  if (!info.ok()) return ctx.RpcError(info.status());
  return ctx.Print(*info, absl::StrCat(pinned ? "pinned " : "unpinned ",
                                       FormatModelInfo(*info)));
}

int RunModelsPinTrue(Context& ctx) { return RunModelsPin(ctx, true); }
int RunModelsPinFalse(Context& ctx) { return RunModelsPin(ctx, false); }

int RunModelsPrune(Context& ctx) {
  v1::PruneModelsRequest request;
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  if (ctx.args().Has("keep-full")) {
    absl::StatusOr<int64_t> n = GetInt(ctx.args(), "keep-full", 0, 0, kMax);
    if (!n.ok()) return ctx.UsageError(n.status());
    request.set_keep_full(static_cast<int32_t>(*n));
  }
  if (ctx.args().Has("keep-online")) {
    absl::StatusOr<int64_t> n = GetInt(ctx.args(), "keep-online", 0, 0, kMax);
    if (!n.ok()) return ctx.UsageError(n.status());
    request.set_keep_online(static_cast<int32_t>(*n));
  }
  absl::StatusOr<v1::PruneModelsResponse> response =
      ctx.client().PruneModels(request);
  if (!response.ok()) return ctx.RpcError(response.status());
  std::string text;
  if (response->deleted_versions().empty()) {
    text = "nothing to prune: every stored version is kept\n";
  } else {
    std::vector<std::string> versions;
    for (int64_t v : response->deleted_versions()) {
      versions.push_back(absl::StrCat("v", v));
    }
    text =
        absl::StrCat("deleted ", response->deleted_versions_size(),
                     " model versions (", absl::StrJoin(versions, ", "),
                     "), freed ", FormatBytes(response->freed_bytes()), "\n");
  }
  return ctx.Print(*response, text);
}

int RunStats(Context& ctx) {
  absl::StatusOr<v1::GetStatsResponse> response = ctx.client().GetStats();
  if (!response.ok()) return ctx.RpcError(response.status());
  return ctx.Print(*response,
                   ctx.json() ? std::string() : FormatStats(*response));
}

int RunHealth(Context& ctx) {
  const std::string service =
      ctx.args().positional.empty() ? "" : ctx.args().positional[0];
  absl::StatusOr<grpc::health::v1::HealthCheckResponse> response =
      ctx.client().Health(service);
  if (!response.ok()) return ctx.RpcError(response.status());
  const std::string status =
      grpc::health::v1::HealthCheckResponse::ServingStatus_Name(
          response->status());
  ctx.Print(*response, absl::StrCat(status, "\n"));
  if (response->status() != grpc::health::v1::HealthCheckResponse::SERVING) {
    ctx.err() << "error: the server reports " << status << "\n";
    return kExitRpc;
  }
  return kExitOk;
}

// A deletion answered NOT_FOUND: the user has no stored ratings.
int UserNotFound(Context& ctx, const std::string& user) {
  return ctx.Fail(kExitRpc, "NOT_FOUND",
                  absl::StrCat("user '", TerminalSafe(user),
                               "' not found (no stored ratings); nothing was "
                               "deleted"));
}

int RunDeleteUser(Context& ctx) {
  v1::DeleteUserRequest request;
  absl::StatusOr<std::string> user =
      IdArgument(ctx.args().positional[0], "USER");
  if (!user.ok()) return ctx.UsageError(user.status());
  request.set_user_id(*user);
  absl::StatusOr<v1::DeleteUserResponse> response =
      ctx.client().DeleteUser(request);
  if (!response.ok() &&
      response.status().code() == absl::StatusCode::kNotFound) {
    return UserNotFound(ctx, request.user_id());
  }
  if (!response.ok()) return ctx.RpcError(response.status());
  return ctx.Print(*response, FormatDeleteUser(request.user_id(), *response));
}

int RunDeleteRatings(Context& ctx) {
  v1::DeleteRatingsRequest request;
  absl::StatusOr<std::string> user =
      IdArgument(ctx.args().positional[0], "USER");
  if (!user.ok()) return ctx.UsageError(user.status());
  request.set_user_id(*user);
  for (size_t i = 1; i < ctx.args().positional.size(); ++i) {
    absl::StatusOr<std::string> item =
        IdArgument(ctx.args().positional[i], "ITEM");
    if (!item.ok()) return ctx.UsageError(item.status());
    request.add_item_ids(*item);
  }
  absl::StatusOr<v1::DeleteRatingsResponse> response =
      ctx.client().DeleteRatings(request);
  if (!response.ok() &&
      response.status().code() == absl::StatusCode::kNotFound) {
    return UserNotFound(ctx, request.user_id());
  }
  if (!response.ok()) return ctx.RpcError(response.status());
  return ctx.Print(
      *response,
      absl::StrCat("deleted ", FormatCount(response->deleted()),
                   " ratings of user ", TerminalSafe(request.user_id()), "\n"));
}

using Runner = int (*)(Context&);

Runner FindRunner(const std::vector<std::string>& path) {
  static const auto* const kRunners =
      new std::vector<std::pair<std::vector<std::string>, Runner>>{
          {{"import"}, RunImport},
          {{"items", "import"}, RunItemsImport},
          {{"train"}, RunTrain},
          {{"predict"}, RunPredict},
          {{"recommend"}, RunRecommend},
          {{"evaluate"}, RunEvaluate},
          {{"models"}, RunModels},
          {{"models", "activate"}, RunModelsActivate},
          {{"models", "delete"}, RunModelsDelete},
          {{"models", "pin"}, RunModelsPinTrue},
          {{"models", "unpin"}, RunModelsPinFalse},
          {{"models", "prune"}, RunModelsPrune},
          {{"stats"}, RunStats},
          {{"health"}, RunHealth},
          {{"delete-user"}, RunDeleteUser},
          {{"delete-ratings"}, RunDeleteRatings},
      };
  for (const auto& [p, runner] : *kRunners) {
    if (p == path) return runner;
  }
  return nullptr;
}

}  // namespace

int64_t SourceLine(const std::vector<RawRating>& rows, int batch_size,
                   int64_t batch, int32_t row) {
  if (batch < 0 || row < 0 || row >= batch_size) return 0;
  const int64_t index = batch * batch_size + row;
  if (index >= static_cast<int64_t>(rows.size())) return 0;
  return rows[static_cast<size_t>(index)].line;
}

std::vector<UserGroup> GroupByUser(const std::vector<RawRating>& rows) {
  std::vector<UserGroup> groups;
  absl::flat_hash_map<std::string, size_t> index;
  for (size_t i = 0; i < rows.size(); ++i) {
    auto [it, inserted] = index.try_emplace(rows[i].user, groups.size());
    if (inserted) groups.push_back(UserGroup{rows[i].user, {}});
    groups[it->second].rows.push_back(i);
  }
  return groups;
}

int RunCli(const std::vector<std::string>& args, const Environment& env,
           std::ostream& out, std::ostream& err) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args, env.server_env);
  if (!parsed.ok()) {
    // Parse failed: --json may not be known; look for it by hand.
    ParsedArgs fallback;
    fallback.command = GuessCommand(args);
    fallback.global.json =
        std::find(args.begin(), args.end(), "--json") != args.end();
    Context ctx(fallback, env, out, err);
    return ctx.UsageError(parsed.status());
  }
  if (parsed->help) {
    out << HelpText(*parsed);
    return kExitOk;
  }
  absl::StatusOr<ClientSecurity> security =
      LoadSecurity(parsed->global.security, env.security_env);
  if (!security.ok()) {
    Context ctx(*parsed, env, out, err);
    return ctx.InputError(security.status());
  }
  const std::string warning =
      TokenOverPlaintextWarning(parsed->global.server, *security);
  if (!warning.empty()) err << TerminalSafe(warning) << "\n";
  Context ctx(*parsed, env, out, err, *std::move(security));
  Runner runner = FindRunner(parsed->command->path);
  if (runner == nullptr) {
    return ctx.UsageError(absl::InvalidArgumentError(
        absl::StrCat("command '", absl::StrJoin(parsed->command->path, " "),
                     "' is not implemented")));
  }
  return runner(ctx);
}

}  // namespace rbmrec::client
