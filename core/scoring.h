#ifndef RBMREC_CORE_SCORING_H_
#define RBMREC_CORE_SCORING_H_

// The all-item scorers: every item's distribution (or ranking score) for one
// user, the same numbers Model::Predict gives item by item (exact rule or
// mean field, ensemble average, U/I mix, the model's fallback for untrained
// items), without allocations once the caller's scratch has grown: one
// matrix-vector product per RBM for mean field, the exact rule's softplus
// sums vectorized. Used by Recommend (core/recommend.h), the server and the
// evaluation tools.
//
// Thread-safe as long as each thread passes its own scratch; `model` is
// only read.

#include <cstdint>
#include <utility>
#include <vector>

#include "core/kernels.h"
#include "core/model.h"

namespace rbmrec {

// Buffers of the scorers and of RankItems (core/recommend.h), owned by one
// thread and passed explicitly; they grow to the model's size and are
// reused. Not thread-safe.
struct ScoringScratch {
  Eigen::VectorXf x;
  Eigen::VectorXf scores;
  std::vector<float> fallback;
  std::vector<float> part;  // per-item scores of one RBM
  RowMatrixXf logits;
  Model::Scratch model;
  // RankItems' buffers.
  std::vector<float> values, first, probs, p_rated, member_x;
  std::vector<uint8_t> excluded;
  std::vector<int32_t> query;
  std::vector<std::pair<float, int32_t>> cand;
  RowMatrixXf all;
  // The batched passes' inputs and products (ScoreAllMeanFieldBatch,
  // RatedLogitsBatch in core/recommend.h).
  std::vector<float> batch_h, batch_out;
  // V^T h of the rated RBM's low-rank form (Model::rated_low_rank()), and
  // the sum of U's rows the hidden state is made from.
  std::vector<float> z, row_sum;
  // PredictAll's Model::MfInput of the user.
  std::vector<float> mf_x;
};

}  // namespace rbmrec

namespace rbmrec {

// out = p.W * h (p.W.rows() floats). In AVX2 builds, concurrent callers on
// the same matrix share one pass over W (flat combining, up to 8 at once: W
// is read from memory once for all of them); each caller gets exactly what
// it would get alone (kernels::MatVecRows). Thread-safe.
void SharedMatVec(const RbmParams& p, const float* h, float* out);
// The same over a row-major rows x F matrix of floats (e.g. the U of
// Model::rated_low_rank()).
void SharedMatVecRows(const float* w, int64_t rows, int F, const float* h,
                      float* out);
#ifdef RBMREC_AVX2
// The same over a rows x F matrix of halves (kernels::MatVecRowsHalf), e.g.
// Model::rated_w_half(); shares passes with other callers on that matrix.
void SharedMatVecHalf(const uint16_t* w, int64_t rows, int F, const float* h,
                      float* out);
#endif

// out: num_items() x K, row-major, each row summing to 1 (with the
// factorisation's blend where the model has one, as Model::Predict).
// `user` is the model user index (Model::users) or -1 (see Model::Predict).
void PredictAll(const Model& model, int32_t user, const VisibleSet& v,
                PredictMethod method, RowMatrixXf* out,
                ScoringScratch* scratch);

// Ranking scores of every item by mean field, without the distributions:
// scores[i] = sum_k values[k] * p(v_i = k) with p the mean-field
// distribution of PredictAll (ensemble average, U/I mix) before the matrix
// factorisation's blend (a model with one tilts each distribution to its
// own mean; RankItems' stage 1 ranks by the RBMs' part and its stage 2
// scores the candidates with the blend), e.g. values =
// the rating values for the expected rating, or 0/1 for the probability of
// a rating >= a threshold. Items without training data (Model::Trained
// false) get NaN, so rankers skip them.
// REQUIRES: values has K entries; scores has num_items() entries.
void ScoreAllMeanField(const Model& model, int32_t user, const VisibleSet& v,
                       const float* values, float* scores,
                       ScoringScratch* scratch);

// Users per batched pass over W (kernels::MatVecRows' most vectors).
inline constexpr int kMaxScoreBatch = 8;

// ScoreAllMeanField of n users at once (users[b] with ratings *v[b] into
// scores[b], each num_items() entries): each member RBM's W is read once
// for all of them (kernels::MatVecRows, whose rows do not depend on the
// batch), so scores[b] is bit for bit ScoreAllMeanField's for that user.
// Builds without AVX2 score the users one by one.
// REQUIRES: 1 <= n <= kMaxScoreBatch; values has K entries.
void ScoreAllMeanFieldBatch(const Model& model, const int32_t* users,
                            const VisibleSet* const* v, int n,
                            const float* values, float* const* scores,
                            ScoringScratch* scratch);

}  // namespace rbmrec

#endif  // RBMREC_CORE_SCORING_H_
