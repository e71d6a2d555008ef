// BuildLowRank / RefreshLowRankRows: the form is found exactly when W has
// low rank, every row's product stays within kLowRankRowTolerance of
// W_i . h (rows an edit moved off V's span are served exactly), and one row
// through LowRankRow is the full pass's bit for bit.
#include "core/low_rank.h"

#include <cmath>
#include <random>
#include <vector>

#include "core/kernels.h"
#include "gtest/gtest.h"

namespace rbmrec {
namespace {

RowMatrixXf Random(int64_t rows, int cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 0.3f);
  RowMatrixXf m(rows, cols);
  for (int64_t i = 0; i < rows; ++i) {
    for (int j = 0; j < cols; ++j) m(i, j) = g(rng);
  }
  return m;
}

std::vector<float> RandomH(int F, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> h(static_cast<size_t>(F));
  for (float& x : h) x = u(rng);
  return h;
}

// The full pass: U z through MatVecRows, then the exact rows.
std::vector<float> FullPass(const LowRankRows& lr, const RowMatrixXf& w,
                            const std::vector<float>& h) {
  std::vector<float> z(static_cast<size_t>(lr.rank())),
      out(static_cast<size_t>(w.rows()));
  LowRankInput(lr, h.data(), z.data());
  const float* zp = z.data();
  float* op = out.data();
  kernels::MatVecRows(lr.u.data(), lr.u.rows(), lr.rank(), &zp, &op, 1);
  LowRankExactRows(lr, w, h.data(), out.data());
  return out;
}

// Every row within the tolerance of W_i . h, and LowRankRow equal to the
// full pass bit for bit.
void ExpectServes(const LowRankRows& lr, const RowMatrixXf& w) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    const std::vector<float> h = RandomH(static_cast<int>(w.cols()), seed);
    const std::vector<float> out = FullPass(lr, w, h);
    std::vector<float> z(static_cast<size_t>(lr.rank()));
    LowRankInput(lr, h.data(), z.data());
    for (int64_t i = 0; i < w.rows(); ++i) {
      double want = 0;
      for (int j = 0; j < w.cols(); ++j) {
        want += static_cast<double>(w(i, j)) * h[static_cast<size_t>(j)];
      }
      EXPECT_NEAR(out[static_cast<size_t>(i)], want, 2 * kLowRankRowTolerance)
          << "row " << i;
      EXPECT_EQ(LowRankRow(lr, w, i, h.data(), z.data()),
                out[static_cast<size_t>(i)])
          << "row " << i;
    }
  }
}

TEST(LowRank, FindsTheRankOfAProductAndServesEveryRow) {
  const RowMatrixXf w = Random(300, 7, 1) * Random(7, 40, 2);
  const LowRankRows lr = BuildLowRank(w);
  ASSERT_FALSE(lr.empty());
  EXPECT_EQ(lr.rank(), 7);
  EXPECT_TRUE(lr.exact_rows.empty());
  ExpectServes(lr, w);
  // Deterministic.
  const LowRankRows again = BuildLowRank(w);
  EXPECT_TRUE(again.u == lr.u);
  EXPECT_TRUE(again.vt == lr.vt);
}

TEST(LowRank, FullRankOrTinyMatricesHaveNoForm) {
  EXPECT_TRUE(BuildLowRank(Random(300, 40, 3)).empty());
  // Rank 25 of 40 columns: more than half, no gain.
  EXPECT_TRUE(BuildLowRank(Random(300, 25, 4) * Random(25, 40, 5)).empty());
  EXPECT_TRUE(BuildLowRank(RowMatrixXf::Zero(300, 40)).empty());
  EXPECT_TRUE(BuildLowRank(RowMatrixXf(0, 40)).empty());
  RowMatrixXf nan = Random(300, 7, 6) * Random(7, 40, 7);
  nan(3, 4) = NAN;
  EXPECT_TRUE(BuildLowRank(nan).empty());
}

TEST(LowRank, EditedRowsOffTheSpanAreServedExactly) {
  RowMatrixXf w = Random(300, 5, 8) * Random(5, 40, 9);
  LowRankRows lr = BuildLowRank(w);
  ASSERT_EQ(lr.rank(), 5);
  // Row 17 leaves V's span; row 18 moves within it.
  w.row(17) = Random(1, 40, 10);
  w.row(18) = 2.0f * w.row(19);
  RefreshLowRankRows(w, 17, 19, &lr);
  EXPECT_EQ(lr.exact_rows, std::vector<int32_t>{17});
  ExpectServes(lr, w);
  // Rows added (zeros, as AddItems adds them) and one more off the span.
  RowMatrixXf grown = RowMatrixXf::Zero(310, 40);
  grown.topRows(300) = w;
  grown.row(305) = Random(1, 40, 11);
  RefreshLowRankRows(grown, 300, 300, &lr);
  EXPECT_EQ(lr.u.rows(), 310);
  EXPECT_EQ(lr.exact_rows, (std::vector<int32_t>{17, 305}));
  ExpectServes(lr, grown);
  // Row 17 back on the span.
  grown.row(17) = grown.row(16);
  RefreshLowRankRows(grown, 17, 18, &lr);
  EXPECT_EQ(lr.exact_rows, std::vector<int32_t>{305});
  ExpectServes(lr, grown);
}

// LowRankAddRows: the sum of the rows through the form, an exact row and
// repeated rows included, rows out of range skipped.
TEST(LowRank, AddRowsIsTheSumOfTheRows) {
  RowMatrixXf w = Random(50, 3, 16) * Random(3, 30, 17);
  LowRankRows lr = BuildLowRank(w);
  ASSERT_EQ(lr.rank(), 3);
  w.row(9) = Random(1, 30, 18);
  RefreshLowRankRows(w, 9, 10, &lr);
  ASSERT_EQ(lr.exact_rows, std::vector<int32_t>{9});
  const std::vector<int32_t> rows = {0, 9, 4, 4, -1, 50, 49};
  std::vector<float> out(30, 1.0f), sum;
  LowRankAddRows(lr, w, rows.data(), static_cast<int64_t>(rows.size()),
                 out.data(), &sum);
  EXPECT_EQ(sum.size(), 3u);
  for (int j = 0; j < 30; ++j) {
    const double want = 1.0 + w(0, j) + w(9, j) + 2.0 * w(4, j) + w(49, j);
    EXPECT_NEAR(out[static_cast<size_t>(j)], want, 5 * kLowRankRowTolerance)
        << "column " << j;
  }
}

// Noise of 2e-5 on each weight of a row: below kLowRankEigenRatio's share
// of W^T W (V leaves it out) but an L1 residual above the tolerance (the
// row is served exactly). Few such rows keep the form; more than an eighth
// of the rows do not.
TEST(LowRank, RowsOffTheSpanAtBuildAreExactUpToAnEighth) {
  const RowMatrixXf base = Random(80, 4, 12) * Random(4, 40, 13);
  const RowMatrixXf noise = 2e-5f * Random(80, 40, 14).array().sign().matrix();
  RowMatrixXf w = base;
  for (int i = 0; i < 5; ++i) w.row(i) += noise.row(i);
  const LowRankRows few = BuildLowRank(w);
  ASSERT_FALSE(few.empty());
  EXPECT_EQ(few.rank(), 4);
  EXPECT_EQ(few.exact_rows, (std::vector<int32_t>{0, 1, 2, 3, 4}));
  ExpectServes(few, w);
  for (int i = 5; i < 11; ++i) w.row(i) += noise.row(i);
  EXPECT_TRUE(BuildLowRank(w).empty());  // 11 of 80
}

}  // namespace
}  // namespace rbmrec
