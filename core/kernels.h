#ifndef RBMREC_CORE_KERNELS_H_
#define RBMREC_CORE_KERNELS_H_

// The inner loops of training and prediction, written so the compiler keeps
// accumulators in registers: AVX2/FMA intrinsics when the build targets
// x86-64-v3 (RBMREC_ISA), plain loops otherwise. Each function's result
// depends only on its inputs (never on threads), so training stays
// deterministic for a given binary.

#include <cstdint>
#include <type_traits>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define RBMREC_AVX2 1
#endif

namespace rbmrec::kernels {

// x[0..F) = c[0..F) + sum over r < n of rows[r][0..F).
inline void SumRows(const float* c, const float* const* rows, int64_t n, int F,
                    float* x) {
  int j = 0;
#ifdef RBMREC_AVX2
  for (; j + 32 <= F; j += 32) {
    __m256 a0 = _mm256_loadu_ps(c + j), a1 = _mm256_loadu_ps(c + j + 8),
           a2 = _mm256_loadu_ps(c + j + 16), a3 = _mm256_loadu_ps(c + j + 24);
    for (int64_t r = 0; r < n; ++r) {
      const float* w = rows[r] + j;
      a0 = _mm256_add_ps(a0, _mm256_loadu_ps(w));
      a1 = _mm256_add_ps(a1, _mm256_loadu_ps(w + 8));
      a2 = _mm256_add_ps(a2, _mm256_loadu_ps(w + 16));
      a3 = _mm256_add_ps(a3, _mm256_loadu_ps(w + 24));
    }
    _mm256_storeu_ps(x + j, a0);
    _mm256_storeu_ps(x + j + 8, a1);
    _mm256_storeu_ps(x + j + 16, a2);
    _mm256_storeu_ps(x + j + 24, a3);
  }
  for (; j + 8 <= F; j += 8) {
    __m256 a0 = _mm256_loadu_ps(c + j);
    for (int64_t r = 0; r < n; ++r) {
      a0 = _mm256_add_ps(a0, _mm256_loadu_ps(rows[r] + j));
    }
    _mm256_storeu_ps(x + j, a0);
  }
#endif
  for (; j < F; ++j) {
    float a = c[j];
    for (int64_t r = 0; r < n; ++r) a += rows[r][j];
    x[j] = a;
  }
}

#ifdef RBMREC_AVX2
inline float HorizontalSum(__m256 v) {
  const __m128 lo = _mm256_castps256_ps128(v);
  const __m128 hi = _mm256_extractf128_ps(v, 1);
  __m128 s = _mm_add_ps(lo, hi);
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 0x55));
  return _mm_cvtss_f32(s);
}
#endif

// Calls fn(std::integral_constant<int, K>()) for 2 <= K <= 10, so that a
// kernel's K accumulators can live in registers; false for any other K.
template <typename Fn>
inline bool WithCompileTimeK(int K, Fn&& fn) {
  switch (K) {
    case 2:
      fn(std::integral_constant<int, 2>());
      return true;
    case 3:
      fn(std::integral_constant<int, 3>());
      return true;
    case 4:
      fn(std::integral_constant<int, 4>());
      return true;
    case 5:
      fn(std::integral_constant<int, 5>());
      return true;
    case 6:
      fn(std::integral_constant<int, 6>());
      return true;
    case 7:
      fn(std::integral_constant<int, 7>());
      return true;
    case 8:
      fn(std::integral_constant<int, 8>());
      return true;
    case 9:
      fn(std::integral_constant<int, 9>());
      return true;
    case 10:
      fn(std::integral_constant<int, 10>());
      return true;
    default:
      return false;
  }
}

#ifdef RBMREC_AVX2
// RowDots for a compile-time K, so the K accumulators live in registers.
template <int K>
inline void RowDotsK(const float* w, const float* bias, int F, const float* h,
                     float* out) {
  __m256 acc[K];
  for (int k = 0; k < K; ++k) acc[k] = _mm256_setzero_ps();
  int j = 0;
  for (; j + 8 <= F; j += 8) {
    const __m256 hv = _mm256_loadu_ps(h + j);
    for (int k = 0; k < K; ++k) {
      acc[k] = _mm256_fmadd_ps(_mm256_loadu_ps(w + k * F + j), hv, acc[k]);
    }
  }
  for (int k = 0; k < K; ++k) {
    float s = HorizontalSum(acc[k]);
    for (int jj = j; jj < F; ++jj) s += w[k * F + jj] * h[jj];
    out[k] = bias[k] + s;
  }
}
#endif

// out[k] = bias[k] + dot(w + k*F, h) for k < K: the K logits of one
// softmax visible unit (rows of W are contiguous, F floats each).
inline void RowDots(const float* w, const float* bias, int K, int F,
                    const float* h, float* out) {
#ifdef RBMREC_AVX2
  if (WithCompileTimeK(K, [&](auto k) {
        RowDotsK<decltype(k)::value>(w, bias, F, h, out);
      })) {
    return;
  }
#endif
  for (int k = 0; k < K; ++k) {
    float s = 0;
    for (int j = 0; j < F; ++j) s += w[k * F + j] * h[j];
    out[k] = bias[k] + s;
  }
}

// ColumnDots (below) for columns [i0, n), plain loops.
inline void ColumnDotsScalar(const float* w, const float* bias, int K, int F,
                             const float* hT, int64_t ld, int64_t i0, int64_t n,
                             float* out) {
  for (int64_t i = i0; i < n; ++i) {
    for (int k = 0; k < K; ++k) {
      float s = bias[k];
      for (int j = 0; j < F; ++j) s += w[k * F + j] * hT[j * ld + i];
      out[i * K + k] = s;
    }
  }
}

#ifdef RBMREC_AVX2
// ColumnDots for a compile-time K: eight columns (items) per step, one per
// lane, the K accumulators in registers, no horizontal sums.
template <int K>
inline void ColumnDotsK(const float* w, const float* bias, int F,
                        const float* hT, int64_t ld, int64_t n, float* out) {
  int64_t i = 0;
  alignas(32) float buf[8];
  for (; i + 8 <= n; i += 8) {
    __m256 acc[K];
    for (int k = 0; k < K; ++k) acc[k] = _mm256_set1_ps(bias[k]);
    for (int j = 0; j < F; ++j) {
      const __m256 h = _mm256_loadu_ps(hT + j * ld + i);
      for (int k = 0; k < K; ++k) {
        acc[k] = _mm256_fmadd_ps(_mm256_set1_ps(w[k * F + j]), h, acc[k]);
      }
    }
    for (int k = 0; k < K; ++k) {
      _mm256_store_ps(buf, acc[k]);
      for (int l = 0; l < 8; ++l) out[(i + l) * K + k] = buf[l];
    }
  }
  ColumnDotsScalar(w, bias, K, F, hT, ld, i, n, out);
}
#endif

// out[i*K + k] = bias[k] + sum_j w[k*F + j] * hT[j*ld + i] for i < n: the
// K logits of n softmax units that share the K weight rows w (F floats
// each) but have their own hidden vectors, stored as the columns of hT
// (F rows, row stride ld >= n). RowDots for many hidden vectors at once.
inline void ColumnDots(const float* w, const float* bias, int K, int F,
                       const float* hT, int64_t ld, int64_t n, float* out) {
#ifdef RBMREC_AVX2
  if (WithCompileTimeK(K, [&](auto k) {
        ColumnDotsK<decltype(k)::value>(w, bias, F, hT, ld, n, out);
      })) {
    return;
  }
#endif
  ColumnDotsScalar(w, bias, K, F, hT, ld, 0, n, out);
}

}  // namespace rbmrec::kernels

#endif  // RBMREC_CORE_KERNELS_H_
