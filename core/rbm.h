#ifndef RBMREC_CORE_RBM_H_
#define RBMREC_CORE_RBM_H_

// The softmax-visible RBM of Salakhutdinov, Mnih & Hinton (ICML 2007):
// one K-way softmax visible unit per rated item, F binary hidden units,
// weights shared by every user's RBM. Each function is one named step of
// the math, with its formula, so it can be tested alone against brute force.
//
// A user's ratings are a "visible set": parallel arrays of item indices and
// rating indices k in [0, K). Items absent from the set are not in the RBM.

#include <cstdint>
#include <vector>

#include "Eigen/Core"
#include "core/rng.h"

namespace rbmrec {

using RowMatrixXf =
    Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Parameters shared by all users. Plain value type.
struct RbmParams {
  int32_t num_items = 0;  // m
  int32_t K = 0;          // rating values
  int32_t F = 0;          // hidden units
  RowMatrixXf W;          // (m*K) x F; row i*K+k is W_i^k (over j)
  Eigen::VectorXf b;      // m*K visible biases; b[i*K+k] = b_i^k
  Eigen::VectorXf c;      // F hidden biases
  // The conditional RBM's weights (the seed paper's section 5): row i is
  // D_i (over j), added to the hidden input of every user whose set r holds
  // item i, rating known or not. m x F, or empty (0 x 0): the plain RBM,
  // whose arithmetic is then exactly as without this member.
  RowMatrixXf D;

  int64_t Row(int32_t item, int k) const {
    return static_cast<int64_t>(item) * K + k;
  }
  bool conditional() const { return D.rows() > 0; }
  // Resizes to m x K x F, all zero (D empty).
  void Resize(int32_t m, int32_t k, int32_t f);
  bool operator==(const RbmParams& o) const;
};

// A user's visible set: items[n] with rating indices ks[n]. For the
// conditional RBM also extra[n_extra]: the items in the user's set r whose
// rating is not known (viewed, or asked about), r being the rated items
// plus these (the caller keeps them apart from the rated ones). Ignored by
// a plain RBM (RbmParams::D empty).
struct VisibleSet {
  const int32_t* items = nullptr;
  const uint8_t* ks = nullptr;
  int64_t n = 0;
  const int32_t* extra = nullptr;
  int64_t n_extra = 0;
};

// x_j = c_j + sum_i W_{i,k_i,j}: the total input to each hidden unit; for a
// conditional RBM (p.D not empty) plus sum over r of D_ij, the rated items'
// rows in rating order, then the extra items' in their order.
// REQUIRES: x has size F; every item < m and k < K.
void HiddenInput(const RbmParams& p, const VisibleSet& v, float* x);

// x = base + sum over r of D_i: the conditional part of HiddenInput, in
// its order (base may be x). REQUIRES p.conditional(); x and base have F
// entries; every item of v and v.extra < m.
void ConditionalSum(const RbmParams& p, const VisibleSet& v, const float* base,
                    float* x);

// p(h_j = 1 | V) = sigmoid(x_j), computed in place from the input x.
void SigmoidInPlace(float* x, int F);

// Logits of item i's softmax given hidden state h (probabilities or 0/1):
// logit_k = b_i^k + sum_j h_j W_ij^k. REQUIRES: logits has size K.
void VisibleLogits(const RbmParams& p, int32_t item, const float* h,
                   float* logits);

// Numerically stable softmax over n values (max subtracted before exp).
// Finite for any finite input; outputs sum to 1.
void SoftmaxInPlace(float* z, int n);
void SoftmaxInPlace(double* z, int n);
// SoftmaxInPlace on each row of a rows x K row-major block, with the exps of
// all rows done in one vectorised pass. Bit-identical to calling
// SoftmaxInPlace(z + r*K, K) for every row r.
void SoftmaxRows(float* z, int64_t rows, int K);
// The visible sample of a Gibbs step from a rows x K row-major block of
// logits: sample[r] = SampleCategorical(softmax(z + r*K), K, u[r]) with
// SoftmaxRows' probabilities (bit for bit, so the same draws), and, when
// `mean` is not null, mean[r] = sum over k (in order) of double(k) * p_rk.
// z is left in an unspecified state (the AVX2 path never writes the
// probabilities back). REQUIRES K <= 255.
void SoftmaxSampleRows(float* z, int64_t rows, int K, const float* u,
                       uint8_t* sample, double* mean);
// out[r] = sum_k values[k] * softmax(z + r*K)[k] for every row r of a
// rows x K row-major block (z is not changed): e.g. the expected rating of
// every item. The probabilities are SoftmaxInPlace's, bit for bit (the dot
// may round differently in the last bit).
void SoftmaxDotRows(const float* z, int64_t rows, int K, const float* values,
                    float* out);

// log(1 + exp(x)) without overflow.
inline float Softplus(float x) {
  return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}
inline double Softplus(double x) {
  return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}

// sum_j softplus(x_j + w_j) over j < F, fused and allocation-free:
// sum_j max(t_j, 0) + log(prod_j (1 + exp(-|t_j|))), t = x + w. Every
// factor of the product is in (1, 2], so a block of 120 of them stays below
// 2^120 < FLT_MAX and one log per block replaces F of them. Finite for any
// finite input; absolute error ~1e-5 for F = 100. (The AVX2 build uses a
// leaner exp, accurate to ~1 ulp on exp's (0, 1] range that is needed here.)
float SoftplusSum(const float* x, const float* w, int F);

// The same sum from exponentials computed ahead: sum_j log(1 + ex_j ew_j)
// with ex_j = exp(x_j), ew_j = exp(w_j) (so ex_j ew_j = exp(x_j + w_j)),
// as log(prod_j (1 + ex_j ew_j)) with the product in double and its binary
// exponent kept apart: no exp and one log per call, so several times
// cheaper than SoftplusSum when the same x or w is used many times (the
// trainer's validation pass, which scores every held-out rating's K rows).
// REQUIRES: |x_j| <= kExpSoftplusLimit and |w_j| <= kExpSoftplusLimit (each
// factor is then below 2^116 and nothing overflows; callers check and fall
// back to SoftplusSum otherwise). Absolute error like SoftplusSum's.
inline constexpr float kExpSoftplusLimit = 40.0f;
float SoftplusSumFromExp(const float* ex, const float* ew, int F);
// SoftplusSumFromExp before its log: the product prod_j (1 + ex_j ew_j) as
// a mantissa in [1, 2^8) (the return value) times 2^(*exp2). The sum is
// log(mantissa) + *exp2 log 2. Same REQUIRES.
double SoftplusProductFromExp(const float* ex, const float* ew, int F,
                              int64_t* exp2);
// SoftplusProductFromExp of R rows ew[0..R) with the same ex, each bit for
// bit as alone, computed together (their products' chains interleave):
// mantissa[r] and exp2[r]. Same REQUIRES, for every row.
void SoftplusProductsFromExp(const float* ex, const float* const* ew, int R,
                             int F, double* mantissa, int64_t* exp2);

// Hidden inputs beyond kExpSoftplusLimit, for SoftplusSumFromExp: a unit
// with x_j > kExpSoftplusLimit and |w_j| <= kSaturatedRowLimit has
// t = x_j + w_j >= 20, where softplus(t) = t + log1p(exp(-t)) is t to
// within 2.1e-9 (below float's rounding of t); one with x_j <
// -kExpSoftplusLimit has softplus(t) < 2.1e-9, i.e. 0. So with ex_j = 0 at
// both kinds (a factor 1 in the product) and hi_j = 1 at the first kind
// (else 0), for rows with every |w_j| <= kSaturatedRowLimit:
//   sum_j softplus(x_j + w_j)
//       = SoftplusSumFromExp(ex, ew, F) + sum_j hi_j w_j + hi_sum,
// with hi_sum = sum_j hi_j x_j, which SplitSaturated returns; it is the
// same for every row, so a softmax over rows need not add it. Writes ex
// (exp(x_j), or 0 where |x_j| > kExpSoftplusLimit) and hi.
// REQUIRES: x finite; ex and hi have F entries.
inline constexpr float kSaturatedRowLimit = 20.0f;
double SplitSaturated(const float* x, int F, float* ex, float* hi);

// Free energy of a visible set (no per-item normaliser terms):
// F(V) = -sum_i b_{i,k_i} - sum_j softplus(x_j).
double FreeEnergy(const RbmParams& p, const VisibleSet& v);

// p(v_q = k | V) for a query item q not in V, by the exact rule (paper Eq. 7):
// score_k = b_q^k + sum_j softplus(x_j + W_qj^k), p = softmax(score).
// `x` is HiddenInput(V). REQUIRES: probs has size K.
void PredictExact(const RbmParams& p, const float* x, int32_t q, float* probs);

// PredictExact's logits from exponentials computed ahead
// (SoftplusSumFromExp): no exp per weight, ~3x cheaper at F = 200, for
// serving, where the same W is scored for many users. The weights' side:
// ew = exp(W), row by row, with ok[r] = 1 where every |W_rj| <=
// kSaturatedRowLimit (the rows SplitSaturated's identity holds for); other
// rows take SoftplusSum. Plain value type.
struct ExpWeights {
  RowMatrixXf ew;           // W.rows() x F, or empty (no table)
  std::vector<uint8_t> ok;  // one per row of W
};
// Sets e's rows [from, to) from p.W. When p.W has more rows than e (items
// added), also every added row; when the shape differs otherwise, every row.
void RefreshExpWeights(const RbmParams& p, int64_t from, int64_t to,
                       ExpWeights* e);
// The input's side: SplitSaturated(x)'s ex and hi_sum, and the units
// with x_j above kExpSoftplusLimit (hi_j = 1) as a list of indices (few,
// usually none), as pointers into buffers its maker keeps (ExpInput, or a
// model's per-item table).
struct ExpInputView {
  const float* ex = nullptr;
  const int32_t* hi = nullptr;
  int32_t n_hi = 0;
  double hi_sum = 0;
};
// Buffers for one input (one per thread): SetExpInput fills them.
struct ExpInput {
  std::vector<float> ex;
  std::vector<int32_t> hi;
  double hi_sum = 0;
  ExpInputView view() const {
    return {ex.data(), hi.data(), static_cast<int32_t>(hi.size()), hi_sum};
  }
};
// SplitSaturated(x, F) into `in`, with a vectorised exp (ex's last bit may
// differ from SplitSaturated's).
void SetExpInput(const float* x, int F, ExpInput* in);
// b_r + sum_j softplus(x_j + W_rj) for row r of p: from e and `in` (made
// from x) where e.ok[r], else SoftplusSum(x, W_r). Equal to the direct sum
// up to SoftplusSum's absolute error.
// REQUIRES: e from p (RefreshExpWeights, all rows); x has p.F entries.
float ExactLogit(const RbmParams& p, const ExpWeights& e,
                 const ExpInputView& in, const float* x, int64_t r);
// PredictExact through ExactLogit: the same distribution up to that error.
void PredictExactFromExp(const RbmParams& p, const ExpWeights& e,
                         const ExpInputView& in, const float* x, int32_t q,
                         float* probs);

// Mean-field prediction (paper Eq. 9): h_hat = sigmoid(x);
// p(v_q = k) = softmax_k(b_q^k + sum_j h_hat_j W_qj^k).
// `h_hat` is sigmoid(HiddenInput(V)). REQUIRES: probs has size K.
void PredictMeanField(const RbmParams& p, const float* h_hat, int32_t q,
                      float* probs);

// Draws k ~ Categorical(probs[0..K)) by inverse CDF with uniform u in [0,1):
// the first k whose cumulative probability exceeds u (K-1 if none does).
inline int SampleCategorical(const float* probs, int K, float u) {
  float acc = 0;
  for (int k = 0; k + 1 < K; ++k) {
    acc += probs[k];
    if (u < acc) return k;
  }
  return K - 1;
}

// One worker's buffers for CdChain and the predictors: h (F floats), logits
// (K) and probs (n*K for a visible set of n items; grown on demand, never
// shrunk). Not thread-safe: one per thread, passed explicitly.
struct GibbsScratch {
  Eigen::VectorXf h, logits;
  std::vector<float> probs;
  GibbsScratch(int F, int K) : h(F), logits(K) {}
};

// One user's contrastive-divergence chain (CD-T):
//   h0 = p(h | V_data); then T times: h ~ Bernoulli(h_prev),
//   v_i ~ Categorical(softmax_k(b_i^k + sum_j h_j W_ij^k)) for the rated
//   items only, h_T = p(h | V_T).
// Outputs h0 (F), hT (F), vt (v.n sampled rating indices) and returns the
// squared error of the first reconstruction's expectation (in rating
// indices) summed over the user's ratings. The gradient estimate is
//   dW_{i,k_i} += h0, dW_{i,vt_i} -= hT, db likewise with 1, dc += h0 - hT.
double CdChain(const RbmParams& p, const VisibleSet& v, int T, Rng* rng,
               GibbsScratch* scratch, float* h0, float* ht, uint8_t* vt);

}  // namespace rbmrec

#endif  // RBMREC_CORE_RBM_H_
