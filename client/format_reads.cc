// The text output of the reads of stored data: `ratings` (a user's stored
// ratings) and `item` (an item's metadata and ratings histogram). The
// declarations and the conventions are in client/format.h.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/format.h"

namespace rbmrec::client {
namespace {

// Unix seconds as FormatTimestampMs prints them ("-" for none).
std::string FormatTimestampSeconds(int64_t unix_seconds) {
  constexpr int64_t kMaxSeconds = std::numeric_limits<int64_t>::max() / 1000;
  return FormatTimestampMs(std::min(unix_seconds, kMaxSeconds) * 1000);
}

}  // namespace

std::string FormatUserRatings(const v1::GetUserRatingsResponse& response,
                              const v1::GetUserRatingsRequest& request,
                              const TextStyle& style) {
  std::string out =
      absl::StrCat("user ", TerminalSafe(request.user_id()), ": ",
                   FormatCount(response.total()), " stored ratings");
  if (response.ratings().empty()) {
    if (response.total() > 0) {
      absl::StrAppend(&out, ", none from offset ",
                      FormatCount(request.offset()));
    }
    return out + "\n";
  }
  const int64_t first = request.offset() + 1;
  const int64_t last = request.offset() + response.ratings_size();
  if (first > 1 || last < response.total()) {
    absl::StrAppend(&out, ", showing ", FormatCount(first), "-",
                    FormatCount(last));
  }
  out += '\n';
  Table table;
  table.header = {"item", "title", "rating", "time"};
  table.align = {Align::kLeft, Align::kLeft, Align::kRight, Align::kLeft};
  for (const v1::UserRatingEntry& r : response.ratings()) {
    table.rows.push_back(
        {TerminalSafe(r.item_id()),
         Truncate(TerminalSafe(r.title()),
                  static_cast<size_t>(style.max_title_width), style.unicode),
         FormatRating(r.rating()), FormatTimestampSeconds(r.timestamp())});
  }
  return out + FormatTable(table);
}

std::string FormatItem(const v1::GetItemResponse& response,
                       const TextStyle& style) {
  const v1::Item& item = response.item();
  std::string out = absl::StrCat("item ", TerminalSafe(item.item_id()));
  if (!item.title().empty()) {
    absl::StrAppend(
        &out, "  ",
        Truncate(TerminalSafe(item.title()),
                 static_cast<size_t>(style.max_title_width), style.unicode));
  }
  out += '\n';
  std::vector<std::string> categories;
  for (const std::string& c : item.categories()) {
    categories.push_back(TerminalSafe(c));
  }
  absl::StrAppend(&out, "  categories  ",
                  categories.empty() ? "-" : absl::StrJoin(categories, ", "),
                  "\n  hidden      ", item.hidden() ? "yes" : "no", "\n");
  // Attributes sorted by key (a proto map has no order).
  const std::map<std::string, std::string> attributes(item.attributes().begin(),
                                                      item.attributes().end());
  for (const auto& [key, value] : attributes) {
    absl::StrAppend(&out, "  ", TerminalSafe(key), ": ", TerminalSafe(value),
                    "\n");
  }
  if (response.model_version() == 0) {
    return out + "no model is served: no ratings histogram\n";
  }
  absl::StrAppend(&out, "model v", response.model_version(), ": ",
                  FormatCount(response.ratings()), " ratings");
  if (response.ratings() > 0) {
    absl::StrAppend(&out, ", mean ",
                    absl::StrFormat("%.2f", response.mean_rating()));
  }
  out += '\n';
  std::vector<std::string> labels;
  size_t label_width = 0;
  for (int k = 0; k < response.rating_counts_size(); ++k) {
    labels.push_back(k < response.scale().values_size()
                         ? FormatRating(response.scale().values(k))
                         : absl::StrCat("#", k + 1));
    label_width = std::max(label_width, labels.back().size());
  }
  const double total =
      static_cast<double>(std::max<int64_t>(response.ratings(), 1));
  for (int k = 0; k < response.rating_counts_size(); ++k) {
    const int64_t c = response.rating_counts(k);
    const double share = static_cast<double>(c) / total;
    absl::StrAppend(
        &out, "    ",
        absl::StrFormat("%*s", static_cast<int>(label_width),
                        labels[static_cast<size_t>(k)]),
        "  ", RenderBar(share, style.bar_width, style.unicode), "  ",
        absl::StrFormat("%8s  %5.1f%%", FormatCount(c), 100.0 * share), "\n");
  }
  return out;
}

}  // namespace rbmrec::client
