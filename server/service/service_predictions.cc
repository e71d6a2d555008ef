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

// A conditional model's extra items for a PredictRatings call: v's extra
// items plus the known items of `query` that v neither rates nor holds
// already, sorted, each once, into `out`. Returns whether any was added
// (false: v's own extra items are the answer).
bool AskedExtra(const VisibleSet& v, const std::vector<int32_t>& query,
                std::vector<int32_t>* out) {
  const int32_t* rated_end = v.items + v.n;
  const int32_t* extra_end = v.extra + v.n_extra;
  out->assign(v.extra, extra_end);
  for (int32_t i : query) {
    if (i < 0 || std::binary_search(v.items, rated_end, i) ||
        std::binary_search(v.extra, extra_end, i)) {
      continue;
    }
    out->push_back(i);
  }
  if (out->size() == static_cast<size_t>(v.n_extra)) return false;
  std::sort(out->begin(), out->end());
  out->erase(std::unique(out->begin(), out->end()), out->end());
  return true;
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
  VisibleSet v = user->ratings();
  const float* member_x = user->member_x();
  // A conditional model's r also holds the items asked about (the seed
  // paper's set-up): its hidden inputs are computed for this query.
  std::vector<int32_t> asked;
  std::vector<float> asked_x;
  if (IsConditional(model) && AskedExtra(v, query, &asked)) {
    v.extra = asked.data();
    v.n_extra = static_cast<int64_t>(asked.size());
    model.MemberInputs(v, &asked_x);
    member_x = asked_x.data();
  }
  model.PredictWith(user->model_user, v, member_x, query, *method, probs.data(),
                    &fallback, &scratch->model);
  std::vector<std::string> titles = caches_->Titles(std::vector<std::string>(
      request.item_ids().begin(), request.item_ids().end()));

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
    out->set_title(std::move(titles[static_cast<size_t>(i)]));
  }
  return resp;
}

absl::StatusOr<v1::RecommendResponse> RbmrecService::Recommend(
    const v1::RecommendRequest& request) {
  return Recommend(request, IdListsOf(request));
}

absl::StatusOr<v1::RecommendResponse> RbmrecService::Recommend(
    const v1::RecommendRequest& request, const RecommendIdLists& ids) {
  absl::StatusOr<RecommendCheck> checked =
      CheckRecommend(request, ids, Limits(), options_.scale);
  if (!checked.ok()) return checked.status();
  absl::StatusOr<Served> served = registry_->Get(request.model_version());
  if (!served.ok()) return served.status();
  return RecommendServed(request, ids, *checked, *served);
}

struct RbmrecService::PreparedRecommend {
  RankPlan plan;
  UserView user;
  std::shared_ptr<const Catalogue> catalogue;
  ItemFilter filter;
  bool cold = false;     // no rating the model can use, no parameters
  bool popular = false;  // cold, answered by the most-popular list
  // RankItems ranks this user (else the most-popular list, or nothing).
  bool ranks() const { return filter.count() > 0 && !popular; }
};

absl::Status RbmrecService::PrepareRecommend(
    const v1::RecommendRequest& request, const RecommendIdLists& ids,
    const RecommendCheck& checked, const Served& served,
    PreparedRecommend* out) {
  const Model& model = *served.model;
  absl::StatusOr<RankPlan> plan = ToRankOptions(
      request, checked, model, served.version, options_.recommend_candidates,
      [&] { return caches_->DefaultThreshold(served.model); });
  if (!plan.ok()) return plan.status();
  out->plan = *std::move(plan);
  absl::StatusOr<UserView> user =
      caches_->Resolve(served.model, request.user_id(), request.ratings());
  if (absl::IsNotFound(user.status()) && request.ratings().empty()) {
    user = ReadCaches::EmptyUser(served.model);  // the cold start
  }
  if (!user.ok()) return user.status();
  out->user = *std::move(user);
  // The allowed items: the catalogue (trained, not hidden) and the
  // request's filters, minus the user's rated items.
  out->catalogue = caches_->CatalogueFor(served.model);
  out->filter = ItemFilter::Build(
      *out->catalogue,
      ToFilterSpec(request, ids, model, out->user.rated_items()));
  // No rating the model can use and no parameters: the cold start, answered
  // by the most-popular list or the empty user's ranking (--cold-start).
  out->cold = out->user.model_user < 0 && out->user.rated_items().empty() &&
              out->user.resolved->ratings.items.empty();
  out->popular = out->cold && options_.cold_start == ColdStart::kPopular;
  out->plan.options.member_x = out->user.member_x();  // cached per user
  return absl::OkStatus();
}

std::vector<Ranked> RbmrecService::RankPrepared(
    PreparedRecommend& prep, const Model& model, const float* rated_logits,
    const float* mean_field_scores) {
  RankOptions& ro = prep.plan.options;
  ro.filter = &prep.filter;
  ro.rated_logits = rated_logits;
  ro.mean_field_scores = mean_field_scores;
  if (prep.filter.count() == 0) return {};
  if (prep.popular) {
    ScratchPool<PredictScratch>::Lease scratch = predict_scratch_.Acquire();
    return MostRatedRanking(model, prep.user, *prep.catalogue, prep.filter, ro,
                            &scratch->model);
  }
  // Leased scoring buffers, sized to the model after their first use.
  ScratchPool<ScoringScratch>::Lease scratch = scoring_scratch_.Acquire();
  return RankItems(model, prep.user.model_user, prep.user.ratings(),
                   prep.user.rated_items(), ro, scratch.get());
}

v1::RecommendResponse RbmrecService::RespondRecommend(
    const PreparedRecommend& prep, std::vector<Ranked> ranked,
    const RecommendCheck& checked, const Served& served) {
  const Model& model = *served.model;
  const RankOptions& ro = prep.plan.options;
  // The page: ranks offset + 1 .. offset + n.
  const size_t offset = static_cast<size_t>(checked.offset);
  ranked.erase(ranked.begin(),
               ranked.begin() + static_cast<std::ptrdiff_t>(
                                    std::min(offset, ranked.size())));
  std::vector<std::string> ids;
  ids.reserve(ranked.size());
  for (const Ranked& r : ranked) ids.push_back(model.items().Name(r.item));
  std::vector<std::string> titles = caches_->Titles(ids);
  v1::RecommendResponse resp;
  resp.set_model_version(served.version);
  resp.set_rank_by(prep.plan.rank_by);
  resp.set_threshold(prep.plan.threshold);
  resp.set_candidates(prep.filter.count());
  resp.set_fallback(prep.popular ? v1::FALLBACK_POPULAR
                    : prep.cold  ? v1::FALLBACK_EMPTY_USER
                                 : v1::FALLBACK_NONE);
  for (size_t r = 0; r < ranked.size(); ++r) {
    v1::Recommendation* rec = resp.add_recommendations();
    rec->set_item_id(std::move(ids[r]));  // moved: no copy per string
    rec->set_title(std::move(titles[r]));
    rec->set_expected_rating(ranked[r].expected);
    if (UsesThreshold(ro.by)) {
      rec->set_probability_at_least(ranked[r].at_least);
    }
    if (NeedsRatedRbm(ro.by)) rec->set_probability_rated(ranked[r].p_rated);
    if (NeedsItemRegression(ro.by)) {
      rec->set_item_regression_score(ranked[r].regression);
    }
    rec->set_rank(static_cast<int32_t>(offset + r + 1));
  }
  return resp;
}

absl::StatusOr<v1::RecommendResponse> RbmrecService::RecommendServed(
    const v1::RecommendRequest& request, const RecommendIdLists& ids,
    const RecommendCheck& checked, const Served& served) {
  PreparedRecommend prep;
  if (absl::Status s = PrepareRecommend(request, ids, checked, served, &prep);
      !s.ok()) {
    return s;
  }
  std::vector<Ranked> ranked =
      RankPrepared(prep, *served.model, nullptr, nullptr);
  return RespondRecommend(prep, std::move(ranked), checked, served);
}

std::vector<absl::StatusOr<v1::RecommendResponse>>
RbmrecService::RecommendServedBatch(
    const std::vector<v1::RecommendRequest>& requests,
    const RecommendCheck& checked, const Served& served) {
  const Model& model = *served.model;
  const size_t m = static_cast<size_t>(model.num_items());
  std::vector<absl::StatusOr<v1::RecommendResponse>> out;
  out.reserve(requests.size());
  std::vector<PreparedRecommend> preps;
  std::vector<float> passes;  // one batch's rated logits or scores
  std::vector<float> values;
  for (size_t g = 0; g < requests.size(); g += kMaxScoreBatch) {
    const size_t e = std::min(requests.size(), g + kMaxScoreBatch);
    preps.assign(e - g, PreparedRecommend());
    std::vector<absl::Status> prepared(e - g);
    // The users RankItems ranks, and the pass they share (every request
    // has the template's ranking).
    std::vector<size_t> shared;
    std::vector<VisibleSet> v;
    std::vector<int32_t> model_users;
    for (size_t i = 0; i < e - g; ++i) {
      prepared[i] =
          PrepareRecommend(requests[g + i], IdListsOf(requests[g + i]), checked,
                           served, &preps[i]);
      if (prepared[i].ok() && preps[i].ranks()) {
        shared.push_back(i);
        v.push_back(preps[i].user.ratings());
        model_users.push_back(preps[i].user.model_user);
      }
    }
    const int n = static_cast<int>(shared.size());
    const RankOptions* ro = n > 0 ? &preps[shared[0]].plan.options : nullptr;
    const bool rated = ro != nullptr && NeedsRatedRbm(ro->by);
    const bool mean_field = ro != nullptr && RanksByMeanField(*ro);
    if (rated || mean_field) {
      passes.resize(static_cast<size_t>(n) * m);
      const VisibleSet* vs[kMaxScoreBatch];
      float* outs[kMaxScoreBatch];
      for (int b = 0; b < n; ++b) {
        vs[b] = &v[static_cast<size_t>(b)];
        outs[b] = passes.data() + static_cast<size_t>(b) * m;
      }
      ScratchPool<ScoringScratch>::Lease scratch = scoring_scratch_.Acquire();
      if (rated) {
        RatedLogitsBatch(model, vs, n, outs, scratch.get());
      } else {
        RankValues(model, *ro, &values);
        ScoreAllMeanFieldBatch(model, model_users.data(), vs, n, values.data(),
                               outs, scratch.get());
      }
    }
    size_t next = 0;  // the next of `shared`
    for (size_t i = 0; i < e - g; ++i) {
      if (!prepared[i].ok()) {
        out.push_back(prepared[i]);
        continue;
      }
      const float* pass = nullptr;
      if (next < shared.size() && shared[next] == i) {
        if (rated || mean_field) pass = passes.data() + next * m;
        ++next;
      }
      std::vector<Ranked> ranked = RankPrepared(
          preps[i], model, rated ? pass : nullptr, mean_field ? pass : nullptr);
      out.push_back(
          RespondRecommend(preps[i], std::move(ranked), checked, served));
    }
  }
  return out;
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
