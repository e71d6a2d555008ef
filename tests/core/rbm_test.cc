// Checks every step of the RBM math against brute-force marginalisation on a
// tiny model (m=3 items, K=3 values, F=4 hidden units) where all states can
// be enumerated.
#include "core/rbm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace rbmrec {
namespace {

constexpr int kM = 3, kK = 3, kF = 4;

RbmParams TinyRbm(uint64_t seed) {
  RbmParams p;
  p.Resize(kM, kK, kF);
  Rng rng(seed);
  for (Eigen::Index r = 0; r < p.W.rows(); ++r)
    for (Eigen::Index j = 0; j < p.W.cols(); ++j)
      p.W(r, j) = static_cast<float>(rng.Normal());
  for (Eigen::Index r = 0; r < p.b.size(); ++r)
    p.b[r] = static_cast<float>(0.5 * rng.Normal());
  for (Eigen::Index j = 0; j < p.c.size(); ++j)
    p.c[j] = static_cast<float>(0.5 * rng.Normal());
  return p;
}

// Energy without the per-item normalisers (they cancel in every ratio).
double Energy(const RbmParams& p, const std::vector<int32_t>& items,
              const std::vector<uint8_t>& ks, int h_bits) {
  double e = 0;
  for (size_t r = 0; r < items.size(); ++r) {
    const int64_t row = p.Row(items[r], ks[r]);
    e -= p.b[row];
    for (int j = 0; j < p.F; ++j) {
      if (h_bits >> j & 1) e -= p.W(row, j);
    }
  }
  for (int j = 0; j < p.F; ++j) {
    if (h_bits >> j & 1) e -= p.c[j];
  }
  return e;
}

VisibleSet View(const std::vector<int32_t>& items,
                const std::vector<uint8_t>& ks) {
  return VisibleSet{items.data(), ks.data(),
                    static_cast<int64_t>(items.size())};
}

// All assignments of K values to the given items.
std::vector<std::vector<uint8_t>> AllStates(int n) {
  std::vector<std::vector<uint8_t>> out;
  int total = 1;
  for (int i = 0; i < n; ++i) total *= kK;
  for (int s = 0; s < total; ++s) {
    std::vector<uint8_t> ks(static_cast<size_t>(n));
    int x = s;
    for (int i = 0; i < n; ++i) {
      ks[static_cast<size_t>(i)] = static_cast<uint8_t>(x % kK);
      x /= kK;
    }
    out.push_back(ks);
  }
  return out;
}

TEST(RbmMath, HiddenConditionalMatchesBruteForce) {
  const RbmParams p = TinyRbm(1);
  const std::vector<int32_t> items = {0, 1, 2};
  for (const auto& ks : AllStates(kM)) {
    std::vector<double> num(kF, 0.0);
    double z = 0;
    for (int h = 0; h < (1 << kF); ++h) {
      const double w = std::exp(-Energy(p, items, ks, h));
      z += w;
      for (int j = 0; j < kF; ++j) {
        if (h >> j & 1) num[static_cast<size_t>(j)] += w;
      }
    }
    float x[kF];
    HiddenInput(p, View(items, ks), x);
    SigmoidInPlace(x, kF);
    for (int j = 0; j < kF; ++j)
      EXPECT_NEAR(x[j], num[static_cast<size_t>(j)] / z, 1e-6);
  }
}

TEST(RbmMath, VisibleConditionalMatchesBruteForce) {
  const RbmParams p = TinyRbm(2);
  const std::vector<int32_t> items = {0, 1, 2};
  const auto states = AllStates(kM);
  for (int h = 0; h < (1 << kF); ++h) {
    float hv[kF];
    for (int j = 0; j < kF; ++j) hv[j] = (h >> j & 1) ? 1.f : 0.f;
    // p(v_i = k | h) by summing the joint over the other items' values.
    std::vector<double> marg(static_cast<size_t>(kM * kK), 0.0);
    double z = 0;
    for (const auto& ks : states) {
      const double w = std::exp(-Energy(p, items, ks, h));
      z += w;
      for (int i = 0; i < kM; ++i)
        marg[static_cast<size_t>(i * kK + ks[static_cast<size_t>(i)])] += w;
    }
    for (int i = 0; i < kM; ++i) {
      float probs[kK];
      VisibleLogits(p, i, hv, probs);
      SoftmaxInPlace(probs, kK);
      for (int k = 0; k < kK; ++k) {
        EXPECT_NEAR(probs[k], marg[static_cast<size_t>(i * kK + k)] / z, 1e-6);
      }
    }
  }
}

TEST(RbmMath, ExactPredictionAndFreeEnergyMatchBruteForce) {
  const RbmParams p = TinyRbm(3);
  // Condition on items 0 and 1, predict item 2.
  const std::vector<int32_t> items = {0, 1};
  for (const auto& ks : AllStates(2)) {
    // Free energy: F(V) = -log sum_h exp(-E(V, h)).
    double z = 0;
    for (int h = 0; h < (1 << kF); ++h) z += std::exp(-Energy(p, items, ks, h));
    EXPECT_NEAR(FreeEnergy(p, View(items, ks)), -std::log(z), 1e-5);

    std::vector<double> pk(kK, 0.0);
    double total = 0;
    for (int k = 0; k < kK; ++k) {
      std::vector<int32_t> it = {0, 1, 2};
      std::vector<uint8_t> kk = {ks[0], ks[1], static_cast<uint8_t>(k)};
      for (int h = 0; h < (1 << kF); ++h)
        pk[static_cast<size_t>(k)] += std::exp(-Energy(p, it, kk, h));
      total += pk[static_cast<size_t>(k)];
    }
    float x[kF], probs[kK];
    HiddenInput(p, View(items, ks), x);
    PredictExact(p, x, 2, probs);
    float sum = 0;
    for (int k = 0; k < kK; ++k) {
      EXPECT_NEAR(probs[k], pk[static_cast<size_t>(k)] / total, 1e-6);
      sum += probs[k];
    }
    EXPECT_NEAR(sum, 1.0, 1e-6);
    // Mean field is an approximation: a distribution, close but not equal.
    SigmoidInPlace(x, kF);
    PredictMeanField(p, x, 2, probs);
    sum = 0;
    for (int k = 0; k < kK; ++k) {
      EXPECT_TRUE(std::isfinite(probs[k]));
      sum += probs[k];
    }
    EXPECT_NEAR(sum, 1.0, 1e-6);
  }
}

// The same inputs give the same bits wherever they are in memory: at every
// offset of a 64-byte line, for lengths with and without a partial block.
TEST(RbmMath, SigmoidDoesNotDependOnAlignment) {
  for (int F : {13, 100, 200}) {
    std::vector<float> in(static_cast<size_t>(F));
    for (int j = 0; j < F; ++j) in[j] = 0.37f * static_cast<float>(j - F / 2);
    std::vector<float> want = in;
    SigmoidInPlace(want.data(), F);
    std::vector<float> buf(static_cast<size_t>(F) + 16);
    for (int offset = 0; offset < 16; ++offset) {
      float* x = buf.data() + offset;
      std::copy(in.begin(), in.end(), x);
      SigmoidInPlace(x, F);
      EXPECT_TRUE(std::equal(want.begin(), want.end(), x))
          << "F " << F << " offset " << offset;
    }
    for (int j = 0; j < F; ++j) {
      EXPECT_NEAR(want[j], 1.0 / (1.0 + std::exp(-static_cast<double>(in[j]))),
                  1e-6);
    }
  }
}

TEST(RbmMath, SoftmaxStaysFiniteForHugeLogits) {
  float z[4] = {1e4f, -1e4f, 1e4f - 1.0f, 0.0f};
  SoftmaxInPlace(z, 4);
  float sum = 0;
  for (float v : z) {
    EXPECT_TRUE(std::isfinite(v));
    sum += v;
  }
  EXPECT_NEAR(sum, 1.0f, 1e-6);
  EXPECT_NEAR(z[0], 1.0f / (1.0f + std::exp(-1.0f)), 1e-6);
  EXPECT_EQ(z[1], 0.0f);
  float n[3] = {-1e4f, -1e4f, -1e4f};
  SoftmaxInPlace(n, 3);
  for (float v : n) EXPECT_NEAR(v, 1.0f / 3, 1e-6);
  EXPECT_TRUE(std::isfinite(Softplus(1e4f)));
  EXPECT_NEAR(Softplus(1e4f), 1e4f, 1e-2);
  EXPECT_NEAR(Softplus(-1e4f), 0.0f, 1e-6);
  // A query whose weights are huge still predicts a finite distribution.
  RbmParams p = TinyRbm(4);
  p.W *= 1e4f;
  float x[kF], probs[kK];
  const std::vector<int32_t> items = {0};
  const std::vector<uint8_t> ks = {1};
  HiddenInput(p, View(items, ks), x);
  PredictExact(p, x, 2, probs);
  for (float v : probs) EXPECT_TRUE(std::isfinite(v));
}

TEST(RbmMath, SoftplusSumMatchesDoubleReference) {
  Rng rng(7);
  // F = 1, 100 (one block), 120, 121 and 1000 (several blocks).
  for (int F : {1, 7, 100, 120, 121, 1000}) {
    for (float scale : {0.1f, 3.0f, 30.0f}) {
      std::vector<float> x(static_cast<size_t>(F)), w(x.size());
      double ref = 0;
      for (size_t j = 0; j < x.size(); ++j) {
        x[j] = scale * (2 * rng.Uniform() - 1);
        w[j] = scale * (2 * rng.Uniform() - 1);
        ref += Softplus(static_cast<double>(x[j]) + w[j]);
      }
      const float got = SoftplusSum(x.data(), w.data(), F);
      EXPECT_NEAR(got, ref, 2e-6 * F + 1e-6 * std::abs(ref))
          << "F " << F << " scale " << scale;
    }
  }
  // Extreme inputs stay finite: 1000 factors of exactly 2 (t = 0) would
  // overflow one float product; +-1e4 saturates exp.
  std::vector<float> zeros(1000, 0.0f), big(1000, 1e4f), small(1000, -1e4f);
  EXPECT_NEAR(SoftplusSum(zeros.data(), zeros.data(), 1000),
              1000 * std::log(2.0), 1e-2);
  EXPECT_NEAR(SoftplusSum(big.data(), zeros.data(), 1000), 1e7, 1e2);
  EXPECT_NEAR(SoftplusSum(small.data(), zeros.data(), 1000), 0.0, 1e-6);
}

TEST(RbmMath, SoftplusSumFromExpMatchesDoubleReference) {
  Rng rng(9);
  // Partial vectors (1, 7, 201), several renormalisations (1000), and
  // inputs up to the limit, where each factor is ~e^80.
  for (int F : {1, 7, 8, 64, 100, 201, 1000}) {
    for (float scale : {0.1f, 3.0f, 30.0f, kExpSoftplusLimit}) {
      std::vector<float> x(static_cast<size_t>(F)), w(x.size());
      std::vector<float> ex(x.size()), ew(x.size());
      double ref = 0;
      for (size_t j = 0; j < x.size(); ++j) {
        x[j] = scale * (2 * rng.Uniform() - 1);
        w[j] = scale * (2 * rng.Uniform() - 1);
        ex[j] = std::exp(x[j]);
        ew[j] = std::exp(w[j]);
        ref += Softplus(static_cast<double>(x[j]) + w[j]);
      }
      const float got = SoftplusSumFromExp(ex.data(), ew.data(), F);
      EXPECT_NEAR(got, ref, 2e-6 * F + 1e-6 * std::abs(ref))
          << "F " << F << " scale " << scale;
      EXPECT_NEAR(got, SoftplusSum(x.data(), w.data(), F),
                  4e-6 * F + 2e-6 * std::abs(ref))
          << "F " << F << " scale " << scale;
    }
  }
  // Every factor at its largest: 1000 of e^80 (2^115.4 each) stay finite.
  std::vector<float> top(1000, std::exp(kExpSoftplusLimit));
  EXPECT_NEAR(SoftplusSumFromExp(top.data(), top.data(), 1000),
              1000 * 2 * kExpSoftplusLimit, 1e-1);
}

// Several rows' products computed together are each row's alone, bit for
// bit, for every row count (the chunks of 4, 3, 2 and 1) and partial
// vectors.
TEST(RbmMath, SoftplusProductsFromExpAreEachRowsAlone) {
  Rng rng(21);
  for (int F : {1, 7, 8, 64, 201}) {
    for (int R = 0; R <= 9; ++R) {
      std::vector<float> ex(static_cast<size_t>(F));
      for (float& v : ex) v = std::exp(20 * (2 * rng.Uniform() - 1));
      std::vector<std::vector<float>> ew(static_cast<size_t>(R), ex);
      std::vector<const float*> rows;
      for (std::vector<float>& row : ew) {
        for (float& v : row) v = std::exp(20 * (2 * rng.Uniform() - 1));
        rows.push_back(row.data());
      }
      std::vector<double> mantissa(static_cast<size_t>(R) + 1, -1);
      std::vector<int64_t> exp2(mantissa.size(), -1);
      SoftplusProductsFromExp(ex.data(), rows.data(), R, F, mantissa.data(),
                              exp2.data());
      for (int r = 0; r < R; ++r) {
        int64_t want_exp2 = 0;
        const double want = SoftplusProductFromExp(
            ex.data(), rows[static_cast<size_t>(r)], F, &want_exp2);
        EXPECT_EQ(mantissa[static_cast<size_t>(r)], want)
            << "F " << F << " R " << R << " row " << r;
        EXPECT_EQ(exp2[static_cast<size_t>(r)], want_exp2)
            << "F " << F << " R " << R << " row " << r;
      }
      EXPECT_EQ(mantissa[static_cast<size_t>(R)], -1);  // nothing past R
    }
  }
}

// Inputs beyond kExpSoftplusLimit split off by SplitSaturated: the product
// over the rest, plus hi . w, plus the returned hi_sum, is the softplus sum
// for rows within kSaturatedRowLimit.
TEST(RbmMath, SplitSaturatedKeepsTheSoftplusSum) {
  Rng rng(13);
  for (int F : {1, 7, 100, 201}) {
    for (float x_scale : {50.0f, 200.0f, 1e4f}) {
      std::vector<float> x(static_cast<size_t>(F)), w(x.size());
      std::vector<float> ex(x.size()), hi(x.size()), ew(x.size());
      double ref = 0;
      int saturated = 0;
      for (size_t j = 0; j < x.size(); ++j) {
        x[j] = x_scale * (2 * rng.Uniform() - 1);
        w[j] = kSaturatedRowLimit * (2 * rng.Uniform() - 1);
        ew[j] = std::exp(w[j]);
        ref += Softplus(static_cast<double>(x[j]) + w[j]);
        saturated += std::abs(x[j]) > kExpSoftplusLimit;
      }
      const double hi_sum = SplitSaturated(x.data(), F, ex.data(), hi.data());
      double dot = 0, hi_x = 0;
      for (size_t j = 0; j < x.size(); ++j) {
        const bool up = x[j] > kExpSoftplusLimit;
        EXPECT_EQ(hi[j], up ? 1.0f : 0.0f);
        EXPECT_EQ(ex[j],
                  std::abs(x[j]) > kExpSoftplusLimit ? 0.0f : std::exp(x[j]));
        dot += static_cast<double>(hi[j]) * w[j];
        if (up) hi_x += x[j];
      }
      EXPECT_EQ(hi_sum, hi_x);
      const double got =
          SoftplusSumFromExp(ex.data(), ew.data(), F) + dot + hi_sum;
      EXPECT_NEAR(got, ref, 2e-6 * F + 1e-6 * std::abs(ref))
          << "F " << F << " scale " << x_scale << " saturated " << saturated;
    }
  }
}

// ExactLogit through the exp(W) table: the direct softplus sum (in double)
// on rows within kSaturatedRowLimit, with and without saturated inputs, and
// SoftplusSum's exact bits on a row beyond the limit (flagged not ok).
TEST(RbmMath, ExactLogitFromTheExpTableIsTheSoftplusSum) {
  Rng rng(17);
  RbmParams p;
  p.Resize(3, 2, 150);
  for (int64_t r = 0; r < p.W.rows(); ++r) {
    for (int j = 0; j < p.F; ++j) {
      p.W(r, j) = 3.0f * (2 * rng.Uniform() - 1);
    }
    p.b[r] = 0.5f * static_cast<float>(r);
  }
  p.W(5, 7) = 1.5f * kSaturatedRowLimit;  // row 5 takes SoftplusSum
  ExpWeights e;
  RefreshExpWeights(p, 0, p.W.rows(), &e);
  ASSERT_EQ(e.ok.size(), 6u);
  for (int64_t r = 0; r < 6; ++r) EXPECT_EQ(e.ok[r], r == 5 ? 0 : 1);
  for (float x_scale : {2.0f, 30.0f, 300.0f}) {
    std::vector<float> x(static_cast<size_t>(p.F));
    for (float& v : x) v = x_scale * (2 * rng.Uniform() - 1);
    ExpInput in;
    SetExpInput(x.data(), p.F, &in);
    for (int64_t r = 0; r < p.W.rows(); ++r) {
      double ref = p.b[r];
      for (int j = 0; j < p.F; ++j) {
        ref += Softplus(static_cast<double>(x[j]) + p.W(r, j));
      }
      const float got = ExactLogit(p, e, in.view(), x.data(), r);
      if (r == 5) {
        EXPECT_EQ(got, p.b[r] + SoftplusSum(x.data(), p.W.row(r).data(), p.F));
      }
      EXPECT_NEAR(got, ref, 3e-4 + 2e-6 * std::abs(ref))
          << "row " << r << " scale " << x_scale;
    }
    float probs[2], want[2];
    PredictExactFromExp(p, e, in.view(), x.data(), 1, probs);
    PredictExact(p, x.data(), 1, want);
    EXPECT_NEAR(probs[0], want[0], 1e-5);
    EXPECT_NEAR(probs[0] + probs[1], 1.0f, 1e-6);
  }
  // Rows added later keep the old ones and fill the new ones.
  RbmParams q = p;
  q.W.conservativeResize(8, p.F);
  q.W.bottomRows(2).setConstant(0.25f);
  RefreshExpWeights(q, 6, 8, &e);
  ASSERT_EQ(e.ew.rows(), 8);
  EXPECT_EQ(e.ew(7, 3), std::exp(0.25f));
  EXPECT_EQ(e.ew(0, 3), std::exp(p.W(0, 3)));
}

TEST(RbmMath, SoftmaxRowsIsSoftmaxInPlaceOnEveryRow) {
  Rng rng(11);
  for (int K : {1, 2, 3, 5, 8, 10}) {
    for (int64_t rows : {1, 2, 7, 33}) {
      std::vector<float> a(static_cast<size_t>(rows * K));
      for (size_t i = 0; i < a.size(); ++i) {
        a[i] = 40 * (2 * rng.Uniform() - 1);
      }
      a[0] = 1e4f;  // one saturated row
      std::vector<float> b = a;
      SoftmaxRows(a.data(), rows, K);
      for (int64_t r = 0; r < rows; ++r) SoftmaxInPlace(b.data() + r * K, K);
      for (size_t i = 0; i < a.size(); ++i) {
        ASSERT_EQ(a[i], b[i]) << "K " << K << " rows " << rows << " i " << i;
        ASSERT_TRUE(std::isfinite(a[i]));
      }
    }
  }
}

TEST(RbmMath, SoftmaxSampleRowsDrawsAsSampleCategorical) {
  Rng rng(17);
  for (int K : {1, 2, 3, 5, 8, 10}) {
    for (int64_t rows : {1, 7, 8, 33}) {
      const size_t n = static_cast<size_t>(rows);
      std::vector<float> z(n * static_cast<size_t>(K)), u(n);
      for (float& x : z) x = 12 * (2 * rng.Uniform() - 1);
      z[0] = 1e4f;  // one saturated row
      std::vector<float> p = z;
      SoftmaxRows(p.data(), rows, K);
      for (size_t r = 0; r < n; ++r) {
        const float* pr = p.data() + r * static_cast<size_t>(K);
        switch (r % 4) {
          case 0:  // exactly a cumulative probability: the next level
            u[r] = K > 1 ? pr[0] : 0.5f;
            break;
          case 1:
            u[r] = 0.0f;
            break;
          case 2:
            u[r] = 0.99999994f;  // the largest float below 1
            break;
          default:
            u[r] = rng.Uniform();
        }
      }
      std::vector<uint8_t> got(n, 99);
      std::vector<double> mean(n, -1);
      std::vector<float> work = z;
      SoftmaxSampleRows(work.data(), rows, K, u.data(), got.data(),
                        mean.data());
      for (size_t r = 0; r < n; ++r) {
        const float* pr = p.data() + r * static_cast<size_t>(K);
        ASSERT_EQ(got[r], SampleCategorical(pr, K, u[r]))
            << "K " << K << " rows " << rows << " row " << r;
        double want = 0;
        for (int k = 0; k < K; ++k) want += static_cast<double>(k) * pr[k];
        ASSERT_EQ(mean[r], want)
            << "K " << K << " rows " << rows << " row " << r;
      }
      // Without means: the same draws.
      std::vector<uint8_t> again(n, 99);
      work = z;
      SoftmaxSampleRows(work.data(), rows, K, u.data(), again.data(), nullptr);
      EXPECT_EQ(again, got);
    }
  }
}

TEST(RbmMath, SoftmaxDotRowsIsTheDotOfSoftmaxInPlace) {
  Rng rng(13);
  for (int K : {1, 3, 5, 8, 12}) {
    for (int64_t rows : {1, 8, 21}) {
      std::vector<float> z(static_cast<size_t>(rows * K)), values(K);
      for (float& x : z) x = 30 * (2 * rng.Uniform() - 1);
      for (int k = 0; k < K; ++k)
        values[k] = 1.0f + 0.5f * static_cast<float>(k);
      z[1 % z.size()] = -1e4f;
      std::vector<float> got(static_cast<size_t>(rows));
      SoftmaxDotRows(z.data(), rows, K, values.data(), got.data());
      for (int64_t r = 0; r < rows; ++r) {
        std::vector<float> p(z.begin() + r * K, z.begin() + (r + 1) * K);
        SoftmaxInPlace(p.data(), K);
        float want = 0;
        for (int k = 0; k < K; ++k) want += p[k] * values[k];
        // The same probabilities; the dot may round differently in the
        // last bit (fused multiply-add or not).
        ASSERT_NEAR(got[static_cast<size_t>(r)], want, 1e-6f * (1 + want))
            << "K " << K << " rows " << rows << " row " << r;
      }
    }
  }
}

TEST(RbmMath, CategoricalSamplesPassChiSquare) {
  const float probs[5] = {0.05f, 0.1f, 0.2f, 0.4f, 0.25f};
  Rng rng(42);
  constexpr int kN = 200000;
  int counts[5] = {0, 0, 0, 0, 0};
  for (int n = 0; n < kN; ++n)
    ++counts[SampleCategorical(probs, 5, rng.Uniform())];
  double chi2 = 0;
  for (int k = 0; k < 5; ++k) {
    const double expected = kN * static_cast<double>(probs[k]);
    chi2 += (counts[k] - expected) * (counts[k] - expected) / expected;
  }
  // 99.9th percentile of chi-square with 4 degrees of freedom.
  EXPECT_LT(chi2, 18.47);
  // A wrong sampler (K independent Bernoullis, taking the first success)
  // fails the same test: the test can fail.
  int bad[5] = {0, 0, 0, 0, 0};
  for (int n = 0; n < kN; ++n) {
    int pick = 4;
    for (int k = 0; k < 5; ++k) {
      if (rng.Uniform() < probs[k]) {
        pick = k;
        break;
      }
    }
    ++bad[pick];
  }
  double chi2_bad = 0;
  for (int k = 0; k < 5; ++k) {
    const double expected = kN * static_cast<double>(probs[k]);
    chi2_bad += (bad[k] - expected) * (bad[k] - expected) / expected;
  }
  EXPECT_GT(chi2_bad, 18.47);
}

TEST(RbmMath, SampledVisiblesFollowTheConditional) {
  // The Gibbs step's visible draws for fixed h follow p(v | h).
  const RbmParams p = TinyRbm(5);
  float hv[kF] = {1, 0, 1, 1};
  float probs[kK];
  VisibleLogits(p, 1, hv, probs);
  SoftmaxInPlace(probs, kK);
  Rng rng(7);
  constexpr int kN = 100000;
  int counts[kK] = {0, 0, 0};
  for (int n = 0; n < kN; ++n)
    ++counts[SampleCategorical(probs, kK, rng.Uniform())];
  double chi2 = 0;
  for (int k = 0; k < kK; ++k) {
    const double e = kN * static_cast<double>(probs[k]);
    chi2 += (counts[k] - e) * (counts[k] - e) / e;
  }
  EXPECT_LT(chi2, 13.82);  // 99.9th percentile, 2 degrees of freedom
}

TEST(RbmMath, CdGradientWithLongChainsApproachesExactGradient) {
  const RbmParams p = TinyRbm(6);
  p.W.size();
  const std::vector<int32_t> items = {0, 1, 2};
  const std::vector<uint8_t> data = {2, 0, 1};
  // Exact gradient of log p(V_data) w.r.t. W:
  //   E_{h|V_data}[v h] - E_{V,h}[v h] over the user's RBM (items 0..2).
  RowMatrixXf exact = RowMatrixXf::Zero(kM * kK, kF);
  {
    float h0[kF];
    HiddenInput(p, View(items, data), h0);
    SigmoidInPlace(h0, kF);
    for (int i = 0; i < kM; ++i)
      for (int j = 0; j < kF; ++j)
        exact(p.Row(i, data[static_cast<size_t>(i)]), j) += h0[j];
    double z = 0;
    RowMatrixXf model = RowMatrixXf::Zero(kM * kK, kF);
    for (const auto& ks : AllStates(kM)) {
      for (int h = 0; h < (1 << kF); ++h) {
        const double w = std::exp(-Energy(p, items, ks, h));
        z += w;
        for (int i = 0; i < kM; ++i)
          for (int j = 0; j < kF; ++j)
            if (h >> j & 1)
              model(p.Row(i, ks[static_cast<size_t>(i)]), j) +=
                  static_cast<float>(w);
      }
    }
    exact -= model / static_cast<float>(z);
  }
  auto cd_gradient = [&](int T, int chains) {
    RowMatrixXf g = RowMatrixXf::Zero(kM * kK, kF);
    GibbsScratch sc(kF, kK);
    Rng rng(99);
    float h0[kF], ht[kF];
    uint8_t vt[kM];
    for (int c = 0; c < chains; ++c) {
      CdChain(p, View(items, data), T, &rng, &sc, h0, ht, vt);
      for (int i = 0; i < kM; ++i) {
        for (int j = 0; j < kF; ++j) {
          g(p.Row(i, data[static_cast<size_t>(i)]), j) += h0[j];
          g(p.Row(i, vt[i]), j) -= ht[j];
        }
      }
    }
    return RowMatrixXf(g / static_cast<float>(chains));
  };
  const float err_long =
      (cd_gradient(100, 20000) - exact).cwiseAbs().maxCoeff();
  const float err_cd1 = (cd_gradient(1, 20000) - exact).cwiseAbs().maxCoeff();
  EXPECT_LT(err_long, 0.03f);        // sampling noise only
  EXPECT_GT(err_cd1, 2 * err_long);  // CD-1 is biased; long chains are not
}

}  // namespace
}  // namespace rbmrec
