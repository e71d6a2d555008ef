#include "core/mf.h"

#include <Eigen/Dense>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <utility>

#include "core/kernels.h"
#include "core/rng.h"
#include "core/thread_pool.h"
#include "core/train_options.h"

namespace rbmrec {

namespace {

// Blocks per side of the training grid: fixed, so the order of the updates
// (and the result) does not depend on the thread count.
constexpr int kBlocks = 8;

// Streams of the seed.
constexpr uint64_t kStartStream = 1;  // every user's starting factor
constexpr uint64_t kItemStream = 2;   // the item factors' start
constexpr uint64_t kEpochStream = 3;  // an epoch's strata
constexpr uint64_t kBlockStream = 4;  // the users' order in their blocks
constexpr uint64_t kFoldStream = 5;   // fold-in's order of the ratings

// One AdaGrad SGD step of rating r on p and q (TrainMf's):
// e = r - p.q; each side's gradient g = -e * other + lambda * self; the
// side moves by lr / sqrt(G) * g and G grows by mean(g^2). Returns e.
// sum(g_p^2) = e^2 q.q - 2 e lambda p.q + lambda^2 p.p (and g_q's the
// same with p and q swapped) comes from the three dot products of one
// pass, reduced in registers, and a second pass only moves the factors:
// with the squares summed in the update loop (and the lanes reduced
// through the stack) a fold-in took ~1.5x as long. (FoldInUser, whose q
// stays, carries the three products from step to step instead.)
inline float Step(float r, float lambda, float lr, int n, float* p, float* gp,
                  float* q, float* gq) {
  const kernels::Dots3 d = kernels::ThreeDots(p, q, n);
  const float e = r - d.pq;
  const float inv_n = 1.0f / static_cast<float>(n);
  const float cross = 2.0f * e * lambda * d.pq;
  const float step_p = lr / std::sqrt(*gp);
  const float keep_p = 1.0f - step_p * lambda, move_p = step_p * e;
  *gp += std::max(0.0f, e * e * d.qq - cross + lambda * lambda * d.pp) * inv_n;
  const float step_q = lr / std::sqrt(*gq);
  const float keep_q = 1.0f - step_q * lambda, move_q = step_q * e;
  *gq += std::max(0.0f, e * e * d.pp - cross + lambda * lambda * d.qq) * inv_n;
  for (int i = 0; i < n; ++i) {
    const float pk = p[i], qk = q[i];
    p[i] = keep_p * pk + move_p * qk;
    q[i] = keep_q * qk + move_q * pk;
  }
  return e;
}

// The factor every user starts from (training and fold-in alike).
void StartFactor(uint64_t seed, int n, float* p) {
  Rng rng(StreamSeed(seed, kStartStream));
  const float scale = std::sqrt(1.0f / static_cast<float>(n));
  for (int i = 0; i < n; ++i) p[i] = rng.Uniform() * scale;
}

template <typename T>
void Shuffle(std::vector<T>* v, Rng* rng) {
  for (size_t i = v->size(); i > 1; --i) {
    std::swap((*v)[i - 1], (*v)[static_cast<size_t>(rng->Below(i))]);
  }
}

// TrainMf's grid: item blocks are contiguous item ranges with about equal
// ratings (each user's row is sorted by item, so a block is one slice of
// the row; cut[u * (kBlocks + 1) + b] is where user u's slice of item
// block b starts); user blocks are the users in a seeded order (`order`),
// cut in kBlocks parts at user_lo.
struct Grid {
  std::vector<int64_t> cut;
  std::vector<int32_t> order;
  std::vector<size_t> user_lo;
};

Grid MakeGrid(const SparseRatings& by_user, const std::vector<int64_t>& count,
              uint64_t seed) {
  const int32_t users = by_user.rows, items = by_user.cols;
  std::vector<int32_t> item_lo(kBlocks + 1, items);
  item_lo[0] = 0;
  {
    int64_t seen = 0;
    int b = 1;
    for (int32_t i = 0; i < items && b < kBlocks; ++i) {
      seen += count[static_cast<size_t>(i)];
      while (b < kBlocks && seen * kBlocks >= by_user.nnz() * b) {
        item_lo[static_cast<size_t>(b++)] = i + 1;
      }
    }
  }
  Grid g;
  g.cut.resize(static_cast<size_t>(users) * (kBlocks + 1));
  for (int32_t u = 0; u < users; ++u) {
    const int32_t* row = by_user.col.data() + by_user.offsets[u];
    const int32_t* end = by_user.col.data() + by_user.offsets[u + 1];
    for (int b = 0; b <= kBlocks; ++b) {
      g.cut[static_cast<size_t>(u) * (kBlocks + 1) + b] =
          by_user.offsets[u] +
          (std::lower_bound(row, end, item_lo[static_cast<size_t>(b)]) - row);
    }
  }
  g.order.resize(static_cast<size_t>(users));
  for (int32_t u = 0; u < users; ++u) g.order[static_cast<size_t>(u)] = u;
  Rng rng(StreamSeed(seed, kBlockStream));
  Shuffle(&g.order, &rng);
  g.user_lo.resize(kBlocks + 1);
  for (int b = 0; b <= kBlocks; ++b) {
    g.user_lo[static_cast<size_t>(b)] =
        static_cast<size_t>(static_cast<int64_t>(users) * b / kBlocks);
  }
  return g;
}

// A training's start: every user at StartFactor, the item factors drawn
// from the seed, both accumulators at 1, no passes run.
void StartState(const MfOptions& options, int32_t users, int32_t items,
                MfTrainState* s) {
  const int n = options.factors;
  s->p.resize(users, n);
  std::vector<float> start(static_cast<size_t>(n));
  StartFactor(options.seed, n, start.data());
  for (int32_t u = 0; u < users; ++u) {
    std::copy(start.begin(), start.end(), s->p.row(u).data());
  }
  s->q.resize(items, n);
  Rng rng(StreamSeed(options.seed, kItemStream));
  const float scale = std::sqrt(1.0f / static_cast<float>(n));
  for (int32_t i = 0; i < items; ++i) {
    for (int j = 0; j < n; ++j) s->q(i, j) = rng.Uniform() * scale;
  }
  s->gp.assign(static_cast<size_t>(users), 1.0f);
  s->gq.assign(static_cast<size_t>(items), 1.0f);
  s->epochs_done = 0;
  s->stopped = false;
}

}  // namespace

MfParams TrainMf(const SparseRatings& by_user, const RatingScale& scale,
                 const MfOptions& options, MfTrainState* state) {
  MfParams mf;
  if (options.factors <= 0 || by_user.nnz() == 0) return mf;
  const int n = options.factors;
  const int32_t users = by_user.rows, items = by_user.cols;
  mf.factors = n;
  mf.fold_epochs = options.fold_epochs;
  mf.lambda = options.lambda;
  mf.learning_rate = options.learning_rate;
  mf.seed = options.seed;

  std::vector<float> value(static_cast<size_t>(scale.K()));
  for (int k = 0; k < scale.K(); ++k) {
    value[static_cast<size_t>(k)] = static_cast<float>(scale.Value(k));
  }
  std::vector<int64_t> count(static_cast<size_t>(items), 0);
  for (const int32_t i : by_user.col) ++count[static_cast<size_t>(i)];
  mf.trained.assign(static_cast<size_t>(items), 0);
  for (int32_t i = 0; i < items; ++i) {
    mf.trained[static_cast<size_t>(i)] = count[static_cast<size_t>(i)] > 0;
  }
  const Grid grid = MakeGrid(by_user, count, options.seed);
  const std::vector<int64_t>& cut = grid.cut;
  const std::vector<int32_t>& order = grid.order;
  const std::vector<size_t>& user_lo = grid.user_lo;

  const bool warm = state != nullptr && state->epochs_done > 0 &&
                    state->p.rows() == users && state->p.cols() == n &&
                    state->q.rows() == items && state->q.cols() == n;
  MfTrainState fresh;
  if (!warm) StartState(options, users, items, &fresh);
  MfTrainState& from = warm ? *state : fresh;
  RowMatrixXf p = std::move(from.p);
  mf.q = std::move(from.q);
  std::vector<float> gp = std::move(from.gp), gq = std::move(from.gq);
  const int first_epoch = from.epochs_done;
  const float lambda = options.lambda, lr = options.learning_rate;

  // Block (user block ub, item block ib): each user of ub in order, the
  // user's ratings of ib's items in item order; its squared errors summed
  // into block_se (one slot per block, added up in a fixed order).
  std::vector<double> block_se(kBlocks * kBlocks);
  auto run_block = [&](int ub, int ib) {
    double se = 0;
    for (size_t x = user_lo[static_cast<size_t>(ub)];
         x < user_lo[static_cast<size_t>(ub) + 1]; ++x) {
      const int32_t u = order[x];
      const size_t c = static_cast<size_t>(u) * (kBlocks + 1) + ib;
      float* pu = p.row(u).data();
      float* g = &gp[static_cast<size_t>(u)];
      for (int64_t j = cut[c]; j < cut[c + 1]; ++j) {
        const int32_t i = by_user.col[static_cast<size_t>(j)];
        float* qi = mf.q.row(i).data();
        const float e = Step(value[by_user.k[static_cast<size_t>(j)]], lambda,
                             lr, n, pu, g, qi, &gq[static_cast<size_t>(i)]);
        se += static_cast<double>(e) * e;
      }
    }
    block_se[static_cast<size_t>(ub * kBlocks + ib)] = se;
  };
  ThreadPool pool(std::max(1, std::min(options.threads, kBlocks)));
  std::vector<int> strata(kBlocks), pairing(kBlocks);
  const int last_epoch = first_epoch + options.epochs;
  int epochs_done = first_epoch;
  bool stopped = false;
  for (int epoch = first_epoch; epoch < last_epoch; ++epoch) {
    Rng rng(
        StreamSeed(options.seed, kEpochStream, static_cast<uint64_t>(epoch)));
    for (int b = 0; b < kBlocks; ++b) strata[b] = pairing[b] = b;
    Shuffle(&strata, &rng);
    Shuffle(&pairing, &rng);
    // Stratum s: user block b with item block pairing[(b + s) % kBlocks];
    // its blocks share no user and no item.
    for (const int s : strata) {
      pool.ParallelFor(kBlocks, [&](int, int64_t b, int64_t e) {
        for (int64_t ub = b; ub < e; ++ub) {
          run_block(static_cast<int>(ub),
                    pairing[static_cast<size_t>((ub + s) % kBlocks)]);
        }
      });
    }
    epochs_done = epoch + 1;
    if (options.progress) {
      double se = 0;
      for (const double x : block_se) se += x;
      if (!options.progress(epochs_done, std::sqrt(se / static_cast<double>(
                                                            by_user.nnz())))) {
        stopped = true;
        break;
      }
    }
  }
  if (state != nullptr) {
    state->p = std::move(p);
    state->q = mf.q;
    state->gp = std::move(gp);
    state->gq = std::move(gq);
    state->epochs_done = epochs_done;
    state->stopped = stopped;
  }
  return mf;
}

int64_t FoldInUser(const MfParams& mf, const RatingScale& scale,
                   const VisibleSet& v, float* out) {
  const int n = mf.factors;
  if (n > kMaxMfFactors) {  // not a model's (model files are checked)
    std::fill(out, out + std::max(n, 0), 0.0f);
    return 0;
  }
  // The factor steps in a cache-line-aligned copy (no vector load or store
  // across two lines), copied out at the end.
  alignas(64) float p[kMaxMfFactors];
  StartFactor(mf.seed, n, p);
  // A rating: the item, its value and q . q of the item's row.
  struct Rated {
    int32_t item;
    float r, qq;
  };
  std::vector<Rated> cur;
  cur.reserve(static_cast<size_t>(v.n));
  for (int64_t j = 0; j < v.n; ++j) {
    if (mf.Serves(v.items[j])) {
      cur.push_back({v.items[j], static_cast<float>(scale.Value(v.ks[j])), 0});
    }
  }
  std::sort(cur.begin(), cur.end(), [](const Rated& a, const Rated& b) {
    return a.item != b.item ? a.item < b.item : a.r < b.r;
  });
  const int64_t used = static_cast<int64_t>(cur.size());
  if (cur.empty() || mf.fold_epochs <= 0) {
    std::copy(p, p + n, out);
    return used;
  }
  auto row = [&](int32_t i) { return mf.q.row(i).data(); };
  for (Rated& x : cur) x.qq = kernels::Dot(row(x.item), row(x.item), n);
  // Step's AdaGrad steps against the fixed item rows, with what Step
  // computes first from the factor before each step carried over instead:
  // q . q is the item's, p . p follows |keep p + move q|^2 (recomputed at
  // every pass's start), and the next step's p . q' is
  // keep p . q' + move q . q', whose two products need only the factor
  // before this step and come out of the pass that moves it
  // (DotsThenKeepMove): one pass over the factor a step, not two, ~4
  // multiply-adds a factor. With the row two steps ahead asked for early
  // and the factor in an aligned copy, a fold-in takes ~0.9x the time of
  // Step's two passes (ML-1M's users, rbmrec-scoring-bench's fold_in); the
  // model is the same to float rounding.
  Rng rng(StreamSeed(mf.seed, kFoldStream));
  Shuffle(&cur, &rng);
  std::vector<Rated> next;
  const float lambda = mf.lambda, lr = mf.learning_rate;
  const float inv_n = 1.0f / static_cast<float>(n);
  float g = 1.0f;
  float pq = kernels::Dot(p, row(cur[0].item), n);
  for (int epoch = 0; epoch < mf.fold_epochs; ++epoch) {
    const bool last_pass = epoch + 1 == mf.fold_epochs;
    if (!last_pass) {
      next = cur;
      Shuffle(&next, &rng);
    }
    float pp = kernels::Dot(p, p, n);
    for (size_t t = 0; t < cur.size(); ++t) {
      const Rated& x = cur[t];
      const float* q = row(x.item);
      const float* q_next = t + 1 < cur.size() ? row(cur[t + 1].item)
                            : last_pass        ? nullptr
                                               : row(next[0].item);
      if (t + 2 < cur.size()) kernels::PrefetchRow(row(cur[t + 2].item), n);
      const float e = x.r - pq;
      const float step = lr / kernels::SqrtNonNegative(g);  // g >= 1
      const float keep = 1.0f - step * lambda, move = step * e;
      g += std::max(0.0f, e * e * x.qq - 2.0f * e * lambda * pq +
                              lambda * lambda * pp) *
           inv_n;
      pp = std::max(0.0f, keep * keep * pp + 2.0f * keep * move * pq +
                              move * move * x.qq);
      const kernels::Dots2 d =
          kernels::DotsThenKeepMove(p, q, q_next, keep, move, n);
      pq = keep * d.pz + move * d.qz;
    }
    if (!last_pass) cur.swap(next);
  }
  std::copy(p, p + n, out);
  return used;
}

MfBlendFit FitMfBlend(const SparseRatings& train_part,
                      const SparseRatings& valid, const SparseRatings& all,
                      const std::vector<double>& rbm_means,
                      const RatingScale& scale, const MfOptions& options) {
  MfBlendFit out;
  if (options.factors <= 0 || valid.nnz() == 0 ||
      static_cast<int64_t>(rbm_means.size()) != valid.nnz()) {
    return out;
  }
  const auto start = std::chrono::steady_clock::now();
  MfTrainState state;
  MfParams mf = TrainMf(train_part, scale, options, &state);
  if (state.stopped) out.cancelled = true;
  if (mf.empty() || out.cancelled) return out;
  // The factorisation's prediction of every validation rating (NaN for an
  // item it has no factor for).
  std::vector<double> f(static_cast<size_t>(valid.nnz()), NAN);
  ThreadPool pool(std::max(1, options.threads));
  pool.ParallelFor(valid.rows, [&](int, int64_t b, int64_t e) {
    std::vector<float> p(static_cast<size_t>(mf.factors));
    for (int64_t u64 = b; u64 < e; ++u64) {
      const int32_t u = static_cast<int32_t>(u64);
      if (valid.RowSize(u) == 0) continue;
      const VisibleSet v{train_part.col.data() + train_part.offsets[u],
                         train_part.k.data() + train_part.offsets[u],
                         train_part.RowSize(u)};
      if (FoldInUser(mf, scale, v, p.data()) == 0) continue;  // not served
      for (int64_t j = valid.offsets[u]; j < valid.offsets[u + 1]; ++j) {
        const int32_t i = valid.col[static_cast<size_t>(j)];
        if (mf.Serves(i)) f[static_cast<size_t>(j)] = MfScore(mf, p.data(), i);
      }
    }
  });
  Eigen::Matrix3d ata = Eigen::Matrix3d::Zero();
  Eigen::Vector3d aty = Eigen::Vector3d::Zero();
  for (size_t x = 0; x < f.size(); ++x) {
    if (!std::isfinite(f[x])) continue;
    const Eigen::Vector3d row(1.0, rbm_means[x], f[x]);
    ata += row * row.transpose();
    aty += row * scale.Value(valid.k[x]);
  }
  ata += 1e-9 * Eigen::Matrix3d::Identity();
  const Eigen::Vector3d c = ata.ldlt().solve(aty);
  if (!c.allFinite()) return out;
  const double lo = scale.Value(0), hi = scale.Value(scale.K() - 1);
  double sse_rbm = 0, sse_blend = 0;
  for (size_t x = 0; x < f.size(); ++x) {
    const double r = scale.Value(valid.k[x]);
    const double m = rbm_means[x];
    const double blend = std::isfinite(f[x])
                             ? std::clamp(c[0] + c[1] * m + c[2] * f[x], lo, hi)
                             : m;
    sse_rbm += (m - r) * (m - r);
    sse_blend += (blend - r) * (blend - r);
  }
  if (!(sse_blend < 0.999 * 0.999 * sse_rbm)) return out;
  // (`all` of another shape than train_part cannot continue the state:
  // TrainMf starts afresh, so it gets every pass.)
  MfOptions refit = options;
  if (all.rows == train_part.rows && all.cols == train_part.cols) {
    refit.epochs = MfRefitEpochs(options.epochs);
  }
  mf = TrainMf(all, scale, refit, &state);
  if (state.stopped) out.cancelled = true;
  if (mf.empty() || out.cancelled) return out;
  mf.intercept = static_cast<float>(c[0]);
  mf.rbm_weight = static_cast<float>(c[1]);
  mf.mf_weight = static_cast<float>(c[2]);
  out.mf = std::move(mf);
  out.valid_rmse = std::sqrt(sse_blend / static_cast<double>(f.size()));
  out.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return out;
}

float MfScore(const MfParams& mf, const float* p, int32_t i) {
  return kernels::Dot(p, mf.q.row(i).data(), mf.factors);
}

void TiltToMean(const RatingScale& scale, double target, float* probs) {
  const int K = scale.K();
  if (!std::isfinite(target)) return;
  double lo_v = 0, hi_v = 0;
  bool any = false;
  for (int k = 0; k < K; ++k) {
    if (!std::isfinite(probs[k]) || probs[k] < 0) return;
    if (probs[k] > 0) {
      const double x = scale.Value(k);
      lo_v = any ? std::min(lo_v, x) : x;
      hi_v = any ? std::max(hi_v, x) : x;
      any = true;
    }
  }
  if (!any || hi_v <= lo_v) return;
  const double margin = 1e-3 * (hi_v - lo_v);
  target = std::clamp(target, lo_v + margin, hi_v - margin);
  double v[256], w[256];
  for (int k = 0; k < K; ++k) v[k] = scale.Value(k);
  // mean(theta) - target, its derivative (the variance) and the weights
  // p_k exp(theta (v_k - shift)) / Z, shift the supported end towards which
  // theta tilts (every exponent <= 0, and the end's own term is p_k > 0).
  auto moments = [&](double theta, double* var) {
    const double shift = theta >= 0 ? hi_v : lo_v;
    double z = 0, m1 = 0, m2 = 0;
    for (int k = 0; k < K; ++k) {
      // (A float exponential: the result is stored in floats.)
      w[k] =
          theta == 0
              ? probs[k]
              : probs[k] * std::exp(static_cast<float>(theta * (v[k] - shift)));
      z += w[k];
      m1 += w[k] * v[k];
      m2 += w[k] * v[k] * v[k];
    }
    const double mean = m1 / z;
    *var = std::max(0.0, m2 / z - mean * mean);
    const double inv = 1.0 / z;
    for (int k = 0; k < K; ++k) w[k] *= inv;
    return mean - target;
  };
  // Safeguarded Newton on theta: the mean rises with theta, and at
  // |theta| = 40 / margin it is within the margin of an end.
  double lo = -40.0 / margin, hi = 40.0 / margin, theta = 0, var = 0;
  for (int iter = 0; iter < 100; ++iter) {
    const double f = moments(theta, &var);
    if (std::abs(f) <= 1e-6 * (hi_v - lo_v)) break;
    if (f > 0) {
      hi = theta;
    } else {
      lo = theta;
    }
    double next = var > 0 ? theta - f / var : 0.5 * (lo + hi);
    if (!(next > lo && next < hi)) next = 0.5 * (lo + hi);
    theta = next;
  }
  for (int k = 0; k < K; ++k) probs[k] = static_cast<float>(w[k]);
}

}  // namespace rbmrec
