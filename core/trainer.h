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
#include "core/train_options.h"

namespace rbmrec {

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
// ((users*K) x hidden) and its per-item inputs (items x hidden), the rated
// RBM, the item regression, the matrix factorisation's item factors, the
// item histogram and the id maps. Pure; saturates at INT64_MAX instead of
// overflowing (any option value is safe, e.g. hidden = 2^31 - 1).
int64_t EstimateModelBytes(const DataShape& shape, const TrainOptions& options);

// Bytes of the exp(W) tables that a Model built from data of `shape` with
// `options` keeps beside its weights (Model::ExpTableWanted for each
// user-based member's W and the I-RBM's). Pure; saturates.
int64_t EstimateExpTableBytes(const DataShape& shape,
                              const TrainOptions& options);

// Upper estimate of FitModel's peak memory for `shape` and `options`, with
// `threads` worker threads: the finished model (EstimateModelBytes and
// EstimateExpTableBytes, in memory), for every RBM the trainer's parameters,
// momentum, best-epoch copy and running average (4x the parameters), its
// mini-batch buffers (4 x batch_size x hidden floats, and per-rating buffers
// for a batch of batch_size cases of up to 8x the mean number of ratings),
// per-thread scratch and the averaged model's hidden input per case (factored
// training), plus the rating data (the by-user and by-item sparse copies with
// their train/validation split) and the validation pass. Counts all RBMs as if
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
// With options.conditional the RBM is conditional (TrainOptions), case u's
// set r being its items in `train` plus row u of `extra` (the items in r
// without a known rating; rows and cols as train's, InvalidArgument
// otherwise; nullptr: none); without, `extra` is ignored.
// `valid_by_item`, when the caller holds it, is valid.Transpose(), read by
// the exact validation instead of a copy of its own (InvalidArgument when
// its shape or count differs; nullptr: the trainer transposes).
absl::StatusOr<TrainResult> TrainRbmSplit(
    const SparseRatings& train, const SparseRatings& valid, int K,
    const TrainOptions& options, const ProgressFn& progress = nullptr,
    ThreadShare* share = nullptr, const SparseRatings* extra = nullptr,
    const SparseRatings* valid_by_item = nullptr);

// Holds out about `fraction` of each row's entries (at least one kept),
// seeded per row from `seed`.
void CarveValidation(const SparseRatings& all, double fraction, uint64_t seed,
                     SparseRatings* train, SparseRatings* valid);

// Visible biases from base rates: b_i^k = log((n_ik + 1) / (n_i + K)).
void InitVisibleBiases(const SparseRatings& by_user, RbmParams* params);

}  // namespace rbmrec

#endif  // RBMREC_CORE_TRAINER_H_
