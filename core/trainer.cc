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
#include "core/kernels.h"
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

absl::StatusOr<CdSchedule> CdSchedule::Parse(std::string_view spec_in) {
  const absl::string_view spec(spec_in.data(), spec_in.size());
  CdSchedule s;
  if (spec == "auto") {
    s.adaptive = true;
    return s;
  }
  s.adaptive = false;
  s.steps.clear();
  for (absl::string_view part : absl::StrSplit(spec, ',')) {
    std::pair<absl::string_view, absl::string_view> te =
        absl::StrSplit(part, absl::MaxSplits('@', 1));
    int t = 0, e = 1;
    if (!absl::SimpleAtoi(te.first, &t) || t < 1 || t > 1000) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cd-steps: '", part, "' is not a step count in 1..1000"));
    }
    if (!te.second.empty() && (!absl::SimpleAtoi(te.second, &e) || e < 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("cd-steps: '", part, "' has a bad epoch after '@'"));
    }
    if (s.steps.empty() && e != 1) {
      return absl::InvalidArgumentError(
          "cd-steps: the first entry applies from epoch 1 (no '@')");
    }
    if (!s.steps.empty() && e <= s.steps.back().first) {
      return absl::InvalidArgumentError(
          "cd-steps: epochs after '@' must increase");
    }
    s.steps.emplace_back(e, t);
  }
  if (s.steps.empty()) return absl::InvalidArgumentError("cd-steps: empty");
  return s;
}

std::string CdSchedule::ToString() const {
  if (adaptive) return "auto";
  std::string out;
  for (const auto& [e, t] : steps) {
    if (!out.empty()) absl::StrAppend(&out, ",");
    absl::StrAppend(&out, t);
    if (e > 1) absl::StrAppend(&out, "@", e);
  }
  return out;
}

int CdSchedule::StepsAt(int epoch) const {
  int t = 1;
  for (const auto& [e, steps_t] : steps) {
    if (e <= epoch) t = steps_t;
  }
  return t;
}

TrainOptions ResolveTrainOptions(const TrainOptions& options, int64_t ratings) {
  TrainOptions o = options;
  // base * sqrt(ratings / at), rounded to a multiple of `step`, within
  // [base, most].
  auto rule = [&](double base, double at, double step, double most) {
    const double x =
        base *
        std::sqrt(static_cast<double>(std::max<int64_t>(0, ratings)) / at);
    return static_cast<int>(
        std::clamp(std::round(x / step) * step, base, most));
  };
  if (o.hidden == 0) o.hidden = rule(100, 200000, 10, 200);
  if (o.factors < 0) o.factors = ratings >= 500000 ? 32 : 0;
  if (o.batch_size == 0) o.batch_size = rule(20, 100000, 1, 200);
  if (o.learning_rate == 0) {
    o.learning_rate = static_cast<float>(
        0.05 * std::sqrt(static_cast<double>(o.batch_size) / 20.0));
  }
  return o;
}

absl::Status ValidateTrainOptions(const TrainOptions& o) {
  auto bad = [](absl::string_view field, absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
  };
  auto shortest = [](float v) {
    char text[32];
    const std::to_chars_result end = std::to_chars(text, text + 32, v);
    return std::string(text, end.ptr);
  };
  // A float field in [lo, hi] with open ends as flagged ("must be in [0, 1),
  // got 1.5"). The value is shown in its shortest form and, on an open end,
  // with a note that a value given just inside that end rounds to it in
  // single precision (0.99999999 is 1.0f).
  auto float_field = [&](absl::string_view field, float v, float lo,
                         bool lo_open, float hi, bool hi_open,
                         absl::string_view note = "") -> absl::Status {
    if ((lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi)) {
      return absl::OkStatus();
    }
    std::string why = absl::StrCat(
        "must be in ", lo_open ? "(" : "[", shortest(lo), ", ", shortest(hi),
        hi_open ? ")" : "]", note, ", got ", shortest(v));
    if ((lo_open && v == lo) || (hi_open && v == hi)) {
      absl::StrAppend(&why, " (a value that close to ", shortest(v),
                      " rounds to it in single precision)");
    }
    return bad(field, why);
  };
  if (o.hidden < 0 || o.hidden > 10000)
    return bad("hidden", "must be 1..10000 (0 = size rule)");
  if (o.max_epochs < 1 || o.max_epochs > 100000)
    return bad("epochs", "must be 1..100000");
  if (o.batch_size < 0) return bad("batch", "must be >= 1 (0 = size rule)");
  if (o.factors < -1 || o.factors > 10000)
    return bad("factors", "must be -1 (size rule), 0 (unfactored) or 1..10000");
  for (absl::Status s : {
           float_field("lr", o.learning_rate, 0, false, 100, true,
                       " (0 = size rule)"),
           float_field("lr-decay", o.lr_decay, 0, true, 1, false),
           float_field("momentum", o.momentum, 0, false, 1, true),
           float_field("weight-decay", o.weight_decay, 0, false, 1, true),
           float_field("init-std", o.init_std, 0, true, 10, true),
       }) {
    if (!s.ok()) return s;
  }
  if (!(o.validation_fraction >= 0 && o.validation_fraction <= 0.5))
    return bad("validation", "must be in [0, 0.5]");
  if (o.patience < 1) return bad("patience", "must be >= 1");
  if (!(o.min_improvement >= 0 && o.min_improvement < 0.1))
    return bad("min-improvement", "must be in [0, 0.1)");
  if (absl::Status s = float_field("average", o.average, 0, false, 1, true);
      !s.ok()) {
    return s;
  }
  if (o.threads < 0 || o.threads > 256) return bad("threads", "must be 0..256");
  if (o.ensemble < 1 || o.ensemble > 64)
    return bad("ensemble", "must be 1..64");
  if (o.rated_hidden < -1 || o.rated_hidden > 10000)
    return bad("rated-hidden", "must be -1 (auto), 0 (off) or 1..10000");
  if (o.rated_max_epochs < 1 || o.rated_max_epochs > 100000)
    return bad("rated-epochs", "must be 1..100000");
  if (absl::Status s =
          float_field("rated-lr", o.rated_learning_rate, 0, true, 10, false);
      !s.ok()) {
    return s;
  }
  if (o.rated_factors < 0 || o.rated_factors > 10000)
    return bad("rated-factors", "must be 0 (unfactored) or 1..10000");
  return absl::OkStatus();
}

int RatedHiddenUnits(const TrainOptions& options, int64_t users,
                     int64_t items) {
  if (options.rated_hidden >= 0) return options.rated_hidden;
  if (users <= 0 || items <= 0) return 0;
  const double f = 3.3 * std::sqrt(static_cast<double>(items));
  const int tens = static_cast<int>(std::lround(f / 10.0)) * 10;
  return std::clamp(tens, 50, 300);
}

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
}

namespace {

// The mini-batch loops of the factored trainer (the chains, the update) are
// split into this many cost-balanced pieces per thread, claimed as the
// threads finish (ThreadPool::ParallelFor): the per-piece costs are
// estimates, and a 2-thread profile of rbmrec-cd-bench with one static
// chunk per thread had the threads waiting for each other ~10% of the time.
constexpr int kPiecesPerThread = 4;

VisibleSet RowOf(const SparseRatings& s, int32_t u) {
  VisibleSet v;
  v.items = s.col.data() + s.offsets[u];
  v.ks = s.k.data() + s.offsets[u];
  v.n = s.RowSize(u);
  return v;
}

// Scratch buffers owned by one worker: the Gibbs chain's, a hidden input
// (validation), one item's K gradient rows of `width` floats (Update) and a
// C-vector (the factored chains' B h).
struct Scratch : GibbsScratch {
  Eigen::VectorXf x, z;
  RowMatrixXf ew;  // ExactValidation: exp of an item's K rows of W
  // ExactValidation per row k: exp(b_k - max b), the product's mantissa,
  // its exponent and the log of the row's term.
  std::vector<double> eb, em, el;
  std::vector<int64_t> ee;
  std::vector<float> grad;
  std::vector<const float*> rows;  // a case's rows of A (factored chains)
  // The chains' expected reconstructions, and uniforms (BatchChains).
  std::vector<double> means;
  std::vector<float> uniforms;
  Scratch(int F, int K, int width, int C)
      : GibbsScratch(F, K),
        x(F),
        z(std::max(C, 1)),
        eb(static_cast<size_t>(K)),
        em(static_cast<size_t>(K)),
        el(static_cast<size_t>(K)),
        ee(static_cast<size_t>(K)),
        grad(static_cast<size_t>(width) * K) {}
};

class CdTrainer {
 public:
  // A pool of `pool_threads` workers, of which the first `threads` are
  // used until SetThreads says otherwise.
  CdTrainer(const SparseRatings& train, const SparseRatings& valid, int K,
            const TrainOptions& o, int threads, int pool_threads)
      : train_(train),
        valid_(valid),
        o_(o),
        C_(o.factors > 0 && o.factors < o.hidden ? o.factors : 0),
        pool_(std::max(threads, pool_threads)) {
    pool_.SetWidth(threads);
    p_.Resize(train.cols, K, o.hidden);
    Rng rng(StreamSeed(o.seed, 0x1417));
    if (C_ > 0) {
      // W = A B with the entries of A and B ~ N(0, s^2), s^2 = init_std /
      // sqrt(C): the entries of W then have W's own init_std.
      const double sd = std::sqrt(o.init_std / std::sqrt(double{1.0} * C_));
      a_.resize(p_.W.rows(), C_);
      bm_.resize(C_, p_.F);
      for (RowMatrixXf* m : {&a_, &bm_}) {
        for (Eigen::Index r = 0; r < m->rows(); ++r) {
          for (Eigen::Index j = 0; j < m->cols(); ++j) {
            (*m)(r, j) = static_cast<float>(rng.Normal() * sd);
          }
        }
      }
      vel_w_.setZero(a_.rows(), C_);  // A's velocity
      vel_bm_.setZero(C_, p_.F);
      zeros_.assign(static_cast<size_t>(C_), 0.0f);
      MultiplyFactors();
    } else {
      for (Eigen::Index r = 0; r < p_.W.rows(); ++r) {
        for (Eigen::Index j = 0; j < p_.W.cols(); ++j) {
          p_.W(r, j) = static_cast<float>(rng.Normal() * o.init_std);
        }
      }
      vel_w_.setZero(p_.W.rows(), p_.W.cols());
    }
    InitVisibleBiases(train, &p_);
    vel_b_.setZero(p_.b.size());
    vel_c_.setZero(p_.F);
    for (int t = 0; t < pool_.size(); ++t) {
      scratch_.emplace_back(p_.F, K, C_ > 0 ? C_ : p_.F, C_);
    }
    vt_.resize(static_cast<size_t>(train.nnz()));
    item_slot_.assign(static_cast<size_t>(train.cols), -1);
    item_count_.assign(static_cast<size_t>(train.cols), 0);
    if (o.predict == PredictMethod::kExact && valid.nnz() > 0) {
      valid_by_item_ = valid.Transpose();
      item_cost_valid_.assign(static_cast<size_t>(valid_by_item_.rows) + 1, 0);
      for (int32_t i = 0; i < valid_by_item_.rows; ++i) {
        item_cost_valid_[static_cast<size_t>(i) + 1] =
            item_cost_valid_[static_cast<size_t>(i)] + 1 +
            valid_by_item_.RowSize(i);
      }
    }
  }

  RbmParams& params() { return p_; }
  // Threads used from the next parallel loop on (at most the pool's size).
  // Results do not depend on it.
  void SetThreads(int threads) { pool_.SetWidth(threads); }

  // One epoch of CD-T over all users in a seeded order; returns the
  // reconstruction RMSE of the training ratings.
  double Epoch(int epoch, int cd_steps, float lr) {
    std::vector<int32_t> order;
    order.reserve(static_cast<size_t>(train_.rows));
    for (int32_t u = 0; u < train_.rows; ++u) {
      if (train_.RowSize(u) > 0) order.push_back(u);
    }
    Rng shuffle(StreamSeed(o_.seed, 0x5f1e, static_cast<uint64_t>(epoch)));
    for (size_t i = order.size(); i > 1; --i) {
      std::swap(order[i - 1], order[shuffle.Below(i)]);
    }
    const int F = p_.F;
    const size_t B = static_cast<size_t>(o_.batch_size);
    h0_.setZero(static_cast<Eigen::Index>(B), F);
    ht_.setZero(static_cast<Eigen::Index>(B), F);
    hs_.setZero(static_cast<Eigen::Index>(B), F);
    if (C_ > 0) {
      for (RowMatrixXf* m : {&a0_, &at_, &g0_, &gt_}) {
        m->setZero(static_cast<Eigen::Index>(B), C_);
      }
    }
    sq_err_.assign(B, 0.0);
    double sse = 0;
    for (size_t start = 0; start < order.size(); start += B) {
      const size_t nb = std::min(B, order.size() - start);
      const int32_t* users = order.data() + start;
      // Phase A: the batch's Gibbs chains (BatchChains, FactoredChains).
      if (C_ > 0) {
        FactoredChains(epoch, users, nb, cd_steps);
      } else {
        BatchChains(epoch, users, nb, cd_steps);
      }
      for (size_t s = 0; s < nb; ++s) sse += sq_err_[s];
      Update(nb, lr);
    }
    if (C_ > 0) MultiplyFactors();
    return std::sqrt(sse /
                     static_cast<double>(std::max<int64_t>(1, train_.nnz())));
  }

  // W = A B (factored), over the pool in blocks of kFactorRows rows of A:
  // each block is the same product whichever thread computes it and however
  // many there are, so W's bits do not depend on the thread count. (Alone
  // at the end of each epoch it was ~5% of a 2-thread epoch of
  // rbmrec-cd-bench, one thread computing while the other waited.)
  void MultiplyFactors() {
    constexpr Eigen::Index kFactorRows = 480;  // a multiple of Eigen's 24
    const Eigen::Index rows = a_.rows();
    const int64_t blocks = (rows + kFactorRows - 1) / kFactorRows;
    pool_.ParallelFor(
        blocks,
        [&](int, int64_t b, int64_t e) {
          for (int64_t k = b; k < e; ++k) {
            const Eigen::Index r0 = k * kFactorRows;
            const Eigen::Index n = std::min(kFactorRows, rows - r0);
            p_.W.middleRows(r0, n).noalias() = a_.middleRows(r0, n) * bm_;
          }
        },
        nullptr, kPiecesPerThread);
  }

  // RMSE of predicted expectations on the validation ratings.
  double ValidationRmse(const RbmParams& p) {
    return ValidationPass(
        p, [&](int32_t u, float* x) { HiddenInput(p, RowOf(train_, u), x); });
  }

  // ValidationRmse(avg) for the running average of the parameters
  // (TrainOptions::average) after this epoch's avg = a * avg + (1 - a) *
  // params (avg = params after the first epoch, `first`). The hidden input
  // is affine in the parameters, so the average's is the same running
  // average of the raw parameters' inputs; factored, those cost ~C per
  // rating plus a C x F product per case (c + (A^T v) B) instead of F per
  // rating, and the average's inputs are kept (x_avg_) instead of summed
  // from avg's rows every epoch: about half of the validation pass's work.
  // The same model and RMSE up to rounding. Unfactored: ValidationRmse.
  double AveragedValidationRmse(const RbmParams& avg, float a, bool first) {
    if (C_ == 0) return ValidationRmse(avg);
    const int F = p_.F;
    if (first) x_avg_.setZero(valid_.rows, F);
    pool_.ParallelFor(valid_.rows, [&](int t, int64_t b, int64_t e) {
      Scratch& sc = scratch_[static_cast<size_t>(t)];
      for (int64_t u64 = b; u64 < e; ++u64) {
        const int32_t u = static_cast<int32_t>(u64);
        if (valid_.RowSize(u) == 0) continue;
        const VisibleSet v = RowOf(train_, u);
        if (sc.rows.size() < static_cast<size_t>(v.n)) {
          sc.rows.resize(static_cast<size_t>(v.n));
        }
        for (int64_t r = 0; r < v.n; ++r) {
          sc.rows[static_cast<size_t>(r)] =
              a_.row(p_.Row(v.items[r], v.ks[r])).data();
        }
        kernels::SumRows(zeros_.data(), sc.rows.data(), v.n, C_, sc.z.data());
        auto x = x_avg_.row(u);
        if (first) {
          x = p_.c.transpose();
          x.noalias() += sc.z.transpose() * bm_;
        } else {
          sc.x = p_.c;
          sc.x.noalias() += bm_.transpose() * sc.z;
          x = a * x + (1 - a) * sc.x.transpose();
        }
      }
    });
    return ValidationPass(avg, [&](int32_t u, float* x) {
      std::copy_n(x_avg_.row(u).data(), F, x);
    });
  }

  // The RMSE of `p`'s predictions on the validation ratings, with
  // input(u, x) writing case u's hidden input into x[0..F).
  template <typename Input>
  double ValidationPass(const RbmParams& p, const Input& input) {
    if (o_.predict == PredictMethod::kExact) return ExactValidation(p, input);
    std::vector<double> per_user(static_cast<size_t>(valid_.rows), 0.0);
    pool_.ParallelFor(valid_.rows, [&](int t, int64_t b, int64_t e) {
      Scratch& s = scratch_[t];
      for (int64_t u64 = b; u64 < e; ++u64) {
        const int32_t u = static_cast<int32_t>(u64);
        if (valid_.RowSize(u) == 0) continue;
        input(u, s.x.data());
        if (o_.predict == PredictMethod::kMeanField) {
          SigmoidInPlace(s.x.data(), p.F);
        }
        double err = 0;
        for (int64_t r = valid_.offsets[u]; r < valid_.offsets[u + 1]; ++r) {
          if (o_.predict == PredictMethod::kMeanField) {
            PredictMeanField(p, s.x.data(), valid_.col[r], s.logits.data());
          } else {
            PredictExact(p, s.x.data(), valid_.col[r], s.logits.data());
          }
          double mean = 0;
          for (int k = 0; k < p.K; ++k)
            mean += static_cast<double>(k) * s.logits[k];
          const double d = mean - valid_.k[r];
          err += d * d;
        }
        per_user[static_cast<size_t>(u)] = err;
      }
    });
    double sse = 0;
    for (double e : per_user) sse += e;
    return std::sqrt(sse /
                     static_cast<double>(std::max<int64_t>(1, valid_.nnz())));
  }

  // The expected rating index of a validation rating of the item with rows
  // row0.. and user u under `p`: from PredictExact's probabilities
  // (SlowMean), or (ExpMean, for users and rows within the exponentials'
  // limits) without a log or an exp per row: p_k is proportional to
  // exp(b_k) prod_j (1 + ex_j ew_kj), i.e. sc->eb[k] = exp(b_k - b_top)
  // times SoftplusProductFromExp's mantissa m_k and 2^(e_k - max e). When
  // a term could underflow (log of it below -700) or the user is saturated
  // (a factor exp(hi . w_k) more, SplitSaturated), the terms are
  // exp(l_k - max l) m_k with l_k = b_k + (e_k - max e) log 2 (+ hi . w_k).
  double SlowMean(const RbmParams& p, int32_t item, const float* x,
                  float* probs) const {
    PredictExact(p, x, item, probs);
    double mean = 0;
    for (int k = 0; k < p.K; ++k) mean += static_cast<double>(k) * probs[k];
    return mean;
  }

  double ExpMean(const RbmParams& p, int64_t row0, int32_t u, uint8_t mode,
                 double b_top, Scratch* sc) const {
    const int K = p.K;
    const float* ex = ex_.row(u).data();
    double* m = sc->em.data();
    int64_t* e2 = sc->ee.data();
    int64_t e_top = std::numeric_limits<int64_t>::min();
    for (int k = 0; k < K; ++k) {
      m[k] = SoftplusProductFromExp(ex, sc->ew.row(k).data(), p.F, &e2[k]);
      e_top = std::max(e_top, e2[k]);
    }
    constexpr double kLn2 = 0.69314718055994531;
    double* l = sc->el.data();
    double l_top = -std::numeric_limits<double>::infinity();
    double l_low = std::numeric_limits<double>::infinity();
    for (int k = 0; k < K; ++k) {
      l[k] = static_cast<double>(p.b[row0 + k]) - b_top +
             static_cast<double>(e2[k] - e_top) * kLn2;
      if (mode == kExpSaturated) {
        l[k] +=
            hi_.row(hi_slot_[static_cast<size_t>(u)]).dot(p.W.row(row0 + k));
      }
      l_top = std::max(l_top, l[k]);
      l_low = std::min(l_low, l[k]);
    }
    double sum = 0, weighted = 0;
    const bool direct = mode == kExpPlain && l_low >= -700;
    for (int k = 0; k < K; ++k) {
      double q;
      if (direct) {
        // Times 2^(e_k - e_top), exact: the result is at least e^-700.
        q = std::ldexp(sc->eb[k] * m[k], static_cast<int>(e2[k] - e_top));
      } else {
        q = std::exp(l[k] - l_top) * m[k];
      }
      sum += q;
      weighted += static_cast<double>(k) * q;
    }
    return weighted / sum;
  }

  // ValidationPass with exact predictions (PredictExact's arithmetic), item
  // by item: every validation rating of item i needs its K rows' softplus
  // sums against its user's hidden input, sum_j log(1 + exp(x_j + w_j)).
  // With exp(x) per user and exp(w) per row computed once, each of those
  // is SoftplusSumFromExp's product instead of F exponentials: first each
  // user's input and its exponentials (xv_, ex_), then each item's K rows'
  // exponentials in the thread's scratch and its ratings. A user with
  // inputs beyond kExpSoftplusLimit (a heavy user's often are) keeps the
  // product through SplitSaturated for rows within kSaturatedRowLimit: its
  // saturated units' exponentials are 0 and the sum of their row entries
  // (hi_ . w) is added. A user with a non-finite input, or a row beyond
  // the limits, takes SoftplusSum instead (ExpMean, SlowMean). The squared
  // errors are summed per item, then in item order: the same bits at any
  // thread count.
  template <typename Input>
  double ExactValidation(const RbmParams& p, const Input& input) {
    const int F = p.F, K = p.K;
    xv_.resize(valid_.rows, F);
    ex_.resize(valid_.rows, F);
    ex_mode_.assign(static_cast<size_t>(valid_.rows), kExpSlow);
    pool_.ParallelFor(valid_.rows, [&](int, int64_t b, int64_t e) {
      for (int64_t u = b; u < e; ++u) {
        if (valid_.RowSize(static_cast<int32_t>(u)) == 0) continue;
        float* x = xv_.row(u).data();
        input(static_cast<int32_t>(u), x);
        const auto xs = xv_.row(u).array();
        const float top = xs.abs().template maxCoeff<Eigen::PropagateNaN>();
        if (top <= kExpSoftplusLimit) {
          ex_mode_[static_cast<size_t>(u)] = kExpPlain;
          ex_.row(u).array() = xs.exp();
        } else if (top <= std::numeric_limits<float>::max()) {
          ex_mode_[static_cast<size_t>(u)] = kExpSaturated;
        }
      }
    });
    // The few saturated users' exponentials and hi_ rows (hi_slot_[u]).
    hi_slot_.assign(static_cast<size_t>(valid_.rows), -1);
    int32_t n_hi = 0;
    for (size_t u = 0; u < ex_mode_.size(); ++u) {
      if (ex_mode_[u] == kExpSaturated) hi_slot_[u] = n_hi++;
    }
    hi_.resize(n_hi, F);
    for (size_t u = 0; u < ex_mode_.size(); ++u) {
      if (hi_slot_[u] < 0) continue;
      const Eigen::Index ui = static_cast<Eigen::Index>(u);
      SplitSaturated(xv_.row(ui).data(), F, ex_.row(ui).data(),
                     hi_.row(hi_slot_[u]).data());
    }
    std::vector<double> per_item(static_cast<size_t>(valid_by_item_.rows), 0);
    pool_.ParallelFor(
        valid_by_item_.rows,
        [&](int t, int64_t b, int64_t e) {
          Scratch& s = scratch_[static_cast<size_t>(t)];
          s.ew.resize(K, F);
          float* logits = s.logits.data();
          for (int64_t i = b; i < e; ++i) {
            const int32_t item = static_cast<int32_t>(i);
            if (valid_by_item_.RowSize(item) == 0) continue;
            const int64_t row0 = p.Row(item, 0);
            float top = 0;
            for (int k = 0; k < K; ++k) {
              const auto w = p.W.row(row0 + k).array();
              top = std::max(top, w.abs().maxCoeff());
              s.ew.row(k).array() = w.exp();
            }
            const bool rows_ok = top <= kExpSoftplusLimit;
            const bool rows_tight = top <= kSaturatedRowLimit;
            // exp(b_k - max b) for the exponentials' path.
            double b_top = -std::numeric_limits<double>::infinity();
            for (int k = 0; k < K; ++k) {
              b_top = std::max(b_top, static_cast<double>(p.b[row0 + k]));
            }
            for (int k = 0; k < K; ++k) {
              s.eb[k] = std::exp(static_cast<double>(p.b[row0 + k]) - b_top);
            }
            double err = 0;
            for (int64_t r = valid_by_item_.offsets[item];
                 r < valid_by_item_.offsets[item + 1]; ++r) {
              const int32_t u = valid_by_item_.col[static_cast<size_t>(r)];
              if (r + 1 < valid_by_item_.offsets[item + 1]) {
                // The next rating's user's exponentials (most miss the
                // cache): asked for while this one's K products run.
                const char* next = reinterpret_cast<const char*>(
                    ex_.row(valid_by_item_.col[static_cast<size_t>(r) + 1])
                        .data());
                for (int64_t off = 0; off < int64_t{4} * F; off += 64) {
                  __builtin_prefetch(next + off);
                }
              }
              const uint8_t mode = ex_mode_[static_cast<size_t>(u)];
              const bool fast = mode == kExpPlain       ? rows_ok
                                : mode == kExpSaturated ? rows_tight
                                                        : false;
              const double mean =
                  fast ? ExpMean(p, row0, u, mode, b_top, &s)
                       : SlowMean(p, item, xv_.row(u).data(), logits);
              const double d = mean - valid_by_item_.k[static_cast<size_t>(r)];
              err += d * d;
            }
            per_item[static_cast<size_t>(i)] = err;
          }
        },
        item_cost_valid_.data());
    double sse = 0;
    for (double e : per_item) sse += e;
    return std::sqrt(sse /
                     static_cast<double>(std::max<int64_t>(1, valid_.nnz())));
  }

 private:
  // The batch's index, shared by both chains and both updates: each batch
  // user's first batch-local rating position (local_start_), the batch's
  // items in increasing id order (batch_items_) and its ratings by item
  // (entries_[entry_start_[t] ..) for batch item t, in batch order), the
  // items' costs for the item-parallel loops and the users' random streams.
  void IndexBatch(int epoch, const int32_t* users, size_t nb) {
    IndexUsers(epoch, users, nb);
    IndexItems(users, nb);
  }

  // IndexBatch's per-user part (all the chains need): local_start_, the
  // random streams and room for the uniforms.
  void IndexUsers(int epoch, const int32_t* users, size_t nb) {
    local_start_.resize(nb + 1);
    local_start_[0] = 0;
    for (size_t s = 0; s < nb; ++s) {
      local_start_[s + 1] = local_start_[s] + train_.RowSize(users[s]);
    }
    uniforms_.resize(nb * static_cast<size_t>(p_.F) +
                     static_cast<size_t>(local_start_[nb]));
    rngs_.clear();
    for (size_t s = 0; s < nb; ++s) {
      rngs_.emplace_back(StreamSeed(o_.seed,
                                    static_cast<uint64_t>(epoch) << 1 | 1,
                                    static_cast<uint64_t>(users[s])));
    }
  }

  // IndexBatch's per-item part (REQUIRES IndexUsers of the same batch):
  // batch_items_, entries_, entry_start_, entry_of_ and item_cost_.
  void IndexItems(const int32_t* users, size_t nb) {
    // The batch's items in increasing id order, so each thread's share of
    // the item-parallel steps is one range of W's rows (and of the visible
    // biases, 5 to a cache line, which two threads would otherwise write
    // side by side), read in address order; their slots and the starts of
    // their entries, from the batch's ratings counted per item (item_count_,
    // zero outside a batch). When the batch has ratings enough to touch a
    // good part of the catalogue, the count has no branch per rating and
    // one scan of the catalogue lists the items; else the items are listed
    // as first met and sorted.
    const int64_t n_local = local_start_[nb];
    batch_items_.clear();
    if (n_local * 16 >= train_.cols) {
      for (size_t s = 0; s < nb; ++s) {
        const int32_t u = users[s];
        for (int64_t r = train_.offsets[u]; r < train_.offsets[u + 1]; ++r) {
          ++item_count_[static_cast<size_t>(train_.col[r])];
        }
      }
      for (int32_t i = 0; i < train_.cols; ++i) {
        if (item_count_[static_cast<size_t>(i)] > 0) batch_items_.push_back(i);
      }
    } else {
      for (size_t s = 0; s < nb; ++s) {
        const int32_t u = users[s];
        for (int64_t r = train_.offsets[u]; r < train_.offsets[u + 1]; ++r) {
          if (item_count_[static_cast<size_t>(train_.col[r])]++ == 0) {
            batch_items_.push_back(train_.col[r]);
          }
        }
      }
      std::sort(batch_items_.begin(), batch_items_.end());
    }
    entry_start_.assign(1, 0);
    for (size_t t = 0; t < batch_items_.size(); ++t) {
      const size_t i = static_cast<size_t>(batch_items_[t]);
      item_slot_[i] = static_cast<int32_t>(t);
      entry_start_.push_back(entry_start_.back() + item_count_[i]);
      item_count_[i] = 0;
    }
    const size_t n_items = batch_items_.size();
    entry_fill_.assign(entry_start_.begin(), entry_start_.end() - 1);
    // The item-parallel steps' split: an item costs its entries (K logits,
    // two gradient rows each) plus the loads of its K rows of W and of their
    // velocities, which miss the cache for the many items a batch touches
    // once: about kItemCost entries' worth (measured on ML-1M-shaped data;
    // splitting by entries alone left one thread twice the other's time).
    constexpr int64_t kItemCost = 6;
    item_cost_.resize(n_items + 1);
    for (size_t t = 0; t <= n_items; ++t) {
      item_cost_[t] = entry_start_[t] + kItemCost * static_cast<int64_t>(t);
    }
    entries_.resize(static_cast<size_t>(n_local));
    entry_of_.resize(static_cast<size_t>(n_local));
    for (size_t s = 0; s < nb; ++s) {
      const int32_t u = users[s];
      for (int64_t r = train_.offsets[u]; r < train_.offsets[u + 1]; ++r) {
        const size_t slot =
            static_cast<size_t>(item_slot_[static_cast<size_t>(train_.col[r])]);
        entry_of_[static_cast<size_t>(local_start_[s] + r -
                                      train_.offsets[u])] = entry_fill_[slot];
        entries_[static_cast<size_t>(entry_fill_[slot]++)] =
            Entry{static_cast<int32_t>(s), train_.k[static_cast<size_t>(r)], r};
      }
    }
    for (int32_t i : batch_items_) item_slot_[static_cast<size_t>(i)] = -1;
  }

  // The uniforms of batch user s: F for the hidden sample, then one per
  // rating (at local_start_[s] past the hidden ones).
  float* HiddenUniforms(size_t s) {
    return uniforms_.data() + s * static_cast<size_t>(p_.F);
  }
  float* VisibleUniforms(size_t nb, size_t s) {
    return uniforms_.data() + nb * static_cast<size_t>(p_.F) + local_start_[s];
  }
  // Draws batch user s's uniforms for one step from the user's stream and
  // the binary hidden sample hs_ row s from probabilities hp.
  void SampleHidden(size_t nb, size_t s, const float* hp) {
    const int F = p_.F;
    Rng& rng = rngs_[s];
    float* uh = HiddenUniforms(s);
    for (int j = 0; j < F; ++j) uh[j] = rng.Uniform();
    float* uv = VisibleUniforms(nb, s);
    const int64_t n = local_start_[s + 1] - local_start_[s];
    for (int64_t r = 0; r < n; ++r) uv[r] = rng.Uniform();
    float* h = hs_.row(static_cast<Eigen::Index>(s)).data();
    for (int j = 0; j < F; ++j) h[j] = uh[j] < hp[j] ? 1.f : 0.f;
  }

  // The CD-T chains of batch users users[0..nb), with exactly CdChain's
  // arithmetic and random draws for every user (so the same bits), into
  // h0_ row s, ht_ row s, vt_ at the user's ratings and sq_err_[s]; but the
  // reconstruction runs item by item: every batch rating of item i is done
  // while item i's K rows of W are in L1, instead of once per rating
  // scattered over W. Per step:
  //   1. per user (parallel): the step's uniforms from the user's own
  //      stream (F for the hidden sample, then one per rating, in rating
  //      order: CdChain's order) and the binary hidden sample hs_;
  //   2. per item (parallel): the logits of each batch rating of the item,
  //      their softmaxes and the visible samples with the ratings' uniforms
  //      (SoftmaxSampleRows: the same bits as one softmax and one
  //      SampleCategorical per rating), and at step 1 the squared error of
  //      the reconstruction's expectation;
  //   3. per user (parallel): ht = sigmoid(c + sum of the sampled rows),
  //      summed in rating order as HiddenInput does.
  void BatchChains(int epoch, const int32_t* users, size_t nb, int cd_steps) {
    IndexBatch(epoch, users, nb);
    const int F = p_.F, K = p_.K;
    const size_t n_items = batch_items_.size();
    const int64_t n_local = local_start_[nb];
    d2_.resize(static_cast<size_t>(n_local));
    vt_entry_.resize(static_cast<size_t>(n_local));
    auto visible_u = [&](size_t s) { return VisibleUniforms(nb, s); };
    auto sample_hidden = [&](size_t s, const float* hp) {
      SampleHidden(nb, s, hp);
    };
    // Positive phase and the first hidden sample.
    pool_.ParallelFor(
        static_cast<int64_t>(nb),
        [&](int, int64_t b, int64_t e) {
          for (int64_t s = b; s < e; ++s) {
            float* h0 = h0_.row(static_cast<Eigen::Index>(s)).data();
            HiddenInput(p_, RowOf(train_, users[s]), h0);
            SigmoidInPlace(h0, F);
            sample_hidden(static_cast<size_t>(s), h0);
          }
        },
        local_start_.data());
    for (int step = 0; step < cd_steps; ++step) {
      pool_.ParallelFor(
          static_cast<int64_t>(n_items),
          [&](int t, int64_t b, int64_t e) {
            // Logits of all the chunk's entries item by item, then one
            // SoftmaxSampleRows over them all.
            Scratch& sc = scratch_[static_cast<size_t>(t)];
            std::vector<float>& probs = sc.probs;
            const int64_t e0 = entry_start_[static_cast<size_t>(b)];
            const int64_t n = entry_start_[static_cast<size_t>(e)] - e0;
            const size_t need = static_cast<size_t>(n * K);
            if (probs.size() < need) probs.resize(need);
            for (int64_t x = b; x < e; ++x) {
              const int32_t item = batch_items_[static_cast<size_t>(x)];
              const int64_t row0 = p_.Row(item, 0);
              const float* w = p_.W.row(row0).data();
              const float* bias = p_.b.data() + row0;
              const int64_t q1 = entry_start_[static_cast<size_t>(x) + 1];
              int64_t q = entry_start_[static_cast<size_t>(x)];
              // Two entries per pass over the item's K rows.
              for (; q + 1 < q1; q += 2) {
                kernels::RowDots2(
                    w, bias, K, F,
                    hs_.row(entries_[static_cast<size_t>(q)].s).data(),
                    hs_.row(entries_[static_cast<size_t>(q + 1)].s).data(),
                    probs.data() + (q - e0) * K,
                    probs.data() + (q + 1 - e0) * K);
              }
              if (q < q1) {
                kernels::RowDots(
                    w, bias, K, F,
                    hs_.row(entries_[static_cast<size_t>(q)].s).data(),
                    probs.data() + (q - e0) * K);
              }
            }
            // Each entry's uniform (from its user's stream), then the
            // samples and, at step 1, the expectations.
            if (sc.uniforms.size() < static_cast<size_t>(n)) {
              sc.uniforms.resize(static_cast<size_t>(n));
            }
            if (sc.means.size() < static_cast<size_t>(n)) {
              sc.means.resize(static_cast<size_t>(n));
            }
            for (int64_t q = 0; q < n; ++q) {
              const Entry& en = entries_[static_cast<size_t>(e0 + q)];
              const size_t s = static_cast<size_t>(en.s);
              sc.uniforms[static_cast<size_t>(q)] =
                  visible_u(s)[en.r - train_.offsets[users[s]]];
            }
            SoftmaxSampleRows(probs.data(), n, K, sc.uniforms.data(),
                              vt_entry_.data() + e0,
                              step == 0 ? sc.means.data() : nullptr);
            if (step == 0) {
              for (int64_t q = 0; q < n; ++q) {
                const Entry& en = entries_[static_cast<size_t>(e0 + q)];
                const double d = sc.means[static_cast<size_t>(q)] - en.k;
                d2_[static_cast<size_t>(e0 + q)] = d * d;
              }
            }
          },
          item_cost_.data());
      const bool last = step + 1 == cd_steps;
      pool_.ParallelFor(
          static_cast<int64_t>(nb),
          [&](int, int64_t b, int64_t e) {
            for (int64_t s64 = b; s64 < e; ++s64) {
              const size_t s = static_cast<size_t>(s64);
              const int32_t u = users[s];
              float* ht = ht_.row(static_cast<Eigen::Index>(s)).data();
              const VisibleSet v = RowOf(train_, u);
              // The user's samples, from the item-major order of step 2.
              uint8_t* vt = vt_.data() + train_.offsets[u];
              for (int64_t l = local_start_[s]; l < local_start_[s + 1]; ++l) {
                vt[l - local_start_[s]] = vt_entry_[static_cast<size_t>(
                    entry_of_[static_cast<size_t>(l)])];
              }
              HiddenInput(p_, VisibleSet{v.items, vt, v.n}, ht);
              SigmoidInPlace(ht, F);
              if (step == 0) {
                double sq = 0;
                for (int64_t l = local_start_[s]; l < local_start_[s + 1];
                     ++l) {
                  sq += d2_[static_cast<size_t>(
                      entry_of_[static_cast<size_t>(l)])];
                }
                sq_err_[s] = sq;
              }
              if (!last) sample_hidden(s, ht);
            }
          },
          local_start_.data());
    }
  }

  // The factored RBM's CD-T chains (TrainOptions::factors, the paper's
  // Eq. 12): W = A B with A (m*K) x C and B C x F, so that
  //   hidden input  c + W^T v = c + B^T (A^T v): C adds per rating, then
  //                 one C x F product per user;
  //   logits        b_i^k + W_i^k . h = b_i^k + A_i^k . (B h): K*C per
  //                 rating after one C x F product per user.
  // Per batch user s (parallel over users; each user's arithmetic and
  // random draws are its own, so the thread count never changes a bit): a0_
  // row s = the sum of A's rows of the user's ratings, h0_ = sigmoid(c + a0
  // B), the hidden sample, then per step the reconstruction (logits, then
  // SoftmaxSampleRows: the visible sample into vt_ and at step 1 the
  // expectations for the squared error), at_ = the sum of A's rows of the
  // sample and ht_ = sigmoid(c + at B); last g0_ = B h0 and gt_ = B hT, the
  // C-vectors that Update adds to A's gradient rows.
  void FactoredChains(int epoch, const int32_t* users, size_t nb,
                      int cd_steps) {
    IndexUsers(epoch, users, nb);
    const int F = p_.F, K = p_.K;
    // Work 0 builds the item index (IndexItems, which only Update reads)
    // while the others run the chains of users 0..nb-1 (work 1..nb): with
    // two threads or more the index costs no wall time. It costs about a
    // fifth of a chain per rating (a profile of one thread: the index 8%
    // of the time, the chains 37%).
    const int64_t n_local = local_start_[nb];
    work_cost_.resize(nb + 2);
    work_cost_[0] = 0;
    work_cost_[1] = n_local / 5;
    for (size_t s = 0; s < nb; ++s) {
      work_cost_[s + 2] = work_cost_[1] + local_start_[s + 1];
    }
    pool_.ParallelFor(
        static_cast<int64_t>(nb) + 1,
        [&](int t, int64_t b, int64_t e) {
          Scratch& sc = scratch_[static_cast<size_t>(t)];
          for (int64_t w = b; w < e; ++w) {
            if (w == 0) {
              IndexItems(users, nb);
              continue;
            }
            const size_t s = static_cast<size_t>(w - 1);
            const Eigen::Index si = static_cast<Eigen::Index>(s);
            const int32_t u = users[s];
            const VisibleSet v = RowOf(train_, u);
            const size_t need = static_cast<size_t>(v.n * K);
            if (sc.probs.size() < need) sc.probs.resize(need);
            if (sc.rows.size() < static_cast<size_t>(v.n)) {
              sc.rows.resize(static_cast<size_t>(v.n));
            }
            if (sc.means.size() < static_cast<size_t>(v.n)) {
              sc.means.resize(static_cast<size_t>(v.n));
            }
            double* means = sc.means.data();
            float* probs = sc.probs.data();
            const float** rows = sc.rows.data();
            // a0 = the sum of A's rows of the user's ratings, in rating
            // order (asking for the rows of the items a few ratings ahead
            // made it slower: 15.4-17.6 against 18.0-18.8 M ratings/s).
            for (int64_t r = 0; r < v.n; ++r) {
              rows[r] = a_.row(p_.Row(v.items[r], v.ks[r])).data();
            }
            auto a0 = a0_.row(si);
            kernels::SumRows(zeros_.data(), rows, v.n, C_, a0.data());
            auto h0 = h0_.row(si);
            h0 = p_.c.transpose();
            h0.noalias() += a0 * bm_;
            SigmoidInPlace(h0.data(), F);
            SampleHidden(nb, s, h0.data());
            auto ht = ht_.row(si);
            auto at = at_.row(si);
            uint8_t* vt = vt_.data() + train_.offsets[u];
            for (int step = 0; step < cd_steps; ++step) {
              sc.z.noalias() = bm_ * hs_.row(si).transpose();
              for (int64_t r = 0; r < v.n; ++r) {
                const int64_t row0 = p_.Row(v.items[r], 0);
                kernels::RowDots(a_.row(row0).data(), p_.b.data() + row0, K, C_,
                                 sc.z.data(), probs + r * K);
              }
              // The visible sample and, at step 1, the expectations of the
              // reconstruction (the squared error reported as train RMSE).
              SoftmaxSampleRows(probs, v.n, K, VisibleUniforms(nb, s), vt,
                                step == 0 ? means : nullptr);
              for (int64_t r = 0; r < v.n; ++r) {
                rows[r] = a_.row(p_.Row(v.items[r], vt[r])).data();
              }
              kernels::SumRows(zeros_.data(), rows, v.n, C_, at.data());
              if (step == 0) {
                double sq = 0;
                for (int64_t r = 0; r < v.n; ++r) {
                  const double d = means[r] - v.ks[r];
                  sq += d * d;
                }
                sq_err_[s] = sq;
              }
              ht = p_.c.transpose();
              ht.noalias() += at * bm_;
              SigmoidInPlace(ht.data(), F);
              if (step + 1 < cd_steps) SampleHidden(nb, s, ht.data());
            }
            g0_.row(si).noalias() = (bm_ * h0.transpose()).transpose();
            gt_.row(si).noalias() = (bm_ * ht.transpose()).transpose();
          }
        },
        work_cost_.data(), kPiecesPerThread);
  }

  // The step of one batch item under ordinal sharing (TrainOptions::ordinal):
  // the item's rows are W^k = U^0 + ... + U^k (and b^k likewise), and the
  // momentum and weight-decay step is taken on U (kernels::OrdinalRows; the
  // biases take no decay). g holds the item's gradient rows whose bits are
  // set in `touched` (gb the bias gradients). All K rows of the item move: a
  // rating k also pulls the levels above it.
  void OrdinalStep(RowMatrixXf& w, int32_t item, const float* g,
                   const float* gb, const uint64_t* touched, float scale,
                   float decay) {
    const int K = p_.K;
    const int64_t row0 = p_.Row(item, 0);
    kernels::OrdinalRows(w.row(row0).data(), vel_w_.row(row0).data(), g,
                         touched, K, static_cast<int>(w.cols()), o_.momentum,
                         scale, decay);
    // The item's K visible biases are the same step with one "hidden unit"
    // and no decay.
    kernels::OrdinalRows(p_.b.data() + row0, vel_b_.data() + row0, gb, touched,
                         K, 1, o_.momentum, scale, 0.0f);
  }

  // Phase B: the update, item by item in parallel (an item's K rows are
  // its own). For batch item i, each of its batch ratings (user s, rating
  // k, sample vt) adds h0[s] to the gradient of row (i, k) and subtracts
  // hT[s] from row (i, vt), in batch order with the positive term first:
  // the order the terms had when they were summed over the whole batch, so
  // the sums are the same bits whatever the thread count. Every row that got
  // a term then takes the momentum + weight-decay step, with its visible
  // bias; rows without a term in this batch keep their weights and velocity
  // (sparse momentum), so the cost follows the batch's ratings, not m*K.
  // Last, the hidden biases. With TrainOptions::ordinal the step is
  // OrdinalStep's instead. The factored RBM steps A's rows the same way
  // with g0_ / gt_ (B h0, B hT: the gradient of W times B^T) in place of
  // h0 / hT, then B with A^T times the gradient of W: the sum over the
  // batch of a0 h0^T - at hT^T, scaled by lr / (the batch's ratings) rather
  // than lr / nb, as every rating adds to it (with lr / nb it moved W so
  // fast that training stalled at the biases' RMSE or diverged on ML-1M).
  void Update(size_t nb, float lr) {
    const int K = p_.K;
    const bool factored = C_ > 0;
    RowMatrixXf& w = factored ? a_ : p_.W;
    const RowMatrixXf& pos = factored ? g0_ : h0_;
    const RowMatrixXf& neg = factored ? gt_ : ht_;
    const int width = static_cast<int>(w.cols());
    const float mom = o_.momentum, decay = lr * o_.weight_decay;
    const int64_t n_items = static_cast<int64_t>(batch_items_.size());
    const float batch_scale = lr / static_cast<float>(nb);
    // The step of B and of the hidden biases, which no item's step reads
    // or writes: factored, it is the loop's last piece of work, so it runs
    // beside the items' steps (its cost: ~nb * F / 4 entries' worth).
    auto global_step = [&]() {
      const Eigen::Index nbi = static_cast<Eigen::Index>(nb);
      if (factored) {
        db_.noalias() = a0_.topRows(nbi).transpose() * h0_.topRows(nbi);
        db_.noalias() -= at_.topRows(nbi).transpose() * ht_.topRows(nbi);
        const float b_scale = lr / static_cast<float>(local_start_[nb]);
        vel_bm_ = mom * vel_bm_ + b_scale * db_ - decay * bm_;
        bm_ += vel_bm_;
      }
      gc_.setZero(p_.F);
      for (size_t s = 0; s < nb; ++s) {
        gc_ += h0_.row(static_cast<Eigen::Index>(s)).transpose() -
               ht_.row(static_cast<Eigen::Index>(s)).transpose();
      }
      vel_c_ = mom * vel_c_ + batch_scale * gc_;
      p_.c += vel_c_;
    };
    const int64_t n_work = factored ? n_items + 1 : n_items;
    const int64_t* cost = item_cost_.data();
    if (factored) {
      work_cost_.assign(item_cost_.begin(), item_cost_.end());
      work_cost_.push_back(item_cost_.back() +
                           static_cast<int64_t>(nb) * p_.F / 4);
      cost = work_cost_.data();
    }
    pool_.ParallelFor(
        n_work,
        [&](int thread, int64_t b, int64_t e) {
          float* g = scratch_[static_cast<size_t>(thread)].grad.data();
          float gb[256];
          for (int64_t x = b; x < e; ++x) {
            if (x == n_items) {
              global_step();
              continue;
            }
            const int32_t item = batch_items_[static_cast<size_t>(x)];
            const int64_t q0 = entry_start_[static_cast<size_t>(x)];
            const int64_t q1 = entry_start_[static_cast<size_t>(x) + 1];
            if (o_.ordinal && x + 1 < e && x + 1 < n_items) {
              // The next item's K rows of W and of their velocities, all
              // of which OrdinalStep reads and writes: ask for them while
              // this item's gradients are summed (most miss the cache).
              const int64_t next =
                  p_.Row(batch_items_[static_cast<size_t>(x) + 1], 0);
              const char* wn =
                  reinterpret_cast<const char*>(w.row(next).data());
              const char* vn =
                  reinterpret_cast<const char*>(vel_w_.row(next).data());
              const int64_t bytes = static_cast<int64_t>(K) * width * 4;
              for (int64_t off = 0; off < bytes; off += 64) {
                __builtin_prefetch(wn + off, 1);
                __builtin_prefetch(vn + off, 1);
              }
            }
            uint64_t touched[4] = {0, 0, 0, 0};  // bit k: row (item, k)
            auto touch = [&](int k) {
              float* gk = g + static_cast<int64_t>(k) * width;
              if (!(touched[k >> 6] >> (k & 63) & 1)) {
                touched[k >> 6] |= uint64_t{1} << (k & 63);
                for (int j = 0; j < width; ++j) gk[j] = 0.0f;
                gb[k] = 0.0f;
              }
              return gk;
            };
            for (int64_t q = q0; q < q1; ++q) {
              const Entry& en = entries_[static_cast<size_t>(q)];
              const int kp = en.k;
              const int kn = factored ? vt_[static_cast<size_t>(en.r)]
                                      : vt_entry_[static_cast<size_t>(q)];
              float* gp = touch(kp);
              const float* hp = pos.row(en.s).data();
              for (int j = 0; j < width; ++j) gp[j] += hp[j];
              gb[kp] += 1.0f;
              float* gn = touch(kn);
              const float* hn = neg.row(en.s).data();
              for (int j = 0; j < width; ++j) gn[j] -= hn[j];
              gb[kn] -= 1.0f;
            }
            const float n = o_.per_item_normalize ? static_cast<float>(q1 - q0)
                                                  : static_cast<float>(nb);
            const float scale = lr / n;
            if (o_.ordinal) {
              OrdinalStep(w, item, g, gb, touched, scale, decay);
              continue;
            }
            for (int k = 0; k < K; ++k) {
              if (!(touched[k >> 6] >> (k & 63) & 1)) continue;
              const int64_t row = p_.Row(item, k);
              const float* gk = g + static_cast<int64_t>(k) * width;
              float* wr = w.row(row).data();
              float* vw = vel_w_.row(row).data();
              for (int j = 0; j < width; ++j) {
                vw[j] = mom * vw[j] + scale * gk[j] - decay * wr[j];
                wr[j] += vw[j];
              }
              vel_b_[row] = mom * vel_b_[row] + scale * gb[k];
              p_.b[row] += vel_b_[row];
            }
          }
        },
        cost, kPiecesPerThread);
    if (!factored) global_step();
  }

  const SparseRatings& train_;
  const SparseRatings& valid_;
  const TrainOptions& o_;
  // TrainOptions::factors: C > 0 trains W = A B (a_ is A, bm_ is B; vel_w_
  // is then A's velocity, and p_.W is set to A B after every epoch).
  const int C_;
  ThreadPool pool_;
  RbmParams p_;
  RowMatrixXf vel_w_, h0_, ht_, hs_;
  RowMatrixXf a_, bm_, vel_bm_, db_, a0_, at_, g0_, gt_;
  std::vector<float> zeros_;  // C zeros (SumRows' start)
  RowMatrixXf x_avg_;  // AveragedValidationRmse: the average's hidden inputs
  // ExactValidation: the validation ratings by item, the items' costs, and
  // per case its hidden input, exp of it and whether that is in range.
  SparseRatings valid_by_item_;
  std::vector<int64_t> item_cost_valid_;
  // ex_mode_[u]: kExpPlain (ex_ row is exp(x)), kExpSaturated (ex_ and
  // hi_ row hi_slot_[u] from SplitSaturated) or kExpSlow (SoftplusSum).
  enum : uint8_t { kExpSlow, kExpPlain, kExpSaturated };
  RowMatrixXf xv_, ex_, hi_;
  std::vector<uint8_t> ex_mode_;
  std::vector<int32_t> hi_slot_;
  std::vector<int64_t> work_cost_;  // cumulative costs of a parallel loop
  Eigen::VectorXf vel_b_, vel_c_, gc_;
  std::vector<Scratch> scratch_;
  std::vector<uint8_t> vt_;
  std::vector<double> sq_err_;
  // BatchChains' state: the batch's items (by id) and each
  // item's slot in that list (-1 outside a batch); the batch's ratings by
  // item (entries_[entry_start_[t] ..) for batch item t, in batch order);
  // each batch user's first batch-local rating position; the users' random
  // streams, the step's uniforms and the squared reconstruction errors.
  struct Entry {
    int32_t s;  // batch position of the user
    uint8_t k;  // the rating (train_.k[r], here so Update need not load it)
    int64_t r;  // index of the rating in train_
  };
  std::vector<int32_t> batch_items_, item_slot_;
  std::vector<int32_t> item_count_;  // IndexItems' counts (zero between)
  std::vector<int64_t> entry_start_, entry_fill_, local_start_;
  std::vector<Entry> entries_;
  std::vector<Rng> rngs_;
  std::vector<float> uniforms_;
  // Step 2 writes its samples and squared errors by entry (vt_entry_, d2_:
  // each thread's items are one contiguous range, so the threads never
  // write the same cache line); step 3 copies the samples to the
  // user-major vt_ through entry_of_ (batch-local rating -> entry).
  std::vector<double> d2_;
  std::vector<uint8_t> vt_entry_;
  std::vector<int64_t> entry_of_;
  std::vector<int64_t> item_cost_;  // cumulative cost of the batch's items
};

}  // namespace

absl::StatusOr<TrainResult> TrainRbm(const SparseRatings& by_user, int K,
                                     const TrainOptions& o,
                                     const ProgressFn& progress) {
  if (absl::Status s = ValidateTrainOptions(o); !s.ok()) return s;
  SparseRatings train, valid;
  CarveValidation(by_user, o.validation_fraction, o.seed, &train, &valid);
  return TrainRbmSplit(train, valid, K, o, progress);
}

absl::StatusOr<TrainResult> TrainRbmSplit(const SparseRatings& train,
                                          const SparseRatings& valid, int K,
                                          const TrainOptions& options,
                                          const ProgressFn& progress,
                                          ThreadShare* share) {
  if (absl::Status s = ValidateTrainOptions(options); !s.ok()) return s;
  const TrainOptions o = ResolveTrainOptions(options, train.nnz());
  if (train.rows != valid.rows || train.cols != valid.cols) {
    return absl::InvalidArgumentError(
        "training and validation parts differ in shape");
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
  const auto t0 = Clock::now();
  TrainResult result;
  result.train_ratings = train.nnz();
  result.valid_ratings = valid.nnz();
  const int threads =
      o.threads > 0
          ? o.threads
          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  CdTrainer trainer(train, valid, K, o, threads,
                    share != nullptr ? share->total : threads);
  const bool have_valid = valid.nnz() > 0;
  double best = std::numeric_limits<double>::infinity();
  // Early stopping counts epochs since the validation RMSE last fell by at
  // least min_improvement (relative) below `anchor`; the best model is kept
  // whenever it falls at all.
  double anchor = best;
  int since_best = 0;
  int adaptive_level = 0;
  float lr = o.learning_rate;
  // The running average of the parameters (TrainOptions::average).
  RbmParams avg;
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
    const RbmParams* served = &trainer.params();
    if (o.average > 0) {
      const RbmParams& p = trainer.params();
      if (epoch == 1) {
        avg = p;
      } else {
        const float a = o.average, fresh = 1 - o.average;
        avg.W = a * avg.W + fresh * p.W;
        avg.b = a * avg.b + fresh * p.b;
        avg.c = a * avg.c + fresh * p.c;
      }
      served = &avg;
    }
    st.valid_rmse = !have_valid     ? st.train_rmse
                    : o.average > 0 ? trainer.AveragedValidationRmse(
                                          avg, o.average, epoch == 1)
                                    : trainer.ValidationRmse(*served);
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
      result.params = *served;
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
  if (result.best_epoch == 0) {
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

}  // namespace

int64_t EstimateModelBytes(const DataShape& shape,
                           const TrainOptions& options) {
  const double K = shape.K;
  const double F =
      std::max(1, ResolveTrainOptions(options, shape.ratings).hidden);
  const double m = static_cast<double>(std::max<int64_t>(0, shape.items));
  const double n = static_cast<double>(std::max<int64_t>(0, shape.users));
  const double ensemble = std::max(1, options.ensemble);
  double floats = ensemble * RbmFloats(m, K, F);
  if (options.item_based) floats += RbmFloats(n, K, F) + m * F;
  floats +=
      RbmFloats(m, 1, RatedHiddenUnits(options, shape.users, shape.items));
  const double hist = m * K * 4;
  const double ids = (n + m) * (4 + shape.mean_id_bytes);
  return ClampBytes(floats * 4 + hist + ids + 4096);
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
  // One trainer over `rows` visible units and `cases` training cases.
  auto trainer = [&](double rows, double cases) {
    const double params = RbmFloats(rows, K, F) * 4;
    // The ratings of one mini-batch: batch_size cases of up to 8x the mean.
    const double batch_ratings =
        std::min(nnz, B * std::max(1.0, 8 * nnz / std::max(1.0, cases)));
    // Per rating of a batch: the item-major index (16), uniforms (4),
    // errors (8), per-item starts and costs (8), the entry of each rating
    // (8) and the samples by entry (1).
    constexpr double kPerBatchRating = 16 + 4 + 8 + 8 + 8 + 1;
    return 4 * params +     // params, momentum, best copy, average
           4 * B * F * 4 +  // h0, hT, hidden samples, uniforms
           batch_ratings * kPerBatchRating +
           T * ((F + K) * 4 * 2 +         // Gibbs and validation scratch
                K * F * 4 * 2 +           // an item's gradient rows, exps
                batch_ratings * K * 4) +  // reconstruction probabilities
           nnz +                          // sampled visible states
           rows * 4 +                     // batch slots of the visible units
           cases * F * 4 +     // the average's hidden inputs (factored)
           cases * F * 4 * 2;  // validation: hidden inputs and their exps
  };
  const double ensemble = std::max(1, options.ensemble);
  double bytes = ensemble * trainer(m, n);
  if (options.item_based) bytes += trainer(n, m);
  // The rated RBM: parameters, momentum, best copy and gradient rows, and
  // its dense mini-batch (visible data and reconstruction, 100 users).
  const double rated_f = RatedHiddenUnits(options, shape.users, shape.items);
  if (rated_f > 0) bytes += (4 * m * rated_f + 2 * 100 * m) * 4;
  // Ratings: the Dataset (12 bytes a rating), by-user and by-item sparse
  // copies of the whole set and of the train/validation parts (5 bytes a
  // rating each), the validation pass's per-user sums.
  bytes += nnz * (12 + 4 * 5) + (n + m) * 8 * 4;
  bytes += static_cast<double>(EstimateModelBytes(shape, options));
  return ClampBytes(bytes);
}

}  // namespace rbmrec
