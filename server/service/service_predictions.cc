// RbmrecService's read requests that answer from a model: PredictRatings,
// Recommend (and RecommendAll's per-user answers), SimilarItems. The rest
// of the service is in service.cc.

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/error_reason.h"
#include "core/recommend.h"
#include "server/log.h"
#include "server/metrics/metrics.h"
#include "server/service/erasure.h"
#include "server/service/proto_convert.h"
#include "server/service/request_checks.h"
#include "server/service/request_plan.h"
#include "server/service/service.h"

namespace rbmrec::server {
namespace {

// The cold start's most-popular page: the first ro.n items of
// catalogue.MostRated() that `filter` allows, each with the expected rating
// of `user` (the empty user) by ro.method.
std::vector<Ranked> MostRatedRanking(const Model& model, const UserView& user,
                                     const Catalogue& catalogue,
                                     const ItemFilter& filter,
                                     const RankOptions& ro,
                                     Model::Scratch* scratch) {
  std::vector<int32_t> items;
  for (int32_t i : catalogue.MostRated()) {
    if (static_cast<int>(items.size()) >= ro.n) break;
    if (filter.Allowed(i)) items.push_back(i);
  }
  const int K = model.K();
  std::vector<float> probs(items.size() * static_cast<size_t>(K));
  std::vector<bool> fallback;
  const VisibleSet v = user.ratings();
  model.PredictWith(user.model_user, v, user.member_x(), items, ro.method,
                    probs.data(), &fallback, scratch);
  std::vector<Ranked> out(items.size());
  for (size_t r = 0; r < items.size(); ++r) {
    float* p = probs.data() + r * static_cast<size_t>(K);
    if (!SaneDistribution(p, K)) model.FallbackDistribution(v, p);
    out[r].item = items[r];
    out[r].expected = SaneDistribution(p, K)
                          ? model.Expectation(p)
                          : static_cast<float>(model.scale().Value(0));
  }
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------
// Predictions

absl::StatusOr<v1::PredictRatingsResponse> RbmrecService::PredictRatings(
    const v1::PredictRatingsRequest& request) {
  absl::StatusOr<PredictMethod> method =
      CheckPredict(request, Limits(), options_.scale);
  if (!method.ok()) return method.status();
  const int n = request.item_ids_size();
  absl::StatusOr<Served> served = registry_->Get(request.model_version());
  if (!served.ok()) return served.status();
  const Model& model = *served->model;
  absl::StatusOr<UserView> user =
      caches_->Resolve(served->model, request.user_id(), request.ratings());
  if (!user.ok()) return user.status();

  const int K = model.K();
  // Leased buffers: no allocation per request once warm.
  ScratchPool<PredictScratch>::Lease scratch = predict_scratch_.Acquire();
  std::vector<int32_t>& query = scratch->query;
  std::vector<float>& probs = scratch->probs;
  std::vector<bool>& fallback = scratch->fallback;
  query.resize(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    query[static_cast<size_t>(i)] = model.items().Find(request.item_ids(i));
  probs.resize(static_cast<size_t>(n) * static_cast<size_t>(K));
  const VisibleSet v = user->ratings();
  model.PredictWith(user->model_user, v, user->member_x(), query, *method,
                    probs.data(), &fallback, &scratch->model);
  const std::vector<std::string> titles =
      caches_->Titles(std::vector<std::string>(request.item_ids().begin(),
                                               request.item_ids().end()));

  v1::PredictRatingsResponse resp;
  resp.set_model_version(served->version);
  FillScale(model.scale(), resp.mutable_scale());
  resp.set_folded_in(user->folded_in);
  resp.mutable_predictions()->Reserve(n);
  for (int i = 0; i < n; ++i) {
    float* p = probs.data() + static_cast<size_t>(i) * static_cast<size_t>(K);
    bool is_fallback = fallback[static_cast<size_t>(i)];
    if (!SaneDistribution(p, K)) {  // never hand out NaN
      model.FallbackDistribution(v, p);
      is_fallback = true;
      if (!SaneDistribution(p, K)) {
        for (int k = 0; k < K; ++k) p[k] = 1.0f / static_cast<float>(K);
      }
    }
    v1::ItemPrediction* out = resp.add_predictions();
    out->set_item_id(request.item_ids(i));
    out->mutable_probabilities()->Reserve(K);
    for (int k = 0; k < K; ++k) out->add_probabilities(p[k]);
    out->set_expected_rating(model.Expectation(p));
    out->set_fallback(is_fallback);
    out->set_title(titles[static_cast<size_t>(i)]);
  }
  return resp;
}

absl::StatusOr<v1::RecommendResponse> RbmrecService::Recommend(
    const v1::RecommendRequest& request) {
  absl::StatusOr<RecommendCheck> checked =
      CheckRecommend(request, Limits(), options_.scale);
  if (!checked.ok()) return checked.status();
  absl::StatusOr<Served> served = registry_->Get(request.model_version());
  if (!served.ok()) return served.status();
  return RecommendServed(request, *checked, *served);
}

absl::StatusOr<v1::RecommendResponse> RbmrecService::RecommendServed(
    const v1::RecommendRequest& request, const RecommendCheck& checked,
    const Served& served) {
  const Model& model = *served.model;
  absl::StatusOr<RankPlan> plan = ToRankOptions(
      request, checked, model, served.version, options_.recommend_candidates,
      [&] { return caches_->DefaultThreshold(served.model); });
  if (!plan.ok()) return plan.status();
  RankOptions& ro = plan->options;
  absl::StatusOr<UserView> user =
      caches_->Resolve(served.model, request.user_id(), request.ratings());
  if (absl::IsNotFound(user.status()) && request.ratings().empty()) {
    user = ReadCaches::EmptyUser(served.model);  // the cold start
  }
  if (!user.ok()) return user.status();
  // The allowed items: the catalogue (trained, not hidden) and the
  // request's filters, minus the user's rated items.
  const std::shared_ptr<const Catalogue> catalogue =
      caches_->CatalogueFor(served.model);
  const ItemFilter filter = ItemFilter::Build(
      *catalogue, ToFilterSpec(request, model, user->rated_items()));
  ro.filter = &filter;
  // No rating the model can use and no parameters: the cold start, answered
  // by the most-popular list or the empty user's ranking (--cold-start).
  const bool cold = user->model_user < 0 && user->rated_items().empty() &&
                    user->resolved->ratings.items.empty();
  const bool popular = cold && options_.cold_start == ColdStart::kPopular;
  ro.member_x = user->member_x();  // cached with the user's ratings
  std::vector<Ranked> ranked;
  if (filter.count() > 0 && popular) {
    ScratchPool<PredictScratch>::Lease scratch = predict_scratch_.Acquire();
    ranked =
        MostRatedRanking(model, *user, *catalogue, filter, ro, &scratch->model);
  } else if (filter.count() > 0) {
    // Leased scoring buffers, sized to the model after their first use.
    ScratchPool<ScoringScratch>::Lease scratch = scoring_scratch_.Acquire();
    ranked = RankItems(model, user->model_user, user->ratings(),
                       user->rated_items(), ro, scratch.get());
  }
  // The page: ranks offset + 1 .. offset + n.
  const size_t offset = static_cast<size_t>(checked.offset);
  ranked.erase(ranked.begin(),
               ranked.begin() + static_cast<std::ptrdiff_t>(
                                    std::min(offset, ranked.size())));
  std::vector<std::string> ids;
  ids.reserve(ranked.size());
  for (const Ranked& r : ranked) ids.push_back(model.items().Name(r.item));
  const std::vector<std::string> titles = caches_->Titles(ids);
  v1::RecommendResponse resp;
  resp.set_model_version(served.version);
  resp.set_rank_by(plan->rank_by);
  resp.set_threshold(plan->threshold);
  resp.set_candidates(filter.count());
  resp.set_fallback(popular ? v1::FALLBACK_POPULAR
                    : cold  ? v1::FALLBACK_EMPTY_USER
                            : v1::FALLBACK_NONE);
  for (size_t r = 0; r < ranked.size(); ++r) {
    v1::Recommendation* rec = resp.add_recommendations();
    rec->set_item_id(ids[r]);
    rec->set_title(titles[r]);
    rec->set_expected_rating(ranked[r].expected);
    if (UsesThreshold(ro.by)) {
      rec->set_probability_at_least(ranked[r].at_least);
    }
    if (NeedsRatedRbm(ro.by)) rec->set_probability_rated(ranked[r].p_rated);
    rec->set_rank(static_cast<int32_t>(offset + r + 1));
  }
  return resp;
}

absl::StatusOr<v1::SimilarItemsResponse> RbmrecService::SimilarItems(
    const v1::SimilarItemsRequest& request) {
  if (absl::Status s = CheckSimilar(request, Limits()); !s.ok()) return s;
  absl::StatusOr<Served> served = registry_->Get(request.model_version());
  if (!served.ok()) return served.status();
  auto index = similar_.For(served->model);
  if (!index.ok()) return index.status();
  std::vector<int32_t> rated;
  if (!request.user_id().empty()) {
    absl::StatusOr<UserView> user =
        caches_->Resolve(served->model, request.user_id(), {});
    if (user.ok()) rated = user->rated_items();
    if (!user.ok() && !absl::IsNotFound(user.status())) return user.status();
  }
  ScratchPool<SimilarScratch>::Lease scratch = similar_.Scratch();
  return AnswerSimilar(request, *served->model, served->version, *index, rated,
                       *caches_->CatalogueFor(served->model), *caches_,
                       scratch.get());
}

}  // namespace rbmrec::server
