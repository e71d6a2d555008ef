#include "core/recommend.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <utility>
#include <vector>

#include "core/rated_rbm.h"

namespace rbmrec {

int DefaultThresholdIndex(const Model& model) {
  const int K = model.K();
  // Per-class totals in integers (no division per entry), then the mean.
  std::vector<uint64_t> per(static_cast<size_t>(K), 0);
  const std::vector<uint32_t>& hist = model.item_hist();
  const uint32_t* h = hist.data();
  const size_t m = hist.size() / static_cast<size_t>(K);
  for (size_t i = 0; i < m; ++i, h += K) {
    for (int k = 0; k < K; ++k) per[static_cast<size_t>(k)] += h[k];
  }
  double sum = 0, total = 0;
  for (int k = 0; k < K; ++k) {
    sum += static_cast<double>(per[static_cast<size_t>(k)]) * k;
    total += static_cast<double>(per[static_cast<size_t>(k)]);
  }
  if (total <= 0) return K / 2;
  return std::clamp(static_cast<int>(std::ceil(sum / total - 1e-9)), 0, K - 1);
}

namespace {
// RatedLogits for serving: the product with W shared by concurrent callers,
// over W's half-precision copy where the build has one (SharedMatVecHalf:
// half the bytes; logits within ~1e-3 of RatedLogits' on trained models),
// else over W (SharedMatVec, the same numbers).
void ServingRatedLogits(const Model& model, const VisibleSet& v, float* out,
                        ScoringScratch* scratch) {
  const RbmParams& p = model.rated_rbm();
  scratch->x.resize(p.F);
  RatedHidden(p, v.items, v.n, scratch->x.data());
#ifdef RBMREC_AVX2
  if (model.rated_w_half() != nullptr) {
    SharedMatVecHalf(model.rated_w_half(), p.W.rows(), p.F, scratch->x.data(),
                     out);
  } else {
    SharedMatVec(p, scratch->x.data(), out);
  }
#else
  SharedMatVec(p, scratch->x.data(), out);
#endif
  for (int32_t i = 0; i < p.num_items; ++i) out[i] += p.b[i];
}
}  // namespace

void RatedProbabilities(const Model& model, const VisibleSet& v, float* out,
                        ScoringScratch* scratch) {
  const RbmParams& p = model.rated_rbm();
  ServingRatedLogits(model, v, out, scratch);
  for (int32_t i = 0; i < p.num_items; ++i) out[i] = StableSigmoid(out[i]);
}

std::vector<Ranked> RankItems(const Model& model, int32_t user,
                              const VisibleSet& v,
                              const std::vector<int32_t>& excluded_items,
                              const RankOptions& opt, ScoringScratch* scratch) {
  const int K = model.K();
  const int32_t m = model.num_items();
  const bool by_prob = UsesThreshold(opt.by);
  const bool rated = NeedsRatedRbm(opt.by);
  const bool rated_only = opt.by == RankBy::kRated;
  const PredictMethod method = opt.method;
  std::vector<float>& p_rated = scratch->p_rated;
  if (rated) {
    p_rated.resize(static_cast<size_t>(m));
    if (opt.by == RankBy::kRatedAtLeast) {
      // Logits only: the bounded search below orders by them (the sigmoid
      // is monotone) and takes the sigmoid of the few items it scores.
      ServingRatedLogits(model, v, p_rated.data(), scratch);
    } else {
      RatedProbabilities(model, v, p_rated.data(), scratch);
    }
  }
  std::vector<float>& values = scratch->values;
  values.resize(static_cast<size_t>(K));
  for (int k = 0; k < K; ++k) {
    values[static_cast<size_t>(k)] =
        by_prob ? (k >= opt.k0 ? 1.0f : 0.0f)
                : static_cast<float>(model.scale().Value(k));
  }
  auto at_least = [&](const float* p) {
    float score = 0;
    for (int k = opt.k0; k < K; ++k) score += p[k];
    return score;
  };
  // The ranking score of item i with distribution p.
  auto score_of = [&](int32_t i, const float* p) {
    switch (opt.by) {
      case RankBy::kExpected:
        return static_cast<float>(model.Expectation(p));
      case RankBy::kAtLeast:
        return at_least(p);
      case RankBy::kRated:
        return p_rated[static_cast<size_t>(i)];
      case RankBy::kRatedAtLeast:
        return p_rated[static_cast<size_t>(i)] * at_least(p);
    }
    return 0.0f;
  };
  auto sane = [K](const float* p) {
    double sum = 0;
    for (int k = 0; k < K; ++k) {
      if (!std::isfinite(p[k]) || p[k] < 0) return false;
      sum += p[k];
    }
    return std::abs(sum - 1.0) < 1e-3;
  };
  std::vector<uint8_t>& excluded = scratch->excluded;
  excluded.assign(static_cast<size_t>(m), 0);
  for (const int32_t idx : excluded_items) {
    if (idx >= 0 && idx < m) excluded[static_cast<size_t>(idx)] = 1;
  }
  auto better = [&](const std::pair<float, int32_t>& a,
                    const std::pair<float, int32_t>& b) {
    if (a.first != b.first) return a.first > b.first;
    return model.items().Name(a.second) < model.items().Name(b.second);
  };
  if (opt.by == RankBy::kRatedAtLeast) {
    // score = p(rated) x p(>= t) <= p(rated) (times 1 + rounding): score the
    // items in decreasing p(rated), a block at a time, with the requested
    // method, and stop once no further item can beat the n-th best score.
    // p_rated holds logits here; candidates are (logit, item).
    // Candidates: the items not excluded with a finite logit. Untrained
    // items are skipped when their block is scored (their logit still
    // bounds the items after them, so the stop test stays exact).
    auto eligible = [&](int32_t i) {
      return !excluded[static_cast<size_t>(i)] &&
             std::isfinite(p_rated[static_cast<size_t>(i)]);
    };
    // Only the first few dozen are usually needed: a cut that at least the
    // kFirst best logits reach is found on a plain float copy, and only the
    // items at or above it are sorted; the rest join, ordered kFirst at a
    // time, if the search gets that far.
    constexpr size_t kFirst = 64;
    std::vector<float>& logits = scratch->first;
    logits.clear();
    for (int32_t i = 0; i < m; ++i) {
      if (eligible(i)) logits.push_back(p_rated[static_cast<size_t>(i)]);
    }
    const size_t n_eligible = logits.size();
    float cut = -std::numeric_limits<float>::infinity();
    bool have_cut = n_eligible <= kFirst;  // all of them
    if (n_eligible > 4 * kFirst) {
      // Estimated from a strided sample: its quantile at twice kFirst's
      // share, kept when between kFirst and 8 kFirst items reach it (else
      // the exact cut below). Either way the candidates are exactly the
      // items at or above `cut`, so the order is exact.
      constexpr size_t kSample = 256;
      std::array<float, kSample> sample;
      const size_t stride = n_eligible / kSample;
      for (size_t j = 0; j < kSample; ++j) sample[j] = logits[j * stride];
      const size_t rank =
          std::clamp<size_t>(2 * kFirst * kSample / n_eligible, 1, kSample);
      std::nth_element(sample.begin(),
                       sample.begin() + static_cast<std::ptrdiff_t>(rank - 1),
                       sample.end(), std::greater<float>());
      const float estimate = sample[rank - 1];
      size_t reach = 0;
      for (const float x : logits) reach += x >= estimate;
      if (reach >= kFirst && reach <= 8 * kFirst) {
        cut = estimate;
        have_cut = true;
      }
    }
    if (!have_cut) {
      std::nth_element(logits.begin(),
                       logits.begin() + static_cast<std::ptrdiff_t>(kFirst - 1),
                       logits.end(), std::greater<float>());
      cut = logits[kFirst - 1];
    }
    std::vector<std::pair<float, int32_t>>& cand = scratch->cand;
    cand.clear();
    for (int32_t i = 0; i < m; ++i) {
      if (eligible(i) && p_rated[static_cast<size_t>(i)] >= cut) {
        cand.emplace_back(p_rated[static_cast<size_t>(i)], i);
      }
    }
    std::sort(cand.begin(), cand.end(), better);
    size_t ordered = cand.size();
    bool rest_added = cand.size() == n_eligible;
    auto order_upto = [&](size_t upto) {
      if (upto <= ordered) return;
      if (!rest_added) {  // the items below the cut, unordered
        for (int32_t i = 0; i < m; ++i) {
          if (eligible(i) && p_rated[static_cast<size_t>(i)] < cut) {
            cand.emplace_back(p_rated[static_cast<size_t>(i)], i);
          }
        }
        rest_added = true;
      }
      while (ordered < std::min(upto, cand.size())) {
        const size_t next = std::min(cand.size(), ordered + kFirst);
        const auto first = cand.begin() + static_cast<std::ptrdiff_t>(ordered);
        const auto mid = cand.begin() + static_cast<std::ptrdiff_t>(next);
        if (next < cand.size())
          std::nth_element(first, mid, cand.end(), better);
        std::sort(first, mid, better);
        ordered = next;
      }
    };
    const size_t n = static_cast<size_t>(std::max(1, opt.n));
    constexpr size_t kBlock = 16;
    std::vector<float>& probs = scratch->probs;
    std::vector<int32_t>& query = scratch->query;
    std::vector<Ranked> scored;
    std::vector<float> best;  // scores, for the n-th best
    // The user's hidden inputs once, not once per block.
    const float* member_x = opt.member_x;
    if (member_x == nullptr) {
      model.MemberInputs(v, &scratch->member_x);
      member_x = scratch->member_x.data();
    }
    for (size_t b = 0;; b += kBlock) {
      order_upto(b + kBlock);  // may add the items below the cut
      if (b >= cand.size()) break;
      if (scored.size() >= n) {
        best.clear();
        for (const Ranked& x : scored) best.push_back(x.score);
        std::nth_element(best.begin(), best.begin() + (n - 1), best.end(),
                         std::greater<float>());
        if (StableSigmoid(cand[b].first) * (1.0f + 1e-5f) < best[n - 1]) {
          break;
        }
      }
      const size_t e = std::min(cand.size(), b + kBlock);
      query.clear();
      for (size_t r = b; r < e; ++r) {
        if (model.Trained(cand[r].second)) query.push_back(cand[r].second);
      }
      if (query.empty()) continue;
      probs.resize(query.size() * static_cast<size_t>(K));
      model.PredictWith(user, v, member_x, query, method, probs.data(), nullptr,
                        &scratch->model);
      for (size_t r = 0; r < query.size(); ++r) {
        const float* p = probs.data() + r * static_cast<size_t>(K);
        if (!sane(p)) continue;  // never hand out NaN
        Ranked x;
        x.item = query[r];
        x.p_rated = StableSigmoid(p_rated[static_cast<size_t>(x.item)]);
        x.at_least = at_least(p);
        x.score = x.p_rated * x.at_least;
        x.expected = model.Expectation(p);
        scored.push_back(x);
      }
    }
    std::sort(scored.begin(), scored.end(),
              [&](const Ranked& a, const Ranked& b) {
                return better({a.score, a.item}, {b.score, b.item});
              });
    if (scored.size() > n) scored.resize(n);
    return scored;
  }
  std::vector<float>& first = scratch->first;
  RowMatrixXf& all = scratch->all;
  std::vector<std::pair<float, int32_t>>& cand = scratch->cand;
  const bool exact_all = method == PredictMethod::kExact && opt.candidates == 0;
  first.resize(static_cast<size_t>(m));
  if (exact_all) {
    PredictAll(model, user, v, PredictMethod::kExact, &all, scratch);
    for (int32_t i = 0; i < m; ++i) {
      const float* p = all.row(i).data();
      first[static_cast<size_t>(i)] =
          model.Trained(i) && sane(p) ? score_of(i, p) : NAN;
    }
  } else if (rated_only) {
    for (int32_t i = 0; i < m; ++i) {
      first[static_cast<size_t>(i)] =
          model.Trained(i) ? p_rated[static_cast<size_t>(i)] : NAN;
    }
  } else {
    // kExpected or kAtLeast (kRatedAtLeast returned above).
    ScoreAllMeanField(model, user, v, values.data(), first.data(), scratch);
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
      exact_all || rated_only || method == PredictMethod::kMeanField
          ? n
          : std::max(static_cast<size_t>(std::max(0, opt.candidates)), 3 * n));
  std::nth_element(cand.begin(), cand.begin() + static_cast<std::ptrdiff_t>(c),
                   cand.end(), better);
  cand.resize(c);
  // Stage 2: the candidates' distributions by the requested method.
  std::vector<float>& probs = scratch->probs;
  std::vector<int32_t>& query = scratch->query;
  query.resize(c);
  for (size_t r = 0; r < c; ++r) query[r] = cand[r].second;
  probs.resize(c * static_cast<size_t>(K));
  model.Predict(user, v, query, method, probs.data(), nullptr);
  std::vector<std::pair<float, int32_t>> ranked;  // (score, item)
  ranked.reserve(c);
  for (size_t r = 0; r < c; ++r) {
    const float* p = probs.data() + r * static_cast<size_t>(K);
    if (!sane(p)) continue;  // never hand out NaN
    ranked.emplace_back(score_of(query[r], p), static_cast<int32_t>(r));
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
    const float* p = probs.data() + row * static_cast<size_t>(K);
    Ranked x;
    x.item = query[row];
    x.score = ranked[r].first;
    x.expected = model.Expectation(p);
    if (by_prob) x.at_least = at_least(p);
    if (rated) x.p_rated = p_rated[static_cast<size_t>(x.item)];
    out.push_back(x);
  }
  return out;
}

}  // namespace rbmrec
