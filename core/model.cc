#include "core/model.h"

#include <algorithm>
#include <cmath>

#include "core/fnv.h"
#include "core/kernels.h"

namespace rbmrec {
namespace {

// ExpTableWanted's floor: a table this small is kept whatever the data.
constexpr int64_t kExpTableFloorBytes = int64_t{64} << 20;

}  // namespace

std::vector<uint32_t> ItemHistogramCounts(const SparseRatings& by_user, int K) {
  std::vector<uint32_t> hist(static_cast<size_t>(by_user.cols) * K, 0);
  for (int64_t r = 0; r < by_user.nnz(); ++r) {
    ++hist[static_cast<size_t>(by_user.col[r]) * K + by_user.k[r]];
  }
  return hist;
}

uint32_t Model::ItemCount(int32_t i) const {
  uint32_t n = 0;
  for (int k = 0; k < K(); ++k)
    n += p_.item_hist[static_cast<size_t>(i) * K() + k];
  return n;
}

double Model::Expectation(const float* probs) const {
  double e = 0;
  for (int k = 0; k < K(); ++k) e += probs[k] * p_.scale.Value(k);
  return e;
}

void Model::FallbackDistribution(const VisibleSet& v, float* out) const {
  const int K = this->K();
  std::vector<double> h(static_cast<size_t>(K), 0.0);
  if (v.n > 0) {
    for (int64_t r = 0; r < v.n; ++r) h[v.ks[r]] += 1;
  } else {
    for (size_t x = 0; x < p_.item_hist.size(); ++x)
      h[x % K] += p_.item_hist[x];
  }
  double total = 0;
  for (double x : h) total += x;
  for (int k = 0; k < K; ++k) {
    out[k] = total > 0 ? static_cast<float>(h[k] / total)
                       : 1.0f / static_cast<float>(K);
  }
}

void Model::ItemHistogram(int32_t i, float* out) const {
  const int K = this->K();
  const double n = ItemCount(i);
  for (int k = 0; k < K; ++k) {
    out[k] = static_cast<float>(p_.item_hist[static_cast<size_t>(i) * K + k] /
                                std::max(1.0, n));
  }
}

namespace {

// Model::MfFingerprint: everything FoldInUser reads besides the ratings.
uint64_t Fingerprint(const MfParams& mf, const RatingScale& scale) {
  const int32_t ints[2] = {mf.factors, mf.fold_epochs};
  const float floats[2] = {mf.lambda, mf.learning_rate};
  uint64_t h = Fnv1a64(ints, sizeof(ints));
  h = Fnv1a64(floats, sizeof(floats), h);
  h = Fnv1a64(&mf.seed, sizeof(mf.seed), h);
  for (int k = 0; k < scale.K(); ++k) {
    const double value = scale.Value(k);
    h = Fnv1a64(&value, sizeof(value), h);
  }
  const int64_t rows = mf.q.rows();
  h = Fnv1a64(&rows, sizeof(rows), h);
  h = Fnv1a64(mf.q.data(), static_cast<size_t>(mf.q.size()) * sizeof(float), h);
  h = Fnv1a64(mf.trained.data(), mf.trained.size(), h);
  return h == 0 ? 1 : h;
}

}  // namespace

Model::Model(ModelParams params, ExpTables tables)
    : p_(std::move(params)), exp_tables_(tables != ExpTables::kNone) {
  RefreshItemHidden();
  RefreshItemWeights(0, num_items());
  // Only a factored rated RBM can have the form: an unfactored W (trained
  // with rated_factors 0, or at least its hidden units) skips the search.
  const int factors = p_.options.rated_factors;
  const bool unfactored = factors == 0 || factors >= p_.rated_rbm.F;
  if (p_.rated_rbm.F > 0 && p_.rated_rbm.W.size() > 0 && !unfactored) {
    rated_low_rank_ = BuildLowRank(p_.rated_rbm.W);
  }
  RefreshRatedForm(0, num_items());
  member_exp_.resize(p_.members.size());
  for (size_t e = 0; e < p_.members.size(); ++e) {
    RefreshExp(static_cast<int>(e), 0, p_.members[e].W.rows());
  }
  RefreshExp(-1, 0, p_.item_rbm.W.rows());
  if (HasMf()) mf_fingerprint_ = Fingerprint(p_.mf, p_.scale);
}

void Model::RefreshExp(int e, int64_t from, int64_t to) {
  const RbmParams& p = e < 0 ? p_.item_rbm : p_.members[static_cast<size_t>(e)];
  ExpWeights& table =
      e < 0 ? item_rbm_exp_ : member_exp_[static_cast<size_t>(e)];
  const int64_t bytes =
      static_cast<int64_t>(p.W.size()) * static_cast<int64_t>(sizeof(float));
  // The ratings are counted only for a table past the rule's floor (most
  // models' tables are under it; an online edit then adds no pass).
  auto ratings = [&] {
    int64_t n = 0;
    for (const uint32_t c : p_.item_hist) n += c;
    return n;
  };
  if (!exp_tables_ || p.F <= 0 || p.W.size() == 0 ||
      (bytes > kExpTableFloorBytes && !ExpTableWanted(bytes, ratings()))) {
    table = ExpWeights();
    return;
  }
  RefreshExpWeights(p, from, to, &table);
}

bool Model::ExpTableWanted(int64_t bytes, int64_t ratings) {
  constexpr int64_t kMaxBytes = int64_t{512} << 20;
  constexpr int64_t kBytesPerRating = 16;
  if (bytes > kMaxBytes) return false;
  return bytes <= kExpTableFloorBytes ||
         bytes <= kBytesPerRating * std::max<int64_t>(0, ratings);
}

void Model::RefreshRatedForm(int32_t from, int32_t to) {
  const RbmParams& r = p_.rated_rbm;
  if (r.F <= 0 || r.W.size() == 0) {
    rated_w_half_.clear();
    rated_low_rank_ = LowRankRows();
    return;
  }
  if (!rated_low_rank_.empty()) {
    RefreshLowRankRows(r.W, from, to, &rated_low_rank_);
    return;
  }
#ifdef RBMREC_AVX2
  const size_t size = static_cast<size_t>(r.W.size());
  if (rated_w_half_.size() != size) {
    rated_w_half_.resize(size);
    from = 0;
    to = static_cast<int32_t>(r.W.rows());
  }
  from = std::max(0, from);
  to = std::min(to, static_cast<int32_t>(r.W.rows()));
  if (from >= to) return;
  kernels::FloatsToHalves(
      r.W.row(from).data(), static_cast<int64_t>(to - from) * r.F,
      rated_w_half_.data() + static_cast<size_t>(from) * r.F);
#else
  (void)from;
  (void)to;
#endif
}

void Model::RefreshItemWeights(int32_t from, int32_t to) {
  item_weight_.resize(static_cast<size_t>(num_items()));
  // Only an item's count in item_hist (callers may build models without
  // the histogram; such items count as never rated).
  const int32_t counted = static_cast<int32_t>(
      std::min<size_t>(p_.item_hist.size() / static_cast<size_t>(K()),
                       static_cast<size_t>(num_items())));
  for (int32_t i = std::max(0, from); i < std::min(to, num_items()); ++i) {
    const uint32_t n = i < counted ? ItemCount(i) : 0;
    item_weight_[static_cast<size_t>(i)] =
        p_.user_weight +
        p_.user_weight_per_log_item * std::log1p(static_cast<float>(n));
  }
}

void Model::RefreshItemHidden() {
  item_hT_ = p_.item_x.transpose();
  if (item_hT_.size() > 0) {
    SigmoidInPlace(item_hT_.data(), static_cast<int>(item_hT_.size()));
  }
  RefreshItemExp(0, static_cast<int32_t>(p_.item_x.rows()));
}

void Model::RefreshItemExp(int32_t from, int32_t to) {
  const RowMatrixXf& x = p_.item_x;
  if (item_ex_.rows() != x.rows() || item_ex_.cols() != x.cols()) {
    item_ex_.resize(x.rows(), x.cols());
    item_hi_.assign(static_cast<size_t>(x.rows()), {});
    item_hi_sum_.assign(static_cast<size_t>(x.rows()), 0.0);
    from = 0;
    to = static_cast<int32_t>(x.rows());
  }
  ExpInput in;
  for (int32_t i = std::max(0, from);
       i < std::min(to, static_cast<int32_t>(x.rows())); ++i) {
    SetExpInput(x.row(i).data(), static_cast<int>(x.cols()), &in);
    std::copy(in.ex.begin(), in.ex.end(), item_ex_.row(i).data());
    item_hi_[static_cast<size_t>(i)] = in.hi;
    item_hi_sum_[static_cast<size_t>(i)] = in.hi_sum;
  }
}

namespace {

// p_I(v_user | item's training ratings) from the I-RBM.
void ItemRbmDistribution(const Model& m, int32_t user, int32_t item,
                         PredictMethod method, float* h, float* probs) {
  const RbmParams& p = m.item_rbm();
  const float* x = m.item_x().row(item).data();
  if (method == PredictMethod::kMeanField) {
    for (int j = 0; j < p.F; ++j) h[j] = m.item_hT()(j, item);
    PredictMeanField(p, h, user, probs);
  } else if (m.item_rbm_exp().ok.empty()) {
    PredictExact(p, x, user, probs);
  } else {
    PredictExactFromExp(p, m.item_rbm_exp(), m.ItemExpInput(item), x, user,
                        probs);
  }
}

}  // namespace

void Model::MemberInputs(const VisibleSet& v, std::vector<float>* x,
                         const float* mf_part) const {
  const size_t total = MfInputOffset();
  x->resize(total + MfInputSize());
  float* at = x->data();
  for (const RbmParams& p : p_.members) {
    HiddenInput(p, v, at);
    at += p.F;
  }
  if (!HasMf()) return;
  if (mf_part != nullptr) {
    std::copy(mf_part, mf_part + MfInputSize(), x->data() + total);
  } else {
    MfInput(v, x->data() + total);
  }
}

void Model::MfInput(const VisibleSet& v, float* out) const {
  out[p_.mf.factors] = FoldInUser(p_.mf, p_.scale, v, out) > 0 ? 1.0f : 0.0f;
}

void Model::BlendMf(int32_t i, const float* mf_x, float* probs) const {
  const MfParams& mf = p_.mf;
  if (!mf.Serves(i) || mf_x[mf.factors] == 0.0f) return;
  const double target = mf.intercept + mf.rbm_weight * Expectation(probs) +
                        mf.mf_weight * MfScore(mf, mf_x, i);
  TiltToMean(p_.scale, target, probs);
}

void Model::Predict(int32_t user, const VisibleSet& v,
                    absl::Span<const int32_t> query, PredictMethod method,
                    float* out, std::vector<bool>* fallback) const {
  Scratch scratch;
  std::vector<float> member_x;
  MemberInputs(v, &member_x);
  PredictWith(user, v, member_x.data(), query, method, out, fallback, &scratch);
}

void Model::PredictWith(int32_t user, const VisibleSet& v,
                        const float* member_x, absl::Span<const int32_t> query,
                        PredictMethod method, float* out,
                        std::vector<bool>* fallback, Scratch* scratch) const {
  const int K = this->K();
  if (fallback) fallback->assign(query.size(), false);
  std::fill(out, out + query.size() * K, 0.0f);
  const bool exact = method == PredictMethod::kExact;
#ifdef RBMREC_AVX2
  // The query items' weight rows are scattered over W (exp(W) for the
  // exact rule) and item_x (its exponentials): ask for all of them up front
  // so their cache misses overlap.
  for (const int32_t q : query) {
    if (!Trained(q)) continue;
    for (size_t e = 0; e < p_.members.size(); ++e) {
      const RbmParams& p = p_.members[e];
      const bool table = exact && !member_exp_[e].ok.empty();
      kernels::PrefetchRow(table ? member_exp_[e].ew.row(p.Row(q, 0)).data()
                                 : p.W.row(p.Row(q, 0)).data(),
                           K * p.F);
    }
    if (UsesItemRbm(user, q)) {
      kernels::PrefetchRow(
          exact ? item_ex_.row(q).data() : p_.item_x.row(q).data(),
          p_.item_rbm.F);
    }
  }
#endif
  const float* mf_x = member_x + MfInputOffset();
  const float inv =
      p_.members.empty() ? 0.f : 1.0f / static_cast<float>(p_.members.size());
  std::vector<float>& probs = scratch->probs;
  std::vector<float>& x = scratch->x;
  probs.resize(static_cast<size_t>(K));
  for (size_t e = 0; e < p_.members.size(); ++e) {
    const RbmParams& p = p_.members[e];
    const ExpWeights& table = member_exp_[e];
    x.assign(member_x, member_x + p.F);
    member_x += p.F;
    if (!exact) SigmoidInPlace(x.data(), p.F);
    if (exact && !table.ok.empty())
      SetExpInput(x.data(), p.F, &scratch->exp_in);
    for (size_t q = 0; q < query.size(); ++q) {
      if (!Trained(query[q])) continue;
      if (!exact) {
        PredictMeanField(p, x.data(), query[q], probs.data());
      } else if (table.ok.empty()) {
        PredictExact(p, x.data(), query[q], probs.data());
      } else {
        PredictExactFromExp(p, table, scratch->exp_in.view(), x.data(),
                            query[q], probs.data());
      }
      for (int k = 0; k < K; ++k) out[q * K + k] += inv * probs[k];
    }
  }
  if (p_.item_rbm.F > 0) {
    std::vector<float>& h = scratch->h;
    h.resize(static_cast<size_t>(p_.item_rbm.F));
    for (size_t q = 0; q < query.size(); ++q) {
      if (!Trained(query[q]) || !UsesItemRbm(user, query[q])) continue;
      ItemRbmDistribution(*this, user, query[q], method, h.data(),
                          probs.data());
      const float w = UserWeight(v.n, query[q]);
      for (int k = 0; k < K; ++k) {
        out[q * K + k] = w * out[q * K + k] + (1 - w) * probs[k];
      }
    }
  }
  if (HasMf() && !p_.members.empty()) {
    for (size_t q = 0; q < query.size(); ++q) {
      if (Trained(query[q])) BlendMf(query[q], mf_x, out + q * K);
    }
  }
  bool have_fallback = false;
  for (size_t q = 0; q < query.size(); ++q) {
    bool use_fallback = !Trained(query[q]) || p_.members.empty();
    for (int k = 0; k < K && !use_fallback; ++k) {
      if (!std::isfinite(out[q * K + k])) use_fallback = true;
    }
    if (use_fallback) {
      if (!have_fallback) {
        scratch->fallback.resize(static_cast<size_t>(K));
        FallbackDistribution(v, scratch->fallback.data());
        have_fallback = true;
      }
      std::copy(scratch->fallback.begin(), scratch->fallback.end(),
                out + q * K);
      if (fallback) (*fallback)[q] = true;
    }
  }
}

void Model::ItemRbmMeanFieldLogits(int32_t user, RowMatrixXf* logits) const {
  const RowMatrixXf* hT = &item_hT_;
  const int64_t row0 = p_.item_rbm.Row(user, 0);
  logits->resize(num_items(), K());
  kernels::ColumnDots(p_.item_rbm.W.row(row0).data(),
                      p_.item_rbm.b.data() + row0, K(), p_.item_rbm.F,
                      hT->data(), hT->cols(), num_items(), logits->data());
}

void Model::MixItemRbm(int32_t user, int64_t n_user, PredictMethod method,
                       RowMatrixXf* out, Scratch* scratch) const {
  if (!ItemRbmServes(user)) return;
  const int K = this->K();
  if (method == PredictMethod::kMeanField) {
    RowMatrixXf& logits = scratch->logits;
    ItemRbmMeanFieldLogits(user, &logits);
    SoftmaxRows(logits.data(), num_items(), K);
    for (int32_t i = 0; i < num_items(); ++i) {
      if (!UsesItemRbm(user, i)) continue;
      const float w = UserWeight(n_user, i);
      out->row(i) = w * out->row(i) + (1 - w) * logits.row(i);
    }
    return;
  }
  std::vector<float> h(static_cast<size_t>(p_.item_rbm.F)),
      probs(static_cast<size_t>(K));
  for (int32_t i = 0; i < num_items(); ++i) {
    if (!UsesItemRbm(user, i)) continue;
    ItemRbmDistribution(*this, user, i, method, h.data(), probs.data());
    const float w = UserWeight(n_user, i);
    for (int k = 0; k < K; ++k) {
      (*out)(i, k) = w * (*out)(i, k) + (1 - w) * probs[static_cast<size_t>(k)];
    }
  }
}

std::vector<int32_t> MostRatedItems(const Model& model) {
  std::vector<int32_t> items;
  for (int32_t i = 0; i < model.num_items(); ++i) {
    if (model.Trained(i)) items.push_back(i);
  }
  std::sort(items.begin(), items.end(), [&](int32_t a, int32_t b) {
    const uint32_t ca = model.ItemCount(a), cb = model.ItemCount(b);
    if (ca != cb) return ca > cb;
    return model.items().Name(a) < model.items().Name(b);
  });
  return items;
}

}  // namespace rbmrec
