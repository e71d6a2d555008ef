#ifndef RBMREC_CORE_TRAINER_H_
#define RBMREC_CORE_TRAINER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/ratings.h"
#include "core/rbm.h"

namespace rbmrec {

enum class PredictMethod { kExact = 0, kMeanField = 1 };

// Contrastive-divergence steps by epoch: T = steps of the last entry whose
// `from_epoch` <= epoch (epochs count from 1). "auto" instead raises T
// through 1, 3, 5, 9 each time validation RMSE stops improving.
struct CdSchedule {
  std::vector<std::pair<int, int>> steps{{1, 1}};  // (from_epoch, T)
  bool adaptive = false;  // constant CD-1 by default: "auto" gains <= 0.001
                          // validation RMSE at ~2.5x the cost

  // "auto", "T" (constant), or "T1,T2@E2,T3@E3" (T2 from epoch E2 on...).
  static absl::StatusOr<CdSchedule> Parse(std::string_view spec);
  std::string ToString() const;
  int StepsAt(int epoch) const;
};

// Every hyper-parameter of training, with the shipped defaults (the best
// settings found on validation data; see README "Results").
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
  CdSchedule cd;                    // CD-T schedule
  bool per_item_normalize = false;  // divide item rows' gradients by the
                                    // number of batch users who rated the item
  double validation_fraction = 0.05;  // per user, held out for early stopping
  int patience = 6;  // epochs without improvement before stopping
  // An epoch counts as an improvement for early stopping when it lowers
  // the validation RMSE by at least this fraction below the last epoch that
  // did (the best model is kept whatever the size of its gain). 0.0005:
  // with the learning rate decaying, late epochs gain ~0.0001 each; on
  // held-out parts of the training files (bench/dev_tune.sh) it changed no
  // RMSE on the four ~100,000-rating sets (seeds 1 and 2), and on ML-1M it
  // cut the epochs over both RBMs from 79 / 96 to 73 / 74 (seeds 1 / 2) for
  // +0.0000 / +0.0003 RMSE. 0 = any fall of more than 1e-5 counts.
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
  // itself. 32 at any size: on held-out parts of the training files
  // (bench/dev_tune.sh's splits, seed 1) it raised the validation NDCG@10
  // on ML-1M (0.1156 -> 0.1238), ml-latest-small (0.1068 -> 0.1180) and
  // FilmTrust (0.3549 -> 0.3652), was within seed noise on ML-100k, and
  // trains each epoch ~2x faster.
  int rated_factors = 32;
};

// The rated RBM's hidden units for data of `users` x `items`:
// options.rated_hidden when >= 0, else the documented rule (README "The
// model"): 3.3 * sqrt(items) rounded to tens, clamped to [50, 300]
// (100 hidden units for 1,000 items, 200 for 3,700, 300 from 8,300 on;
// measured on ML-100k, ML-1M and ml-latest-small), 0 when there is no data.
int RatedHiddenUnits(const TrainOptions& options, int64_t users, int64_t items);

// `options` with the fields left at 0 for the size rule set for training
// data of `ratings` ratings (README "The model"): batch_size = 20 *
// sqrt(ratings / 100,000) rounded, within [20, 200] (20 up to ~110,000
// ratings, 60 for ML-1M's 900,000, 200 from 10 M on), and learning_rate =
// 0.05 * sqrt(batch_size / 20) (0.05 at 20, as before the rule). Larger
// data sets get batches that average more cases per step, and steps large
// enough for the averaging. Measured on ML-100k, ml-latest-small, FilmTrust
// (20) and ML-1M (test RMSE 0.8595 at 20 -> 0.8559 at 60; 40-100 gave
// 0.8549-0.8564). hidden = 100 * sqrt(ratings / 200,000) rounded to tens,
// within [100, 200] (100 up to ~230,000 ratings, 200 from ~810,000 on):
// more data supports more hidden units (ML-1M validation RMSE 0.8462 at
// 100, 0.8437 at 150, 0.8408 at 200, 0.8402 at 300; the 100k-rating sets
// were flat within +-0.005 between 70 and 200), and the cap keeps training
// memory and serving cost (both linear in hidden) within 2x of F = 100.
// factors = 32 from 500,000 ratings on, else 0 (unfactored): a speed rule.
// Training ML-1M factored took 9.0 s instead of 26.1 s with held-out RMSE
// 0.8381 instead of 0.8404 (64 factors: 12.7 s, 0.8372); on the four
// 100k-rating sets the mean held-out RMSE was 0.8495 unfactored, 0.8504
// with 64 factors, 0.8520 with 32 (better on ML-100k, worse on
// ml-latest-small and FilmTrust), where unfactored training takes seconds.
// Pure; fields set by the caller are kept.
TrainOptions ResolveTrainOptions(const TrainOptions& options, int64_t ratings);

// Checks ranges; InvalidArgument naming the field otherwise. hidden,
// batch_size and learning_rate may be 0 (the size rule).
absl::Status ValidateTrainOptions(const TrainOptions& options);

// The shape of a training data set, for the estimates below.
struct DataShape {
  int64_t users = 0;
  int64_t items = 0;
  int64_t ratings = 0;
  int K = 5;                 // rating values
  double mean_id_bytes = 8;  // average length of a user / item id
};

// Upper estimate of the serialized size (SerializeModel) of the Model that
// FitModel builds from data of `shape` with `options`: ensemble user-based
// RBMs ((items*K) x hidden floats each, plus biases), the item-based RBM
// ((users*K) x hidden) and its per-item inputs (items x hidden), the item
// histogram and the id maps. Pure; saturates at INT64_MAX instead of
// overflowing (any option value is safe, e.g. hidden = 2^31 - 1).
int64_t EstimateModelBytes(const DataShape& shape, const TrainOptions& options);

// Upper estimate of FitModel's peak memory for `shape` and `options`, with
// `threads` worker threads: the finished model (EstimateModelBytes, in
// memory), for every RBM the trainer's parameters, momentum, best-epoch copy
// and running average (4x the parameters), its mini-batch buffers (4 x
// batch_size x hidden floats, and per-rating buffers for a batch of batch_size
// cases of up to 8x the mean number of ratings), per-thread scratch and the
// averaged model's hidden input per case (factored training), plus
// the rating data (the by-user and by-item sparse copies with their
// train/validation split) and the validation pass. Counts all RBMs as if
// resident at once (the item-based RBM trains beside the user-based ones).
// Pure; saturates at INT64_MAX instead of overflowing.
int64_t EstimateTrainingBytes(const DataShape& shape,
                              const TrainOptions& options, int threads);

struct EpochStats {
  int epoch = 0;
  int cd_steps = 1;
  double learning_rate = 0;
  double train_rmse = 0;     // reconstruction RMSE of the training ratings
  double valid_rmse = 0;     // exact/mean-field RMSE on the validation part
  double seconds = 0;        // wall time of this epoch (training + validation)
  double train_seconds = 0;  // wall time of the CD updates alone
  double valid_ndcg = -1;    // rated RBM only (FitModel): validation NDCG
};

struct TrainResult {
  RbmParams params;  // the best epoch's parameters
  int epochs_run = 0;
  int best_epoch = 0;
  double best_valid_rmse = 0;
  double train_seconds = 0;   // wall time of the whole run
  int64_t train_ratings = 0;  // ratings used for CD updates (per epoch)
  int64_t valid_ratings = 0;
  std::vector<EpochStats> history;
  bool cancelled = false;
};

// Called after every epoch; return false to stop training early (the best
// parameters so far are returned, with cancelled = true).
using ProgressFn = std::function<bool(const EpochStats&)>;

// Trains an RBM on per-user ratings `by_user` (rows users, cols items,
// k < K). Deterministic: the same data, options and seed give the same
// parameters bit for bit whatever options.threads is.
// Thread-safe: independent calls may run concurrently.
absl::StatusOr<TrainResult> TrainRbm(const SparseRatings& by_user, int K,
                                     const TrainOptions& options,
                                     const ProgressFn& progress = nullptr);

// Threads that work running side by side hands on: whoever finishes adds
// its threads to `spare`, and a running trainer given the ThreadShare uses
// its own threads plus the spare ones from its next epoch on, up to
// `total`. Results never depend on it (see TrainRbm).
struct ThreadShare {
  int total = 1;              // threads of all the work together
  std::atomic<int> spare{0};  // threads of work that has finished
};

// Same, with the validation part given explicitly (rows and cols of `valid`
// must match `train`); options.validation_fraction is ignored. With `share`
// the trainer keeps a pool of share->total threads and uses options.threads
// of them plus share->spare (see ThreadShare), read at the start of every
// epoch; the caller adds to share->spare when its other work finishes.
absl::StatusOr<TrainResult> TrainRbmSplit(const SparseRatings& train,
                                          const SparseRatings& valid, int K,
                                          const TrainOptions& options,
                                          const ProgressFn& progress = nullptr,
                                          ThreadShare* share = nullptr);

// Holds out about `fraction` of each row's entries (at least one kept),
// seeded per row from `seed`.
void CarveValidation(const SparseRatings& all, double fraction, uint64_t seed,
                     SparseRatings* train, SparseRatings* valid);

// Visible biases from base rates: b_i^k = log((n_ik + 1) / (n_i + K)).
void InitVisibleBiases(const SparseRatings& by_user, RbmParams* params);

}  // namespace rbmrec

#endif  // RBMREC_CORE_TRAINER_H_
