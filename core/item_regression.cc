#include "core/item_regression.h"

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "core/thread_pool.h"

namespace rbmrec {

double ItemRegressionLambda(const SparseRatings& by_user) {
  std::vector<uint8_t> rated(static_cast<size_t>(by_user.cols), 0);
  for (const int32_t i : by_user.col) rated[static_cast<size_t>(i)] = 1;
  const int64_t items = std::count(rated.begin(), rated.end(), 1);
  if (items == 0) return 0;
  return 40.0 * std::sqrt(static_cast<double>(by_user.nnz()) /
                          static_cast<double>(items));
}

int64_t ItemRegressionBytes(int32_t items) {
  return static_cast<int64_t>(items) * items *
         static_cast<int64_t>(sizeof(float));
}

bool ItemRegressionWanted(int32_t items, int64_t ratings) {
  constexpr int64_t kFloorBytes = int64_t{64} << 20;
  constexpr int64_t kBytesPerRating = 16;
  return items > 0 && ItemRegressionBytes(items) <=
                          std::max(kFloorBytes, kBytesPerRating * ratings);
}

absl::StatusOr<ItemRegression> FitItemRegression(
    const SparseRatings& by_user, const ItemRegressionOptions& options) {
  if (!std::isfinite(options.lambda) || options.lambda < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "item regression: lambda must be >= 0 (0: the rule), got %g",
        options.lambda));
  }
  if (by_user.nnz() == 0) {
    return absl::InvalidArgumentError("item regression: no ratings");
  }
  const double lambda =
      options.lambda > 0 ? options.lambda : ItemRegressionLambda(by_user);
  const int32_t m = by_user.cols;
  using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic>;
  ItemRegression out;
  out.items = m;
  out.lambda = static_cast<float>(lambda);
  // G = X'X + lambda I in out.weights (column-major; symmetric). Row a of
  // X'X counts, for each item b, the users who rated both: rows are
  // independent, so threads take ranges of rows; counts are exact in float
  // up to 2^24 users.
  out.weights.assign(static_cast<size_t>(m) * m, 0.0f);
  Eigen::Map<Matrix> g(out.weights.data(), m, m);
  const SparseRatings by_item = by_user.Transpose();
  ThreadPool pool(options.threads > 0
                      ? options.threads
                      : static_cast<int>(std::thread::hardware_concurrency()));
  pool.ParallelFor(m, [&](int, int64_t begin, int64_t end) {
    for (int64_t a = begin; a < end; ++a) {
      float* row = out.weights.data() + a * m;  // column a == row a
      for (int64_t x = by_item.offsets[a]; x < by_item.offsets[a + 1]; ++x) {
        const int32_t u = by_item.col[static_cast<size_t>(x)];
        for (int64_t y = by_user.offsets[u]; y < by_user.offsets[u + 1]; ++y) {
          row[by_user.col[static_cast<size_t>(y)]] += 1.0f;
        }
      }
      row[a] += static_cast<float>(lambda);
    }
  });
  // P = G^-1: G factored in place, then P solved from the identity.
  Matrix p = Matrix::Identity(m, m);
  {
    Eigen::LLT<Eigen::Ref<Matrix>> llt(g);
    if (llt.info() != Eigen::Success) {
      return absl::InternalError(absl::StrFormat(
          "item regression: X'X + %g I is not positive definite", lambda));
    }
    llt.solveInPlace(p);
  }
  // Row j of the weights: B_ji = -P_ji / P_ii = -P_ij / P_ii (P is
  // symmetric), i.e. column j of P over -diag(P); B_jj = 0.
  Eigen::VectorXf inv_diag = -p.diagonal().cwiseInverse();
  for (int32_t j = 0; j < m; ++j) {
    Eigen::Map<Eigen::VectorXf> row(
        out.weights.data() + static_cast<size_t>(j) * m, m);
    row = p.col(j).cwiseProduct(inv_diag);
    row[j] = 0.0f;
  }
  return out;
}

void ItemRegressionScores(const ItemRegression& reg, const int32_t* rated,
                          int64_t n, float* out) {
  const int32_t m = reg.items;
  Eigen::Map<Eigen::VectorXf> sum(out, m);
  sum.setZero();
  for (int64_t x = 0; x < n; ++x) {
    const int32_t j = rated[x];
    if (j < 0 || j >= m) continue;
    sum += Eigen::Map<const Eigen::VectorXf>(
        reg.weights.data() + static_cast<size_t>(j) * m, m);
  }
}

}  // namespace rbmrec
