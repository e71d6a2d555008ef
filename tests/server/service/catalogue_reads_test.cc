// GetUserRatings and GetItem (server/service/catalogue_reads.cc): pages of a
// user's stored ratings in the store's order, the limit and id checks, the
// item's catalogue row and the served model's ratings histogram, before
// and after training and after online updates.

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/error_reason.h"
#include "gtest/gtest.h"
#include "server/service/service.h"
#include "tests/server/service_fixture.h"

namespace rbmrec::server {
namespace {

using testing::I;
using testing::PlantedRating;
using testing::Rated;
using testing::Row;
using testing::ServiceFixture;
using testing::U;

class CatalogueReadsTest : public ServiceFixture {
 protected:
  absl::StatusOr<v1::GetUserRatingsResponse> Ratings(const std::string& user,
                                                     int64_t offset = 0,
                                                     int32_t limit = 0) {
    v1::GetUserRatingsRequest req;
    req.set_user_id(user);
    req.set_offset(offset);
    req.set_limit(limit);
    return service_->GetUserRatings(req);
  }
  absl::StatusOr<v1::GetItemResponse> Item(const std::string& item) {
    v1::GetItemRequest req;
    req.set_item_id(item);
    return service_->GetItem(req);
  }
  // u0's rated items in the order the synthetic batch created them.
  static std::vector<std::string> RatedBy(int u) {
    std::vector<std::string> out;
    for (int i = 0; i < testing::kItems; ++i) {
      if (Rated(u, i)) out.push_back(I(i));
    }
    return out;
  }
};

TEST_F(CatalogueReadsTest, UserRatingsComeInPagesInTheStoresOrder) {
  v1::AddRatingsRequest first;
  v1::Rating r = Row(U(0), I(8), 3);
  r.set_timestamp(1700000000);
  *first.add_ratings() = r;
  ASSERT_TRUE(service_->AddRatings({first}).ok());
  LoadSynthetic();  // i8 keeps its place (first stored); its rating changes
  v1::PutItemsRequest items;
  v1::Item* titled = items.add_items();
  titled->set_item_id(I(8));
  titled->set_title("Eight");
  ASSERT_TRUE(service_->PutItems(items).ok());

  // The store's order: i8 (stored first), then the others in batch order.
  std::vector<std::string> want = {I(8)};
  for (const std::string& id : RatedBy(0)) {
    if (id != I(8)) want.push_back(id);
  }
  ASSERT_TRUE(Rated(0, 8));
  absl::StatusOr<v1::GetUserRatingsResponse> all = Ratings(U(0));
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->total(), static_cast<int64_t>(want.size()));
  ASSERT_EQ(all->ratings_size(), static_cast<int>(want.size()));
  for (int k = 0; k < all->ratings_size(); ++k) {
    const v1::UserRatingEntry& e = all->ratings(k);
    EXPECT_EQ(e.item_id(), want[static_cast<size_t>(k)]);
    const int i = std::stoi(e.item_id().substr(1));
    EXPECT_EQ(e.rating(), PlantedRating(0, i)) << e.item_id();
    EXPECT_EQ(e.title(), i == 8 ? "Eight" : "") << e.item_id();
  }
  // The synthetic batch has no timestamps: the later upsert stored 0.
  EXPECT_EQ(all->ratings(0).timestamp(), 0);

  // Pages: offset + limit walk the same list; past the end is empty.
  std::vector<std::string> paged;
  for (int64_t offset = 0; offset < all->total(); offset += 5) {
    absl::StatusOr<v1::GetUserRatingsResponse> page = Ratings(U(0), offset, 5);
    ASSERT_TRUE(page.ok()) << page.status();
    EXPECT_EQ(page->total(), all->total());
    EXPECT_LE(page->ratings_size(), 5);
    for (const v1::UserRatingEntry& e : page->ratings()) {
      paged.push_back(e.item_id());
    }
  }
  EXPECT_EQ(paged, want);
  absl::StatusOr<v1::GetUserRatingsResponse> past =
      Ratings(U(0), all->total() + 10, 5);
  ASSERT_TRUE(past.ok()) << past.status();
  EXPECT_EQ(past->ratings_size(), 0);
  EXPECT_EQ(past->total(), all->total());
}

TEST_F(CatalogueReadsTest, TimestampsAreReturnedAsStored) {
  v1::AddRatingsRequest b;
  v1::Rating r = Row("t", I(1), 4);
  r.set_timestamp(1700000123);
  *b.add_ratings() = r;
  *b.add_ratings() = Row("t", I(2), 2);
  ASSERT_TRUE(service_->AddRatings({b}).ok());
  absl::StatusOr<v1::GetUserRatingsResponse> got = Ratings("t");
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->ratings_size(), 2);
  EXPECT_EQ(got->ratings(0).timestamp(), 1700000123);
  EXPECT_EQ(got->ratings(0).rating(), 4);
  EXPECT_EQ(got->ratings(1).timestamp(), 0);
}

TEST_F(CatalogueReadsTest, UserRatingsChecksAndLimits) {
  ServiceOptions o = DefaultOptions();
  o.limits.max_batch_rows = 10;
  Start(nullptr, o);
  std::vector<v1::AddRatingsRequest> batches(1);
  for (int i = 0; i < 25; ++i) {
    if (batches.back().ratings_size() == 10) batches.emplace_back();
    *batches.back().add_ratings() = Row("many", I(i), 1 + i % 5);
  }
  ASSERT_TRUE(service_->AddRatings(batches).ok());

  // limit 0: the default page (100), capped at the server's limit.
  absl::StatusOr<v1::GetUserRatingsResponse> page = Ratings("many");
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->ratings_size(), 10);
  EXPECT_EQ(page->total(), 25);

  absl::Status s = Ratings("many", 0, 11).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_EQ(ReasonOf(s), kReasonLimitExceeded) << s;
  EXPECT_NE(s.message().find("limit is 11"), std::string::npos) << s;
  EXPECT_NE(s.message().find("--max-batch"), std::string::npos) << s;
  EXPECT_TRUE(Ratings("many", 0, 10).ok());

  s = Ratings("many", -1, 5).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("offset"), std::string::npos) << s;
  s = Ratings("many", 0, -5).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("limit"), std::string::npos) << s;
  s = Ratings("").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("user_id"), std::string::npos) << s;
  s = Ratings("bad\x1b[31m").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;

  s = Ratings("nobody").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_NE(s.message().find("'nobody'"), std::string::npos) << s;

  // A user whose ratings were all deleted stays known, with none.
  v1::DeleteRatingsRequest del;
  del.set_user_id("many");
  for (int i = 0; i < 10; ++i) del.add_item_ids(I(i));
  ASSERT_TRUE(service_->DeleteRatings(del).ok());
  page = Ratings("many", 0, 10);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->total(), 15);
  EXPECT_EQ(page->ratings(0).item_id(), I(10));
  // Deleting a user: NOT_FOUND afterwards.
  v1::DeleteUserRequest gone;
  gone.set_user_id("many");
  ASSERT_TRUE(service_->DeleteUser(gone).ok());
  EXPECT_EQ(Ratings("many").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(CatalogueReadsTest, ItemRowWithoutAModel) {
  v1::PutItemsRequest items;
  v1::Item* it = items.add_items();
  it->set_item_id("film");
  it->set_title("A \"quoted\" film");
  (*it->mutable_attributes())["genres"] = "Drama|Comedy";
  (*it->mutable_attributes())["year"] = "1995";
  it->add_categories("Drama");
  it->add_categories("Comedy");
  it->set_hidden(true);
  ASSERT_TRUE(service_->PutItems(items).ok());

  absl::StatusOr<v1::GetItemResponse> got = Item("film");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->item().item_id(), "film");
  EXPECT_EQ(got->item().title(), "A \"quoted\" film");
  EXPECT_EQ(got->item().attributes().size(), 2u);
  EXPECT_EQ(got->item().attributes().at("genres"), "Drama|Comedy");
  EXPECT_EQ(got->item().attributes().at("year"), "1995");
  EXPECT_EQ(std::vector<std::string>(got->item().categories().begin(),
                                     got->item().categories().end()),
            (std::vector<std::string>{"Drama", "Comedy"}));
  EXPECT_TRUE(got->item().hidden());
  // No model served: no counts.
  EXPECT_EQ(got->model_version(), 0);
  EXPECT_EQ(got->rating_counts_size(), 0);
  EXPECT_EQ(got->ratings(), 0);
  EXPECT_FALSE(got->has_scale());

  absl::Status s = Item("unknown").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_NE(s.message().find("item_id 'unknown'"), std::string::npos) << s;
  EXPECT_EQ(Item("").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(CatalogueReadsTest, HistogramCountsTheRatingsAndFollowsOnlineUpdates) {
  LoadSynthetic();
  TrainDone();
  const int item = 3;
  std::map<double, int64_t> imported;
  for (int u = 0; u < testing::kUsers; ++u) {
    if (Rated(u, item)) ++imported[PlantedRating(u, item)];
  }
  absl::StatusOr<v1::GetItemResponse> got = Item(I(item));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->model_version(), service_->active_version());
  ASSERT_EQ(got->rating_counts_size(), 5);
  ASSERT_EQ(got->scale().values_size(), 5);
  int64_t n = 0;
  double sum = 0;
  for (int k = 0; k < 5; ++k) {
    const double value = got->scale().values(k);
    EXPECT_EQ(got->rating_counts(k), imported[value]) << "rating " << value;
    n += imported[value];
    sum += value * static_cast<double>(imported[value]);
  }
  EXPECT_GT(n, 0);
  EXPECT_EQ(got->ratings(), n);
  EXPECT_DOUBLE_EQ(got->mean_rating(), sum / static_cast<double>(n));
  EXPECT_EQ(got->item().title(), "");  // no PutItems: the id alone

  // A new user's 5 and u0's changed rating, once the online updater ran.
  ASSERT_TRUE(Rated(0, item));
  const double old = PlantedRating(0, item);
  const double now = old == 1 ? 2 : 1;
  v1::AddRatingsRequest b;
  *b.add_ratings() = Row(U(0), I(item), now);
  *b.add_ratings() = Row("newcomer", I(item), 5);
  ASSERT_TRUE(service_->AddRatings({b}).ok());
  service_->FlushOnlineForTest();
  --imported[old];
  ++imported[now];
  ++imported[5];
  got = Item(I(item));
  ASSERT_TRUE(got.ok()) << got.status();
  for (int k = 0; k < 5; ++k) {
    const double value = got->scale().values(k);
    EXPECT_EQ(got->rating_counts(k), imported[value]) << "rating " << value;
  }
  EXPECT_EQ(got->ratings(), n + 1);

  // An item only the store knows (metadata, no ratings): K zeros.
  v1::PutItemsRequest items;
  items.add_items()->set_item_id("new-item");
  ASSERT_TRUE(service_->PutItems(items).ok());
  got = Item("new-item");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->rating_counts_size(), 5);
  EXPECT_EQ(got->ratings(), 0);
  EXPECT_EQ(got->mean_rating(), 0);
  EXPECT_EQ(Item("unknown").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace rbmrec::server
