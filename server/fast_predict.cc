#include "server/fast_predict.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/kernels.h"
#include "core/rbm.h"

namespace rbmrec::server {
namespace {

struct Scratch {
  Eigen::VectorXf x;
  Eigen::VectorXf scores;
  std::vector<float> fallback;
  std::vector<float> part;  // per-item scores of one RBM
  RowMatrixXf logits;
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

void ScoreAllMeanField(const Model& model, int32_t user, const VisibleSet& v,
                       const float* values, float* scores) {
  thread_local Scratch s;
  const int K = model.K();
  const int32_t m = model.num_items();
  std::fill(scores, scores + m, 0.0f);
  s.part.resize(static_cast<size_t>(m));
  // The score is linear in the distribution, so the ensemble average and
  // the U/I mix apply to the per-RBM scores.
  const float inv = model.members.empty()
                        ? 0.f
                        : 1.0f / static_cast<float>(model.members.size());
  for (const RbmParams& p : model.members) {
    s.x.resize(p.F);
    HiddenInput(p, v, s.x.data());
    SigmoidInPlace(s.x.data(), p.F);
    s.scores.resize(p.W.rows());
    s.scores.noalias() = p.W * s.x;
    s.scores += p.b;
    SoftmaxDotRows(s.scores.data(), m, K, values, s.part.data());
    for (int32_t i = 0; i < m; ++i) scores[i] += inv * s.part[i];
  }
  const RbmParams& ip = model.item_rbm;
  if (ip.F > 0 && user >= 0 && user < ip.num_items &&
      model.user_weight < 1.0f) {
    const int64_t row0 = ip.Row(user, 0);
    s.logits.resize(m, K);
    const RowMatrixXf* hT = &model.item_hT;
    thread_local RowMatrixXf hT_local;
    if (!model.ItemHiddenFresh()) {
      hT_local =
          (1.0f + (-model.item_x.transpose().array()).exp()).inverse().matrix();
      hT = &hT_local;
    }
    kernels::ColumnDots(ip.W.row(row0).data(), ip.b.data() + row0, K, ip.F,
                        hT->data(), hT->cols(), m, s.logits.data());
    SoftmaxDotRows(s.logits.data(), m, K, values, s.part.data());
    const float w = model.user_weight;
    for (int32_t i = 0; i < m; ++i) {
      if (model.UsesItemRbm(user, i)) {
        scores[i] = w * scores[i] + (1 - w) * s.part[i];
      }
    }
  }
  for (int32_t i = 0; i < m; ++i) {
    if (!model.Trained(i) || model.members.empty()) scores[i] = NAN;
  }
}

}  // namespace rbmrec::server
