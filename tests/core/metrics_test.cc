#include "core/metrics.h"

#include <cmath>
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

}  // namespace
}  // namespace rbmrec
