#ifndef RBMREC_CORE_METRICS_H_
#define RBMREC_CORE_METRICS_H_

// Evaluation metrics of the benchmark protocol (../shared/docs/benchmarks.md)
// beyond RMSE: how good a predicted distribution is (negative
// log-likelihood, calibration) and how good a top-N list is (precision,
// recall, NDCG). Pure functions; thread-safe.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rbmrec {

// -log p[truth] for one distribution over K values, with p[truth] floored at
// 1e-12 so that a zero probability costs 27.6 nats instead of infinity.
double NegLogLikelihood(const float* probs, int truth);

// The reliability table behind ClasswiseEce: for each class k, the
// predictions p_ik of n distributions (probs: n x K, row-major; truth[i] in
// [0, K)) put in `bins` equal-width bins over [0, 1] (p clamped to [0, 1];
// bin b holds [b / bins, (b + 1) / bins), the last one also 1). Per bin:
// how many rows, their mean p_ik, and the share of them whose truth is k. A
// calibrated forecaster has mean_p == observed in every bin.
struct ReliabilityBin {
  int64_t count = 0;
  double mean_p = 0;    // 0 when count == 0
  double observed = 0;  // 0 when count == 0
};
struct Reliability {
  int K = 0;
  int bins = 0;
  int64_t n = 0;                      // rows
  std::vector<ReliabilityBin> table;  // K x bins, row-major: [k * bins + b]
  const ReliabilityBin& at(int k, int b) const {
    return table[static_cast<size_t>(k) * static_cast<size_t>(bins) +
                 static_cast<size_t>(b)];
  }
};
// An empty table (K = bins = 0) for n <= 0, K <= 0 or bins <= 0.
Reliability ReliabilityTable(const float* probs, const uint8_t* truth,
                             int64_t n, int K, int bins = 10);

// Classwise expected calibration error of a reliability table: ECE_k =
// sum_b (count_b / n) |mean_p_b - observed_b|, averaged over the K classes.
// 0 for an empty table.
double ClasswiseEce(const Reliability& r);

// ClasswiseEce(ReliabilityTable(probs, truth, n, K, bins)).
double ClasswiseEce(const float* probs, const uint8_t* truth, int64_t n, int K,
                    int bins = 10);

// Precision@N, recall@N and NDCG@N of one ranked list against the set of
// relevant items (binary relevance): precision = hits / N; recall = hits /
// |relevant|; NDCG = DCG / ideal DCG with DCG = sum over ranks r (1-based)
// of the hits of 1 / log2(r + 1). `ranked` may hold fewer than N items.
// REQUIRES relevant is non-empty and sorted.
struct TopNScores {
  double precision = 0;
  double recall = 0;
  double ndcg = 0;
};
TopNScores ScoreTopN(const std::vector<int32_t>& ranked,
                     const std::vector<int32_t>& relevant_sorted, int n);

// The same scores at every cut-off, from where the hits are: the 0-based
// ranks r < n at which `ranked` holds a relevant item (ascending).
// REQUIRES relevant_sorted is sorted.
std::vector<int32_t> HitRanks(const std::vector<int32_t>& ranked,
                              const std::vector<int32_t>& relevant_sorted,
                              int n);
// Adds to (*curve)[j], for every j < curve->size(), the scores at N = j + 1
// of a list with hits at `hit_ranks` (from HitRanks) against `num_relevant`
// relevant items: bit for bit ScoreTopN(ranked, relevant_sorted, j + 1).
// Summed over users in a fixed order, this gives a deterministic mean
// curve without keeping every list. REQUIRES num_relevant > 0.
void AddTopNCurve(const std::vector<int32_t>& hit_ranks, int64_t num_relevant,
                  std::vector<TopNScores>* curve);

}  // namespace rbmrec

#endif  // RBMREC_CORE_METRICS_H_
