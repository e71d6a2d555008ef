#include "core/ratings.h"

#include <cassert>
#include <cstdint>
#include <vector>

namespace rbmrec {
namespace {

// Turns per-bucket counts (size n + 1, counts in [1..n]) into start offsets
// in place: afterwards counts[b] is where bucket b begins.
void CountsToOffsets(std::vector<int64_t>& counts) {
  for (size_t b = 1; b < counts.size(); ++b) counts[b] += counts[b - 1];
}

}  // namespace

SparseRatings SparseRatings::FromRatings(int32_t rows, int32_t cols,
                                         const std::vector<Rating>& ratings) {
  const size_t n = ratings.size();

  // Two stable counting sorts, by col and then by row, leave the entries
  // ordered by (row, col) with duplicates in input order. O(n + rows + cols).
  std::vector<int64_t> next(static_cast<size_t>(cols) + 1, 0);
  for (const Rating& r : ratings) {
    assert(r.user >= 0 && r.user < rows && r.item >= 0 && r.item < cols);
    ++next[static_cast<size_t>(r.item) + 1];
  }
  CountsToOffsets(next);
  std::vector<int32_t> by_col_row(n);
  std::vector<int32_t> by_col_col(n);
  std::vector<uint8_t> by_col_k(n);
  for (const Rating& r : ratings) {
    const int64_t at = next[r.item]++;
    by_col_row[at] = r.user;
    by_col_col[at] = r.item;
    by_col_k[at] = r.k;
  }

  SparseRatings out;
  out.rows = rows;
  out.cols = cols;
  out.offsets.assign(static_cast<size_t>(rows) + 1, 0);
  for (size_t i = 0; i < n; ++i) ++out.offsets[by_col_row[i] + 1];
  CountsToOffsets(out.offsets);
  next.assign(out.offsets.begin(), out.offsets.end() - 1);
  out.col.resize(n);
  out.k.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t at = next[by_col_row[i]]++;
    out.col[at] = by_col_col[i];
    out.k[at] = by_col_k[i];
  }

  // Drop duplicates, keeping the last of each run (the latest in input).
  int64_t write = 0;
  for (int32_t r = 0; r < rows; ++r) {
    const int64_t begin = out.offsets[r];
    const int64_t end = out.offsets[r + 1];
    out.offsets[r] = write;
    for (int64_t i = begin; i < end; ++i) {
      if (i + 1 < end && out.col[i + 1] == out.col[i]) continue;
      out.col[write] = out.col[i];
      out.k[write] = out.k[i];
      ++write;
    }
  }
  out.offsets[rows] = write;
  out.col.resize(static_cast<size_t>(write));
  out.k.resize(static_cast<size_t>(write));
  out.col.shrink_to_fit();
  out.k.shrink_to_fit();
  return out;
}

SparseRatings SparseRatings::Transpose() const {
  SparseRatings out;
  out.rows = cols;
  out.cols = rows;
  out.offsets.assign(static_cast<size_t>(cols) + 1, 0);
  for (const int32_t c : col) ++out.offsets[c + 1];
  CountsToOffsets(out.offsets);
  std::vector<int64_t> next(out.offsets.begin(), out.offsets.end() - 1);
  out.col.resize(col.size());
  const bool values = !k.empty();
  out.k.resize(k.size());
  // Rows are visited in increasing order, so each output row comes out
  // sorted by its new col (the old row).
  for (int32_t r = 0; r < rows; ++r) {
    for (int64_t i = offsets[r]; i < offsets[r + 1]; ++i) {
      const int64_t at = next[col[i]]++;
      out.col[at] = r;
      if (values) out.k[at] = k[i];
    }
  }
  return out;
}

SparseRatings SparseRatings::Merge(const SparseRatings& a,
                                   const SparseRatings& b) {
  SparseRatings out;
  out.rows = a.rows;
  out.cols = a.cols;
  out.offsets.resize(static_cast<size_t>(a.rows) + 1);
  out.col.resize(static_cast<size_t>(a.nnz() + b.nnz()));
  out.k.resize(out.col.size());
  int64_t w = 0;
  for (int32_t r = 0; r < a.rows; ++r) {
    int64_t i = a.offsets[r], j = b.offsets[r];
    const int64_t ie = a.offsets[r + 1], je = b.offsets[r + 1];
    while (i < ie || j < je) {
      const bool from_a = j >= je || (i < ie && a.col[i] < b.col[j]);
      out.col[w] = from_a ? a.col[i] : b.col[j];
      out.k[w++] = from_a ? a.k[i++] : b.k[j++];
    }
    out.offsets[static_cast<size_t>(r) + 1] = w;
  }
  return out;
}

}  // namespace rbmrec
