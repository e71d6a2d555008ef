#ifndef RBMREC_CLIENT_FORMAT_H_
#define RBMREC_CLIENT_FORMAT_H_

// Output formatting of the rbmrec CLI: human-readable text (tables, bar
// charts, durations) and JSON. Pure functions of their arguments (no I/O, no
// clock, UTC for times), so they are unit-testable. Text output passes every
// id, title and server-provided string through TerminalSafe.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "client/client.h"
#include "google/protobuf/message.h"
#include "nlohmann/json.hpp"
#include "proto/health.pb.h"
#include "proto/rbmrec.pb.h"

namespace rbmrec::client {

// How text output may draw.
struct TextStyle {
  // Unicode block characters for bars and "…" for truncation; when false,
  // plain ASCII ('#' bars, "...").
  bool unicode = true;
  // Width of a full (probability 1) bar, in columns.
  int bar_width = 40;
  // Longest title shown in tables, in columns (longer ones are truncated).
  int max_title_width = 48;
};

// ---------------------------------------------------------------------------
// Numbers and strings

// 1234567 -> "1,234,567"; -1200 -> "-1,200".
std::string FormatCount(int64_t n);
// Seconds as "0.4s" (< 10 s, one decimal), "42s", "2m05s", "1h02m"; "-" for
// negative or non-finite values.
std::string FormatDuration(double seconds);
// A rating value with no needless digits: 4 -> "4", 3.5 -> "3.5",
// 0.25 -> "0.25" (at most 3 decimals).
std::string FormatRating(double value);
// A size in bytes: "512 B", "1.5 KiB", "12.3 MiB", "1.1 GiB".
std::string FormatBytes(int64_t bytes);
// Unix milliseconds as "2024-05-01 12:03:44 UTC"; "-" for <= 0.
std::string FormatTimestampMs(int64_t unix_ms);
// The width of `s` on a terminal, counted as UTF-8 code points (no
// double-width handling).
size_t DisplayWidth(absl::string_view s);
// `s` cut to at most `width` columns at a code point boundary, ending with
// "…" (unicode) or "..." when cut.
std::string Truncate(absl::string_view s, size_t width, bool unicode);
// `s` made safe to print on a terminal: control characters (U+0000..U+001F,
// U+007F) and every byte that is not part of valid UTF-8 become "\xNN";
// C1 controls (U+0080..U+009F) and bidirectional overrides (U+202A..U+202E,
// U+2066..U+2069) become "\uNNNN"; a backslash becomes "\\" so the
// output is unambiguous. Everything else is kept. Every id, title and
// server-provided text the CLI prints in text output goes through this.
std::string TerminalSafe(absl::string_view s);

// ---------------------------------------------------------------------------
// Bars and tables

// A horizontal bar exactly `width` columns wide (padded with spaces), filled
// to `fraction` (clamped to [0, 1]; NaN counts as 0). Unicode bars have
// 1/8-column resolution; ASCII bars use '#' rounded to whole columns.
std::string RenderBar(double fraction, int width, bool unicode);

enum class Align { kLeft, kRight };

// A text table: a header line, then one line per row. Columns are separated
// by two spaces and sized to their widest cell; trailing spaces are trimmed.
// Rows may have fewer cells than the header (missing cells are empty);
// `align` may be shorter than the header (missing entries are kLeft).
struct Table {
  std::vector<std::string> header;
  std::vector<Align> align;
  std::vector<std::vector<std::string>> rows;
};
std::string FormatTable(const Table& table);

// ---------------------------------------------------------------------------
// Command outputs (text)

// One item's predicted distribution: a title line with the expectation, then
// one line per rating value with its bar and probability, e.g.
//   50  Star Wars (1977)  expected 4.36
//      1  ▍                      1.2%
//    ...
std::string FormatDistribution(const v1::RatingScale& scale,
                               const v1::ItemPrediction& prediction,
                               const TextStyle& style);
// The whole `predict` output: a header line (user, model version, method,
// folded in) and FormatDistribution for each item, separated by blank lines.
// `user` empty means the anonymous user.
std::string FormatPredictions(const v1::PredictRatingsResponse& response,
                              absl::string_view user, v1::Method method,
                              const TextStyle& style);
// The `similar` table: rank, item, title, score.
std::string FormatSimilar(const v1::SimilarItemsResponse& response,
                          const TextStyle& style);
// The `ratings` output (format_reads.cc): a line with the user, the page
// and the total, then the table item, title, rating, time (UTC; "-" when
// none was stored); a note when the page is empty.
std::string FormatUserRatings(const v1::GetUserRatingsResponse& response,
                              const v1::GetUserRatingsRequest& request,
                              const TextStyle& style);
// The `item` output (format_reads.cc): the id and title, its categories,
// hidden state and attributes, then the served model's ratings histogram:
// one line per rating value with a bar (its share of the ratings), the
// count and the percentage, and the total and mean.
std::string FormatItem(const v1::GetItemResponse& response,
                       const TextStyle& style);
// The `recommend` table: rank, item, title, expected rating, and
// P(>= threshold) when ranked by it.
std::string FormatRecommendations(const v1::RecommendResponse& response,
                                  const v1::RecommendRequest& request,
                                  const TextStyle& style);
// The `models` table ("*" marks the active version, a "pinned" column the
// pinned ones); a note when empty.
std::string FormatModels(const v1::ListModelsResponse& response);
// What DeleteUser deleted and erased, and what the shared weights still
// carry until the next training.
std::string FormatDeleteUser(const std::string& user,
                             const v1::DeleteUserResponse& response);
// One line describing a model version, e.g. after `models activate`.
std::string FormatModelInfo(const v1::ModelInfo& info);
// The `stats` output: aligned "name  value" lines (counts, active model,
// training, stored model versions, database size). The database: its file
// (with the server's --db-max-mb limit, when set) and its WAL apart, when the
// server sends them; else the one total of database_bytes.
std::string FormatStats(const v1::GetStatsResponse& stats);

// "RUNNING", "SUCCEEDED", ...
absl::string_view TrainStateName(v1::TrainProgress::State state);
// The per-epoch table of `train`: the header, then one row per epoch with
// fixed column widths so rows can be printed as they arrive. The rated
// RBM's rows carry its validation NDCG@10 in the valid column instead
// ("nDCG 0.512").
std::string EpochTableHeader();
std::string FormatEpochRow(const v1::TrainProgress& progress);
// The last line of `train`: the published version and whether it became
// active (SUCCEEDED), or the state; then the server's message.
std::string FormatTrainResult(const v1::TrainProgress& last);

// The import progress line (no newline): rows sent (of total, with percent),
// rows/s and ETA, e.g.
// "sent 45,000/100,000 rows (45%)  52,314 rows/s  ETA 1.1s". Rows/s count
// rows handed to gRPC (the server commits them somewhat later); once
// done_sending: "sent 100,000/100,000 rows (100%), waiting for the server to
// commit".
std::string FormatImportProgress(const ImportProgress& progress);

// Evaluation metrics of `evaluate`.
struct EvalMetrics {
  int64_t n = 0;           // ratings predicted
  int64_t n_fallback = 0;  // of which by a fallback (unknown item or user)
  int64_t n_skipped = 0;   // not scored at all (not in n)
  // Of n_skipped: ratings off the server's rating scale (the others: of
  // users the server cannot predict for).
  int64_t n_off_scale = 0;
  int64_t users = 0;  // distinct users in the file
  double sum_squared_error = 0;
  double sum_absolute_error = 0;
  int64_t model_version = 0;

  // Adds one prediction.
  void Add(double predicted, double actual, bool fallback);
  double rmse() const;  // 0 when n == 0
  double mae() const;   // 0 when n == 0
};
std::string FormatEvalMetrics(const EvalMetrics& metrics);

// ---------------------------------------------------------------------------
// JSON

// The JSON documents the CLI prints that do not mirror one message (import
// and evaluate summaries, error objects), built with nlohmann-json; keys stay
// in insertion order. Messages inside them come from ProtoToJson (parsed
// back with ProtoJson).
using Json = nlohmann::ordered_json;
// `value` as a JSON number; null when not finite.
Json JsonNumber(double value);
// A message as a Json value (ProtoToJson's output).
Json ProtoJson(const google::protobuf::Message& message);
// One line of compact JSON. Strings are written as UTF-8; bytes that are not
// valid UTF-8 are replaced by U+FFFD.
std::string DumpJson(const Json& json);

// A message as one line of compact JSON, printed by protobuf's JSON printer
// (google::protobuf::util::MessageToJsonString): field names as in the .proto
// (snake_case), every scalar and repeated field including zero values
// (proto3 `optional` scalars and message fields only when set), enums as
// their names, maps as objects (entries in protobuf's order), bytes as
// base64, strings escaped by protobuf. One difference from the proto3 JSON
// mapping: 64-bit integers are JSON numbers, not strings, so scripts can
// compare counts directly.
std::string ProtoToJson(const google::protobuf::Message& message);

}  // namespace rbmrec::client

#endif  // RBMREC_CLIENT_FORMAT_H_
