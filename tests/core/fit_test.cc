// core/fit.h's contracts: DatasetFromRaw's id maps and errors, FitModel's
// determinism, progress reports, cancellation and summary, and Evaluate's
// independence of its thread count.

#include "core/fit.h"

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/core/synthetic.h"

namespace rbmrec {
namespace {

TrainOptions SmallOptions() {
  TrainOptions o;
  o.hidden = 12;
  o.max_epochs = 4;
  o.batch_size = 10;
  o.rated_hidden = 10;
  o.rated_max_epochs = 3;
  o.seed = 3;
  o.threads = 1;
  return o;
}

TEST(DatasetFromRaw, MapsIdsInOrderOfFirstAppearance) {
  const std::vector<RawRating> rows = {
      {"alice", "film-b", 4, 0, 1},
      {"bob", "film-a", 1, 0, 2},
      {"alice", "film-a", 5, 0, 3},
  };
  absl::StatusOr<Dataset> d = DatasetFromRaw(rows, RatingScale(), "r.csv");
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->users.size(), 2);
  ASSERT_EQ(d->items.size(), 2);
  EXPECT_EQ(d->users.Name(0), "alice");
  EXPECT_EQ(d->users.Name(1), "bob");
  EXPECT_EQ(d->items.Name(0), "film-b");
  EXPECT_EQ(d->items.Name(1), "film-a");
  ASSERT_EQ(d->ratings.size(), 3u);
  // Rating indices on the default 1..5 scale: value - 1.
  EXPECT_EQ(d->ratings[0].k, 3);
  EXPECT_EQ(d->ratings[1].k, 0);
  EXPECT_EQ(d->ratings[2].k, 4);
  EXPECT_EQ(d->ratings[2].user, 0);
  EXPECT_EQ(d->ratings[2].item, 1);
}

TEST(DatasetFromRaw, OffScaleRatingNamesFileAndLine) {
  const std::vector<RawRating> rows = {{"u", "i", 3, 0, 1},
                                       {"u", "j", 7, 0, 12}};
  absl::StatusOr<Dataset> d = DatasetFromRaw(rows, RatingScale(), "r.csv");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(d.status().message().rfind("r.csv:12: ", 0), 0u)
      << d.status().message();
}

TEST(FitModel, RejectsBadOptions) {
  auto s = testing_data::PlantedRatings(30, 10, 2, 0.4, 1);
  TrainOptions o = SmallOptions();
  o.hidden = -1;
  absl::StatusOr<Model> m = FitModel(s.train, o);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
}

// Same data, options and seed: the same model bit for bit, whether fitted
// again or with another thread count (the item-based RBM then trains beside
// the user-based ones); another seed gives another model.
TEST(FitModel, SameSeedSameBitsAtOneAndTwoThreads) {
  auto s = testing_data::PlantedRatings(80, 30, 3, 0.35, 4);
  TrainOptions o = SmallOptions();
  o.ensemble = 2;
  absl::StatusOr<Model> a = FitModel(s.train, o);
  absl::StatusOr<Model> again = FitModel(s.train, o);
  o.threads = 2;
  absl::StatusOr<Model> two = FitModel(s.train, o);
  ASSERT_TRUE(a.ok() && again.ok() && two.ok());
  for (const Model* b : {&*again, &*two}) {
    ASSERT_EQ(b->members().size(), 2u);
    EXPECT_TRUE(a->members()[0] == b->members()[0]);
    EXPECT_TRUE(a->members()[1] == b->members()[1]);
    EXPECT_TRUE(a->item_rbm() == b->item_rbm());
    EXPECT_TRUE(a->rated_rbm() == b->rated_rbm());
    EXPECT_EQ(a->params().user_weight, b->params().user_weight);
    EXPECT_EQ(a->summary().valid_rmse, b->summary().valid_rmse);
    EXPECT_EQ(a->summary().epochs_run, b->summary().epochs_run);
  }
  // Ensemble members use seeds seed + e: they differ from one another.
  EXPECT_FALSE(a->members()[0] == a->members()[1]);
  o.seed += 100;
  absl::StatusOr<Model> other = FitModel(s.train, o);
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(a->members()[0] == other->members()[0]);
}

// Progress numbers the RBMs 0..ensemble-1 (user-based), ensemble (the
// item-based one) and ensemble + 1 (the rated RBM, with its NDCG and no
// RMSEs); the summary adds up the rating RBMs' epochs.
// FitModel from FitData trains the same model as from the Dataset, gives
// back the ratings by user it releases while training and moves the id
// maps into the model.
TEST(FitModel, FitDataTrainsTheSameModelAndKeepsTheRatingsByUser) {
  auto s = testing_data::PlantedRatings(60, 25, 2, 0.4, 5);
  const TrainOptions o = SmallOptions();
  absl::StatusOr<Model> from_dataset = FitModel(s.train, o);
  FitData data;
  data.scale = s.train.scale;
  data.users = s.train.users;
  data.items = s.train.items;
  data.by_user = s.train.ByUser();
  data.ratings = static_cast<int64_t>(s.train.ratings.size());
  absl::StatusOr<Model> from_data = FitModel(&data, o);
  ASSERT_TRUE(from_dataset.ok() && from_data.ok());
  EXPECT_TRUE(from_data->members()[0] == from_dataset->members()[0]);
  EXPECT_TRUE(from_data->params().item_rbm == from_dataset->params().item_rbm);
  EXPECT_TRUE(from_data->rated_rbm() == from_dataset->rated_rbm());
  const SparseRatings whole = s.train.ByUser();
  EXPECT_EQ(data.by_user.offsets, whole.offsets);
  EXPECT_EQ(data.by_user.col, whole.col);
  EXPECT_EQ(data.by_user.k, whole.k);
  EXPECT_EQ(data.users.size(), 0);
  EXPECT_EQ(data.items.size(), 0);
  EXPECT_TRUE(from_data->users() == s.train.users);
  EXPECT_TRUE(from_data->items() == s.train.items);
}

TEST(FitModel, ProgressNumbersTheRbmsAndTheSummaryAddsUp) {
  auto s = testing_data::PlantedRatings(60, 24, 2, 0.4, 6);
  TrainOptions o = SmallOptions();
  o.ensemble = 2;
  std::map<int, int> epochs;  // member -> last epoch reported
  bool rated_ok = true;
  absl::StatusOr<Model> m =
      FitModel(s.train, o, [&](int member, const EpochStats& st) {
        if (member == 3) {
          EXPECT_EQ(RatedMember(o), 3);
          rated_ok = rated_ok && std::isnan(st.train_rmse) &&
                     std::isnan(st.valid_rmse) && st.valid_ndcg >= -1;
        } else if (member == 4) {
          // The factorisation: its passes numbered on, each one's train
          // RMSE, no validation figures; before the rated RBM.
          EXPECT_EQ(FactorisationMember(o), 4);
          EXPECT_EQ(st.epoch, epochs.count(4) ? epochs[4] + 1 : 1);
          EXPECT_EQ(epochs.count(3), 0u);
          EXPECT_TRUE(st.train_rmse > 0 && st.train_rmse < 4) << st.train_rmse;
          EXPECT_TRUE(std::isnan(st.valid_rmse));
          EXPECT_EQ(st.valid_ndcg, -1);
        } else {
          rated_ok = rated_ok && st.valid_ndcg == -1;
        }
        epochs[member] = st.epoch;
        return true;
      });
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(epochs.size(), 5u);
  EXPECT_EQ(epochs.begin()->first, 0);
  EXPECT_EQ(epochs.rbegin()->first, 4);
  // 30 passes, and 10 more on all ratings when the blend is kept.
  EXPECT_EQ(epochs[4], m->HasMf() ? 40 : 30);
  EXPECT_TRUE(rated_ok);
  EXPECT_EQ(m->summary().epochs_run, epochs[0] + epochs[1] + epochs[2]);
  EXPECT_EQ(m->summary().rated_epochs, epochs[3]);
  EXPECT_TRUE(m->HasRatedRbm());
  EXPECT_GT(m->summary().valid_rmse, 0);
  EXPECT_GE(m->summary().train_seconds, m->summary().rated_seconds);
}

TEST(FitModel, ProgressReturningFalseCancels) {
  auto s = testing_data::PlantedRatings(40, 16, 2, 0.4, 8);
  // A user-based RBM, the item-based one, the rated one, the
  // factorisation.
  for (int stop_at : {0, 1, 2, 3}) {
    TrainOptions o = SmallOptions();
    absl::StatusOr<Model> m = FitModel(
        s.train, o,
        [&](int member, const EpochStats&) { return member != stop_at; });
    ASSERT_FALSE(m.ok()) << stop_at;
    EXPECT_EQ(m.status().code(), absl::StatusCode::kCancelled) << stop_at;
  }
}

// Evaluate: the same metrics, bit for bit, at any thread count.
TEST(Evaluate, DoesNotDependOnThreads) {
  auto s = testing_data::PlantedRatings(80, 30, 3, 0.35, 10);
  absl::StatusOr<Model> m = FitModel(s.train, SmallOptions());
  ASSERT_TRUE(m.ok());
  const SparseRatings by_user = s.train.ByUser();
  const EvalMetrics one =
      Evaluate(*m, by_user, s.test, PredictMethod::kExact, 1);
  const EvalMetrics two =
      Evaluate(*m, by_user, s.test, PredictMethod::kExact, 2);
  EXPECT_EQ(one.n, static_cast<int64_t>(s.test.size()));
  EXPECT_EQ(one.rmse, two.rmse);
  EXPECT_EQ(one.mae, two.mae);
  EXPECT_EQ(one.nll, two.nll);
  EXPECT_EQ(one.n_fallback, two.n_fallback);
  EXPECT_TRUE(std::isfinite(one.rmse));
  EXPECT_LE(one.mae, one.rmse);
}

// Evaluate's predictions: one per test rating in test order, each what
// that rating alone is predicted as, and the RMSE and MAE are theirs.
TEST(Evaluate, ReturnsEachPredictionInTestOrder) {
  auto s = testing_data::PlantedRatings(80, 30, 3, 0.35, 10);
  absl::StatusOr<Model> m = FitModel(s.train, SmallOptions());
  ASSERT_TRUE(m.ok());
  const SparseRatings by_user = s.train.ByUser();
  std::vector<double> pred;
  const EvalMetrics all =
      Evaluate(*m, by_user, s.test, PredictMethod::kExact, 2, nullptr, &pred);
  ASSERT_EQ(pred.size(), s.test.size());
  double se = 0, ae = 0;
  for (size_t i = 0; i < pred.size(); ++i) {
    se += (pred[i] - s.test[i].rating) * (pred[i] - s.test[i].rating);
    ae += std::abs(pred[i] - s.test[i].rating);
  }
  EXPECT_DOUBLE_EQ(all.rmse, std::sqrt(se / static_cast<double>(pred.size())));
  EXPECT_DOUBLE_EQ(all.mae, ae / static_cast<double>(pred.size()));
  for (size_t i : {size_t{0}, pred.size() / 2, pred.size() - 1}) {
    std::vector<double> one;
    Evaluate(*m, by_user, {s.test[i]}, PredictMethod::kExact, 1, nullptr, &one);
    ASSERT_EQ(one.size(), 1u);
    EXPECT_FLOAT_EQ(static_cast<float>(one[0]), static_cast<float>(pred[i]))
        << i;
  }
}

}  // namespace
}  // namespace rbmrec
