#ifndef RBMREC_CORE_RECOMMEND_H_
#define RBMREC_CORE_RECOMMEND_H_

// Recommend's ranking, in core so that the server and the evaluation tools
// rank the same way.

#include <cstdint>
#include <vector>

#include "core/item_filter.h"
#include "core/model.h"
#include "core/scoring.h"

namespace rbmrec {

// What the items are ranked by.
enum class RankBy {
  kExpected,      // the expected rating
  kAtLeast,       // p(rating >= value k0 | rated)
  kRated,         // p(rated): how likely the user is to rate the item at all,
                  // from the rated RBM (core/rated_rbm.h)
  kRatedAtLeast,  // p(rated) x p(rating >= value k0 | rated): likely to be
                  // rated and liked
  kRegressionAtLeast,  // max(s, 0) x p(rating >= value k0 | rated), s the
                       // item regression's score (core/item_regression.h):
                       // the best on ML-1M (docs/model.md "Ranking")
};
// True for the rankings that need Model::HasItemRegression().
inline bool NeedsItemRegression(RankBy by) {
  return by == RankBy::kRegressionAtLeast;
}
// True for the rankings that need Model::HasRatedRbm().
inline bool NeedsRatedRbm(RankBy by) {
  return by == RankBy::kRated || by == RankBy::kRatedAtLeast;
}
// True for the rankings that use k0.
inline bool UsesThreshold(RankBy by) {
  return by == RankBy::kAtLeast || by == RankBy::kRatedAtLeast ||
         by == RankBy::kRegressionAtLeast;
}

// Recommend's ranking.
struct RankOptions {
  PredictMethod method = PredictMethod::kExact;
  int n = 10;           // items wanted, >= 1
  int candidates = 30;  // stage-2 candidates: max(candidates, 3n)
  RankBy by = RankBy::kExpected;
  int k0 = 0;  // the threshold's rating index when UsesThreshold(by)
  // Optional: Model::MemberInputs(v) computed beforehand (e.g. cached per
  // user by the server); null: RankItems computes it when it needs it.
  const float* member_x = nullptr;
  // Optional: only the items it allows are ranked (in every stage: the
  // mean-field candidates, the p(rated) order), besides `excluded`. null:
  // every item with training data. REQUIRES filter->num_items() ==
  // model.num_items().
  const ItemFilter* filter = nullptr;
  // Optional, for several users ranked together (e.g. a bulk answer): the
  // user's all-item passes computed beforehand, in one pass over W for a
  // batch of users; each must be what RankItems computes alone, so the
  // ranking is the same bit for bit. null: RankItems computes them.
  // NeedsRatedRbm(by): RatedLogitsBatch's logits of this user.
  const float* rated_logits = nullptr;
  // kExpected / kAtLeast (stage 1 by mean field): ScoreAllMeanFieldBatch's
  // scores of this user with RankValues(model, *this).
  const float* mean_field_scores = nullptr;
};
struct Ranked {
  int32_t item = 0;      // model index
  float score = 0;       // the ranking score
  double expected = 0;   // expected rating of the requested method
  float at_least = 0;    // p(rating >= k0 | rated) when UsesThreshold(by)
  float p_rated = 0;     // p(rated) when NeedsRatedRbm(by)
  float regression = 0;  // the item regression's score when
                         // NeedsItemRegression(by)
};

// The default threshold of the threshold rankings, as a rating index: the
// smallest scale value at or above the mean training rating (the item
// histogram's mean; the middle value without data). 4 on MovieLens 1-5.
int DefaultThresholdIndex(const Model& model);

// p(rated) of every item for a user who rated `v`'s items (stored and
// ad-hoc): the rated RBM's mean field, sigmoid(b_i + W_i . h(v)).
// REQUIRES model.HasRatedRbm(); out has num_items() entries.
void RatedProbabilities(const Model& model, const VisibleSet& v, float* out,
                        ScoringScratch* scratch);

// The per-rating values whose expectation is the mean-field score of
// RankItems' stage 1 for `opt` (K entries): the rating values for
// kExpected, 1 from k0 up (else 0) for kAtLeast.
void RankValues(const Model& model, const RankOptions& opt,
                std::vector<float>* values);

// True when RankItems with `opt` computes every item's mean-field score
// (ScoreAllMeanField) in stage 1, i.e. opt.mean_field_scores would be used.
bool RanksByMeanField(const RankOptions& opt);

// The rated RBM's logits b_i + W_i . h(v) of n users at once (*v[b] into
// out[b], num_items() entries each), as RankItems computes them for the
// p(rated) rankings (over W's half-precision copy where the model has
// one): one pass over W for all of them (kernels::MatVecRows*, whose rows
// do not depend on the batch), so out[b] is bit for bit that user's alone.
// Builds without AVX2 compute the users one by one.
// REQUIRES model.HasRatedRbm(); 1 <= n <= kMaxScoreBatch.
void RatedLogitsBatch(const Model& model, const VisibleSet* const* v, int n,
                      float* const* out, ScoringScratch* scratch);

// The best opt.n items with training data (Model::Trained) that are not in
// `excluded`, best first (ties by item id). Two stages: (1) every item gets
// a mean-field score (ScoreAllMeanField, core/scoring.h), or with candidates ==
// 0 and the exact method the exact rule over all items (PredictAll); (2) the
// best max(candidates, 3n) (n when stage 1 already used the requested method)
// are scored again with the requested method, which gives the order and
// the numbers. Distributions that are not finite are skipped. The p(rated)
// rankings use RatedProbabilities instead of stage 1: kRated ranks by it
// (the n best are then scored for the numbers); kRatedAtLeast scores items
// with the requested method in decreasing p(rated), 16 at a time, until no
// further item can reach the n-th best score (score <= p(rated)), so its
// order is the requested method's over all items, usually after scoring a
// few dozen (`candidates` does not apply). kRegressionAtLeast is the same
// search in decreasing item regression score s (score <= max(s, 0)); an
// item added after the regression's fit has s = 0; a user without rated
// items (every s = 0) is ranked by kRatedAtLeast instead. REQUIRES
// model.HasRatedRbm() for the p(rated) rankings,
// model.HasItemRegression() for kRegressionAtLeast, and 0 <= k0 < K for the
// threshold rankings. Thread-safe as long as each
// thread passes its own scratch.
std::vector<Ranked> RankItems(const Model& model, int32_t user,
                              const VisibleSet& v,
                              const std::vector<int32_t>& excluded,
                              const RankOptions& opt, ScoringScratch* scratch);

}  // namespace rbmrec

#endif  // RBMREC_CORE_RECOMMEND_H_
