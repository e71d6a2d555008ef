#include "core/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace rbmrec {
namespace {

TEST(Metrics, NegLogLikelihoodIsFlooredNotInfinite) {
  const float p[3] = {0.5f, 0.5f, 0.0f};
  EXPECT_NEAR(NegLogLikelihood(p, 0), std::log(2.0), 1e-6);
  EXPECT_NEAR(NegLogLikelihood(p, 2), -std::log(1e-12), 1e-6);
}

TEST(Metrics, EceIsZeroWhenCalibratedAndLargeWhenNot) {
  // Two rows predicting (0.75, 0.25): truth 0 in 3 of 4 -> calibrated.
  const std::vector<float> p = {0.75f, 0.25f, 0.75f, 0.25f,
                                0.75f, 0.25f, 0.75f, 0.25f};
  const uint8_t calibrated[4] = {0, 0, 0, 1};
  EXPECT_NEAR(ClasswiseEce(p.data(), calibrated, 4, 2), 0.0, 1e-9);
  // Always wrong with confidence 0.75: |0.75 - 0| for class 0 and
  // |0.25 - 1| for class 1.
  const uint8_t wrong[4] = {1, 1, 1, 1};
  EXPECT_NEAR(ClasswiseEce(p.data(), wrong, 4, 2), 0.75, 1e-6);
  EXPECT_EQ(ClasswiseEce(p.data(), wrong, 0, 2), 0.0);
}

TEST(Metrics, TopNAgainstHandComputedValues) {
  // Relevant {2, 5, 9}; ranked hits at ranks 1 and 3.
  const TopNScores s = ScoreTopN({5, 1, 9, 4}, {2, 5, 9}, 4);
  EXPECT_DOUBLE_EQ(s.precision, 0.5);
  EXPECT_DOUBLE_EQ(s.recall, 2.0 / 3.0);
  const double dcg = 1.0 + 1.0 / 2.0;  // 1/log2(2) + 1/log2(4)
  const double ideal = 1.0 + 1.0 / std::log2(3.0) + 0.5;
  EXPECT_NEAR(s.ndcg, dcg / ideal, 1e-12);
  // A perfect list scores 1; a list shorter than N counts as misses.
  EXPECT_DOUBLE_EQ(ScoreTopN({2, 5, 9}, {2, 5, 9}, 3).ndcg, 1.0);
  EXPECT_DOUBLE_EQ(ScoreTopN({2}, {2, 5, 9}, 10).precision, 0.1);
}

TEST(Metrics, ReliabilityTableAgainstHandComputedValues) {
  // Three rows over K = 2 values, 4 bins of width 0.25.
  const std::vector<float> p = {0.1f, 0.9f,   // truth 1
                                0.2f, 0.8f,   // truth 0
                                0.6f, 0.4f};  // truth 0
  const uint8_t truth[3] = {1, 0, 0};
  const Reliability r = ReliabilityTable(p.data(), truth, 3, 2, 4);
  ASSERT_EQ(r.K, 2);
  ASSERT_EQ(r.bins, 4);
  ASSERT_EQ(r.n, 3);
  ASSERT_EQ(r.table.size(), 8u);
  // Class 0: 0.1 and 0.2 in bin 0 (one of the two rows is class 0), 0.6 in
  // bin 2 (class 0).
  EXPECT_EQ(r.at(0, 0).count, 2);
  EXPECT_NEAR(r.at(0, 0).mean_p, 0.15, 1e-7);
  EXPECT_DOUBLE_EQ(r.at(0, 0).observed, 0.5);
  EXPECT_EQ(r.at(0, 1).count, 0);
  EXPECT_EQ(r.at(0, 1).mean_p, 0.0);
  EXPECT_EQ(r.at(0, 2).count, 1);
  EXPECT_NEAR(r.at(0, 2).mean_p, 0.6, 1e-7);
  EXPECT_DOUBLE_EQ(r.at(0, 2).observed, 1.0);
  EXPECT_EQ(r.at(0, 3).count, 0);
  // Class 1: 0.4 in bin 1 (not class 1), 0.9 and 0.8 in bin 3 (one is).
  EXPECT_EQ(r.at(1, 0).count, 0);
  EXPECT_EQ(r.at(1, 1).count, 1);
  EXPECT_DOUBLE_EQ(r.at(1, 1).observed, 0.0);
  EXPECT_EQ(r.at(1, 2).count, 0);
  EXPECT_EQ(r.at(1, 3).count, 2);
  EXPECT_NEAR(r.at(1, 3).mean_p, 0.85, 1e-7);
  EXPECT_DOUBLE_EQ(r.at(1, 3).observed, 0.5);
  // ECE_0 = 2/3 |0.15 - 0.5| + 1/3 |0.6 - 1|; ECE_1 = 1/3 |0.4 - 0| +
  // 2/3 |0.85 - 0.5|.
  const double want =
      ((2.0 / 3 * 0.35 + 1.0 / 3 * 0.4) + (1.0 / 3 * 0.4 + 2.0 / 3 * 0.35)) / 2;
  EXPECT_NEAR(ClasswiseEce(r), want, 1e-6);
  EXPECT_EQ(ClasswiseEce(r), ClasswiseEce(p.data(), truth, 3, 2, 4));
  // p = 1 falls in the last bin; an empty input gives an empty table.
  const float one[2] = {1.0f, 0.0f};
  const uint8_t zero[1] = {0};
  const Reliability edge = ReliabilityTable(one, zero, 1, 2, 4);
  EXPECT_EQ(edge.at(0, 3).count, 1);
  EXPECT_EQ(edge.at(1, 0).count, 1);
  EXPECT_TRUE(ReliabilityTable(one, zero, 0, 2, 4).table.empty());
  EXPECT_EQ(ClasswiseEce(ReliabilityTable(one, zero, 0, 2, 4)), 0.0);
}

TEST(Metrics, ReliabilityOfACalibratedForecasterFollowsTheDiagonal) {
  // Truth drawn from the predicted distribution itself: in every bin with
  // enough rows the observed share is close to the mean prediction.
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> unif(0.0, 1.0);
  constexpr int K = 3;
  constexpr int64_t n = 200000;
  std::vector<float> p(static_cast<size_t>(n * K));
  std::vector<uint8_t> truth(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    double w[K], sum = 0;
    for (double& x : w) sum += (x = unif(rng) * unif(rng));
    for (int k = 0; k < K; ++k) {
      p[static_cast<size_t>(i * K + k)] = static_cast<float>(w[k] / sum);
    }
    const double u = unif(rng) * sum;
    double acc = 0;
    int t = K - 1;
    for (int k = 0; k < K; ++k) {
      acc += w[k];
      if (u < acc) {
        t = k;
        break;
      }
    }
    truth[static_cast<size_t>(i)] = static_cast<uint8_t>(t);
  }
  const Reliability r = ReliabilityTable(p.data(), truth.data(), n, K);
  int64_t total = 0;
  int checked = 0;
  for (int k = 0; k < K; ++k) {
    int64_t class_total = 0;
    for (int b = 0; b < r.bins; ++b) {
      const ReliabilityBin& bin = r.at(k, b);
      class_total += bin.count;
      if (bin.count == 0) continue;
      EXPECT_GE(bin.mean_p, b / 10.0 - 1e-9);
      EXPECT_LE(bin.mean_p, (b + 1) / 10.0 + 1e-9);
      if (bin.count < 2000) continue;
      // 4 standard errors of a share.
      const double se = std::sqrt(bin.mean_p * (1 - bin.mean_p) /
                                  static_cast<double>(bin.count));
      EXPECT_NEAR(bin.observed, bin.mean_p, 4 * se + 1e-3) << k << " " << b;
      ++checked;
    }
    EXPECT_EQ(class_total, n);  // every row in one bin of every class
    total += class_total;
  }
  EXPECT_EQ(total, n * K);
  EXPECT_GT(checked, 15);
  EXPECT_LT(ClasswiseEce(r), 0.005);
  // Shifting every truth by one class breaks it.
  for (uint8_t& t : truth) t = static_cast<uint8_t>((t + 1) % K);
  EXPECT_GT(ClasswiseEce(p.data(), truth.data(), n, K), 0.05);
}

TEST(Metrics, TopNCurveMatchesScoreTopNAtEveryCutoff) {
  std::mt19937 rng(3);
  for (int round = 0; round < 50; ++round) {
    std::vector<int32_t> items(40);
    for (int i = 0; i < 40; ++i) items[static_cast<size_t>(i)] = i;
    std::shuffle(items.begin(), items.end(), rng);
    const size_t len = 1 + rng() % 30;
    const std::vector<int32_t> ranked(items.begin(),
                                      items.begin() + static_cast<long>(len));
    std::shuffle(items.begin(), items.end(), rng);
    std::vector<int32_t> relevant(items.begin(),
                                  items.begin() + 1 + rng() % 15);
    relevant.push_back(-1);  // an item no list holds
    std::sort(relevant.begin(), relevant.end());
    const int n = 1 + static_cast<int>(rng() % 40);
    const std::vector<int32_t> hits = HitRanks(ranked, relevant, n);
    std::vector<TopNScores> curve(static_cast<size_t>(n));
    AddTopNCurve(hits, static_cast<int64_t>(relevant.size()), &curve);
    for (int j = 0; j < n; ++j) {
      const TopNScores want = ScoreTopN(ranked, relevant, j + 1);
      const TopNScores& got = curve[static_cast<size_t>(j)];
      EXPECT_EQ(got.precision, want.precision) << round << " @" << j + 1;
      EXPECT_EQ(got.recall, want.recall) << round << " @" << j + 1;
      EXPECT_EQ(got.ndcg, want.ndcg) << round << " @" << j + 1;
    }
  }
  // Hand-computed: hits at ranks 1 and 3 of 4 against 3 relevant items.
  EXPECT_EQ(HitRanks({5, 1, 9, 4}, {2, 5, 9}, 4), (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(HitRanks({5, 1, 9, 4}, {2, 5, 9}, 2), (std::vector<int32_t>{0}));
  std::vector<TopNScores> c(4);
  AddTopNCurve({0, 2}, 3, &c);
  AddTopNCurve({}, 2, &c);  // a second list with no hits adds zeros
  EXPECT_DOUBLE_EQ(c[0].precision, 1.0);
  EXPECT_DOUBLE_EQ(c[1].precision, 0.5);
  EXPECT_DOUBLE_EQ(c[2].precision, 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(c[3].recall, 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(c[0].ndcg, 1.0);
}

}  // namespace
}  // namespace rbmrec
