#include "core/recommend.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <queue>
#include <utility>
#include <vector>

#include "core/kernels.h"
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
// The rated RBM's hidden state for serving into scratch->x (F floats):
// through W's low-rank form where the model has one (the sums of U's rows,
// then V^T: the factored trainer's own steps), else RatedHidden. With the
// form, also z = V^T h into scratch->z (rank floats), what its rows'
// logits are made from.
void ServingRatedState(const Model& model, const VisibleSet& v,
                       ScoringScratch* scratch) {
  const RbmParams& p = model.rated_rbm();
  const LowRankRows& lr = model.rated_low_rank();
  scratch->x.resize(p.F);
  float* h = scratch->x.data();
  if (lr.empty()) {
    RatedHidden(p, v.items, v.n, h);
    return;
  }
  Eigen::Map<Eigen::VectorXf>(h, p.F) = p.c;
  LowRankAddRows(lr, p.W, v.items, v.n, h, &scratch->row_sum);
  SigmoidInPlace(h, p.F);
  scratch->z.resize(static_cast<size_t>(lr.rank()));
  LowRankInput(lr, h, scratch->z.data());
}

// RatedLogits for serving: the product with W shared by concurrent callers,
// through W's low-rank form where the model has one (rated_low_rank: U V^T,
// every logit within kLowRankRowTolerance of W's), else over W's
// half-precision copy where the build has one (SharedMatVecHalf: half the
// bytes; logits within ~1e-3 of RatedLogits' on trained models), else over
// W (SharedMatVec, the same numbers).
void ServingRatedLogits(const Model& model, const VisibleSet& v, float* out,
                        ScoringScratch* scratch) {
  const RbmParams& p = model.rated_rbm();
  const LowRankRows& lr = model.rated_low_rank();
  ServingRatedState(model, v, scratch);
  if (!lr.empty()) {
    SharedMatVecRows(lr.u.data(), lr.u.rows(), lr.rank(), scratch->z.data(),
                     out);
    LowRankExactRows(lr, p.W, scratch->x.data(), out);
  } else {
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
  }
  for (int32_t i = 0; i < p.num_items; ++i) out[i] += p.b[i];
}
}  // namespace

void RatedLogitsBatch(const Model& model, const VisibleSet* const* v, int n,
                      float* const* out, ScoringScratch* scratch) {
#ifdef RBMREC_AVX2
  // ServingRatedLogits' steps, the products of all n users in one pass
  // (what SharedMatVec*'s batches compute).
  const RbmParams& p = model.rated_rbm();
  const LowRankRows& lr = model.rated_low_rank();
  const size_t F = static_cast<size_t>(p.F);
  const size_t r = static_cast<size_t>(lr.rank());
  scratch->batch_h.resize(static_cast<size_t>(n) * (F + r));
  const float* hs[kMaxScoreBatch];
  const float* zs[kMaxScoreBatch];
  for (int b = 0; b < n; ++b) {
    // Into x and z first, as ServingRatedLogits (the same buffer
    // alignment).
    ServingRatedState(model, *v[b], scratch);
    float* h = scratch->batch_h.data() + static_cast<size_t>(b) * (F + r);
    std::copy(scratch->x.data(), scratch->x.data() + p.F, h);
    hs[b] = h;
    if (!lr.empty()) {
      std::copy(scratch->z.begin(), scratch->z.end(), h + F);
      zs[b] = h + F;
    }
  }
  if (!lr.empty()) {
    kernels::MatVecRows(lr.u.data(), lr.u.rows(), lr.rank(), zs, out, n);
    for (int b = 0; b < n; ++b) LowRankExactRows(lr, p.W, hs[b], out[b]);
  } else if (model.rated_w_half() != nullptr) {
    kernels::MatVecRowsHalf(model.rated_w_half(), p.W.rows(), p.F, hs, out, n);
  } else {
    kernels::MatVecRows(p.W.data(), p.W.rows(), p.F, hs, out, n);
  }
  for (int b = 0; b < n; ++b) {
    for (int32_t i = 0; i < p.num_items; ++i) out[b][i] += p.b[i];
  }
#else
  for (int b = 0; b < n; ++b) ServingRatedLogits(model, *v[b], out[b], scratch);
#endif
}

void RankValues(const Model& model, const RankOptions& opt,
                std::vector<float>* values) {
  const int K = model.K();
  const bool by_prob = UsesThreshold(opt.by);
  values->resize(static_cast<size_t>(K));
  for (int k = 0; k < K; ++k) {
    (*values)[static_cast<size_t>(k)] =
        by_prob ? (k >= opt.k0 ? 1.0f : 0.0f)
                : static_cast<float>(model.scale().Value(k));
  }
}

bool RanksByMeanField(const RankOptions& opt) {
  const bool exact_all =
      opt.method == PredictMethod::kExact && opt.candidates == 0;
  return (opt.by == RankBy::kExpected || opt.by == RankBy::kAtLeast) &&
         !exact_all;
}

// ServingRatedLogits of the items a narrow `filter` allows (the others get
// NaN; ItemFilter::narrow_items): their rows only, each through the same
// row kernel as the full pass (kernels::MatVecRows*, whose rows do not
// depend on each other), so every logit is the full pass's bit for bit.
// False (nothing written) for a wider filter, and in builds without that
// kernel.
bool ServingRatedLogitsOf(const Model& model, const VisibleSet& v,
                          const ItemFilter& filter, float* out,
                          ScoringScratch* scratch) {
#ifdef RBMREC_AVX2
  const std::vector<int32_t>* items = filter.narrow_items();
  if (items == nullptr) return false;
  const RbmParams& p = model.rated_rbm();
  const LowRankRows& lr = model.rated_low_rank();
  ServingRatedState(model, v, scratch);
  const float* h = scratch->x.data();
  const uint16_t* half = model.rated_w_half();
  const size_t F = static_cast<size_t>(p.F);
  std::fill(out, out + p.num_items, NAN);
  // The rows are far apart: each is fetched a few items ahead of its use.
  constexpr size_t kAhead = 4;
  const size_t n = items->size();
  for (size_t j = 0; j < n; ++j) {
    if (!lr.empty() && j + kAhead < n) {
      kernels::PrefetchRow(lr.u.row((*items)[j + kAhead]).data(), lr.rank());
    }
    const int32_t i = (*items)[j];
    float* o = out + i;
    const size_t row = static_cast<size_t>(i) * F;
    if (!lr.empty()) {
      *o = LowRankRow(lr, p.W, i, h, scratch->z.data());
    } else if (half != nullptr) {
      kernels::MatVecRowsHalf(half + row, 1, p.F, &h, &o, 1);
    } else {
      kernels::MatVecRows(p.W.data() + row, 1, p.F, &h, &o, 1);
    }
    *o += p.b[i];
  }
  return true;
#else
  (void)model, (void)v, (void)filter, (void)out, (void)scratch;
  return false;
#endif
}

// The items of opt's filter when it has this model's m items and is narrow
// (ItemFilter::narrow_items): so few that scoring and gathering just them
// beats a pass over every item. Null otherwise.
const std::vector<int32_t>* NarrowItems(const RankOptions& opt, int32_t m) {
  return opt.filter != nullptr && opt.filter->num_items() == m
             ? opt.filter->narrow_items()
             : nullptr;
}

void RatedProbabilities(const Model& model, const VisibleSet& v, float* out,
                        ScoringScratch* scratch) {
  const RbmParams& p = model.rated_rbm();
  ServingRatedLogits(model, v, out, scratch);
  for (int32_t i = 0; i < p.num_items; ++i) out[i] = StableSigmoid(out[i]);
}

namespace {

using Scored = std::pair<float, int32_t>;  // (score, item or row)

// One RankItems call: the request, the user's p(rated) where the ranking
// uses it (logits for kRatedAtLeast) and the excluded items' mask, with the
// scores and checks every ranking kind shares. One member per kind below.
class Ranker {
 public:
  Ranker(const Model& model, int32_t user, const VisibleSet& v,
         const std::vector<int32_t>& excluded_items, const RankOptions& opt,
         ScoringScratch* scratch);

  // kRatedAtLeast: the bounded search in decreasing p(rated).
  std::vector<Ranked> RankRatedAtLeast();
  // kRated: stage 1 is p(rated) (or the exact rule over all items).
  std::vector<Ranked> RankRated();
  // kExpected, kAtLeast: stage 1 is the mean-field score (or the exact
  // rule over all items).
  std::vector<Ranked> RankByDistribution();

 private:
  // p(rating >= k0) of distribution p.
  float AtLeast(const float* p) const {
    float score = 0;
    for (int k = opt_.k0; k < K_; ++k) score += p[k];
    return score;
  }
  // The ranking score of item i with distribution p.
  float ScoreOf(int32_t i, const float* p) const {
    switch (opt_.by) {
      case RankBy::kExpected:
        return static_cast<float>(model_.Expectation(p));
      case RankBy::kAtLeast:
        return AtLeast(p);
      case RankBy::kRated:
        return p_rated_[i];
      case RankBy::kRatedAtLeast:
        return p_rated_[i] * AtLeast(p);
      case RankBy::kRegressionAtLeast:
        return Bound(p_rated_[i]) * AtLeast(p);
    }
    return 0.0f;
  }
  // The bounded search's bound on the score of an item with value x in
  // p_rated_ (a logit of p(rated), or an item regression score): the
  // first factor of its score, which p(rating >= t) <= 1 multiplies.
  float Bound(float x) const {
    return regression_ ? std::max(x, 0.0f) : StableSigmoid(x);
  }
  // A finite distribution that sums to 1 (never hand out NaN).
  bool Sane(const float* p) const {
    double sum = 0;
    for (int k = 0; k < K_; ++k) {
      if (!std::isfinite(p[k]) || p[k] < 0) return false;
      sum += p[k];
    }
    return std::abs(sum - 1.0) < 1e-3;
  }
  // Higher score first, ties by item id.
  bool Better(const Scored& a, const Scored& b) const {
    if (a.first != b.first) return a.first > b.first;
    return model_.items().Name(a.second) < model_.items().Name(b.second);
  }
  bool ExactAll() const {
    return opt_.method == PredictMethod::kExact && opt_.candidates == 0;
  }
  // Stage 1 with the exact rule over all items (PredictAll) into first.
  void ExactFirstScores(std::vector<float>* first);
  // Stage 2: the best of the stage-1 scores `first` scored again with the
  // requested method, best opt.n first.
  std::vector<Ranked> RankFromFirstScores(const std::vector<float>& first);
  // kRatedAtLeast's candidates (logit, item): those at or above cut_ first
  // and sorted by Better (ordered_ of them), then the other eligible items
  // at or above gathered_ (-infinity: every other eligible item), unordered.
  void RatedAtLeastCandidates();
  // Appends (logit, item) of every eligible item whose logit is >= t
  // (at_least) or not >= t (!at_least), in increasing item order.
  void Gather(float t, bool at_least);
  // Sorts the first `above` candidates (those at or above cut_).
  void SortAbove(size_t above);
  // Orders kRatedAtLeast's candidates up to position `upto`, gathering the
  // rest first when `upto` passes the sorted ones.
  void OrderUpto(size_t upto);
  bool Eligible(int32_t i) const {
    return !excluded_[static_cast<size_t>(i)] && std::isfinite(p_rated_[i]);
  }

  // Only the first few dozen of kRatedAtLeast's candidates are usually
  // needed: a cut that at least the kFirst best logits reach is estimated
  // from a sample, and only the items at or above it are sorted; the rest
  // are ordered kFirst at a time, if the search gets that far.
  static constexpr size_t kFirst = 64;

  const Model& model_;
  const int32_t user_;
  const VisibleSet& v_;
  const RankOptions& opt_;
  ScoringScratch* const scratch_;
  const int K_;
  const int32_t m_;
  // kRegressionAtLeast: p_rated_ holds item regression scores.
  const bool regression_;
  // p(rated) of every item (logits for kRatedAtLeast): opt.rated_logits
  // when given (kRatedAtLeast reads them in place), else the scratch's.
  const float* p_rated_ = nullptr;
  std::vector<uint8_t>& excluded_;
  // kRatedAtLeast's search state (RatedAtLeastCandidates, OrderUpto).
  float cut_ = -std::numeric_limits<float>::infinity();
  size_t ordered_ = 0;
  float gathered_ = -std::numeric_limits<float>::infinity();
};

Ranker::Ranker(const Model& model, int32_t user, const VisibleSet& v,
               const std::vector<int32_t>& excluded_items,
               const RankOptions& opt, ScoringScratch* scratch)
    : model_(model),
      user_(user),
      v_(v),
      opt_(opt),
      scratch_(scratch),
      K_(model.K()),
      m_(model.num_items()),
      regression_(opt.by == RankBy::kRegressionAtLeast),
      excluded_(scratch->excluded) {
  const std::vector<int32_t>* narrow = NarrowItems(opt, m_);
  if (NeedsRatedRbm(opt.by)) {
    std::vector<float>& own = scratch->p_rated;
    if (opt.rated_logits != nullptr && opt.by == RankBy::kRatedAtLeast) {
      p_rated_ = opt.rated_logits;
    } else {
      own.resize(static_cast<size_t>(m_));
      // A narrow filter (e.g. a candidate set): only the allowed items'
      // logits; the others are never ranked.
      if (opt.rated_logits != nullptr) {
        std::copy(opt.rated_logits, opt.rated_logits + m_, own.begin());
      } else if (narrow == nullptr ||
                 !ServingRatedLogitsOf(model, v, *opt.filter, own.data(),
                                       scratch)) {
        ServingRatedLogits(model, v, own.data(), scratch);
      }
      if (opt.by == RankBy::kRated) {
        for (float& x : own) x = StableSigmoid(x);
      }
      p_rated_ = own.data();
    }
    // kRatedAtLeast keeps the logits: the bounded search orders by them
    // (the sigmoid is monotone) and takes the sigmoid of the few items it
    // scores.
  } else if (regression_) {
    // Every item's score (0 for items added after the regression's fit and
    // for the items outside its columns).
    std::vector<float>& own = scratch->p_rated;
    own.assign(static_cast<size_t>(m_), 0.0f);
    const ItemRegression& reg = model.item_regression();
    ItemRegressionScores(reg, v.items, v.n, own.data());
    p_rated_ = own.data();
  }
  RankValues(model, opt, &scratch->values);
  // excluded_[i] = 1 for the items the filter disallows and the excluded
  // ones. A narrow filter's mask is all ones with its few items cleared.
  excluded_.assign(static_cast<size_t>(m_), narrow != nullptr ? 1 : 0);
  if (narrow != nullptr) {
    for (const int32_t i : *narrow) excluded_[static_cast<size_t>(i)] = 0;
  } else if (opt.filter != nullptr && opt.filter->num_items() == m_) {
    opt.filter->MarkDisallowed(excluded_.data());
  } else if (opt.filter != nullptr) {
    for (int32_t i = 0; i < m_; ++i) {
      if (!opt.filter->Allowed(i)) excluded_[static_cast<size_t>(i)] = 1;
    }
  }
  for (const int32_t idx : excluded_items) {
    if (idx >= 0 && idx < m_) excluded_[static_cast<size_t>(idx)] = 1;
  }
}

void Ranker::RatedAtLeastCandidates() {
  // Candidates: the items not excluded with a finite logit. Untrained items
  // are skipped when their block is scored (their logit still bounds the
  // items after them, so the stop test stays exact).
  std::vector<Scored>& cand = scratch_->cand;
  cand.clear();
  gathered_ = -std::numeric_limits<float>::infinity();
  const std::vector<int32_t>* narrow = NarrowItems(opt_, m_);
  if (narrow != nullptr) {
    // A narrow filter: its few items, all gathered.
    for (const int32_t i : *narrow) {
      if (Eligible(i)) cand.emplace_back(p_rated_[i], i);
    }
  } else if (m_ > static_cast<int32_t>(4 * kFirst)) {
    // Only the items at or above a threshold estimated from a strided
    // sample of the eligible items (its quantile at three times kFirst's
    // share: usually ~3 kFirst items reach it) are gathered in one pass;
    // the rest join when the search passes them (OrderUpto). Fewer than
    // kFirst reaching it: every eligible item instead.
    constexpr int32_t kSample = 256;
    std::array<float, kSample> sample;
    size_t n_sample = 0;
    const int32_t stride = m_ / kSample;
    for (int32_t j = 0; j < kSample; ++j) {
      const int32_t i = j * stride;
      if (Eligible(i)) sample[n_sample++] = p_rated_[i];
    }
    // The eligible items, estimated from the sample's share of them.
    const size_t eligible = n_sample * static_cast<size_t>(m_) / kSample;
    if (n_sample > 0 && eligible > 4 * kFirst) {
      const size_t rank =
          std::clamp<size_t>(3 * kFirst * n_sample / eligible, 1, n_sample);
      std::nth_element(sample.begin(),
                       sample.begin() + static_cast<std::ptrdiff_t>(rank - 1),
                       sample.begin() + static_cast<std::ptrdiff_t>(n_sample),
                       std::greater<float>());
      const float estimate = sample[rank - 1];
      Gather(estimate, true);
      if (cand.size() >= kFirst) {
        gathered_ = estimate;
      } else {
        cand.clear();
      }
    }
  }
  if (narrow == nullptr &&
      gathered_ == -std::numeric_limits<float>::infinity()) {
    Gather(-std::numeric_limits<float>::infinity(), true);
  }
  // The cut: the kFirst-th best logit gathered (all of them when fewer).
  // The items at or above it first, sorted; the others gathered after them,
  // unordered.
  cut_ = gathered_;
  if (cand.size() > kFirst) {
    std::nth_element(
        cand.begin(), cand.begin() + static_cast<std::ptrdiff_t>(kFirst - 1),
        cand.end(),
        [](const Scored& a, const Scored& b) { return a.first > b.first; });
    cut_ = cand[kFirst - 1].first;
  }
  const auto above =
      std::partition(cand.begin(), cand.end(),
                     [this](const Scored& c) { return c.first >= cut_; });
  SortAbove(static_cast<size_t>(above - cand.begin()));
}

void Ranker::Gather(float t, bool at_least) {
  std::vector<Scored>& cand = scratch_->cand;
  const float* logits = p_rated_;
  const uint8_t* excluded = excluded_.data();
  auto add = [&](int32_t i) {
    const float logit = logits[i];
    if (excluded[i] == 0 && std::isfinite(logit)) cand.emplace_back(logit, i);
  };
  int32_t i = 0;
#ifdef RBMREC_AVX2
  // Eight logits compared at a time; only the items that pass are looked
  // at one by one (an ordered compare: NaN never passes >= t).
  const __m256 tv = _mm256_set1_ps(t);
  for (; i + 8 <= m_; i += 8) {
    unsigned pass = static_cast<unsigned>(_mm256_movemask_ps(
        _mm256_cmp_ps(_mm256_loadu_ps(logits + i), tv, _CMP_GE_OQ)));
    if (!at_least) pass = ~pass & 0xffu;
    for (; pass != 0; pass &= pass - 1) add(i + __builtin_ctz(pass));
  }
#endif
  for (; i < m_; ++i) {
    if ((logits[i] >= t) == at_least) add(i);
  }
}

void Ranker::SortAbove(size_t above) {
  std::vector<Scored>& cand = scratch_->cand;
  std::sort(cand.begin(), cand.begin() + static_cast<std::ptrdiff_t>(above),
            [this](const Scored& a, const Scored& b) { return Better(a, b); });
  ordered_ = above;
}

void Ranker::OrderUpto(size_t upto) {
  if (upto <= ordered_) return;
  std::vector<Scored>& cand = scratch_->cand;
  if (gathered_ != -std::numeric_limits<float>::infinity()) {
    // The eligible items below the gathering threshold, unordered.
    Gather(gathered_, false);
    gathered_ = -std::numeric_limits<float>::infinity();
  }
  auto better = [this](const Scored& a, const Scored& b) {
    return Better(a, b);
  };
  while (ordered_ < std::min(upto, cand.size())) {
    const size_t next = std::min(cand.size(), ordered_ + kFirst);
    const auto first = cand.begin() + static_cast<std::ptrdiff_t>(ordered_);
    const auto mid = cand.begin() + static_cast<std::ptrdiff_t>(next);
    if (next < cand.size()) std::nth_element(first, mid, cand.end(), better);
    std::sort(first, mid, better);
    ordered_ = next;
  }
}

std::vector<Ranked> Ranker::RankRatedAtLeast() {
  // score = p(rated) x p(>= t) <= p(rated) (times 1 + rounding): score the
  // items in decreasing p(rated), a block at a time, with the requested
  // method, and stop once no further item can beat the n-th best score.
  // p_rated_ holds logits here; candidates are (logit, item).
  RatedAtLeastCandidates();
  const std::vector<Scored>& cand = scratch_->cand;
  const size_t n = static_cast<size_t>(std::max(1, opt_.n));
  // The first block holds the n items any answer needs (at least kBlock);
  // then kBlock at a time, so the search stops within kBlock items of the
  // point where the stop test first holds.
  constexpr size_t kBlock = 8;
  std::vector<float>& probs = scratch_->probs;
  std::vector<int32_t>& query = scratch_->query;
  // The scored items that may still be among the n best: once it holds
  // `keep` of them, those below the n-th best score so far are dropped (n
  // items beat each of them).
  const size_t keep = 2 * n + 8;
  std::vector<Ranked> scored;
  scored.reserve(std::min(cand.size(), keep + std::max(n, kBlock)));
  // The n best scores so far, the n-th best on top.
  std::vector<float> heap;
  heap.reserve(n + 1);
  std::priority_queue<float, std::vector<float>, std::greater<float>> best(
      std::greater<float>(), std::move(heap));
  // The user's hidden inputs once, not once per block.
  const float* member_x = opt_.member_x;
  if (member_x == nullptr) {
    model_.MemberInputs(v_, &scratch_->member_x);
    member_x = scratch_->member_x.data();
  }
  for (size_t b = 0, block = std::max(n, kBlock);; b += block, block = kBlock) {
    OrderUpto(b + block);  // may order items below the cut
    if (b >= cand.size()) break;
    if (best.size() >= n &&
        Bound(cand[b].first) * (1.0f + 1e-5f) < best.top()) {
      break;
    }
    const size_t e = std::min(cand.size(), b + block);
    query.clear();
    for (size_t r = b; r < e; ++r) {
      if (model_.Trained(cand[r].second)) query.push_back(cand[r].second);
    }
    if (query.empty()) continue;
    probs.resize(query.size() * static_cast<size_t>(K_));
    model_.PredictWith(user_, v_, member_x, query, opt_.method, probs.data(),
                       nullptr, &scratch_->model);
    for (size_t r = 0; r < query.size(); ++r) {
      const float* p = probs.data() + r * static_cast<size_t>(K_);
      if (!Sane(p)) continue;  // never hand out NaN
      Ranked x;
      x.item = query[r];
      const float first = Bound(p_rated_[x.item]);
      if (regression_) {
        x.regression = p_rated_[x.item];
      } else {
        x.p_rated = first;
      }
      x.at_least = AtLeast(p);
      x.score = first * x.at_least;
      x.expected = model_.Expectation(p);
      scored.push_back(x);
      best.push(x.score);
      if (best.size() > n) best.pop();
    }
    if (scored.size() >= keep && best.size() >= n) {
      const float nth = best.top();
      scored.erase(
          std::remove_if(scored.begin(), scored.end(),
                         [nth](const Ranked& x) { return x.score < nth; }),
          scored.end());
    }
  }
  std::sort(scored.begin(), scored.end(),
            [&](const Ranked& a, const Ranked& b) {
              return Better({a.score, a.item}, {b.score, b.item});
            });
  if (scored.size() > n) scored.resize(n);
  return scored;
}

void Ranker::ExactFirstScores(std::vector<float>* first) {
  RowMatrixXf& all = scratch_->all;
  PredictAll(model_, user_, v_, PredictMethod::kExact, &all, scratch_);
  for (int32_t i = 0; i < m_; ++i) {
    const float* p = all.row(i).data();
    (*first)[static_cast<size_t>(i)] =
        model_.Trained(i) && Sane(p) ? ScoreOf(i, p) : NAN;
  }
}

std::vector<Ranked> Ranker::RankRated() {
  std::vector<float>& first = scratch_->first;
  first.resize(static_cast<size_t>(m_));
  if (ExactAll()) {
    ExactFirstScores(&first);
  } else {
    for (int32_t i = 0; i < m_; ++i) {
      first[static_cast<size_t>(i)] = model_.Trained(i) ? p_rated_[i] : NAN;
    }
  }
  return RankFromFirstScores(first);
}

std::vector<Ranked> Ranker::RankByDistribution() {
  std::vector<float>& first = scratch_->first;
  first.resize(static_cast<size_t>(m_));
  if (ExactAll()) {
    ExactFirstScores(&first);
  } else if (opt_.mean_field_scores != nullptr) {
    std::copy(opt_.mean_field_scores, opt_.mean_field_scores + m_,
              first.begin());
  } else {
    ScoreAllMeanField(model_, user_, v_, scratch_->values.data(), first.data(),
                      scratch_);
  }
  return RankFromFirstScores(first);
}

std::vector<Ranked> Ranker::RankFromFirstScores(
    const std::vector<float>& first) {
  const PredictMethod method = opt_.method;
  std::vector<Scored>& cand = scratch_->cand;
  cand.clear();
  for (int32_t i = 0; i < m_; ++i) {
    const float score = first[static_cast<size_t>(i)];
    if (excluded_[static_cast<size_t>(i)] || !std::isfinite(score)) continue;
    cand.emplace_back(score, i);
  }
  const size_t n = static_cast<size_t>(std::max(1, opt_.n));
  const bool rated_only = opt_.by == RankBy::kRated;
  const size_t c = std::min(
      cand.size(),
      ExactAll() || rated_only || method == PredictMethod::kMeanField
          ? n
          : std::max(static_cast<size_t>(std::max(0, opt_.candidates)), 3 * n));
  auto better = [this](const Scored& a, const Scored& b) {
    return Better(a, b);
  };
  std::nth_element(cand.begin(), cand.begin() + static_cast<std::ptrdiff_t>(c),
                   cand.end(), better);
  cand.resize(c);
  // Stage 2: the candidates' distributions by the requested method.
  std::vector<float>& probs = scratch_->probs;
  std::vector<int32_t>& query = scratch_->query;
  query.resize(c);
  for (size_t r = 0; r < c; ++r) query[r] = cand[r].second;
  probs.resize(c * static_cast<size_t>(K_));
  model_.Predict(user_, v_, query, method, probs.data(), nullptr);
  std::vector<Scored> ranked;  // (score, row)
  ranked.reserve(c);
  for (size_t r = 0; r < c; ++r) {
    const float* p = probs.data() + r * static_cast<size_t>(K_);
    if (!Sane(p)) continue;  // never hand out NaN
    ranked.emplace_back(ScoreOf(query[r], p), static_cast<int32_t>(r));
  }
  std::sort(ranked.begin(), ranked.end(),
            [&](const Scored& a, const Scored& b) {
              return Better({a.first, query[static_cast<size_t>(a.second)]},
                            {b.first, query[static_cast<size_t>(b.second)]});
            });
  std::vector<Ranked> out;
  for (size_t r = 0; r < std::min(ranked.size(), n); ++r) {
    const size_t row = static_cast<size_t>(ranked[r].second);
    const float* p = probs.data() + row * static_cast<size_t>(K_);
    Ranked x;
    x.item = query[row];
    x.score = ranked[r].first;
    x.expected = model_.Expectation(p);
    if (UsesThreshold(opt_.by)) x.at_least = AtLeast(p);
    if (NeedsRatedRbm(opt_.by)) x.p_rated = p_rated_[x.item];
    out.push_back(x);
  }
  return out;
}

// True when one of v's items has a column of the model's item regression.
bool AnyRegressionColumn(const Model& model, const VisibleSet& v) {
  if (!model.HasItemRegression()) return false;
  const ItemRegression& reg = model.item_regression();
  for (int64_t x = 0; x < v.n; ++x) {
    if (reg.ColumnOf(v.items[x]) >= 0) return true;
  }
  return false;
}

}  // namespace

std::vector<Ranked> RankItems(const Model& model, int32_t user,
                              const VisibleSet& v,
                              const std::vector<int32_t>& excluded_items,
                              const RankOptions& opt, ScoringScratch* scratch) {
  if (opt.by == RankBy::kRegressionAtLeast && model.HasRatedRbm() &&
      !AnyRegressionColumn(model, v)) {
    // No rated item with a column of the regression (none at all, or only
    // items outside its most-rated columns): every regression score is 0
    // and would rank by item id; the rated RBM's p(rated) (fitted beside
    // it) knows more.
    RankOptions rated = opt;
    rated.by = RankBy::kRatedAtLeast;
    rated.rated_logits = nullptr;
    return RankItems(model, user, v, excluded_items, rated, scratch);
  }
  Ranker ranker(model, user, v, excluded_items, opt, scratch);
  switch (opt.by) {
    case RankBy::kRatedAtLeast:
    case RankBy::kRegressionAtLeast:
      return ranker.RankRatedAtLeast();
    case RankBy::kRated:
      return ranker.RankRated();
    case RankBy::kExpected:
    case RankBy::kAtLeast:
      break;
  }
  return ranker.RankByDistribution();
}

}  // namespace rbmrec
