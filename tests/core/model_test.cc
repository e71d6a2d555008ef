// core/model.h's contracts: Predict's rows are distributions (sum 1, never
// NaN) for known, unknown and empty users by either method; unknown and
// untrained items get the documented fallback; the item histogram,
// expectation and U/I weight.

#include "core/model.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/fit.h"
#include "gtest/gtest.h"
#include "tests/core/synthetic.h"

namespace rbmrec {
namespace {

// A small fitted model; item "extra" is in the id map without ratings.
const Model& SmallModel() {
  static const Model* model = [] {
    auto s = testing_data::PlantedRatings(60, 20, 2, 0.4, 31);
    s.train.items.GetOrAdd("extra");
    TrainOptions o;
    o.hidden = 10;
    o.max_epochs = 4;
    o.batch_size = 10;
    o.rated_hidden = 0;
    o.seed = 2;
    o.threads = 1;
    absl::StatusOr<Model> m = FitModel(s.train, o);
    EXPECT_TRUE(m.ok()) << m.status();
    return new Model(*std::move(m));
  }();
  return *model;
}

void ExpectDistributions(const std::vector<float>& out, int K) {
  ASSERT_EQ(out.size() % static_cast<size_t>(K), 0u);
  for (size_t r = 0; r < out.size() / static_cast<size_t>(K); ++r) {
    double sum = 0;
    for (int k = 0; k < K; ++k) {
      const float p = out[r * static_cast<size_t>(K) + static_cast<size_t>(k)];
      EXPECT_TRUE(std::isfinite(p)) << "row " << r;
      EXPECT_GE(p, 0.0f) << "row " << r;
      sum += p;
    }
    EXPECT_NEAR(sum, 1.0, 1e-5) << "row " << r;
  }
}

TEST(Model, PredictRowsAreDistributions) {
  const Model& m = SmallModel();
  const int K = m.K();
  const UserRatings some{{0, 3, 5}, {4, 0, 2}};
  const UserRatings none;
  std::vector<int32_t> query;
  for (int32_t i = 0; i < m.num_items(); ++i) query.push_back(i);
  query.push_back(-1);
  for (PredictMethod method :
       {PredictMethod::kExact, PredictMethod::kMeanField}) {
    for (int32_t user : {0, 7, -1}) {
      for (const UserRatings* v : {&some, &none}) {
        std::vector<float> out(query.size() * static_cast<size_t>(K), NAN);
        m.Predict(user, v->view(), query, method, out.data(), nullptr);
        ExpectDistributions(out, K);
      }
    }
  }
}

// Unknown (-1) and untrained items get the fallback, flagged: the user's
// own rating histogram, or with no ratings the global training histogram.
TEST(Model, UnknownAndUntrainedItemsGetTheFallback) {
  const Model& m = SmallModel();
  const int K = m.K();
  const int32_t extra = m.items().Find("extra");
  ASSERT_GE(extra, 0);
  EXPECT_FALSE(m.Trained(extra));
  EXPECT_TRUE(m.Trained(0));
  const std::vector<int32_t> query = {-1, extra, 0};
  const UserRatings some{{0, 1, 2, 3}, {4, 4, 0, 4}};
  std::vector<float> out(query.size() * static_cast<size_t>(K));
  std::vector<bool> fallback;
  m.Predict(some.view(), query, PredictMethod::kExact, out.data(), &fallback);
  ASSERT_EQ(fallback.size(), query.size());
  EXPECT_TRUE(fallback[0]);
  EXPECT_TRUE(fallback[1]);
  EXPECT_FALSE(fallback[2]);
  // The user's histogram: 3/4 on the top value, 1/4 on the lowest.
  const std::vector<float> user_hist = {0.25f, 0, 0, 0, 0.75f};
  for (int k = 0; k < K; ++k) {
    EXPECT_FLOAT_EQ(out[static_cast<size_t>(k)], user_hist[k]);
    EXPECT_FLOAT_EQ(out[static_cast<size_t>(K + k)], user_hist[k]);
  }
  // No ratings: the global histogram, whose expectation is the mean of the
  // training ratings.
  const UserRatings none;
  m.Predict(none.view(), query, PredictMethod::kExact, out.data(), &fallback);
  EXPECT_TRUE(fallback[0]);
  double sum = 0, n = 0;
  for (size_t x = 0; x < m.item_hist().size(); ++x) {
    sum += m.item_hist()[x] * m.scale().Value(static_cast<int>(x % K));
    n += m.item_hist()[x];
  }
  EXPECT_NEAR(m.Expectation(out.data()), sum / n, 1e-5);
  std::vector<float> direct(static_cast<size_t>(K));
  m.FallbackDistribution(none.view(), direct.data());
  for (int k = 0; k < K; ++k) EXPECT_EQ(out[static_cast<size_t>(k)], direct[k]);
}

TEST(Model, ItemHistogramIsTheNormalisedCounts) {
  // Three users over two items on a 1..5 scale.
  std::vector<Rating> ratings = {
      {0, 0, 4}, {1, 0, 4}, {2, 0, 1}, {0, 1, 0}, {2, 1, 3}};
  const SparseRatings by_user = SparseRatings::FromRatings(3, 2, ratings);
  const std::vector<uint32_t> counts = ItemHistogramCounts(by_user, 5);
  const std::vector<uint32_t> want = {0, 1, 0, 0, 2, 1, 0, 0, 1, 0};
  EXPECT_EQ(counts, want);
  ModelParams params;
  params.items.GetOrAdd("a");
  params.items.GetOrAdd("b");
  params.item_hist = counts;
  const Model m(std::move(params));
  EXPECT_EQ(m.ItemCount(0), 3u);
  EXPECT_EQ(m.ItemCount(1), 2u);
  std::vector<float> h(5);
  m.ItemHistogram(0, h.data());
  EXPECT_FLOAT_EQ(h[1], 1.0f / 3);
  EXPECT_FLOAT_EQ(h[4], 2.0f / 3);
  EXPECT_FLOAT_EQ(h[0] + h[2] + h[3], 0.0f);
  // Expectation on the scale's values: 2/3 * 5 + 1/3 * 2 = 4.
  EXPECT_NEAR(m.Expectation(h.data()), 4.0, 1e-6);
}

// exp(W) tables: kept up to 64 MiB whatever the data, beyond that up to 16
// bytes a training rating, never past 512 MiB (the 10 M synthetic set's
// I-RBM, 240 MB for 10 M ratings, is refused; its U-RBM's 40 MB is kept).
TEST(Model, ExpTablesFollowTheirSizeRule) {
  constexpr int64_t kMiB = int64_t{1} << 20;
  EXPECT_TRUE(Model::ExpTableWanted(64 * kMiB, 0));
  EXPECT_FALSE(Model::ExpTableWanted(64 * kMiB + 1, 0));
  EXPECT_TRUE(Model::ExpTableWanted(40'000'000, 10'000'000));
  EXPECT_FALSE(Model::ExpTableWanted(240'000'000, 10'000'000));
  EXPECT_TRUE(Model::ExpTableWanted(240'000'000, 15'000'000));
  EXPECT_FALSE(Model::ExpTableWanted(240'000'000, 14'999'999));
  EXPECT_TRUE(Model::ExpTableWanted(512 * kMiB, 100'000'000));
  EXPECT_FALSE(Model::ExpTableWanted(512 * kMiB + 1, 100'000'000));
  // A small model keeps every table, one row per row of its W.
  const Model& m = SmallModel();
  for (size_t e = 0; e < m.members().size(); ++e) {
    EXPECT_EQ(m.member_exp(e).ew.rows(), m.members()[e].W.rows());
  }
  EXPECT_EQ(m.item_rbm_exp().ew.rows(), m.item_rbm().W.rows());
}

// ExpTables::kNone: no table at all, whatever their size, and the same
// exact predictions up to rounding (SoftplusSum instead of the table's
// products), both RBMs and the mix.
TEST(Model, WithoutExpTablesPredictsTheSame) {
  const Model& m = SmallModel();
  ASSERT_GT(m.item_rbm_exp().ew.rows(), 0);
  const Model bare(m.params(), Model::ExpTables::kNone);
  for (size_t e = 0; e < bare.members().size(); ++e) {
    EXPECT_EQ(bare.member_exp(e).ew.size(), 0);
  }
  EXPECT_EQ(bare.item_rbm_exp().ew.size(), 0);
  const int K = m.K();
  const UserRatings some{{0, 3, 5}, {4, 0, 2}};
  std::vector<int32_t> query;
  for (int32_t i = 0; i < m.num_items(); ++i) query.push_back(i);
  for (int32_t user : {0, 7}) {
    std::vector<float> a(query.size() * static_cast<size_t>(K));
    std::vector<float> b(a.size());
    m.Predict(user, some.view(), query, PredictMethod::kExact, a.data(),
              nullptr);
    bare.Predict(user, some.view(), query, PredictMethod::kExact, b.data(),
                 nullptr);
    for (size_t x = 0; x < a.size(); ++x) EXPECT_NEAR(a[x], b[x], 1e-5) << x;
  }
}

TEST(Model, UserWeightIsClampedToZeroOne) {
  ModelParams params;
  params.items.GetOrAdd("a");
  params.item_hist = {1, 0, 0, 0, 0};
  params.user_weight = 0.9f;
  params.user_weight_per_log_user = 0.5f;
  const Model up(params);
  EXPECT_NEAR(up.UserWeight(0, 0), 0.9f, 1e-6);
  EXPECT_EQ(up.UserWeight(1000, 0), 1.0f);
  params.user_weight = 0.1f;
  params.user_weight_per_log_user = -0.5f;
  const Model down(params);
  EXPECT_EQ(down.UserWeight(1000, 0), 0.0f);
}

}  // namespace
}  // namespace rbmrec
