#include "core/rbm.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/kernels.h"

namespace rbmrec {

void RbmParams::Resize(int32_t m, int32_t k, int32_t f) {
  num_items = m;
  K = k;
  F = f;
  W.setZero(static_cast<Eigen::Index>(m) * k, f);
  b.setZero(static_cast<Eigen::Index>(m) * k);
  c.setZero(f);
  D.resize(0, 0);
}

bool RbmParams::operator==(const RbmParams& o) const {
  return num_items == o.num_items && K == o.K && F == o.F && W == o.W &&
         b == o.b && c == o.c && D == o.D;
}

void HiddenInput(const RbmParams& p, const VisibleSet& v, float* x) {
  constexpr int64_t kChunk = 64;
  const float* rows[kChunk];
  const float* base = p.c.data();
  // Sums in chunks of rows so the row pointers stay on the stack; the first
  // chunk starts from c, later ones from the running sum.
  int64_t r = 0;
  do {
    const int64_t n = std::min<int64_t>(kChunk, v.n - r);
    for (int64_t t = 0; t < n; ++t) {
      rows[t] = p.W.row(p.Row(v.items[r + t], v.ks[r + t])).data();
    }
    kernels::SumRows(base, rows, n, p.F, x);
    base = x;
    r += n;
  } while (r < v.n);
  if (p.conditional()) ConditionalSum(p, v, x, x);
}

void ConditionalSum(const RbmParams& p, const VisibleSet& v, const float* base,
                    float* x) {
  constexpr int64_t kChunk = 64;
  const float* rows[kChunk];
  // The rated items, then the extra ones, in chunks as HiddenInput's.
  int64_t r = 0;
  const int64_t total = v.n + v.n_extra;
  do {
    const int64_t n = std::min<int64_t>(kChunk, total - r);
    for (int64_t t = 0; t < n; ++t) {
      const int64_t at = r + t;
      rows[t] = p.D.row(at < v.n ? v.items[at] : v.extra[at - v.n]).data();
    }
    kernels::SumRows(base, rows, n, p.F, x);
    base = x;
    r += n;
  } while (r < total);
}

void SigmoidInPlace(float* x, int F) {
  // 1/(1+exp(-x)) is stable in float: exp(-x) overflows to inf -> 0.
  // Eigen vectorises exp, but over an unaligned array it takes the elements
  // before the first aligned one with the scalar exp, whose last bit can
  // differ from the vector one's: the result would depend on where x lives
  // (a std::vector's 16-byte alignment varies with the heap). Blocks of 64
  // through an aligned buffer make each element's arithmetic depend only on
  // its index.
  constexpr int kBlock = 64;
  alignas(64) float buf[kBlock];
  for (int j0 = 0; j0 < F; j0 += kBlock) {
    const int n = std::min(kBlock, F - j0);
    std::copy(x + j0, x + j0 + n, buf);
    Eigen::Map<Eigen::ArrayXf, Eigen::Aligned64> a(buf, n);
    a = 1.0f / (1.0f + (-a).exp());
    std::copy(buf, buf + n, x + j0);
  }
}

void VisibleLogits(const RbmParams& p, int32_t item, const float* h,
                   float* logits) {
  const int64_t row0 = p.Row(item, 0);
  kernels::RowDots(p.W.row(row0).data(), p.b.data() + row0, p.K, p.F, h,
                   logits);
}

template <typename T>
static void SoftmaxImpl(T* z, int n) {
  T mx = z[0];
  for (int i = 1; i < n; ++i) mx = std::max(mx, z[i]);
  T sum = 0;
  for (int i = 0; i < n; ++i) {
    z[i] = std::exp(z[i] - mx);
    sum += z[i];
  }
  const T inv = T(1) / sum;
  for (int i = 0; i < n; ++i) z[i] *= inv;
}

#ifdef RBMREC_AVX2
// exp of 8 lanes; pexp clamps its input near -88, below which exp underflows
// to 0 (so those lanes are masked to exactly 0).
static inline __m256 Exp8(__m256 x) {
  return _mm256_and_ps(Eigen::internal::pexp(x),
                       _mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_GT_OQ));
}
#endif

void SoftmaxInPlace(float* z, int n) {
#ifdef RBMREC_AVX2
  if (n <= 8) {
    // One 8-lane vector exp instead of n scalar calls; the unused lanes hold
    // a very negative number and are ignored.
    alignas(32) float buf[8];
    float mx = z[0];
    for (int i = 1; i < n; ++i) mx = std::max(mx, z[i]);
    for (int i = 0; i < 8; ++i) buf[i] = i < n ? z[i] - mx : -100.0f;
    _mm256_store_ps(buf, Exp8(_mm256_load_ps(buf)));
    float sum = 0;
    for (int i = 0; i < n; ++i) sum += buf[i];
    const float inv = 1.0f / sum;
    for (int i = 0; i < n; ++i) z[i] = buf[i] * inv;
    return;
  }
#endif
  SoftmaxImpl(z, n);
}
void SoftmaxInPlace(double* z, int n) { SoftmaxImpl(z, n); }

#ifdef RBMREC_AVX2
// Softmax of eight rows at once, one row per lane: gathers column k of the
// rows starting at `base` (row stride K, `idx` = lane * K) into v[k] and
// does exactly SoftmaxInPlace's arithmetic lane-wise (max, exp(z - max), the
// sum in k order, 1/sum, the products), leaving the probabilities in v.
// REQUIRES K <= 8.
static inline void SoftmaxLanes8(const float* base, __m256i idx, int K,
                                 __m256* v) {
  v[0] = _mm256_i32gather_ps(base, idx, 4);
  __m256 mx = v[0];
  for (int k = 1; k < K; ++k) {
    v[k] = _mm256_i32gather_ps(base + k, idx, 4);
    // std::max(mx, z) keeps mx unless mx < z.
    mx = _mm256_blendv_ps(mx, v[k], _mm256_cmp_ps(mx, v[k], _CMP_LT_OQ));
  }
  __m256 sum = _mm256_setzero_ps();
  for (int k = 0; k < K; ++k) {
    v[k] = Exp8(_mm256_sub_ps(v[k], mx));
    sum = _mm256_add_ps(sum, v[k]);
  }
  const __m256 inv = _mm256_div_ps(_mm256_set1_ps(1.0f), sum);
  for (int k = 0; k < K; ++k) v[k] = _mm256_mul_ps(v[k], inv);
}

static inline __m256i LaneRowOffsets(int K) {
  return _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                            _mm256_set1_epi32(K));
}
#endif

void SoftmaxRows(float* z, int64_t rows, int K) {
  int64_t r = 0;
#ifdef RBMREC_AVX2
  if (K <= 8) {
    const __m256i idx = LaneRowOffsets(K);
    __m256 v[8];
    alignas(32) float out[8];
    for (; r + 8 <= rows; r += 8) {
      float* base = z + r * K;
      SoftmaxLanes8(base, idx, K, v);
      for (int k = 0; k < K; ++k) {
        _mm256_store_ps(out, v[k]);
        for (int l = 0; l < 8; ++l) base[l * K + k] = out[l];
      }
    }
  }
#endif
  for (; r < rows; ++r) SoftmaxInPlace(z + r * K, K);
}

void SoftmaxSampleRows(float* z, int64_t rows, int K, const float* u,
                       uint8_t* sample, double* mean) {
  int64_t r = 0;
#ifdef RBMREC_AVX2
  if (K <= 8) {
    const __m256i idx = LaneRowOffsets(K);
    __m256 v[8];
    alignas(32) int32_t drawn[8];
    alignas(32) double m[8];
    for (; r + 8 <= rows; r += 8) {
      SoftmaxLanes8(z + r * K, idx, K, v);
      // SampleCategorical returns the first k < K-1 with u < acc_k, else
      // K-1; acc_k never decreases (sums of non-negative floats), so that
      // is the number of k < K-1 with u >= acc_k: one compare per level.
      const __m256 uu = _mm256_loadu_ps(u + r);
      __m256 acc = _mm256_setzero_ps();
      __m256i count = _mm256_setzero_si256();
      for (int k = 0; k + 1 < K; ++k) {
        acc = _mm256_add_ps(acc, v[k]);
        // A true compare is all ones, -1 as an integer.
        count = _mm256_sub_epi32(
            count, _mm256_castps_si256(_mm256_cmp_ps(uu, acc, _CMP_GE_OQ)));
      }
      _mm256_store_si256(reinterpret_cast<__m256i*>(drawn), count);
      for (int l = 0; l < 8; ++l)
        sample[r + l] = static_cast<uint8_t>(drawn[l]);
      if (mean != nullptr) {
        // The scalar sum's arithmetic lane by lane: a product, then an add
        // (no fused multiply-add), in double.
        __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
        for (int k = 0; k < K; ++k) {
          const __m256d kk = _mm256_set1_pd(static_cast<double>(k));
          lo = _mm256_add_pd(
              lo,
              _mm256_mul_pd(kk, _mm256_cvtps_pd(_mm256_castps256_ps128(v[k]))));
          hi = _mm256_add_pd(
              hi, _mm256_mul_pd(
                      kk, _mm256_cvtps_pd(_mm256_extractf128_ps(v[k], 1))));
        }
        _mm256_store_pd(m, lo);
        _mm256_store_pd(m + 4, hi);
        for (int l = 0; l < 8; ++l) mean[r + l] = m[l];
      }
    }
  }
#endif
  for (; r < rows; ++r) {
    float* p = z + r * K;
    SoftmaxInPlace(p, K);
    sample[r] = static_cast<uint8_t>(SampleCategorical(p, K, u[r]));
    if (mean != nullptr) {
      double s = 0;
      for (int k = 0; k < K; ++k) s += static_cast<double>(k) * p[k];
      mean[r] = s;
    }
  }
}

void SoftmaxDotRows(const float* z, int64_t rows, int K, const float* values,
                    float* out) {
  int64_t r = 0;
#ifdef RBMREC_AVX2
  if (K <= 8) {
    const __m256i idx = LaneRowOffsets(K);
    __m256 v[8];
    for (; r + 8 <= rows; r += 8) {
      SoftmaxLanes8(z + r * K, idx, K, v);
      __m256 dot = _mm256_setzero_ps();
      for (int k = 0; k < K; ++k) {
        dot =
            _mm256_add_ps(dot, _mm256_mul_ps(v[k], _mm256_set1_ps(values[k])));
      }
      _mm256_storeu_ps(out + r, dot);
    }
  }
#endif
  std::vector<float> p;  // the rows left over (< 8 with AVX2)
  if (r < rows) p.resize(static_cast<size_t>(K));
  for (; r < rows; ++r) {
    std::copy(z + r * K, z + (r + 1) * K, p.begin());
    SoftmaxInPlace(p.data(), K);
    float dot = 0;
    for (int k = 0; k < K; ++k) dot += p[static_cast<size_t>(k)] * values[k];
    out[r] = dot;
  }
}

double FreeEnergy(const RbmParams& p, const VisibleSet& v) {
  Eigen::VectorXf x(p.F);
  HiddenInput(p, v, x.data());
  double fe = 0;
  for (int64_t r = 0; r < v.n; ++r) fe -= p.b[p.Row(v.items[r], v.ks[r])];
  for (int j = 0; j < p.F; ++j) fe -= Softplus(static_cast<double>(x[j]));
  return fe;
}

#ifdef RBMREC_AVX2
// exp(x) for x <= 0, 8 lanes: Cephes' expf (range reduction by ln 2, degree-6
// polynomial, ~1 ulp) without the special cases Eigen's pexp handles: the
// input is clamped to -87, where 2^n stays a normal float, and exp(-87) ~
// 1.6e-38 stands in for anything smaller (SoftplusSum adds it to 1).
static inline __m256 ExpNonPositive8(__m256 x) {
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
  const __m256 n =
      _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 y = _mm256_set1_ps(1.9875691500e-4f);
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
  y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r),
                      _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e = _mm256_slli_epi32(
      _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}
#endif

float SoftplusSum(const float* x, const float* w, int F) {
#ifdef RBMREC_AVX2
  // Lane-wise relu += max(t, 0) and prod *= 1 + exp(-|t|) in two
  // independent chains; blocks of 112 elements keep the product of all
  // lanes' factors (each in (1, 2]) below 2^112.
  constexpr int kBlock = 112;  // a multiple of 16
  const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  auto factor = [&](__m256 t) {  // 1 + exp(-|t|)
    return _mm256_add_ps(one, ExpNonPositive8(_mm256_or_ps(t, sign)));
  };
  __m256 relu0 = zero, relu1 = zero;
  float logs = 0;
  for (int j0 = 0; j0 < F; j0 += kBlock) {
    const int end = std::min(F, j0 + kBlock);
    __m256 prod0 = one, prod1 = one;
    int j = j0;
    for (; j + 16 <= end; j += 16) {
      const __m256 t0 =
          _mm256_add_ps(_mm256_loadu_ps(x + j), _mm256_loadu_ps(w + j));
      const __m256 t1 =
          _mm256_add_ps(_mm256_loadu_ps(x + j + 8), _mm256_loadu_ps(w + j + 8));
      relu0 = _mm256_add_ps(relu0, _mm256_max_ps(t0, zero));
      relu1 = _mm256_add_ps(relu1, _mm256_max_ps(t1, zero));
      prod0 = _mm256_mul_ps(prod0, factor(t0));
      prod1 = _mm256_mul_ps(prod1, factor(t1));
    }
    for (; j < end; j += 8) {
      // A masked last vector: unused lanes get t = -100 (factor 1, relu 0).
      const __m256i mask =
          _mm256_cmpgt_epi32(_mm256_set1_epi32(end - j),
                             _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
      __m256 t = _mm256_add_ps(_mm256_maskload_ps(x + j, mask),
                               _mm256_maskload_ps(w + j, mask));
      t = _mm256_blendv_ps(_mm256_set1_ps(-100.0f), t,
                           _mm256_castsi256_ps(mask));
      relu0 = _mm256_add_ps(relu0, _mm256_max_ps(t, zero));
      prod0 = _mm256_mul_ps(prod0, factor(t));
    }
    alignas(32) float p[8];
    _mm256_store_ps(p, _mm256_mul_ps(prod0, prod1));
    logs += std::log(p[0] * p[1] * p[2] * p[3] * p[4] * p[5] * p[6] * p[7]);
  }
  return kernels::HorizontalSum(_mm256_add_ps(relu0, relu1)) + logs;
#else
  constexpr int kBlock = 120;
  float relu = 0, logs = 0;
  for (int j0 = 0; j0 < F; j0 += kBlock) {
    const int n = std::min(kBlock, F - j0);
    Eigen::Map<const Eigen::ArrayXf> xs(x + j0, n), ws(w + j0, n);
    // Eigen fuses each expression into one vectorised pass (no temporaries).
    relu += (xs + ws).max(0.0f).sum();
    logs += std::log((1.0f + (-(xs + ws).abs()).exp()).prod());
  }
  return relu + logs;
#endif
}

void PredictExact(const RbmParams& p, const float* x, int32_t q, float* probs) {
  const int64_t row0 = p.Row(q, 0);
  for (int k = 0; k < p.K; ++k) {
    probs[k] = p.b[row0 + k] + SoftplusSum(x, p.W.row(row0 + k).data(), p.F);
  }
  SoftmaxInPlace(probs, p.K);
}

void RefreshExpWeights(const RbmParams& p, int64_t from, int64_t to,
                       ExpWeights* e) {
  if (e->ew.cols() == p.W.cols() && e->ew.rows() < p.W.rows()) {
    // Rows added (new items): the old ones are kept.
    const int64_t old_rows = e->ew.rows();
    e->ew.conservativeResize(p.W.rows(), p.W.cols());
    e->ok.resize(static_cast<size_t>(p.W.rows()), 0);
    from = std::min(from, old_rows);
    to = p.W.rows();
  } else if (e->ew.rows() != p.W.rows() || e->ew.cols() != p.W.cols()) {
    e->ew.resize(p.W.rows(), p.W.cols());
    e->ok.assign(static_cast<size_t>(p.W.rows()), 0);
    from = 0;
    to = p.W.rows();
  }
  from = std::max<int64_t>(0, from);
  to = std::min<int64_t>(to, p.W.rows());
  for (int64_t r = from; r < to; ++r) {
    const float* w = p.W.row(r).data();
    float* ew = e->ew.row(r).data();
    bool ok = true;
    for (int j = 0; j < p.F; ++j) {
      ok = ok && std::abs(w[j]) <= kSaturatedRowLimit;
      ew[j] =
          std::exp(std::clamp(w[j], -kSaturatedRowLimit, kSaturatedRowLimit));
    }
    e->ok[static_cast<size_t>(r)] = ok ? 1 : 0;
  }
}

void SetExpInput(const float* x, int F, ExpInput* in) {
  // exp through an aligned buffer in blocks, so each element's bits depend
  // only on its value (as SigmoidInPlace's).
  in->ex.resize(static_cast<size_t>(F));
  float hi_x = -std::numeric_limits<float>::infinity();
  for (int j = 0; j < F; ++j) hi_x = std::max(hi_x, x[j]);
  constexpr int kBlock = 64;
  alignas(64) float buf[kBlock];
  for (int j0 = 0; j0 < F; j0 += kBlock) {
    const int n = std::min(kBlock, F - j0);
    for (int t = 0; t < n; ++t) {
      buf[t] = std::clamp(x[j0 + t], -kExpSoftplusLimit, kExpSoftplusLimit);
    }
    Eigen::Map<Eigen::ArrayXf, Eigen::Aligned64> a(buf, n);
    a = a.exp();
    for (int t = 0; t < n; ++t) {
      in->ex[static_cast<size_t>(j0 + t)] =
          std::abs(x[j0 + t]) > kExpSoftplusLimit ? 0.0f : buf[t];
    }
  }
  in->hi_sum = 0;
  in->hi.clear();
  if (hi_x <= kExpSoftplusLimit) return;
  for (int j = 0; j < F; ++j) {
    if (x[j] > kExpSoftplusLimit) {
      in->hi.push_back(j);
      in->hi_sum += x[j];
    }
  }
}

namespace {

// Row r's exact logit from its product mantissa x 2^exp2 (e.ok[r]).
float LogitFromProduct(const RbmParams& p, const ExpInputView& in, int64_t r,
                       double product, int64_t exp2) {
  const float* w = p.W.row(r).data();
  // The product's mantissa is in [1, 2^8): its log in float is as accurate
  // as SoftplusSum's.
  const float mantissa = static_cast<float>(product);
  double s = static_cast<double>(p.b[r]) + in.hi_sum +
             static_cast<double>(exp2) * 0.69314718055994531 +
             static_cast<double>(std::log(mantissa));
  for (int32_t t = 0; t < in.n_hi; ++t) s += static_cast<double>(w[in.hi[t]]);
  return static_cast<float>(s);
}

}  // namespace

float ExactLogit(const RbmParams& p, const ExpWeights& e,
                 const ExpInputView& in, const float* x, int64_t r) {
  if (e.ok[static_cast<size_t>(r)] == 0) {
    return p.b[r] + SoftplusSum(x, p.W.row(r).data(), p.F);
  }
  int64_t exp2 = 0;
  const double product =
      SoftplusProductFromExp(in.ex, e.ew.row(r).data(), p.F, &exp2);
  return LogitFromProduct(p, in, r, product, exp2);
}

void PredictExactFromExp(const RbmParams& p, const ExpWeights& e,
                         const ExpInputView& in, const float* x, int32_t q,
                         float* probs) {
  const int64_t row0 = p.Row(q, 0);
  // The item's rows with exp weights go through one interleaved product
  // (the same numbers as ExactLogit's, row by row).
  constexpr int kMaxRows = 16;
  const float* ew[kMaxRows];
  int64_t rows[kMaxRows];
  int n = 0;
  for (int k = 0; k < p.K; ++k) {
    const int64_t r = row0 + k;
    if (k < kMaxRows && e.ok[static_cast<size_t>(r)] != 0) {
      ew[n] = e.ew.row(r).data();
      rows[n++] = k;
    } else {
      probs[k] = ExactLogit(p, e, in, x, r);
    }
  }
  double product[kMaxRows];
  int64_t exp2[kMaxRows];
  SoftplusProductsFromExp(in.ex, ew, n, p.F, product, exp2);
  for (int t = 0; t < n; ++t) {
    const int64_t k = rows[t];
    probs[k] = LogitFromProduct(p, in, row0 + k, product[t], exp2[t]);
  }
  SoftmaxInPlace(probs, p.K);
}

void PredictMeanField(const RbmParams& p, const float* h_hat, int32_t q,
                      float* probs) {
  VisibleLogits(p, q, h_hat, probs);
  SoftmaxInPlace(probs, p.K);
}

double SplitSaturated(const float* x, int F, float* ex, float* hi) {
  double hi_sum = 0;
  for (int j = 0; j < F; ++j) {
    const bool saturated = std::abs(x[j]) > kExpSoftplusLimit;
    ex[j] = saturated ? 0.0f : std::exp(x[j]);
    hi[j] = x[j] > kExpSoftplusLimit ? 1.0f : 0.0f;
    if (hi[j] != 0) hi_sum += x[j];
  }
  return hi_sum;
}

double SoftplusProductFromExp(const float* ex, const float* ew, int F,
                              int64_t* exp2) {
  // Each factor 1 + ex ew is in [1, 1 + e^80] (< 2^116): eight products per
  // lane stay below 2^928, then the lanes' binary exponents move into
  // `exps` and their mantissas back to [1, 2).
  constexpr int kRenorm = 8;
#ifdef RBMREC_AVX2
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256i mantissa = _mm256_set1_epi64x(0x000fffffffffffffLL);
  const __m256i bias = _mm256_set1_epi64x(1023LL << 52);
  __m256d p0 = _mm256_set1_pd(1.0), p1 = _mm256_set1_pd(1.0);
  __m256i exps = _mm256_setzero_si256();
  auto renorm = [&](__m256d* p) {
    const __m256i bits = _mm256_castpd_si256(*p);
    exps = _mm256_add_epi64(exps, _mm256_sub_epi64(_mm256_srli_epi64(bits, 52),
                                                   _mm256_set1_epi64x(1023)));
    *p = _mm256_castsi256_pd(
        _mm256_or_si256(_mm256_and_si256(bits, mantissa), bias));
  };
  auto step = [&](__m256 f) {
    p0 = _mm256_mul_pd(p0, _mm256_cvtps_pd(_mm256_castps256_ps128(f)));
    p1 = _mm256_mul_pd(p1, _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1)));
  };
  int j = 0, n = 0;
  for (; j + 8 <= F; j += 8) {
    step(
        _mm256_fmadd_ps(_mm256_loadu_ps(ex + j), _mm256_loadu_ps(ew + j), one));
    if (++n == kRenorm) {
      renorm(&p0);
      renorm(&p1);
      n = 0;
    }
  }
  if (j < F) {
    // A masked last vector: unused lanes get the factor 1.
    const __m256i mask = _mm256_cmpgt_epi32(
        _mm256_set1_epi32(F - j), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    step(_mm256_fmadd_ps(_mm256_maskload_ps(ex + j, mask),
                         _mm256_maskload_ps(ew + j, mask), one));
  }
  renorm(&p0);
  renorm(&p1);
  // Eight mantissas in [1, 2): their product is below 2^8.
  alignas(32) double m[8];
  alignas(32) int64_t e[4];
  _mm256_store_pd(m, p0);
  _mm256_store_pd(m + 4, p1);
  _mm256_store_si256(reinterpret_cast<__m256i*>(e), exps);
  *exp2 = e[0] + e[1] + e[2] + e[3];
  return m[0] * m[1] * m[2] * m[3] * m[4] * m[5] * m[6] * m[7];
#else
  double prod = 1;
  int64_t exps = 0;
  int n = 0;
  for (int j = 0; j < F; ++j) {
    prod *= 1.0 + static_cast<double>(ex[j]) * static_cast<double>(ew[j]);
    if (++n == kRenorm || j + 1 == F) {
      int e = 0;
      prod = std::frexp(prod, &e);  // [0.5, 1): a mantissa in [1, 2) after
      prod *= 2;
      exps += e - 1;
      n = 0;
    }
  }
  *exp2 = exps;
  return prod;
#endif
}

#ifdef RBMREC_AVX2
namespace {

// SoftplusProductFromExp's AVX2 loop for R rows at once: each row's
// operations in the same order as alone, its chains interleaved with the
// other rows'.
template <int R>
void ProductsAvx2(const float* ex, const float* const* ew, int F,
                  double* mantissa, int64_t* exp2) {
  constexpr int kRenorm = 8;
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256i mantissa_bits = _mm256_set1_epi64x(0x000fffffffffffffLL);
  const __m256i bias = _mm256_set1_epi64x(1023LL << 52);
  __m256d p0[R], p1[R];
  __m256i exps[R];
  for (int r = 0; r < R; ++r) {
    p0[r] = p1[r] = _mm256_set1_pd(1.0);
    exps[r] = _mm256_setzero_si256();
  }
  auto renorm = [&](__m256d* p, __m256i* e) {
    const __m256i bits = _mm256_castpd_si256(*p);
    *e = _mm256_add_epi64(*e, _mm256_sub_epi64(_mm256_srli_epi64(bits, 52),
                                               _mm256_set1_epi64x(1023)));
    *p = _mm256_castsi256_pd(
        _mm256_or_si256(_mm256_and_si256(bits, mantissa_bits), bias));
  };
  auto step = [&](int r, __m256 f) {
    p0[r] = _mm256_mul_pd(p0[r], _mm256_cvtps_pd(_mm256_castps256_ps128(f)));
    p1[r] = _mm256_mul_pd(p1[r], _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1)));
  };
  int j = 0, n = 0;
  for (; j + 8 <= F; j += 8) {
    const __m256 x = _mm256_loadu_ps(ex + j);
    for (int r = 0; r < R; ++r) {
      step(r, _mm256_fmadd_ps(x, _mm256_loadu_ps(ew[r] + j), one));
    }
    if (++n == kRenorm) {
      for (int r = 0; r < R; ++r) {
        renorm(&p0[r], &exps[r]);
        renorm(&p1[r], &exps[r]);
      }
      n = 0;
    }
  }
  if (j < F) {
    const __m256i mask = _mm256_cmpgt_epi32(
        _mm256_set1_epi32(F - j), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const __m256 x = _mm256_maskload_ps(ex + j, mask);
    for (int r = 0; r < R; ++r) {
      step(r, _mm256_fmadd_ps(x, _mm256_maskload_ps(ew[r] + j, mask), one));
    }
  }
  for (int r = 0; r < R; ++r) {
    renorm(&p0[r], &exps[r]);
    renorm(&p1[r], &exps[r]);
    alignas(32) double m[8];
    alignas(32) int64_t e[4];
    _mm256_store_pd(m, p0[r]);
    _mm256_store_pd(m + 4, p1[r]);
    _mm256_store_si256(reinterpret_cast<__m256i*>(e), exps[r]);
    exp2[r] = e[0] + e[1] + e[2] + e[3];
    mantissa[r] = m[0] * m[1] * m[2] * m[3] * m[4] * m[5] * m[6] * m[7];
  }
}

}  // namespace
#endif

void SoftplusProductsFromExp(const float* ex, const float* const* ew, int R,
                             int F, double* mantissa, int64_t* exp2) {
  int r = 0;
#ifdef RBMREC_AVX2
  // Up to four rows together (eight product chains); five as three and two.
  while (r < R) {
    const int left = R - r;
    const int take = left == 5 ? 3 : std::min(left, 4);
    switch (take) {
      case 4:
        ProductsAvx2<4>(ex, ew + r, F, mantissa + r, exp2 + r);
        break;
      case 3:
        ProductsAvx2<3>(ex, ew + r, F, mantissa + r, exp2 + r);
        break;
      case 2:
        ProductsAvx2<2>(ex, ew + r, F, mantissa + r, exp2 + r);
        break;
      default:
        ProductsAvx2<1>(ex, ew + r, F, mantissa + r, exp2 + r);
        break;
    }
    r += take;
  }
#endif
  for (; r < R; ++r) {
    mantissa[r] = SoftplusProductFromExp(ex, ew[r], F, &exp2[r]);
  }
}

float SoftplusSumFromExp(const float* ex, const float* ew, int F) {
  int64_t exp2 = 0;
  const double prod = SoftplusProductFromExp(ex, ew, F, &exp2);
  return static_cast<float>(std::log(prod) +
                            static_cast<double>(exp2) * 0.69314718055994531);
}

double CdChain(const RbmParams& p, const VisibleSet& v, int T, Rng* rng,
               GibbsScratch* sc, float* h0, float* ht, uint8_t* vt) {
  const int F = p.F, K = p.K;
  HiddenInput(p, v, h0);
  SigmoidInPlace(h0, F);
  const float* hp = h0;
  const size_t need = static_cast<size_t>(v.n) * static_cast<size_t>(K);
  if (sc->probs.size() < need) sc->probs.resize(need);
  float* probs = sc->probs.data();
  double sq = 0;
  for (int step = 0; step < T; ++step) {
    for (int j = 0; j < F; ++j) sc->h[j] = rng->Uniform() < hp[j] ? 1.f : 0.f;
    // All the user's reconstruction logits, then their softmaxes eight rows
    // at a time (bit-identical to one SoftmaxInPlace per row), then the
    // draws in rating order.
    for (int64_t r = 0; r < v.n; ++r) {
      VisibleLogits(p, v.items[r], sc->h.data(), probs + r * K);
    }
    SoftmaxRows(probs, v.n, K);
    for (int64_t r = 0; r < v.n; ++r) {
      const float* pr = probs + r * K;
      vt[r] = static_cast<uint8_t>(SampleCategorical(pr, K, rng->Uniform()));
      if (step == 0) {
        double mean = 0;
        for (int k = 0; k < K; ++k) mean += static_cast<double>(k) * pr[k];
        const double d = mean - v.ks[r];
        sq += d * d;
      }
    }
    HiddenInput(p, VisibleSet{v.items, vt, v.n}, ht);
    SigmoidInPlace(ht, F);
    hp = ht;
  }
  return sq;
}

}  // namespace rbmrec
