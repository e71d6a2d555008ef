#include "server/fast_predict.h"

#include <algorithm>
#include <vector>

#include "core/rbm.h"

namespace rbmrec::server {
namespace {

struct Scratch {
  Eigen::VectorXf x;
  Eigen::VectorXf scores;
  std::vector<float> fallback;
};

}  // namespace

void PredictAllFast(const Model& model, int32_t user, const VisibleSet& v,
                    PredictMethod method, RowMatrixXf* out) {
  thread_local Scratch s;
  const int K = model.K();
  const int32_t m = model.num_items();
  out->setZero(m, K);
  const float inv = model.members.empty()
                        ? 0.f
                        : 1.0f / static_cast<float>(model.members.size());
  for (const RbmParams& p : model.members) {
    s.x.resize(p.F);
    HiddenInput(p, v, s.x.data());
    const Eigen::Index rows = p.W.rows();
    s.scores.resize(rows);
    if (method == PredictMethod::kMeanField) {
      SigmoidInPlace(s.x.data(), p.F);
      s.scores.noalias() = p.W * s.x;
      s.scores += p.b;
    } else {
      // score_r = b_r + sum_j softplus(x_j + W_rj).
      for (Eigen::Index r = 0; r < rows; ++r) {
        s.scores[r] = p.b[r] + SoftplusSum(s.x.data(), p.W.row(r).data(), p.F);
      }
    }
    SoftmaxRows(s.scores.data(), m, K);
    // out (m x K, row-major) += inv * scores, viewed as the same shape.
    out->array() +=
        inv * Eigen::Map<const RowMatrixXf>(s.scores.data(), m, K).array();
  }
  model.MixItemRbm(user, method, out);
  s.fallback.resize(static_cast<size_t>(K));
  bool have_fallback = false;
  for (int32_t i = 0; i < m; ++i) {
    if (!model.Trained(i) || model.members.empty() ||
        !out->row(i).allFinite()) {
      if (!have_fallback) {
        model.FallbackDistribution(v, s.fallback.data());
        have_fallback = true;
      }
      for (int k = 0; k < K; ++k) {
        (*out)(i, k) = s.fallback[static_cast<size_t>(k)];
      }
    }
  }
}

}  // namespace rbmrec::server
