#ifndef RBMREC_CLIENT_BULK_FILE_H_
#define RBMREC_CLIENT_BULK_FILE_H_

// The output file of `rbmrec recommend --all-users --out FILE`: the text of
// each RecommendAll message (CSV rows or JSON lines, whole lines only) and
// where to resume in a file a run left behind. Pure functions (no I/O), so
// they are unit-tested; the command (commands_bulk.cc) does the writing.
//
// CSV: a header, then one row per (user, recommended item):
//   user_id,rank,item_id,title,expected_rating,probability_at_least,
//   probability_rated,fallback,model_version
// (fields quoted as RFC 4180 when they hold a comma, quote or line break;
// fallback is the Fallback name without its prefix: "NONE", "POPULAR" or
// "EMPTY_USER"). A user without recommendations has no row.
// JSONL: one line per user, the UserRecommendations message as ProtoToJson
// prints it ({"user_id":..., "response":{...}}).

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/rbmrec.pb.h"

namespace rbmrec::client {

namespace v1 = ::rbmrec::v1;

enum class BulkFormat { kCsv, kJsonl };

// "csv" or "jsonl" (also "json", "ndjson"); "" picks from the file name
// (.jsonl/.json/.ndjson: JSONL, else CSV). InvalidArgument otherwise.
absl::StatusOr<BulkFormat> ParseBulkFormat(absl::string_view name,
                                           absl::string_view path);

// The CSV header line (with its newline).
std::string BulkCsvHeader();

// The lines of one message, each ending in '\n'.
std::string FormatBulkMessage(const v1::RecommendAllResponse& message,
                              BulkFormat format);

// Where a run left `contents` (a file's bytes): keep its first `keep_bytes`
// (whole lines of users known to be complete; a torn last line is dropped,
// and in CSV the last user's rows too, since a torn write may have cut
// them) and continue after `last_user` ("" = from the first user;
// `has_header` false when the CSV header must be written again).
// InvalidArgument when a kept line does not parse (not a file of this
// format).
struct ResumePoint {
  size_t keep_bytes = 0;
  std::string last_user;
  bool has_header = false;
};
absl::StatusOr<ResumePoint> FindResumePoint(absl::string_view contents,
                                            BulkFormat format);

}  // namespace rbmrec::client

#endif  // RBMREC_CLIENT_BULK_FILE_H_
