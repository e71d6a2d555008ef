#include "core/similar.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/kernels.h"

namespace rbmrec {
namespace {

// Each row scaled to unit length (zero rows stay zero).
RowMatrixXf UnitRows(RowMatrixXf v) {
  for (int64_t i = 0; i < v.rows(); ++i) {
    const float norm = v.row(i).norm();
    if (norm > 0) v.row(i) /= norm;
  }
  return v;
}

}  // namespace

absl::StatusOr<ItemSimilarity> ItemSimilarity::Build(
    const Model& model, const SimilarityOptions& options) {
  const int32_t m = model.num_items();
  if (m == 0) return absl::FailedPreconditionError("the model has no items");
  if (!model.HasRatedRbm()) {
    return absl::FailedPreconditionError(
        "similar items need the rated RBM (the ranking model), which the "
        "model does not have");
  }
  if (options.measure == SimilarityMeasure::kRatedConditional) {
    return Conditional(model, options.lift);
  }
  std::vector<uint32_t> counts(static_cast<size_t>(m));
  for (int32_t i = 0; i < m; ++i) {
    counts[static_cast<size_t>(i)] = model.ItemCount(i);
  }
  return FromVectors(model.rated_rbm().W, counts, options.center,
                     options.popularity_weight);
}

absl::StatusOr<ItemSimilarity> ItemSimilarity::FromVectors(
    const RowMatrixXf& vectors, absl::Span<const uint32_t> counts, bool center,
    float popularity_weight) {
  if (static_cast<size_t>(vectors.rows()) != counts.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("item vectors have ", vectors.rows(), " rows for ",
                     counts.size(), " item counts"));
  }
  if (!(popularity_weight >= 0) || !std::isfinite(popularity_weight)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "popularity_weight must be finite and >= 0, got ", popularity_weight));
  }
  ItemSimilarity s;
  const int64_t m = vectors.rows();
  s.valid_.assign(static_cast<size_t>(m), 0);
  s.popularity_.assign(static_cast<size_t>(m), 0.0f);
  RowMatrixXf v = vectors;
  if (center) {
    Eigen::RowVectorXf mean = Eigen::RowVectorXf::Zero(vectors.cols());
    int64_t trained = 0;
    for (int64_t i = 0; i < m; ++i) {
      if (counts[static_cast<size_t>(i)] == 0) continue;
      mean += vectors.row(i);
      ++trained;
    }
    if (trained > 0) mean /= static_cast<float>(trained);
    v.rowwise() -= mean;
  }
  s.unit_ = UnitRows(std::move(v));
  for (int64_t i = 0; i < m; ++i) {
    const size_t u = static_cast<size_t>(i);
    const bool ok = counts[u] > 0 && s.unit_.row(i).allFinite() &&
                    s.unit_.row(i).squaredNorm() > 0.5f;
    if (!ok) s.unit_.row(i).setZero();
    s.valid_[u] = ok ? 1 : 0;
    s.popularity_[u] =
        popularity_weight * std::log1p(static_cast<float>(counts[u]));
  }
  return s;
}

absl::StatusOr<ItemSimilarity> ItemSimilarity::Conditional(const Model& model,
                                                           float lift) {
  if (!(lift >= 0 && lift <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("lift must be in [0, 1], got ", lift));
  }
  const RbmParams& p = model.rated_rbm();
  const int32_t m = model.num_items();
  ItemSimilarity s;
  s.conditional_ = true;
  s.unit_ = p.W;
  s.hidden_bias_ = p.c;
  s.popularity_.assign(static_cast<size_t>(m), 0.0f);
  s.valid_.assign(static_cast<size_t>(m), 0);
  s.bias_.resize(static_cast<size_t>(m));
  // The prior: a user who rated nothing, h0 = sigmoid(c).
  Eigen::VectorXf h0 = p.c;
  SigmoidInPlace(h0.data(), p.F);
  const Eigen::VectorXf prior = p.W * h0 + p.b;
  for (int32_t i = 0; i < m; ++i) {
    const size_t u = static_cast<size_t>(i);
    s.bias_[u] = p.b[i] - lift * prior[i];
    s.valid_[u] = model.ItemCount(i) > 0 && p.W.row(i).allFinite() &&
                  std::isfinite(s.bias_[u]);
  }
  return s;
}

absl::Status ItemSimilarity::QueryVector(absl::Span<const int32_t> query,
                                         float* h) const {
  if (query.empty()) {
    return absl::InvalidArgumentError("no query items");
  }
  const int32_t m = num_items();
  Eigen::Map<Eigen::VectorXf> sum(h, dims());
  sum.setZero();
  int used = 0;
  for (const int32_t q : query) {
    if (q < 0 || q >= m) {
      return absl::InvalidArgumentError(
          absl::StrCat("query item index ", q, " is outside [0, ", m, ")"));
    }
    if (!valid_[static_cast<size_t>(q)]) continue;
    sum += unit_.row(q).transpose();
    ++used;
  }
  if (used == 0) {
    return absl::FailedPreconditionError(
        "no query item has training data to compare with");
  }
  if (conditional_) {
    // A user who rated the query items: their hidden probabilities.
    sum += hidden_bias_;
    SigmoidInPlace(sum.data(), dims());
  } else {
    sum /= static_cast<float>(used);
  }
  return absl::OkStatus();
}

void ItemSimilarity::ScoreVectors(const float* const* h, float* const* out,
                                  int B) const {
  const int32_t m = num_items();
  // Row by row, each row's sum in a fixed order (unlike a general matrix
  // product's, which may depend on alignment): the same bits for a query
  // whichever pass computes it.
  kernels::MatVecRows(unit_.data(), m, dims(), h, out, B);
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  for (int b = 0; b < B; ++b) {
    float* o = out[b];
    for (int32_t j = 0; j < m; ++j) {
      const size_t u = static_cast<size_t>(j);
      if (conditional_) o[j] += bias_[u];
      o[j] = valid_[u] ? o[j] + popularity_[u] : kNaN;
    }
  }
}

absl::Status ItemSimilarity::Score(absl::Span<const int32_t> query,
                                   std::vector<float>* scores,
                                   SimilarScratch* scratch) const {
  scratch->query.resize(static_cast<size_t>(dims()));
  if (absl::Status s = QueryVector(query, scratch->query.data()); !s.ok()) {
    return s;
  }
  scores->resize(static_cast<size_t>(num_items()));
  const float* h = scratch->query.data();
  float* out = scores->data();
  ScoreVectors(&h, &out, 1);
  return absl::OkStatus();
}

namespace {

// Higher score first, then lower index: a strict total order, so a result
// does not depend on the sort's implementation.
bool Better(const std::pair<float, int32_t>& a,
            const std::pair<float, int32_t>& b) {
  return a.first != b.first ? a.first > b.first : a.second < b.second;
}

// The request's checks shared by both selections: n >= 1, `allowed` of m
// entries.
absl::Status CheckRequest(const SimilarRequest& request, size_t m) {
  if (request.n < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("n must be >= 1, got ", request.n));
  }
  if (!request.allowed.empty() && request.allowed.size() != m) {
    return absl::InvalidArgumentError(
        absl::StrCat("the allowed filter has ", request.allowed.size(),
                     " entries for ", m, " items"));
  }
  return absl::OkStatus();
}

// The request's conditions besides the score, for m items: Admits(j) is
// false for excluded and disallowed items.
class Admission {
 public:
  Admission(const SimilarRequest& request, size_t m, SimilarScratch* scratch)
      : request_(request), skip_(scratch->skip) {
    skip_.assign(m, 0);
    for (const int32_t e : request.excluded) {
      if (e >= 0 && static_cast<size_t>(e) < m) {
        skip_[static_cast<size_t>(e)] = 1;
      }
    }
  }
  bool Admits(size_t j) const {
    if (skip_[j]) return false;
    if (!request_.allowed.empty() && request_.allowed[j] == 0) return false;
    return request_.filter == nullptr ||
           request_.filter->Allowed(static_cast<int32_t>(j));
  }

 private:
  const SimilarRequest& request_;
  std::vector<uint8_t>& skip_;
};

}  // namespace

absl::StatusOr<std::vector<SimilarItem>> TopScoredItems(
    absl::Span<const float> scores, const SimilarRequest& request,
    SimilarScratch* scratch) {
  const size_t m = scores.size();
  if (absl::Status s = CheckRequest(request, m); !s.ok()) return s;
  const Admission admission(request, m, scratch);
  auto& cand = scratch->cand;
  cand.clear();
  for (size_t j = 0; j < m; ++j) {
    if (!std::isfinite(scores[j]) || !admission.Admits(j)) continue;
    cand.emplace_back(scores[j], static_cast<int32_t>(j));
  }
  const size_t n = std::min(cand.size(), static_cast<size_t>(request.n));
  std::partial_sort(cand.begin(), cand.begin() + static_cast<std::ptrdiff_t>(n),
                    cand.end(), Better);
  std::vector<SimilarItem> out(n);
  for (size_t r = 0; r < n; ++r) out[r] = {cand[r].second, cand[r].first};
  return out;
}

absl::StatusOr<std::vector<SimilarItem>> SimilarItems(
    const ItemSimilarity& index, absl::Span<const int32_t> query,
    const SimilarRequest& request, SimilarScratch* scratch) {
  if (request.n < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("n must be >= 1, got ", request.n));
  }
  if (absl::Status s = index.Score(query, &scratch->scores, scratch); !s.ok()) {
    return s;
  }
  // The query items are never their own neighbours.
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  for (const int32_t q : query) scratch->scores[static_cast<size_t>(q)] = kNaN;
  return TopScoredItems(scratch->scores, request, scratch);
}

std::optional<NeighbourLists> NeighbourLists::Build(
    const ItemSimilarity& index, int length, const std::atomic<bool>* stop) {
  NeighbourLists lists;
  const int32_t m = index.num_items();
  const size_t m_size = static_cast<size_t>(m);
  lists.length_ = std::max(1, length);
  const size_t len = static_cast<size_t>(lists.length_);
  lists.count_.assign(m_size, 0);
  lists.entries_.resize(m_size * len);
  constexpr int kPass = 8;  // queries per pass over the vectors
  const size_t dims = static_cast<size_t>(index.dims());
  std::vector<float> h(kPass * dims), scores(kPass * m_size);
  std::vector<std::pair<float, int32_t>> cand;
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  for (int32_t q0 = 0; q0 < m;) {
    if (stop != nullptr && stop->load(std::memory_order_relaxed)) {
      return std::nullopt;
    }
    int32_t items[kPass];
    const float* hs[kPass];
    float* outs[kPass];
    int B = 0;
    for (; q0 < m && B < kPass; ++q0) {
      if (!index.HasVector(q0)) continue;
      const int32_t one[1] = {q0};
      float* hb = h.data() + static_cast<size_t>(B) * dims;
      if (!index.QueryVector(one, hb).ok()) continue;
      items[B] = q0;
      hs[B] = hb;
      outs[B] = scores.data() + static_cast<size_t>(B) * m_size;
      ++B;
    }
    if (B == 0) continue;
    index.ScoreVectors(hs, outs, B);
    for (int b = 0; b < B; ++b) {
      float* s = outs[b];
      s[items[b]] = kNaN;  // never its own neighbour
      cand.clear();
      for (int32_t j = 0; j < m; ++j) {
        if (std::isfinite(s[j])) cand.emplace_back(s[j], j);
      }
      const size_t k = std::min(cand.size(), len);
      std::partial_sort(cand.begin(),
                        cand.begin() + static_cast<std::ptrdiff_t>(k),
                        cand.end(), Better);
      SimilarItem* list =
          lists.entries_.data() + static_cast<size_t>(items[b]) * len;
      for (size_t r = 0; r < k; ++r) list[r] = {cand[r].second, cand[r].first};
      lists.count_[static_cast<size_t>(items[b])] = static_cast<int32_t>(k);
    }
  }
  return lists;
}

bool NeighbourLists::Answer(int32_t q, const SimilarRequest& request,
                            SimilarScratch* scratch,
                            std::vector<SimilarItem>* out) const {
  const int32_t m = num_items();
  if (q < 0 || q >= m || count_[static_cast<size_t>(q)] == 0) return false;
  if (!CheckRequest(request, static_cast<size_t>(m)).ok()) return false;
  const Admission admission(request, static_cast<size_t>(m), scratch);
  const size_t n = static_cast<size_t>(request.n);
  const int32_t count = count_[static_cast<size_t>(q)];
  const SimilarItem* list =
      entries_.data() + static_cast<size_t>(q) * static_cast<size_t>(length_);
  out->clear();
  for (int32_t r = 0; r < count && out->size() < n; ++r) {
    if (admission.Admits(static_cast<size_t>(list[r].item))) {
      out->push_back(list[r]);
    }
  }
  // Decided: n found, or the list holds every item with a score.
  return out->size() == n || count < length_;
}

absl::StatusOr<std::vector<SimilarItem>> SimilarItems(
    const ItemSimilarity& index, const NeighbourLists* lists,
    absl::Span<const int32_t> query, const SimilarRequest& request,
    SimilarScratch* scratch) {
  if (lists != nullptr && query.size() == 1 &&
      lists->num_items() == index.num_items()) {
    std::vector<SimilarItem> out;
    if (lists->Answer(query[0], request, scratch, &out)) return out;
  }
  return SimilarItems(index, query, request, scratch);
}

}  // namespace rbmrec
