#ifndef RBMREC_CORE_FIT_H_
#define RBMREC_CORE_FIT_H_

// Training a whole servable Model from a Dataset, and offline evaluation.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/metrics.h"
#include "core/model.h"
#include "core/ratings.h"
#include "core/readers.h"
#include "core/trainer.h"

namespace rbmrec {

// Maps raw rows to a Dataset on `scale` (new ids are added in order of
// first appearance). InvalidArgument "NAME:LINE: rating R is off the scale"
// for a rating not on the scale.
absl::StatusOr<Dataset> DatasetFromRaw(const std::vector<RawRating>& rows,
                                       const RatingScale& scale,
                                       std::string_view name);

// Progress of FitModel: which model (0..ensemble-1 the user-based members,
// `ensemble` the item-based one, RatedMember the rated RBM, whose stats
// carry valid_ndcg and no RMSEs, FactorisationMember the matrix
// factorisation, whose stats carry the train RMSE of its SGD pass and NaN
// valid_rmse, its passes numbered on through its continuation on all the
// ratings) and its epoch stats. The factorisation trains after the rating
// RBMs and before the rated RBM. With two or more threads the item-based
// RBM trains beside the user-based ones, so calls come from two threads,
// but never at the same time.
using FitProgressFn = std::function<bool(int member, const EpochStats&)>;
inline int RatedMember(const TrainOptions& options) {
  return options.ensemble + (options.item_based ? 1 : 0);
}
inline int FactorisationMember(const TrainOptions& options) {
  return RatedMember(options) + 1;
}

// Trains options.ensemble user-based RBMs (member e uses seed
// options.seed + e) and, when options.item_based, the item-based RBM, all on
// the same training part of `train` (options.validation_fraction of each
// user's ratings held out for early stopping); picks the U/I mixing weight
// on that validation part; returns the model with id maps, scale and item
// histogram. Then, when RatedHiddenUnits(options, ...) > 0, the rated RBM
// (core/rated_rbm.h) on the training part's rated sets, its epochs chosen by
// NDCG on the validation part's.
// With options.conditional the user-based members are conditional RBMs
// (TrainOptions::conditional) whose set r is the user's training ratings'
// items plus `extra`'s row (the items the user viewed, or is asked about,
// without a rating; rows the users, at most train's, cols its items; no
// item in both; nullptr: none): in training, a user's validation items
// join those extra items when `extra` is given (they are the items asked
// about there), else r is the training part's items alone.
// InvalidArgument for an `extra` of the wrong shape.
// Returns Cancelled if `progress` returns false. Thread-safe.
absl::StatusOr<Model> FitModel(const Dataset& train,
                               const TrainOptions& options,
                               const FitProgressFn& progress = nullptr,
                               const SparseRatings* extra = nullptr);

// FitModel's training data as it trains from: the ratings by user (rows the
// users of `users`, cols the items of `items`; Dataset::ByUser) and the
// number of ratings given, duplicates included (what the size rules of
// ResolveTrainOptions count: a Dataset's ratings.size()). A caller that
// builds this and drops its Dataset's ratings (12 bytes each) trains with
// ~22 bytes a rating less held than FitModel(Dataset) needs.
struct FitData {
  RatingScale scale;
  IdMap users, items;
  SparseRatings by_user;
  int64_t ratings = 0;
};

// The same model as FitModel of the Dataset `train` with
// train.ByUser() == data->by_user and train.ratings.size() ==
// data->ratings. data->by_user is released while the rating RBMs train (it
// is split into training and validation parts, which is all they need) and
// rebuilt, the same, from those parts before this returns. data->users and
// data->items move into the model (left empty; kept on an error), so no
// second copy is held while training. `extra` as in FitModel(Dataset).
absl::StatusOr<Model> FitModel(FitData* data, const TrainOptions& options,
                               const FitProgressFn& progress = nullptr,
                               const SparseRatings* extra = nullptr);

// A held-out rating with external ids mapped to the training data:
// user/item = -1 when unknown to the training data.
struct TestRating {
  int32_t user = -1;
  int32_t item = -1;
  double rating = 0;
};

struct EvalMetrics {
  double rmse = 0;
  double mae = 0;
  int64_t n = 0;
  int64_t n_fallback = 0;  // predicted by the protocol's fallback
  // Mean negative log-likelihood (nats) of the true rating under the
  // predicted distribution, and its classwise calibration error over the
  // K values (core/metrics.h); the same for the baseline distribution, the
  // item's training histogram with add-one smoothing.
  double nll = 0;
  double ece = 0;
  double hist_nll = 0;
  double hist_ece = 0;
  // The reliability tables behind ece and hist_ece (10 bins per value).
  Reliability reliability;
  Reliability hist_reliability;
};

// RMSE/MAE of the expected rating for each test rating, the user's
// conditioning set being their ratings in `train_by_user` (rows users of
// the model's user map). Fallback per docs/benchmarks.md: a user with no
// training ratings gets the item's mean; an item without training data gets
// the user's mean, else the global mean. Parallel over users; the result
// does not depend on `threads`. `extra` (rows as train_by_user's, or null):
// each user's extra items for a conditional model's r (FitModel).
// `predictions` (or null): set to each test rating's expected rating (or
// fallback), by test index.
EvalMetrics Evaluate(const Model& model, const SparseRatings& train_by_user,
                     const std::vector<TestRating>& test, PredictMethod method,
                     int threads, const SparseRatings* extra = nullptr,
                     std::vector<double>* predictions = nullptr);

// Top-N metrics of one way of ranking, averaged over the test users.
struct TopNResult {
  std::string name;
  TopNScores mean;
  // The same averages at every cut-off: at[j] at N = j + 1 (n entries;
  // at.back() == mean).
  std::vector<TopNScores> at;
  // The same at n in the protocol of ../shared/tools/peer-ease.py: relevant
  // test items unknown to training are dropped (not counted as misses),
  // users left with none are skipped; `known_users` counts the others.
  TopNScores known;
  int64_t known_users = 0;
};

// For every test user with at least one relevant test rating, the
// top n items not rated in training by (1) the expected rating and (2)
// p(rating >= relevant), both through Recommend's ranking (core/recommend.h,
// the server's), and (3) the number of training ratings (most popular
// first); precision, recall and NDCG at n against the relevant test items,
// averaged over those users. Parallel over users; deterministic.
// cold_start: every user is ranked as a user without ratings (no visible
// units, no parameters of their own: Recommend's cold start), so nothing is
// excluded and the lists are the same for every user.
// A model with the item regression (core/item_regression.h) adds two
// rankings: its scores alone ("item_regression", not for cold_start) and
// Recommend's kRegressionAtLeast ("item_regression_at_least").
std::vector<TopNResult> EvaluateTopN(const Model& model,
                                     const SparseRatings& train_by_user,
                                     const std::vector<TestRating>& test,
                                     double relevant, int n, int threads,
                                     int64_t* n_users, bool cold_start = false);

}  // namespace rbmrec

#endif  // RBMREC_CORE_FIT_H_
