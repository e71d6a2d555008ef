#include "core/item_regression.h"

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <functional>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "core/kernels.h"
#include "core/thread_pool.h"

namespace rbmrec {

namespace {
using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic>;

// Blocks at most this wide are handled directly.
constexpr Eigen::Index kDirect = 96;
// Products over fewer rows than this run on the calling thread.
constexpr Eigen::Index kSplit = 256;

// Runs part(0) and part(1) on the pool's threads, or both on the calling
// thread when `rows` is small. The parts are fixed halves of the work,
// never sized by the thread count, so every float is computed the same way
// at any thread count.
void InTwo(ThreadPool* pool, Eigen::Index rows,
           const std::function<void(int)>& part) {
  if (rows < kSplit || pool->width() < 2) {
    part(0);
    part(1);
    return;
  }
  pool->ParallelFor(2, [&](int, int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) part(static_cast<int>(k));
  });
}

// f(first, count) for the two halves [0, size / 2) and [size / 2, size)
// of a block's rows or columns, through InTwo (`rows`: the block's rows).
template <typename F>
void Halves(ThreadPool* pool, Eigen::Index rows, Eigen::Index size,
            const F& f) {
  const Eigen::Index half = size / 2;
  InTwo(pool, rows, [&](int part) {
    if (part == 0) {
      f(Eigen::Index{0}, half);
    } else {
      f(half, size - half);
    }
  });
}

// The lower triangle of c (r x r) less y y' (y: r x k), as two tasks of
// equal cost: with r split into halves, C11 -= Y1 Y1' and C22 -= Y2 Y2'
// on one, C21 -= Y2 Y1' on the other. sign = +1 adds instead.
template <typename Y>
void RankUpdateLower(ThreadPool* pool, Eigen::Ref<Matrix> c, const Y& y,
                     float sign) {
  const Eigen::Index r = c.rows(), q = r / 2;
  InTwo(pool, r, [&](int part) {
    if (part == 0) {
      c.topLeftCorner(q, q).selfadjointView<Eigen::Lower>().rankUpdate(
          y.topRows(q), sign);
      c.bottomRightCorner(r - q, r - q)
          .selfadjointView<Eigen::Lower>()
          .rankUpdate(y.bottomRows(r - q), sign);
    } else {
      c.bottomLeftCorner(r - q, q).noalias() +=
          sign * y.bottomRows(r - q) * y.topRows(q).transpose();
    }
  });
}

// g's lower triangle becomes L, G = L L', by halves: with G = [A B'; B C],
// L = [L_A 0; B L_A^-T  chol(C - B L_A^-T (B L_A^-T)')]. False when G is
// not positive definite.
bool CholeskyLower(ThreadPool* pool, Eigen::Ref<Matrix> g) {
  const Eigen::Index n = g.rows();
  if (n <= kDirect) {
    Eigen::LLT<Eigen::Ref<Matrix>> llt(g);
    return llt.info() == Eigen::Success;
  }
  const Eigen::Index h = n / 2;
  auto a = g.topLeftCorner(h, h);
  auto b = g.bottomLeftCorner(n - h, h);
  auto c = g.bottomRightCorner(n - h, n - h);
  if (!CholeskyLower(pool, a)) return false;
  Halves(pool, n - h, n - h, [&](Eigen::Index first, Eigen::Index count) {
    // b's rows are independent
    a.triangularView<Eigen::Lower>()
        .transpose()
        .solveInPlace<Eigen::OnTheRight>(b.middleRows(first, count));
  });
  RankUpdateLower(pool, c, b, -1.0f);
  return CholeskyLower(pool, c);
}

// l's lower triangle L (l holds L and anything above it) becomes L^-1, by
// halves: [A 0; B C]^-1 = [A^-1 0; -C^-1 B A^-1  C^-1].
void InvertLower(ThreadPool* pool, Eigen::Ref<Matrix> l) {
  const Eigen::Index n = l.rows();
  if (n <= kDirect) {
    Matrix inv = Matrix::Identity(n, n);
    l.triangularView<Eigen::Lower>().solveInPlace(inv);
    l.triangularView<Eigen::Lower>() = inv;
    return;
  }
  const Eigen::Index h = n / 2;
  auto a = l.topLeftCorner(h, h);
  auto b = l.bottomLeftCorner(n - h, h);
  auto c = l.bottomRightCorner(n - h, n - h);
  Halves(pool, n - h, n - h, [&](Eigen::Index first, Eigen::Index count) {
    // b's rows: B A^-1
    a.triangularView<Eigen::Lower>().solveInPlace<Eigen::OnTheRight>(
        b.middleRows(first, count));
  });
  Halves(pool, n - h, h, [&](Eigen::Index first, Eigen::Index count) {
    // b's columns: -C^-1 (B A^-1)
    auto cols = b.middleCols(first, count);
    c.triangularView<Eigen::Lower>().solveInPlace(cols);
    cols = -cols;
  });
  InvertLower(pool, a);
  InvertLower(pool, c);
}

// m's lower triangle M becomes the lower triangle of M' M, by halves:
// with M = [X 0; Y Z], M' M = [X'X + Y'Y  Y'Z; Z'Y  Z'Z].
void LowerGram(ThreadPool* pool, Eigen::Ref<Matrix> m) {
  const Eigen::Index n = m.rows();
  if (n <= kDirect) {
    const Matrix lower = m.triangularView<Eigen::Lower>();
    const Matrix gram = lower.transpose() * lower;
    m.triangularView<Eigen::Lower>() = gram;
    return;
  }
  const Eigen::Index h = n / 2;
  auto x = m.topLeftCorner(h, h);
  auto y = m.bottomLeftCorner(n - h, h);
  auto z = m.bottomRightCorner(n - h, n - h);
  LowerGram(pool, x);
  RankUpdateLower(pool, x, y.transpose(), 1.0f);
  Matrix zy(n - h, h);
  Halves(pool, n - h, h, [&](Eigen::Index first, Eigen::Index count) {
    // Z'Y's columns are independent
    zy.middleCols(first, count).noalias() =
        z.triangularView<Eigen::Lower>().transpose() *
        y.middleCols(first, count);
  });
  y = zy;
  LowerGram(pool, z);
}

// The integer sums of ItemRegressionScores, one buffer per thread.
std::vector<int32_t>& ScoreSums(int32_t m) {
  thread_local std::vector<int32_t> sums;
  sums.resize(static_cast<size_t>(m));
  return sums;
}
}  // namespace

double ItemRegressionLambda(const SparseRatings& by_user) {
  std::vector<uint8_t> rated(static_cast<size_t>(by_user.cols), 0);
  for (const int32_t i : by_user.col) rated[static_cast<size_t>(i)] = 1;
  const int64_t items = std::count(rated.begin(), rated.end(), 1);
  if (items == 0) return 0;
  return 40.0 * std::sqrt(static_cast<double>(by_user.nnz()) /
                          static_cast<double>(items));
}

int64_t ItemRegressionBytes(int64_t items) {
  return items * items * static_cast<int64_t>(sizeof(float));
}

int64_t ItemRegressionColumns(int64_t items, int64_t ratings) {
  constexpr int64_t kFloorBytes = int64_t{64} << 20;
  constexpr int64_t kBytesPerRating = 16;
  if (items <= 0) return 0;
  if (items <= (int64_t{1} << 24) &&
      ItemRegressionBytes(items) <=
          std::max(kFloorBytes, kBytesPerRating * ratings)) {
    return items;
  }
  // The most columns whose P fits in the floor: 4,096.
  int64_t columns = 1;
  while (ItemRegressionBytes(2 * columns) <= kFloorBytes) columns *= 2;
  return std::min(items, columns);
}

int32_t ItemRegression::ColumnOf(int32_t i) const {
  if (item_of.empty()) return i >= 0 && i < items ? i : -1;
  const auto it = std::lower_bound(item_of.begin(), item_of.end(), i);
  return it != item_of.end() && *it == i
             ? static_cast<int32_t>(it - item_of.begin())
             : -1;
}

namespace {

// The items of FitItemRegression's columns, increasing: all of by_user's
// when `columns` is 0 or at least its items (returned empty), else the
// `columns` most-rated (ties: the lower index).
std::vector<int32_t> PickColumns(const SparseRatings& by_user,
                                 int64_t columns) {
  const int32_t m = by_user.cols;
  if (columns <= 0 || columns >= m) return {};
  std::vector<int64_t> count(static_cast<size_t>(m), 0);
  for (const int32_t i : by_user.col) ++count[static_cast<size_t>(i)];
  std::vector<int32_t> order(static_cast<size_t>(m));
  for (int32_t i = 0; i < m; ++i) order[static_cast<size_t>(i)] = i;
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return count[static_cast<size_t>(a)] > count[static_cast<size_t>(b)];
  });
  order.resize(static_cast<size_t>(columns));
  std::sort(order.begin(), order.end());
  return order;
}

}  // namespace

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
  ItemRegression out;
  out.item_of = PickColumns(by_user, options.columns);
  // X (users x columns, which entries exist): by_user's rows, or their
  // entries in the columns renumbered (sorted: columns follow the items'
  // order). It becomes the regression's rows after the fit.
  SparseRatings x;
  x.rows = by_user.rows;
  if (out.item_of.empty()) {
    x.cols = by_user.cols;
    x.offsets = by_user.offsets;
    x.col = by_user.col;
  } else {
    x.cols = static_cast<int32_t>(out.item_of.size());
    std::vector<int32_t> column(static_cast<size_t>(by_user.cols), -1);
    for (int32_t c = 0; c < x.cols; ++c) {
      column[static_cast<size_t>(out.item_of[static_cast<size_t>(c)])] = c;
    }
    size_t covered = 0;  // sized exactly: no spare capacity held
    for (const int32_t i : by_user.col) {
      covered += column[static_cast<size_t>(i)] >= 0 ? 1 : 0;
    }
    x.col.reserve(covered);
    x.offsets.assign(static_cast<size_t>(x.rows) + 1, 0);
    for (int32_t u = 0; u < x.rows; ++u) {
      for (int64_t y = by_user.offsets[u]; y < by_user.offsets[u + 1]; ++y) {
        const int32_t c = column[static_cast<size_t>(by_user.col[y])];
        if (c >= 0) x.col.push_back(c);
      }
      x.offsets[static_cast<size_t>(u) + 1] = x.nnz();
    }
  }
  const int32_t m = x.cols;  // its columns hold the most-rated item: nnz > 0
  out.items = m;
  const double lambda =
      options.lambda > 0 ? options.lambda : ItemRegressionLambda(x);
  out.lambda = static_cast<float>(lambda);
  // G = X'X + lambda I (column-major; symmetric). Row a of X'X counts, for
  // each column b, the users who rated both: rows are independent, so
  // threads take ranges of rows; counts are exact in float up to 2^24 users.
  std::vector<float> gram(static_cast<size_t>(m) * m, 0.0f);
  ThreadPool pool(options.threads > 0
                      ? options.threads
                      : static_cast<int>(std::thread::hardware_concurrency()));
  {
    const SparseRatings by_column = x.Transpose();
    pool.ParallelFor(m, [&](int, int64_t begin, int64_t end) {
      for (int64_t a = begin; a < end; ++a) {
        float* row = gram.data() + a * m;  // column a == row a
        for (int64_t t = by_column.offsets[a]; t < by_column.offsets[a + 1];
             ++t) {
          const int32_t u = by_column.col[static_cast<size_t>(t)];
          for (int64_t y = x.offsets[u]; y < x.offsets[u + 1]; ++y) {
            row[x.col[static_cast<size_t>(y)]] += 1.0f;
          }
        }
        row[a] += static_cast<float>(lambda);
      }
    });
  }
  out.row_offsets = std::move(x.offsets);
  out.row_items = std::move(x.col);
  // P = G^-1 in G's place (one matrix at the peak): G = L L', then L^-1,
  // then P = L^-T L^-1 (LAPACK's potrf, trtri and lauum: ~items^3 / 2
  // multiply-adds, against ~7 items^3 / 6 for solving P from the identity),
  // each by halves with its products split over the pool.
  {
    Eigen::Map<Matrix> g(gram.data(), m, m);
    if (!CholeskyLower(&pool, g)) {
      return absl::InternalError(absl::StrFormat(
          "item regression: X'X + %g I is not positive definite", lambda));
    }
    InvertLower(&pool, g);
    LowerGram(&pool, g);
  }
  out.inverse = std::move(gram);
  Eigen::Map<Matrix> p(out.inverse.data(), m, m);
  MirrorLowerTriangle(p.data(), m);
  RefreshItemRegressionScoring(&out);
  return out;
}

void MirrorLowerTriangle(float* p, int64_t n) {
  // Tiles of 64 x 64, so both the rows read and the columns written stay
  // in cache (an explicit loop: no aliasing between them).
  constexpr int64_t kTile = 64;
  for (int64_t j0 = 0; j0 < n; j0 += kTile) {
    for (int64_t i0 = 0; i0 <= j0; i0 += kTile) {
      const int64_t j1 = std::min(n, j0 + kTile);
      for (int64_t j = j0; j < j1; ++j) {
        const int64_t i1 = std::min(j, i0 + kTile);
        for (int64_t i = i0; i < i1; ++i) p[j * n + i] = p[i * n + j];
      }
    }
  }
}

void RefreshItemRegressionScoring(ItemRegression* reg) {
  const size_t m = static_cast<size_t>(reg->items);
  // P is symmetric: column i of B is row i of P times -1 / P_ii, so each
  // column's largest off-diagonal |P_ji| is read along a row.
  reg->b8_scale.assign(m, 0.0f);
  std::vector<float> inv_step(m, 0.0f);
  for (size_t i = 0; i < m; ++i) {
    const float* p = reg->inverse.data() + i * m;
    float largest = 0;
    for (size_t j = 0; j < m; ++j) {
      if (j != i) largest = std::max(largest, std::abs(p[j]));
    }
    const float b = largest / p[i];  // max |B_ji| (P_ii > 0)
    // A column whose entries are all below ~127 / FLT_MAX (inv overflows)
    // stays at zero, as an all-zero one does: 0 x inf would make NaN steps.
    const float inv = 127.0f / largest;  // P_ji to steps
    if (b > 0 && std::isfinite(b) && std::isfinite(inv)) {
      reg->b8_scale[i] = b / 127.0f;
      inv_step[i] = inv;
    }
  }
  reg->b8.resize(m * m);
  for (size_t j = 0; j < m; ++j) {
    const float* p = reg->inverse.data() + j * m;
    int8_t* q = reg->b8.data() + j * m;
    for (size_t i = 0; i < m; ++i) {
      // B_ji / b8_scale[i] = -P_ji / P_ii / (|P_ii|^-1 largest_i / 127)
      //                    = -P_ji x 127 / largest_i (P_ii > 0).
      const float steps = -p[i] * inv_step[i];
      // NaN steps (an infinite P_ji x a zero step: P after an online
      // removal is not checked for finiteness) would make the cast
      // undefined: 0.
      q[i] = i == j || std::isnan(steps)
                 ? 0
                 : static_cast<int8_t>(
                       std::clamp(std::nearbyint(steps), -127.0f, 127.0f));
    }
  }
}

void ItemRegressionScores(const ItemRegression& reg, const int32_t* rated,
                          int64_t n, float* out) {
  const int32_t m = reg.items;
  // Integer sums of the rated items' rows, a chunk of rows at a time.
  std::vector<int32_t>& sums = ScoreSums(m);
  std::fill(sums.begin(), sums.end(), 0);
  constexpr int64_t kChunk = 64;
  int32_t rows[kChunk];
  for (int64_t x = 0; x < n;) {
    int64_t k = 0;
    for (; x < n && k < kChunk; ++x) {
      const int32_t c = reg.ColumnOf(rated[x]);
      if (c >= 0) rows[k++] = c;
    }
    kernels::AddRowsInt8(reg.b8.data(), m, rows, k, sums.data());
  }
  for (int32_t c = 0; c < m; ++c) {
    out[reg.ItemOf(c)] = static_cast<float>(sums[static_cast<size_t>(c)]) *
                         reg.b8_scale[static_cast<size_t>(c)];
  }
}

bool RemoveFromItemRegression(ItemRegression* reg, const int32_t* rated,
                              int64_t n) {
  const int32_t m = reg->items;
  Eigen::Map<Matrix> p(reg->inverse.data(), m, m);
  Eigen::VectorXf px = Eigen::VectorXf::Zero(m);
  for (int64_t x = 0; x < n; ++x) {
    if (rated[x] < 0 || rated[x] >= m) return false;
    px += p.col(rated[x]);
  }
  double xpx = 0;
  for (int64_t x = 0; x < n; ++x) xpx += px[rated[x]];
  const double s = 1.0 - xpx;
  if (!(s > 1e-6)) return false;
  // One triangle, mirrored, so P stays exactly symmetric.
  p.selfadjointView<Eigen::Lower>().rankUpdate(px, static_cast<float>(1.0 / s));
  MirrorLowerTriangle(p.data(), m);
  RefreshItemRegressionScoring(reg);
  return true;
}

bool RemoveUserFromItemRegression(ItemRegression* reg, int32_t user) {
  if (user < 0) return false;
  // A user after X's rows (added online after the fit) was never in X.
  if (static_cast<size_t>(user) + 1 >= reg->row_offsets.size()) return true;
  const int64_t b = reg->row_offsets[static_cast<size_t>(user)];
  const int64_t e = reg->row_offsets[static_cast<size_t>(user) + 1];
  if (!RemoveFromItemRegression(reg, reg->row_items.data() + b, e - b)) {
    return false;
  }
  reg->row_items.erase(reg->row_items.begin() + b, reg->row_items.begin() + e);
  for (size_t u = static_cast<size_t>(user) + 1; u < reg->row_offsets.size();
       ++u) {
    reg->row_offsets[u] -= e - b;
  }
  return true;
}

}  // namespace rbmrec
