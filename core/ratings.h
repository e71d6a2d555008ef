#ifndef RBMREC_CORE_RATINGS_H_
#define RBMREC_CORE_RATINGS_H_

#include <cstdint>
#include <vector>

#include "core/id_map.h"
#include "core/rating_scale.h"

namespace rbmrec {

// One rating with dense ids; k is the index on the RatingScale (0..K-1).
struct Rating {
  int32_t user = 0;
  int32_t item = 0;
  uint8_t k = 0;
};

// Compressed sparse rows: row r holds entries [offsets[r], offsets[r+1]) of
// (col, k), sorted by col, each col at most once. For per-user lists rows are
// users and cols items; Transpose() gives the per-item view.
struct SparseRatings {
  int32_t rows = 0;
  int32_t cols = 0;
  std::vector<int64_t> offsets{0};  // rows + 1 entries
  std::vector<int32_t> col;
  std::vector<uint8_t> k;

  int64_t nnz() const { return static_cast<int64_t>(col.size()); }
  int64_t RowSize(int32_t r) const { return offsets[r + 1] - offsets[r]; }

  // Builds from ratings (user = row, item = col). REQUIRES every user < rows
  // and item < cols. A later duplicate (same user and item) replaces an
  // earlier one.
  static SparseRatings FromRatings(int32_t rows, int32_t cols,
                                   const std::vector<Rating>& ratings);
  // The per-col view: row c lists the rows that have col c, increasing,
  // with their k. A matrix without values (k empty: only which entries
  // exist) transposes to one without values.
  SparseRatings Transpose() const;
  // The rows of `a` and `b` merged: row r holds both parts' entries, by col.
  // REQUIRES: the same shape, rows sorted by col, no col in both parts of a
  // row (e.g. CarveValidation's parts; merged, they give back the whole).
  static SparseRatings Merge(const SparseRatings& a, const SparseRatings& b);
};

// A rating data set with its id maps and scale.
struct Dataset {
  RatingScale scale;
  IdMap users;
  IdMap items;
  std::vector<Rating> ratings;

  SparseRatings ByUser() const {
    return SparseRatings::FromRatings(users.size(), items.size(), ratings);
  }
};

}  // namespace rbmrec

#endif  // RBMREC_CORE_RATINGS_H_
