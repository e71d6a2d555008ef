#include "core/mf.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/fit.h"
#include "gtest/gtest.h"
#include "tests/core/synthetic.h"

namespace rbmrec {
namespace {

const RatingScale& Stars() {
  static const RatingScale scale;  // 1..5
  return scale;
}

// The planted set's training ratings by user.
SparseRatings TrainByUser(const testing_data::Split& s) {
  return s.train.ByUser();
}

TEST(TrainMf, SameFactorsAtAnyThreadCount) {
  const auto s = testing_data::PlantedRatings(120, 50, 3, 0.4, 11);
  MfOptions o;
  o.factors = 20;  // not a multiple of 8
  o.epochs = 4;
  o.threads = 1;
  const MfParams one = TrainMf(TrainByUser(s), Stars(), o);
  ASSERT_FALSE(one.empty());
  for (int threads : {2, 3, 8}) {
    o.threads = threads;
    const MfParams other = TrainMf(TrainByUser(s), Stars(), o);
    EXPECT_TRUE(one.q == other.q) << threads << " threads";
    EXPECT_EQ(one.trained, other.trained);
  }
  o.seed = 2;
  EXPECT_FALSE(one.q == TrainMf(TrainByUser(s), Stars(), o).q);
}

// A training continued from its state (FitMfBlend's refit) is the longer
// training, bit for bit, at any thread count; a state of other shapes is
// not used.
TEST(TrainMf, ContinuesFromItsState) {
  const auto s = testing_data::PlantedRatings(90, 40, 3, 0.4, 13);
  const SparseRatings by_user = TrainByUser(s);
  MfOptions o;
  o.factors = 12;
  o.epochs = 7;
  const MfParams whole = TrainMf(by_user, Stars(), o);
  for (int threads : {1, 3}) {
    o.threads = threads;
    MfTrainState state;
    o.epochs = 4;
    const MfParams first = TrainMf(by_user, Stars(), o, &state);
    EXPECT_EQ(state.epochs_done, 4);
    EXPECT_TRUE(state.q == first.q);
    EXPECT_FALSE(first.q == whole.q);
    o.epochs = 3;
    const MfParams rest = TrainMf(by_user, Stars(), o, &state);
    EXPECT_EQ(state.epochs_done, 7);
    EXPECT_TRUE(rest.q == whole.q) << threads << " threads";
  }
  // Another factor count: a fresh training of 3 passes, and the state now
  // holds that one.
  MfTrainState state;
  o.epochs = 4;
  TrainMf(by_user, Stars(), o, &state);
  o.factors = 10;
  o.epochs = 3;
  const MfParams fresh = TrainMf(by_user, Stars(), o);
  EXPECT_TRUE(TrainMf(by_user, Stars(), o, &state).q == fresh.q);
  EXPECT_EQ(state.epochs_done, 3);
  EXPECT_EQ(state.p.cols(), 10);
}

// progress sees every pass, numbered on through a continuation, with the
// RMSE of its errors; returning false stops there, with the factors of
// that pass.
TEST(TrainMf, ReportsEveryPassAndStopsWhenAsked) {
  const auto s = testing_data::PlantedRatings(90, 40, 3, 0.4, 17);
  const SparseRatings by_user = TrainByUser(s);
  MfOptions o;
  o.factors = 8;
  o.epochs = 6;
  std::vector<std::pair<int, double>> seen;
  o.progress = [&](int epoch, double rmse) {
    seen.emplace_back(epoch, rmse);
    return true;
  };
  MfTrainState state;
  TrainMf(by_user, Stars(), o, &state);
  o.epochs = 2;
  TrainMf(by_user, Stars(), o, &state);
  ASSERT_EQ(seen.size(), 8u);
  for (size_t e = 0; e < seen.size(); ++e) {
    EXPECT_EQ(seen[e].first, static_cast<int>(e) + 1);
    EXPECT_TRUE(seen[e].second > 0 && seen[e].second < 4) << seen[e].second;
  }
  EXPECT_LT(seen.back().second, 0.9 * seen.front().second);
  EXPECT_FALSE(state.stopped);

  o.epochs = 3;
  o.progress = nullptr;
  const MfParams three = TrainMf(by_user, Stars(), o);
  o.epochs = 10;
  o.progress = [](int epoch, double) { return epoch < 3; };
  MfTrainState stopped;
  const MfParams cut = TrainMf(by_user, Stars(), o, &stopped);
  EXPECT_TRUE(stopped.stopped);
  EXPECT_EQ(stopped.epochs_done, 3);
  EXPECT_TRUE(cut.q == three.q);
}

// Held-out ratings predicted from folded-in factors beat the global mean
// on data with planted taste groups, and training longer helps.
TEST(TrainMf, FoldedInFactorsPredictHeldOutRatings) {
  const auto s = testing_data::PlantedRatings(200, 60, 3, 0.5, 3);
  const SparseRatings by_user = TrainByUser(s);
  double mean = 0;
  for (const Rating& r : s.train.ratings) mean += r.k + 1;
  mean /= static_cast<double>(s.train.ratings.size());
  auto rmse = [&](const MfParams& mf) {
    double se = 0, se_mean = 0;
    std::vector<float> p(static_cast<size_t>(mf.factors));
    for (const TestRating& t : s.test) {
      const VisibleSet v{by_user.col.data() + by_user.offsets[t.user],
                         by_user.k.data() + by_user.offsets[t.user],
                         by_user.RowSize(t.user)};
      FoldInUser(mf, Stars(), v, p.data());
      const double d = MfScore(mf, p.data(), t.item) - t.rating;
      se += d * d;
      se_mean += (mean - t.rating) * (mean - t.rating);
    }
    const double n = static_cast<double>(s.test.size());
    return std::make_pair(std::sqrt(se / n), std::sqrt(se_mean / n));
  };
  MfOptions o;
  o.factors = 8;
  o.epochs = 1;
  const auto [short_rmse, mean_rmse] = rmse(TrainMf(by_user, Stars(), o));
  o.epochs = 20;
  const double long_rmse = rmse(TrainMf(by_user, Stars(), o)).first;
  EXPECT_LT(long_rmse, short_rmse);
  EXPECT_LT(long_rmse, 0.8 * mean_rmse);
}

TEST(TrainMf, NoRatingsOrNoFactorsIsEmpty) {
  SparseRatings none;
  none.rows = 3;
  none.cols = 4;
  none.offsets.assign(4, 0);
  EXPECT_TRUE(TrainMf(none, Stars(), MfOptions{}).empty());
  const auto s = testing_data::PlantedRatings(20, 10, 2, 0.5, 1);
  MfOptions o;
  o.factors = 0;
  EXPECT_TRUE(TrainMf(TrainByUser(s), Stars(), o).empty());
}

// The folded-in factor depends on the set of ratings, not their order, and
// skips items without a trained factor (unknown to it, or never rated).
TEST(FoldInUser, DependsOnTheSetOfRatingsOnly) {
  auto s = testing_data::PlantedRatings(60, 30, 2, 0.5, 5);
  s.train.items.GetOrAdd("never-rated");  // item 30: no training rating
  MfOptions o;
  o.factors = 9;
  o.epochs = 3;
  const MfParams mf = TrainMf(s.train.ByUser(), Stars(), o);
  ASSERT_EQ(mf.q.rows(), 31);
  EXPECT_TRUE(mf.Serves(3));
  EXPECT_FALSE(mf.Serves(30));
  EXPECT_FALSE(mf.Serves(31));
  EXPECT_FALSE(mf.Serves(-1));
  std::vector<int32_t> items = {4, 17, 2, 9, 25};
  std::vector<uint8_t> ks = {4, 0, 3, 2, 4};
  std::vector<float> a(9), b(9), c(9);
  EXPECT_EQ(FoldInUser(mf, Stars(), {items.data(), ks.data(), 5}, a.data()), 5);
  std::vector<int32_t> items2 = {25, 2, 9, 4, 17, 30, 31};
  std::vector<uint8_t> ks2 = {4, 3, 2, 4, 0, 1, 2};
  EXPECT_EQ(FoldInUser(mf, Stars(), {items2.data(), ks2.data(), 7}, b.data()),
            5);  // items 30 and 31 skipped
  EXPECT_EQ(a, b);
  ks[1] = 4;  // another rating of item 17
  FoldInUser(mf, Stars(), {items.data(), ks.data(), 5}, c.data());
  EXPECT_NE(a, c);
  // No usable rating: the start every user has, the same for all.
  std::vector<float> e1(9), e2(9);
  EXPECT_EQ(FoldInUser(mf, Stars(), {nullptr, nullptr, 0}, e1.data()), 0);
  EXPECT_EQ(FoldInUser(mf, Stars(), {items2.data() + 5, ks2.data() + 5, 2},
                       e2.data()),
            0);
  EXPECT_EQ(e1, e2);
  for (const float x : e1) EXPECT_TRUE(std::isfinite(x));
}

// The fold-in's steps are LIBMF's AdaGrad update (docs/model.md): with one
// rating, whose order cannot matter, the factor after each pass equals a
// textbook computation of g = -e q + lambda p, p -= lr / sqrt(G) g,
// G += mean(g^2), from the start every user has. Widths with a 32-lane
// body, an 8-lane part and a scalar tail.
TEST(FoldInUser, OneRatingFollowsTheAdaGradStep) {
  auto s = testing_data::PlantedRatings(60, 30, 2, 0.5, 5);
  for (const int n : {8, 45, 128}) {
    MfOptions o;
    o.factors = n;
    o.epochs = 2;
    MfParams mf = TrainMf(s.train.ByUser(), Stars(), o);
    ASSERT_FALSE(mf.empty());
    const int32_t item = 7;
    const uint8_t k = 4;  // 5 stars
    std::vector<float> start(static_cast<size_t>(n));
    ASSERT_EQ(FoldInUser(mf, Stars(), {nullptr, nullptr, 0}, start.data()), 0);
    std::vector<double> p(start.begin(), start.end());
    double G = 1;
    for (int passes = 1; passes <= 6; ++passes) {
      double e = 5;
      for (int j = 0; j < n; ++j) e -= p[j] * mf.q(item, j);
      double sum_g2 = 0;
      const double step = mf.learning_rate / std::sqrt(G);
      for (int j = 0; j < n; ++j) {
        const double g = -e * mf.q(item, j) + mf.lambda * p[j];
        sum_g2 += g * g;
        p[j] -= step * g;
      }
      G += sum_g2 / n;
      mf.fold_epochs = passes;
      std::vector<float> got(static_cast<size_t>(n));
      ASSERT_EQ(FoldInUser(mf, Stars(), {&item, &k, 1}, got.data()), 1);
      for (int j = 0; j < n; ++j) {
        EXPECT_NEAR(got[static_cast<size_t>(j)], p[j], 1e-5)
            << "width " << n << ", pass " << passes << ", factor " << j;
      }
    }
  }
}

// More factors than any model may hold (kMaxMfFactors, which model files
// and options check): the fold-in uses no rating and leaves a zero factor
// rather than stepping past its buffer.
TEST(FoldInUser, MoreFactorsThanAnyModelUseNoRating) {
  MfParams mf;
  mf.factors = kMaxMfFactors + 1;
  mf.fold_epochs = 2;
  mf.lambda = 0.05f;
  mf.learning_rate = 0.1f;
  mf.q = RowMatrixXf::Constant(2, mf.factors, 0.1f);
  mf.trained = {1, 1};
  const int32_t items[] = {0, 1};
  const uint8_t ks[] = {4, 2};
  std::vector<float> p(static_cast<size_t>(mf.factors), 7.0f);
  EXPECT_EQ(FoldInUser(mf, Stars(), {items, ks, 2}, p.data()), 0);
  for (const float x : p) ASSERT_EQ(x, 0.0f);
}

double Mean(const float* p) {
  double m = 0;
  for (int k = 0; k < 5; ++k) m += p[k] * static_cast<double>(k + 1);
  return m;
}

double Sum(const float* p) {
  double t = 0;
  for (int k = 0; k < 5; ++k) t += p[k];
  return t;
}

TEST(TiltToMean, HitsTheTargetAndKeepsZeros) {
  for (const double target : {1.3, 2.0, 3.1, 3.9, 4.7}) {
    float p[5] = {0.1f, 0.2f, 0.3f, 0.25f, 0.15f};
    TiltToMean(Stars(), target, p);
    EXPECT_NEAR(Mean(p), target, 1e-5) << target;
    EXPECT_NEAR(Sum(p), 1.0, 1e-6);
    for (const float x : p) EXPECT_GT(x, 0.0f);
  }
  float z[5] = {0.0f, 0.5f, 0.0f, 0.5f, 0.0f};  // support {2, 4}
  TiltToMean(Stars(), 3.5, z);
  EXPECT_NEAR(Mean(z), 3.5, 1e-5);
  EXPECT_EQ(z[0], 0.0f);
  EXPECT_EQ(z[2], 0.0f);
  EXPECT_EQ(z[4], 0.0f);
  EXPECT_NEAR(z[3], 0.75f, 1e-5);  // the tilt of {0.5, 0.5} to mean 3.5
}

TEST(TiltToMean, ClampsTheTargetToTheSupport) {
  float p[5] = {0.2f, 0.2f, 0.2f, 0.2f, 0.2f};
  TiltToMean(Stars(), 9.0, p);  // beyond the scale: just inside its top
  EXPECT_NEAR(Mean(p), 5.0 - 4e-3, 1e-5);
  EXPECT_NEAR(Sum(p), 1.0, 1e-6);
  float q[5] = {0.0f, 0.4f, 0.6f, 0.0f, 0.0f};  // support {2, 3}
  TiltToMean(Stars(), 1.0, q);
  EXPECT_NEAR(Mean(q), 2.0 + 1e-3, 1e-5);
  EXPECT_EQ(q[0], 0.0f);
}

TEST(TiltToMean, LeavesWhatItCannotTilt) {
  float one[5] = {0, 0, 1, 0, 0};
  TiltToMean(Stars(), 4.0, one);  // one value: nothing to tilt
  EXPECT_EQ(one[2], 1.0f);
  float p[5] = {0.1f, 0.2f, 0.3f, 0.25f, 0.15f};
  const std::vector<float> before(p, p + 5);
  TiltToMean(Stars(), NAN, p);
  EXPECT_EQ(std::vector<float>(p, p + 5), before);
  TiltToMean(Stars(), Mean(p), p);  // its own mean: unchanged
  for (int k = 0; k < 5; ++k) EXPECT_NEAR(p[k], before[k], 1e-6);
  float bad[5] = {0.1f, NAN, 0.3f, 0.3f, 0.3f};
  TiltToMean(Stars(), 2.0, bad);
  EXPECT_TRUE(std::isnan(bad[1]));
  EXPECT_EQ(bad[0], 0.1f);
}

// FitModel keeps the factorisation when the blend lowers the validation
// RMSE by the documented 0.1%, and then the summary's validation RMSE is
// the blend's.
// A model of three items with a 4-factor factorisation and nothing else.
ModelParams FactorisationOnly() {
  ModelParams params;
  params.scale = *RatingScale::Create(1, 5, 1);
  for (const char* id : {"a", "b", "c"}) params.items.GetOrAdd(id);
  MfParams& mf = params.mf;
  mf.factors = 4;
  mf.fold_epochs = 5;
  mf.lambda = 0.05f;
  mf.learning_rate = 0.1f;
  mf.seed = 1;
  mf.q.resize(3, 4);
  for (Eigen::Index i = 0; i < mf.q.size(); ++i) {
    mf.q.data()[i] = 0.1f * static_cast<float>(i % 7);
  }
  mf.trained.assign(3, 1);
  return params;
}

// MfFingerprint tells factorisations that fold in alike apart (a copy of
// the model keeps it, other factors or settings change it), and
// MemberInputs takes a given factorisation part instead of folding in.
TEST(Model, MfFingerprintAndAGivenFactorisationPart) {
  const Model m(FactorisationOnly());
  ASSERT_TRUE(m.HasMf());
  ASSERT_EQ(m.MfInputSize(), 5u);
  EXPECT_NE(m.MfFingerprint(), 0u);
  EXPECT_EQ(Model(m).MfFingerprint(), m.MfFingerprint());
  EXPECT_EQ(Model(FactorisationOnly()).MfFingerprint(), m.MfFingerprint());
  ModelParams other_q = FactorisationOnly();
  other_q.mf.q(2, 3) += 1e-3f;
  EXPECT_NE(Model(std::move(other_q)).MfFingerprint(), m.MfFingerprint());
  ModelParams other_passes = FactorisationOnly();
  other_passes.mf.fold_epochs = 6;
  EXPECT_NE(Model(std::move(other_passes)).MfFingerprint(), m.MfFingerprint());
  ModelParams none = FactorisationOnly();
  none.mf = MfParams();
  const Model without(std::move(none));
  EXPECT_EQ(without.MfFingerprint(), 0u);
  EXPECT_EQ(without.MfInputSize(), 0u);

  const UserRatings user{{0, 2}, {3, 1}};
  std::vector<float> fresh, given;
  m.MemberInputs(user.view(), &fresh);
  ASSERT_EQ(fresh.size(), 5u);
  EXPECT_EQ(fresh[4], 1.0f);  // the fold-in used a rating
  const std::vector<float> part = {0.5f, -0.25f, 0.125f, 2.0f, 1.0f};
  m.MemberInputs(user.view(), &given, part.data());
  EXPECT_EQ(given, part);
  m.MemberInputs(user.view(), &given, fresh.data());
  EXPECT_EQ(given, fresh);
}

TEST(FitModelMf, KeptWhenTheBlendLowersTheValidationRmse) {
  const auto s = testing_data::PlantedRatings(300, 80, 4, 0.4, 9);
  TrainOptions o = testing_data::SmallTrainOptions();
  o.threads = 1;
  o.validation_fraction = 0.2;
  o.mf_factors = 0;
  absl::StatusOr<Model> plain = FitModel(s.train, o);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(plain->HasMf());
  o.mf_factors = 16;
  absl::StatusOr<Model> blended = FitModel(s.train, o);
  ASSERT_TRUE(blended.ok()) << blended.status();
  ASSERT_TRUE(blended->HasMf());
  EXPECT_LT(blended->summary().valid_rmse, 0.999 * plain->summary().valid_rmse);
  EXPECT_GT(blended->summary().mf_seconds, 0);
  // Without validation ratings there is nothing to fit the blend on: not
  // kept.
  TrainOptions no_valid = o;
  no_valid.validation_fraction = 0;
  absl::StatusOr<Model> none = FitModel(s.train, no_valid);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->HasMf());
  EXPECT_EQ(none->summary().mf_seconds, 0);
  // The RBMs are the same either way: the factorisation trains after them.
  ASSERT_EQ(plain->members().size(), blended->members().size());
  EXPECT_TRUE(plain->members()[0] == blended->members()[0]);
}

}  // namespace
}  // namespace rbmrec
