#ifndef RBMREC_CORE_INTERNED_RATINGS_H_
#define RBMREC_CORE_INTERNED_RATINGS_H_

// Rating files read compactly, for training on large files: ReadRatingsFile
// keeps every rating as a RawRating (two id strings, a double and two
// int64s: ~88 bytes), this keeps 12 bytes a rating (two 4-byte ids and a
// 4-byte index into the file's distinct rating values).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/id_map.h"
#include "core/rating_scale.h"
#include "core/ratings.h"
#include "core/readers.h"

namespace rbmrec {

// The ratings of one file, in file order, ids interned in order of first
// appearance.
struct InternedRatings {
  IdMap users, items;
  std::vector<int32_t> user, item;  // per rating: indices into users, items
  std::vector<uint32_t> value;      // per rating: index into values
  // The distinct rating values in order of first appearance (bit patterns:
  // -0.0 and 0.0 are two), and the line where each first appears.
  std::vector<double> values;
  std::vector<int64_t> value_line;
  // The format used, header line, lenient skips and problems (rows empty).
  ReadResult read;
  size_t size() const { return user.size(); }
};

// Reads a rating file as ReadRatingsFile does (same formats, checks and
// messages) into InternedRatings.
absl::StatusOr<InternedRatings> ReadRatingsInterned(const std::string& path,
                                                    const ReadOptions& options);

// The rating index on `scale` of every distinct value of `r`.
// InvalidArgument "NAME:LINE: rating R is off the scale" (RatingScale::Index's
// message) for the first value off the scale in file order, LINE the line
// where it first appears: the first rating off the scale in the file.
absl::StatusOr<std::vector<uint8_t>> ValueIndices(const InternedRatings& r,
                                                  const RatingScale& scale,
                                                  std::string_view name);

// The Dataset of ratings [begin, end) of `r` on `scale` (k[v] the index of
// r.values[v], from ValueIndices), with ids added in order of first
// appearance in that range (DatasetFromRaw's order). *user_map and
// *item_map get, per id of r, its index in the Dataset or -1 when it has no
// rating in the range. REQUIRES: begin <= end <= r.size().
Dataset DatasetFromInterned(const InternedRatings& r, size_t begin, size_t end,
                            const RatingScale& scale,
                            const std::vector<uint8_t>& k,
                            std::vector<int32_t>* user_map,
                            std::vector<int32_t>* item_map);

// Per index of `from`, the index of the same id in `to`, or -1.
std::vector<int32_t> MapIds(const IdMap& from, const IdMap& to);

}  // namespace rbmrec

#endif  // RBMREC_CORE_INTERNED_RATINGS_H_
