#ifndef RBMREC_CORE_METRICS_H_
#define RBMREC_CORE_METRICS_H_

// Evaluation metrics of the benchmark protocol (../shared/docs/benchmarks.md)
// beyond RMSE: how good a predicted distribution is (negative
// log-likelihood, calibration) and how good a top-N list is (precision,
// recall, NDCG). Pure functions; thread-safe.

#include <cstdint>
#include <vector>

namespace rbmrec {

// -log p[truth] for one distribution over K values, with p[truth] floored at
// 1e-12 so that a zero probability costs 27.6 nats instead of infinity.
double NegLogLikelihood(const float* probs, int truth);

// Classwise expected calibration error over the K classes of n
// distributions (probs: n x K, row-major; truth[i] in [0, K)): for each
// class k, the predictions p_ik are put in `bins` equal-width bins over
// [0, 1], and ECE_k = sum_b (n_b / n) |mean p_ik in b - share of rows in b
// whose truth is k|; the result is the mean of ECE_k over k. 0 for n = 0.
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

}  // namespace rbmrec

#endif  // RBMREC_CORE_METRICS_H_
