// The shared parts of the command runners (client/command_context.h).

#include "client/command_context.h"

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/readers.h"

namespace rbmrec::client {

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

// ---------------------------------------------------------------------------
// Rating files

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

}  // namespace rbmrec::client
