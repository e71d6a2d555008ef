#include "core/fit.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include "absl/strings/str_cat.h"
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

absl::StatusOr<Model> FitModel(const Dataset& train,
                               const TrainOptions& options,
                               const FitProgressFn& progress) {
  if (absl::Status s = ValidateTrainOptions(options); !s.ok()) return s;
  Model model;
  model.scale = train.scale;
  model.users = train.users;
  model.items = train.items;
  model.options = options;
  const SparseRatings by_user = train.ByUser();
  model.item_hist = ItemHistogramCounts(by_user, train.scale.K());
  double valid_sum = 0;
  for (int e = 0; e < options.ensemble; ++e) {
    TrainOptions member = options;
    member.seed = options.seed + static_cast<uint64_t>(e);
    ProgressFn fn;
    if (progress) fn = [&](const EpochStats& st) { return progress(e, st); };
    absl::StatusOr<TrainResult> r =
        TrainRbm(by_user, train.scale.K(), member, fn);
    if (!r.ok()) return r.status();
    if (r->cancelled) return absl::CancelledError("training cancelled");
    model.summary.epochs_run += r->epochs_run;
    model.summary.best_epoch = r->best_epoch;
    model.summary.train_ratings = r->train_ratings;
    model.summary.train_seconds += r->train_seconds;
    valid_sum += r->best_valid_rmse;
    model.members.push_back(std::move(r->params));
  }
  model.summary.valid_rmse = valid_sum / options.ensemble;
  return model;
}

EvalMetrics Evaluate(const Model& model, const SparseRatings& train_by_user,
                     const std::vector<TestRating>& test, PredictMethod method,
                     int threads) {
  const int K = model.K();
  // Group test ratings by user (unknown users in one extra group).
  std::vector<int64_t> order(test.size());
  for (size_t i = 0; i < test.size(); ++i) order[i] = static_cast<int64_t>(i);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return test[a].user < test[b].user;
  });
  std::vector<std::pair<size_t, size_t>> groups;
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j < order.size() && test[order[j]].user == test[order[i]].user) ++j;
    groups.emplace_back(i, j);
    i = j;
  }
  std::vector<double> pred(test.size(), 0.0);
  std::vector<char> fell(test.size(), 0);
  double global = 0, total = 0;
  for (size_t x = 0; x < model.item_hist.size(); ++x) {
    global += model.item_hist[x] * model.scale.Value(static_cast<int>(x % K));
    total += model.item_hist[x];
  }
  global = total > 0 ? global / total : model.scale.Value(K / 2);
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
            v.items = train_by_user.col.data() + train_by_user.offsets[u];
            v.ks = train_by_user.k.data() + train_by_user.offsets[u];
            v.n = train_by_user.RowSize(u);
          }
          query.clear();
          for (size_t t = gb; t < ge; ++t) query.push_back(test[order[t]].item);
          probs.resize(query.size() * K);
          model.Predict(v, query, method, probs.data(), &fb);
          for (size_t t = gb; t < ge; ++t) {
            const size_t q = t - gb;
            const int64_t idx = order[t];
            if (v.n == 0) {
              // No training ratings for this user: item mean, else global mean.
              fell[idx] = 1;
              if (model.Trained(query[q])) {
                model.ItemHistogram(query[q], hist.data());
                pred[idx] = model.Expectation(hist.data());
              } else {
                pred[idx] = global;
              }
            } else {
              fell[idx] = fb[q] ? 1 : 0;
              pred[idx] = model.Expectation(probs.data() + q * K);
            }
          }
        }
      });
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
  return m;
}

}  // namespace rbmrec
