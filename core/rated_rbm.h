#ifndef RBMREC_CORE_RATED_RBM_H_
#define RBMREC_CORE_RATED_RBM_H_

// The "which items does a user rate" RBM: implicit feedback, the binary
// "rated" matrix of the training data (whatever the rating value). One
// binary visible unit r_i per item (1 = the user rated item i), F binary
// hidden units, weights shared by every user (Salakhutdinov, Mnih & Hinton
// 2007 Sec. 4's implicit "which movies were rated" input, here as an RBM of
// its own, trained on every training user's rated set):
//
//   p(h_j = 1 | r) = sigmoid(c_j + sum_{i: r_i = 1} W_ij)
//   p(r_i = 1 | h) = sigmoid(b_i + sum_j W_ij h_j)
//
// Stored in RbmParams with K = 1 (W is m x F, b has m entries, c F). Served
// by mean field: a user's hidden probabilities from the items they rated
// (stored and ad-hoc, so a new user is folded in from their ratings with no
// weight update), then every item's logit b_i + W_i . h. Recommend ranks by
// p(rated) x p(rating >= t | rated) (core/recommend.h): what the user will
// rate and like, rather than what they would like if they rated it.
//
// Trained by CD-1 on mini-batches of users with dense matrix products
// (the negative phase reconstructs every item, so the cost per epoch is
// ~6 * users * items * F flops, or ~6 * users * items * C factored through
// C factors; the positive phase's gradient is sparse); deterministic: the
// same data, options and seed give the same bits whatever the thread count.

#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "core/ratings.h"
#include "core/rbm.h"

namespace rbmrec {

struct RatedRbmOptions {
  int hidden = 100;             // F
  int max_epochs = 30;          // upper bound; early stopping ends sooner
  int batch_size = 100;         // users per mini-batch
  float learning_rate = 0.05f;  // per batch (averaged gradients)
  float momentum = 0.9f;
  float weight_decay = 1e-4f;  // L2 on W
  float init_std = 0.01f;      // W ~ N(0, init_std^2)
  int patience = 3;  // epochs without a better validation NDCG before stopping
  int eval_n = 10;   // validation metric: NDCG at this cut-off
  // Factored (the seed paper's Eq. 12): 0 trains W itself; C in [1, F)
  // trains W = A B (A items x C, B C x F), so the negative phase's dense
  // products cost ~C rather than F per item and user; W is set to A B after
  // every epoch (validation and the result see W as usual).
  int factors = 0;
  uint64_t seed = 1;
  int threads = 1;
};

struct RatedRbmResult {
  RbmParams params;  // the best epoch's (K = 1)
  int epochs_run = 0;
  int best_epoch = 0;
  double best_valid_ndcg = 0;  // -1 without validation data
  double seconds = 0;
  std::vector<double> valid_ndcg;  // per epoch
  bool cancelled = false;
};

// Called after every epoch with its validation NDCG; return false to stop
// (the best parameters so far are returned, with cancelled = true).
using RatedProgressFn = std::function<bool(int epoch, double valid_ndcg)>;

// Trains on the rated sets of `train` (rows users, cols items; only `col`
// is read). `valid` (same shape, disjoint entries) holds each user's
// held-out rated items: after each epoch every user with held-out items
// ranks the items outside their training set and the mean NDCG@eval_n of
// the held-out items picks the best epoch and stops training after
// `patience` epochs without a better one. Without validation entries all
// max_epochs run and the last is kept. InvalidArgument for options out of
// range. Thread-safe: independent calls may run concurrently.
absl::StatusOr<RatedRbmResult> TrainRatedRbm(
    const SparseRatings& train, const SparseRatings& valid,
    const RatedRbmOptions& options, const RatedProgressFn& progress = nullptr);

// h = p(h | r) = sigmoid(c + sum of W's rows of `items`) (mean field).
// Indices outside [0, num_items) are skipped. REQUIRES: h has F entries.
void RatedHidden(const RbmParams& p, const int32_t* items, int64_t n, float* h);

// logits[i] = b_i + W_i . h for every item (p(rated) = sigmoid(logit)).
// REQUIRES: logits has num_items entries.
void RatedLogits(const RbmParams& p, const float* h, float* logits);

// Numerically safe sigmoid (no overflow for any finite or infinite input).
inline float StableSigmoid(float x) {
  if (x >= 0) return 1.0f / (1.0f + std::exp(-x));
  const float e = std::exp(x);
  return e / (1.0f + e);
}

}  // namespace rbmrec

#endif  // RBMREC_CORE_RATED_RBM_H_
