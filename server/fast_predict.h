#ifndef RBMREC_SERVER_FAST_PREDICT_H_
#define RBMREC_SERVER_FAST_PREDICT_H_

// Scoring every item for Recommend without per-call allocations: the same
// distributions as Model::PredictAll (exact rule or mean field, ensemble
// average, the model's fallback for untrained items), computed with
// per-thread scratch buffers and the exact rule's softplus sums evaluated
// block-wise with vectorized Eigen array operations.
//
// Thread-safe (each thread uses its own scratch); `model` is only read.

#include <vector>

#include "core/model.h"

namespace rbmrec::server {

// out: num_items() x K, row-major, each row summing to 1.
// `user` is the model user index (Model::users) or -1 (see Model::Predict).
void PredictAllFast(const Model& model, int32_t user, const VisibleSet& v,
                    PredictMethod method, RowMatrixXf* out);

// Ranking scores of every item by mean field, without the distributions:
// scores[i] = sum_k values[k] * p(v_i = k) with p the mean-field
// distribution of PredictAllFast (ensemble average, U/I mix), e.g. values =
// the rating values for the expected rating, or 0/1 for the probability of
// a rating >= a threshold. Items without training data (Model::Trained
// false) get NaN, so rankers skip them.
// REQUIRES: values has K entries; scores has num_items() entries.
void ScoreAllMeanField(const Model& model, int32_t user, const VisibleSet& v,
                       const float* values, float* scores);

// Recommend's ranking.
struct RankOptions {
  PredictMethod method = PredictMethod::kExact;
  int n = 10;           // items wanted, >= 1
  int candidates = 30;  // stage-2 candidates: max(candidates, 3n)
  int k0 = -1;          // >= 0: rank by p(rating index >= k0), else by the
                        // expected rating
};
struct Ranked {
  int32_t item = 0;     // model index
  float score = 0;      // the ranking score (expectation or probability)
  double expected = 0;  // expected rating of the requested method
};

// The best opt.n items with training data (Model::Trained) that are not in
// `excluded`, best first (ties by item id). Two stages: (1) every item gets
// a mean-field score (ScoreAllMeanField), or with candidates == 0 and the
// exact method the exact rule over all items (PredictAllFast); (2) the best
// max(candidates, 3n) (n when stage 1 already used the requested method)
// are scored again with the requested method, which gives the order and
// the numbers. Distributions that are not finite are skipped.
// Thread-safe (per-thread scratch).
std::vector<Ranked> RankItems(const Model& model, int32_t user,
                              const VisibleSet& v,
                              const std::vector<int32_t>& excluded,
                              const RankOptions& opt);

}  // namespace rbmrec::server

#endif  // RBMREC_SERVER_FAST_PREDICT_H_
