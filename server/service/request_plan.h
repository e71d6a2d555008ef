#ifndef RBMREC_SERVER_SERVICE_REQUEST_PLAN_H_
#define RBMREC_SERVER_SERVICE_REQUEST_PLAN_H_

// The one home of PredictRatings / Recommend request checking and defaults,
// used by the service (server/service/service.h) and, through
// RbmrecService::Place*, by the gRPC layer (server/transport/grpc_server.h).
//
// Contract: pure functions, thread-safe, no I/O. Errors are the API's:
// INVALID_ARGUMENT naming the field ("item_ids[2]: item_id is empty",
// "rank_by 9 is not a known RankBy ..."), RESOURCE_EXHAUSTED + reason
// LIMIT_EXCEEDED naming the field, the value, the limit and its flag
// (OverLimit, server/service/request_checks.h), FAILED_PRECONDITION when the
// model cannot rank as asked. Recommend's defaults (n 0 = 10, rank_by
// RANK_BY_UNSPECIFIED, threshold 0) are resolved here and nowhere else.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/item_filter.h"
#include "core/model.h"
#include "core/rating_scale.h"
#include "core/recommend.h"
#include "proto/rbmrec.pb.h"

namespace rbmrec::server {

namespace v1 = ::rbmrec::v1;

// The per-request limits of the API (each bound to a flag by main.cc).
struct RequestLimits {
  // Rows per AddRatings batch, items per PutItems call and ratings per
  // GetUserRatings page (--max-batch).
  int max_batch_rows = 10000;
  // item_ids per PredictRatings and per DeleteRatings request
  // (--max-predict-items).
  int max_predict_items = 1000;
  // Largest Recommend n, and offset + n (--max-recommend-n).
  int max_recommend_n = 1000;
  // Recommend's exclude_item_ids and candidate_item_ids, each list
  // (--max-filter-items).
  int max_filter_items = 10000;
  // Recommend's categories and required_categories together
  // (--max-categories).
  int max_categories = 64;
  // Ad-hoc `ratings` per PredictRatings / Recommend request
  // (--max-adhoc-ratings).
  int max_adhoc_ratings = 10000;
  // user_ids per RecommendAll request (--max-bulk-users).
  int max_bulk_users = 100000;
};

// Where a PredictRatings / Recommend call runs, decided once per request
// by the service (RbmrecService::Place*) and followed by the gRPC layer.
struct Placement {
  // The model version answers from memory (no read and decode first).
  bool resident = false;
  // Recommend ranks with an all-item mean-field pass of the rating RBMs,
  // shared by concurrent calls on the ranking threads; false for the
  // p(rated) rankings and for PredictRatings (a few dozen items: inline).
  bool shares_passes = false;
};

// The category lists of a request (Recommend's and SimilarItems'):
// RESOURCE_EXHAUSTED + LIMIT_EXCEEDED when both together exceed
// --max-categories, INVALID_ARGUMENT naming "categories[i]" or
// "required_categories[i]" for a name CategoryProblem refuses.
absl::Status CheckCategories(
    const google::protobuf::RepeatedPtrField<std::string>& any,
    const google::protobuf::RepeatedPtrField<std::string>& all,
    const RequestLimits& limits);

// The ad-hoc ratings of a request: at most limits.max_adhoc_ratings
// (--max-adhoc-ratings), ids as IdProblem says ("ratings[3].item_id is
// empty"), ratings on `scale` ("ratings[3] (item_id 'x'): rating ...").
absl::Status CheckAdHoc(
    const google::protobuf::RepeatedPtrField<v1::ItemRating>& ratings,
    const RequestLimits& limits, const RatingScale& scale);

// Every check of a PredictRatings request that needs no model: item_ids
// non-empty, at most max_predict_items, each a valid id; user_id valid
// when set; method known; the ad-hoc ratings. Returns the method.
absl::StatusOr<PredictMethod> CheckPredict(
    const v1::PredictRatingsRequest& request, const RequestLimits& limits,
    const RatingScale& scale);

// Recommend's two id lists, exclude_item_ids and candidate_item_ids, as
// views: of the request's own strings (IdListsOf), or of the bytes of a
// request the gRPC layer reads without copying its ids into strings
// (server/transport/recommend_wire.h). Every Recommend function below that
// takes one reads the lists from it, never from the request. REQUIRES: the
// viewed bytes outlive every use.
struct RecommendIdLists {
  std::vector<std::string_view> exclude;
  std::vector<std::string_view> candidates;
};
RecommendIdLists IdListsOf(const v1::RecommendRequest& request);

// A Recommend request checked without a model: n resolved (0 = min(10,
// max_recommend_n); < 0 INVALID_ARGUMENT; over max_recommend_n
// LIMIT_EXCEEDED), offset >= 0 and offset + n within max_recommend_n
// (LIMIT_EXCEEDED naming "offset + n"), method and rank_by known, user_id
// and ad-hoc ratings valid, the filters' lists within max_filter_items /
// max_categories (LIMIT_EXCEEDED naming the field) and each entry valid
// (INVALID_ARGUMENT: "exclude_item_ids[2]: item_id is empty",
// "categories[0]: category is empty").
struct RecommendCheck {
  int n = 0;
  int offset = 0;
  PredictMethod method = PredictMethod::kExact;
};
absl::StatusOr<RecommendCheck> CheckRecommend(
    const v1::RecommendRequest& request, const RecommendIdLists& ids,
    const RequestLimits& limits, const RatingScale& scale);
// The same with the request's own lists (IdListsOf).
absl::StatusOr<RecommendCheck> CheckRecommend(
    const v1::RecommendRequest& request, const RequestLimits& limits,
    const RatingScale& scale);

// What rank_by means for a model with or without the rated RBM and the
// item regression: the request's value when set; else
// ITEM_REGRESSION_AT_LEAST with the item regression,
// PROBABILITY_RATED_AT_LEAST with the rated RBM, PROBABILITY_AT_LEAST when
// a threshold is sent, else EXPECTED_RATING.
v1::RankBy ResolveRankBy(const v1::RecommendRequest& request,
                         bool has_rated_rbm, bool has_item_regression);
// True when ranking by `rank_by` (resolved) shares all-item passes (every
// ranking but PROBABILITY_RATED, PROBABILITY_RATED_AT_LEAST and
// ITEM_REGRESSION_AT_LEAST).
bool SharesPasses(v1::RankBy rank_by);

// The filter conditions Recommend and SimilarItems share: the request's
// categories (any-of) and required_categories (all-of), and as exclusions
// `rated` (model indices) and `exclude` (ids; e.g. the request's
// exclude_item_ids).
template <typename Request, typename Ids>
FilterSpec CategoryAndExclusionSpec(const Request& request, const Ids& exclude,
                                    const Model& model,
                                    const std::vector<int32_t>& rated) {
  FilterSpec spec;
  spec.any_categories.assign(request.categories().begin(),
                             request.categories().end());
  spec.all_categories.assign(request.required_categories().begin(),
                             request.required_categories().end());
  spec.exclude = rated;
  spec.exclude.reserve(rated.size() + static_cast<size_t>(exclude.size()));
  for (const auto& id : exclude) {
    spec.exclude.push_back(model.items().Find(id));
  }
  return spec;
}

// The request's filters in `model`'s indices (the id lists from `ids`),
// over `rated` (the user's rated items, excluded too). Unknown ids are
// ignored.
FilterSpec ToFilterSpec(const v1::RecommendRequest& request,
                        const RecommendIdLists& ids, const Model& model,
                        const std::vector<int32_t>& rated);

// A Recommend request made into core's RankOptions for `model`.
struct RankPlan {
  RankOptions options;
  v1::RankBy rank_by = v1::RANK_BY_UNSPECIFIED;  // resolved
  double threshold = 0;                          // as answered
};
// `checked` from CheckRecommend; `version` names the model in messages;
// `default_threshold` gives the rating index of the default threshold of
// PROBABILITY_RATED_AT_LEAST (called only when threshold is 0 there).
// FAILED_PRECONDITION when the ranking needs the rated RBM the model lacks;
// INVALID_ARGUMENT when the threshold is off the model's scale.
absl::StatusOr<RankPlan> ToRankOptions(
    const v1::RecommendRequest& request, const RecommendCheck& checked,
    const Model& model, int64_t version, int candidates,
    absl::FunctionRef<int()> default_threshold);

}  // namespace rbmrec::server

#endif  // RBMREC_SERVER_SERVICE_REQUEST_PLAN_H_
