// CdTrainer's validation RMSE after an epoch: mean-field or exact
// predictions (PredictExact's arithmetic through exponential products,
// ExactValidation), for the parameters or their running average (the
// factored RBM's averaged hidden inputs kept across epochs).

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/cd_trainer.h"
#include "core/kernels.h"

namespace rbmrec {
namespace internal {

double CdTrainer::ValidationRmse(const RbmParams& p) {
  return ValidationPass(
      p, [&](int32_t u, float* x) { HiddenInput(p, UserSet(u), x); });
}

void CdTrainer::AverageInputs(float a, bool first) {
  const int F = p_.F;
  if (first) x_avg_.setZero(valid_.rows, F);
  pool_.ParallelFor(valid_.rows, [&](int t, int64_t b, int64_t e) {
    Scratch& sc = scratch_[static_cast<size_t>(t)];
    for (int64_t u64 = b; u64 < e; ++u64) {
      const int32_t u = static_cast<int32_t>(u64);
      if (valid_.RowSize(u) == 0) continue;
      const VisibleSet v = UserSet(u);
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
        if (p_.conditional()) ConditionalSum(p_, v, x.data(), x.data());
      } else {
        sc.x = p_.c;
        sc.x.noalias() += bm_.transpose() * sc.z;
        if (p_.conditional()) {
          ConditionalSum(p_, v, sc.x.data(), sc.x.data());
        }
        x = a * x + (1 - a) * sc.x.transpose();
      }
    }
  });
}

double CdTrainer::AveragedValidationRmse(const RbmParams& avg, float a,
                                         bool first) {
  if (C_ == 0) return ValidationRmse(avg);
  AverageInputs(a, first);
  const int F = p_.F;
  const auto input = [&](int32_t u, float* x) {
    std::copy_n(x_avg_.row(u).data(), F, x);
  };
  // Exact, the inputs are read where they are kept (no copy in xv_).
  if (o_.predict == PredictMethod::kExact) {
    return ExactValidation(avg, input, &x_avg_);
  }
  return ValidationPass(avg, input);
}

double CdTrainer::CandidateValidationRmse(const RbmParams& avg, float a) {
  AverageInputs(a, false);
  const auto no_input = [](int32_t, float*) {};
  const int F = p_.F, K = p_.K;
  // The candidate's visible biases, as Average makes them.
  const float fresh = 1 - a;
  const Eigen::VectorXf b = a * avg.b + fresh * p_.b;
  const Eigen::Index rows = a_.rows(), block = FactorRows();
  const int64_t items = valid_by_item_.rows, per_block = block / K;
  const int64_t blocks = (items + per_block - 1) / per_block;
  std::vector<int64_t> cost(static_cast<size_t>(blocks) + 1, 0);
  for (int64_t k = 0; k < blocks; ++k) {
    const int64_t end = std::min(items, (k + 1) * per_block);
    cost[static_cast<size_t>(k) + 1] =
        item_cost_valid_[static_cast<size_t>(end)];
  }
  std::vector<double> per_item(static_cast<size_t>(items), 0);
  BeginExactPass();
  for (int32_t u0 = 0; u0 < valid_.rows; u0 += ExpChunk()) {
    const int32_t u1 = std::min(valid_.rows, u0 + ExpChunk());
    HiddenExponentials(no_input, &x_avg_, u0, u1);
    pool_.ParallelFor(
        blocks,
        [&](int t, int64_t kb, int64_t ke) {
          Scratch& s = scratch_[static_cast<size_t>(t)];
          s.one.Resize(1, K, F);
          for (int64_t k = kb; k < ke; ++k) {
            const int64_t i0 = k * per_block;
            const int64_t i1 = std::min(items, i0 + per_block);
            bool any = false;
            for (int64_t i = i0; i < i1 && !any; ++i) {
              any = ItemInChunk(static_cast<int32_t>(i), u1);
            }
            if (!any) continue;
            const Eigen::Index r0 = k * block;
            const Eigen::Index n = std::min(block, rows - r0);
            s.block.resize(n, F);
            AveragedRows(avg, a, r0, n, &s.wt, s.block.data());
            for (int64_t i = i0; i < i1; ++i) {
              const int32_t item = static_cast<int32_t>(i);
              if (!ItemInChunk(item, u1)) continue;
              s.one.W = s.block.middleRows((i - i0) * K, K);
              s.one.b = b.segment(i * K, K);
              ItemError(s.one, 0, item, &x_avg_, u1, &s,
                        &per_item[static_cast<size_t>(i)]);
            }
          }
        },
        cost.data(), kPiecesPerThread);
  }
  ex_ = RowMatrixXf();
  double sse = 0;
  for (double e : per_item) sse += e;
  return std::sqrt(sse /
                   static_cast<double>(std::max<int64_t>(1, valid_.nnz())));
}

template <typename Input>
double CdTrainer::ValidationPass(const RbmParams& p, const Input& input) {
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

double CdTrainer::SlowMean(const RbmParams& p, int32_t item, const float* x,
                           float* probs) const {
  PredictExact(p, x, item, probs);
  double mean = 0;
  for (int k = 0; k < p.K; ++k) mean += static_cast<double>(k) * probs[k];
  return mean;
}

double CdTrainer::ExpMean(const RbmParams& p, int64_t row0, int32_t u,
                          uint8_t mode, double b_top, Scratch* sc) const {
  const int K = p.K;
  const float* ex = ex_.row(u - ex_base_).data();
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
      l[k] += hi_.row(hi_slot_[static_cast<size_t>(u)]).dot(p.W.row(row0 + k));
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

int32_t CdTrainer::ExpChunk() const {
  const int64_t cases = exp_chunk_bytes_ / (int64_t{4} * p_.F);
  return static_cast<int32_t>(
      std::clamp<int64_t>(cases, 1, std::max<int32_t>(1, valid_.rows)));
}

void CdTrainer::BeginExactPass() {
  ex_mode_.assign(static_cast<size_t>(valid_.rows), kExpSlow);
  hi_slot_.assign(static_cast<size_t>(valid_.rows), -1);
  valid_cursor_.assign(valid_by_item_.offsets.begin(),
                       valid_by_item_.offsets.end() - 1);
}

template <typename Input>
void CdTrainer::HiddenExponentials(const Input& input,
                                   const RowMatrixXf* inputs, int32_t u0,
                                   int32_t u1) {
  const int F = p_.F;
  ex_base_ = u0;
  xv_.resize(inputs == nullptr ? u1 - u0 : 0, F);
  ex_.resize(u1 - u0, F);
  pool_.ParallelFor(u1 - u0, [&](int, int64_t b, int64_t e) {
    for (int64_t x = b; x < e; ++x) {
      const int32_t u = u0 + static_cast<int32_t>(x);
      if (valid_.RowSize(u) == 0) continue;
      if (inputs == nullptr) input(u, xv_.row(x).data());
      const Eigen::Map<const Eigen::ArrayXf> xs(InputRow(inputs, u), F);
      const float top = xs.abs().template maxCoeff<Eigen::PropagateNaN>();
      if (top <= kExpSoftplusLimit) {
        ex_mode_[static_cast<size_t>(u)] = kExpPlain;
        ex_.row(x).array() = xs.exp();
      } else if (top <= std::numeric_limits<float>::max()) {
        ex_mode_[static_cast<size_t>(u)] = kExpSaturated;
      }
    }
  });
  // The few saturated cases' exponentials and hi_ rows (hi_slot_[u]).
  int32_t n_hi = 0;
  for (int32_t u = u0; u < u1; ++u) {
    if (ex_mode_[static_cast<size_t>(u)] == kExpSaturated) {
      hi_slot_[static_cast<size_t>(u)] = n_hi++;
    }
  }
  hi_.resize(n_hi, F);
  for (int32_t u = u0; u < u1; ++u) {
    const int32_t slot = hi_slot_[static_cast<size_t>(u)];
    if (slot < 0) continue;
    SplitSaturated(InputRow(inputs, u), F, ex_.row(u - u0).data(),
                   hi_.row(slot).data());
  }
}

void CdTrainer::ItemError(const RbmParams& p, int32_t item_in_p, int32_t item,
                          const RowMatrixXf* inputs, int32_t u1, Scratch* s,
                          double* err_io) {
  const int F = p.F, K = p.K;
  const int64_t r0 = valid_cursor_[static_cast<size_t>(item)];
  int64_t r1 = r0;
  while (r1 < valid_by_item_.offsets[item + 1] &&
         valid_by_item_.col[static_cast<size_t>(r1)] < u1) {
    ++r1;
  }
  valid_cursor_[static_cast<size_t>(item)] = r1;
  if (r0 == r1) return;
  s->ew.resize(K, F);
  float* logits = s->logits.data();
  const int64_t row0 = p.Row(item_in_p, 0);
  float top = 0;
  for (int k = 0; k < K; ++k) {
    const auto w = p.W.row(row0 + k).array();
    top = std::max(top, w.abs().maxCoeff());
    s->ew.row(k).array() = w.exp();
  }
  const bool rows_ok = top <= kExpSoftplusLimit;
  const bool rows_tight = top <= kSaturatedRowLimit;
  // exp(b_k - max b) for the exponentials' path.
  double b_top = -std::numeric_limits<double>::infinity();
  for (int k = 0; k < K; ++k) {
    b_top = std::max(b_top, static_cast<double>(p.b[row0 + k]));
  }
  for (int k = 0; k < K; ++k) {
    s->eb[k] = std::exp(static_cast<double>(p.b[row0 + k]) - b_top);
  }
  double err = *err_io;
  for (int64_t r = r0; r < r1; ++r) {
    const int32_t u = valid_by_item_.col[static_cast<size_t>(r)];
    if (r + 1 < r1) {
      // The next rating's case's exponentials (most miss the cache):
      // asked for while this one's K products run.
      const char* next = reinterpret_cast<const char*>(
          ex_.row(valid_by_item_.col[static_cast<size_t>(r) + 1] - ex_base_)
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
        fast ? ExpMean(p, row0, u, mode, b_top, s)
             : SlowMean(p, item_in_p, InputRow(inputs, u), logits);
    const double d = mean - valid_by_item_.k[static_cast<size_t>(r)];
    err += d * d;
  }
  *err_io = err;
}

template <typename Input>
double CdTrainer::ExactValidation(const RbmParams& p, const Input& input,
                                  const RowMatrixXf* inputs) {
  std::vector<double> per_item(static_cast<size_t>(valid_by_item_.rows), 0);
  BeginExactPass();
  for (int32_t u0 = 0; u0 < valid_.rows; u0 += ExpChunk()) {
    const int32_t u1 = std::min(valid_.rows, u0 + ExpChunk());
    HiddenExponentials(input, inputs, u0, u1);
    pool_.ParallelFor(
        valid_by_item_.rows,
        [&](int t, int64_t b, int64_t e) {
          Scratch& s = scratch_[static_cast<size_t>(t)];
          for (int64_t i = b; i < e; ++i) {
            ItemError(p, static_cast<int32_t>(i), static_cast<int32_t>(i),
                      inputs, u1, &s, &per_item[static_cast<size_t>(i)]);
          }
        },
        item_cost_valid_.data());
  }
  ex_ = RowMatrixXf();
  xv_ = RowMatrixXf();
  double sse = 0;
  for (double e : per_item) sse += e;
  return std::sqrt(sse /
                   static_cast<double>(std::max<int64_t>(1, valid_.nnz())));
}

}  // namespace internal
}  // namespace rbmrec
