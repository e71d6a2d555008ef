#include "server/fast_predict.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/rbm.h"

namespace rbmrec::server {
namespace {

struct Scratch {
  Eigen::VectorXf x;
  Eigen::VectorXf scores;
  std::vector<float> fallback;
  std::vector<float> part;  // per-item scores of one RBM
  RowMatrixXf logits;
  Model::Scratch model;
};

// s->scores = the K logits of every item (item-major) of one user-based RBM
// for the user's ratings v: b + W sigmoid(x) for mean field, b + sum_j
// softplus(x_j + W_j) for the exact rule, with x = HiddenInput(p, v).
void MemberLogits(const RbmParams& p, const VisibleSet& v, PredictMethod method,
                  Scratch* s) {
  s->x.resize(p.F);
  HiddenInput(p, v, s->x.data());
  const Eigen::Index rows = p.W.rows();
  s->scores.resize(rows);
  if (method == PredictMethod::kMeanField) {
    SigmoidInPlace(s->x.data(), p.F);
    s->scores.noalias() = p.W * s->x;
    s->scores += p.b;
  } else {
    for (Eigen::Index r = 0; r < rows; ++r) {
      s->scores[r] = p.b[r] + SoftplusSum(s->x.data(), p.W.row(r).data(), p.F);
    }
  }
}

}  // namespace

void PredictAllFast(const Model& model, int32_t user, const VisibleSet& v,
                    PredictMethod method, RowMatrixXf* out) {
  thread_local Scratch s;
  const int K = model.K();
  const int32_t m = model.num_items();
  out->setZero(m, K);
  const float inv = model.members().empty()
                        ? 0.f
                        : 1.0f / static_cast<float>(model.members().size());
  for (const RbmParams& p : model.members()) {
    MemberLogits(p, v, method, &s);
    SoftmaxRows(s.scores.data(), m, K);
    // out (m x K, row-major) += inv * scores, viewed as the same shape.
    out->array() +=
        inv * Eigen::Map<const RowMatrixXf>(s.scores.data(), m, K).array();
  }
  model.MixItemRbm(user, method, out, &s.model);
  s.fallback.resize(static_cast<size_t>(K));
  bool have_fallback = false;
  for (int32_t i = 0; i < m; ++i) {
    if (!model.Trained(i) || model.members().empty() ||
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
  const float inv = model.members().empty()
                        ? 0.f
                        : 1.0f / static_cast<float>(model.members().size());
  for (const RbmParams& p : model.members()) {
    MemberLogits(p, v, PredictMethod::kMeanField, &s);
    SoftmaxDotRows(s.scores.data(), m, K, values, s.part.data());
    for (int32_t i = 0; i < m; ++i) scores[i] += inv * s.part[i];
  }
  if (model.ItemRbmServes(user)) {
    model.ItemRbmMeanFieldLogits(user, &s.logits);
    SoftmaxDotRows(s.logits.data(), m, K, values, s.part.data());
    const float w = model.user_weight();
    for (int32_t i = 0; i < m; ++i) {
      if (model.UsesItemRbm(user, i)) {
        scores[i] = w * scores[i] + (1 - w) * s.part[i];
      }
    }
  }
  for (int32_t i = 0; i < m; ++i) {
    if (!model.Trained(i) || model.members().empty()) scores[i] = NAN;
  }
}

std::vector<Ranked> RankItems(const Model& model, int32_t user,
                              const VisibleSet& v,
                              const std::vector<int32_t>& excluded_items,
                              const RankOptions& opt) {
  const int K = model.K();
  const int32_t m = model.num_items();
  const bool by_prob = opt.k0 >= 0;
  const PredictMethod method = opt.method;
  thread_local std::vector<float> values;
  values.resize(static_cast<size_t>(K));
  for (int k = 0; k < K; ++k) {
    values[static_cast<size_t>(k)] =
        by_prob ? (k >= opt.k0 ? 1.0f : 0.0f)
                : static_cast<float>(model.scale().Value(k));
  }
  auto score_of = [&](const float* p) {
    float score = 0;
    if (by_prob) {
      for (int k = opt.k0; k < K; ++k) score += p[k];
    } else {
      score = static_cast<float>(model.Expectation(p));
    }
    return score;
  };
  auto sane = [K](const float* p) {
    double sum = 0;
    for (int k = 0; k < K; ++k) {
      if (!std::isfinite(p[k]) || p[k] < 0) return false;
      sum += p[k];
    }
    return std::abs(sum - 1.0) < 1e-3;
  };
  thread_local std::vector<uint8_t> excluded;
  excluded.assign(static_cast<size_t>(m), 0);
  for (const int32_t idx : excluded_items) {
    if (idx >= 0 && idx < m) excluded[static_cast<size_t>(idx)] = 1;
  }
  auto better = [&](const std::pair<float, int32_t>& a,
                    const std::pair<float, int32_t>& b) {
    if (a.first != b.first) return a.first > b.first;
    return model.items().Name(a.second) < model.items().Name(b.second);
  };
  thread_local std::vector<float> first;
  thread_local RowMatrixXf all;
  thread_local std::vector<std::pair<float, int32_t>> cand;
  const bool exact_all = method == PredictMethod::kExact && opt.candidates == 0;
  first.resize(static_cast<size_t>(m));
  if (exact_all) {
    PredictAllFast(model, user, v, PredictMethod::kExact, &all);
    for (int32_t i = 0; i < m; ++i) {
      const float* p = all.row(i).data();
      first[static_cast<size_t>(i)] =
          model.Trained(i) && sane(p) ? score_of(p) : NAN;
    }
  } else {
    ScoreAllMeanField(model, user, v, values.data(), first.data());
  }
  cand.clear();
  for (int32_t i = 0; i < m; ++i) {
    const float score = first[static_cast<size_t>(i)];
    if (excluded[static_cast<size_t>(i)] || !std::isfinite(score)) continue;
    cand.emplace_back(score, i);
  }
  const size_t n = static_cast<size_t>(std::max(1, opt.n));
  const size_t c = std::min(
      cand.size(),
      exact_all || method == PredictMethod::kMeanField
          ? n
          : std::max(static_cast<size_t>(std::max(0, opt.candidates)), 3 * n));
  std::nth_element(cand.begin(), cand.begin() + static_cast<std::ptrdiff_t>(c),
                   cand.end(), better);
  cand.resize(c);
  // Stage 2: the candidates' distributions by the requested method.
  thread_local std::vector<float> probs;
  thread_local std::vector<int32_t> query;
  query.resize(c);
  for (size_t r = 0; r < c; ++r) query[r] = cand[r].second;
  probs.resize(c * static_cast<size_t>(K));
  model.Predict(user, v, query, method, probs.data(), nullptr);
  std::vector<std::pair<float, int32_t>> ranked;  // (score, item)
  ranked.reserve(c);
  for (size_t r = 0; r < c; ++r) {
    const float* p = probs.data() + r * static_cast<size_t>(K);
    if (!sane(p)) continue;  // never hand out NaN
    ranked.emplace_back(score_of(p), static_cast<int32_t>(r));
  }
  auto better_row = [&](const std::pair<float, int32_t>& a,
                        const std::pair<float, int32_t>& b) {
    return better({a.first, query[static_cast<size_t>(a.second)]},
                  {b.first, query[static_cast<size_t>(b.second)]});
  };
  std::sort(ranked.begin(), ranked.end(), better_row);
  std::vector<Ranked> out;
  for (size_t r = 0; r < std::min(ranked.size(), n); ++r) {
    const size_t row = static_cast<size_t>(ranked[r].second);
    out.push_back(
        Ranked{query[row], ranked[r].first,
               model.Expectation(probs.data() + row * static_cast<size_t>(K))});
  }
  return out;
}

}  // namespace rbmrec::server
