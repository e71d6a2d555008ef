#ifndef RBMREC_CORE_LOW_RANK_H_
#define RBMREC_CORE_LOW_RANK_H_

// A weight matrix W (rows x F, row-major) of low rank served as U V^T:
// a factored trainer's W = A B, multiplied out, has rank at most its factor
// count (the rated RBM's 32 against F = 200 at ML-1M), so W h = U (V^T h)
// costs rows x r + r x F multiply-adds instead of rows x F.
//
// V's columns are the eigenvectors of W^T W whose eigenvalues are above
// kLowRankEigenRatio of the largest (orthonormal), U = W V. Every row whose
// residual |W_i - U_i V^T|_1 is above kLowRankRowTolerance (e.g. a row an
// online edit copied from another model) is marked exact and served from
// W_i itself, so every product row is within kLowRankRowTolerance of
// W_i . h for any h in [0, 1]^F, plus float rounding.
//
// Plain value type; not thread-safe to edit, safe to read concurrently.

#include <cstdint>
#include <vector>

#include "core/rbm.h"

namespace rbmrec {

inline constexpr double kLowRankEigenRatio = 1e-6;
inline constexpr float kLowRankRowTolerance = 1e-4f;

struct LowRankRows {
  RowMatrixXf u;   // rows x r: W V
  RowMatrixXf vt;  // r x F: V^T
  // One per row: 1 where the row is served from W (its residual is above
  // kLowRankRowTolerance); the same rows as a sorted list.
  std::vector<uint8_t> exact;
  std::vector<int32_t> exact_rows;

  bool empty() const { return vt.rows() == 0; }
  int rank() const { return static_cast<int>(vt.rows()); }
};

// The low-rank form of w, or an empty one when it would not pay: w's rank
// is above half its columns, or more than an eighth of its rows would be
// exact. Deterministic (same w, same result).
LowRankRows BuildLowRank(const RowMatrixXf& w);

// Recomputes rows [from, to) of lr from w (after an edit of those rows);
// when w has more rows than lr, also every added row. Keeps V.
// REQUIRES: !lr->empty(); w.cols() == lr->vt.cols().
void RefreshLowRankRows(const RowMatrixXf& w, int64_t from, int64_t to,
                        LowRankRows* lr);

// z = V^T h (lr.rank() floats), each entry the same for every caller.
// REQUIRES: h has lr.vt.cols() entries.
void LowRankInput(const LowRankRows& lr, const float* h, float* z);

// out[i] = W_i . h for the exact rows i (the row kernel every caller uses,
// so a row's value never depends on the caller). REQUIRES: out has
// w.rows() entries.
void LowRankExactRows(const LowRankRows& lr, const RowMatrixXf& w,
                      const float* h, float* out);

// out += the sum of W's rows `rows[0..n)` (rows outside [0, w.rows())
// skipped) through the form: V (the sum of their u_i), plus W_i of the exact
// ones; within n x kLowRankRowTolerance (L1) of the direct sum. `sum` is a
// buffer (rank() floats after the call). REQUIRES: out has w.cols() entries.
void LowRankAddRows(const LowRankRows& lr, const RowMatrixXf& w,
                    const int32_t* rows, int64_t n, float* out,
                    std::vector<float>* sum);

// W_i . h for one row i through the form: U_i . z, or W_i . h where the
// row is exact; bit for bit what the full pass (a product with U through
// kernels::MatVecRows, then LowRankExactRows) gives row i.
float LowRankRow(const LowRankRows& lr, const RowMatrixXf& w, int64_t i,
                 const float* h, const float* z);

}  // namespace rbmrec

#endif  // RBMREC_CORE_LOW_RANK_H_
