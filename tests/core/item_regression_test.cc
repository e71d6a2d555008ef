#include "core/item_regression.h"

#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/rng.h"

namespace rbmrec {
namespace {

// A random binary matrix: users x items, each entry rated with probability
// `density` (ratings 1-5, which the regression ignores).
SparseRatings RandomRated(int users, int items, double density, uint64_t seed) {
  Rng rng(seed);
  std::vector<Rating> rs;
  for (int u = 0; u < users; ++u) {
    for (int i = 0; i < items; ++i) {
      if (rng.UniformDouble() >= density) continue;
      Rating r;
      r.user = u;
      r.item = i;
      r.k = static_cast<uint8_t>(rng.Below(5));
      rs.push_back(r);
    }
  }
  return SparseRatings::FromRatings(users, items, rs);
}

Eigen::MatrixXd Gram(const SparseRatings& x) {
  Eigen::MatrixXd g = Eigen::MatrixXd::Zero(x.cols, x.cols);
  for (int32_t u = 0; u < x.rows; ++u) {
    for (int64_t a = x.offsets[u]; a < x.offsets[u + 1]; ++a) {
      for (int64_t b = x.offsets[u]; b < x.offsets[u + 1]; ++b) {
        g(x.col[a], x.col[b]) += 1;
      }
    }
  }
  return g;
}

// B from P: b(j, i) = -P_ji / P_ii, b(i, i) = 0.
Eigen::MatrixXd Weights(const ItemRegression& r) {
  const int m = r.items;
  Eigen::MatrixXd b(m, m);
  for (int j = 0; j < m; ++j) {
    for (int i = 0; i < m; ++i) {
      b(j, i) = j == i ? 0.0
                       : -static_cast<double>(r.inverse[j * m + i]) /
                             r.inverse[i * m + i];
    }
  }
  return b;
}

// The weights solve the constrained least squares: for every column i,
// ((X'X + lambda I) B)_ji = (X'X)_ji for j != i (the stationarity of the
// Lagrangian; row i carries the multiplier) and B_ii = 0.
TEST(ItemRegression, SolvesTheConstrainedRidgeProblem) {
  const SparseRatings x = RandomRated(300, 40, 0.2, 7);
  ItemRegressionOptions o;
  o.lambda = 25;
  o.threads = 2;
  absl::StatusOr<ItemRegression> r = FitItemRegression(x, o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->items, 40);
  EXPECT_FLOAT_EQ(r->lambda, 25.0f);
  const Eigen::MatrixXd b = Weights(*r);
  const Eigen::MatrixXd g = Gram(x);
  Eigen::MatrixXd lhs = g * b;
  lhs += 25.0 * b;
  double worst = 0;
  for (int i = 0; i < 40; ++i) {
    EXPECT_EQ(b(i, i), 0.0) << i;
    for (int j = 0; j < 40; ++j) {
      if (j != i) worst = std::max(worst, std::abs(lhs(j, i) - g(j, i)));
    }
  }
  EXPECT_LT(worst, 1e-3 * g.maxCoeff()) << worst;
  // Co-rated items get positive weight on each other on average.
  EXPECT_GT(b.sum(), 0);
}

TEST(ItemRegression, SameWeightsAtAnyThreadCount) {
  const SparseRatings x = RandomRated(500, 60, 0.1, 11);
  ItemRegressionOptions one, two;
  one.threads = 1;
  two.threads = 2;
  absl::StatusOr<ItemRegression> a = FitItemRegression(x, one);
  absl::StatusOr<ItemRegression> b = FitItemRegression(x, two);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->inverse, b->inverse);
  EXPECT_EQ(a->lambda, b->lambda);
  EXPECT_FLOAT_EQ(a->lambda, static_cast<float>(ItemRegressionLambda(x)));
}

// Past the sizes the factorization handles directly (its halves and the
// products it splits over two threads): P is the inverse of X'X + lambda I,
// and the same floats at 1, 2 and 3 threads.
TEST(ItemRegression, LargeInverseIsExactAndTheSameAtAnyThreadCount) {
  const SparseRatings x = RandomRated(1500, 700, 0.04, 5);
  ItemRegressionOptions o;
  o.lambda = 30;
  o.threads = 1;
  absl::StatusOr<ItemRegression> one = FitItemRegression(x, o);
  ASSERT_TRUE(one.ok()) << one.status();
  const int m = one->items;
  ASSERT_EQ(m, 700);
  Eigen::MatrixXd g = Gram(x);
  g.diagonal().array() += 30.0;
  Eigen::MatrixXd p(m, m);
  for (int j = 0; j < m; ++j) {
    for (int i = 0; i < m; ++i) p(j, i) = one->inverse[j * m + i];
  }
  EXPECT_EQ(p, p.transpose());
  const double err =
      (g * p - Eigen::MatrixXd::Identity(m, m)).cwiseAbs().maxCoeff();
  EXPECT_LT(err, 1e-4) << err;
  for (const int threads : {2, 3}) {
    o.threads = threads;
    absl::StatusOr<ItemRegression> r = FitItemRegression(x, o);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->inverse, one->inverse) << threads << " threads";
  }
}

TEST(ItemRegression, ScoresSumTheRatedItemsWeights) {
  const SparseRatings x = RandomRated(200, 30, 0.2, 3);
  absl::StatusOr<ItemRegression> r = FitItemRegression(x, {});
  ASSERT_TRUE(r.ok());
  const Eigen::MatrixXd b = Weights(*r);
  const std::vector<int32_t> rated = {2, 17, 29, -1, 30};  // two out of range
  std::vector<float> out(30, 123.0f);
  ItemRegressionScores(*r, rated.data(), static_cast<int64_t>(rated.size()),
                       out.data());
  for (int i = 0; i < 30; ++i) {
    const double want = b(2, i) + b(17, i) + b(29, i);  // b(i, i) == 0
    // B in 8 bits: each of the three terms within half a step.
    EXPECT_NEAR(out[i], want, 1e-6 + 1.5 * r->b8_scale[i]) << i;
  }
}

// A column of P whose off-diagonal entries are all tiny (denormal: 127 /
// largest overflows) quantises to zeros, as an all-zero column does, and
// the other columns keep their 8-bit weights. Such a P comes only from a
// damaged or hostile model file; the model file fuzzer found it (0 x inf
// made NaN steps, and casting NaN to int8 is undefined).
TEST(ItemRegression, ScoringOfATinyColumnIsZero) {
  ItemRegression r;
  r.items = 3;
  // Symmetric, positive diagonal; column (and row) 0 off-diagonal: 1e-40.
  r.inverse = {1.0f,   1e-40f, 0.0f,   //
               1e-40f, 2.0f,   -0.5f,  //
               0.0f,   -0.5f,  4.0f};
  RefreshItemRegressionScoring(&r);
  ASSERT_EQ(r.b8.size(), 9u);
  ASSERT_EQ(r.b8_scale.size(), 3u);
  EXPECT_EQ(r.b8_scale[0], 0.0f);
  for (int j = 0; j < 3; ++j) EXPECT_EQ(r.b8[j * 3 + 0], 0) << j;
  // Column 1: B_21 = 0.5 / 2 = 0.25, the largest, so 127 steps of
  // 0.25 / 127; B_01 = -1e-40 / 2 rounds to 0 steps.
  EXPECT_FLOAT_EQ(r.b8_scale[1], 0.25f / 127.0f);
  EXPECT_EQ(r.b8[2 * 3 + 1], 127);
  EXPECT_EQ(r.b8[0 * 3 + 1], 0);
  // Column 2: B_12 = 0.5 / 4.
  EXPECT_FLOAT_EQ(r.b8_scale[2], 0.125f / 127.0f);
  EXPECT_EQ(r.b8[1 * 3 + 2], 127);
  const std::vector<int32_t> rated = {1, 2};
  std::vector<float> out(3, 123.0f);
  ItemRegressionScores(r, rated.data(), 2, out.data());
  for (float x : out) EXPECT_TRUE(std::isfinite(x));
  EXPECT_EQ(out[0], 0.0f);
}

// Taking a user's row out equals fitting without it.
TEST(ItemRegression, RemovingAUserEqualsRefittingWithoutThem) {
  const SparseRatings x = RandomRated(200, 30, 0.25, 5);
  ItemRegressionOptions o;
  o.lambda = 20;
  absl::StatusOr<ItemRegression> r = FitItemRegression(x, o);
  ASSERT_TRUE(r.ok());
  const int32_t gone = 7;
  ASSERT_GT(x.RowSize(gone), 3);
  std::vector<Rating> kept;
  for (int32_t u = 0; u < x.rows; ++u) {
    if (u == gone) continue;
    for (int64_t y = x.offsets[u]; y < x.offsets[u + 1]; ++y) {
      kept.push_back({u, x.col[y], x.k[y]});
    }
  }
  absl::StatusOr<ItemRegression> refit =
      FitItemRegression(SparseRatings::FromRatings(x.rows, x.cols, kept), o);
  ASSERT_TRUE(refit.ok());
  ItemRegression removed = *r;
  ASSERT_TRUE(RemoveFromItemRegression(&removed, x.col.data() + x.offsets[gone],
                                       x.RowSize(gone)));
  const Eigen::MatrixXd want = Weights(*refit), got = Weights(removed),
                        before = Weights(*r);
  EXPECT_LT((got - want).cwiseAbs().maxCoeff(), 1e-4);
  EXPECT_GT((before - want).cwiseAbs().maxCoeff(), 1e-3);  // it did change
  // P stays symmetric.
  for (int i = 0; i < 30; ++i) {
    for (int j = 0; j < 30; ++j) {
      ASSERT_EQ(removed.inverse[i * 30 + j], removed.inverse[j * 30 + i]);
    }
  }
  // By the stored row: the same, and the row is emptied.
  ItemRegression by_row = *r;
  ASSERT_TRUE(RemoveUserFromItemRegression(&by_row, gone));
  EXPECT_EQ(by_row.inverse, removed.inverse);
  EXPECT_EQ(by_row.row_offsets[gone], by_row.row_offsets[gone + 1]);
  EXPECT_EQ(by_row.row_items.size(),
            r->row_items.size() - static_cast<size_t>(x.RowSize(gone)));
  ASSERT_TRUE(RemoveUserFromItemRegression(&by_row, gone));  // no-op
  EXPECT_EQ(by_row.inverse, removed.inverse);
  ASSERT_TRUE(RemoveUserFromItemRegression(&by_row, 500));  // never in X
  EXPECT_EQ(by_row.inverse, removed.inverse);
  EXPECT_FALSE(RemoveUserFromItemRegression(&by_row, -1));
  // Out of range: refused, nothing changed.
  const std::vector<int32_t> bad = {1, 30};
  ItemRegression same = *r;
  EXPECT_FALSE(RemoveFromItemRegression(&same, bad.data(), 2));
  EXPECT_EQ(same.inverse, r->inverse);
}

TEST(ItemRegression, RefusesBadInput) {
  const SparseRatings x = RandomRated(20, 5, 0.5, 1);
  ItemRegressionOptions o;
  o.lambda = -1;
  EXPECT_EQ(FitItemRegression(x, o).status().code(),
            absl::StatusCode::kInvalidArgument);
  o.lambda = NAN;
  EXPECT_EQ(FitItemRegression(x, o).status().code(),
            absl::StatusCode::kInvalidArgument);
  const SparseRatings empty = SparseRatings::FromRatings(3, 4, {});
  EXPECT_EQ(FitItemRegression(empty, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ItemRegression, SizeRule) {
  EXPECT_EQ(ItemRegressionColumns(3706, 900'000), 3706);  // ML-1M: 55 MB
  EXPECT_EQ(ItemRegressionColumns(1682, 90'000), 1682);   // ML-100k
  EXPECT_EQ(ItemRegressionColumns(4096, 10), 4096);       // 64 MiB exactly
  // Every item would take more: the 4,096 most rated (64 MiB).
  EXPECT_EQ(ItemRegressionColumns(4097, 10), 4096);
  EXPECT_EQ(ItemRegressionColumns(9379, 90'000), 4096);        // 352 MB
  EXPECT_EQ(ItemRegressionColumns(10'000, 10'000'000), 4096);  // 400 MB
  EXPECT_EQ(ItemRegressionColumns(20'000, 100'000'000),
            20'000);  // 1.6 GB, 16 B/r
  EXPECT_EQ(ItemRegressionColumns(0, 100), 0);
}

// The items of `x` in `keep` (increasing) alone, renumbered 0, 1, ...
SparseRatings OnlyItems(const SparseRatings& x,
                        const std::vector<int32_t>& keep) {
  std::vector<Rating> rs;
  for (int32_t u = 0; u < x.rows; ++u) {
    for (int64_t y = x.offsets[u]; y < x.offsets[u + 1]; ++y) {
      const auto at = std::lower_bound(keep.begin(), keep.end(), x.col[y]);
      if (at == keep.end() || *at != x.col[y]) continue;
      rs.push_back({u, static_cast<int32_t>(at - keep.begin()), x.k[y]});
    }
  }
  return SparseRatings::FromRatings(x.rows, static_cast<int32_t>(keep.size()),
                                    rs);
}

// Fewer columns than items: the most-rated items (ties: the lower index),
// and the same P, rows and lambda as a fit on only their entries.
TEST(ItemRegression, FewerColumnsAreTheMostRatedItemsFittedAlone) {
  // Item i rated with a probability falling with i, so the most rated are
  // mostly but not exactly the first ones.
  Rng rng(11);
  std::vector<Rating> rs;
  for (int32_t u = 0; u < 150; ++u) {
    for (int32_t i = 0; i < 20; ++i) {
      if (rng.UniformDouble() < 0.6 - 0.025 * i) rs.push_back({u, i, 3});
    }
  }
  const SparseRatings x = SparseRatings::FromRatings(150, 20, rs);
  std::vector<int64_t> count(20, 0);
  for (const int32_t i : x.col) ++count[static_cast<size_t>(i)];
  std::vector<int32_t> order(20);
  for (int32_t i = 0; i < 20; ++i) order[static_cast<size_t>(i)] = i;
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return count[static_cast<size_t>(a)] > count[static_cast<size_t>(b)];
  });
  std::vector<int32_t> want(order.begin(), order.begin() + 8);
  std::sort(want.begin(), want.end());

  ItemRegressionOptions o;
  o.columns = 8;
  absl::StatusOr<ItemRegression> r = FitItemRegression(x, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->items, 8);
  EXPECT_EQ(r->item_of, want);
  absl::StatusOr<ItemRegression> alone =
      FitItemRegression(OnlyItems(x, want), {});
  ASSERT_TRUE(alone.ok());
  EXPECT_EQ(r->lambda, alone->lambda);
  EXPECT_EQ(r->inverse, alone->inverse);
  EXPECT_EQ(r->row_offsets, alone->row_offsets);
  EXPECT_EQ(r->row_items, alone->row_items);
  for (int32_t c = 0; c < 8; ++c) {
    EXPECT_EQ(r->ColumnOf(r->ItemOf(c)), c);
  }
  int32_t outside = 0;
  for (int32_t i = 0; i < 20; ++i) {
    if (!std::binary_search(want.begin(), want.end(), i)) {
      EXPECT_EQ(r->ColumnOf(i), -1) << i;
      ++outside;
    }
  }
  EXPECT_EQ(outside, 12);
  EXPECT_EQ(r->ColumnOf(-1), -1);
  EXPECT_EQ(r->ColumnOf(20), -1);

  // Scores: the columns' items get the fit-alone scores of the rated items
  // that have columns; the other entries are left as they were.
  std::vector<int32_t> rated_items, rated_columns;
  for (int32_t i = 0; i < 20; i += 3) {
    rated_items.push_back(i);
    if (r->ColumnOf(i) >= 0) rated_columns.push_back(r->ColumnOf(i));
  }
  ASSERT_GT(rated_columns.size(), 1u);
  ASSERT_LT(rated_columns.size(), rated_items.size());
  std::vector<float> got(20, -5.0f), alone_scores(8, 0.0f);
  ItemRegressionScores(*r, rated_items.data(),
                       static_cast<int64_t>(rated_items.size()), got.data());
  ItemRegressionScores(*alone, rated_columns.data(),
                       static_cast<int64_t>(rated_columns.size()),
                       alone_scores.data());
  for (int32_t i = 0; i < 20; ++i) {
    const int32_t c = r->ColumnOf(i);
    EXPECT_EQ(got[static_cast<size_t>(i)],
              c >= 0 ? alone_scores[static_cast<size_t>(c)] : -5.0f)
        << i;
  }

  // Taking a user out works on the columns as for the fit alone.
  ItemRegression a = *r, b = *alone;
  ASSERT_TRUE(RemoveUserFromItemRegression(&a, 4));
  ASSERT_TRUE(RemoveUserFromItemRegression(&b, 4));
  EXPECT_EQ(a.inverse, b.inverse);
  EXPECT_EQ(a.row_items, b.row_items);

  // As many columns as items or more, or 0: every item, no map.
  for (const int64_t all : {int64_t{0}, int64_t{20}, int64_t{50}}) {
    o.columns = all;
    absl::StatusOr<ItemRegression> full = FitItemRegression(x, o);
    ASSERT_TRUE(full.ok());
    EXPECT_EQ(full->items, 20);
    EXPECT_TRUE(full->item_of.empty());
  }
}

}  // namespace
}  // namespace rbmrec
