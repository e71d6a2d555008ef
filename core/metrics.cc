#include "core/metrics.h"

#include <algorithm>
#include <cmath>

namespace rbmrec {

double NegLogLikelihood(const float* probs, int truth) {
  return -std::log(std::max(static_cast<double>(probs[truth]), 1e-12));
}

double ClasswiseEce(const float* probs, const uint8_t* truth, int64_t n, int K,
                    int bins) {
  if (n <= 0 || K <= 0 || bins <= 0) return 0;
  double total = 0;
  std::vector<double> sum_p(static_cast<size_t>(bins));
  std::vector<int64_t> count(static_cast<size_t>(bins)), hits(count);
  for (int k = 0; k < K; ++k) {
    std::fill(sum_p.begin(), sum_p.end(), 0.0);
    std::fill(count.begin(), count.end(), 0);
    std::fill(hits.begin(), hits.end(), 0);
    for (int64_t i = 0; i < n; ++i) {
      const double p =
          std::clamp(static_cast<double>(probs[i * K + k]), 0.0, 1.0);
      const size_t b =
          static_cast<size_t>(std::min(bins - 1, static_cast<int>(p * bins)));
      sum_p[b] += p;
      ++count[b];
      if (truth[i] == k) ++hits[b];
    }
    double ece = 0;
    for (size_t b = 0; b < static_cast<size_t>(bins); ++b) {
      if (count[b] == 0) continue;
      const double c = static_cast<double>(count[b]);
      ece += c / static_cast<double>(n) *
             std::abs(sum_p[b] / c - static_cast<double>(hits[b]) / c);
    }
    total += ece;
  }
  return total / K;
}

TopNScores ScoreTopN(const std::vector<int32_t>& ranked,
                     const std::vector<int32_t>& relevant_sorted, int n) {
  TopNScores s;
  if (relevant_sorted.empty() || n <= 0) return s;
  int hits = 0;
  double dcg = 0;
  const size_t len = std::min(ranked.size(), static_cast<size_t>(n));
  for (size_t r = 0; r < len; ++r) {
    if (std::binary_search(relevant_sorted.begin(), relevant_sorted.end(),
                           ranked[r])) {
      ++hits;
      dcg += 1.0 / std::log2(static_cast<double>(r) + 2.0);
    }
  }
  double ideal = 0;
  const size_t ideal_len =
      std::min(relevant_sorted.size(), static_cast<size_t>(n));
  for (size_t r = 0; r < ideal_len; ++r) {
    ideal += 1.0 / std::log2(static_cast<double>(r) + 2.0);
  }
  s.precision = static_cast<double>(hits) / n;
  s.recall =
      static_cast<double>(hits) / static_cast<double>(relevant_sorted.size());
  s.ndcg = dcg / ideal;
  return s;
}

}  // namespace rbmrec
