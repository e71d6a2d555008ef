// Implicit feedback in the service: views (Rating.kind VIEW) stored beside
// the ratings, counted, erased, and used by a conditional model
// (TrainOptions.conditional) when it trains and when it serves.

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/service_fixture.h"

namespace rbmrec::server {
namespace {

using ::rbmrec::server::testing::I;
using ::rbmrec::server::testing::kItems;
using ::rbmrec::server::testing::kUsers;
using ::rbmrec::server::testing::Rated;
using ::rbmrec::server::testing::Row;
using ::rbmrec::server::testing::U;
using ::testing::HasSubstr;

v1::Rating ViewRow(const std::string& u, const std::string& i, int64_t ts = 0) {
  v1::Rating row;
  row.set_user_id(u);
  row.set_item_id(i);
  row.set_kind(v1::Rating::VIEW);
  row.set_timestamp(ts);
  return row;
}

// Every user viewed the unrated items of their own half (the planted
// taste): a signal the conditional model can learn from.
v1::AddRatingsRequest SyntheticViews() {
  v1::AddRatingsRequest req;
  for (int u = 0; u < kUsers; ++u) {
    for (int i = 0; i < kItems; ++i) {
      if (!Rated(u, i) && (i / 20) == (u % 2))
        *req.add_ratings() = ViewRow(U(u), I(i));
    }
  }
  return req;
}

class ImplicitTest : public testing::ServiceFixture {
 protected:
  // The user's predicted distribution of each of `items`, asked together.
  std::vector<std::vector<float>> Predict(
      const std::string& user, const std::vector<std::string>& items) {
    v1::PredictRatingsRequest req;
    req.set_user_id(user);
    for (const std::string& i : items) req.add_item_ids(i);
    absl::StatusOr<v1::PredictRatingsResponse> r =
        service_->PredictRatings(req);
    EXPECT_TRUE(r.ok()) << r.status();
    std::vector<std::vector<float>> out;
    if (!r.ok()) return out;
    for (const v1::ItemPrediction& p : r->predictions()) {
      out.emplace_back(p.probabilities().begin(), p.probabilities().end());
    }
    return out;
  }

  v1::TrainProgress Train(bool conditional) {
    v1::TrainRequest req;
    req.mutable_options()->set_conditional(conditional);
    req.set_activation(v1::ACTIVATE_ALWAYS);
    return TrainDone(req);
  }
};

TEST_F(ImplicitTest, ViewsAreValidatedStoredOncePerPairAndCounted) {
  v1::AddRatingsRequest b;
  *b.add_ratings() = Row("u1", "i1", 4);        // a rating
  *b.add_ratings() = ViewRow("u1", "i1", 10);   // a view of the rated item
  *b.add_ratings() = ViewRow("u1", "i2", 11);   // a view
  *b.add_ratings() = ViewRow("u1", "i2", 12);   // the same view again
  v1::Rating with_value = ViewRow("u1", "i3");  // a view with a rating
  with_value.set_rating(4);
  *b.add_ratings() = with_value;
  v1::Rating bad_kind = Row("u1", "i4", 4);  // no such kind
  bad_kind.set_kind(static_cast<v1::Rating::Kind>(7));
  *b.add_ratings() = bad_kind;
  *b.add_ratings() = ViewRow("", "i5");  // ids are checked as for ratings
  absl::StatusOr<v1::AddRatingsResponse> r = service_->AddRatings({b});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->accepted(), 4);
  EXPECT_EQ(r->views(), 3);
  EXPECT_EQ(r->replaced(), 0);
  EXPECT_EQ(r->rejected(), 3);
  ASSERT_EQ(r->rejected_rows_size(), 3);
  EXPECT_THAT(r->rejected_rows(0).reason(),
              HasSubstr("row 4: rating must be unset for a view, got 4"));
  EXPECT_THAT(r->rejected_rows(1).reason(),
              HasSubstr("row 5: kind 7 is not a Rating.Kind"));
  EXPECT_THAT(r->rejected_rows(2).reason(), HasSubstr("user_id is empty"));

  // Again: views are idempotent, the rating is replaced by itself.
  r = service_->AddRatings({b});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->views(), 3);
  EXPECT_EQ(r->replaced(), 1);
  absl::StatusOr<v1::GetStatsResponse> st = service_->GetStats({});
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->ratings(), 1);
  EXPECT_EQ(st->views(), 2);
  EXPECT_EQ(st->users(), 1);
  EXPECT_EQ(st->items(), 2);

  // Views are not ratings: GetUserRatings lists the one rating.
  v1::GetUserRatingsRequest ur;
  ur.set_user_id("u1");
  absl::StatusOr<v1::GetUserRatingsResponse> got = service_->GetUserRatings(ur);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->total(), 1);

  // DeleteUser erases the views too.
  v1::DeleteUserRequest del;
  del.set_user_id("u1");
  ASSERT_TRUE(service_->DeleteUser(del).ok());
  st = service_->GetStats({});
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->views(), 0);
}

TEST_F(ImplicitTest, APlainModelIgnoresViewsAndTheItemsAskedAbout) {
  LoadSynthetic();
  Train(/*conditional=*/false);
  const auto alone = Predict(U(0), {I(1)});
  const auto together = Predict(U(0), {I(1), I(2), I(3)});
  ASSERT_EQ(alone.size(), 1u);
  ASSERT_EQ(together.size(), 3u);
  EXPECT_EQ(alone[0], together[0]);
  ASSERT_TRUE(service_->AddRatings({SyntheticViews()}).ok());
  EXPECT_EQ(Predict(U(0), {I(1)}), alone);
  // Views change no histogram (the online updater skips them).
  service_->FlushOnlineForTest();
  v1::GetItemRequest gi;
  gi.set_item_id(I(1));
  absl::StatusOr<v1::GetItemResponse> item = service_->GetItem(gi);
  ASSERT_TRUE(item.ok()) << item.status();
  int64_t raters = 0;
  for (int u = 0; u < kUsers; ++u) raters += Rated(u, 1) ? 1 : 0;
  EXPECT_EQ(item->ratings(), raters);
}

TEST_F(ImplicitTest, AConditionalModelServesViewsAndTheItemsAskedAbout) {
  LoadSynthetic();
  ASSERT_TRUE(service_->AddRatings({SyntheticViews()}).ok());
  Train(/*conditional=*/true);
  // The items asked about join r: asking for item 1 alone or beside an
  // item user 0 neither rated nor viewed (one of the other half) gives
  // another answer for item 1.
  int other = -1;
  for (int i = 20; i < kItems && other < 0; ++i) {
    if (!Rated(0, i)) other = i;
  }
  ASSERT_GE(other, 0);
  const auto alone = Predict(U(0), {I(1)});
  const auto together = Predict(U(0), {I(1), I(other)});
  ASSERT_EQ(alone.size(), 1u);
  ASSERT_EQ(together.size(), 2u);
  EXPECT_NE(alone[0], together[0]);
  // A new view reaches the served user at once (the caches drop the user):
  // item 1 alone is now answered with the same r as when asked beside the
  // viewed item. A repeated view changes nothing.
  v1::AddRatingsRequest v;
  *v.add_ratings() = ViewRow(U(0), I(other));
  ASSERT_TRUE(service_->AddRatings({v}).ok());
  const auto viewed = Predict(U(0), {I(1)});
  ASSERT_EQ(viewed.size(), 1u);
  EXPECT_NE(viewed[0], alone[0]);
  EXPECT_EQ(viewed[0], together[0]);
  ASSERT_TRUE(service_->AddRatings({v}).ok());
  EXPECT_EQ(Predict(U(0), {I(1)}), viewed);
  // A new rating's online update of the conditional model (which sums D
  // over the user's views too) keeps the answers distributions.
  v1::AddRatingsRequest rated;
  *rated.add_ratings() = Row(U(0), I(other), 1);
  ASSERT_TRUE(service_->AddRatings({rated}).ok());
  service_->FlushOnlineForTest();
  const auto after = Predict(U(0), {I(1), I(other)});
  ASSERT_EQ(after.size(), 2u);
  for (const auto& dist : after) {
    float sum = 0;
    for (float x : dist) sum += x;
    EXPECT_NEAR(sum, 1.0f, 1e-4);
  }
}

TEST_F(ImplicitTest, ConditionalTrainingWithoutViewsServesDistributions) {
  LoadSynthetic();
  Train(/*conditional=*/true);
  const auto p = Predict(U(3), {I(5), I(25)});
  ASSERT_EQ(p.size(), 2u);
  for (const auto& dist : p) {
    float sum = 0;
    for (float x : dist) sum += x;
    EXPECT_NEAR(sum, 1.0f, 1e-4);
  }
}

}  // namespace
}  // namespace rbmrec::server
