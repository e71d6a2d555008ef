#ifndef RBMREC_CORE_TRAIN_OPTIONS_H_
#define RBMREC_CORE_TRAIN_OPTIONS_H_

// The hyper-parameters of training (TrainOptions, with the CD schedule and
// the prediction method used for validation), the size rules that fill in
// the fields left to them, and their validation. Split from core/trainer.h
// so that the model (core/model.h), which records the options it was
// trained with, does not depend on the trainer.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace rbmrec {

enum class PredictMethod { kExact = 0, kMeanField = 1 };

// Contrastive-divergence steps by epoch: T = steps of the last entry whose
// `from_epoch` <= epoch (epochs count from 1). "auto" instead raises T
// through 1, 3, 5, 9 each time validation RMSE stops improving.
struct CdSchedule {
  std::vector<std::pair<int, int>> steps{{1, 1}};  // (from_epoch, T)
  bool adaptive = false;  // constant CD-1 by default ("auto" costs more for
                          // little gain; docs/benchmarks.md)

  // "auto", "T" (constant), or "T1,T2@E2,T3@E3" (T2 from epoch E2 on...).
  static absl::StatusOr<CdSchedule> Parse(std::string_view spec);
  std::string ToString() const;
  int StepsAt(int epoch) const;
};

// Every hyper-parameter of training, with the shipped defaults (the best
// settings found on validation data; see README "Results").
// Bounds of TrainOptions::mf_factors and mf_epochs (ValidateTrainOptions),
// also what a model file may hold.
inline constexpr int kMaxMfFactors = 1024;
inline constexpr int kMaxMfEpochs = 1000;

struct TrainOptions {
  int hidden = 0;               // F, hidden units; 0 = the size rule
                                // (ResolveTrainOptions)
  int max_epochs = 60;          // upper bound; early stopping ends sooner
  int batch_size = 0;           // cases per mini-batch; 0 = the size rule
                                // (ResolveTrainOptions)
  float learning_rate = 0;      // per batch, for W and b (averaged grads);
                                // 0 = the size rule (ResolveTrainOptions)
  float lr_decay = 0.96f;       // learning rate multiplied by this per epoch
  float momentum = 0.8f;        // classical momentum on W, b and c
  float weight_decay = 0.005f;  // L2 on W, as lr * weight_decay * W
  float init_std = 0.05f;       // W ~ N(0, init_std^2)
  // Ordinal sharing between rating values (as CF-NADE shares its weights,
  // Zheng et al., ICML 2016): training steps W_i^k = U_i^0 + ... + U_i^k
  // (and b_i^k likewise) in U, with the weight decay on U, so neighbouring
  // values start alike and stay alike unless the data says otherwise. The
  // model (its energy, W and b) is the same RBM; only learning differs.
  bool ordinal = true;
  // Factored RBM (the seed paper's Eq. 12): C > 0 trains W = A B with A
  // (m*K) x C and B C x F, at ~C instead of ~K*F operations per rating in
  // the reconstruction; the model served is the same RBM with W = A B (and
  // its parameter average). 0 (or C >= hidden) = train W itself; -1 = the
  // size rule (ResolveTrainOptions).
  int factors = -1;
  // The conditional RBM (the seed paper's section 5) for the user-based
  // members: the hidden units also see r, which items the user rated or
  // viewed (or is asked about) without their ratings, through weights D
  // (RbmParams::D, zero at the start, learned by CD with W's learning rate,
  // momentum and weight decay). r is the user's rated items plus the
  // `extra` items given to training and prediction (core/fit.h). Off: the
  // plain RBM, bit for bit.
  bool conditional = false;
  CdSchedule cd;                    // CD-T schedule
  bool per_item_normalize = false;  // divide item rows' gradients by the
                                    // number of batch users who rated the item
  double validation_fraction = 0.05;  // per user, held out for early stopping
  int patience = 6;  // epochs without improvement before stopping
  // An epoch counts as an improvement for early stopping when it lowers
  // the validation RMSE by at least this fraction below the last epoch that
  // did (the best model is kept whatever the size of its gain). 0 = any
  // fall of more than 1e-5 counts. The default was chosen on held-out parts
  // of the training files (docs/benchmarks.md).
  double min_improvement = 0.0005;
  // Parameter averaging: validation, early stopping and the returned model
  // use A = average * A + (1 - average) * params after every epoch (A =
  // params after the first), the trainer itself the raw params. 0 = off.
  // Chosen on held-out parts of the training files (README "Accuracy").
  float average = 0.85f;
  uint64_t seed = 1;  // same seed, same model, any thread count
  int threads = 0;    // 0 = all hardware threads
  PredictMethod predict = PredictMethod::kExact;  // for validation RMSE
  int ensemble = 1;        // user-based RBMs averaged by FitModel
  bool item_based = true;  // FitModel also trains the item-based RBM and
                           // mixes it in (see core/model.h)
  // The "which items does a user rate" RBM (core/rated_rbm.h) that
  // Recommend's default ranking uses: FitModel trains it when
  // rated_hidden != 0. -1 = the size rule of RatedHiddenUnits.
  int rated_hidden = -1;
  int rated_max_epochs = 30;  // upper bound; early stopping ends sooner
  float rated_learning_rate = 0.05f;
  // The rated RBM trained factored, W = A B through this many factors
  // (RatedRbmOptions::factors); 0 (or at least its hidden units) = W
  // itself. The default holds at any size (docs/benchmarks.md).
  int rated_factors = 32;
  // The item regression (core/item_regression.h), the first factor of
  // Recommend's default ranking when the model has it: FitModel fits it
  // with the rated RBM (rated_hidden != 0). -1 = over the items its size
  // rule (ItemRegressionColumns) allows: all, or the most-rated (the
  // default: better lists for more CPU per Recommend and ~1 s more
  // training on ML-1M, docs/model.md), 0 = never, 1 = every item whatever
  // its size.
  int item_regression = -1;
  // Its ridge penalty; 0 = the rule of ItemRegressionLambda.
  float item_lambda = 0;
  // The matrix factorisation blended into the served distributions
  // (core/mf.h, ModelParams::mf): FitModel trains it on the training part
  // with this many factors and keeps it when the blend lowers the
  // validation RMSE by at least 0.1% (docs/model.md); 0 = never.
  int mf_factors = 128;
  int mf_epochs = 30;       // passes of its SGD over the training part
  float mf_lambda = 0.05f;  // L2 penalty on both factors
};

// The item regression's columns FitModel fits for `items` items and
// `ratings` training ratings, given rated RBM hidden units rated_f: 0 (not
// fitted), every item (options.item_regression 1, or its size rule
// allows) or the most-rated items its size rule allows
// (ItemRegressionColumns).
int64_t ItemRegressionColumnsFor(const TrainOptions& options, int rated_f,
                                 int64_t items, int64_t ratings);

// The rated RBM's hidden units for data of `users` x `items`:
// options.rated_hidden when >= 0, else the documented rule (README "The
// model"): 3.3 * sqrt(items) rounded to tens, clamped to [50, 300]; 0 when
// there is no data.
int RatedHiddenUnits(const TrainOptions& options, int64_t users, int64_t items);

// `options` with the fields left at the size rule (0, or -1 for factors)
// set for training data of `ratings` ratings (README "The model"; the
// measurements behind the rules are in docs/benchmarks.md):
//   batch_size    = 20 * sqrt(ratings / 100,000) rounded, within [20, 200];
//   learning_rate = 0.05 * sqrt(batch_size / 20);
//   hidden        = 100 * sqrt(ratings / 200,000) rounded to tens, within
//                   [100, 200];
//   factors       = 32 from 500,000 ratings on, else 0 (unfactored).
// Pure; fields set by the caller are kept.
TrainOptions ResolveTrainOptions(const TrainOptions& options, int64_t ratings);

// Checks ranges; InvalidArgument naming the field otherwise. hidden,
// batch_size and learning_rate may be 0 (the size rule).
absl::Status ValidateTrainOptions(const TrainOptions& options);

}  // namespace rbmrec

#endif  // RBMREC_CORE_TRAIN_OPTIONS_H_
