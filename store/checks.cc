#include "store/checks.h"

#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/utf8.h"

namespace rbmrec::store::internal {

absl::Status CheckId(std::string_view id, const char* what, size_t index,
                     const char* field) {
  if (id.empty()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s %d: empty %s id", what, index, field));
  }
  if (id.size() > kMaxIdBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s %d: %s id is %d bytes long, the limit is %d", what,
                        index, field, id.size(), kMaxIdBytes));
  }
  if (const TextFlaw flaw = FirstTextFlaw(id, TextRules::kId); flaw.found()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s %d: %s id contains %s", what, index, field,
                        DescribeTextFlaw(flaw)));
  }
  return absl::OkStatus();
}

absl::Status CheckRatingRows(absl::Span<const RatingRow> rows) {
  for (size_t i = 0; i < rows.size(); ++i) {
    const RatingRow& r = rows[i];
    if (absl::Status s = CheckId(r.user, "row", i, "user"); !s.ok()) return s;
    if (absl::Status s = CheckId(r.item, "row", i, "item"); !s.ok()) return s;
    if (!std::isfinite(r.rating)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "row %d: rating is not a finite number (%g)", i, r.rating));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckRetentionPolicy(const RetentionPolicy& policy) {
  if (policy.keep_full < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "retention keep_full must be >= 0, got %d", policy.keep_full));
  }
  if (policy.keep_online < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "retention keep_online must be >= 0, got %d", policy.keep_online));
  }
  return absl::OkStatus();
}

void RetentionWalk::Visit(int64_t version, std::string_view kind,
                          int64_t size_bytes, bool pinned) {
  const bool online = kind == kModelKindOnline;
  // Newest first: the first keep_* of each kind are the newest.
  int& kept = online ? online_kept_ : full_kept_;
  const bool newest = kept < (online ? policy_.keep_online : policy_.keep_full);
  if (newest) ++kept;
  if (newest || pinned || active_ == version) return;
  result_.deleted_versions.push_back(version);
  result_.freed_bytes += size_bytes;
}

std::vector<int64_t> ParseActivationHistory(std::string_view stored) {
  std::vector<int64_t> out;
  for (absl::string_view part :
       absl::StrSplit(absl::string_view(stored.data(), stored.size()), ',',
                      absl::SkipEmpty())) {
    int64_t v = 0;
    if (absl::SimpleAtoi(part, &v) && v > 0) out.push_back(v);
  }
  return out;
}

std::string PushActivation(std::string_view stored, int64_t version) {
  std::vector<int64_t> versions{version};
  for (int64_t v : ParseActivationHistory(stored)) {
    if (versions.size() >= kActivationHistoryLength) break;
    if (v != version) versions.push_back(v);
  }
  return absl::StrJoin(versions, ",");
}

}  // namespace rbmrec::store::internal
