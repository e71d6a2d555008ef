#include "core/rated_rbm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "Eigen/SVD"
#include "core/rng.h"
#include "gtest/gtest.h"

namespace rbmrec {
namespace {

// Users and items in `groups` groups: a user rates each item of their own
// group with probability `in` and every other item with probability `out`;
// about a fifth of each user's items go to `valid`.
void GroupedRatedSets(int users, int items, int groups, double in, double out,
                      uint64_t seed, SparseRatings* train,
                      SparseRatings* valid) {
  Rng rng(seed);
  std::vector<Rating> tr, va;
  for (int u = 0; u < users; ++u) {
    for (int i = 0; i < items; ++i) {
      const double p = (u % groups) == (i % groups) ? in : out;
      if (rng.UniformDouble() >= p) continue;
      (rng.UniformDouble() < 0.2 ? va : tr).push_back(Rating{u, i, 0});
    }
  }
  *train = SparseRatings::FromRatings(users, items, tr);
  *valid = SparseRatings::FromRatings(users, items, va);
}

// Mean NDCG@10 of the held-out items over the users with some, each user
// ranking the candidates (the items outside their training set; with
// `has_data`, only those with training data) in the order rank(u, &cand)
// leaves them. *users: how many users were ranked.
template <typename Rank>
double MeanNdcgAt10(const SparseRatings& train, const SparseRatings& valid,
                    const std::vector<uint8_t>* has_data, const Rank& rank,
                    int* users = nullptr) {
  double sum = 0;
  int n = 0;
  for (int32_t u = 0; u < valid.rows; ++u) {
    if (valid.RowSize(u) == 0) continue;
    const int32_t* tb = train.col.data() + train.offsets[u];
    const int32_t* te = tb + train.RowSize(u);
    const int32_t* vb = valid.col.data() + valid.offsets[u];
    const int32_t* ve = vb + valid.RowSize(u);
    std::vector<int32_t> cand;
    for (int32_t i = 0; i < train.cols; ++i) {
      if (has_data != nullptr && !(*has_data)[static_cast<size_t>(i)]) continue;
      if (!std::binary_search(tb, te, i)) cand.push_back(i);
    }
    rank(u, &cand);
    double dcg = 0, ideal = 0;
    for (size_t r = 0; r < std::min<size_t>(10, cand.size()); ++r) {
      if (std::binary_search(vb, ve, cand[r]))
        dcg += 1 / std::log2(static_cast<double>(r) + 2.0);
    }
    for (int64_t r = 0; r < std::min<int64_t>(10, valid.RowSize(u)); ++r) {
      ideal += 1 / std::log2(static_cast<double>(r) + 2.0);
    }
    sum += dcg / ideal;
    ++n;
  }
  if (users != nullptr) *users = n;
  return sum / n;
}

// MeanNdcgAt10 with every user's candidates in a random order: what a model
// that learned nothing scores.
double RandomOrderNdcg(const SparseRatings& train, const SparseRatings& valid,
                       uint64_t seed) {
  Rng rng(seed);
  return MeanNdcgAt10(train, valid, nullptr,
                      [&](int32_t, std::vector<int32_t>* cand) {
                        for (size_t t = cand->size(); t > 1; --t) {
                          std::swap((*cand)[t - 1], (*cand)[rng.Below(t)]);
                        }
                      });
}

RatedRbmOptions SmallOptions() {
  RatedRbmOptions o;
  o.hidden = 8;
  o.max_epochs = 40;
  o.batch_size = 16;
  o.learning_rate = 0.05f;
  o.seed = 11;
  return o;
}

TEST(RatedRbm, HiddenAndLogitsFollowTheFormulas) {
  RbmParams p;
  p.Resize(5, 1, 3);
  Rng rng(3);
  for (int64_t i = 0; i < p.W.size(); ++i) {
    p.W.data()[i] = static_cast<float>(rng.Normal());
  }
  for (int i = 0; i < 5; ++i) p.b[i] = static_cast<float>(rng.Normal());
  for (int j = 0; j < 3; ++j) p.c[j] = static_cast<float>(rng.Normal());
  const std::vector<int32_t> items = {1, 3, 7, -2};  // 7, -2: out of range
  std::vector<float> h(3), logits(5);
  RatedHidden(p, items.data(), static_cast<int64_t>(items.size()), h.data());
  for (int j = 0; j < 3; ++j) {
    const double x = p.c[j] + p.W(1, j) + p.W(3, j);
    EXPECT_NEAR(h[j], 1.0 / (1.0 + std::exp(-x)), 1e-6);
  }
  RatedLogits(p, h.data(), logits.data());
  for (int i = 0; i < 5; ++i) {
    double want = p.b[i];
    for (int j = 0; j < 3; ++j) want += p.W(i, j) * h[j];
    EXPECT_NEAR(logits[i], want, 1e-5);
  }
}

TEST(RatedRbm, NothingOverflowsToNaN) {
  RbmParams p;
  p.Resize(3, 1, 2);
  p.W.setConstant(1e30f);
  p.W(1, 0) = -1e30f;
  p.b.setConstant(-1e30f);
  const std::vector<int32_t> items = {0, 1, 2};
  std::vector<float> h(2), logits(3);
  RatedHidden(p, items.data(), 3, h.data());
  for (float x : h) {
    EXPECT_TRUE(std::isfinite(x));
    EXPECT_GE(x, 0.0f);
    EXPECT_LE(x, 1.0f);
  }
  for (float x : {1e38f, -1e38f, INFINITY, -INFINITY, 0.0f}) {
    const float s = StableSigmoid(x);
    EXPECT_TRUE(std::isfinite(s)) << x;
    EXPECT_GE(s, 0.0f);
    EXPECT_LE(s, 1.0f);
  }
}

// Unfactored and factored (W = A B through 4 factors).
class RatedRbmFactors : public ::testing::TestWithParam<int> {
 protected:
  RatedRbmOptions Options() const {
    RatedRbmOptions o = SmallOptions();
    o.factors = GetParam();
    return o;
  }
};

INSTANTIATE_TEST_SUITE_P(Factors, RatedRbmFactors, ::testing::Values(0, 4));

TEST_P(RatedRbmFactors, LearnsWhichItemsGoTogether) {
  SparseRatings train, valid;
  GroupedRatedSets(200, 40, 2, 0.5, 0.03, 5, &train, &valid);
  absl::StatusOr<RatedRbmResult> r = TrainRatedRbm(train, valid, Options());
  ASSERT_TRUE(r.ok()) << r.status();
  const RbmParams& p = r->params;
  ASSERT_EQ(p.num_items, 40);
  ASSERT_EQ(p.K, 1);
  // For almost every user, the unrated items of their own group are more
  // likely to be rated than those of the other group, though both groups
  // are equally popular overall.
  int right = 0, users = 0;
  std::vector<float> h(p.F), logits(40);
  for (int32_t u = 0; u < train.rows; ++u) {
    if (train.RowSize(u) == 0) continue;
    const int32_t* items = train.col.data() + train.offsets[u];
    RatedHidden(p, items, train.RowSize(u), h.data());
    RatedLogits(p, h.data(), logits.data());
    double own = 0, other = 0;
    int n_own = 0, n_other = 0;
    for (int i = 0; i < 40; ++i) {
      if (std::binary_search(items, items + train.RowSize(u), i)) continue;
      if (i % 2 == u % 2) {
        own += logits[i];
        ++n_own;
      } else {
        other += logits[i];
        ++n_other;
      }
    }
    ++users;
    if (n_own > 0 && own / n_own > other / n_other) ++right;
  }
  EXPECT_GE(right, users * 95 / 100) << right << " of " << users;
  // Validation NDCG: held-out items are mostly from the user's own group,
  // so a model that learned the groups ranks them well above chance.
  const double chance = RandomOrderNdcg(train, valid, 1);
  EXPECT_GT(r->best_valid_ndcg, chance + 0.1) << "chance " << chance;
  ASSERT_GE(r->best_epoch, 1);
  ASSERT_LE(r->best_epoch, r->epochs_run);
  EXPECT_EQ(r->valid_ndcg[static_cast<size_t>(r->best_epoch - 1)],
            r->best_valid_ndcg);
  EXPECT_EQ(*std::max_element(r->valid_ndcg.begin(), r->valid_ndcg.end()),
            r->best_valid_ndcg);
  EXPECT_GT(r->best_valid_ndcg, r->valid_ndcg.front());
}

// The validation NDCG the trainer reports for its best epoch, against a
// direct ranking of every candidate with the returned parameters
// (RatedHidden / RatedLogits, std::sort), on more items than one 8-wide
// vector so the vectorised scan runs. Both rank through float products
// summed in different orders, so near-ties may swap: a swap moves one
// user's NDCG, so the two agree to well under 1 / users.
TEST_P(RatedRbmFactors, ValidationNdcgMatchesADirectRanking) {
  SparseRatings train, valid;
  GroupedRatedSets(150, 203, 3, 0.3, 0.02, 4, &train, &valid);
  RatedRbmOptions o = Options();
  o.patience = 10;  // past the first flat epochs: a model with structure
  absl::StatusOr<RatedRbmResult> r = TrainRatedRbm(train, valid, o);
  ASSERT_TRUE(r.ok()) << r.status();
  const RbmParams& p = r->params;
  std::vector<uint8_t> has_data(203, 0);
  for (int32_t i : train.col) has_data[static_cast<size_t>(i)] = 1;
  std::vector<float> h(static_cast<size_t>(p.F)), logits(203);
  int users = 0;
  const double direct = MeanNdcgAt10(
      train, valid, &has_data,
      [&](int32_t u, std::vector<int32_t>* cand) {
        RatedHidden(p, train.col.data() + train.offsets[u], train.RowSize(u),
                    h.data());
        RatedLogits(p, h.data(), logits.data());
        std::sort(cand->begin(), cand->end(), [&](int32_t a, int32_t b) {
          return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
        });
      },
      &users);
  ASSERT_GT(users, 100);
  EXPECT_NEAR(r->best_valid_ndcg, direct, 0.5 / users);
  EXPECT_GT(r->best_valid_ndcg, RandomOrderNdcg(train, valid, 1) + 0.05);
}

TEST_P(RatedRbmFactors, SameSeedSameBitsAtAnyThreadCount) {
  SparseRatings train, valid;
  // More items than one work chunk (256), so two threads really split them.
  GroupedRatedSets(120, 600, 3, 0.1, 0.01, 9, &train, &valid);
  RatedRbmOptions o = Options();
  o.max_epochs = 3;
  o.threads = 1;
  absl::StatusOr<RatedRbmResult> a = TrainRatedRbm(train, valid, o);
  o.threads = 2;
  absl::StatusOr<RatedRbmResult> b = TrainRatedRbm(train, valid, o);
  absl::StatusOr<RatedRbmResult> c = TrainRatedRbm(train, valid, o);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_TRUE(a->params == b->params);
  EXPECT_TRUE(b->params == c->params);
  EXPECT_EQ(a->valid_ndcg, b->valid_ndcg);
  o.seed += 1;
  absl::StatusOr<RatedRbmResult> d = TrainRatedRbm(train, valid, o);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(a->params == d->params);
}

// Factored, W = A B has rank at most C (no averaging in this trainer);
// unfactored, it does not; the factored and unfactored models differ.
TEST(RatedRbm, FactoredWeightsHaveRankAtMostC) {
  SparseRatings train, valid;
  GroupedRatedSets(200, 40, 4, 0.5, 0.03, 5, &train, &valid);
  auto fit = [&](int factors) {
    RatedRbmOptions o = SmallOptions();
    o.max_epochs = 5;
    o.factors = factors;
    return TrainRatedRbm(train, valid, o);
  };
  const absl::StatusOr<RatedRbmResult> f = fit(3), d = fit(0);
  ASSERT_TRUE(f.ok() && d.ok());
  auto rank = [](const RowMatrixXf& w) {
    Eigen::JacobiSVD<Eigen::MatrixXf> svd(w);
    const Eigen::VectorXf s = svd.singularValues();
    int r = 0;
    for (Eigen::Index i = 0; i < s.size(); ++i) r += s[i] > 1e-4f * s[0];
    return r;
  };
  EXPECT_LE(rank(f->params.W), 3);
  EXPECT_EQ(rank(d->params.W), 8);
  EXPECT_FALSE(f->params == d->params);
}

TEST(RatedRbm, WithoutValidationRunsEveryEpoch) {
  SparseRatings train, valid;
  GroupedRatedSets(60, 20, 2, 0.5, 0.05, 2, &train, &valid);
  RatedRbmOptions o = SmallOptions();
  o.max_epochs = 4;
  absl::StatusOr<RatedRbmResult> r = TrainRatedRbm(train, SparseRatings{}, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->epochs_run, 4);
  EXPECT_EQ(r->best_epoch, 4);
  EXPECT_EQ(r->best_valid_ndcg, -1);
}

TEST(RatedRbm, ProgressCanCancel) {
  SparseRatings train, valid;
  GroupedRatedSets(60, 20, 2, 0.5, 0.05, 2, &train, &valid);
  int calls = 0;
  absl::StatusOr<RatedRbmResult> r =
      TrainRatedRbm(train, valid, SmallOptions(), [&](int epoch, double) {
        ++calls;
        return epoch < 2;
      });
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->cancelled);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(r->epochs_run, 2);
}

TEST(RatedRbm, RejectsBadOptionsAndShapes) {
  SparseRatings train, valid;
  GroupedRatedSets(20, 10, 2, 0.5, 0.05, 2, &train, &valid);
  for (auto edit : std::vector<void (*)(RatedRbmOptions*)>{
           [](RatedRbmOptions* o) { o->hidden = 0; },
           [](RatedRbmOptions* o) { o->max_epochs = 0; },
           [](RatedRbmOptions* o) { o->batch_size = 0; },
           [](RatedRbmOptions* o) { o->learning_rate = NAN; },
           [](RatedRbmOptions* o) { o->momentum = 1; },
           [](RatedRbmOptions* o) { o->weight_decay = -1; },
           [](RatedRbmOptions* o) { o->patience = 0; },
           [](RatedRbmOptions* o) { o->factors = -1; }}) {
    RatedRbmOptions o = SmallOptions();
    edit(&o);
    absl::StatusOr<RatedRbmResult> r = TrainRatedRbm(train, valid, o);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  }
  SparseRatings other = SparseRatings::FromRatings(20, 11, {Rating{0, 10, 0}});
  EXPECT_FALSE(TrainRatedRbm(train, other, SmallOptions()).ok());
}

}  // namespace
}  // namespace rbmrec
