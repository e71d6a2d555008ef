#include "core/similar.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

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

absl::Status ItemSimilarity::Score(absl::Span<const int32_t> query,
                                   std::vector<float>* scores,
                                   SimilarScratch* scratch) const {
  if (query.empty()) {
    return absl::InvalidArgumentError("no query items");
  }
  const int32_t m = num_items();
  scratch->query.assign(static_cast<size_t>(dims()), 0.0f);
  Eigen::Map<Eigen::VectorXf> sum(scratch->query.data(), dims());
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
  scores->resize(static_cast<size_t>(m));
  Eigen::Map<Eigen::VectorXf> out(scores->data(), m);
  if (conditional_) {
    // A user who rated the query items: their hidden probabilities.
    sum += hidden_bias_;
    SigmoidInPlace(sum.data(), dims());
    out.noalias() = unit_ * sum;
    for (int32_t j = 0; j < m; ++j) out[j] += bias_[static_cast<size_t>(j)];
  } else {
    sum /= static_cast<float>(used);
    out.noalias() = unit_ * sum;
  }
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  for (int32_t j = 0; j < m; ++j) {
    const size_t u = static_cast<size_t>(j);
    out[j] = valid_[u] ? out[j] + popularity_[u] : kNaN;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<SimilarItem>> TopScoredItems(
    absl::Span<const float> scores, const SimilarRequest& request,
    SimilarScratch* scratch) {
  if (request.n < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("n must be >= 1, got ", request.n));
  }
  const size_t m = scores.size();
  if (!request.allowed.empty() && request.allowed.size() != m) {
    return absl::InvalidArgumentError(
        absl::StrCat("the allowed filter has ", request.allowed.size(),
                     " entries for ", m, " items"));
  }
  std::vector<uint8_t>& skip = scratch->skip;
  skip.assign(m, 0);
  for (const int32_t e : request.excluded) {
    if (e >= 0 && static_cast<size_t>(e) < m) skip[static_cast<size_t>(e)] = 1;
  }
  auto& cand = scratch->cand;
  cand.clear();
  for (size_t j = 0; j < m; ++j) {
    if (skip[j] || !std::isfinite(scores[j])) continue;
    if (!request.allowed.empty() && request.allowed[j] == 0) continue;
    cand.emplace_back(scores[j], static_cast<int32_t>(j));
  }
  // Best first: higher score, then lower index (a strict total order, so
  // the result does not depend on the sort's implementation).
  const auto better = [](const std::pair<float, int32_t>& a,
                         const std::pair<float, int32_t>& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  };
  const size_t n = std::min(cand.size(), static_cast<size_t>(request.n));
  std::partial_sort(cand.begin(), cand.begin() + static_cast<std::ptrdiff_t>(n),
                    cand.end(), better);
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

}  // namespace rbmrec
