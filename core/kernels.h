#ifndef RBMREC_CORE_KERNELS_H_
#define RBMREC_CORE_KERNELS_H_

// The inner loops of training and prediction, written so the compiler keeps
// accumulators in registers: AVX2/FMA intrinsics when the build targets
// x86-64-v3 (RBMREC_ISA), plain loops otherwise. Each function's result
// depends only on its inputs (never on threads), so training stays
// deterministic for a given binary.

#include <algorithm>
#include <cmath>
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

// The sum of four accumulator chains' lanes, in a fixed order (the dot
// products' below).
inline float HorizontalSum4(const __m256* v) {
  return HorizontalSum(
      _mm256_add_ps(_mm256_add_ps(v[0], v[2]), _mm256_add_ps(v[1], v[3])));
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
// Lane l of the result = the sum of the 8 lanes of a[l], for l < 8: three
// levels of pairwise adds instead of eight separate horizontal sums.
inline __m256 HorizontalSums8(const __m256* a) {
  const __m256 t0 = _mm256_hadd_ps(a[0], a[1]);
  const __m256 t1 = _mm256_hadd_ps(a[2], a[3]);
  const __m256 t2 = _mm256_hadd_ps(a[4], a[5]);
  const __m256 t3 = _mm256_hadd_ps(a[6], a[7]);
  const __m256 u0 = _mm256_hadd_ps(t0, t1);  // 0..3 of both 128-bit halves
  const __m256 u1 = _mm256_hadd_ps(t2, t3);  // 4..7
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20),
                       _mm256_permute2f128_ps(u0, u1, 0x31));
}

// The lanes below `n` (0..8) of an 8-lane mask.
inline __m256i LaneMask(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// RowDots for a compile-time K: the K accumulators in registers, the tail
// of F (F % 8 floats) as one masked step, and all K horizontal sums at
// once when K <= 8.
template <int K>
inline void RowDotsK(const float* w, const float* bias, int F, const float* h,
                     float* out) {
  __m256 acc[K < 8 ? 8 : K];
  for (int k = 0; k < (K < 8 ? 8 : K); ++k) acc[k] = _mm256_setzero_ps();
  int j = 0;
  for (; j + 8 <= F; j += 8) {
    const __m256 hv = _mm256_loadu_ps(h + j);
    for (int k = 0; k < K; ++k) {
      acc[k] = _mm256_fmadd_ps(_mm256_loadu_ps(w + k * F + j), hv, acc[k]);
    }
  }
  if (j < F) {
    const __m256i mask = LaneMask(F - j);
    const __m256 hv = _mm256_maskload_ps(h + j, mask);
    for (int k = 0; k < K; ++k) {
      acc[k] =
          _mm256_fmadd_ps(_mm256_maskload_ps(w + k * F + j, mask), hv, acc[k]);
    }
  }
  if constexpr (K <= 8) {
    alignas(32) float sums[8];
    _mm256_store_ps(sums, HorizontalSums8(acc));
    for (int k = 0; k < K; ++k) out[k] = bias[k] + sums[k];
  } else {
    for (int k = 0; k < K; ++k) out[k] = bias[k] + HorizontalSum(acc[k]);
  }
}
#endif

#ifdef RBMREC_AVX2
// RowDotsK for two hidden vectors at once: each 8-float block of the K rows
// is loaded once for both. Each output is RowDotsK's, bit for bit (the same
// per-lane accumulation and reduction). REQUIRES K <= 8.
template <int K>
inline void RowDots2K(const float* w, const float* bias, int F, const float* h1,
                      const float* h2, float* out1, float* out2) {
  static_assert(K <= 8);
  __m256 a1[8], a2[8];
  for (int k = 0; k < 8; ++k) a1[k] = a2[k] = _mm256_setzero_ps();
  int j = 0;
  for (; j + 8 <= F; j += 8) {
    const __m256 g1 = _mm256_loadu_ps(h1 + j), g2 = _mm256_loadu_ps(h2 + j);
    for (int k = 0; k < K; ++k) {
      const __m256 wk = _mm256_loadu_ps(w + k * F + j);
      a1[k] = _mm256_fmadd_ps(wk, g1, a1[k]);
      a2[k] = _mm256_fmadd_ps(wk, g2, a2[k]);
    }
  }
  if (j < F) {
    const __m256i mask = LaneMask(F - j);
    const __m256 g1 = _mm256_maskload_ps(h1 + j, mask);
    const __m256 g2 = _mm256_maskload_ps(h2 + j, mask);
    for (int k = 0; k < K; ++k) {
      const __m256 wk = _mm256_maskload_ps(w + k * F + j, mask);
      a1[k] = _mm256_fmadd_ps(wk, g1, a1[k]);
      a2[k] = _mm256_fmadd_ps(wk, g2, a2[k]);
    }
  }
  alignas(32) float s1[8], s2[8];
  _mm256_store_ps(s1, HorizontalSums8(a1));
  _mm256_store_ps(s2, HorizontalSums8(a2));
  for (int k = 0; k < K; ++k) {
    out1[k] = bias[k] + s1[k];
    out2[k] = bias[k] + s2[k];
  }
}
#endif

// RowDots(w, bias, K, F, h1, out1) and RowDots(.., h2, out2), bit for bit,
// reading w once where the vector path allows.
inline void RowDots2(const float* w, const float* bias, int K, int F,
                     const float* h1, const float* h2, float* out1,
                     float* out2);

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
// ColumnDots for a compile-time K: sixteen columns (items) per step, then
// eight, one per lane, the K accumulators in registers, no horizontal sums.
// Each weight is broadcast once per step for two vectors of items, so the
// 2K accumulator chains keep both FMA ports busy. Every column's result is
// the same FMA chain (bias, then j = 0..F-1 in order) whichever step it
// falls in; the columns past the last multiple of 8 take the scalar loop.
template <int K>
inline void ColumnDotsK(const float* w, const float* bias, int F,
                        const float* hT, int64_t ld, int64_t n, float* out) {
  int64_t i = 0;
  alignas(32) float buf[16];
  for (; i + 16 <= n; i += 16) {
    __m256 a0[K], a1[K];
    for (int k = 0; k < K; ++k) a0[k] = a1[k] = _mm256_set1_ps(bias[k]);
    for (int j = 0; j < F; ++j) {
      const float* row = hT + j * ld + i;
      const __m256 h0 = _mm256_loadu_ps(row), h1 = _mm256_loadu_ps(row + 8);
      for (int k = 0; k < K; ++k) {
        const __m256 wk = _mm256_set1_ps(w[k * F + j]);
        a0[k] = _mm256_fmadd_ps(wk, h0, a0[k]);
        a1[k] = _mm256_fmadd_ps(wk, h1, a1[k]);
      }
    }
    for (int k = 0; k < K; ++k) {
      _mm256_store_ps(buf, a0[k]);
      _mm256_store_ps(buf + 8, a1[k]);
      for (int l = 0; l < 16; ++l) out[(i + l) * K + k] = buf[l];
    }
  }
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

inline void RowDots2(const float* w, const float* bias, int K, int F,
                     const float* h1, const float* h2, float* out1,
                     float* out2) {
#ifdef RBMREC_AVX2
  if (K <= 8 && WithCompileTimeK(K, [&](auto k) {
        if constexpr (decltype(k)::value <= 8) {
          RowDots2K<decltype(k)::value>(w, bias, F, h1, h2, out1, out2);
        }
      })) {
    return;
  }
#endif
  RowDots(w, bias, K, F, h1, out1);
  RowDots(w, bias, K, F, h2, out2);
}

// out[r] = dot(w + r*F, h) for r < rows (W row-major, rows x F): a matrix
// times a vector, each row as Eigen 3.4's row-major GEMV computes it in its
// blocks of rows (8-lane FMA chains over the full 8-float blocks, Eigen's
// horizontal sum, then the F % 8 last products added one by one, unfused).
// That is `W * h` bit for bit where Eigen's own code is not contracted
// differently by the compiler (tested: F = 8, 16, 100 with rows even, the
// served defaults); the result never depends on B or on the other vectors.
// For B = 1..8 vectors at once: each block of rows is read from memory once
// for all of them (the memory traffic of one matrix-vector product).
namespace internal {
// The F % 8 last products of a row added one by one, unfused, as Eigen.
inline float AddTail(float cc, const float* w, const float* h, int j, int F) {
  for (; j < F; ++j) {
    float prod = w[j] * h[j];
#if defined(__GNUC__)
    asm("" : "+x"(prod));  // keeps the add unfused, as in Eigen
#endif
    cc += prod;
  }
  return cc;
}
}  // namespace internal

#ifdef RBMREC_AVX2
namespace internal {
// One row's dot product the way MatVecRowsAvx2 computes every row.
template <typename T, typename Load, typename Tail>
inline float RowDotAvx2(const T* wr, const float* hb, int F, Load load,
                        Tail tail) {
  __m256 c = _mm256_setzero_ps();
  int j = 0;
  for (; j + 8 <= F; j += 8) {
    c = _mm256_fmadd_ps(load(wr + j), _mm256_loadu_ps(hb + j), c);
  }
  return tail(HorizontalSum(c), wr, hb, j);
}

// MatVecRows' loops over rows of T (float, or halves), `load` turning 8 of
// them into floats and `tail` adding a row's last F % 8 products. Vectors
// go in pairs through four rows at a time (each 8 weights loaded and
// converted once for both); every out[b][r] is still the same chain of
// fmadd(w, h, acc) over j, then HorizontalSum and tail, as alone.
template <typename T, typename Load, typename Tail>
inline void MatVecRowsAvx2(const T* w, int64_t rows, int F,
                           const float* const* h, float* const* out, int B,
                           Load load, Tail tail) {
  constexpr int64_t kRowBlock = 32;  // 32 x F weights stay in L1 for all B
  for (int64_t r0 = 0; r0 < rows; r0 += kRowBlock) {
    const int64_t r1 = std::min(rows, r0 + kRowBlock);
    int b = 0;
    for (; b + 2 <= B; b += 2) {  // two vectors, four rows at a time
      const float* ha = h[b];
      const float* hb = h[b + 1];
      int64_t r = r0;
      for (; r + 4 <= r1; r += 4) {
        const T* wr[4] = {w + r * F, w + (r + 1) * F, w + (r + 2) * F,
                          w + (r + 3) * F};
        __m256 ca[4], cb[4];
        for (int k = 0; k < 4; ++k) ca[k] = cb[k] = _mm256_setzero_ps();
        int j = 0;
        for (; j + 8 <= F; j += 8) {
          const __m256 hva = _mm256_loadu_ps(ha + j);
          const __m256 hvb = _mm256_loadu_ps(hb + j);
          for (int k = 0; k < 4; ++k) {
            const __m256 wk = load(wr[k] + j);
            ca[k] = _mm256_fmadd_ps(wk, hva, ca[k]);
            cb[k] = _mm256_fmadd_ps(wk, hvb, cb[k]);
          }
        }
        for (int k = 0; k < 4; ++k) {
          out[b][r + k] = tail(HorizontalSum(ca[k]), wr[k], ha, j);
          out[b + 1][r + k] = tail(HorizontalSum(cb[k]), wr[k], hb, j);
        }
      }
      for (; r < r1; ++r) {
        for (int u = b; u < b + 2; ++u) {
          out[u][r] = RowDotAvx2(w + r * F, h[u], F, load, tail);
        }
      }
    }
    for (; b < B; ++b) {  // the last odd vector
      const float* hb = h[b];
      int64_t r = r0;
      // Four rows at a time: four independent FMA chains.
      for (; r + 4 <= r1; r += 4) {
        const T* wr[4] = {w + r * F, w + (r + 1) * F, w + (r + 2) * F,
                          w + (r + 3) * F};
        __m256 c[4];
        for (int k = 0; k < 4; ++k) c[k] = _mm256_setzero_ps();
        int j = 0;
        for (; j + 8 <= F; j += 8) {
          const __m256 hv = _mm256_loadu_ps(hb + j);
          for (int k = 0; k < 4; ++k) {
            c[k] = _mm256_fmadd_ps(load(wr[k] + j), hv, c[k]);
          }
        }
        for (int k = 0; k < 4; ++k) {
          out[b][r + k] = tail(HorizontalSum(c[k]), wr[k], hb, j);
        }
      }
      for (; r < r1; ++r) out[b][r] = RowDotAvx2(w + r * F, hb, F, load, tail);
    }
  }
}
}  // namespace internal
#endif

// One item's step under ordinal sharing (TrainOptions::ordinal) over its K
// rows of W (w, K x F, contiguous) and their velocities (v): the rows are
// W^k = U^0 + ... + U^k and the step is taken on U. With dU^k = the sum of
// g's rows k' >= k (g is K x F; only the rows whose bit is set in `touched`
// are read, the others count as zero) and U^k = W^k - W^(k-1) (weights
// before the step, W^-1 = 0), for k = 0..K-1:
//   v^k = mom * v^k + scale * dU^k - decay * U^k;  d += v^k;  W^k += d.
// dU^0 is the sum of the touched rows, and dU^(k+1) = dU^k - g^k. Eight
// hidden units at a time go through all K rows, so d, the previous row and
// dU stay in registers.
inline void OrdinalRows(float* w, float* v, const float* g,
                        const uint64_t* touched, int K, int F, float mom,
                        float scale, float decay) {
  auto is_touched = [touched](int k) {
    return (touched[k >> 6] >> (k & 63)) & 1;
  };
  int j = 0;
#ifdef RBMREC_AVX2
  const __m256 vmom = _mm256_set1_ps(mom), vscale = _mm256_set1_ps(scale),
               vdecay = _mm256_set1_ps(decay);
  for (; j + 8 <= F; j += 8) {
    __m256 du = _mm256_setzero_ps();
    for (int k = 0; k < K; ++k) {
      if (is_touched(k)) du = _mm256_add_ps(du, _mm256_loadu_ps(g + k * F + j));
    }
    __m256 prev = _mm256_setzero_ps(), d = _mm256_setzero_ps();
    for (int k = 0; k < K; ++k) {
      float* wk = w + k * F + j;
      float* vk = v + k * F + j;
      const __m256 wold = _mm256_loadu_ps(wk);
      // mom * v + scale * du - decay * (w - prev).
      __m256 vel =
          _mm256_fmadd_ps(vmom, _mm256_loadu_ps(vk), _mm256_mul_ps(vscale, du));
      vel = _mm256_fnmadd_ps(vdecay, _mm256_sub_ps(wold, prev), vel);
      _mm256_storeu_ps(vk, vel);
      d = _mm256_add_ps(d, vel);
      _mm256_storeu_ps(wk, _mm256_add_ps(wold, d));
      prev = wold;
      if (is_touched(k)) du = _mm256_sub_ps(du, _mm256_loadu_ps(g + k * F + j));
    }
  }
#endif
  for (; j < F; ++j) {
    float du = 0;
    for (int k = 0; k < K; ++k) {
      if (is_touched(k)) du += g[k * F + j];
    }
    float prev = 0, d = 0;
    for (int k = 0; k < K; ++k) {
      const float wold = w[k * F + j];
      float vel = mom * v[k * F + j];
      vel = vel + scale * du;
      vel = vel - decay * (wold - prev);
      v[k * F + j] = vel;
      d += vel;
      w[k * F + j] = wold + d;
      prev = wold;
      if (is_touched(k)) du -= g[k * F + j];
    }
  }
}

inline void MatVecRows(const float* w, int64_t rows, int F,
                       const float* const* h, float* const* out, int B) {
#ifdef RBMREC_AVX2
  internal::MatVecRowsAvx2(
      w, rows, F, h, out, B, [](const float* p) { return _mm256_loadu_ps(p); },
      [F](float acc, const float* wr, const float* hb, int j) {
        return internal::AddTail(acc, wr, hb, j, F);
      });
#else
  for (int b = 0; b < B; ++b) {
    for (int64_t r = 0; r < rows; ++r) {
      out[b][r] = internal::AddTail(0.0f, w + r * F, h[b], 0, F);
    }
  }
#endif
}

#ifdef RBMREC_AVX2
// Half-precision (IEEE binary16) copies of weights that serving only reads,
// for matrix-vector products bound by the bytes they stream: half the
// bytes of float rows. x86-64-v3 has F16C. Rounds to nearest even.
inline void FloatsToHalves(const float* x, int64_t n, uint16_t* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(
        reinterpret_cast<__m128i*>(out + i),
        _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  }
  if (i < n) {  // the last n % 8 through one padded vector
    alignas(32) float tail[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    alignas(16) uint16_t halves[8];
    std::copy(x + i, x + n, tail);
    _mm_store_si128(
        reinterpret_cast<__m128i*>(halves),
        _mm256_cvtps_ph(_mm256_load_ps(tail), _MM_FROUND_TO_NEAREST_INT));
    std::copy(halves, halves + (n - i), out + i);
  }
}

// MatVecRows over a row-major matrix of halves (products and sums in
// float): out[b][r] = sum_j float(w[r*F + j]) * h[b][j].
inline void MatVecRowsHalf(const uint16_t* w, int64_t rows, int F,
                           const float* const* h, float* const* out, int B) {
  internal::MatVecRowsAvx2(
      w, rows, F, h, out, B,
      [](const uint16_t* p) {
        return _mm256_cvtph_ps(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
      },
      [F](float acc, const uint16_t* wr, const float* hb, int j) {
        for (; j < F; ++j) acc += _cvtsh_ss(wr[j]) * hb[j];
        return acc;
      });
}
#endif

// out[c] += sum over the n rows rows[x] of w[rows[x] * cols + c], for c in
// [0, cols): rows of a row-major matrix of int8 summed exactly (int16 over
// up to eight rows, then int32). REQUIRES every rows[x] a row of w and
// n * 127 within int32 less |out|'s largest entry.
inline void AddRowsInt8(const int8_t* w, int64_t cols, const int32_t* rows,
                        int64_t n, int32_t* out) {
  constexpr int64_t kRows = 8;  // 8 x 127 fits in int16
  const int8_t* r[kRows];
  for (int64_t x = 0; x < n; x += kRows) {
    const int64_t take = std::min(kRows, n - x);
    for (int64_t y = 0; y < take; ++y) r[y] = w + int64_t{rows[x + y]} * cols;
    int64_t c = 0;
#ifdef RBMREC_AVX2
    constexpr int64_t kAhead = 512;  // bytes of each row fetched ahead
    // The next rows' first bytes, fetched while these are summed.
    for (int64_t y = x + kRows; y < std::min(n, x + 2 * kRows); ++y) {
      const char* next =
          reinterpret_cast<const char*>(w + int64_t{rows[y]} * cols);
      for (int64_t b = 0; b < std::min<int64_t>(kAhead, cols); b += 64) {
        _mm_prefetch(next + b, _MM_HINT_T0);
      }
    }
    for (; c + 16 <= cols; c += 16) {
      if ((c & 63) == 0 && c + kAhead < cols) {
        for (int64_t y = 0; y < take; ++y) {
          _mm_prefetch(reinterpret_cast<const char*>(r[y] + c + kAhead),
                       _MM_HINT_T0);
        }
      }
      auto load = [c](const int8_t* p) {
        return _mm256_cvtepi8_epi16(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + c)));
      };
      __m256i sum = load(r[0]);
      for (int64_t y = 1; y < take; ++y)
        sum = _mm256_add_epi16(sum, load(r[y]));
      __m256i* o = reinterpret_cast<__m256i*>(out + c);
      const __m256i lo = _mm256_cvtepi16_epi32(_mm256_castsi256_si128(sum));
      const __m256i hi =
          _mm256_cvtepi16_epi32(_mm256_extracti128_si256(sum, 1));
      _mm256_storeu_si256(o, _mm256_add_epi32(_mm256_loadu_si256(o), lo));
      _mm256_storeu_si256(o + 1,
                          _mm256_add_epi32(_mm256_loadu_si256(o + 1), hi));
    }
#endif
    for (; c < cols; ++c) {
      int32_t sum = 0;
      for (int64_t y = 0; y < take; ++y) sum += r[y][c];
      out[c] += sum;
    }
  }
}

// a . b over n floats: with AVX2 in four chains of eight lanes (summed in
// a fixed order), else one sum. (The factorisation's score, core/mf.cc.)
inline float Dot(const float* a, const float* b, int n) {
  int i = 0;
  float sum = 0;
#ifdef RBMREC_AVX2
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps(), _mm256_setzero_ps()};
  for (; i + 32 <= n; i += 32) {
    for (int c = 0; c < 4; ++c) {
      acc[c] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8 * c),
                               _mm256_loadu_ps(b + i + 8 * c), acc[c]);
    }
  }
  for (; i + 8 <= n; i += 8) {
    acc[0] =
        _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc[0]);
  }
  sum = HorizontalSum4(acc);
#endif
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// Asks for the n floats at p to be brought into the cache (a hint).
inline void PrefetchRow(const float* p, int n) {
#ifdef RBMREC_AVX2
  const char* b = reinterpret_cast<const char*>(p);
  for (size_t at = 0; at < static_cast<size_t>(n) * sizeof(float); at += 64) {
    _mm_prefetch(b + at, _MM_HINT_T0);
  }
#else
  (void)p;
  (void)n;
#endif
}

// sqrt(x) for x >= 0 (correctly rounded, as std::sqrt), without the
// errno check std::sqrt compiles to.
inline float SqrtNonNegative(float x) {
#ifdef RBMREC_AVX2
  return _mm_cvtss_f32(_mm_sqrt_ss(_mm_set_ss(x)));
#else
  return std::sqrt(x);
#endif
}

// One pass of the factorisation's fold-in step (core/mf.cc) over n floats:
// returns p . z and q . z of p as it was (summed as Dot sums: bit for bit
// Dot(p, z, n) and Dot(q, z, n) before the update) and moves p to
// keep p + move q (with AVX2 as fma(keep, p, move q)). z == nullptr: the
// update alone (both products 0).
struct Dots2 {
  float pz, qz;
};
inline Dots2 DotsThenKeepMove(float* p, const float* q, const float* z,
                              float keep, float move, int n) {
  int i = 0;
  Dots2 d{0, 0};
#ifdef RBMREC_AVX2
  const __m256 kv = _mm256_set1_ps(keep), mv = _mm256_set1_ps(move);
  auto update = [&](int at, __m256 pc, __m256 qc) {
    _mm256_storeu_ps(p + at, _mm256_fmadd_ps(kv, pc, _mm256_mul_ps(mv, qc)));
  };
  if (z == nullptr) {
    for (; i + 8 <= n; i += 8) {
      update(i, _mm256_loadu_ps(p + i), _mm256_loadu_ps(q + i));
    }
  } else {
    __m256 pz[4], qz[4];
    for (int c = 0; c < 4; ++c) pz[c] = qz[c] = _mm256_setzero_ps();
    for (; i + 32 <= n; i += 32) {
      for (int c = 0; c < 4; ++c) {
        const int at = i + 8 * c;
        const __m256 pc = _mm256_loadu_ps(p + at), qc = _mm256_loadu_ps(q + at),
                     zc = _mm256_loadu_ps(z + at);
        pz[c] = _mm256_fmadd_ps(pc, zc, pz[c]);
        qz[c] = _mm256_fmadd_ps(qc, zc, qz[c]);
        update(at, pc, qc);
      }
    }
    for (; i + 8 <= n; i += 8) {
      const __m256 pc = _mm256_loadu_ps(p + i), qc = _mm256_loadu_ps(q + i),
                   zc = _mm256_loadu_ps(z + i);
      pz[0] = _mm256_fmadd_ps(pc, zc, pz[0]);
      qz[0] = _mm256_fmadd_ps(qc, zc, qz[0]);
      update(i, pc, qc);
    }
    d.pz = HorizontalSum4(pz);
    d.qz = HorizontalSum4(qz);
  }
#endif
  for (; i < n; ++i) {
    if (z != nullptr) {
      d.pz += p[i] * z[i];
      d.qz += q[i] * z[i];
    }
    p[i] = keep * p[i] + move * q[i];
  }
  return d;
}

// p . q, p . p and q . q over n floats in one pass: with AVX2 each in four
// chains of eight lanes (summed in a fixed order), else one sum each. (The
// factorisation's SGD step, core/mf.cc.)
struct Dots3 {
  float pq, pp, qq;
};
inline Dots3 ThreeDots(const float* p, const float* q, int n) {
  int i = 0;
  Dots3 d{0, 0, 0};
#ifdef RBMREC_AVX2
  __m256 pq[4], pp[4], qq[4];
  for (int c = 0; c < 4; ++c) {
    pq[c] = _mm256_setzero_ps();
    pp[c] = _mm256_setzero_ps();
    qq[c] = _mm256_setzero_ps();
  }
  for (; i + 32 <= n; i += 32) {
    for (int c = 0; c < 4; ++c) {
      const __m256 pc = _mm256_loadu_ps(p + i + 8 * c);
      const __m256 qc = _mm256_loadu_ps(q + i + 8 * c);
      pq[c] = _mm256_fmadd_ps(pc, qc, pq[c]);
      pp[c] = _mm256_fmadd_ps(pc, pc, pp[c]);
      qq[c] = _mm256_fmadd_ps(qc, qc, qq[c]);
    }
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 pc = _mm256_loadu_ps(p + i), qc = _mm256_loadu_ps(q + i);
    pq[0] = _mm256_fmadd_ps(pc, qc, pq[0]);
    pp[0] = _mm256_fmadd_ps(pc, pc, pp[0]);
    qq[0] = _mm256_fmadd_ps(qc, qc, qq[0]);
  }
  d.pq = HorizontalSum4(pq);
  d.pp = HorizontalSum4(pp);
  d.qq = HorizontalSum4(qq);
#endif
  for (; i < n; ++i) {
    d.pq += p[i] * q[i];
    d.pp += p[i] * p[i];
    d.qq += q[i] * q[i];
  }
  return d;
}

}  // namespace rbmrec::kernels

#endif  // RBMREC_CORE_KERNELS_H_
