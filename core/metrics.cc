#include "core/metrics.h"

#include <algorithm>
#include <cmath>

namespace rbmrec {

double NegLogLikelihood(const float* probs, int truth) {
  return -std::log(std::max(static_cast<double>(probs[truth]), 1e-12));
}

Reliability ReliabilityTable(const float* probs, const uint8_t* truth,
                             int64_t n, int K, int bins) {
  Reliability r;
  if (n <= 0 || K <= 0 || bins <= 0) return r;
  r.K = K;
  r.bins = bins;
  r.n = n;
  const size_t cells = static_cast<size_t>(K) * static_cast<size_t>(bins);
  std::vector<double> sum_p(cells, 0.0);
  std::vector<int64_t> hits(cells, 0);
  r.table.resize(cells);
  for (int64_t i = 0; i < n; ++i) {
    for (int k = 0; k < K; ++k) {
      const double p =
          std::clamp(static_cast<double>(probs[i * K + k]), 0.0, 1.0);
      const size_t cell =
          static_cast<size_t>(k) * static_cast<size_t>(bins) +
          static_cast<size_t>(std::min(bins - 1, static_cast<int>(p * bins)));
      sum_p[cell] += p;
      ++r.table[cell].count;
      if (truth[i] == k) ++hits[cell];
    }
  }
  for (size_t cell = 0; cell < cells; ++cell) {
    ReliabilityBin& bin = r.table[cell];
    if (bin.count == 0) continue;
    const double c = static_cast<double>(bin.count);
    bin.mean_p = sum_p[cell] / c;
    bin.observed = static_cast<double>(hits[cell]) / c;
  }
  return r;
}

double ClasswiseEce(const Reliability& r) {
  if (r.n <= 0 || r.K <= 0 || r.bins <= 0) return 0;
  double total = 0;
  for (int k = 0; k < r.K; ++k) {
    double ece = 0;
    for (int b = 0; b < r.bins; ++b) {
      const ReliabilityBin& bin = r.at(k, b);
      if (bin.count == 0) continue;
      ece += static_cast<double>(bin.count) / static_cast<double>(r.n) *
             std::abs(bin.mean_p - bin.observed);
    }
    total += ece;
  }
  return total / r.K;
}

double ClasswiseEce(const float* probs, const uint8_t* truth, int64_t n, int K,
                    int bins) {
  return ClasswiseEce(ReliabilityTable(probs, truth, n, K, bins));
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

std::vector<int32_t> HitRanks(const std::vector<int32_t>& ranked,
                              const std::vector<int32_t>& relevant_sorted,
                              int n) {
  std::vector<int32_t> out;
  const size_t len =
      std::min(ranked.size(), static_cast<size_t>(std::max(n, 0)));
  for (size_t r = 0; r < len; ++r) {
    if (std::binary_search(relevant_sorted.begin(), relevant_sorted.end(),
                           ranked[r])) {
      out.push_back(static_cast<int32_t>(r));
    }
  }
  return out;
}

void AddTopNCurve(const std::vector<int32_t>& hit_ranks, int64_t num_relevant,
                  std::vector<TopNScores>* curve) {
  if (num_relevant <= 0) return;
  // The running sums in ScoreTopN's order, so that each cut-off matches it
  // bit for bit.
  int hits = 0;
  double dcg = 0, ideal = 0;
  size_t next = 0;
  for (size_t r = 0; r < curve->size(); ++r) {
    const double gain = 1.0 / std::log2(static_cast<double>(r) + 2.0);
    if (next < hit_ranks.size() && hit_ranks[next] == static_cast<int32_t>(r)) {
      ++hits;
      dcg += gain;
      ++next;
    }
    if (static_cast<int64_t>(r) < num_relevant) ideal += gain;
    TopNScores& s = (*curve)[r];
    s.precision += static_cast<double>(hits) / static_cast<int>(r + 1);
    s.recall += static_cast<double>(hits) / static_cast<double>(num_relevant);
    s.ndcg += dcg / ideal;
  }
}

}  // namespace rbmrec
