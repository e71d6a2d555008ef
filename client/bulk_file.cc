#include "client/bulk_file.h"

#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "client/format.h"

namespace rbmrec::client {
namespace {

constexpr absl::string_view kCsvHeader =
    "user_id,rank,item_id,title,expected_rating,probability_at_least,"
    "probability_rated,fallback,model_version\n";

std::string CsvField(absl::string_view s) {
  if (s.find_first_of(",\"\r\n") == absl::string_view::npos) {
    return std::string(s);
  }
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

// The first field of a CSV line, unquoted; false when it is malformed.
bool FirstCsvField(absl::string_view line, std::string* field) {
  field->clear();
  if (line.empty() || line[0] != '"') {
    *field = std::string(line.substr(0, line.find(',')));
    return true;
  }
  for (size_t i = 1; i < line.size(); ++i) {
    if (line[i] != '"') {
      *field += line[i];
    } else if (i + 1 < line.size() && line[i + 1] == '"') {
      *field += '"';
      ++i;
    } else {
      return true;
    }
  }
  return false;
}

// The user of one kept line.
absl::StatusOr<std::string> UserOf(absl::string_view line, BulkFormat format) {
  std::string user;
  if (format == BulkFormat::kCsv) {
    if (!FirstCsvField(line, &user) || user.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("not a line of rbmrec's CSV output: ", line));
    }
    return user;
  }
  Json json = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object() || !json.contains("user_id") ||
      !json["user_id"].is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a line of rbmrec's JSONL output: ", line));
  }
  return json["user_id"].get<std::string>();
}

}  // namespace

absl::StatusOr<BulkFormat> ParseBulkFormat(absl::string_view name,
                                           absl::string_view path) {
  if (name.empty()) {
    for (absl::string_view ext : {".jsonl", ".json", ".ndjson"}) {
      if (absl::EndsWithIgnoreCase(path, ext)) return BulkFormat::kJsonl;
    }
    return BulkFormat::kCsv;
  }
  if (name == "csv") return BulkFormat::kCsv;
  if (name == "jsonl" || name == "json" || name == "ndjson") {
    return BulkFormat::kJsonl;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--format ", name, ": expected csv or jsonl"));
}

std::string BulkCsvHeader() { return std::string(kCsvHeader); }

std::string FormatBulkMessage(const v1::RecommendAllResponse& message,
                              BulkFormat format) {
  std::string out;
  for (const v1::UserRecommendations& u : message.users()) {
    if (format == BulkFormat::kJsonl) {
      absl::StrAppend(&out, ProtoToJson(u), "\n");
      continue;
    }
    const v1::RecommendResponse& r = u.response();
    const std::string user = CsvField(u.user_id());
    // The enum's name without its prefix: NONE, EMPTY_USER, POPULAR.
    const absl::string_view fallback =
        absl::StripPrefix(v1::Fallback_Name(r.fallback()), "FALLBACK_");
    for (const v1::Recommendation& rec : r.recommendations()) {
      absl::StrAppend(
          &out, user, ",", rec.rank(), ",", CsvField(rec.item_id()), ",",
          CsvField(rec.title()), ",",
          absl::StrFormat("%.6g,%.6g,%.6g", rec.expected_rating(),
                          rec.probability_at_least(), rec.probability_rated()),
          ",", fallback, ",", r.model_version(), "\n");
    }
  }
  return out;
}

absl::StatusOr<ResumePoint> FindResumePoint(absl::string_view contents,
                                            BulkFormat format) {
  ResumePoint point;
  // Whole lines only: a torn last line is dropped.
  const size_t end = contents.rfind('\n');
  if (end == absl::string_view::npos) return point;
  contents = contents.substr(0, end + 1);
  size_t start = 0;  // of the first user line
  if (format == BulkFormat::kCsv) {
    if (!absl::StartsWith(contents, kCsvHeader)) {
      return absl::InvalidArgumentError(
          "the file does not start with rbmrec's CSV header");
    }
    point.has_header = true;
    start = kCsvHeader.size();
  }
  point.keep_bytes = contents.size();
  // The user lines: (offset, text without '\n').
  std::vector<std::pair<size_t, absl::string_view>> lines;
  for (size_t at = start; at < contents.size();) {
    const size_t nl = contents.find('\n', at);
    lines.emplace_back(at, contents.substr(at, nl - at));
    at = nl + 1;
  }
  if (lines.empty()) return point;
  absl::StatusOr<std::string> last = UserOf(lines.back().second, format);
  if (!last.ok()) return last.status();
  if (format == BulkFormat::kJsonl) {
    point.last_user = *std::move(last);
    return point;
  }
  // CSV: drop the last user's rows (a torn write may have cut them) and
  // resume after the user before.
  size_t i = lines.size() - 1;
  while (true) {
    if (i == 0) {
      point.keep_bytes = start;
      return point;  // one user only: from the first user
    }
    absl::StatusOr<std::string> user = UserOf(lines[i - 1].second, format);
    if (!user.ok()) return user.status();
    if (*user != *last) {
      point.keep_bytes = lines[i].first;
      point.last_user = *std::move(user);
      return point;
    }
    --i;
  }
}

}  // namespace rbmrec::client
