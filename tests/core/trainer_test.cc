#include "core/trainer.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>

#include "Eigen/SVD"
#include "core/cd_trainer.h"
#include "core/fit.h"
#include "core/item_regression.h"
#include "core/metrics.h"
#include "core/model_file.h"
#include "core/online.h"
#include "core/recommend.h"
#include "gtest/gtest.h"
#include "tests/core/synthetic.h"

namespace rbmrec {
namespace {

TrainOptions SmallOptions() { return testing_data::SmallTrainOptions(); }

// RMSE of predicting each test rating by its item's training mean.
double ItemMeanRmse(const testing_data::Split& s) {
  std::vector<double> sum(static_cast<size_t>(s.train.items.size()), 0),
      n(sum.size(), 0);
  for (const Rating& r : s.train.ratings) {
    sum[static_cast<size_t>(r.item)] += r.k + 1;
    n[static_cast<size_t>(r.item)] += 1;
  }
  double se = 0;
  for (const TestRating& t : s.test) {
    const size_t i = static_cast<size_t>(t.item);
    const double pred = n[i] > 0 ? sum[i] / n[i] : 3.0;
    se += (pred - t.rating) * (pred - t.rating);
  }
  return std::sqrt(se / static_cast<double>(s.test.size()));
}

TEST(Trainer, BeatsItemMeanOnPlantedStructure) {
  auto s = testing_data::PlantedRatings(200, 60, 3, 0.3, 11);
  ASSERT_GT(s.test.size(), 300u);
  auto model = FitModel(s.train, SmallOptions());
  ASSERT_TRUE(model.ok()) << model.status();
  const EvalMetrics m =
      Evaluate(*model, s.train.ByUser(), s.test, PredictMethod::kExact, 2);
  const double baseline = ItemMeanRmse(s);
  EXPECT_EQ(m.n, static_cast<int64_t>(s.test.size()));
  EXPECT_LT(m.rmse, 0.8 * baseline) << "item-mean baseline " << baseline;
  // The distributions: more likely than the item histogram on planted
  // structure, and every metric finite and in range.
  EXPECT_GT(m.nll, 0);
  EXPECT_LT(m.nll, m.hist_nll);
  EXPECT_GE(m.ece, 0);
  EXPECT_LT(m.ece, 0.5);
  EXPECT_GE(m.hist_ece, 0);
  // The reliability tables behind ece: every test rating in one bin per
  // value.
  for (const Reliability* r : {&m.reliability, &m.hist_reliability}) {
    ASSERT_EQ(r->K, model->K());
    ASSERT_EQ(r->bins, 10);
    EXPECT_EQ(r->n, m.n);
    for (int k = 0; k < r->K; ++k) {
      int64_t count = 0;
      for (int b = 0; b < r->bins; ++b) count += r->at(k, b).count;
      EXPECT_EQ(count, m.n) << k;
    }
  }
  EXPECT_EQ(m.ece, ClasswiseEce(m.reliability));
  EXPECT_EQ(m.hist_ece, ClasswiseEce(m.hist_reliability));
  const EvalMetrics mf =
      Evaluate(*model, s.train.ByUser(), s.test, PredictMethod::kMeanField, 2);
  EXPECT_LT(mf.rmse, 0.85 * baseline);
}

TEST(Trainer, TopNMetricsAreInRangeAndDoNotDependOnThreads) {
  auto s = testing_data::PlantedRatings(120, 40, 3, 0.3, 21);
  TrainOptions o = SmallOptions();
  o.item_regression = -1;  // its size rule fits it here
  auto model = FitModel(s.train, o);
  ASSERT_TRUE(model.ok()) << model.status();
  const SparseRatings by_user = s.train.ByUser();
  // Users with a test rating >= 4 (the relevant ones).
  std::vector<char> has(static_cast<size_t>(model->users().size()), 0);
  for (const TestRating& t : s.test) {
    if (t.user >= 0 && t.rating >= 4) has[static_cast<size_t>(t.user)] = 1;
  }
  int64_t want_users = 0;
  for (char h : has) want_users += h;
  ASSERT_GT(want_users, 10);
  int64_t users1 = 0, users2 = 0;
  const std::vector<TopNResult> a =
      EvaluateTopN(*model, by_user, s.test, 4.0, 5, 1, &users1);
  const std::vector<TopNResult> b =
      EvaluateTopN(*model, by_user, s.test, 4.0, 5, 2, &users2);
  EXPECT_EQ(users1, want_users);
  EXPECT_EQ(users2, want_users);
  // Recommend's four rankings (the model has the rated RBM), the item
  // regression's two, then the most-popular list.
  ASSERT_TRUE(model->HasRatedRbm());
  ASSERT_TRUE(model->HasItemRegression());
  ASSERT_EQ(a.size(), 7u);
  ASSERT_EQ(b.size(), 7u);
  EXPECT_EQ(a[0].name, "expected_rating");
  EXPECT_EQ(a[1].name, "p_at_least");
  EXPECT_EQ(a[2].name, "p_rated");
  EXPECT_EQ(a[3].name, "p_rated_at_least");
  EXPECT_EQ(a[4].name, "item_regression");
  EXPECT_EQ(a[5].name, "item_regression_at_least");
  EXPECT_EQ(a[6].name, "popularity");
  for (size_t w = 0; w < a.size(); ++w) {
    EXPECT_EQ(a[w].name, b[w].name);
    EXPECT_EQ(a[w].mean.ndcg, b[w].mean.ndcg) << a[w].name;
    EXPECT_EQ(a[w].mean.precision, b[w].mean.precision) << a[w].name;
    for (double x : {a[w].mean.precision, a[w].mean.recall, a[w].mean.ndcg}) {
      EXPECT_GE(x, 0) << a[w].name;
      EXPECT_LE(x, 1) << a[w].name;
    }
  }
  // The curves at N = 1..5: the last cut-off is the mean, recall never
  // falls as N grows, and the threads do not change them either.
  for (size_t w = 0; w < a.size(); ++w) {
    ASSERT_EQ(a[w].at.size(), 5u) << a[w].name;
    ASSERT_EQ(b[w].at.size(), 5u) << a[w].name;
    EXPECT_EQ(a[w].at.back().precision, a[w].mean.precision) << a[w].name;
    EXPECT_EQ(a[w].at.back().recall, a[w].mean.recall) << a[w].name;
    EXPECT_EQ(a[w].at.back().ndcg, a[w].mean.ndcg) << a[w].name;
    for (size_t j = 0; j < 5; ++j) {
      EXPECT_EQ(a[w].at[j].precision, b[w].at[j].precision) << a[w].name;
      EXPECT_EQ(a[w].at[j].recall, b[w].at[j].recall) << a[w].name;
      if (j > 0) {
        EXPECT_GE(a[w].at[j].recall, a[w].at[j - 1].recall);
      }
    }
  }
  // Something is found: the planted data has structure and popular items.
  EXPECT_GT(a[6].mean.recall, 0);
  EXPECT_GT(a[5].mean.recall, 0);
  EXPECT_GT(a[3].mean.recall, 0);
}

// The item regression's two rankings equal a brute-force order: every
// trained item the user did not rate, scored exactly (its score alone, or
// max(score, 0) x p(rating >= 4)), best first, ties by item id.
TEST(Trainer, TopNItemRegressionRankingsEqualABruteForceOrder) {
  auto s = testing_data::PlantedRatings(150, 120, 3, 0.15, 23);
  TrainOptions o = SmallOptions();
  o.item_regression = -1;  // its size rule fits it here
  auto model = FitModel(s.train, o);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_TRUE(model->HasItemRegression());
  const SparseRatings by_user = s.train.ByUser();
  constexpr int kN = 10;
  int64_t users = 0;
  const std::vector<TopNResult> got =
      EvaluateTopN(*model, by_user, s.test, 4.0, kN, 2, &users);
  ASSERT_EQ(got.size(), 7u);
  ASSERT_EQ(got[4].name, "item_regression");
  ASSERT_EQ(got[5].name, "item_regression_at_least");
  std::vector<std::vector<int32_t>> rel(
      static_cast<size_t>(model->users().size()));
  for (const TestRating& t : s.test) {
    if (t.user >= 0 && t.item >= 0 && t.rating >= 4) {
      rel[static_cast<size_t>(t.user)].push_back(t.item);
    }
  }
  const int K = model->K();
  const int32_t m = model->num_items();
  double want[2] = {0, 0};
  int64_t n_users = 0;
  for (int32_t u = 0; u < static_cast<int32_t>(rel.size()); ++u) {
    std::vector<int32_t>& r = rel[static_cast<size_t>(u)];
    if (r.empty()) continue;
    std::sort(r.begin(), r.end());
    ++n_users;
    VisibleSet v;
    v.items = by_user.col.data() + by_user.offsets[u];
    v.ks = by_user.k.data() + by_user.offsets[u];
    v.n = by_user.RowSize(u);
    std::vector<float> e(static_cast<size_t>(m));
    ItemRegressionScores(model->item_regression(), v.items, v.n, e.data());
    std::vector<int32_t> query;
    for (int32_t i = 0; i < m; ++i) {
      if (model->Trained(i) &&
          std::find(v.items, v.items + v.n, i) == v.items + v.n) {
        query.push_back(i);
      }
    }
    std::vector<float> member_x, probs(query.size() * K);
    model->MemberInputs(v, &member_x);
    Model::Scratch scratch;
    model->PredictWith(u, v, member_x.data(), query, PredictMethod::kExact,
                       probs.data(), nullptr, &scratch);
    for (int way = 0; way < 2; ++way) {
      std::vector<std::pair<float, int32_t>> order;
      for (size_t q = 0; q < query.size(); ++q) {
        const float p4 = probs[q * K + 3] + probs[q * K + 4];
        const float x = e[static_cast<size_t>(query[q])];
        order.emplace_back(way == 0 ? x : std::max(x, 0.0f) * p4, query[q]);
      }
      std::sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
        if (a.first != b.first) return a.first > b.first;
        return model->items().Name(a.second) < model->items().Name(b.second);
      });
      std::vector<int32_t> list;
      for (size_t q = 0; q < order.size() && q < kN; ++q) {
        list.push_back(order[q].second);
      }
      want[way] += ScoreTopN(list, r, kN).ndcg;
    }
  }
  ASSERT_EQ(users, n_users);
  EXPECT_NEAR(got[4].mean.ndcg, want[0] / static_cast<double>(n_users), 1e-12);
  EXPECT_NEAR(got[5].mean.ndcg, want[1] / static_cast<double>(n_users), 1e-12);
  EXPECT_GT(got[5].mean.ndcg, 0);
  // A user without rated items: the regression ranking is p(rated) x
  // p(rating >= 4)'s (every score would be 0).
  {
    ScoringScratch sc;
    RankOptions ro;
    ro.k0 = 3;
    ro.by = RankBy::kRegressionAtLeast;
    const std::vector<Ranked> a =
        RankItems(*model, -1, VisibleSet{}, {}, ro, &sc);
    ro.by = RankBy::kRatedAtLeast;
    const std::vector<Ranked> b =
        RankItems(*model, -1, VisibleSet{}, {}, ro, &sc);
    ASSERT_EQ(a.size(), 10u);
    ASSERT_EQ(a.size(), b.size());
    for (size_t k = 0; k < a.size(); ++k) EXPECT_EQ(a[k].item, b[k].item);
  }
  // Cold start: Recommend's ranking only (no rated items to score from).
  int64_t users_b = 0;
  const std::vector<TopNResult> cold =
      EvaluateTopN(*model, by_user, s.test, 4.0, kN, 2, &users_b, true);
  ASSERT_EQ(cold.size(), 6u);
  EXPECT_EQ(cold[4].name, "item_regression_at_least");
}

// A regression over the most-rated items only: a user who rated some of
// them is ranked by it; a user who rated none is ranked by p(rated) x
// p(rating >= 4), as a user with no rated items is (every regression score
// would be 0).
TEST(Trainer, RegressionRankingOfAUserOutsideItsColumnsIsTheRatedOne) {
  auto s = testing_data::PlantedRatings(120, 40, 3, 0.3, 19);
  auto fitted = FitModel(s.train, SmallOptions());
  ASSERT_TRUE(fitted.ok()) << fitted.status();
  ASSERT_TRUE(fitted->HasRatedRbm());
  const SparseRatings by_user = s.train.ByUser();
  ItemRegressionOptions ro;
  ro.columns = 10;
  absl::StatusOr<ItemRegression> reg = FitItemRegression(by_user, ro);
  ASSERT_TRUE(reg.ok()) << reg.status();
  ModelParams params = std::move(*fitted).TakeParams();
  params.item_regression = std::make_shared<const ItemRegression>(*reg);
  const Model model(std::move(params));
  // Two of the items outside the columns, and one inside.
  std::vector<int32_t> outside, inside;
  for (int32_t i = 0; i < model.num_items(); ++i) {
    (reg->ColumnOf(i) >= 0 ? inside : outside).push_back(i);
  }
  ASSERT_GE(outside.size(), 2u);
  RankOptions o;
  o.k0 = 3;
  ScoringScratch sc;
  const auto ranked = [&](const std::vector<int32_t>& items, RankBy by) {
    VisibleSet v;
    std::vector<uint8_t> k(items.size(), 4);
    v.items = items.data();
    v.ks = k.data();
    v.n = static_cast<int64_t>(items.size());
    o.by = by;
    std::vector<int32_t> list;
    for (const Ranked& x : RankItems(model, -1, v, {}, o, &sc)) {
      list.push_back(x.item);
    }
    return list;
  };
  const std::vector<int32_t> none = {outside[0], outside[1]};
  EXPECT_EQ(ranked(none, RankBy::kRegressionAtLeast),
            ranked(none, RankBy::kRatedAtLeast));
  // With an item inside: the regression's scores, which are 0 outside the
  // columns, so the list's positive-score items all have columns.
  const std::vector<int32_t> some = {outside[0], inside[0]};
  std::vector<float> e(static_cast<size_t>(model.num_items()), 0.0f);
  ItemRegressionScores(*reg, some.data(), 2, e.data());
  o.by = RankBy::kRegressionAtLeast;
  VisibleSet v;
  std::vector<uint8_t> k(2, 4);
  v.items = some.data();
  v.ks = k.data();
  v.n = 2;
  const std::vector<Ranked> got = RankItems(model, -1, v, {}, o, &sc);
  ASSERT_FALSE(got.empty());
  for (const Ranked& x : got) {
    EXPECT_EQ(x.regression, e[static_cast<size_t>(x.item)]) << x.item;
    if (x.score > 0) {
      EXPECT_GE(reg->ColumnOf(x.item), 0) << x.item;
    }
  }
  EXPECT_GT(got[0].score, 0);
}

TEST(Trainer, TopNKnownItemsProtocolDropsRelevantItemsUnknownToTraining) {
  auto s = testing_data::PlantedRatings(120, 40, 3, 0.3, 21);
  auto model = FitModel(s.train, SmallOptions());
  ASSERT_TRUE(model.ok()) << model.status();
  const SparseRatings by_user = s.train.ByUser();
  for (const TestRating& t : s.test) ASSERT_GE(t.item, 0);
  int64_t users = 0;
  const std::vector<TopNResult> a =
      EvaluateTopN(*model, by_user, s.test, 4.0, 5, 2, &users);
  // Every relevant item known: both protocols agree.
  for (const TopNResult& r : a) {
    EXPECT_EQ(r.known_users, users) << r.name;
    EXPECT_EQ(r.known.precision, r.mean.precision) << r.name;
    EXPECT_EQ(r.known.recall, r.mean.recall) << r.name;
    EXPECT_EQ(r.known.ndcg, r.mean.ndcg) << r.name;
  }
  // Relevant items unknown to training: for every user that has relevant
  // items, and for one user who has only such an item.
  std::vector<char> relevant(static_cast<size_t>(model->users().size()), 0);
  for (const TestRating& t : s.test) {
    if (t.rating >= 4) relevant[static_cast<size_t>(t.user)] = 1;
  }
  std::vector<TestRating> test = s.test;
  int32_t only_unknown = -1;
  for (size_t u = 0; u < relevant.size(); ++u) {
    const int32_t user = static_cast<int32_t>(u);
    if (relevant[u]) test.push_back({user, -1, 5.0});
    if (!relevant[u] && only_unknown < 0) only_unknown = user;
  }
  ASSERT_GE(only_unknown, 0);
  test.push_back({only_unknown, -1, 5.0});
  int64_t users_b = 0;
  const std::vector<TopNResult> b =
      EvaluateTopN(*model, by_user, test, 4.0, 5, 2, &users_b);
  EXPECT_EQ(users_b, users + 1);
  ASSERT_EQ(a.size(), b.size());
  for (size_t w = 0; w < a.size(); ++w) {
    // peer-ease.py's protocol does not see them ...
    EXPECT_EQ(b[w].known_users, users) << a[w].name;
    EXPECT_EQ(b[w].known.precision, a[w].known.precision) << a[w].name;
    EXPECT_EQ(b[w].known.recall, a[w].known.recall) << a[w].name;
    EXPECT_EQ(b[w].known.ndcg, a[w].known.ndcg) << a[w].name;
    // ... the full one counts them as misses.
    if (a[w].mean.recall > 0) {
      EXPECT_LT(b[w].mean.recall, a[w].mean.recall) << a[w].name;
      EXPECT_LT(b[w].mean.ndcg, a[w].mean.ndcg) << a[w].name;
    }
  }
}

// The model FitModel trains from `o` at 1, 2 and 3 threads; expects the
// three user-based and item-based RBMs to be the same bits and returns them.
std::vector<Model> FitAtOneTwoThreeThreads(const Dataset& train,
                                           TrainOptions o) {
  std::vector<Model> models;
  for (int threads = 1; threads <= 3; ++threads) {
    o.threads = threads;
    auto m = FitModel(train, o);
    EXPECT_TRUE(m.ok()) << m.status();
    if (!m.ok()) return {};
    models.push_back(*std::move(m));
  }
  for (size_t t = 1; t < models.size(); ++t) {
    EXPECT_TRUE(models[0].members()[0] == models[t].members()[0]) << t + 1;
    EXPECT_TRUE(models[0].item_rbm() == models[t].item_rbm()) << t + 1;
  }
  return models;
}

TEST(Trainer, SameSeedSameModelAtAnyThreadCount) {
  auto s = testing_data::PlantedRatings(120, 40, 3, 0.3, 5);
  TrainOptions o = SmallOptions();
  o.max_epochs = 6;
  const std::vector<Model> models = FitAtOneTwoThreeThreads(s.train, o);
  ASSERT_EQ(models.size(), 3u);
  const Model* a = &models[0];
  const Model* b = &models[1];
  const Model* c = &models[2];
  ASSERT_TRUE(a->HasRatedRbm());
  EXPECT_TRUE(a->rated_rbm() == b->rated_rbm());
  EXPECT_TRUE(a->rated_rbm() == c->rated_rbm());
  o.seed = 8;
  auto d = FitModel(s.train, o);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(a->members()[0] == d->members()[0]);
}

// TrainOptions::min_improvement: training stops `patience` epochs after the
// last epoch whose validation RMSE fell by that fraction below the previous
// such epoch's, and the best epoch is kept whatever the size of its gain.
TEST(Trainer, EarlyStoppingCountsOnlyLargeEnoughImprovements) {
  auto s = testing_data::PlantedRatings(200, 60, 3, 0.3, 11);
  TrainOptions o = SmallOptions();
  o.validation_fraction = 0.2;
  o.patience = 3;
  o.min_improvement = 0;
  auto all = TrainRbm(s.train.ByUser(), 5, o);
  o.min_improvement = 0.01;
  auto large = TrainRbm(s.train.ByUser(), 5, o);
  ASSERT_TRUE(all.ok() && large.ok());
  EXPECT_LT(large->epochs_run, all->epochs_run);
  // The same epochs up to the stop (same seed).
  for (int e = 0; e < large->epochs_run; ++e) {
    EXPECT_EQ(large->history[e].valid_rmse, all->history[e].valid_rmse) << e;
  }
  // The rule, replayed on the history.
  double anchor = INFINITY, best = INFINITY;
  int since = 0, stop = 0, best_epoch = 0;
  for (const EpochStats& st : large->history) {
    if (st.valid_rmse < best - 1e-5) {
      best = st.valid_rmse;
      best_epoch = st.epoch;
    }
    if (st.valid_rmse < anchor * (1 - 0.01) - 1e-5) {
      anchor = st.valid_rmse;
      since = 0;
    } else if (++since >= o.patience) {
      stop = st.epoch;
      break;
    }
  }
  EXPECT_EQ(stop, large->epochs_run);
  EXPECT_EQ(best_epoch, large->best_epoch);
  EXPECT_EQ(best, large->best_valid_rmse);
}

TEST(Trainer, ProgressCanCancelAndBestEpochIsKept) {
  auto s = testing_data::PlantedRatings(80, 30, 2, 0.3, 3);
  int calls = 0;
  auto r =
      TrainRbm(s.train.ByUser(), 5, SmallOptions(), [&](const EpochStats& st) {
        EXPECT_EQ(st.epoch, calls + 1);
        EXPECT_TRUE(std::isfinite(st.valid_rmse));
        return ++calls < 3;
      });
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->cancelled);
  EXPECT_EQ(r->epochs_run, 3);
  EXPECT_GE(r->best_epoch, 1);
  EXPECT_LE(r->best_epoch, 3);
  EXPECT_DOUBLE_EQ(
      r->best_valid_rmse,
      r->history[static_cast<size_t>(r->best_epoch - 1)].valid_rmse);
}

// Parameter averaging changes what is validated and returned, not the
// trajectory: after two epochs the model is average * P1 + (1 - average) *
// P2, P1 and P2 being the raw parameters after epochs 1 and 2 (the returned
// parameters of unaveraged runs of one and two epochs; the validation RMSE
// falls from epoch 1 to 2 on this data).
TEST(Trainer, AveragedParametersAreTheRunningAverageOfTheEpochs) {
  auto s = testing_data::PlantedRatings(200, 60, 3, 0.3, 11);
  TrainOptions o = SmallOptions();
  o.average = 0;
  o.max_epochs = 1;
  auto p1 = TrainRbm(s.train.ByUser(), 5, o);
  o.max_epochs = 2;
  auto p2 = TrainRbm(s.train.ByUser(), 5, o);
  o.average = 0.75f;
  auto avg = TrainRbm(s.train.ByUser(), 5, o);
  ASSERT_TRUE(p1.ok() && p2.ok() && avg.ok());
  ASSERT_EQ(p2->best_epoch, 2);
  ASSERT_EQ(avg->best_epoch, 2);
  const RbmParams& a = avg->params;
  EXPECT_TRUE(a.W.isApprox(0.75f * p1->params.W + 0.25f * p2->params.W, 1e-6f));
  EXPECT_TRUE(a.b.isApprox(0.75f * p1->params.b + 0.25f * p2->params.b, 1e-6f));
  EXPECT_TRUE(a.c.isApprox(0.75f * p1->params.c + 0.25f * p2->params.c, 1e-6f));
  EXPECT_FALSE(a.W.isApprox(p2->params.W, 1e-3f));
}

// Factored with averaging the trainer keeps no W of its own and builds the
// average from A B block by block: the same bits as averaging the full W
// of unaveraged runs (W = A B after each epoch), a scalar tail and more
// than one 480-row block included (101 items x K = 5 rows of 10 floats).
TEST(Trainer, FactoredAverageIsTheRunningAverageBitForBit) {
  auto s = testing_data::PlantedRatings(300, 101, 3, 0.4, 2);
  TrainOptions o = SmallOptions();
  o.hidden = 10;
  o.factors = 4;
  o.average = 0;
  o.max_epochs = 1;
  auto p1 = TrainRbm(s.train.ByUser(), 5, o);
  o.max_epochs = 2;
  auto p2 = TrainRbm(s.train.ByUser(), 5, o);
  o.average = 0.75f;
  o.threads = 2;
  auto avg = TrainRbm(s.train.ByUser(), 5, o);
  ASSERT_TRUE(p1.ok() && p2.ok() && avg.ok());
  ASSERT_EQ(avg->best_epoch, 2);
  const RbmParams& a = avg->params;
  ASSERT_EQ(a.W.rows(), 505);
  const RowMatrixXf w = 0.75f * p1->params.W + 0.25f * p2->params.W;
  const Eigen::VectorXf b = 0.75f * p1->params.b + 0.25f * p2->params.b;
  const Eigen::VectorXf c = 0.75f * p1->params.c + 0.25f * p2->params.c;
  EXPECT_TRUE(a.W == w);
  EXPECT_TRUE(a.b == b);
  EXPECT_TRUE(a.c == c);
}

// Factored with averaging and exact validation, the trainer validates each
// next average before making it and no best copy is held while the average
// is the best: the copy is made when a worse epoch comes and dropped at the
// next best. Whatever the path, the model returned is the average after the
// best epoch, bit for bit what a run stopped at that epoch returns, with
// the same validation history up to it.
TEST(Trainer, FactoredAverageKeepsTheBestEpochThroughWorseOnes) {
  auto s = testing_data::PlantedRatings(300, 101, 3, 0.4, 2);
  TrainOptions o = SmallOptions();
  o.hidden = 10;
  o.factors = 4;
  o.average = 0.5f;
  o.learning_rate = 0.3f;
  o.max_epochs = 16;
  o.patience = 16;
  o.threads = 2;
  auto full = TrainRbm(s.train.ByUser(), 5, o);
  ASSERT_TRUE(full.ok()) << full.status();
  const int best = full->best_epoch;
  ASSERT_GE(best, 2);
  ASSERT_LT(best, full->epochs_run);  // worse epochs after the best
  // Some epoch before the best was no new best either: the copy was made
  // and dropped again.
  double low = INFINITY;
  bool worse_then_better = false;
  for (int e = 0; e < best; ++e) {
    const double v = full->history[static_cast<size_t>(e)].valid_rmse;
    worse_then_better |= !(v < low - 1e-5);
    low = std::min(low, v);
  }
  EXPECT_TRUE(worse_then_better);
  o.max_epochs = best;
  o.threads = 1;
  auto stopped = TrainRbm(s.train.ByUser(), 5, o);
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  ASSERT_EQ(stopped->best_epoch, best);
  for (int e = 0; e < best; ++e) {
    EXPECT_EQ(stopped->history[static_cast<size_t>(e)].valid_rmse,
              full->history[static_cast<size_t>(e)].valid_rmse)
        << e;
  }
  EXPECT_EQ(full->best_valid_rmse, stopped->best_valid_rmse);
  EXPECT_TRUE(full->params.W == stopped->params.W);
  EXPECT_TRUE(full->params.b == stopped->params.b);
  EXPECT_TRUE(full->params.c == stopped->params.c);
}

// Ordinal sharing steps U, W^k = U^0 + ... + U^k, with dU^j = dW^j + ... +
// dW^(K-1). Over one batch with no momentum and no weight decay, from the
// same start and with the same random draws, the step of W^k under sharing
// is therefore the sum over j <= k and k' >= j of the unshared steps of
// W^k'; likewise for the visible biases. The start is a run whose learning
// rate is too small to move any weight.
TEST(Trainer, OrdinalSharingStepsTheCumulativeParameters) {
  auto s = testing_data::PlantedRatings(60, 20, 2, 0.3, 5);
  const SparseRatings by_user = s.train.ByUser();
  TrainOptions o = SmallOptions();
  o.max_epochs = 1;
  o.batch_size = by_user.rows;  // one batch
  o.momentum = 0;
  o.weight_decay = 0;
  o.average = 0;
  o.learning_rate = 1e-30f;
  auto start = TrainRbm(by_user, 5, o);
  o.learning_rate = 0.05f;
  o.ordinal = false;
  auto apart = TrainRbm(by_user, 5, o);
  o.ordinal = true;
  auto shared = TrainRbm(by_user, 5, o);
  ASSERT_TRUE(start.ok() && apart.ok() && shared.ok());
  const RbmParams& p0 = start->params;
  const RbmParams& pa = apart->params;
  const RbmParams& ps = shared->params;
  ASSERT_FALSE(pa.W.isApprox(p0.W, 1e-4f));
  const int K = 5;
  double max_err = 0;
  for (int32_t i = 0; i < p0.num_items; ++i) {
    for (int k = 0; k < K; ++k) {
      Eigen::VectorXf want = Eigen::VectorXf::Zero(p0.F);
      double want_b = 0;
      for (int j = 0; j <= k; ++j) {
        for (int k2 = j; k2 < K; ++k2) {
          want +=
              (pa.W.row(pa.Row(i, k2)) - p0.W.row(p0.Row(i, k2))).transpose();
          want_b += pa.b[pa.Row(i, k2)] - p0.b[p0.Row(i, k2)];
        }
      }
      const Eigen::VectorXf got =
          (ps.W.row(ps.Row(i, k)) - p0.W.row(p0.Row(i, k))).transpose();
      max_err = std::max(
          max_err, static_cast<double>((got - want).cwiseAbs().maxCoeff()));
      max_err = std::max(
          max_err, std::abs(ps.b[ps.Row(i, k)] - p0.b[p0.Row(i, k)] - want_b));
    }
  }
  EXPECT_LT(max_err, 1e-5);
  EXPECT_TRUE(ps.c.isApprox(pa.c));
}

// The factored RBM (TrainOptions::factors): same seed, same bits at any
// thread count, and a different model from the unfactored one.
TEST(Trainer, FactoredSameSeedSameModelAtAnyThreadCount) {
  auto s = testing_data::PlantedRatings(120, 40, 3, 0.3, 5);
  TrainOptions o = SmallOptions();
  o.max_epochs = 6;
  o.rated_hidden = 0;
  o.factors = 4;
  const std::vector<Model> models = FitAtOneTwoThreeThreads(s.train, o);
  ASSERT_EQ(models.size(), 3u);
  o.factors = 0;
  auto dense = FitModel(s.train, o);
  ASSERT_TRUE(dense.ok());
  EXPECT_FALSE(models[0].members()[0] == dense->members()[0]);
}

// Users of very different sizes, so that a thread's scratch is grown by a
// large user in one pass (the averaged validation's hidden inputs) before
// the same thread meets a large user in the chains: each buffer the chains
// use is sized for its own case (an overrun of this kind went unseen at
// even sizes; ASan reports it here).
TEST(Trainer, FactoredTrainingWithUnevenUsers) {
  auto s = testing_data::PlantedRatings(200, 60, 3, 0.9, 13);
  std::vector<Rating> kept;
  std::vector<int> per_user(200, 0);
  for (const Rating& r : s.train.ratings) {
    // Six users keep every rating (~54), the others four.
    if (r.user % 37 == 5 || per_user[static_cast<size_t>(r.user)]++ < 4) {
      kept.push_back(r);
    }
  }
  s.train.ratings = std::move(kept);
  TrainOptions o = SmallOptions();
  o.max_epochs = 4;
  o.rated_hidden = 0;
  o.factors = 4;
  o.validation_fraction = 0.2;
  const std::vector<Model> models = FitAtOneTwoThreeThreads(s.train, o);
  ASSERT_EQ(models.size(), 3u);
  EXPECT_GT(models[0].members()[0].W.norm(), 0);
}

// W = A B: without averaging the trained W has rank at most C, while the
// unfactored trainer's W does not.
TEST(Trainer, FactoredWeightsHaveRankAtMostC) {
  auto s = testing_data::PlantedRatings(80, 30, 3, 0.3, 9);
  const SparseRatings by_user = s.train.ByUser();
  TrainOptions o = SmallOptions();
  o.max_epochs = 5;
  o.average = 0;
  o.factors = 4;
  auto factored = TrainRbm(by_user, 5, o);
  o.factors = 0;
  auto dense = TrainRbm(by_user, 5, o);
  ASSERT_TRUE(factored.ok() && dense.ok());
  auto singular = [](const RbmParams& p) {
    const Eigen::MatrixXf w = p.W;
    return Eigen::JacobiSVD<Eigen::MatrixXf>(w).singularValues();
  };
  const Eigen::VectorXf sf = singular(factored->params);
  const Eigen::VectorXf sd = singular(dense->params);
  ASSERT_EQ(sf.size(), 16);
  EXPECT_GT(sf[3], 1e-3f * sf[0]);
  EXPECT_LT(sf[4], 1e-4f * sf[0]);
  EXPECT_GT(sd[4], 1e-2f * sd[0]);
}

// Factored training validates the averaged parameters from running
// averages of the hidden inputs (AveragedValidationRmse): the validation
// RMSE it reports for the returned (averaged) parameters is the one
// computed from those parameters directly.
// Trains with `o` (20 epochs, patience 20) on planted data and expects the
// reported validation RMSE of the returned parameters to equal a direct
// pass of PredictExact over them; returns the largest |hidden input| of a
// validation user.
// The largest |hidden input| of a validation user and the largest |W| entry
// of the trained model.
struct Extremes {
  float input = 0, weight = 0;
};

Extremes ExpectValidationMatchesADirectPass(TrainOptions o, int items = 40) {
  auto s = testing_data::PlantedRatings(120, items, 3, 0.3, 13);
  SparseRatings train, valid;
  CarveValidation(s.train.ByUser(), 0.1, 3, &train, &valid);
  EXPECT_GT(valid.nnz(), 50);
  o.max_epochs = 20;
  o.patience = 20;
  auto r = TrainRbmSplit(train, valid, 5, o);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {};
  const RbmParams& p = r->params;
  double sse = 0;
  float max_input = 0;
  Eigen::VectorXf x(p.F);
  std::vector<float> probs(5);
  for (int32_t u = 0; u < valid.rows; ++u) {
    VisibleSet v{train.col.data() + train.offsets[u],
                 train.k.data() + train.offsets[u], train.RowSize(u)};
    HiddenInput(p, v, x.data());
    if (valid.RowSize(u) > 0) {
      max_input = std::max(max_input, x.cwiseAbs().maxCoeff());
    }
    for (int64_t q = valid.offsets[u]; q < valid.offsets[u + 1]; ++q) {
      PredictExact(p, x.data(), valid.col[q], probs.data());
      double mean = 0;
      for (int k = 0; k < 5; ++k)
        mean += static_cast<double>(k) * probs[static_cast<size_t>(k)];
      sse += (mean - valid.k[q]) * (mean - valid.k[q]);
    }
  }
  const double direct = std::sqrt(sse / static_cast<double>(valid.nnz()));
  EXPECT_NEAR(r->best_valid_rmse, direct, 1e-5);
  EXPECT_NEAR(r->history[static_cast<size_t>(r->best_epoch - 1)].valid_rmse,
              direct, 1e-5);
  EXPECT_GE(r->best_epoch, 2);  // an average of several epochs
  return {max_input, p.W.cwiseAbs().maxCoeff()};
}

// The averaged model's validation through running averages of its hidden
// inputs (factored), and the exact predictions from exponentials computed
// ahead (ExactValidation), against a direct pass.
TEST(Trainer, FactoredValidationOfTheAverageMatchesADirectPass) {
  TrainOptions o = SmallOptions();
  o.factors = 4;
  o.learning_rate = 0.2f;
  o.average = 0.85f;
  ExpectValidationMatchesADirectPass(o);
}

// The validation passes in chunks of cases (internal::kExpChunkBytes; here
// 7 cases a chunk) give the same bits as in one chunk, and validating the
// next average before it is made (CandidateValidationRmse) the same bits as
// making it and validating it (AveragedValidationRmse), with the same
// average after.
TEST(Trainer, ValidationInChunksAndOfTheCandidateIsTheSameBits) {
  auto s = testing_data::PlantedRatings(300, 40, 3, 0.3, 13);
  SparseRatings train, valid;
  CarveValidation(s.train.ByUser(), 0.1, 3, &train, &valid);
  TrainOptions o = SmallOptions();
  o.hidden = 16;
  o.factors = 4;
  const float a = 0.85f;
  struct Run {
    double first, second, plain;
    RbmParams avg;
  };
  auto run = [&](int64_t chunk_bytes, bool candidate) {
    internal::CdTrainer t(train, valid, 5, o, 2, 2);
    t.SetExpChunkBytes(chunk_bytes);
    Run r;
    t.Epoch(1, 1, 0.1f);
    t.Average(a, true, &r.avg);
    r.first = t.AveragedValidationRmse(r.avg, a, true);
    t.Epoch(2, 1, 0.1f);
    if (candidate) {
      EXPECT_TRUE(t.ValidatesCandidates());
      r.second = t.CandidateValidationRmse(r.avg, a);
      t.Average(a, false, &r.avg);
    } else {
      t.Average(a, false, &r.avg);
      r.second = t.AveragedValidationRmse(r.avg, a, false);
    }
    r.plain = t.ValidationRmse(r.avg);  // inputs summed into xv_ chunks
    return r;
  };
  const Run one = run(internal::kExpChunkBytes, false);
  for (const bool candidate : {false, true}) {
    const Run r = run(7 * 16 * 4, candidate);
    EXPECT_EQ(r.first, one.first) << candidate;
    EXPECT_EQ(r.second, one.second) << candidate;
    EXPECT_EQ(r.plain, one.plain) << candidate;
    EXPECT_TRUE(r.avg == one.avg) << candidate;
  }
  const Run whole = run(internal::kExpChunkBytes, true);
  EXPECT_EQ(whole.second, one.second);
  EXPECT_TRUE(whole.avg == one.avg);
}

TEST(Trainer, ValidationMatchesADirectPass) {
  TrainOptions o = SmallOptions();
  o.factors = 0;
  o.learning_rate = 0.2f;
  ExpectValidationMatchesADirectPass(o);
}

// Hidden inputs and weights beyond kExpSoftplusLimit: those users take
// SoftplusSum.
TEST(Trainer, ValidationMatchesADirectPassBeyondTheExpRange) {
  TrainOptions o = SmallOptions();
  o.factors = 0;
  o.init_std = 9.5f;
  o.learning_rate = 0.01f;
  o.average = 0;
  const Extremes x = ExpectValidationMatchesADirectPass(o);
  EXPECT_GT(x.input, 2 * kExpSoftplusLimit);
  EXPECT_GT(x.weight, kSaturatedRowLimit);
}

// Hidden inputs beyond kExpSoftplusLimit with every weight within
// kSaturatedRowLimit (users with ~100 ratings): those users keep the
// exponentials' product with their saturated units split off
// (SplitSaturated).
TEST(Trainer, ValidationMatchesADirectPassWithSaturatedInputs) {
  TrainOptions o = SmallOptions();
  o.factors = 0;
  o.init_std = 2.0f;
  o.learning_rate = 0.01f;
  o.average = 0;
  o.ordinal = false;
  const Extremes x = ExpectValidationMatchesADirectPass(o, 300);
  EXPECT_GT(x.input, kExpSoftplusLimit);
  EXPECT_LE(x.weight, kSaturatedRowLimit);
}

// A learning rate that blows the weights up is reported as divergence
// (a non-finite training or validation RMSE), naming the epoch and the
// remedy, never returned as a model.
// The caller's transpose of the validation part is read instead of a copy:
// the same model; one of another shape is refused, naming the argument.
TEST(Trainer, ValidByItemIsTheValidationPartsTranspose) {
  auto s = testing_data::PlantedRatings(120, 40, 3, 0.3, 13);
  SparseRatings train, valid;
  CarveValidation(s.train.ByUser(), 0.1, 3, &train, &valid);
  TrainOptions o = SmallOptions();
  o.max_epochs = 3;
  const SparseRatings valid_by_item = valid.Transpose();
  auto own = TrainRbmSplit(train, valid, 5, o);
  auto given = TrainRbmSplit(train, valid, 5, o, nullptr, nullptr, nullptr,
                             &valid_by_item);
  ASSERT_TRUE(own.ok() && given.ok());
  EXPECT_TRUE(own->params == given->params);
  auto bad =
      TrainRbmSplit(train, valid, 5, o, nullptr, nullptr, nullptr, &valid);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("valid_by_item"), std::string::npos);
}

TEST(Trainer, DivergenceIsAnErrorNotAModel) {
  auto s = testing_data::PlantedRatings(120, 40, 3, 0.3, 13);
  SparseRatings train, valid;
  CarveValidation(s.train.ByUser(), 0.1, 3, &train, &valid);
  TrainOptions o = SmallOptions();
  o.factors = 8;
  o.learning_rate = 99;
  o.momentum = 0.99f;
  o.init_std = 9.9f;
  o.weight_decay = 0;
  o.max_epochs = 20;
  auto r = TrainRbmSplit(train, valid, 5, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(r.status().message().find("diverged at epoch"), std::string::npos)
      << r.status();
  EXPECT_NE(r.status().message().find("lower the learning rate"),
            std::string::npos);
}

// The factored RBM learns the planted structure as the unfactored one does.
TEST(Trainer, FactoredBeatsItemMeanOnPlantedStructure) {
  auto s = testing_data::PlantedRatings(200, 60, 3, 0.3, 11);
  TrainOptions o = SmallOptions();
  o.factors = 4;
  o.rated_hidden = 0;
  auto model = FitModel(s.train, o);
  ASSERT_TRUE(model.ok()) << model.status();
  const EvalMetrics m =
      Evaluate(*model, s.train.ByUser(), s.test, PredictMethod::kExact, 2);
  const double baseline = ItemMeanRmse(s);
  EXPECT_LT(m.rmse, 0.8 * baseline) << "item-mean baseline " << baseline;
  EXPECT_LT(m.nll, m.hist_nll);
}

TEST(Trainer, RejectsBadOptionsNamingTheField) {
  TrainOptions o;
  o.learning_rate = -1;
  EXPECT_NE(ValidateTrainOptions(o).message().find("lr"), std::string::npos);
  o = TrainOptions();
  o.hidden = -1;
  EXPECT_NE(ValidateTrainOptions(o).message().find("hidden"),
            std::string::npos);
  o.hidden = 10001;
  EXPECT_NE(ValidateTrainOptions(o).message().find("hidden"),
            std::string::npos);
  o = TrainOptions();
  o.factors = -2;
  EXPECT_NE(ValidateTrainOptions(o).message().find("factors"),
            std::string::npos);
  o.factors = 10001;
  EXPECT_NE(ValidateTrainOptions(o).message().find("factors"),
            std::string::npos);
  o = TrainOptions();
  o.rated_factors = -1;
  EXPECT_NE(ValidateTrainOptions(o).message().find("rated-factors"),
            std::string::npos);
  o = TrainOptions();
  o.mf_factors = kMaxMfFactors + 1;
  EXPECT_NE(ValidateTrainOptions(o).message().find("mf-factors"),
            std::string::npos);
  o = TrainOptions();
  o.mf_epochs = 0;
  EXPECT_NE(ValidateTrainOptions(o).message().find("mf-epochs"),
            std::string::npos);
  o = TrainOptions();
  o.mf_lambda = NAN;
  EXPECT_NE(ValidateTrainOptions(o).message().find("mf-lambda"),
            std::string::npos);
  o = TrainOptions();
  o.momentum = 1.5f;
  EXPECT_NE(ValidateTrainOptions(o).message().find("momentum"),
            std::string::npos);
  o = TrainOptions();
  o.average = 1.0f;
  EXPECT_NE(ValidateTrainOptions(o).message().find("average"),
            std::string::npos);
  o.average = -0.1f;
  EXPECT_NE(ValidateTrainOptions(o).message().find("average"),
            std::string::npos);
  EXPECT_TRUE(ValidateTrainOptions(TrainOptions()).ok());
  SparseRatings empty;
  EXPECT_EQ(TrainRbm(empty, 5, TrainOptions()).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// A float option on an open end of its range, as a value given just inside
// it becomes (the server's --momentum 0.99999999 is 1.0f): the message
// shows the value and says why.
TEST(Trainer, ValidateSaysWhenAFloatRoundedOntoAnOpenEnd) {
  TrainOptions o;
  o.momentum = static_cast<float>(0.99999999);
  ASSERT_EQ(o.momentum, 1.0f);
  EXPECT_EQ(ValidateTrainOptions(o).message(),
            "momentum: must be in [0, 1), got 1 (a value that close to 1 "
            "rounds to it in single precision)");
  o = TrainOptions();
  o.average = 1.5f;
  EXPECT_EQ(ValidateTrainOptions(o).message(),
            "average: must be in [0, 1), got 1.5");
  o = TrainOptions();
  o.weight_decay = 1.0000001f;
  EXPECT_EQ(ValidateTrainOptions(o).message(),
            "weight-decay: must be in [0, 1), got 1.0000001");
  o = TrainOptions();
  o.lr_decay = static_cast<float>(1e-50);
  EXPECT_EQ(ValidateTrainOptions(o).message(),
            "lr-decay: must be in (0, 1], got 0 (a value that close to 0 "
            "rounds to it in single precision)");
  o = TrainOptions();
  o.learning_rate = 100;
  EXPECT_EQ(ValidateTrainOptions(o).message(),
            "lr: must be in [0, 100) (0 = size rule), got 100 (a value that "
            "close to 100 rounds to it in single precision)");
}

// The size rule for hidden units, batch size and learning rate left at 0,
// and that FitModel records what it trained with.
TEST(Trainer, SizeRuleForBatchAndLearningRate) {
  const TrainOptions rule;  // the defaults leave all three to the rule
  EXPECT_EQ(rule.hidden, 0);
  EXPECT_EQ(rule.batch_size, 0);
  EXPECT_EQ(rule.learning_rate, 0.0f);
  auto at = [&](int64_t ratings) { return ResolveTrainOptions(rule, ratings); };
  for (int64_t n : {int64_t{0}, int64_t{1000}, int64_t{100000}}) {
    EXPECT_EQ(at(n).hidden, 100) << n;
    EXPECT_EQ(at(n).batch_size, 20) << n;
    EXPECT_FLOAT_EQ(at(n).learning_rate, 0.05f) << n;
  }
  EXPECT_EQ(at(230000).hidden, 110);  // 100 * sqrt(1.15) = 107.2
  EXPECT_EQ(at(400000).hidden, 140);
  EXPECT_EQ(at(900188).hidden, 200);  // ML-1M r90's training part
  EXPECT_EQ(at(900188).batch_size, 60);
  EXPECT_NEAR(at(900188).learning_rate, 0.05 * std::sqrt(3.0), 1e-6);
  EXPECT_EQ(at(10000000).hidden, 200);
  EXPECT_EQ(at(10000000).batch_size, 200);
  EXPECT_EQ(at(int64_t{1} << 40).hidden, 200);
  EXPECT_EQ(at(int64_t{1} << 40).batch_size, 200);
  TrainOptions f64;
  f64.hidden = 64;  // a given number of hidden units is kept
  EXPECT_EQ(ResolveTrainOptions(f64, 900188).hidden, 64);
  TrainOptions given;
  given.batch_size = 80;  // the learning rate follows a given batch size
  EXPECT_EQ(ResolveTrainOptions(given, 100).batch_size, 80);
  EXPECT_NEAR(ResolveTrainOptions(given, 100).learning_rate, 0.1, 1e-6);
  given.learning_rate = 0.3f;
  EXPECT_EQ(ResolveTrainOptions(given, 900188).learning_rate, 0.3f);
  EXPECT_TRUE(ValidateTrainOptions(rule).ok());
  TrainOptions bad;
  bad.batch_size = -1;
  EXPECT_FALSE(ValidateTrainOptions(bad).ok());

  auto s = testing_data::PlantedRatings(40, 20, 2, 0.4, 17);
  TrainOptions o;
  o.hidden = 6;
  o.max_epochs = 2;
  auto model = FitModel(s.train, o);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->options().batch_size, 20);
  EXPECT_FLOAT_EQ(model->options().learning_rate, 0.05f);
  EXPECT_EQ(model->options().hidden, 6);
  TrainOptions defaults;
  defaults.max_epochs = 1;
  auto by_rule = FitModel(s.train, defaults);
  ASSERT_TRUE(by_rule.ok()) << by_rule.status();
  EXPECT_EQ(by_rule->options().hidden, 100);
}

TEST(CdSchedule, ParsesAndRejects) {
  auto s = CdSchedule::Parse("1,3@20,5@29,9@42");
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->adaptive);
  EXPECT_EQ(s->StepsAt(1), 1);
  EXPECT_EQ(s->StepsAt(19), 1);
  EXPECT_EQ(s->StepsAt(20), 3);
  EXPECT_EQ(s->StepsAt(30), 5);
  EXPECT_EQ(s->StepsAt(100), 9);
  EXPECT_EQ(s->ToString(), "1,3@20,5@29,9@42");
  EXPECT_TRUE(CdSchedule::Parse("auto")->adaptive);
  EXPECT_FALSE(CdSchedule::Parse("0").ok());
  EXPECT_FALSE(CdSchedule::Parse("1,3@0").ok());
  EXPECT_FALSE(CdSchedule::Parse("1,3@5,5@4").ok());
  EXPECT_FALSE(CdSchedule::Parse("x").ok());
}

TEST(Fit, FallbackForUnknownItemsAndUsers) {
  auto s = testing_data::PlantedRatings(60, 20, 2, 0.4, 9);
  TrainOptions o = SmallOptions();
  o.max_epochs = 3;
  auto model = FitModel(s.train, o);
  ASSERT_TRUE(model.ok());
  std::vector<TestRating> test = {
      {0, -1, 3.0}, {-1, 0, 3.0}, {-1, -1, 3.0}, {0, 0, 3.0}};
  const EvalMetrics m =
      Evaluate(*model, s.train.ByUser(), test, PredictMethod::kExact, 1);
  EXPECT_EQ(m.n, 4);
  EXPECT_EQ(m.n_fallback, 3);
  // Predict: unknown item -> the user's histogram, flagged.
  const SparseRatings by_user = s.train.ByUser();
  VisibleSet v{by_user.col.data(), by_user.k.data(), by_user.RowSize(0)};
  std::vector<int32_t> q = {-1, 1};
  std::vector<float> out(q.size() * 5);
  std::vector<bool> fb;
  model->Predict(v, q, PredictMethod::kExact, out.data(), &fb);
  EXPECT_TRUE(fb[0]);
  EXPECT_FALSE(fb[1]);
  double mean = 0;
  for (int64_t r = 0; r < v.n; ++r) mean += v.ks[r] + 1;
  mean /= static_cast<double>(v.n);
  EXPECT_NEAR(model->Expectation(out.data()), mean, 1e-5);
}

}  // namespace
}  // namespace rbmrec

namespace rbmrec {
namespace {

// item_hT is sigmoid(item_x)^T: building a model (fitting, loading, from
// edited parameters) and AddItems keep it in step.
TEST(Fit, ItemHiddenFollowsItemInputs) {
  auto s = testing_data::PlantedRatings(40, 20, 2, 0.4, 17);
  TrainOptions o;
  o.hidden = 6;
  o.max_epochs = 3;
  auto model = FitModel(s.train, o);
  ASSERT_TRUE(model.ok());
  ASSERT_GT(model->item_rbm().F, 0);
  auto expect_fresh = [](const Model& m) {
    ASSERT_EQ(m.item_hT().rows(), m.item_x().cols());
    ASSERT_EQ(m.item_hT().cols(), m.item_x().rows());
    const RowMatrixXf want =
        (1.0f + (-m.item_x().transpose().array()).exp()).inverse().matrix();
    EXPECT_LT((m.item_hT() - want).cwiseAbs().maxCoeff(), 1e-6f);
  };
  expect_fresh(*model);
  absl::StatusOr<Model> loaded = DeserializeModel(SerializeModel(*model));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  expect_fresh(*loaded);
  ModelParams edited = model->params();
  edited.item_x.array() += 0.5f;
  const Model rebuilt(std::move(edited));
  expect_fresh(rebuilt);
  EXPECT_GT((rebuilt.item_hT() - model->item_hT()).cwiseAbs().maxCoeff(),
            1e-3f);
  ASSERT_EQ(AddItems(&*model, {"brand-new-item"}, 1), 1);
  expect_fresh(*model);
}

TEST(Estimate, ModelBytesWithinAFactorOfTheRealBlob) {
  auto s = testing_data::PlantedRatings(60, 30, 2, 0.4, 5);
  for (const int hidden : {4, 32}) {
    for (const int ensemble : {1, 2}) {
      TrainOptions o;
      o.hidden = hidden;
      o.ensemble = ensemble;
      o.max_epochs = 2;
      o.threads = 1;
      absl::StatusOr<Model> model = FitModel(s.train, o);
      ASSERT_TRUE(model.ok()) << model.status();
      const double real = static_cast<double>(SerializeModel(*model).size());
      DataShape shape;
      shape.users = s.train.users.size();
      shape.items = s.train.items.size();
      shape.ratings = static_cast<int64_t>(s.train.ratings.size());
      shape.K = s.train.scale.K();
      shape.mean_id_bytes = 3;
      const double est = static_cast<double>(EstimateModelBytes(shape, o));
      EXPECT_GE(est, real) << "hidden " << hidden << " ensemble " << ensemble;
      EXPECT_LE(est, 1.5 * real + 8192)
          << "hidden " << hidden << " ensemble " << ensemble;
      // Unfactored with averaging, training holds the model plus four
      // copies of the parameters (W, its velocity, the average, the best).
      EXPECT_GT(EstimateTrainingBytes(shape, o, 1), 5 * real);
    }
  }
}

// Factored with averaging, each RBM holds two full-size copies of W (the
// average, and the best from a worse epoch on) beside A and its velocity
// and the average's hidden inputs; unfactored, four (W, its velocity, the
// average, the best). The 10 M shape of bench/scale_epochs.sh.
TEST(Estimate, TrainingBytesCountTheCopiesHeld) {
  DataShape shape;
  shape.users = 60000;
  shape.items = 10000;
  shape.ratings = 10000000;
  shape.K = 5;
  TrainOptions factored;
  factored.hidden = 200;
  factored.factors = 32;
  factored.rated_hidden = 0;
  TrainOptions dense = factored;
  dense.factors = 0;
  const double rows = 60000 + 10000;  // the U-RBM's and the I-RBM's
  const double w = rows * 5 * 200 * 4, biases = (rows * 5 + 2 * 200) * 4;
  const double a = rows * 5 * 32 * 4, inputs = rows * 200 * 4;
  EXPECT_NEAR(static_cast<double>(EstimateTrainingBytes(shape, dense, 2) -
                                  EstimateTrainingBytes(shape, factored, 2)),
              2 * (w + biases) - 2 * a - inputs, 1e3);
}

// The served model's exp(W) tables follow Model::ExpTableWanted: at ML-1M's
// shape both RBMs' (3,706 and 6,040 visible units x K x F floats); at the
// 10 M shape only the U-RBM's (the I-RBM's 240 MB is above 16 bytes a
// rating); none with hidden so large that each is above 512 MiB.
TEST(Estimate, ExpTablesFollowTheModelsSizeRule) {
  DataShape shape;
  shape.users = 6040;
  shape.items = 3706;
  shape.ratings = 1000209;
  shape.K = 5;
  TrainOptions o;
  o.hidden = 200;
  EXPECT_EQ(EstimateExpTableBytes(shape, o), (6040 + 3706) * 5 * 200 * 4);
  o.item_based = false;
  EXPECT_EQ(EstimateExpTableBytes(shape, o), 3706 * 5 * 200 * 4);
  shape.users = 60000;
  shape.items = 10000;
  shape.ratings = 10000000;
  o.item_based = true;
  EXPECT_EQ(EstimateExpTableBytes(shape, o), 10000 * 5 * 200 * 4);
  o.hidden = 5000;
  shape.ratings = 1000000000;
  EXPECT_EQ(EstimateExpTableBytes(shape, o), 0);
}

TEST(Estimate, SaturatesInsteadOfOverflowing) {
  DataShape shape;
  shape.users = 1000000;
  shape.items = 100000;
  shape.ratings = 100000000;
  TrainOptions o;
  o.hidden = std::numeric_limits<int>::max();
  o.batch_size = std::numeric_limits<int>::max();
  o.ensemble = std::numeric_limits<int>::max();
  EXPECT_EQ(EstimateModelBytes(shape, o), INT64_MAX);
  EXPECT_EQ(EstimateTrainingBytes(shape, o, 1 << 20), INT64_MAX);
  // Monotone in the options that size buffers.
  TrainOptions small;
  TrainOptions big_batch = small;
  big_batch.batch_size = 5000000;
  EXPECT_GT(EstimateTrainingBytes(shape, big_batch, 4),
            EstimateTrainingBytes(shape, small, 4) +
                int64_t{2} * 5000000 * small.hidden * 4 - 1);
}

}  // namespace
}  // namespace rbmrec
