#include "core/low_rank.h"

#include <Eigen/Eigenvalues>
#include <algorithm>
#include <cmath>

#include "core/kernels.h"

namespace rbmrec {
namespace {

// u_i = W_i V and exact_i for rows [from, to), a block of rows at a time.
void SetRows(const RowMatrixXf& w, int64_t from, int64_t to, LowRankRows* lr) {
  constexpr int64_t kBlock = 1024;
  for (int64_t b = from; b < to; b += kBlock) {
    const int64_t n = std::min(kBlock, to - b);
    lr->u.middleRows(b, n).noalias() = w.middleRows(b, n) * lr->vt.transpose();
    const RowMatrixXf residual =
        w.middleRows(b, n) - lr->u.middleRows(b, n) * lr->vt;
    for (int64_t i = 0; i < n; ++i) {
      const float l1 = residual.row(i).cwiseAbs().sum();
      lr->exact[static_cast<size_t>(b + i)] =
          std::isfinite(l1) && l1 <= kLowRankRowTolerance ? 0 : 1;
    }
  }
}

void ListExactRows(LowRankRows* lr) {
  lr->exact_rows.clear();
  for (size_t i = 0; i < lr->exact.size(); ++i) {
    if (lr->exact[i] != 0) lr->exact_rows.push_back(static_cast<int32_t>(i));
  }
}

}  // namespace

LowRankRows BuildLowRank(const RowMatrixXf& w) {
  LowRankRows lr;
  const int64_t rows = w.rows();
  const int F = static_cast<int>(w.cols());
  if (rows < 2 || F < 2) return lr;
  const Eigen::MatrixXd gram =
      (w.transpose() * w).cast<double>();  // F x F, symmetric
  const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eigen(gram);
  if (eigen.info() != Eigen::Success) return lr;
  const Eigen::VectorXd& values = eigen.eigenvalues();  // increasing
  const double largest = values[F - 1];
  if (!(largest > 0)) return lr;
  int r = 0;
  while (r < F && values[F - 1 - r] > kLowRankEigenRatio * largest) ++r;
  if (2 * r > F) return lr;
  // V's columns: the r leading eigenvectors, largest first.
  lr.vt.resize(r, F);
  for (int k = 0; k < r; ++k) {
    lr.vt.row(k) =
        eigen.eigenvectors().col(F - 1 - k).cast<float>().transpose();
  }
  lr.u.resize(rows, r);
  lr.exact.assign(static_cast<size_t>(rows), 0);
  SetRows(w, 0, rows, &lr);
  ListExactRows(&lr);
  if (static_cast<int64_t>(lr.exact_rows.size()) * 8 > rows) return {};
  return lr;
}

void RefreshLowRankRows(const RowMatrixXf& w, int64_t from, int64_t to,
                        LowRankRows* lr) {
  const int64_t old_rows = lr->u.rows();
  if (w.rows() != old_rows) {
    lr->u.conservativeResize(w.rows(), lr->rank());
    lr->exact.resize(static_cast<size_t>(w.rows()), 0);
    SetRows(w, old_rows, w.rows(), lr);
  }
  from = std::max<int64_t>(0, from);
  to = std::min<int64_t>(to, w.rows());
  if (from < to) SetRows(w, from, to, lr);
  ListExactRows(lr);
}

void LowRankInput(const LowRankRows& lr, const float* h, float* z) {
  kernels::MatVecRows(lr.vt.data(), lr.vt.rows(),
                      static_cast<int>(lr.vt.cols()), &h, &z, 1);
}

void LowRankExactRows(const LowRankRows& lr, const RowMatrixXf& w,
                      const float* h, float* out) {
  const int F = static_cast<int>(w.cols());
  for (const int32_t i : lr.exact_rows) {
    float* o = out + i;
    kernels::MatVecRows(w.row(i).data(), 1, F, &h, &o, 1);
  }
}

void LowRankAddRows(const LowRankRows& lr, const RowMatrixXf& w,
                    const int32_t* rows, int64_t n, float* out,
                    std::vector<float>* sum) {
  const int r = lr.rank();
  sum->assign(static_cast<size_t>(r), 0.0f);
  Eigen::Map<Eigen::RowVectorXf> s(sum->data(), r);
  Eigen::Map<Eigen::RowVectorXf> o(out, w.cols());
  for (int64_t t = 0; t < n; ++t) {
    const int32_t i = rows[t];
    if (i < 0 || i >= w.rows()) continue;
    if (lr.exact[static_cast<size_t>(i)] != 0) {
      o += w.row(i);
    } else {
      s += lr.u.row(i);
    }
  }
  for (int k = 0; k < r; ++k) o += s[k] * lr.vt.row(k);
}

float LowRankRow(const LowRankRows& lr, const RowMatrixXf& w, int64_t i,
                 const float* h, const float* z) {
  float out = 0;
  float* o = &out;
  if (lr.exact[static_cast<size_t>(i)] != 0) {
    kernels::MatVecRows(w.row(i).data(), 1, static_cast<int>(w.cols()), &h, &o,
                        1);
  } else {
    kernels::MatVecRows(lr.u.row(i).data(), 1, lr.rank(), &z, &o, 1);
  }
  return out;
}

}  // namespace rbmrec
