#include "core/fit.h"

#include <Eigen/Dense>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <mutex>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/metrics.h"
#include "core/rated_rbm.h"
#include "core/thread_pool.h"

namespace rbmrec {

absl::StatusOr<Dataset> DatasetFromRaw(const std::vector<RawRating>& rows,
                                       const RatingScale& scale,
                                       std::string_view name) {
  Dataset d;
  d.scale = scale;
  d.ratings.reserve(rows.size());
  for (const RawRating& r : rows) {
    absl::StatusOr<int> k = scale.Index(r.rating);
    if (!k.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(absl::string_view(name.data(), name.size()), ":", r.line,
                       ": ", k.status().message()));
    }
    Rating x;
    x.user = d.users.GetOrAdd(r.user);
    x.item = d.items.GetOrAdd(r.item);
    x.k = static_cast<uint8_t>(*k);
    d.ratings.push_back(x);
  }
  return d;
}

namespace {

VisibleSet Row(const SparseRatings& s, int32_t r) {
  return VisibleSet{s.col.data() + s.offsets[r], s.k.data() + s.offsets[r],
                    s.RowSize(r)};
}

// Row(s, r) with row r of `extra` (when not null and r is one of its rows)
// as its extra items: the conditional RBM's r.
VisibleSet RowWithExtra(const SparseRatings& s, const SparseRatings* extra,
                        int32_t r) {
  VisibleSet v = Row(s, r);
  if (extra != nullptr && r < extra->rows) {
    v.extra = extra->col.data() + extra->offsets[r];
    v.n_extra = extra->RowSize(r);
  }
  return v;
}

// item_x.row(i) = I-RBM hidden input of item i's ratings in `by_item`,
// items in parallel on `pool` (each row is its own: the same bits at any
// thread count).
void ComputeItemInputs(const SparseRatings& by_item, ThreadPool* pool,
                       ModelParams* params) {
  const RbmParams& p = params->item_rbm;
  params->item_x.setZero(by_item.rows, p.F);
  params->item_in_irbm.assign(static_cast<size_t>(by_item.rows), 0);
  pool->ParallelFor(by_item.rows, [&](int, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int32_t item = static_cast<int32_t>(i);
      HiddenInput(p, Row(by_item, item), params->item_x.row(i).data());
      params->item_in_irbm[static_cast<size_t>(i)] = by_item.RowSize(item) > 0;
    }
  });
}

// The distributions `params` serves for every validation rating (valid's
// order, K floats each) given each user's training-part ratings, users in
// parallel on `pool` (each writes its own ratings' rows). Builds a model
// without exp tables from `params` (moved back before returning).
void PredictValidation(ModelParams* params, const SparseRatings& train_part,
                       const SparseRatings& valid, const SparseRatings* extra,
                       PredictMethod method, ThreadPool* pool,
                       std::vector<float>* out) {
  const int K = params->scale.K();
  out->resize(static_cast<size_t>(valid.nnz()) * K);
  // Read once: no exp tables (they would double the weights' memory while
  // the training data is still held).
  Model model(std::move(*params), Model::ExpTables::kNone);
  pool->ParallelFor(valid.rows, [&](int, int64_t b, int64_t e) {
    for (int64_t u64 = b; u64 < e; ++u64) {
      const int32_t u = static_cast<int32_t>(u64);
      if (valid.RowSize(u) == 0) continue;
      const absl::Span<const int32_t> query(
          valid.col.data() + valid.offsets[u],
          static_cast<size_t>(valid.RowSize(u)));
      model.Predict(u, RowWithExtra(train_part, extra, u), query, method,
                    out->data() + static_cast<size_t>(valid.offsets[u]) * K,
                    nullptr);
    }
  });
  *params = std::move(model).TakeParams();
}

// The mean of each distribution over the scale's K values in `probs` (K
// floats each, one after the other).
std::vector<double> Means(const std::vector<float>& probs,
                          const RatingScale& scale) {
  const int K = scale.K();
  std::vector<double> out(probs.size() / static_cast<size_t>(K));
  for (size_t x = 0; x < out.size(); ++x) {
    double a = 0;
    for (int k = 0; k < K; ++k) a += scale.Value(k) * probs[x * K + k];
    out[x] = a;
  }
  return out;
}

// Picks the U/I mixing weight (ModelParams::user_weight and its slopes)
// with the lowest RMSE on the validation part, from the U-RBM part (a model
// with user weight 1) and the I-RBM part (user weight 0) of every validation
// prediction: the best global weight on a grid of 0.05 steps, or the
// least-squares fit of w = a + b log(1 + n_u) + c log(1 + n_q) (clamped to
// [0, 1]) when that fits better. The served mean is w mu_U + (1 - w) mu_I,
// so the fit is the linear regression of r - mu_I on (mu_U - mu_I) times
// (1, log(1 + n_u), log(1 + n_q)). Sets the weight fields of *params; *rmse
// gets the mixed prediction's validation RMSE. Builds two models without
// exp tables from `params` (restored before returning); their predictions
// run on `pool`, users in parallel (each writes its own ratings' rows).
// *means (when not null) gets the mixed prediction of every validation
// rating, in valid's order.
void PickUserWeight(ModelParams* params, const SparseRatings& train_part,
                    const SparseRatings& valid, const SparseRatings* extra,
                    PredictMethod method, ThreadPool* pool, double* rmse,
                    std::vector<double>* means) {
  const int K = params->scale.K();
  std::vector<float> pu, pi;
  params->user_weight_per_log_user = params->user_weight_per_log_item = 0;
  for (const float weight : {1.0f, 0.0f}) {
    params->user_weight = weight;
    PredictValidation(params, train_part, valid, extra, method, pool,
                      weight == 1.0f ? &pu : &pi);
  }
  const RatingScale& scale = params->scale;
  // Per validation rating: the two means, the truth and the two counts.
  const int64_t n = valid.nnz();
  const std::vector<double> mu = Means(pu, scale), mi = Means(pi, scale);
  std::vector<double> r(static_cast<size_t>(n)), lu(r), li(r);
  {
    int64_t e = 0;
    for (int32_t u = 0; u < valid.rows; ++u) {
      const double log_user =
          std::log1p(static_cast<double>(train_part.RowSize(u)));
      for (int64_t j = valid.offsets[u]; j < valid.offsets[u + 1]; ++j, ++e) {
        const size_t x = static_cast<size_t>(e);
        const int32_t item = valid.col[j];
        uint32_t count = 0;
        for (int k = 0; k < K; ++k) {
          count += params->item_hist[static_cast<size_t>(item) * K + k];
        }
        r[x] = scale.Value(valid.k[j]);
        lu[x] = log_user;
        li[x] = std::log1p(static_cast<double>(count));
      }
    }
  }
  // The served mean of rating x with weight a + b log(1 + n_u) + c log(1 +
  // n_q).
  auto mixed = [&](size_t x, double a, double b, double c) {
    const double w = std::clamp(a + b * lu[x] + c * li[x], 0.0, 1.0);
    return w * mu[x] + (1 - w) * mi[x];
  };
  auto sse_of = [&](double a, double b, double c) {
    double sse = 0;
    for (size_t x = 0; x < mu.size(); ++x) {
      const double d = mixed(x, a, b, c) - r[x];
      sse += d * d;
    }
    return sse;
  };
  float best_w = 1.0f;
  double best = std::numeric_limits<double>::infinity();
  for (int step = 0; step <= 20; ++step) {
    const float w = static_cast<float>(step) / 20.0f;
    const double sse = sse_of(w, 0, 0);
    if (sse < best - 1e-12) {
      best = sse;
      best_w = w;
    }
  }
  params->user_weight = best_w;
  // Normal equations of the three-term fit (a small ridge keeps them
  // solvable when every user or item has the same count).
  Eigen::Matrix3d ata = Eigen::Matrix3d::Zero();
  Eigen::Vector3d aty = Eigen::Vector3d::Zero();
  for (size_t x = 0; x < mu.size(); ++x) {
    const double d = mu[x] - mi[x];
    const Eigen::Vector3d row(d, d * lu[x], d * li[x]);
    ata += row * row.transpose();
    aty += row * (r[x] - mi[x]);
  }
  ata += 1e-6 * Eigen::Matrix3d::Identity();
  const Eigen::Vector3d c = ata.ldlt().solve(aty);
  if (c.allFinite() && c.cwiseAbs().maxCoeff() <= 10) {
    const double sse = sse_of(c[0], c[1], c[2]);
    if (sse < best - 1e-12) {
      best = sse;
      params->user_weight = static_cast<float>(c[0]);
      params->user_weight_per_log_user = static_cast<float>(c[1]);
      params->user_weight_per_log_item = static_cast<float>(c[2]);
    }
  }
  *rmse = std::sqrt(best / static_cast<double>(std::max<int64_t>(1, n)));
  if (means != nullptr) {
    means->resize(mu.size());
    for (size_t x = 0; x < mu.size(); ++x) {
      (*means)[x] =
          mixed(x, params->user_weight, params->user_weight_per_log_user,
                params->user_weight_per_log_item);
    }
  }
}

}  // namespace

namespace {

// Hands the heap's free pages back to the system (glibc keeps chunks
// freed below its mmap threshold for reuse): after the fit frees its
// training parts, the allocations that follow (the item regression, the
// served model's tables) do not come on top of them in the peak RSS.
void ReturnFreedMemory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

// Trains FitModel's rating RBMs one at a time through TrainRbmSplit, with
// progress reported in rating units (callbacks never run concurrently),
// and keeps each one's figures for the model's summary, by index.
class RatingRbmRunner {
 public:
  // What FitModel's summary needs of one RBM's training.
  struct Done {
    int epochs_run = 0, best_epoch = 0;
    int64_t train_ratings = 0;
    double train_seconds = 0, valid_rmse = 0;
  };

  RatingRbmRunner(int K, double step, int n_models,
                  const FitProgressFn& progress, ThreadShare* share)
      : K_(K),
        step_(step),
        progress_(progress),
        share_(share),
        done_(static_cast<size_t>(n_models)) {}

  // The best parameters of RBM `index` trained on `tr` with validation
  // part `va` (and its transpose va_t); Cancelled when the progress
  // callback stops it.
  absl::StatusOr<RbmParams> Run(int index, const SparseRatings& tr,
                                const SparseRatings& va,
                                const SparseRatings& va_t,
                                const TrainOptions& o,
                                const SparseRatings* extra = nullptr) {
    ProgressFn fn;
    if (progress_) {
      fn = [this, index](const EpochStats& st) {
        // The trainer works in rating indices; report rating units.
        EpochStats scaled = st;
        scaled.train_rmse *= step_;
        scaled.valid_rmse *= step_;
        std::lock_guard<std::mutex> lock(progress_mu_);
        return progress_(index, scaled);
      };
    }
    absl::StatusOr<TrainResult> r =
        TrainRbmSplit(tr, va, K_, o, fn, share_, extra, &va_t);
    if (!r.ok()) return r.status();
    if (r->cancelled) return absl::CancelledError("training cancelled");
    Done& d = done_[static_cast<size_t>(index)];
    d.epochs_run = r->epochs_run;
    d.best_epoch = r->best_epoch;
    d.train_ratings = r->train_ratings;
    d.train_seconds = r->train_seconds;
    d.valid_rmse = r->best_valid_rmse * step_;
    return std::move(r->params);
  }

  const std::vector<Done>& done() const { return done_; }

 private:
  const int K_;
  const double step_;
  const FitProgressFn& progress_;
  ThreadShare* const share_;
  std::mutex progress_mu_;  // callbacks never run concurrently
  std::vector<Done> done_;
};

// The training data of FitModel's rating RBMs: the by-user training and
// validation parts, the validation part's transpose and, for the
// item-based RBM, the training part's.
// With extra items (the conditional RBM's), `extra` holds each user's
// extra items in training: the caller's plus the user's validation items.
struct FitParts {
  SparseRatings train, valid;
  SparseRatings train_by_item, valid_by_item;
  SparseRatings extra;
  bool has_extra = false;
  const SparseRatings* Extra() const { return has_extra ? &extra : nullptr; }
};

// parts->extra = row by row, `extra`'s items then the validation part's
// (the items asked about in validation are in r as the test items are).
void TrainingExtras(const SparseRatings& extra, FitParts* parts) {
  SparseRatings& x = parts->extra;
  const SparseRatings& va = parts->valid;
  x.rows = va.rows;
  x.cols = va.cols;
  x.offsets.assign(1, 0);
  for (int32_t u = 0; u < va.rows; ++u) {
    if (u < extra.rows) {
      x.col.insert(x.col.end(), extra.col.begin() + extra.offsets[u],
                   extra.col.begin() + extra.offsets[u + 1]);
    }
    x.col.insert(x.col.end(), va.col.begin() + va.offsets[u],
                 va.col.begin() + va.offsets[u + 1]);
    x.offsets.push_back(static_cast<int64_t>(x.col.size()));
  }
  x.k.assign(x.col.size(), 0);
  parts->has_extra = true;
}

// Trains the ensemble's user-based RBMs into params->members and, with
// options.item_based, the item-based RBM into params->item_rbm. The
// item-based RBM trains on its own threads beside the user-based ones when
// there are at least two threads: the two are independent, so this scales
// better than splitting each mini-batch, and results do not change.
// Whichever side finishes first hands its threads to the other (results
// do not depend on the thread count either).
absl::Status TrainRatingRbms(const TrainOptions& options, int threads,
                             bool side_by_side, const FitParts& parts,
                             RatingRbmRunner* runner, ThreadShare* thread_share,
                             ModelParams* params) {
  absl::StatusOr<RbmParams> item_params = absl::UnknownError("not trained");
  std::thread item_thread;
  auto train_item = [&](int item_threads) {
    TrainOptions item = options;
    item.seed = options.seed + 0x17e4;
    item.threads = item_threads;
    item.conditional = false;  // D is the user-based members' alone
    item_params = runner->Run(options.ensemble, parts.train_by_item,
                              parts.valid_by_item, parts.valid, item);
    thread_share->spare.fetch_add(item_threads);
  };
  if (side_by_side) item_thread = std::thread(train_item, threads / 2);
  absl::Status user_status;
  for (int e = 0; e < options.ensemble && user_status.ok(); ++e) {
    TrainOptions member = options;
    member.seed = options.seed + static_cast<uint64_t>(e);
    member.threads = side_by_side ? threads - threads / 2 : threads;
    absl::StatusOr<RbmParams> p =
        runner->Run(e, parts.train, parts.valid, parts.valid_by_item, member,
                    parts.Extra());
    if (p.ok()) {
      params->members.push_back(*std::move(p));
    } else {
      user_status = p.status();
    }
  }
  thread_share->spare.fetch_add(threads - threads / 2);
  if (item_thread.joinable()) item_thread.join();
  if (!user_status.ok()) return user_status;
  if (options.item_based) {
    if (!side_by_side) train_item(threads);
    if (!item_params.ok()) return item_params.status();
    params->item_rbm = *std::move(item_params);
  }
  return absl::OkStatus();
}

// The item-based RBM's serving inputs and the U/I mixing weight. The
// weight is chosen with I-RBM inputs from the training part only; served
// with inputs from all training ratings (`by_user`). Returns the mixed
// prediction's validation RMSE, or -1 without validation ratings. Frees
// the parts by item (parts->train_by_item, valid_by_item) once read.
// valid_means: as PickUserWeight's means (left empty without validation
// ratings).
double MixItemRbm(const TrainOptions& options, int threads,
                  const SparseRatings& by_user, FitParts* parts,
                  ModelParams* params, std::vector<double>* valid_means) {
  double mixed_valid_rmse = -1;
  ThreadPool pool(threads);
  ComputeItemInputs(parts->train_by_item, &pool, params);
  // The parts by item are not read after this: not held beside the
  // validation pass's models or the transpose of every rating.
  parts->train_by_item = SparseRatings();
  parts->valid_by_item = SparseRatings();
  if (parts->valid.nnz() > 0) {
    PickUserWeight(params, parts->train, parts->valid, parts->Extra(),
                   options.predict, &pool, &mixed_valid_rmse, valid_means);
  } else {
    params->user_weight = 0.3f;
  }
  ComputeItemInputs(by_user.Transpose(), &pool, params);
  return mixed_valid_rmse;
}

// Trains the rated RBM (Recommend's p(rated) rankings) with rated_f hidden
// units into params->rated_rbm, reporting progress as model `member`.
absl::Status TrainRatedPart(const TrainOptions& options, int threads,
                            int rated_f, int member, const FitParts& parts,
                            const FitProgressFn& progress,
                            ModelParams* params) {
  RatedRbmOptions ro;
  ro.hidden = rated_f;
  ro.max_epochs = options.rated_max_epochs;
  ro.learning_rate = options.rated_learning_rate;
  ro.factors = options.rated_factors;
  ro.seed = options.seed + 0x7a7e;
  ro.threads = threads;
  RatedProgressFn fn;
  if (progress) {
    fn = [&](int epoch, double ndcg) {
      EpochStats st;
      st.epoch = epoch;
      st.valid_ndcg = ndcg;
      st.train_rmse = st.valid_rmse = NAN;
      return progress(member, st);
    };
  }
  absl::StatusOr<RatedRbmResult> r =
      TrainRatedRbm(parts.train, parts.valid, ro, fn);
  if (!r.ok()) return r.status();
  if (r->cancelled) return absl::CancelledError("training cancelled");
  params->rated_rbm = std::move(r->params);
  params->summary.rated_epochs = r->epochs_run;
  params->summary.rated_valid_ndcg = r->best_valid_ndcg;
  params->summary.rated_seconds = r->seconds;
  return absl::OkStatus();
}

// The matrix factorisation blended into the rating model (FitMfBlend),
// reporting its passes as model FactorisationMember: when kept, into
// params->mf, and *mixed_valid_rmse gets the blend's validation RMSE.
// Cancelled when progress returns false; OK (no factorisation) when
// options.mf_factors is 0 or the blend is not kept.
absl::Status FitFactorisation(const TrainOptions& options, int threads,
                              const FitParts& parts,
                              const SparseRatings& by_user,
                              const std::vector<double>& valid_means,
                              const FitProgressFn& progress,
                              ModelParams* params, double* mixed_valid_rmse) {
  if (options.mf_factors <= 0) return absl::OkStatus();
  MfOptions mo;
  mo.factors = options.mf_factors;
  mo.epochs = options.mf_epochs;
  mo.lambda = options.mf_lambda;
  mo.seed = options.seed + 0x3f1;
  mo.threads = threads;
  if (progress) {
    mo.progress = [&](int epoch, double train_rmse) {
      EpochStats st;
      st.epoch = epoch;
      st.train_rmse = train_rmse;
      st.valid_rmse = NAN;
      return progress(FactorisationMember(options), st);
    };
  }
  MfBlendFit fit = FitMfBlend(parts.train, parts.valid, by_user, valid_means,
                              params->scale, mo);
  if (fit.cancelled) return absl::CancelledError("training cancelled");
  if (!fit.mf.empty()) {
    params->mf = std::move(fit.mf);
    params->summary.mf_seconds = fit.seconds;
    *mixed_valid_rmse = fit.valid_rmse;
  }
  return absl::OkStatus();
}

// The model's training summary from the rating RBMs' figures; the
// validation RMSE is that of what is served: the U/I mix when there is one
// (mixed_valid_rmse >= 0), else the mean over the RBMs.
void Summarize(const std::vector<RatingRbmRunner::Done>& done,
               double mixed_valid_rmse, ModelParams* params) {
  double valid_sum = 0;
  for (const RatingRbmRunner::Done& d : done) {
    params->summary.epochs_run += d.epochs_run;
    params->summary.best_epoch = d.best_epoch;
    params->summary.train_ratings = d.train_ratings;
    params->summary.train_seconds += d.train_seconds;
    params->summary.rating_epochs += d.train_ratings * d.epochs_run;
    valid_sum += d.valid_rmse;
  }
  params->summary.train_seconds += params->summary.rated_seconds +
                                   params->summary.item_regression_seconds +
                                   params->summary.mf_seconds;
  params->summary.valid_rmse =
      mixed_valid_rmse >= 0 ? mixed_valid_rmse
                            : valid_sum / static_cast<double>(done.size());
}

}  // namespace

absl::StatusOr<Model> FitModel(const Dataset& train,
                               const TrainOptions& requested,
                               const FitProgressFn& progress,
                               const SparseRatings* extra) {
  if (absl::Status s = ValidateTrainOptions(requested); !s.ok()) return s;
  FitData data;
  data.scale = train.scale;
  data.users = train.users;
  data.items = train.items;
  data.by_user = train.ByUser();
  data.ratings = static_cast<int64_t>(train.ratings.size());
  return FitModel(&data, requested, progress, extra);
}

absl::StatusOr<Model> FitModel(FitData* data, const TrainOptions& requested,
                               const FitProgressFn& progress,
                               const SparseRatings* extra) {
  if (absl::Status s = ValidateTrainOptions(requested); !s.ok()) return s;
  const FitData& train = *data;
  // The size rule once for the whole data set: every RBM trains with, and
  // the model records, the same batch size and learning rate.
  const TrainOptions options = ResolveTrainOptions(requested, train.ratings);
  ModelParams params;
  params.scale = train.scale;
  params.options = options;
  const int K = train.scale.K();
  SparseRatings& by_user = data->by_user;
  params.item_hist = ItemHistogramCounts(by_user, K);
  FitParts parts;
  CarveValidation(by_user, options.validation_fraction, options.seed,
                  &parts.train, &parts.valid);
  if (options.conditional && extra != nullptr) {
    if (extra->rows > by_user.rows || extra->cols != by_user.cols ||
        std::any_of(extra->col.begin(), extra->col.end(),
                    [&](int32_t i) { return i < 0 || i >= by_user.cols; })) {
      return absl::InvalidArgumentError(
          "extra: the conditional RBM's extra items must be over the "
          "training data's users and items");
    }
    TrainingExtras(*extra, &parts);
  }
  // Not held while the rating RBMs train: rebuilt from the parts after.
  by_user = SparseRatings();
  // The id maps move into the model (back to *data on an error).
  params.users = std::move(data->users);
  params.items = std::move(data->items);
  const auto fail = [&](absl::Status s) {
    data->users = std::move(params.users);
    data->items = std::move(params.items);
    return s;
  };
  // The validation part by item: the I-RBM's validation part, and what
  // every RBM's exact validation reads (one copy for all).
  parts.valid_by_item = parts.valid.Transpose();
  if (options.item_based) parts.train_by_item = parts.train.Transpose();
  const int n_models = options.ensemble + (options.item_based ? 1 : 0);
  const int threads =
      options.threads > 0
          ? options.threads
          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const bool side_by_side = options.item_based && threads >= 2;
  ThreadShare thread_share;
  thread_share.total = threads;
  RatingRbmRunner runner(K, train.scale.step(), n_models, progress,
                         side_by_side ? &thread_share : nullptr);
  if (absl::Status s = TrainRatingRbms(options, threads, side_by_side, parts,
                                       &runner, &thread_share, &params);
      !s.ok()) {
    by_user = SparseRatings::Merge(parts.train, parts.valid);
    return fail(s);
  }
  by_user = SparseRatings::Merge(parts.train, parts.valid);
  double mixed_valid_rmse = -1;     // of the served (mixed) prediction
  std::vector<double> valid_means;  // of the RBMs, for the factorisation
  if (options.item_based) {
    mixed_valid_rmse =
        MixItemRbm(options, threads, by_user, &parts, &params, &valid_means);
  } else if (options.mf_factors > 0 && parts.valid.nnz() > 0) {
    ThreadPool pool(threads);
    std::vector<float> probs;
    PredictValidation(&params, parts.train, parts.valid, parts.Extra(),
                      options.predict, &pool, &probs);
    valid_means = Means(probs, params.scale);
  }
  if (absl::Status s =
          FitFactorisation(options, threads, parts, by_user, valid_means,
                           progress, &params, &mixed_valid_rmse);
      !s.ok()) {
    return fail(s);
  }
  const int rated_f = RatedHiddenUnits(options, by_user.rows, by_user.cols);
  if (rated_f > 0) {
    if (absl::Status s =
            TrainRatedPart(options, threads, rated_f, RatedMember(options),
                           parts, progress, &params);
        !s.ok()) {
      return fail(s);
    }
  }
  // The training and validation parts are not read after this: not held
  // beside the item regression's fit or the model's serving tables.
  parts = FitParts();
  ReturnFreedMemory();
  if (const int64_t columns = ItemRegressionColumnsFor(
          options, rated_f, by_user.cols, by_user.nnz());
      columns > 0) {
    const auto t0 = std::chrono::steady_clock::now();
    const ItemRegressionOptions ro{options.item_lambda, threads, columns};
    absl::StatusOr<ItemRegression> reg = FitItemRegression(by_user, ro);
    if (!reg.ok()) return fail(reg.status());
    params.item_regression =
        std::make_shared<const ItemRegression>(*std::move(reg));
    params.summary.item_regression_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
  }
  Summarize(runner.done(), mixed_valid_rmse, &params);
  return Model(std::move(params));
}

namespace {

// The test ratings' indices grouped by user (`order`, stable within a
// user; unknown users in one extra group) and the groups' [begin, end)
// ranges in `order`.
void GroupByUser(const std::vector<TestRating>& test,
                 std::vector<int64_t>* order_out,
                 std::vector<std::pair<size_t, size_t>>* groups_out) {
  std::vector<int64_t>& order = *order_out;
  std::vector<std::pair<size_t, size_t>>& groups = *groups_out;
  order.resize(test.size());
  for (size_t i = 0; i < test.size(); ++i) order[i] = static_cast<int64_t>(i);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return test[a].user < test[b].user;
  });
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j < order.size() && test[order[j]].user == test[order[i]].user) ++j;
    groups.emplace_back(i, j);
    i = j;
  }
}

// Evaluate's predictions, by test index: the expected rating pred, whether
// it is a fallback (fell) and the distribution behind it (dist, K per
// rating), users in parallel.
void PredictTests(const Model& model, const SparseRatings& train_by_user,
                  const SparseRatings* extra,
                  const std::vector<TestRating>& test, PredictMethod method,
                  int threads, std::vector<double>* pred_out,
                  std::vector<char>* fell_out, std::vector<float>* dist_out) {
  const int K = model.K();
  std::vector<int64_t> order;
  std::vector<std::pair<size_t, size_t>> groups;
  GroupByUser(test, &order, &groups);
  std::vector<double>& pred = *pred_out;
  std::vector<char>& fell = *fell_out;
  std::vector<float>& dist = *dist_out;
  double global = 0, total = 0;
  for (size_t x = 0; x < model.item_hist().size(); ++x) {
    global +=
        model.item_hist()[x] * model.scale().Value(static_cast<int>(x % K));
    total += model.item_hist()[x];
  }
  global = total > 0 ? global / total : model.scale().Value(K / 2);
  ThreadPool pool(threads > 0
                      ? threads
                      : static_cast<int>(std::thread::hardware_concurrency()));
  pool.ParallelFor(
      static_cast<int64_t>(groups.size()), [&](int, int64_t b, int64_t e) {
        std::vector<float> probs, hist(static_cast<size_t>(K));
        std::vector<bool> fb;
        std::vector<int32_t> query;
        for (int64_t g = b; g < e; ++g) {
          const auto [gb, ge] = groups[static_cast<size_t>(g)];
          const int32_t u = test[order[gb]].user;
          VisibleSet v;
          if (u >= 0 && u < train_by_user.rows) {
            v = RowWithExtra(train_by_user, extra, u);
          }
          query.clear();
          for (size_t t = gb; t < ge; ++t) query.push_back(test[order[t]].item);
          probs.resize(query.size() * K);
          model.Predict(u, v, query, method, probs.data(), &fb);
          for (size_t t = gb; t < ge; ++t) {
            const size_t q = t - gb;
            const int64_t idx = order[t];
            float* d = dist.data() + idx * K;
            if (v.n == 0) {
              // No training ratings for this user: item mean, else global mean.
              fell[idx] = 1;
              if (model.Trained(query[q])) {
                model.ItemHistogram(query[q], hist.data());
                pred[idx] = model.Expectation(hist.data());
                std::copy(hist.begin(), hist.end(), d);
              } else {
                pred[idx] = global;
                model.FallbackDistribution(VisibleSet{}, d);
              }
            } else {
              fell[idx] = fb[q] ? 1 : 0;
              pred[idx] = model.Expectation(probs.data() + q * K);
              std::copy(probs.data() + q * K, probs.data() + (q + 1) * K, d);
            }
          }
        }
      });
}

// Likelihood and calibration metrics of the distributions `dist` (test
// order) and of the item-histogram baseline, into m (REQUIRES m->n set).
void AddDistributionMetrics(const Model& model,
                            const std::vector<TestRating>& test,
                            const std::vector<float>& dist,
                            EvalMetrics* m_out) {
  const int K = model.K();
  EvalMetrics& m = *m_out;
  // Likelihood and calibration of the distributions, and of the baseline:
  // the item's training histogram with add-one smoothing, (n_ik + 1) /
  // (n_i + K) (the global histogram, smoothed, for an item without
  // training data).
  std::vector<uint8_t> truth(test.size(), 0);
  std::vector<float> base(dist.size(), 0.0f);
  std::vector<double> global_counts(static_cast<size_t>(K), 0.0);
  for (size_t x = 0; x < model.item_hist().size(); ++x) {
    global_counts[x % static_cast<size_t>(K)] += model.item_hist()[x];
  }
  double nll = 0, base_nll = 0;
  for (size_t i = 0; i < test.size(); ++i) {
    const absl::StatusOr<int> k = model.scale().Index(test[i].rating);
    truth[i] = static_cast<uint8_t>(k.ok() ? *k : 0);
    float* b = base.data() + i * static_cast<size_t>(K);
    const int32_t item = test[i].item;
    double n_i = 0;
    for (int k2 = 0; k2 < K; ++k2) {
      const double c =
          model.Trained(item)
              ? model.item_hist()[static_cast<size_t>(item) * K + k2]
              : global_counts[static_cast<size_t>(k2)];
      b[k2] = static_cast<float>(c + 1);
      n_i += c;
    }
    for (int k2 = 0; k2 < K; ++k2) {
      b[k2] = static_cast<float>(b[k2] / (n_i + K));
    }
    nll += NegLogLikelihood(dist.data() + i * static_cast<size_t>(K), truth[i]);
    base_nll += NegLogLikelihood(b, truth[i]);
  }
  if (m.n > 0) {
    m.nll = nll / static_cast<double>(m.n);
    m.hist_nll = base_nll / static_cast<double>(m.n);
    m.reliability = ReliabilityTable(dist.data(), truth.data(), m.n, K);
    m.hist_reliability = ReliabilityTable(base.data(), truth.data(), m.n, K);
    m.ece = ClasswiseEce(m.reliability);
    m.hist_ece = ClasswiseEce(m.hist_reliability);
  }
}

}  // namespace

EvalMetrics Evaluate(const Model& model, const SparseRatings& train_by_user,
                     const std::vector<TestRating>& test, PredictMethod method,
                     int threads, const SparseRatings* extra,
                     std::vector<double>* predictions) {
  const int K = model.K();
  std::vector<double> pred(test.size(), 0.0);
  std::vector<char> fell(test.size(), 0);
  // The distribution behind each prediction (test order), for the
  // likelihood and calibration metrics.
  std::vector<float> dist(test.size() * static_cast<size_t>(K), 0.0f);
  PredictTests(model, train_by_user, extra, test, method, threads, &pred, &fell,
               &dist);
  EvalMetrics m;
  double se = 0, ae = 0;
  for (size_t i = 0; i < test.size(); ++i) {
    const double d = pred[i] - test[i].rating;
    se += d * d;
    ae += std::abs(d);
    m.n_fallback += fell[i];
  }
  m.n = static_cast<int64_t>(test.size());
  if (m.n > 0) {
    m.rmse = std::sqrt(se / static_cast<double>(m.n));
    m.mae = ae / static_cast<double>(m.n);
  }
  AddDistributionMetrics(model, test, dist, &m);
  if (predictions != nullptr) *predictions = std::move(pred);
  return m;
}

}  // namespace rbmrec
