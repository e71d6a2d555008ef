// Request checking of PredictRatings / Recommend
// (server/service/request_plan.h): the defaults resolved in one place, the
// limits, and messages naming the field; the placement rule's rank_by part.

#include "server/service/request_plan.h"

#include <string>

#include "absl/strings/match.h"
#include "core/error_reason.h"
#include "gtest/gtest.h"

namespace rbmrec::server {
namespace {

RatingScale Scale() { return *RatingScale::Create(1, 5, 1); }

RequestLimits SmallLimits() {
  RequestLimits l;
  l.max_predict_items = 3;
  l.max_recommend_n = 4;
  l.max_adhoc_ratings = 2;
  return l;
}

void ExpectMessage(const absl::Status& s, absl::StatusCode code,
                   const std::string& part) {
  EXPECT_EQ(s.code(), code) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), part)) << s;
}

TEST(RequestPlanTest, RecommendNDefaultsToTenWithinTheLimit) {
  v1::RecommendRequest r;
  absl::StatusOr<RecommendCheck> c =
      CheckRecommend(r, RequestLimits{}, Scale());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->n, 10);
  EXPECT_EQ(c->method, PredictMethod::kExact);
  // A limit below 10: n 0 means the limit.
  c = CheckRecommend(r, SmallLimits(), Scale());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->n, 4);
}

TEST(RequestPlanTest, RecommendLimitsAndUnknownEnums) {
  v1::RecommendRequest r;
  r.set_n(5);
  absl::StatusOr<RecommendCheck> c = CheckRecommend(r, SmallLimits(), Scale());
  ExpectMessage(c.status(), absl::StatusCode::kResourceExhausted,
                "n is 5, over the server's limit of 4 (--max-recommend-n)");
  EXPECT_EQ(ReasonOf(c.status()), kReasonLimitExceeded);
  r.set_n(-1);
  ExpectMessage(CheckRecommend(r, SmallLimits(), Scale()).status(),
                absl::StatusCode::kInvalidArgument, "n must be >= 0");
  r.set_n(0);
  r.set_rank_by(static_cast<v1::RankBy>(9));
  ExpectMessage(CheckRecommend(r, SmallLimits(), Scale()).status(),
                absl::StatusCode::kInvalidArgument,
                "rank_by 9 is not a known RankBy");
  r.set_rank_by(v1::EXPECTED_RATING);
  r.set_method(static_cast<v1::Method>(7));
  ExpectMessage(CheckRecommend(r, SmallLimits(), Scale()).status(),
                absl::StatusCode::kInvalidArgument,
                "method 7 is not a known Method");
}

TEST(RequestPlanTest, PredictChecksNameTheField) {
  v1::PredictRatingsRequest r;
  ExpectMessage(CheckPredict(r, SmallLimits(), Scale()).status(),
                absl::StatusCode::kInvalidArgument, "item_ids is empty");
  for (int i = 0; i < 4; ++i) r.add_item_ids("i");
  ExpectMessage(CheckPredict(r, SmallLimits(), Scale()).status(),
                absl::StatusCode::kResourceExhausted,
                "the number of item_ids is 4, over the server's limit of 3 "
                "(--max-predict-items)");
  r.clear_item_ids();
  r.add_item_ids("a");
  r.add_item_ids("");
  ExpectMessage(CheckPredict(r, SmallLimits(), Scale()).status(),
                absl::StatusCode::kInvalidArgument,
                "item_ids[1]: item_id is empty");
  r.set_item_ids(1, "b");
  r.set_user_id(std::string("u\x1b", 2));
  ExpectMessage(CheckPredict(r, SmallLimits(), Scale()).status(),
                absl::StatusCode::kInvalidArgument, "user_id contains");
  r.set_user_id("");  // no user: the ad-hoc ratings only
  r.set_method(v1::MEAN_FIELD);
  absl::StatusOr<PredictMethod> m = CheckPredict(r, SmallLimits(), Scale());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(*m, PredictMethod::kMeanField);
}

TEST(RequestPlanTest, AdHocRatings) {
  google::protobuf::RepeatedPtrField<v1::ItemRating> ratings;
  v1::ItemRating* a = ratings.Add();
  a->set_item_id("a");
  a->set_rating(4);
  EXPECT_TRUE(CheckAdHoc(ratings, SmallLimits(), Scale()).ok());
  a->set_rating(4.5);
  ExpectMessage(CheckAdHoc(ratings, SmallLimits(), Scale()),
                absl::StatusCode::kInvalidArgument,
                "ratings[0] (item_id 'a'): rating 4.5");
  a->set_rating(4);
  ratings.Add()->set_item_id("");
  ExpectMessage(CheckAdHoc(ratings, SmallLimits(), Scale()),
                absl::StatusCode::kInvalidArgument,
                "ratings[1].item_id is empty");
  ratings.Add()->set_item_id("c");
  ExpectMessage(CheckAdHoc(ratings, SmallLimits(), Scale()),
                absl::StatusCode::kResourceExhausted,
                "the number of ad-hoc ratings is 3, over the server's limit "
                "of 2 (--max-adhoc-ratings)");
}

TEST(RequestPlanTest, RankByDefaultIsResolvedOnce) {
  v1::RecommendRequest r;
  EXPECT_EQ(ResolveRankBy(r, true, true), v1::ITEM_REGRESSION_AT_LEAST);
  EXPECT_EQ(ResolveRankBy(r, true, false), v1::PROBABILITY_RATED_AT_LEAST);
  EXPECT_EQ(ResolveRankBy(r, false, false), v1::EXPECTED_RATING);
  r.set_threshold(4);
  EXPECT_EQ(ResolveRankBy(r, false, false), v1::PROBABILITY_AT_LEAST);
  EXPECT_EQ(ResolveRankBy(r, true, false), v1::PROBABILITY_RATED_AT_LEAST);
  EXPECT_EQ(ResolveRankBy(r, true, true), v1::ITEM_REGRESSION_AT_LEAST);
  r.set_rank_by(v1::PROBABILITY_RATED);
  EXPECT_EQ(ResolveRankBy(r, false, true), v1::PROBABILITY_RATED);
}

TEST(RequestPlanTest, OnlyThePRatedRankingsRunWithoutSharedPasses) {
  EXPECT_TRUE(SharesPasses(v1::EXPECTED_RATING));
  EXPECT_TRUE(SharesPasses(v1::PROBABILITY_AT_LEAST));
  EXPECT_FALSE(SharesPasses(v1::PROBABILITY_RATED));
  EXPECT_FALSE(SharesPasses(v1::PROBABILITY_RATED_AT_LEAST));
  EXPECT_FALSE(SharesPasses(v1::ITEM_REGRESSION_AT_LEAST));
}

}  // namespace
}  // namespace rbmrec::server
