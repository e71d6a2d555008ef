// Recommend's cold start (server/service/service_options.h ColdStart): a
// user without ratings gets, by default, the most-rated items that pass the
// request's filters (FALLBACK_POPULAR), or with kEmptyUser the model's
// answer for an empty user (FALLBACK_EMPTY_USER).

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/server/service_fixture.h"

namespace rbmrec::server::testing {
namespace {

// The synthetic data rates every item 36 times; 40 more users make items
// i0..i7 more popular, item i by 5 * (8 - i) extra ratings: i0 76, i1 71,
// ..., i7 41. The rest tie at 36 and are ordered by item id ("i10" < "i9").
v1::AddRatingsRequest PopularityBatch() {
  v1::AddRatingsRequest req;
  for (int x = 0; x < 40; ++x) {
    for (int i = 0; i <= x % 8; ++i) {
      *req.add_ratings() = Row(absl::StrCat("p", x), I(i), 1 + (x + i) % 5);
    }
  }
  return req;
}

// Item i: category "mod4-<i % 4>".
v1::PutItemsRequest Categories() {
  v1::PutItemsRequest req;
  for (int i = 0; i < kItems; ++i) {
    v1::Item* item = req.add_items();
    item->set_item_id(I(i));
    item->add_categories(absl::StrCat("mod4-", i % 4));
  }
  return req;
}

class ColdStartTest : public ServiceFixture {
 protected:
  void StartWith(ColdStart mode) {
    ServiceOptions o = DefaultOptions();
    o.train_defaults.validation_fraction = 0;  // counts = stored ratings
    o.cold_start = mode;
    Start(nullptr, o);
    LoadSynthetic();
    ASSERT_TRUE(service_->AddRatings({PopularityBatch()}).ok());
    ASSERT_TRUE(service_->PutItems(Categories()).ok());
    TrainDone();
  }
  v1::RecommendResponse Rec(v1::RecommendRequest req) {
    absl::StatusOr<v1::RecommendResponse> r = service_->Recommend(req);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : v1::RecommendResponse();
  }
  static v1::RecommendRequest Cold(int n) {
    v1::RecommendRequest req;
    req.set_user_id("nobody");
    req.set_n(n);
    return req;
  }
};

TEST_F(ColdStartTest, DefaultIsTheMostRatedItemsMarkedPopular) {
  StartWith(ColdStart::kPopular);
  const v1::RecommendResponse r = Rec(Cold(5));
  EXPECT_EQ(r.fallback(), v1::FALLBACK_POPULAR);
  EXPECT_EQ(Ids(r), (std::vector<std::string>{"i0", "i1", "i2", "i3", "i4"}));
  EXPECT_EQ(r.candidates(), kItems);
  for (int k = 0; k < r.recommendations_size(); ++k) {
    const v1::Recommendation& x = r.recommendations(k);
    EXPECT_EQ(x.rank(), k + 1);
    EXPECT_GE(x.expected_rating(), 1.0) << x.item_id();
    EXPECT_LE(x.expected_rating(), 5.0) << x.item_id();
    EXPECT_EQ(x.probability_at_least(), 0.0);
  }
  // Past the popular eight, the ties in item id order.
  EXPECT_EQ(Ids(Rec(Cold(10))).back(), "i11");
  // The same list for every user without ratings; a user with ratings is
  // no fallback.
  v1::RecommendRequest other = Cold(5);
  other.set_user_id("someone-else");
  EXPECT_EQ(Ids(Rec(other)), Ids(r));
  v1::RecommendRequest warm = Cold(5);
  warm.set_user_id(U(0));
  EXPECT_EQ(Rec(warm).fallback(), v1::FALLBACK_NONE);
  // PredictRatings keeps NOT_FOUND.
  EXPECT_EQ(PredictS("nobody", I(1)).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(ColdStartTest, FiltersPagesAndHiddenItemsApply) {
  StartWith(ColdStart::kPopular);
  v1::RecommendRequest req = Cold(4);
  req.add_categories("mod4-1");  // i1 i5, then the ties i13 i17 ...
  EXPECT_EQ(Ids(Rec(req)),
            (std::vector<std::string>{"i1", "i5", "i13", "i17"}));
  EXPECT_EQ(Rec(req).candidates(), kItems / 4);

  req = Cold(2);
  req.add_exclude_item_ids("i0");
  req.add_exclude_item_ids("i2");
  req.set_offset(1);  // i1 i3 | i4 i5
  const v1::RecommendResponse page = Rec(req);
  EXPECT_EQ(Ids(page), (std::vector<std::string>{"i3", "i4"}));
  EXPECT_EQ(page.recommendations(0).rank(), 2);

  req = Cold(3);
  for (const char* id : {"i30", "i6", "i2", "nope"}) {
    req.add_candidate_item_ids(id);
  }
  EXPECT_EQ(Ids(Rec(req)), (std::vector<std::string>{"i2", "i6", "i30"}));

  v1::PutItemsRequest hide;
  hide.add_hide_item_ids("i1");
  ASSERT_TRUE(service_->PutItems(hide).ok());
  EXPECT_EQ(Ids(Rec(Cold(3))), (std::vector<std::string>{"i0", "i2", "i3"}));
}

TEST_F(ColdStartTest, EmptyUserModeAnswersFromTheModel) {
  StartWith(ColdStart::kEmptyUser);
  v1::RecommendRequest req = Cold(5);
  req.set_rank_by(v1::EXPECTED_RATING);
  const v1::RecommendResponse r = Rec(req);
  EXPECT_EQ(r.fallback(), v1::FALLBACK_EMPTY_USER);
  EXPECT_EQ(r.recommendations_size(), 5);
  // Ranked as asked: by the empty user's expected rating, best first (not
  // by popularity).
  for (int k = 1; k < r.recommendations_size(); ++k) {
    EXPECT_GE(r.recommendations(k - 1).expected_rating(),
              r.recommendations(k).expected_rating());
  }
  // The default ranking too, the same list for every user without ratings.
  v1::RecommendRequest other = Cold(5);
  other.set_user_id("someone-else");
  EXPECT_EQ(Rec(other).fallback(), v1::FALLBACK_EMPTY_USER);
  EXPECT_EQ(Ids(Rec(other)), Ids(Rec(Cold(5))));
}

}  // namespace
}  // namespace rbmrec::server::testing
