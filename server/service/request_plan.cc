#include "server/service/request_plan.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/service/request_checks.h"

namespace rbmrec::server {
namespace {

// INVALID_ARGUMENT for an invalid user_id; OK for an empty one (the
// request then predicts from its ad-hoc ratings only).
absl::Status CheckOptionalUser(const std::string& user_id) {
  if (user_id.empty()) return absl::OkStatus();
  if (std::string why = IdProblem(user_id, "user_id"); !why.empty()) {
    return absl::InvalidArgumentError(why);
  }
  return absl::OkStatus();
}

// The ids of one of Recommend's item lists: at most `limit`, each valid.
absl::Status CheckIdList(const std::vector<std::string_view>& ids,
                         const char* field, int limit) {
  if (ids.size() > static_cast<size_t>(limit)) {
    return OverLimit(absl::StrCat("the number of ", field),
                     static_cast<int64_t>(ids.size()), limit,
                     "--max-filter-items");
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    if (std::string why = IdProblem(ids[i], "item_id"); !why.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, "[", i, "]: ", why));
    }
  }
  return absl::OkStatus();
}

// Recommend's filters: list lengths and entries.
absl::Status CheckFilters(const v1::RecommendRequest& request,
                          const RecommendIdLists& ids,
                          const RequestLimits& limits) {
  if (absl::Status s = CheckCategories(request.categories(),
                                       request.required_categories(), limits);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          CheckIdList(ids.exclude, "exclude_item_ids", limits.max_filter_items);
      !s.ok()) {
    return s;
  }
  return CheckIdList(ids.candidates, "candidate_item_ids",
                     limits.max_filter_items);
}

std::vector<std::string_view> Views(
    const google::protobuf::RepeatedPtrField<std::string>& ids) {
  std::vector<std::string_view> out;
  out.reserve(static_cast<size_t>(ids.size()));
  for (const std::string& id : ids) out.emplace_back(id);
  return out;
}

}  // namespace

absl::Status CheckCategories(
    const google::protobuf::RepeatedPtrField<std::string>& any,
    const google::protobuf::RepeatedPtrField<std::string>& all,
    const RequestLimits& limits) {
  const int categories = any.size() + all.size();
  if (categories > limits.max_categories) {
    return OverLimit("the number of categories + required_categories",
                     categories, limits.max_categories, "--max-categories");
  }
  for (const auto* list : {&any, &all}) {
    const char* field = list == &any ? "categories" : "required_categories";
    for (int i = 0; i < list->size(); ++i) {
      if (std::string why = CategoryProblem(list->Get(i), "category");
          !why.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(field, "[", i, "]: ", why));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckAdHoc(
    const google::protobuf::RepeatedPtrField<v1::ItemRating>& ratings,
    const RequestLimits& limits, const RatingScale& scale) {
  if (ratings.size() > limits.max_adhoc_ratings) {
    return OverLimit("the number of ad-hoc ratings", ratings.size(),
                     limits.max_adhoc_ratings, "--max-adhoc-ratings");
  }
  for (int i = 0; i < ratings.size(); ++i) {
    const v1::ItemRating& r = ratings.Get(i);
    if (std::string why = IdProblem(r.item_id(), "item_id"); !why.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("ratings[", i, "].", why));
    }
    if (std::string why = RatingProblem(r.rating(), scale); !why.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ratings[", i, "] (item_id '", r.item_id(), "'): ", why));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<PredictMethod> CheckPredict(
    const v1::PredictRatingsRequest& request, const RequestLimits& limits,
    const RatingScale& scale) {
  const int n = request.item_ids_size();
  if (n == 0) {
    return absl::InvalidArgumentError(
        "item_ids is empty: ask for at least one item");
  }
  if (n > limits.max_predict_items) {
    return OverLimit("the number of item_ids", n, limits.max_predict_items,
                     "--max-predict-items");
  }
  for (int i = 0; i < n; ++i) {
    if (std::string why = IdProblem(request.item_ids(i), "item_id");
        !why.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("item_ids[", i, "]: ", why));
    }
  }
  if (absl::Status s = CheckOptionalUser(request.user_id()); !s.ok()) return s;
  absl::StatusOr<PredictMethod> method = ToMethod(request.method());
  if (!method.ok()) return method.status();
  if (absl::Status s = CheckAdHoc(request.ratings(), limits, scale); !s.ok()) {
    return s;
  }
  return *method;
}

RecommendIdLists IdListsOf(const v1::RecommendRequest& request) {
  RecommendIdLists ids;
  ids.exclude = Views(request.exclude_item_ids());
  ids.candidates = Views(request.candidate_item_ids());
  return ids;
}

absl::StatusOr<RecommendCheck> CheckRecommend(
    const v1::RecommendRequest& request, const RequestLimits& limits,
    const RatingScale& scale) {
  return CheckRecommend(request, IdListsOf(request), limits, scale);
}

absl::StatusOr<RecommendCheck> CheckRecommend(
    const v1::RecommendRequest& request, const RecommendIdLists& ids,
    const RequestLimits& limits, const RatingScale& scale) {
  RecommendCheck out;
  out.n = request.n();
  if (out.n < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("n must be >= 0 (0 means 10), got ", out.n));
  }
  if (out.n > limits.max_recommend_n) {
    return OverLimit("n", out.n, limits.max_recommend_n, "--max-recommend-n");
  }
  if (out.n == 0) out.n = std::min(10, limits.max_recommend_n);
  out.offset = request.offset();
  if (out.offset < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("offset must be >= 0, got ", out.offset));
  }
  if (static_cast<int64_t>(out.offset) + out.n > limits.max_recommend_n) {
    return OverLimit("offset + n", static_cast<int64_t>(out.offset) + out.n,
                     limits.max_recommend_n, "--max-recommend-n");
  }
  if (absl::Status s = CheckFilters(request, ids, limits); !s.ok()) return s;
  absl::StatusOr<PredictMethod> method = ToMethod(request.method());
  if (!method.ok()) return method.status();
  out.method = *method;
  if (!v1::RankBy_IsValid(request.rank_by())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank_by ", static_cast<int>(request.rank_by()),
        " is not a known RankBy (EXPECTED_RATING = 1, PROBABILITY_AT_LEAST = "
        "2, PROBABILITY_RATED = 3, PROBABILITY_RATED_AT_LEAST = 4, "
        "ITEM_REGRESSION_AT_LEAST = 5)"));
  }
  if (absl::Status s = CheckOptionalUser(request.user_id()); !s.ok()) return s;
  if (absl::Status s = CheckAdHoc(request.ratings(), limits, scale); !s.ok()) {
    return s;
  }
  return out;
}

v1::RankBy ResolveRankBy(const v1::RecommendRequest& request,
                         bool has_rated_rbm, bool has_item_regression) {
  if (request.rank_by() != v1::RANK_BY_UNSPECIFIED) return request.rank_by();
  return has_item_regression        ? v1::ITEM_REGRESSION_AT_LEAST
         : has_rated_rbm            ? v1::PROBABILITY_RATED_AT_LEAST
         : request.threshold() != 0 ? v1::PROBABILITY_AT_LEAST
                                    : v1::EXPECTED_RATING;
}

bool SharesPasses(v1::RankBy rank_by) {
  return rank_by != v1::PROBABILITY_RATED &&
         rank_by != v1::PROBABILITY_RATED_AT_LEAST &&
         rank_by != v1::ITEM_REGRESSION_AT_LEAST;
}

FilterSpec ToFilterSpec(const v1::RecommendRequest& request,
                        const RecommendIdLists& ids, const Model& model,
                        const std::vector<int32_t>& rated) {
  FilterSpec spec =
      CategoryAndExclusionSpec(request, ids.exclude, model, rated);
  spec.use_candidates = !ids.candidates.empty();
  spec.candidates.reserve(ids.candidates.size());
  for (const std::string_view id : ids.candidates) {
    spec.candidates.push_back(model.items().Find(id));
  }
  return spec;
}

absl::StatusOr<RankPlan> ToRankOptions(
    const v1::RecommendRequest& request, const RecommendCheck& checked,
    const Model& model, int64_t version, int candidates,
    absl::FunctionRef<int()> default_threshold) {
  RankPlan plan;
  RankOptions& ro = plan.options;
  ro.method = checked.method;
  ro.n = checked.offset + checked.n;  // the page is the tail
  ro.candidates = candidates;
  plan.rank_by =
      ResolveRankBy(request, model.HasRatedRbm(), model.HasItemRegression());
  switch (plan.rank_by) {
    case v1::PROBABILITY_AT_LEAST:
      ro.by = RankBy::kAtLeast;
      break;
    case v1::PROBABILITY_RATED:
      ro.by = RankBy::kRated;
      break;
    case v1::PROBABILITY_RATED_AT_LEAST:
      ro.by = RankBy::kRatedAtLeast;
      break;
    case v1::ITEM_REGRESSION_AT_LEAST:
      ro.by = RankBy::kRegressionAtLeast;
      break;
    default:
      ro.by = RankBy::kExpected;
      break;
  }
  if (NeedsRatedRbm(ro.by) && !model.HasRatedRbm()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "rank_by ", v1::RankBy_Name(plan.rank_by), ": model version ", version,
        " has no rated RBM (trained before it existed or with rated_hidden "
        "0); train a new model, or rank by EXPECTED_RATING or "
        "PROBABILITY_AT_LEAST"));
  }
  if (NeedsItemRegression(ro.by) && !model.HasItemRegression()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "rank_by ITEM_REGRESSION_AT_LEAST: model version ", version,
        " has no item regression (trained before it existed, with "
        "item_regression 0, or with more items than its size rule allows); "
        "rank by PROBABILITY_RATED_AT_LEAST, or train with item_regression "
        "1"));
  }
  if (!UsesThreshold(ro.by)) return plan;
  const RatingScale& scale = model.scale();
  plan.threshold = request.threshold();
  if (plan.threshold == 0 && (plan.rank_by == v1::PROBABILITY_RATED_AT_LEAST ||
                              plan.rank_by == v1::ITEM_REGRESSION_AT_LEAST)) {
    ro.k0 = default_threshold();
    plan.threshold = scale.Value(ro.k0);
    return plan;
  }
  if (!std::isfinite(plan.threshold) || plan.threshold < scale.min() - 1e-9 ||
      plan.threshold > scale.max() + 1e-9) {
    return absl::InvalidArgumentError(absl::StrCat("threshold ", plan.threshold,
                                                   " is outside the scale ",
                                                   scale.ToString()));
  }
  ro.k0 = std::clamp(static_cast<int>(std::ceil(
                         (plan.threshold - scale.min()) / scale.step() - 1e-6)),
                     0, model.K() - 1);
  return plan;
}

}  // namespace rbmrec::server
