#include "core/kernels.h"

#include <cmath>
#include <vector>

#include "Eigen/Core"
#include "core/rng.h"
#include "gtest/gtest.h"

namespace rbmrec::kernels {
namespace {

std::vector<float> Random(size_t n, Rng* rng) {
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(rng->Normal());
  return v;
}

// Dot products in double, the reference for both kernels.
double Dot(const float* a, const float* b, int F, int64_t b_stride) {
  double s = 0;
  for (int j = 0; j < F; ++j) {
    s += static_cast<double>(a[j]) * b[static_cast<int64_t>(j) * b_stride];
  }
  return s;
}

TEST(Kernels, RowDotsMatchesReference) {
  Rng rng(3);
  // K = 1 and 11 take the plain loop; 2..10 the vector path. F = 100 has a
  // tail after the 8-float blocks.
  for (int K : {1, 2, 5, 10, 11}) {
    for (int F : {1, 8, 13, 100}) {
      const std::vector<float> w = Random(static_cast<size_t>(K * F), &rng);
      const std::vector<float> b = Random(static_cast<size_t>(K), &rng);
      const std::vector<float> h = Random(static_cast<size_t>(F), &rng);
      std::vector<float> out(static_cast<size_t>(K));
      RowDots(w.data(), b.data(), K, F, h.data(), out.data());
      for (int k = 0; k < K; ++k) {
        EXPECT_NEAR(out[k], b[k] + Dot(w.data() + k * F, h.data(), F, 1), 1e-4)
            << "K " << K << " F " << F << " k " << k;
      }
    }
  }
}

TEST(Kernels, RowDots2IsRowDotsTwiceBitForBit) {
  Rng rng(4);
  for (int K : {1, 2, 5, 8, 10, 11}) {
    for (int F : {1, 8, 13, 100}) {
      const std::vector<float> w = Random(static_cast<size_t>(K * F), &rng);
      const std::vector<float> b = Random(static_cast<size_t>(K), &rng);
      const std::vector<float> h1 = Random(static_cast<size_t>(F), &rng);
      const std::vector<float> h2 = Random(static_cast<size_t>(F), &rng);
      std::vector<float> o1(static_cast<size_t>(K)), o2(o1), r1(o1), r2(o1);
      RowDots2(w.data(), b.data(), K, F, h1.data(), h2.data(), o1.data(),
               o2.data());
      RowDots(w.data(), b.data(), K, F, h1.data(), r1.data());
      RowDots(w.data(), b.data(), K, F, h2.data(), r2.data());
      EXPECT_EQ(o1, r1) << "K " << K << " F " << F;
      EXPECT_EQ(o2, r2) << "K " << K << " F " << F;
    }
  }
}

TEST(Kernels, ColumnDotsIsRowDotsForEveryColumn) {
  Rng rng(5);
  for (int K : {1, 3, 5, 10, 11}) {
    for (int F : {1, 7, 100}) {
      // n = 21: two 8-wide steps and a tail of 5; ld > n as in a view.
      for (int64_t n : {1, 8, 21}) {
        const int64_t ld = n + 3;
        const std::vector<float> w = Random(static_cast<size_t>(K * F), &rng);
        const std::vector<float> b = Random(static_cast<size_t>(K), &rng);
        const std::vector<float> hT = Random(static_cast<size_t>(F * ld), &rng);
        std::vector<float> out(static_cast<size_t>(n * K), NAN);
        ColumnDots(w.data(), b.data(), K, F, hT.data(), ld, n, out.data());
        for (int64_t i = 0; i < n; ++i) {
          for (int k = 0; k < K; ++k) {
            const double want =
                b[k] + Dot(w.data() + k * F, hT.data() + i, F, ld);
            EXPECT_NEAR(out[static_cast<size_t>(i * K + k)], want, 1e-4)
                << "K " << K << " F " << F << " n " << n << " item " << i;
          }
        }
      }
    }
  }
}

// Each column of ColumnDots is one FMA chain (bias, then j = 0..F-1 in
// order) in the vector steps, whether its step is 16 or 8 columns wide, and
// the scalar loop's sum past the last multiple of 8: bit for bit.
TEST(Kernels, ColumnDotsIsOneFmaChainPerColumnBitForBit) {
  Rng rng(9);
  for (int K : {2, 5, 10}) {
    for (int F : {1, 7, 100}) {
      // 16-wide steps, an 8-wide step and a scalar tail (n = 45).
      for (int64_t n : {8, 16, 24, 45}) {
        const int64_t ld = n + 5;
        const std::vector<float> w = Random(static_cast<size_t>(K * F), &rng);
        const std::vector<float> b = Random(static_cast<size_t>(K), &rng);
        const std::vector<float> hT = Random(static_cast<size_t>(F * ld), &rng);
        std::vector<float> out(static_cast<size_t>(n * K), NAN);
        ColumnDots(w.data(), b.data(), K, F, hT.data(), ld, n, out.data());
        std::vector<float> tail(static_cast<size_t>(n * K), NAN);
        const int64_t vec = n / 8 * 8;
        ColumnDotsScalar(w.data(), b.data(), K, F, hT.data(), ld, vec, n,
                         tail.data());
        for (int64_t i = 0; i < n; ++i) {
          for (int k = 0; k < K; ++k) {
            float want = b[static_cast<size_t>(k)];
            if (i < vec) {
              for (int j = 0; j < F; ++j) {
                want = std::fma(w[static_cast<size_t>(k * F + j)],
                                hT[static_cast<size_t>(j * ld + i)], want);
              }
            } else {
              want = tail[static_cast<size_t>(i * K + k)];
            }
#ifdef RBMREC_AVX2
            EXPECT_EQ(out[static_cast<size_t>(i * K + k)], want)
                << "K " << K << " F " << F << " n " << n << " item " << i;
#else
            // Without FMA instructions (the portable build) the kernel
            // multiplies and adds separately: rounding-level agreement.
            EXPECT_NEAR(out[static_cast<size_t>(i * K + k)], want,
                        1e-5f * (1 + std::abs(want)))
                << "K " << K << " F " << F << " n " << n << " item " << i;
#endif
          }
        }
      }
    }
  }
}

// MatVecRows gives each vector the same result alone or with others, bit
// for bit; Eigen's row-major matrix * vector bit for bit for the served
// shapes (F a multiple of 8, or 100; an even number of rows) in the
// optimised AVX2 build, and within rounding for any shape and build.
TEST(Kernels, MatVecRowsIsEigensGemvAndAloneIsBatched) {
  Rng rng(11);
  using RowMatrix =
      Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  for (int64_t rows : {1, 2, 5, 8, 13, 40, 130, 203}) {
    for (int F : {1, 3, 4, 7, 8, 12, 13, 16, 100}) {
      RowMatrix w(rows, F);
      for (int64_t r = 0; r < rows; ++r) {
        for (int j = 0; j < F; ++j) w(r, j) = static_cast<float>(rng.Normal());
      }
      std::vector<Eigen::VectorXf> h(3, Eigen::VectorXf(F));
      for (Eigen::VectorXf& v : h) {
        for (int j = 0; j < F; ++j) v[j] = rng.Uniform();
      }
      for (int B = 1; B <= 3; ++B) {
        std::vector<Eigen::VectorXf> out(static_cast<size_t>(B),
                                         Eigen::VectorXf(rows));
        const float* hs[3];
        float* outs[3];
        for (int b = 0; b < B; ++b) {
          hs[b] = h[static_cast<size_t>(b)].data();
          outs[b] = out[static_cast<size_t>(b)].data();
        }
        MatVecRows(w.data(), rows, F, hs, outs, B);
        // Bit for bit with Eigen only in the optimised AVX2 build: the
        // sanitizer build compiles Eigen's GEMV differently and the
        // portable build (no FMA) rounds each product, so there only
        // rounding-level agreement holds.
#if defined(__SANITIZE_ADDRESS__) || !defined(RBMREC_AVX2)
        const bool served_shape = false;
#else
        const bool served_shape = (F % 8 == 0 || F == 100) && rows % 2 == 0;
#endif
        for (int b = 0; b < B; ++b) {
          Eigen::VectorXf want(rows), alone(rows);
          want.noalias() = w * h[static_cast<size_t>(b)];
          float* alone_out = alone.data();
          MatVecRows(w.data(), rows, F, &hs[b], &alone_out, 1);
          for (int64_t r = 0; r < rows; ++r) {
            const float got = out[static_cast<size_t>(b)][r];
            EXPECT_EQ(got, alone[r]) << "rows " << rows << " F " << F;
            if (served_shape) {
              EXPECT_EQ(got, want[r]) << "rows " << rows << " F " << F << " B "
                                      << B << " row " << r;
            } else {
              EXPECT_NEAR(got, want[r], 1e-5f * (1 + std::abs(want[r])));
            }
          }
        }
      }
    }
  }
}

// AddRowsInt8 adds the chosen rows exactly, for any number of rows (within
// and past a pass of eight), row length (past the fetch-ahead distance and
// with tails) and repeated rows, on top of what out held.
TEST(Kernels, AddRowsInt8AddsTheChosenRowsExactly) {
  Rng rng(14);
  for (int64_t cols : {1, 15, 16, 17, 100, 700, 3706}) {
    const int64_t height = 40;
    std::vector<int8_t> w(static_cast<size_t>(height * cols));
    for (int8_t& x : w) {
      x = static_cast<int8_t>(static_cast<int>(rng.Uniform() * 255) - 127);
    }
    for (int64_t n : {0, 1, 7, 8, 9, 25}) {
      std::vector<int32_t> rows(static_cast<size_t>(n));
      for (int32_t& r : rows) {
        r = static_cast<int32_t>(rng.Uniform() * height) % height;
      }
      std::vector<int32_t> got(static_cast<size_t>(cols)), want(got.size());
      for (int64_t c = 0; c < cols; ++c) {
        got[static_cast<size_t>(c)] = static_cast<int32_t>(c) - 5;
        want[static_cast<size_t>(c)] = static_cast<int32_t>(c) - 5;
        for (const int32_t r : rows) {
          want[static_cast<size_t>(c)] += w[static_cast<size_t>(r * cols + c)];
        }
      }
      AddRowsInt8(w.data(), cols, rows.data(), n, got.data());
      EXPECT_EQ(got, want) << cols << " columns, " << n << " rows";
    }
  }
}

#ifdef RBMREC_AVX2
// Halves round to nearest (relative error <= 2^-11 in the normal range) and
// MatVecRowsHalf is MatVecRows over the halves' float values, alone or
// batched, for any shape.
TEST(Kernels, MatVecRowsHalfIsMatVecRowsOverTheHalves) {
  Rng rng(12);
  for (int64_t rows : {1, 3, 4, 9, 33, 130}) {
    for (int F : {1, 7, 8, 13, 16, 100, 200}) {
      std::vector<float> w(static_cast<size_t>(rows * F));
      for (float& x : w) x = static_cast<float>(0.1 * rng.Normal());
      std::vector<uint16_t> half(w.size());
      FloatsToHalves(w.data(), static_cast<int64_t>(w.size()), half.data());
      std::vector<float> back(w.size());
      for (size_t e = 0; e < w.size(); ++e) {
        back[e] = _cvtsh_ss(half[e]);
        if (std::abs(w[e]) > 1e-4f) {
          EXPECT_LE(std::abs(back[e] - w[e]), std::abs(w[e]) / 2048.0f) << e;
        }
      }
      std::vector<std::vector<float>> h(3, std::vector<float>(F));
      for (auto& v : h) {
        for (float& x : v) x = static_cast<float>(rng.Uniform());
      }
      std::vector<std::vector<float>> got(3, std::vector<float>(rows)),
          want(3, std::vector<float>(rows));
      const float* hs[3] = {h[0].data(), h[1].data(), h[2].data()};
      float* gots[3] = {got[0].data(), got[1].data(), got[2].data()};
      float* wants[3] = {want[0].data(), want[1].data(), want[2].data()};
      MatVecRowsHalf(half.data(), rows, F, hs, gots, 3);
      MatVecRows(back.data(), rows, F, hs, wants, 3);
      for (int b = 0; b < 3; ++b) {
        std::vector<float> alone(static_cast<size_t>(rows));
        float* alone_out = alone.data();
        MatVecRowsHalf(half.data(), rows, F, &hs[b], &alone_out, 1);
        for (int64_t r = 0; r < rows; ++r) {
          const size_t x = static_cast<size_t>(r);
          EXPECT_EQ(got[b][x], alone[x]) << "rows " << rows << " F " << F;
          EXPECT_NEAR(got[b][x], want[b][x], 1e-5f * (1 + std::abs(want[b][x])))
              << "rows " << rows << " F " << F;
        }
      }
    }
  }
}
#endif

// The fold-in's step (DotsThenKeepMove): the products are Dot's of the
// factor before the update, bit for bit, and the factor moves to
// keep p + move q (to float rounding), the same with or without the
// products; at widths with a 32-lane body, an 8-lane part and a tail.
TEST(Kernels, DotsThenKeepMoveIsDotsThenTheUpdate) {
  Rng rng(11);
  for (const int n : {3, 8, 45, 128}) {
    const std::vector<float> p0 = Random(static_cast<size_t>(n), &rng);
    const std::vector<float> q = Random(static_cast<size_t>(n), &rng);
    const std::vector<float> z = Random(static_cast<size_t>(n), &rng);
    const float keep = 0.97f, move = -0.31f;
    std::vector<float> p = p0;
    const Dots2 d =
        DotsThenKeepMove(p.data(), q.data(), z.data(), keep, move, n);
    EXPECT_EQ(d.pz, kernels::Dot(p0.data(), z.data(), n)) << n;
    EXPECT_EQ(d.qz, kernels::Dot(q.data(), z.data(), n)) << n;
    EXPECT_NEAR(d.pz, Dot(p0.data(), z.data(), n, 1), 1e-4 * n) << n;
    EXPECT_NEAR(d.qz, Dot(q.data(), z.data(), n, 1), 1e-4 * n) << n;
    for (int i = 0; i < n; ++i) {
      const double want = static_cast<double>(keep) * p0[i] + move * q[i];
      EXPECT_NEAR(p[i], want, 1e-6 * (1 + std::abs(want))) << n << " " << i;
    }
    std::vector<float> alone = p0;
    const Dots2 none =
        DotsThenKeepMove(alone.data(), q.data(), nullptr, keep, move, n);
    EXPECT_EQ(none.pz, 0.0f);
    EXPECT_EQ(none.qz, 0.0f);
    EXPECT_EQ(alone, p) << n;
  }
}

}  // namespace
}  // namespace rbmrec::kernels
