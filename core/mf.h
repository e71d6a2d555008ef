#ifndef RBMREC_CORE_MF_H_
#define RBMREC_CORE_MF_H_

// Matrix factorisation beside the RBMs: the seed paper's last step blended
// its RBMs with SVD models, whose errors differ from theirs. The model
// keeps only the item factors; a user's factor is folded in from their
// ratings when they are served (FoldInUser), as the RBMs serve any user from
// the ratings in the request, so nothing is stored per user and new users,
// new ratings and erased users need no update of it.
//
//   r_ui ~ p_u . q_i   (no biases, as LIBMF)
//
// Training (TrainMf) is stochastic gradient descent with LIBMF's update: an
// L2 penalty lambda on both factors and AdaGrad steps with one accumulator
// per row (the mean squared gradient over the row's entries). Served users'
// factors are trained the same way against the fixed item factors, from the
// same start, for fold_epochs passes over the user's ratings: this follows
// the trained factors closely where a least-squares fit of p_u does not
// (SGD's early stop is part of its regularisation). The served prediction
// blends the RBM's expected rating with p_u . q_i (MfParams::intercept,
// rbm_weight, mf_weight, fitted on validation data by FitModel) and tilts
// the RBM's distribution to that mean (TiltToMean).

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/rating_scale.h"
#include "core/ratings.h"
#include "core/rbm.h"

namespace rbmrec {

// The most fold-in passes a model may ask for (what a model file may
// hold: each pass costs a served user's ratings x ~4 factors).
inline constexpr int kMaxMfFoldEpochs = 100;

struct MfOptions {
  int factors = 128;
  int epochs = 30;
  float lambda = 0.05f;
  float learning_rate = 0.1f;
  int fold_epochs = 30;
  uint64_t seed = 1;
  int threads = 1;
  // Optional: called after every pass with its number (counted on from a
  // continued state's passes, from 1) and the RMSE of the pass's errors
  // (each rating's before its step); returning false stops the training
  // there (MfTrainState::stopped).
  std::function<bool(int epoch, double train_rmse)> progress;
};

// What a served model keeps of the factorisation (ModelParams::mf).
struct MfParams {
  int32_t factors = 0;  // 0: no factorisation
  int32_t fold_epochs = 0;
  float lambda = 0;
  float learning_rate = 0;
  uint64_t seed = 0;
  // Item factors, one row per item of the model at fit time (items added
  // later have none); trained[i] = 1 where item i had training ratings
  // (other rows are unused).
  RowMatrixXf q;
  std::vector<uint8_t> trained;
  // The served mean: intercept + rbm_weight * E_rbm + mf_weight * p_u . q_i.
  float intercept = 0;
  float rbm_weight = 1;
  float mf_weight = 0;

  bool empty() const { return factors <= 0 || q.rows() == 0; }
  // True when item i has a trained factor. Items outside q's rows (added
  // online) have none.
  bool Serves(int32_t i) const {
    return !empty() && i >= 0 && i < q.rows() &&
           trained[static_cast<size_t>(i)] != 0;
  }
};

// What TrainMf's SGD holds besides the item factors, kept to continue a
// training on more ratings of the same users and items: every user's
// factor, both sides' AdaGrad accumulators, the item factors and the
// passes run.
struct MfTrainState {
  RowMatrixXf p, q;
  std::vector<float> gp, gq;
  int epochs_done = 0;
  bool stopped = false;  // MfOptions::progress returned false
};

// Trains item factors on `by_user` (rows users, cols items, rows sorted by
// col; rating values scale.Value(k)) by blocked SGD: users and items are
// cut into 8 x 8 blocks, and each of an epoch's 8 strata (8 blocks sharing
// no user or item) runs its blocks in parallel, each block's ratings in a
// fixed order. The result is therefore the same bit for bit at any
// options.threads. Returns the fields of MfParams other than the blend
// weights (intercept 0, rbm_weight 1, mf_weight 0). Empty (factors 0)
// when by_user has no ratings or options.factors <= 0.
//
// `state` (optional): when it holds a training of by_user's users x items
// with options.factors (from an earlier call), the SGD continues from it
// (factors, accumulators and the epochs' seeds) for options.epochs more
// passes instead of starting afresh; on return it holds this training's
// state. The same bits at any thread count either way.
MfParams TrainMf(const SparseRatings& by_user, const RatingScale& scale,
                 const MfOptions& options, MfTrainState* state = nullptr);

// The user's factor (mf.factors floats into p) from the ratings in v (items
// without a trained factor are skipped): fold_epochs AdaGrad SGD passes
// against the fixed item factors from the start every training user had
// (a function of mf.seed), the ratings in an order drawn from mf.seed
// after sorting them by item, so the result depends on the set of ratings
// only, not on their order in v. Costs fold_epochs x v.n x ~4 factors
// multiply-adds. Returns the number of ratings used: with none, p is the
// start alone, which says nothing about the user (Model::BlendMf does not
// blend then). REQUIRES !mf.empty(); every k of v < scale.K().
// mf.factors > kMaxMfFactors (which no model holds): p all 0, returns 0.
int64_t FoldInUser(const MfParams& mf, const RatingScale& scale,
                   const VisibleSet& v, float* p);

// FitModel's factorisation step (docs/model.md, "The matrix
// factorisation"): trained on `train_part` (rows users, sorted by col); its
// blend with the RBMs' served mean (rbm_means, one per rating of `valid`,
// in its order) fitted by least squares on `valid`, each validation user's
// factor folded in from their train_part ratings as serving folds it in.
// Kept when the blended validation RMSE is below 0.999 x the RBMs' on the
// same ratings: then its training continues on `all` the training ratings
// (train_part and valid merged) for options.epochs / kMfRefitDivisor more
// passes (at least one), and the blend's weights apply to that one. Not kept
// (mf empty): options.factors <= 0, no validation ratings, or no gain.
// options.progress sees the passes of both trainings, numbered on across
// them; when it returns false the fit stops there (cancelled, mf empty).
inline constexpr int kMfRefitDivisor = 3;
// The refit's passes for options.epochs (a third, at least one), and all
// of FitMfBlend's passes (the most its progress numbers).
inline int MfRefitEpochs(int epochs) {
  return std::max(1, epochs / kMfRefitDivisor);
}
inline int MfBlendEpochs(int epochs) { return epochs + MfRefitEpochs(epochs); }
struct MfBlendFit {
  MfParams mf;
  bool cancelled = false;  // options.progress returned false (mf empty)
  double valid_rmse = -1;  // the blend's, of the first factorisation
  double seconds = 0;      // both trainings and the fit
};
MfBlendFit FitMfBlend(const SparseRatings& train_part,
                      const SparseRatings& valid, const SparseRatings& all,
                      const std::vector<double>& rbm_means,
                      const RatingScale& scale, const MfOptions& options);

// p . q_i. REQUIRES mf.Serves(i).
float MfScore(const MfParams& mf, const float* p, int32_t i);

// Tilts a distribution over the scale's K values towards the mean
// `target`: probs_k <- probs_k exp(theta v_k) / Z with theta such that the
// mean is target (clamped to within 1e-3 of the scale's range of the
// values probs gives weight to). The exponential tilt is the distribution
// nearest to probs (in KL divergence) with that mean. Probabilities of 0
// stay 0; a distribution on one value is left as it is; non-finite input
// or target leaves probs unchanged. Computed in double, each exponent
// taken from the supported end theta tilts towards (so <= 0: no overflow),
// to within 1e-6 of the range of the mean.
void TiltToMean(const RatingScale& scale, double target, float* probs);

}  // namespace rbmrec

#endif  // RBMREC_CORE_MF_H_
