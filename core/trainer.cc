// TrainRbm / TrainRbmSplit: the epoch driver around CdTrainer
// (core/cd_trainer.h) with the CD schedule, parameter averaging and early
// stopping; the validation split (CarveValidation), the visible biases'
// start (InitVisibleBiases) and the size estimates (EstimateModelBytes,
// EstimateTrainingBytes).

#include "core/trainer.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <numeric>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/cd_trainer.h"
#include "core/kernels.h"
#include "core/model.h"
#include "core/rng.h"
#include "core/thread_pool.h"

namespace rbmrec {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

constexpr int kAdaptiveSteps[] = {1, 3, 5, 9};

}  // namespace

void InitVisibleBiases(const SparseRatings& by_user, RbmParams* p) {
  std::vector<double> counts(static_cast<size_t>(p->num_items) * p->K, 0.0);
  for (int64_t r = 0; r < by_user.nnz(); ++r) {
    counts[static_cast<size_t>(p->Row(by_user.col[r], by_user.k[r]))] += 1;
  }
  for (int32_t i = 0; i < p->num_items; ++i) {
    double n = 0;
    for (int k = 0; k < p->K; ++k) n += counts[p->Row(i, k)];
    for (int k = 0; k < p->K; ++k) {
      p->b[p->Row(i, k)] = static_cast<float>(
          std::log((counts[p->Row(i, k)] + 1.0) / (n + p->K)));
    }
  }
}

// Splits each user's ratings into training and validation parts.
void CarveValidation(const SparseRatings& all, double fraction, uint64_t seed,
                     SparseRatings* train, SparseRatings* valid) {
  train->rows = valid->rows = all.rows;
  train->cols = valid->cols = all.cols;
  train->offsets.assign(1, 0);
  valid->offsets.assign(1, 0);
  train->col.clear();
  train->k.clear();
  valid->col.clear();
  valid->k.clear();
  // Room for every rating in the training part (most stay there), and no
  // spare capacity left in either part: both are held while RBMs train.
  train->col.reserve(static_cast<size_t>(all.nnz()));
  train->k.reserve(static_cast<size_t>(all.nnz()));
  for (int32_t u = 0; u < all.rows; ++u) {
    Rng rng(StreamSeed(seed, 0x5a11d, static_cast<uint64_t>(u)));
    const int64_t b = all.offsets[u], e = all.offsets[u + 1];
    int64_t kept = 0;
    for (int64_t r = b; r < e; ++r) {
      const bool hold = fraction > 0 && (e - b) >= 2 &&
                        rng.UniformDouble() < fraction &&
                        // keep at least one training rating
                        (kept > 0 || r + 1 < e);
      if (hold) {
        valid->col.push_back(all.col[r]);
        valid->k.push_back(all.k[r]);
      } else {
        train->col.push_back(all.col[r]);
        train->k.push_back(all.k[r]);
        ++kept;
      }
    }
    train->offsets.push_back(train->nnz());
    valid->offsets.push_back(valid->nnz());
  }
  for (SparseRatings* part : {train, valid}) {
    part->col.shrink_to_fit();
    part->k.shrink_to_fit();
  }
}

absl::StatusOr<TrainResult> TrainRbm(const SparseRatings& by_user, int K,
                                     const TrainOptions& o,
                                     const ProgressFn& progress) {
  if (absl::Status s = ValidateTrainOptions(o); !s.ok()) return s;
  SparseRatings train, valid;
  CarveValidation(by_user, o.validation_fraction, o.seed, &train, &valid);
  return TrainRbmSplit(train, valid, K, o, progress);
}

namespace {

// TrainRbmSplit's checks of its data: the parts' shapes agree (extra's
// with train's, valid_by_item's with valid's transpose, when given), K is
// in range, there are training ratings and every rating index is below K.
absl::Status CheckParts(const SparseRatings& train, const SparseRatings& valid,
                        int K, const SparseRatings* extra,
                        const SparseRatings* valid_by_item) {
  if (train.rows != valid.rows || train.cols != valid.cols) {
    return absl::InvalidArgumentError(
        "training and validation parts differ in shape");
  }
  if (extra != nullptr &&
      (extra->rows != train.rows || extra->cols != train.cols)) {
    return absl::InvalidArgumentError(
        "extra: the conditional RBM's extra items differ in shape from the "
        "training part");
  }
  if (valid_by_item != nullptr &&
      (valid_by_item->rows != valid.cols || valid_by_item->cols != valid.rows ||
       valid_by_item->nnz() != valid.nnz())) {
    return absl::InvalidArgumentError(
        "valid_by_item: not the validation part's transpose (shape or count "
        "differs)");
  }
  if (K < 2 || K > 255) return absl::InvalidArgumentError("K must be 2..255");
  if (train.nnz() == 0) {
    return absl::FailedPreconditionError("no ratings to train on");
  }
  for (const SparseRatings* part : {&train, &valid}) {
    for (int64_t r = 0; r < part->nnz(); ++r) {
      if (part->k[r] >= K) {
        return absl::InvalidArgumentError(
            absl::StrCat("rating index ", part->k[r], " >= K=", K));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TrainResult> TrainRbmSplit(
    const SparseRatings& train, const SparseRatings& valid, int K,
    const TrainOptions& options, const ProgressFn& progress, ThreadShare* share,
    const SparseRatings* extra, const SparseRatings* valid_by_item) {
  if (absl::Status s = ValidateTrainOptions(options); !s.ok()) return s;
  const TrainOptions o = ResolveTrainOptions(options, train.nnz());
  if (absl::Status s = CheckParts(train, valid, K, extra, valid_by_item);
      !s.ok()) {
    return s;
  }
  const auto t0 = Clock::now();
  TrainResult result;
  result.train_ratings = train.nnz();
  result.valid_ratings = valid.nnz();
  const int threads =
      o.threads > 0
          ? o.threads
          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  internal::CdTrainer trainer(train, valid, K, o, threads,
                              share != nullptr ? share->total : threads,
                              o.conditional ? extra : nullptr, valid_by_item);
  const bool have_valid = valid.nnz() > 0;
  double best = std::numeric_limits<double>::infinity();
  // Early stopping counts epochs since the validation RMSE last fell by at
  // least min_improvement (relative) below `anchor`; the best model is kept
  // whenever it falls at all.
  double anchor = best;
  int since_best = 0;
  int adaptive_level = 0;
  float lr = o.learning_rate;
  // The running average of the parameters (TrainOptions::average). When
  // the trainer validates each next average before making it
  // (ValidatesCandidates), the best epoch's parameters are not copied while
  // they are the average itself (best_is_avg): the copy is made only when a
  // worse epoch is about to change the average, and dropped at the next
  // best. The same model, one full-size copy fewer until then.
  RbmParams avg;
  const bool lazy_best = o.average > 0 && trainer.ValidatesCandidates();
  bool best_is_avg = false;
  for (int epoch = 1; epoch <= o.max_epochs; ++epoch) {
    if (share != nullptr) {
      trainer.SetThreads(threads + share->spare.load());
    }
    const auto te = Clock::now();
    EpochStats st;
    st.epoch = epoch;
    st.cd_steps =
        o.cd.adaptive ? kAdaptiveSteps[adaptive_level] : o.cd.StepsAt(epoch);
    st.learning_rate = lr;
    st.train_rmse = trainer.Epoch(epoch, st.cd_steps, lr);
    st.train_seconds = Seconds(te);
    const RbmParams* served = o.average > 0 ? &avg : &trainer.params();
    st.valid_rmse = st.train_rmse;
    if (lazy_best && epoch > 1) {
      st.valid_rmse = trainer.CandidateValidationRmse(avg, o.average);
      if (best_is_avg && !(st.valid_rmse < best - 1e-5)) {
        result.params = avg;  // the best, before it is averaged into
        best_is_avg = false;
      }
      trainer.Average(o.average, false, &avg);
    } else if (o.average > 0) {
      trainer.Average(o.average, epoch == 1, &avg);
      if (have_valid) {
        st.valid_rmse =
            trainer.AveragedValidationRmse(avg, o.average, epoch == 1);
      }
    } else if (have_valid) {
      st.valid_rmse = trainer.ValidationRmse(*served);
    }
    st.seconds = Seconds(te);
    result.history.push_back(st);
    result.epochs_run = epoch;
    if (!std::isfinite(st.train_rmse) || !std::isfinite(st.valid_rmse)) {
      return absl::InternalError(
          absl::StrCat("training diverged at epoch ", epoch,
                       " (non-finite RMSE); lower the learning rate"));
    }
    if (st.valid_rmse < best - 1e-5) {
      best = st.valid_rmse;
      result.best_epoch = epoch;
      if (lazy_best) {
        best_is_avg = true;
        result.params = RbmParams();
      } else {
        result.params = *served;
      }
    }
    if (st.valid_rmse < anchor * (1 - o.min_improvement) - 1e-5) {
      anchor = st.valid_rmse;
      since_best = 0;
    } else {
      ++since_best;
    }
    lr *= o.lr_decay;
    if (progress && !progress(st)) {
      result.cancelled = true;
      break;
    }
    if (o.cd.adaptive && since_best >= (o.patience + 1) / 2 &&
        adaptive_level + 1 < static_cast<int>(std::size(kAdaptiveSteps))) {
      ++adaptive_level;
      since_best = 0;
    } else if (since_best >= o.patience) {
      break;
    }
  }
  if (best_is_avg) {
    result.params = std::move(avg);
  } else if (result.best_epoch == 0) {
    result.params = o.average > 0 ? std::move(avg) : trainer.params();
  }
  result.best_valid_rmse = best;
  result.train_seconds = Seconds(t0);
  return result;
}

namespace {

// Estimates are computed in double and clamped, so absurd option values
// (2^31 - 1 hidden units) give INT64_MAX, never an overflow.
int64_t ClampBytes(double bytes) {
  constexpr double kMax = 9.0e18;
  if (!(bytes < kMax)) return INT64_MAX;
  return bytes < 0 ? 0 : static_cast<int64_t>(bytes);
}

// Floats of one RBM with `rows` visible units: W, b and c.
double RbmFloats(double rows, double K, double F) {
  return rows * K * F + rows * K + F;
}

// The estimates' dimensions: K, the resolved hidden units F, items m and
// users n.
struct Dims {
  double K, F, m, n;
};
Dims DimsOf(const DataShape& shape, const TrainOptions& options) {
  return {static_cast<double>(shape.K),
          static_cast<double>(
              std::max(1, ResolveTrainOptions(options, shape.ratings).hidden)),
          static_cast<double>(std::max<int64_t>(0, shape.items)),
          static_cast<double>(std::max<int64_t>(0, shape.users))};
}

}  // namespace

int64_t EstimateModelBytes(const DataShape& shape,
                           const TrainOptions& options) {
  const Dims d = DimsOf(shape, options);
  const double K = d.K, F = d.F, m = d.m, n = d.n;
  const double ensemble = std::max(1, options.ensemble);
  double floats = ensemble * RbmFloats(m, K, F);
  if (options.conditional) floats += ensemble * m * F;  // D
  if (options.item_based) floats += RbmFloats(n, K, F) + m * F;
  const int rated_f = RatedHiddenUnits(options, shape.users, shape.items);
  floats += RbmFloats(m, 1, rated_f);
  // The item regression's P.
  const double columns = static_cast<double>(
      ItemRegressionColumnsFor(options, rated_f, shape.items, shape.ratings));
  floats += columns * columns;
  // The matrix factorisation's item factors (and a flag byte per item).
  const double mf_factors = std::max(0, options.mf_factors);
  floats += m * mf_factors + m / 4;
  const double hist = m * K * 4;
  const double ids = (n + m) * (4 + shape.mean_id_bytes);
  return ClampBytes(floats * 4 + hist + ids + 4096);
}

int64_t EstimateExpTableBytes(const DataShape& shape,
                              const TrainOptions& options) {
  const Dims d = DimsOf(shape, options);
  const double K = d.K, F = d.F, m = d.m, n = d.n;
  auto table = [&](double rows) {
    const int64_t bytes = ClampBytes(rows * K * F * 4);
    return bytes < INT64_MAX && Model::ExpTableWanted(bytes, shape.ratings)
               ? static_cast<double>(bytes)
               : 0.0;
  };
  double bytes = std::max(1, options.ensemble) * table(m);
  if (options.item_based) bytes += table(n);
  return ClampBytes(bytes);
}

int64_t EstimateTrainingBytes(const DataShape& shape,
                              const TrainOptions& options, int threads) {
  const double K = shape.K;
  const TrainOptions resolved = ResolveTrainOptions(options, shape.ratings);
  const double F = std::max(1, resolved.hidden);
  const double B = std::max(1, resolved.batch_size);
  const double T = std::max(1, threads);
  const double m = static_cast<double>(std::max<int64_t>(0, shape.items));
  const double n = static_cast<double>(std::max<int64_t>(0, shape.users));
  const double nnz = static_cast<double>(std::max<int64_t>(0, shape.ratings));
  // Factored (W = A B, C columns), W itself is kept only without
  // averaging; with averaging the running average is kept instead.
  const double C = resolved.factors > 0 && resolved.factors < resolved.hidden
                       ? resolved.factors
                       : 0;
  // Full-size copies of W held at once: unfactored, W, its velocity and
  // the best copy, plus the average; factored, the average (or W) and the
  // best copy (held from an epoch worse than the best on), beside A and
  // its velocity.
  const double w_copies = C > 0 ? 2 : (resolved.average > 0 ? 4 : 3);
  // ExactValidation's inputs and their exponentials, chunked.
  const double chunk_bytes = static_cast<double>(internal::kExpChunkBytes);
  // One trainer over `rows` visible units and `cases` training cases.
  auto trainer = [&](double rows, double cases) {
    const double params = RbmFloats(rows, K, F) * 4;
    // The ratings of one mini-batch: batch_size cases of up to 8x the mean.
    const double batch_ratings =
        std::min(nnz, B * std::max(1.0, 8 * nnz / std::max(1.0, cases)));
    // Per rating of a batch: the item-major index (16), uniforms (4),
    // errors (8), per-item starts and costs (8), the entry of each rating
    // (8), the samples by entry and by user (2).
    constexpr double kPerBatchRating = 16 + 4 + 8 + 8 + 8 + 2;
    return w_copies * params +
           2 * rows * K * C * 4 +  // A and its velocity (factored)
           4 * B * F * 4 +         // h0, hT, hidden samples, uniforms
           batch_ratings * kPerBatchRating +
           T * ((F + K) * 4 * 2 +         // Gibbs and validation scratch
                K * F * 4 * 2 +           // an item's gradient rows, exps
                batch_ratings * K * 4) +  // reconstruction probabilities
           rows * 4 +                     // batch slots of the visible units
           (C > 0 && resolved.average > 0 ? cases * F * 4
                                          : 0) +      // the average's inputs
           2 * std::min(cases * F * 4, chunk_bytes);  // validation chunk
  };
  const double ensemble = std::max(1, options.ensemble);
  double bytes = ensemble * trainer(m, n);
  // The conditional RBM's D: parameters, velocity, best copy and average.
  if (options.conditional) bytes += ensemble * 4 * m * F * 4;
  if (options.item_based) bytes += trainer(n, m);
  // The rated RBM: parameters, momentum, best copy and gradient rows, and
  // its dense mini-batch (visible data and reconstruction, 100 users).
  const double rated_f = RatedHiddenUnits(options, shape.users, shape.items);
  if (rated_f > 0) bytes += (4 * m * rated_f + 2 * 100 * m) * 4;
  // The item regression's fit: P, computed in X'X's place, with its
  // temporaries or B's 8-bit form (P is also in the model below).
  const double columns = static_cast<double>(ItemRegressionColumnsFor(
      options, static_cast<int>(rated_f), shape.items, shape.ratings));
  bytes += columns * columns * 4;
  // The matrix factorisation's training: the users' factors, the items'
  // (also in the model below), an AdaGrad sum per row, each user's row
  // cut at the item blocks (9 offsets) and the users' order.
  const double mf_factors = std::max(0, options.mf_factors);
  if (mf_factors > 0) {
    bytes += (n + m) * mf_factors * 4 + (n + m) * 4 + n * (9 * 8 + 4);
  }
  // Ratings: the Dataset (12 bytes a rating), by-user and by-item sparse
  // copies of the whole set and of the train/validation parts (5 bytes a
  // rating each), the validation pass's per-user sums.
  bytes += nnz * (12 + 4 * 5) + (n + m) * 8 * 4;
  bytes += static_cast<double>(EstimateModelBytes(shape, options));
  bytes += static_cast<double>(EstimateExpTableBytes(shape, options));
  return ClampBytes(bytes);
}

}  // namespace rbmrec
