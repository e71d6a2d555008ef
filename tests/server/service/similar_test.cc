// SimilarItems through the service (server/service/similar.h): the answer
// is core's exact top n on the served model, skips the query, the user's
// rated items and the excluded ones, and every bad request is refused
// naming its field. (Its quality is measured on real data by rbmrec-eval
// --similar: docs/eval.md.)

#include "server/service/similar.h"

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/similar.h"
#include "gtest/gtest.h"
#include "server/service/service.h"
#include "tests/server/service_fixture.h"

namespace rbmrec::server::testing {
namespace {

class SimilarItemsTest : public ServiceFixture {
 protected:
  void SetUp() override {
    ServiceFixture::SetUp();
    LoadSynthetic();
    TrainDone();
  }

  absl::StatusOr<v1::SimilarItemsResponse> Similar(
      std::vector<std::string> items, int n, const std::string& user = "",
      std::vector<std::string> exclude = {}) {
    v1::SimilarItemsRequest req;
    for (const std::string& i : items) req.add_item_ids(i);
    req.set_n(n);
    req.set_user_id(user);
    for (const std::string& e : exclude) req.add_exclude_item_ids(e);
    return service_->SimilarItems(req);
  }
};

TEST_F(SimilarItemsTest, IsCoresExactTopNOnTheServedModel) {
  absl::StatusOr<v1::SimilarItemsResponse> got = Similar({I(3)}, 7);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->items_size(), 7);
  EXPECT_EQ(got->model_version(), service_->active_version());

  absl::StatusOr<Served> served = service_->registry_for_test().Get(0);
  ASSERT_TRUE(served.ok());
  absl::StatusOr<ItemSimilarity> index =
      ItemSimilarity::Build(*served->model, SimilarityOptions());
  ASSERT_TRUE(index.ok()) << index.status();
  const int32_t q = served->model->items().Find(I(3));
  SimilarScratch scratch;
  std::vector<float> scores;
  ASSERT_TRUE(index->Score({q}, &scores, &scratch).ok());
  // Brute force: every other item by score, ties by index.
  std::vector<int32_t> order;
  for (int32_t j = 0; j < index->num_items(); ++j) {
    if (j != q && index->HasVector(j)) order.push_back(j);
  }
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return scores[static_cast<size_t>(a)] > scores[static_cast<size_t>(b)];
  });
  for (int r = 0; r < 7; ++r) {
    EXPECT_EQ(got->items(r).item_id(),
              served->model->items().Name(order[static_cast<size_t>(r)]))
        << "rank " << r + 1;
    EXPECT_EQ(got->items(r).rank(), r + 1);
    EXPECT_FLOAT_EQ(static_cast<float>(got->items(r).score()),
                    scores[static_cast<size_t>(order[static_cast<size_t>(r)])]);
  }
}

TEST_F(SimilarItemsTest, SkipsTheQueryTheUsersItemsAndTheExcluded) {
  std::set<std::string> rated;
  for (int i = 0; i < kItems; ++i) {
    if (Rated(5, i)) rated.insert(I(i));
  }
  absl::StatusOr<v1::SimilarItemsResponse> got =
      Similar({I(1), I(2)}, kItems, U(5), {I(7), "no-such-item"});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(static_cast<size_t>(got->items_size()),
            kItems - 2 - rated.size() - (rated.count(I(7)) ? 0 : 1) +
                (rated.count(I(1)) ? 1 : 0) + (rated.count(I(2)) ? 1 : 0));
  for (const v1::SimilarItem& s : got->items()) {
    EXPECT_NE(s.item_id(), I(1));
    EXPECT_NE(s.item_id(), I(2));
    EXPECT_NE(s.item_id(), I(7));
    EXPECT_EQ(rated.count(s.item_id()), 0u) << s.item_id();
  }
  // A user without stored ratings skips nothing.
  got = Similar({I(1)}, kItems, "never-seen");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->items_size(), kItems - 1);
}

TEST_F(SimilarItemsTest, HiddenItemsAndCategoryFiltersApply) {
  v1::PutItemsRequest items;
  for (int i = 0; i < kItems; ++i) {
    v1::Item* item = items.add_items();
    item->set_item_id(I(i));
    item->add_categories(i % 2 == 0 ? "even" : "odd");
    if (i % 3 == 0) item->add_categories("three");
    item->set_hidden(i == 4);
  }
  ASSERT_TRUE(service_->PutItems(items).ok());
  absl::StatusOr<v1::SimilarItemsResponse> all = Similar({I(1)}, kItems);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->items_size(), kItems - 2);  // not the query, not hidden i4
  for (const v1::SimilarItem& s : all->items()) EXPECT_NE(s.item_id(), I(4));

  v1::SimilarItemsRequest req;
  req.set_item_id(I(1));
  req.set_n(kItems);
  req.add_categories("even");
  req.add_required_categories("three");
  absl::StatusOr<v1::SimilarItemsResponse> got = service_->SimilarItems(req);
  ASSERT_TRUE(got.ok()) << got.status();
  // Even multiples of 3 below 40: 0, 6, ..., 36.
  EXPECT_EQ(got->items_size(), 7);
  // The same order as the unfiltered list, restricted to them.
  std::vector<std::string> expected;
  for (const v1::SimilarItem& s : all->items()) {
    const int j = std::stoi(s.item_id().substr(1));
    if (j % 6 == 0) expected.push_back(s.item_id());
  }
  std::vector<std::string> ids;
  for (const v1::SimilarItem& s : got->items()) ids.push_back(s.item_id());
  EXPECT_EQ(ids, expected);
}

TEST_F(SimilarItemsTest, BadRequestsNameTheirField) {
  auto message = [](const absl::Status& s) { return std::string(s.message()); };
  absl::StatusOr<v1::SimilarItemsResponse> r = Similar({}, 5);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(message(r.status()).find("item_ids"), std::string::npos);
  r = Similar({"zzz"}, 5);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(message(r.status()).find("item_ids[0]"), std::string::npos);
  r = Similar({I(1)}, -1);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  r = Similar({I(1)}, DefaultOptions().limits.max_recommend_n + 1);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(message(r.status()).find("--max-recommend-n"), std::string::npos);
  v1::SimilarItemsRequest many;
  many.add_item_ids(I(1));
  for (int i = 0; i <= DefaultOptions().limits.max_categories; ++i) {
    many.add_categories(absl::StrCat("c", i));
  }
  r = service_->SimilarItems(many);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(message(r.status()).find("--max-categories"), std::string::npos);
  r = Similar({I(1)}, 5, "", {std::string("a\nb")});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(message(r.status()).find("exclude_item_ids[0]"), std::string::npos);
}

TEST_F(SimilarItemsTest, TheCacheBuildsOneIndexPerSnapshot) {
  absl::StatusOr<Served> served = service_->registry_for_test().Get(0);
  ASSERT_TRUE(served.ok());
  SimilarIndexCache cache;
  auto first = cache.For(served->model);
  auto again = cache.For(served->model);
  ASSERT_TRUE(first.ok() && again.ok());
  EXPECT_EQ(first->index.get(), again->index.get());
  // A copy of the model is another snapshot: its own index.
  auto copy = std::make_shared<const Model>(*served->model);
  auto other = cache.For(copy);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->index.get(), first->index.get());
}

// The cache builds the snapshot's neighbour lists in the background; once
// they are there, every single-item query (n 1..kItems, with and without
// exclusions) answers from them exactly as the full scan does.
TEST_F(SimilarItemsTest, TheCachesNeighbourListsGiveTheExactAnswers) {
  absl::StatusOr<Served> served = service_->registry_for_test().Get(0);
  ASSERT_TRUE(served.ok());
  SimilarIndexCache cache;
  auto first = cache.For(served->model);
  ASSERT_TRUE(first.ok());
  cache.WaitForLists();
  auto ready = cache.For(served->model);
  ASSERT_TRUE(ready.ok());
  ASSERT_NE(ready->lists, nullptr);
  EXPECT_EQ(ready->index.get(), first->index.get());
  const ItemSimilarity& index = *ready->index;
  SimilarScratch scratch;
  const std::vector<int32_t> excluded = {1, 4, 9, 16};
  for (int32_t q = 0; q < index.num_items(); ++q) {
    if (!index.HasVector(q)) continue;
    for (const int n : {1, 10, kItems}) {
      SimilarRequest request;
      request.n = n;
      if (q % 2 == 0) request.excluded = excluded;
      const std::vector<int32_t> query = {q};
      auto want = SimilarItems(index, query, request, &scratch);
      auto got =
          SimilarItems(index, ready->lists.get(), query, request, &scratch);
      ASSERT_TRUE(want.ok() && got.ok());
      ASSERT_EQ(got->size(), want->size());
      for (size_t r = 0; r < want->size(); ++r) {
        EXPECT_EQ((*got)[r].item, (*want)[r].item) << q << " n " << n;
        EXPECT_EQ((*got)[r].score, (*want)[r].score) << q << " n " << n;
      }
    }
  }
}

}  // namespace
}  // namespace rbmrec::server::testing
