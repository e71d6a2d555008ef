#include "store/checks.h"

#include <algorithm>
#include <cmath>
#include <limits>

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

absl::Status CheckCategories(const std::vector<std::string>& categories,
                             size_t index) {
  if (categories.size() > static_cast<size_t>(kMaxItemCategories)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("item %d: %d categories, the limit is %d", index,
                        categories.size(), kMaxItemCategories));
  }
  for (size_t c = 0; c < categories.size(); ++c) {
    const std::string& name = categories[c];
    if (name.empty()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("item %d: category %d is empty", index, c));
    }
    if (name.size() > kMaxCategoryBytes) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "item %d: category %d is %d bytes long, the limit is %d", index, c,
          name.size(), kMaxCategoryBytes));
    }
    if (const TextFlaw flaw = FirstTextFlaw(name, TextRules::kId);
        flaw.found()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("item %d: category %d contains %s", index, c,
                          DescribeTextFlaw(flaw)));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckItemRows(absl::Span<const ItemRow> items) {
  for (size_t i = 0; i < items.size(); ++i) {
    if (absl::Status s = CheckId(items[i].item, "item", i, "item"); !s.ok()) {
      return s;
    }
    if (absl::Status s = CheckCategories(items[i].categories, i); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status CheckItemIds(absl::Span<const std::string> items) {
  for (size_t i = 0; i < items.size(); ++i) {
    if (absl::Status s = CheckId(items[i], "item", i, "item"); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

std::string JoinCategories(const std::vector<std::string>& categories) {
  std::string out;
  std::vector<std::string_view> seen;
  for (const std::string& c : categories) {
    if (std::find(seen.begin(), seen.end(), c) != seen.end()) continue;
    seen.push_back(c);
    if (!out.empty()) out += '\n';
    out += c;
  }
  return out;
}

std::vector<std::string> SplitCategories(std::string_view stored) {
  std::vector<std::string> out;
  while (!stored.empty()) {
    const size_t end = std::min(stored.find('\n'), stored.size());
    if (end > 0) out.emplace_back(stored.substr(0, end));
    stored.remove_prefix(std::min(end + 1, stored.size()));
  }
  return out;
}

absl::Status CheckRatingRows(absl::Span<const RatingRow> rows) {
  for (size_t i = 0; i < rows.size(); ++i) {
    const RatingRow& r = rows[i];
    if (absl::Status s = CheckId(r.user, "row", i, "user"); !s.ok()) return s;
    if (absl::Status s = CheckId(r.item, "row", i, "item"); !s.ok()) return s;
    if (!r.view && !std::isfinite(r.rating)) {
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

absl::Status SnapshotBuilder::AddName(bool user, int64_t idx,
                                      std::string_view id) {
  std::vector<std::string>& names = user ? snap_.users : snap_.items;
  std::vector<int32_t>& pos = user ? user_pos_ : item_pos_;
  if (idx < 0 || idx >= std::numeric_limits<int32_t>::max() ||
      names.size() >=
          static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return absl::OutOfRangeError(absl::StrFormat(
        "database '%s': index %d does not fit a snapshot", name_, idx));
  }
  if (pos.size() <= static_cast<size_t>(idx)) {
    pos.resize(static_cast<size_t>(idx) + 1, -1);
  }
  pos[static_cast<size_t>(idx)] = static_cast<int32_t>(names.size());
  names.emplace_back(id);
  return absl::OkStatus();
}

void SnapshotBuilder::ReserveRatings(int64_t n) {
  snap_.ratings.reserve(static_cast<size_t>(std::max<int64_t>(0, n)));
}

absl::Status SnapshotBuilder::Positions(int64_t user_idx, int64_t item_idx,
                                        const char* what, int32_t* u,
                                        int32_t* i) const {
  const auto position = [](const std::vector<int32_t>& pos, int64_t idx) {
    return idx < 0 || static_cast<size_t>(idx) >= pos.size()
               ? -1
               : pos[static_cast<size_t>(idx)];
  };
  *u = position(user_pos_, user_idx);
  *i = position(item_pos_, item_idx);
  if (*u < 0 || *i < 0) {
    return absl::DataLossError(absl::StrFormat(
        "database '%s': %s (%d, %d) refers to a missing user or item", name_,
        what, user_idx, item_idx));
  }
  return absl::OkStatus();
}

absl::Status SnapshotBuilder::AddRating(int64_t user_idx, int64_t item_idx,
                                        double rating) {
  int32_t u = 0, i = 0;
  if (absl::Status s = Positions(user_idx, item_idx, "rating", &u, &i);
      !s.ok()) {
    return s;
  }
  snap_.ratings.push_back(Snapshot::Row{u, i, rating});
  return absl::OkStatus();
}

absl::Status SnapshotBuilder::AddView(int64_t user_idx, int64_t item_idx) {
  int32_t u = 0, i = 0;
  if (absl::Status s = Positions(user_idx, item_idx, "view", &u, &i); !s.ok()) {
    return s;
  }
  snap_.views.push_back(Snapshot::View{u, i});
  return absl::OkStatus();
}

const char* SnapshotNamesSql(bool user) {
  return user ? "SELECT idx, ext_id FROM users ORDER BY idx"
              : "SELECT idx, ext_id FROM items ORDER BY idx";
}

}  // namespace rbmrec::store::internal
