#ifndef RBMREC_SERVER_FAST_PREDICT_H_
#define RBMREC_SERVER_FAST_PREDICT_H_

// Scoring every item for Recommend without per-call allocations: the same
// distributions as Model::PredictAll (exact rule or mean field, ensemble
// average, the model's fallback for untrained items), computed with
// per-thread scratch buffers and the exact rule's softplus sums evaluated
// block-wise with vectorized Eigen array operations.
//
// Thread-safe (each thread uses its own scratch); `model` is only read.

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

}  // namespace rbmrec::server

#endif  // RBMREC_SERVER_FAST_PREDICT_H_
