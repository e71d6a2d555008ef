#include "store/store.h"

#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/error_reason.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "store/pg_db.h"
#include "tests/store/store_test_util.h"

namespace rbmrec::store {
namespace {

using ::rbmrec::kReasonDatabaseInUse;
using ::rbmrec::kReasonDatabaseLocked;
using ::rbmrec::kReasonStorageFull;
using ::rbmrec::ReasonOf;
using ::rbmrec::store::testing_util::Flatten;
using ::rbmrec::store::testing_util::R;
using ::rbmrec::store::testing_util::RawDb;
using ::rbmrec::store::testing_util::ScratchDir;
using ::rbmrec::store::testing_util::StoreBackend;
using ::rbmrec::store::testing_util::StoreBackends;
using ::rbmrec::store::testing_util::View;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// ---------------------------------------------------------------------------
// Backend-neutral tests: run on every StoreBackends() entry.

class StoreTest : public testing::TestWithParam<StoreBackend> {
 protected:
  void SetUp() override {
    if (GetParam().unavailable) {
      const std::string why = GetParam().unavailable();
      if (!why.empty()) GTEST_SKIP() << why;
    }
    ASSERT_OK_AND_ASSIGN(store_, Open());
  }

  // Opens (again) the store of this test.
  absl::StatusOr<std::unique_ptr<Store>> Open(
      const StoreOptions& options = {}) {
    return GetParam().open(dir_.path(), options);
  }

  ScratchDir dir_;
  std::unique_ptr<Store> store_;
};

INSTANTIATE_TEST_SUITE_P(Backends, StoreTest,
                         testing::ValuesIn(StoreBackends()),
                         [](const testing::TestParamInfo<StoreBackend>& p) {
                           return p.param.name;
                         });

TEST_P(StoreTest, OpenCreatesEmptySchema) {
  ASSERT_OK_AND_ASSIGN(Stats stats, store_->GetStats());
  EXPECT_EQ(stats.users, 0);
  EXPECT_EQ(stats.items, 0);
  EXPECT_EQ(stats.ratings, 0);
  EXPECT_FALSE(stats.active_model_version.has_value());
  ASSERT_OK_AND_ASSIGN(Snapshot snap, store_->ReadSnapshot());
  EXPECT_TRUE(snap.users.empty());
  EXPECT_TRUE(snap.items.empty());
  EXPECT_TRUE(snap.ratings.empty());
  ASSERT_OK_AND_ASSIGN(std::vector<ModelInfo> models, store_->ListModels());
  EXPECT_TRUE(models.empty());
}

TEST_P(StoreTest, UpsertInsertsThenReplaces) {
  const std::vector<RatingRow> first = {R("alice", "matrix", 5, 100),
                                        R("alice", "alien", 3, 101),
                                        R("bob", "matrix", 4, 102)};
  ASSERT_OK_AND_ASSIGN(UpsertResult r1, store_->UpsertRatings(first));
  EXPECT_EQ(r1.inserted, 3);
  EXPECT_EQ(r1.replaced, 0);
  EXPECT_EQ(r1.new_users, 2);
  EXPECT_EQ(r1.new_items, 2);

  const std::vector<RatingRow> second = {R("alice", "matrix", 1, 200),
                                         R("carol", "alien", 2, 201)};
  ASSERT_OK_AND_ASSIGN(UpsertResult r2, store_->UpsertRatings(second));
  EXPECT_EQ(r2.inserted, 1);
  EXPECT_EQ(r2.replaced, 1);
  EXPECT_EQ(r2.new_users, 1);
  EXPECT_EQ(r2.new_items, 0);

  ASSERT_OK_AND_ASSIGN(std::vector<UserRating> alice,
                       store_->GetUserRatings("alice"));
  ASSERT_EQ(alice.size(), 2u);
  EXPECT_EQ(alice[0].item, "matrix");
  EXPECT_EQ(alice[0].rating, 1);
  EXPECT_EQ(alice[0].timestamp, 200);
  EXPECT_EQ(alice[1].item, "alien");
  EXPECT_EQ(alice[1].rating, 3);
  EXPECT_EQ(alice[1].timestamp, 101);

  ASSERT_OK_AND_ASSIGN(Stats stats, store_->GetStats());
  EXPECT_EQ(stats.users, 3);
  EXPECT_EQ(stats.items, 2);
  EXPECT_EQ(stats.ratings, 4);
}

TEST_P(StoreTest, DuplicatesWithinOneBatchLastWins) {
  const std::vector<RatingRow> rows = {R("u", "i", 1, 1), R("u", "j", 2, 2),
                                       R("u", "i", 3, 3), R("u", "i", 4, 4)};
  ASSERT_OK_AND_ASSIGN(UpsertResult r, store_->UpsertRatings(rows));
  EXPECT_EQ(r.inserted, 2);
  EXPECT_EQ(r.replaced, 2);
  EXPECT_EQ(r.new_users, 1);
  EXPECT_EQ(r.new_items, 2);
  ASSERT_OK_AND_ASSIGN(std::vector<UserRating> u, store_->GetUserRatings("u"));
  ASSERT_EQ(u.size(), 2u);
  EXPECT_EQ(u[0].item, "i");
  EXPECT_EQ(u[0].rating, 4);
  EXPECT_EQ(u[0].timestamp, 4);
  EXPECT_EQ(u[1].item, "j");
}

// previous[i] as text: "-" for nullopt, else the rating.
std::vector<std::string> Previous(const UpsertResult& r) {
  std::vector<std::string> out;
  for (const std::optional<double>& p : r.previous) {
    out.push_back(p.has_value() ? absl::StrCat(*p) : "-");
  }
  return out;
}

TEST_P(StoreTest, UpsertReturnsEachRowsPreviousRating) {
  const std::vector<RatingRow> first = {R("u1", "a", 1), R("u1", "b", 2),
                                        R("u2", "a", 3)};
  ASSERT_OK_AND_ASSIGN(UpsertResult r1, store_->UpsertRatings(first));
  EXPECT_THAT(Previous(r1), ElementsAre("-", "-", "-"));

  // In input order: a replaced rating, a new pair of known ids, a pair
  // repeated in the batch (each repetition sees the one before it, the first
  // the stored rating), a new user, a new item, a new pair after a
  // replacement of the same user.
  const std::vector<RatingRow> second = {
      R("u2", "a", 4),   R("u2", "b", 5),  R("u1", "a", 1.5), R("new", "a", 1),
      R("u1", "a", 2.5), R("u1", "zz", 1), R("u1", "a", 3.5), R("u1", "c", 4)};
  ASSERT_OK_AND_ASSIGN(UpsertResult r2, store_->UpsertRatings(second));
  EXPECT_THAT(Previous(r2),
              ElementsAre("3", "-", "1", "-", "1.5", "-", "2.5", "-"));
  EXPECT_EQ(r2.replaced, 4);
  EXPECT_EQ(r2.inserted, 4);

  // A deleted rating is gone: no previous value.
  const std::vector<std::string> del = {"a"};
  ASSERT_OK(store_->DeleteRatings("u1", del).status());
  const std::vector<RatingRow> third = {R("u1", "b", 1), R("u1", "a", 5)};
  ASSERT_OK_AND_ASSIGN(UpsertResult r3, store_->UpsertRatings(third));
  EXPECT_THAT(Previous(r3), ElementsAre("2", "-"));
}

// Every combination of stored / new pairs in large sorted runs (the upsert
// switches between reading first and inserting first); previous must always
// match a model kept in memory.
TEST_P(StoreTest, UpsertPreviousMatchesAReferenceModel) {
  std::map<std::pair<std::string, std::string>, double> ref;
  uint64_t seed = 12345;
  const auto next = [&seed] {
    seed = seed * 6364136223846793005u + 1442695040888963407u;
    return static_cast<int>((seed >> 33) % 1000);
  };
  for (int batch = 0; batch < 6; ++batch) {
    std::vector<RatingRow> rows;
    for (int k = 0; k < 700; ++k) {
      const int x = next();
      rows.push_back(R(absl::StrCat("u", x % 23), absl::StrCat("i", x % 97),
                       batch * 1000 + k));
    }
    ASSERT_OK_AND_ASSIGN(UpsertResult r, store_->UpsertRatings(rows));
    ASSERT_EQ(r.previous.size(), rows.size());
    int64_t replaced = 0;
    for (size_t k = 0; k < rows.size(); ++k) {
      auto it = ref.find({rows[k].user, rows[k].item});
      const std::optional<double> want =
          it == ref.end() ? std::nullopt : std::optional<double>(it->second);
      EXPECT_EQ(r.previous[k], want) << "batch " << batch << " row " << k;
      if (want.has_value()) ++replaced;
      ref[{rows[k].user, rows[k].item}] = rows[k].rating;
    }
    EXPECT_EQ(r.replaced, replaced);
    EXPECT_EQ(r.inserted, static_cast<int64_t>(rows.size()) - replaced);
  }
  ASSERT_OK_AND_ASSIGN(Stats stats, store_->GetStats());
  EXPECT_EQ(stats.ratings, static_cast<int64_t>(ref.size()));
}

TEST_P(StoreTest, TimestampsAreStoredAndReturned) {
  constexpr int64_t kBig = int64_t{1} << 60;
  const std::vector<RatingRow> first = {R("u", "a", 1, 881250949),
                                        R("u", "b", 2), R("u", "c", 3, kBig),
                                        R("u", "d", 4, -5)};
  ASSERT_OK(store_->UpsertRatings(first).status());
  // A replacement replaces the timestamp too, even with 0.
  const std::vector<RatingRow> second = {R("u", "a", 5, 0),
                                         R("u", "b", 5, 1700000000)};
  ASSERT_OK(store_->UpsertRatings(second).status());
  const auto check = [&](Store& store) {
    ASSERT_OK_AND_ASSIGN(std::vector<UserRating> u, store.GetUserRatings("u"));
    ASSERT_EQ(u.size(), 4u);
    EXPECT_EQ(u[0].timestamp, 0);
    EXPECT_EQ(u[1].timestamp, 1700000000);
    EXPECT_EQ(u[2].timestamp, kBig);
    EXPECT_EQ(u[3].timestamp, -5);
  };
  check(*store_);
  if (GetParam().persistent) {
    store_.reset();
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> reopened, Open());
    check(*reopened);
  }
}

TEST_P(StoreTest, EmptyBatchIsANoOp) {
  ASSERT_OK_AND_ASSIGN(UpsertResult r, store_->UpsertRatings({}));
  EXPECT_EQ(r.inserted + r.replaced + r.new_users + r.new_items, 0);
}

TEST_P(StoreTest, BadRowRejectsWholeBatch) {
  const std::vector<RatingRow> good = {R("a", "x", 1), R("b", "y", 2)};
  ASSERT_TRUE(store_->UpsertRatings(good).ok());

  std::vector<RatingRow> bad;
  for (int i = 0; i < 20; ++i) {
    bad.push_back(R(absl::StrCat("new", i), "x", 5));
  }
  bad.push_back(R("a", "x", 4));  // would replace
  bad[17].item.clear();
  auto result = store_->UpsertRatings(bad);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(result.status().message(), "row 17: empty item id");

  ASSERT_OK_AND_ASSIGN(Snapshot snap, store_->ReadSnapshot());
  EXPECT_THAT(snap.users, ElementsAre("a", "b"));
  EXPECT_THAT(Flatten(snap), ElementsAre("a/x=1", "b/y=2"));

  // The same users can be created afterwards.
  bad[17].item = "z";
  ASSERT_OK_AND_ASSIGN(UpsertResult r, store_->UpsertRatings(bad));
  EXPECT_EQ(r.new_users, 20);
  EXPECT_EQ(r.replaced, 1);
}

TEST_P(StoreTest, ValidationMessagesNameRowAndField) {
  struct Case {
    RatingRow row;
    std::string message;
  };
  const std::vector<Case> cases = {
      {R("", "i", 1), "row 2: empty user id"},
      {R("u", "", 1), "row 2: empty item id"},
      {R(std::string(257, 'u'), "i", 1),
       "row 2: user id is 257 bytes long, the limit is 256"},
      {R("u", std::string(300, 'i'), 1),
       "row 2: item id is 300 bytes long, the limit is 256"},
      {R("u", "i", std::nan("")), "row 2: rating is not a finite number (nan)"},
      {R("u", "i", std::numeric_limits<double>::infinity()),
       "row 2: rating is not a finite number (inf)"},
  };
  for (const Case& c : cases) {
    std::vector<RatingRow> rows = {R("ok", "ok", 1), R("ok2", "ok", 1), c.row};
    auto result = store_->UpsertRatings(rows);
    ASSERT_FALSE(result.ok()) << c.message;
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(result.status().message(), c.message);
  }
  // Exactly 256 bytes is fine.
  std::vector<RatingRow> rows = {R(std::string(256, 'u'), "i", 1)};
  EXPECT_TRUE(store_->UpsertRatings(rows).ok());
  ASSERT_OK_AND_ASSIGN(Stats stats, store_->GetStats());
  EXPECT_EQ(stats.users, 1);
}

TEST_P(StoreTest, DeleteRatings) {
  const std::vector<RatingRow> rows = {R("u", "a", 1), R("u", "b", 2),
                                       R("u", "c", 3), R("v", "a", 4)};
  ASSERT_TRUE(store_->UpsertRatings(rows).ok());
  const std::vector<std::string> del = {"a", "c", "unknown", "a"};
  ASSERT_OK_AND_ASSIGN(int64_t n, store_->DeleteRatings("u", del));
  EXPECT_EQ(n, 2);
  ASSERT_OK_AND_ASSIGN(std::vector<UserRating> u, store_->GetUserRatings("u"));
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0].item, "b");
  ASSERT_OK_AND_ASSIGN(std::vector<UserRating> v, store_->GetUserRatings("v"));
  EXPECT_EQ(v.size(), 1u);

  auto missing = store_->DeleteRatings("nobody", del);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);

  // A user without ratings still exists.
  const std::vector<std::string> rest = {"b"};
  ASSERT_OK_AND_ASSIGN(n, store_->DeleteRatings("u", rest));
  EXPECT_EQ(n, 1);
  ASSERT_OK_AND_ASSIGN(u, store_->GetUserRatings("u"));
  EXPECT_TRUE(u.empty());
  ASSERT_OK_AND_ASSIGN(Stats stats, store_->GetStats());
  EXPECT_EQ(stats.users, 2);
  EXPECT_EQ(stats.ratings, 1);
}

TEST_P(StoreTest, DeleteUserNeverReusesIndex) {
  const std::vector<RatingRow> rows = {R("u", "a", 1), R("u", "b", 2),
                                       R("v", "a", 3), R("w", "b", 4)};
  ASSERT_TRUE(store_->UpsertRatings(rows).ok());
  ASSERT_OK_AND_ASSIGN(int64_t n, store_->DeleteUser("u"));
  EXPECT_EQ(n, 2);
  EXPECT_EQ(store_->GetUserRatings("u").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->DeleteUser("u").status().code(),
            absl::StatusCode::kNotFound);
  ASSERT_OK_AND_ASSIGN(Stats stats, store_->GetStats());
  EXPECT_EQ(stats.users, 2);
  EXPECT_EQ(stats.ratings, 2);

  // "u" comes back as a new user, after the others.
  const std::vector<RatingRow> again = {R("u", "a", 5)};
  ASSERT_OK_AND_ASSIGN(UpsertResult r, store_->UpsertRatings(again));
  EXPECT_EQ(r.new_users, 1);
  EXPECT_EQ(r.inserted, 1);
  ASSERT_OK_AND_ASSIGN(Snapshot snap, store_->ReadSnapshot());
  EXPECT_THAT(snap.users, ElementsAre("v", "w", "u"));
  EXPECT_THAT(Flatten(snap), ElementsAre("v/a=3", "w/b=4", "u/a=5"));
}

// Snapshot views as "user/item" strings.
std::vector<std::string> FlattenViews(const Snapshot& s) {
  std::vector<std::string> out;
  for (const Snapshot::View& v : s.views) {
    out.push_back(absl::StrCat(s.users[static_cast<size_t>(v.user)], "/",
                               s.items[static_cast<size_t>(v.item)]));
  }
  return out;
}

TEST_P(StoreTest, ViewsAreStoredApartFromRatingsOncePerPair) {
  // Mixed in one batch: a rating, a view of the rated item (kept beside
  // it), a view of a new item by a new user, and a repeated view.
  const std::vector<RatingRow> rows = {R("u", "a", 4, 10), View("u", "a", 11),
                                       View("w", "z", 5), View("u", "b", 7),
                                       View("u", "b", 3)};
  ASSERT_OK_AND_ASSIGN(UpsertResult r, store_->UpsertRatings(rows));
  EXPECT_EQ(r.inserted, 1);
  EXPECT_EQ(r.replaced, 0);
  EXPECT_EQ(r.views, 4);
  EXPECT_EQ(r.new_users, 2);
  EXPECT_EQ(r.new_items, 3);
  ASSERT_EQ(r.previous.size(), rows.size());
  for (size_t i = 1; i < rows.size(); ++i) EXPECT_FALSE(r.previous[i]);

  ASSERT_OK_AND_ASSIGN(std::vector<UserRating> u, store_->GetUserRatings("u"));
  ASSERT_EQ(u.size(), 1u);  // views are not ratings
  EXPECT_EQ(u[0].rating, 4);
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> uv, store_->GetUserViews("u"));
  EXPECT_THAT(uv, ElementsAre("a", "b"));
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> wv, store_->GetUserViews("w"));
  EXPECT_THAT(wv, ElementsAre("z"));
  EXPECT_EQ(store_->GetUserViews("nobody").status().code(),
            absl::StatusCode::kNotFound);

  // Repeating every view changes no count.
  ASSERT_OK_AND_ASSIGN(UpsertResult again, store_->UpsertRatings(rows));
  EXPECT_EQ(again.views, 4);
  EXPECT_EQ(again.inserted, 0);
  EXPECT_EQ(again.replaced, 1);
  ASSERT_OK_AND_ASSIGN(Stats stats, store_->GetStats());
  EXPECT_EQ(stats.users, 2);
  EXPECT_EQ(stats.items, 3);
  EXPECT_EQ(stats.ratings, 1);
  EXPECT_EQ(stats.views, 3);

  ASSERT_OK_AND_ASSIGN(Snapshot snap, store_->ReadSnapshot());
  EXPECT_THAT(Flatten(snap), ElementsAre("u/a=4"));
  EXPECT_THAT(FlattenViews(snap), ElementsAre("u/a", "u/b", "w/z"));
}

TEST_P(StoreTest, AViewNeedsNoFiniteRatingButValidIds) {
  RatingRow nan_view = View("u", "a");
  nan_view.rating = std::nan("");
  ASSERT_OK_AND_ASSIGN(UpsertResult r, store_->UpsertRatings({nan_view}));
  EXPECT_EQ(r.views, 1);
  const std::vector<RatingRow> bad = {View("u", "b"), View("u", "")};
  const absl::Status s = store_->UpsertRatings(bad).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("row 1"));
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> uv, store_->GetUserViews("u"));
  EXPECT_THAT(uv, ElementsAre("a"));  // nothing of the failed batch
}

TEST_P(StoreTest, DeleteRatingsKeepsViewsAndDeleteUserRemovesThem) {
  const std::vector<RatingRow> rows = {R("u", "a", 1), View("u", "a"),
                                       View("u", "b"), View("v", "b")};
  ASSERT_TRUE(store_->UpsertRatings(rows).ok());
  const std::vector<std::string> del = {"a", "b"};
  ASSERT_OK_AND_ASSIGN(int64_t n, store_->DeleteRatings("u", del));
  EXPECT_EQ(n, 1);
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> uv, store_->GetUserViews("u"));
  EXPECT_THAT(uv, ElementsAre("a", "b"));
  ASSERT_OK_AND_ASSIGN(n, store_->DeleteUser("u"));
  EXPECT_EQ(n, 0);
  ASSERT_OK_AND_ASSIGN(Stats stats, store_->GetStats());
  EXPECT_EQ(stats.views, 1);
  ASSERT_OK_AND_ASSIGN(Snapshot snap, store_->ReadSnapshot());
  EXPECT_THAT(FlattenViews(snap), ElementsAre("v/b"));
  // "u" again: a new user without the old views.
  ASSERT_TRUE(store_->UpsertRatings({View("u", "c")}).ok());
  ASSERT_OK_AND_ASSIGN(uv, store_->GetUserViews("u"));
  EXPECT_THAT(uv, ElementsAre("c"));
}

TEST_P(StoreTest, ListUsersPagesInByteOrder) {
  // "B" < "a" < "a1" < "b" < "\xc3\xa9" by bytes (not by a locale).
  const std::vector<RatingRow> rows = {
      R("b", "i", 1), R("a1", "i", 2), R("\xc3\xa9", "i", 3),
      R("B", "i", 4), R("a", "i", 5),  R("gone", "i", 1)};
  ASSERT_TRUE(store_->UpsertRatings(rows).ok());
  ASSERT_TRUE(store_->DeleteUser("gone").ok());
  // A user whose ratings were all deleted stays listed.
  ASSERT_TRUE(store_->DeleteRatings("b", {"i"}).ok());
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> all,
                       store_->ListUsers("", 100));
  EXPECT_THAT(all, ElementsAre("B", "a", "a1", "b", "\xc3\xa9"));
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> page,
                       store_->ListUsers("a", 2));
  EXPECT_THAT(page, ElementsAre("a1", "b"));
  ASSERT_OK_AND_ASSIGN(page, store_->ListUsers("b", 2));
  EXPECT_THAT(page, ElementsAre("\xc3\xa9"));
  ASSERT_OK_AND_ASSIGN(page, store_->ListUsers("\xc3\xa9", 2));
  EXPECT_TRUE(page.empty());
}

TEST_P(StoreTest, ItemsAndTitles) {
  const std::vector<RatingRow> rows = {R("u", "rated", 1)};
  ASSERT_TRUE(store_->UpsertRatings(rows).ok());
  const std::vector<ItemRow> items = {
      {"rated", "Rated Movie", R"({"year": 1999})", {}, false},
      {"fresh", "Fresh Movie", "", {}, false},
      {"untitled", "", "", {}, false}};
  ASSERT_OK(store_->PutItems(items));

  const std::vector<std::string> query = {"fresh", "nope", "rated", "untitled"};
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> titles,
                       store_->GetTitles(query));
  EXPECT_THAT(titles, ElementsAre("Fresh Movie", "", "Rated Movie", ""));

  // Update keeps the item's index; the snapshot lists items in idx order.
  const std::vector<ItemRow> update = {{"rated", "Renamed", "", {}, false}};
  ASSERT_OK(store_->PutItems(update));
  ASSERT_OK_AND_ASSIGN(titles, store_->GetTitles(query));
  EXPECT_EQ(titles[2], "Renamed");
  ASSERT_OK_AND_ASSIGN(Snapshot snap, store_->ReadSnapshot());
  EXPECT_THAT(snap.items, ElementsAre("rated", "fresh", "untitled"));
  ASSERT_OK_AND_ASSIGN(Stats stats, store_->GetStats());
  EXPECT_EQ(stats.items, 3);

  // GetItem: the whole row; an item known only from a rating has empty
  // fields; an unknown one none.
  const std::vector<ItemRow> full = {
      {"full", "Full", R"({"a":"1"})", {"X", "Y"}, true}};
  ASSERT_OK(store_->PutItems(full));
  ASSERT_OK_AND_ASSIGN(std::optional<ItemRow> got, store_->GetItem("full"));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->item, "full");
  EXPECT_EQ(got->title, "Full");
  EXPECT_EQ(got->attributes_json, R"({"a":"1"})");
  EXPECT_THAT(got->categories, ElementsAre("X", "Y"));
  EXPECT_TRUE(got->hidden);
  const std::vector<RatingRow> rated_only = {R("u", "bare", 3)};
  ASSERT_TRUE(store_->UpsertRatings(rated_only).ok());
  ASSERT_OK_AND_ASSIGN(got, store_->GetItem("bare"));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->title, "");
  EXPECT_EQ(got->attributes_json, "");
  EXPECT_TRUE(got->categories.empty());
  EXPECT_FALSE(got->hidden);
  ASSERT_OK_AND_ASSIGN(got, store_->GetItem("nope"));
  EXPECT_FALSE(got.has_value());

  // A rating for an item created by PutItems reuses it.
  const std::vector<RatingRow> more = {R("u", "fresh", 2)};
  ASSERT_OK_AND_ASSIGN(UpsertResult r, store_->UpsertRatings(more));
  EXPECT_EQ(r.new_items, 0);
}

TEST_P(StoreTest, PutItemsValidatesAndIsAtomic) {
  const std::vector<ItemRow> bad_json = {{"a", "A", "", {}, false},
                                         {"b", "B", "[1, 2]", {}, false}};
  absl::Status s = store_->PutItems(bad_json);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "item 1: attributes_json is not a JSON object");
  const std::vector<ItemRow> malformed = {{"a", "A", "{oops", {}, false}};
  EXPECT_EQ(store_->PutItems(malformed).code(),
            absl::StatusCode::kInvalidArgument);
  const std::vector<ItemRow> empty_id = {{"a", "A", "", {}, false},
                                         {"", "B", "", {}, false}};
  s = store_->PutItems(empty_id);
  EXPECT_EQ(s.message(), "item 1: empty item id");
  ASSERT_OK_AND_ASSIGN(Stats stats, store_->GetStats());
  EXPECT_EQ(stats.items, 0);
}

// The catalogue (categories, hidden) round-trips; SetItemsHidden changes
// only availability and creates unknown items.
TEST_P(StoreTest, ItemCatalogueRoundTrips) {
  std::vector<ItemRow> items = {
      {"a", "A", "", {"Comedy", "Drama", "Comedy"}, false},
      {"b", "B", "", {}, true},
      {"c", "C", "", {}, false}};
  ASSERT_OK(store_->PutItems(items));
  ASSERT_OK_AND_ASSIGN(std::vector<CatalogueRow> cat, store_->ReadCatalogue());
  ASSERT_EQ(cat.size(), 2u);  // c has neither
  EXPECT_EQ(cat[0].item, "a");
  EXPECT_THAT(cat[0].categories, ElementsAre("Comedy", "Drama"));
  EXPECT_FALSE(cat[0].hidden);
  EXPECT_EQ(cat[1].item, "b");
  EXPECT_TRUE(cat[1].categories.empty());
  EXPECT_TRUE(cat[1].hidden);

  const std::vector<std::string> hide = {"c", "new"};
  ASSERT_OK(store_->SetItemsHidden(hide, true));
  const std::vector<std::string> show = {"b"};
  ASSERT_OK(store_->SetItemsHidden(show, false));
  ASSERT_OK_AND_ASSIGN(cat, store_->ReadCatalogue());
  ASSERT_EQ(cat.size(), 3u);
  EXPECT_EQ(cat[0].item, "a");
  EXPECT_EQ(cat[1].item, "c");
  EXPECT_TRUE(cat[1].hidden);
  EXPECT_EQ(cat[2].item, "new");
  EXPECT_TRUE(cat[2].hidden);
  const std::vector<std::string> query = {"c", "new"};
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> titles,
                       store_->GetTitles(query));
  EXPECT_THAT(titles, ElementsAre("C", ""));  // hiding keeps the title

  // A later PutItems replaces the categories and availability.
  items = {{"a", "A", "", {}, false}, {"c", "C", "", {"Horror"}, false}};
  ASSERT_OK(store_->PutItems(items));
  ASSERT_OK_AND_ASSIGN(cat, store_->ReadCatalogue());
  ASSERT_EQ(cat.size(), 2u);
  EXPECT_EQ(cat[0].item, "c");
  EXPECT_THAT(cat[0].categories, ElementsAre("Horror"));
  EXPECT_FALSE(cat[0].hidden);
  EXPECT_EQ(cat[1].item, "new");

  // Invalid categories name the item and the category; nothing is stored.
  items = {{"d", "D", "", {"ok"}, false}, {"e", "E", "", {"x", ""}, false}};
  absl::Status s = store_->PutItems(items);
  EXPECT_EQ(s.message(), "item 1: category 1 is empty");
  items = {{"d", "D", "", {"bad\x1b"}, false}};
  s = store_->PutItems(items);
  EXPECT_THAT(s.message(), HasSubstr("item 0: category 0 contains"));
  items = {{"d", "D", "", std::vector<std::string>(65, "c"), false}};
  EXPECT_EQ(store_->PutItems(items).code(), absl::StatusCode::kInvalidArgument);
  const std::vector<std::string> bad = {""};
  EXPECT_EQ(store_->SetItemsHidden(bad, true).message(),
            "item 0: empty item id");
  ASSERT_OK_AND_ASSIGN(Stats stats, store_->GetStats());
  EXPECT_EQ(stats.items, 4);
}

TEST_P(StoreTest, UserRatingsSortedByItemIndex) {
  const std::vector<RatingRow> rows = {R("x", "i3", 3), R("x", "i1", 1),
                                       R("x", "i2", 2)};
  ASSERT_TRUE(store_->UpsertRatings(rows).ok());
  const std::vector<RatingRow> rows2 = {R("y", "i2", 2), R("y", "i1", 1),
                                        R("y", "i0", 0)};
  ASSERT_TRUE(store_->UpsertRatings(rows2).ok());
  ASSERT_OK_AND_ASSIGN(std::vector<UserRating> y, store_->GetUserRatings("y"));
  ASSERT_EQ(y.size(), 3u);
  EXPECT_EQ(y[0].item, "i1");
  EXPECT_EQ(y[1].item, "i2");
  EXPECT_EQ(y[2].item, "i0");
}

TEST_P(StoreTest, SnapshotMatchesStoredRatings) {
  std::vector<RatingRow> rows;
  for (int u = 0; u < 30; ++u) {
    for (int i = 0; i < 20; ++i) {
      if ((u * 7 + i) % 3 == 0) {
        rows.push_back(
            R(absl::StrCat("u", u), absl::StrCat("i", i), (u + i) % 5 + 1));
      }
    }
  }
  ASSERT_OK_AND_ASSIGN(UpsertResult r, store_->UpsertRatings(rows));
  ASSERT_EQ(r.inserted, static_cast<int64_t>(rows.size()));
  ASSERT_OK_AND_ASSIGN(Snapshot snap, store_->ReadSnapshot());
  EXPECT_EQ(snap.users.size(), static_cast<size_t>(r.new_users));
  EXPECT_EQ(snap.items.size(), static_cast<size_t>(r.new_items));
  ASSERT_EQ(snap.ratings.size(), rows.size());
  // Sorted by (user, item); each rating matches the input.
  std::vector<std::string> want;
  for (const RatingRow& row : rows) {
    want.push_back(absl::StrCat(row.user, "/", row.item, "=", row.rating));
  }
  std::vector<std::string> got = Flatten(snap);
  std::sort(want.begin(), want.end());
  std::vector<std::string> got_sorted = got;
  std::sort(got_sorted.begin(), got_sorted.end());
  EXPECT_EQ(got_sorted, want);
  for (size_t k = 1; k < snap.ratings.size(); ++k) {
    const auto& a = snap.ratings[k - 1];
    const auto& b = snap.ratings[k];
    EXPECT_TRUE(a.user < b.user || (a.user == b.user && a.item < b.item));
  }
  // Users appear in the order they were first seen.
  EXPECT_EQ(snap.users.front(), "u0");
}

TEST_P(StoreTest, Models) {
  ModelInfo meta;
  meta.kind = "rbm";
  meta.n_users = 10;
  meta.n_items = 20;
  meta.n_ratings = 30;
  meta.metrics_json = R"({"rmse": 0.9})";
  meta.validation_rmse = 0.87654321012345678;
  meta.epochs = 12;
  meta.train_seconds = 3.25;
  const std::string blob1("\x00\x01\x02model-one\xff", 13);
  ASSERT_OK_AND_ASSIGN(int64_t v1, store_->InsertModel(meta, blob1, false));
  ASSERT_OK_AND_ASSIGN(std::optional<int64_t> active,
                       store_->ActiveModelVersion());
  EXPECT_FALSE(active.has_value());

  meta.created_unix_ms = 1234;
  ASSERT_OK_AND_ASSIGN(int64_t v2, store_->InsertModel(meta, "two", true));
  EXPECT_GT(v2, v1);
  ASSERT_OK_AND_ASSIGN(active, store_->ActiveModelVersion());
  EXPECT_EQ(active, v2);

  ASSERT_OK_AND_ASSIGN(int64_t v3, store_->InsertModel(meta, "", false));
  ASSERT_OK_AND_ASSIGN(std::vector<ModelInfo> models, store_->ListModels());
  ASSERT_EQ(models.size(), 3u);
  EXPECT_EQ(models[0].version, v3);
  EXPECT_EQ(models[1].version, v2);
  EXPECT_EQ(models[2].version, v1);
  EXPECT_TRUE(models[1].active);
  EXPECT_FALSE(models[0].active);
  EXPECT_FALSE(models[2].active);
  EXPECT_EQ(models[2].size_bytes, 13);
  EXPECT_EQ(models[2].kind, "rbm");
  EXPECT_EQ(models[2].n_ratings, 30);
  EXPECT_EQ(models[2].metrics_json, R"({"rmse": 0.9})");
  EXPECT_EQ(models[2].validation_rmse, 0.87654321012345678);
  EXPECT_EQ(models[2].epochs, 12);
  EXPECT_EQ(models[2].train_seconds, 3.25);
  EXPECT_GT(models[2].created_unix_ms, 1600000000000);
  EXPECT_EQ(models[1].created_unix_ms, 1234);

  ASSERT_OK_AND_ASSIGN(std::string loaded, store_->LoadModelBlob(v1));
  EXPECT_EQ(loaded, blob1);
  ASSERT_OK_AND_ASSIGN(loaded, store_->LoadModelBlob(v3));
  EXPECT_EQ(loaded, "");
  EXPECT_EQ(store_->LoadModelBlob(999).status().code(),
            absl::StatusCode::kNotFound);

  ASSERT_OK(store_->ActivateModel(v1));
  ASSERT_OK_AND_ASSIGN(Stats stats, store_->GetStats());
  EXPECT_EQ(stats.active_model_version, v1);
  EXPECT_EQ(store_->ActivateModel(999).code(), absl::StatusCode::kNotFound);
  ASSERT_OK_AND_ASSIGN(active, store_->ActiveModelVersion());
  EXPECT_EQ(active, v1);

  meta.metrics_json = "not json";
  EXPECT_EQ(store_->InsertModel(meta, "x", true).status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_OK_AND_ASSIGN(active, store_->ActiveModelVersion());
  EXPECT_EQ(active, v1);
}

TEST_P(StoreTest, ActivationHistoryListsActivatedVersionsMostRecentFirst) {
  ModelInfo meta;
  meta.kind = "full";
  ASSERT_OK_AND_ASSIGN(std::vector<int64_t> history,
                       store_->ActivationHistory());
  EXPECT_TRUE(history.empty());
  ASSERT_OK_AND_ASSIGN(int64_t v1, store_->InsertModel(meta, "1", true));
  ASSERT_OK_AND_ASSIGN(int64_t v2, store_->InsertModel(meta, "2", false));
  ASSERT_OK_AND_ASSIGN(int64_t v3, store_->InsertModel(meta, "3", true));
  ASSERT_OK(store_->ActivateModel(v1));
  ASSERT_OK_AND_ASSIGN(history, store_->ActivationHistory());
  // v2 was never active; v1 moved to the front, once.
  EXPECT_THAT(history, ElementsAre(v1, v3));
  ASSERT_OK(store_->ActivateModel(v2));
  ASSERT_OK_AND_ASSIGN(history, store_->ActivationHistory());
  EXPECT_THAT(history, ElementsAre(v2, v1, v3));
  // Bounded: the oldest entries go.
  for (size_t i = 0; i < kActivationHistoryLength + 5; ++i) {
    ASSERT_OK(store_->ActivateModel(i % 2 == 0 ? v3 : v1));
    ASSERT_OK_AND_ASSIGN(int64_t v, store_->InsertModel(meta, "n", true));
    (void)v;
  }
  ASSERT_OK_AND_ASSIGN(history, store_->ActivationHistory());
  EXPECT_EQ(history.size(), kActivationHistoryLength);
}

TEST_P(StoreTest, ReplaceModelBlobRewritesOneVersion) {
  ModelInfo meta;
  meta.kind = "full";
  meta.n_users = 7;
  ASSERT_OK_AND_ASSIGN(int64_t v1, store_->InsertModel(meta, "first", true));
  ASSERT_OK_AND_ASSIGN(int64_t v2, store_->InsertModel(meta, "other", false));
  ASSERT_OK(store_->ReplaceModelBlob(v1, "rewritten!"));
  ASSERT_OK_AND_ASSIGN(std::string blob, store_->LoadModelBlob(v1));
  EXPECT_EQ(blob, "rewritten!");
  ASSERT_OK_AND_ASSIGN(blob, store_->LoadModelBlob(v2));
  EXPECT_EQ(blob, "other");
  ASSERT_OK_AND_ASSIGN(std::vector<ModelInfo> models, store_->ListModels());
  ASSERT_EQ(models.size(), 2u);
  EXPECT_EQ(models[1].version, v1);
  EXPECT_EQ(models[1].size_bytes, 10);
  EXPECT_EQ(models[1].n_users, 7);
  EXPECT_TRUE(models[1].active);
  EXPECT_EQ(store_->ReplaceModelBlob(999, "x").code(),
            absl::StatusCode::kNotFound);
}

TEST_P(StoreTest, InitSettingKeepsTheFirstValue) {
  ASSERT_OK_AND_ASSIGN(std::string v, store_->InitSetting("scale", "1:5:1"));
  EXPECT_EQ(v, "1:5:1");
  ASSERT_OK_AND_ASSIGN(v, store_->InitSetting("scale", "0.5:5:0.5"));
  EXPECT_EQ(v, "1:5:1");
  ASSERT_OK_AND_ASSIGN(v, store_->InitSetting("other", "x"));
  EXPECT_EQ(v, "x");
  if (!GetParam().persistent) return;
  store_.reset();
  ASSERT_OK_AND_ASSIGN(store_, Open());
  ASSERT_OK_AND_ASSIGN(v, store_->InitSetting("scale", "2:10:2"));
  EXPECT_EQ(v, "1:5:1");
}

// Inserts a model version of `kind` with a blob of `size` bytes.
absl::StatusOr<int64_t> AddModel(Store& store, std::string_view kind,
                                 size_t size, bool activate = false) {
  ModelInfo meta;
  meta.kind = std::string(kind);
  std::string blob(size, '\0');
  for (size_t k = 0; k < size; ++k) {
    blob[k] = static_cast<char>((k * 2654435761u) >> 13);
  }
  return store.InsertModel(meta, blob, activate);
}

std::vector<int64_t> Versions(const std::vector<ModelInfo>& models) {
  std::vector<int64_t> out;
  for (const ModelInfo& m : models) out.push_back(m.version);
  return out;
}

TEST_P(StoreTest, PinModel) {
  ASSERT_OK_AND_ASSIGN(int64_t v1, AddModel(*store_, kModelKindFull, 10));
  ASSERT_OK_AND_ASSIGN(int64_t v2, AddModel(*store_, kModelKindOnline, 20));
  ASSERT_OK(store_->PinModel(v1, true));
  ASSERT_OK(store_->PinModel(v1, true));  // idempotent
  ASSERT_OK_AND_ASSIGN(std::vector<ModelInfo> models, store_->ListModels());
  ASSERT_EQ(models.size(), 2u);
  EXPECT_EQ(models[0].version, v2);
  EXPECT_FALSE(models[0].pinned);
  EXPECT_TRUE(models[1].pinned);
  ASSERT_OK(store_->PinModel(v1, false));
  ASSERT_OK_AND_ASSIGN(models, store_->ListModels());
  EXPECT_FALSE(models[1].pinned);
  const absl::Status missing = store_->PinModel(v2 + 1, true);
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.message(), HasSubstr(absl::StrCat(v2 + 1)));
  // InsertModel ignores meta.pinned.
  ModelInfo meta;
  meta.kind = "full";
  meta.pinned = true;
  ASSERT_OK_AND_ASSIGN(int64_t v3, store_->InsertModel(meta, "x", false));
  ASSERT_OK_AND_ASSIGN(models, store_->ListModels());
  EXPECT_EQ(models[0].version, v3);
  EXPECT_FALSE(models[0].pinned);
}

TEST_P(StoreTest, DeleteModel) {
  ASSERT_OK_AND_ASSIGN(int64_t v1, AddModel(*store_, kModelKindFull, 1000));
  ASSERT_OK_AND_ASSIGN(int64_t v2, AddModel(*store_, kModelKindFull, 2000,
                                            /*activate=*/true));
  ASSERT_OK_AND_ASSIGN(int64_t v3, AddModel(*store_, kModelKindOnline, 3000));
  ASSERT_OK(store_->PinModel(v3, true));

  const absl::StatusOr<int64_t> active = store_->DeleteModel(v2);
  EXPECT_EQ(active.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(active.status().message(), HasSubstr("active"));
  EXPECT_EQ(store_->DeleteModel(v3 + 7).status().code(),
            absl::StatusCode::kNotFound);

  ASSERT_OK_AND_ASSIGN(int64_t freed, store_->DeleteModel(v1));
  EXPECT_EQ(freed, 1000);
  // A pinned version can be deleted explicitly.
  ASSERT_OK_AND_ASSIGN(freed, store_->DeleteModel(v3));
  EXPECT_EQ(freed, 3000);
  ASSERT_OK_AND_ASSIGN(std::vector<ModelInfo> models, store_->ListModels());
  EXPECT_THAT(Versions(models), ElementsAre(v2));
  EXPECT_EQ(store_->LoadModelBlob(v1).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->DeleteModel(v1).status().code(),
            absl::StatusCode::kNotFound);
  ASSERT_OK_AND_ASSIGN(Stats stats, store_->GetStats());
  EXPECT_EQ(stats.model_versions, 1);
  EXPECT_EQ(stats.active_model_version, v2);
  // Versions are not reused after a delete.
  ASSERT_OK_AND_ASSIGN(int64_t v4, AddModel(*store_, kModelKindFull, 1));
  EXPECT_GT(v4, v3);
}

TEST_P(StoreTest, PruneModelsKeepsActivePinnedAndNewestOfEachKind) {
  // Oldest first: f = full, o = online.
  const std::vector<std::string_view> kinds = {
      kModelKindFull,   kModelKindOnline, kModelKindOnline, kModelKindFull,
      kModelKindOnline, kModelKindFull,   kModelKindOnline, kModelKindFull,
      kModelKindOnline, kModelKindOnline};
  std::vector<int64_t> v;
  for (size_t k = 0; k < kinds.size(); ++k) {
    ASSERT_OK_AND_ASSIGN(int64_t version, AddModel(*store_, kinds[k], 100 + k,
                                                   /*activate=*/k == 1));
    v.push_back(version);
  }
  ASSERT_OK(store_->PinModel(v[0], true));

  RetentionPolicy bad;
  bad.keep_full = -1;
  absl::StatusOr<PruneResult> err = store_->PruneModels(bad);
  EXPECT_EQ(err.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(err.status().message(), HasSubstr("keep_full"));
  bad = RetentionPolicy{};
  bad.keep_online = -2;
  err = store_->PruneModels(bad);
  EXPECT_EQ(err.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(err.status().message(), HasSubstr("keep_online"));

  RetentionPolicy policy;
  policy.keep_full = 2;
  policy.keep_online = 2;
  ASSERT_OK_AND_ASSIGN(PruneResult pruned, store_->PruneModels(policy));
  // Kept: pinned v0, active v1 (online), full v5 v7, online v8 v9.
  EXPECT_THAT(pruned.deleted_versions, ElementsAre(v[6], v[4], v[3], v[2]));
  EXPECT_EQ(pruned.freed_bytes, (100 + 6) + (100 + 4) + (100 + 3) + (100 + 2));
  ASSERT_OK_AND_ASSIGN(std::vector<ModelInfo> models, store_->ListModels());
  EXPECT_THAT(Versions(models),
              ElementsAre(v[9], v[8], v[7], v[5], v[1], v[0]));

  // Nothing more to delete: a second run is a no-op.
  ASSERT_OK_AND_ASSIGN(pruned, store_->PruneModels(policy));
  EXPECT_TRUE(pruned.deleted_versions.empty());
  EXPECT_EQ(pruned.freed_bytes, 0);

  // Zero of each: only the active and the pinned versions stay.
  ASSERT_OK_AND_ASSIGN(pruned, store_->PruneModels(RetentionPolicy{0, 0}));
  EXPECT_THAT(pruned.deleted_versions, ElementsAre(v[9], v[8], v[7], v[5]));
  ASSERT_OK_AND_ASSIGN(models, store_->ListModels());
  EXPECT_THAT(Versions(models), ElementsAre(v[1], v[0]));
  EXPECT_TRUE(models[0].active);
  EXPECT_TRUE(models[1].pinned);
  ASSERT_OK_AND_ASSIGN(std::string blob, store_->LoadModelBlob(v[1]));
  EXPECT_EQ(blob.size(), 101u);

  // Versions of other kinds count as full models.
  ASSERT_OK_AND_ASSIGN(int64_t other, AddModel(*store_, "rbm", 5));
  ASSERT_OK_AND_ASSIGN(int64_t full, AddModel(*store_, kModelKindFull, 5));
  ASSERT_OK_AND_ASSIGN(pruned, store_->PruneModels(RetentionPolicy{1, 0}));
  EXPECT_THAT(pruned.deleted_versions, ElementsAre(other));
  ASSERT_OK_AND_ASSIGN(models, store_->ListModels());
  EXPECT_THAT(Versions(models), ElementsAre(full, v[1], v[0]));
}

TEST_P(StoreTest, StatsCountModelVersionsAndMeasureTheDatabase) {
  ASSERT_OK_AND_ASSIGN(Stats empty, store_->GetStats());
  EXPECT_EQ(empty.model_versions, 0);
  ASSERT_OK_AND_ASSIGN(int64_t v1, AddModel(*store_, kModelKindFull, 300000));
  ASSERT_OK_AND_ASSIGN(int64_t v2, AddModel(*store_, kModelKindOnline, 10));
  ASSERT_OK_AND_ASSIGN(Stats stats, store_->GetStats());
  EXPECT_EQ(stats.model_versions, 2);
  if (GetParam().persistent) {
    EXPECT_GT(empty.database_bytes, 0);
    // The blob is in the WAL or the file; both are counted, and given
    // apart (a size limit applies to the file only).
    EXPECT_GE(stats.database_bytes, empty.database_bytes + 300000);
    EXPECT_EQ(stats.database_bytes,
              stats.database_file_bytes + stats.wal_bytes);
    EXPECT_GT(stats.database_file_bytes, 0);
  } else {
    EXPECT_EQ(empty.database_bytes, 0);
    EXPECT_EQ(stats.database_bytes, 0);
  }
  ASSERT_OK(store_->DeleteModel(v1).status());
  ASSERT_OK(store_->DeleteModel(v2).status());
  ASSERT_OK_AND_ASSIGN(stats, store_->GetStats());
  EXPECT_EQ(stats.model_versions, 0);
}

TEST_P(StoreTest, ConcurrentWriterAndReaders) {
  constexpr int kBatches = 40;
  constexpr int kBatchSize = 250;
  std::atomic<bool> done{false};
  std::atomic<int> errors{0};
  std::thread writer([&] {
    for (int b = 0; b < kBatches; ++b) {
      std::vector<RatingRow> rows;
      for (int j = 0; j < kBatchSize; ++j) {
        rows.push_back(R(absl::StrCat("user", b, "_", j % 50),
                         absl::StrCat("item", j), j % 5 + 1));
      }
      if (!store_->UpsertRatings(rows).ok()) ++errors;
    }
    done = true;
  });
  auto reader = [&] {
    int64_t last = 0;
    int rounds = 0;
    while (!done || rounds < 2) {
      ++rounds;
      auto snap = store_->ReadSnapshot();
      if (!snap.ok()) {
        ++errors;
        continue;
      }
      const int64_t n = static_cast<int64_t>(snap->ratings.size());
      // Whole batches only, never going back.
      if (n % kBatchSize != 0 || n < last) ++errors;
      if (snap->users.size() != static_cast<size_t>(n / kBatchSize * 50)) {
        ++errors;
      }
      for (const Snapshot::Row& r : snap->ratings) {
        if (r.user < 0 || static_cast<size_t>(r.user) >= snap->users.size() ||
            r.item < 0 || static_cast<size_t>(r.item) >= snap->items.size()) {
          ++errors;
          break;
        }
      }
      last = n;
      auto stats = store_->GetStats();
      if (!stats.ok() || stats->ratings % kBatchSize != 0 ||
          stats->ratings < last) {
        ++errors;
      }
      auto user = store_->GetUserRatings("user0_0");
      if (!user.ok() && user.status().code() != absl::StatusCode::kNotFound) {
        ++errors;
      }
    }
  };
  std::thread r1(reader);
  std::thread r2(reader);
  writer.join();
  r1.join();
  r2.join();
  EXPECT_EQ(errors.load(), 0);
  ASSERT_OK_AND_ASSIGN(Stats stats, store_->GetStats());
  EXPECT_EQ(stats.ratings, kBatches * kBatchSize);
  EXPECT_EQ(stats.users, kBatches * 50);
  EXPECT_EQ(stats.items, kBatchSize);
}

// ---------------------------------------------------------------------------
// File-only behaviour.

class StoreFileTest : public testing::Test {
 protected:
  ScratchDir dir_;
};

TEST_F(StoreFileTest, OpenArgumentErrors) {
  EXPECT_EQ(Store::Open("").status().code(),
            absl::StatusCode::kInvalidArgument);
  StoreOptions ro;
  ro.read_only = true;
  EXPECT_EQ(Store::Open(":memory:", ro).status().code(),
            absl::StatusCode::kInvalidArgument);
  StoreOptions neg;
  neg.busy_timeout_ms = -1;
  EXPECT_EQ(Store::Open(dir_.File("a.db"), neg).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(StoreFileTest, CreatesWalDatabaseWithSchemaVersion) {
  const std::string path = dir_.File("new.db");
  ASSERT_FALSE(std::filesystem::exists(path));
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, Store::Open(path));
    EXPECT_TRUE(std::filesystem::exists(path));
  }
  RawDb raw(path);
  EXPECT_EQ(raw.QueryInt("PRAGMA user_version"), kSchemaVersion);
  EXPECT_EQ(raw.QueryText("PRAGMA journal_mode"), "wal");
  EXPECT_EQ(raw.QueryInt("PRAGMA auto_vacuum"), 2);  // INCREMENTAL
  EXPECT_EQ(raw.QueryInt("SELECT count(*) FROM sqlite_schema WHERE "
                         "name IN ('users','items','ratings','models','meta')"),
            5);
}

TEST_F(StoreFileTest, ReopenKeepsDataAndIndices) {
  const std::string path = dir_.File("reopen.db");
  Snapshot before;
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, Store::Open(path));
    const std::vector<RatingRow> rows = {R("a", "x", 1), R("b", "y", 2),
                                         R("c", "x", 3)};
    ASSERT_TRUE(store->UpsertRatings(rows).ok());
    ASSERT_TRUE(store->DeleteUser("b").ok());
    const std::vector<ItemRow> items = {{"x", "Ex", "", {}, false}};
    ASSERT_OK(store->PutItems(items));
    ModelInfo meta;
    meta.kind = "rbm";
    ASSERT_TRUE(store->InsertModel(meta, "blob", true).ok());
    ASSERT_OK_AND_ASSIGN(before, store->ReadSnapshot());
  }
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, Store::Open(path));
  ASSERT_OK_AND_ASSIGN(Snapshot after, store->ReadSnapshot());
  EXPECT_EQ(after.users, before.users);
  EXPECT_EQ(after.items, before.items);
  EXPECT_EQ(Flatten(after), Flatten(before));
  // The cache was reloaded: known ids are not created again, and the deleted
  // user's index is not reused.
  const std::vector<RatingRow> rows = {R("a", "y", 5), R("b", "x", 4)};
  ASSERT_OK_AND_ASSIGN(UpsertResult r, store->UpsertRatings(rows));
  EXPECT_EQ(r.new_users, 1);
  EXPECT_EQ(r.new_items, 0);
  ASSERT_OK_AND_ASSIGN(Stats stats, store->GetStats());
  EXPECT_EQ(stats.active_model_version, 1);
  const std::vector<std::string> q = {"x"};
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> titles, store->GetTitles(q));
  EXPECT_THAT(titles, ElementsAre("Ex"));
  RawDb raw(path);
  EXPECT_EQ(raw.QueryInt("SELECT idx FROM users WHERE ext_id='b'"), 4);
}

TEST_F(StoreFileTest, NewerSchemaVersionIsRejected) {
  const std::string path = dir_.File("future.db");
  { ASSERT_TRUE(Store::Open(path).ok()); }
  {
    RawDb raw(path);
    ASSERT_EQ(raw.Exec("PRAGMA user_version = 99"), SQLITE_OK);
  }
  auto store = Store::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store.status().message(),
            absl::StrCat("database schema version 99 is newer than this build "
                         "supports (",
                         kSchemaVersion, ")"));
}

TEST_F(StoreFileTest, MigratesAnEmptyExistingFile) {
  const std::string path = dir_.File("empty.db");
  {
    RawDb raw(path);  // creates a valid, empty database (user_version 0)
    ASSERT_EQ(raw.Exec("CREATE TABLE unrelated(x)"), SQLITE_OK);
  }
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, Store::Open(path));
  RawDb raw(path);
  EXPECT_EQ(raw.QueryInt("PRAGMA user_version"), kSchemaVersion);
}

TEST_F(StoreFileTest, UnopenablePathsNameThePath) {
  // A path under a regular file fails even for root.
  const std::string file = dir_.File("plain_file");
  std::ofstream(file) << "not a directory";
  const std::string under_file = file + "/x.db";
  auto s1 = Store::Open(under_file);
  ASSERT_FALSE(s1.ok());
  EXPECT_EQ(s1.status().code(), absl::StatusCode::kFailedPrecondition)
      << s1.status();
  EXPECT_THAT(s1.status().message(), HasSubstr(under_file));
  EXPECT_THAT(s1.status().message(), HasSubstr("is not a directory"));

  const std::string no_dir = dir_.File("missing/dir/x.db");
  auto s2 = Store::Open(no_dir);
  ASSERT_FALSE(s2.ok());
  EXPECT_EQ(s2.status().code(), absl::StatusCode::kFailedPrecondition)
      << s2.status();
  EXPECT_THAT(s2.status().message(), HasSubstr(no_dir));
  EXPECT_THAT(s2.status().message(), HasSubstr("does not exist"));

  // A file that is not a database.
  const std::string junk = dir_.File("junk.db");
  std::ofstream(junk) << std::string(4096, 'j');
  auto s3 = Store::Open(junk);
  ASSERT_FALSE(s3.ok());
  EXPECT_EQ(s3.status().code(), absl::StatusCode::kDataLoss) << s3.status();
  EXPECT_THAT(s3.status().message(), HasSubstr(junk));
}

TEST_F(StoreFileTest, ReadOnly) {
  const std::string path = dir_.File("ro.db");
  StoreOptions ro;
  ro.read_only = true;
  EXPECT_FALSE(Store::Open(path, ro).ok());  // does not create
  EXPECT_FALSE(std::filesystem::exists(path));
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, Store::Open(path));
    const std::vector<RatingRow> rows = {R("a", "x", 1)};
    ASSERT_TRUE(store->UpsertRatings(rows).ok());
    ModelInfo meta;
    meta.kind = "full";
    ASSERT_TRUE(store->InsertModel(meta, "ro-model", true).ok());
  }
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, Store::Open(path, ro));
  ASSERT_OK_AND_ASSIGN(Stats stats, store->GetStats());
  EXPECT_EQ(stats.ratings, 1);
  const std::vector<RatingRow> rows = {R("b", "x", 1)};
  EXPECT_EQ(store->UpsertRatings(rows).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store->DeleteUser("a").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store->PruneModels(RetentionPolicy{}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store->PinModel(1, true).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store->DeleteModel(1).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // The long reads open read-only connections of their own.
  ASSERT_OK_AND_ASSIGN(Snapshot snap, store->ReadSnapshot());
  EXPECT_THAT(Flatten(snap), ElementsAre("a/x=1"));
  ASSERT_OK_AND_ASSIGN(std::vector<ModelInfo> models, store->ListModels());
  ASSERT_EQ(models.size(), 1u);
  ASSERT_OK_AND_ASSIGN(std::string blob,
                       store->LoadModelBlob(models[0].version));
  EXPECT_EQ(blob, "ro-model");
}

TEST_F(StoreFileTest, LockedDatabaseIsUnavailableUntilReleased) {
  const std::string path = dir_.File("locked.db");
  StoreOptions options;
  options.busy_timeout_ms = 100;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store,
                       Store::Open(path, options));
  const std::vector<RatingRow> first = {R("a", "x", 1)};
  ASSERT_TRUE(store->UpsertRatings(first).ok());

  RawDb raw(path);
  ASSERT_EQ(raw.Exec("BEGIN EXCLUSIVE"), SQLITE_OK);
  const std::vector<RatingRow> rows = {R("b", "y", 2)};
  const auto start = std::chrono::steady_clock::now();
  auto result = store->UpsertRatings(rows);
  const auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(ReasonOf(result.status()), kReasonDatabaseLocked);
  EXPECT_THAT(result.status().message(), HasSubstr("locked"));
  EXPECT_THAT(result.status().message(), HasSubstr(path));
  EXPECT_GE(waited, std::chrono::milliseconds(90));
  EXPECT_LT(waited, std::chrono::milliseconds(5000));
  const absl::Status activate = store->ActivateModel(1);
  EXPECT_EQ(activate.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(ReasonOf(activate), kReasonDatabaseLocked);
  EXPECT_EQ(ReasonOf(store->PruneModels(RetentionPolicy{}).status()),
            kReasonDatabaseLocked);
  // Nothing of the failed batch is stored.
  EXPECT_EQ(store->GetUserRatings("b").status().code(),
            absl::StatusCode::kNotFound);
  // Reads still work (WAL).
  ASSERT_OK_AND_ASSIGN(Stats stats, store->GetStats());
  EXPECT_EQ(stats.ratings, 1);
  // A read-only Store can open while locked: no migration is needed.
  StoreOptions read_only = options;
  read_only.read_only = true;
  EXPECT_TRUE(Store::Open(path, read_only).ok());

  ASSERT_EQ(raw.Exec("COMMIT"), SQLITE_OK);
  ASSERT_OK_AND_ASSIGN(UpsertResult r, store->UpsertRatings(rows));
  EXPECT_EQ(r.new_users, 1);
  ASSERT_OK_AND_ASSIGN(stats, store->GetStats());
  EXPECT_EQ(stats.ratings, 2);
}

TEST_F(StoreFileTest, OneWriterPerDatabase) {
  const std::string path = dir_.File("one.db");
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> first, Store::Open(path));
  absl::StatusOr<std::unique_ptr<Store>> second = Store::Open(path);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ReasonOf(second.status()), kReasonDatabaseInUse);
  EXPECT_THAT(second.status().message(), HasSubstr("in use by another"));
  EXPECT_THAT(second.status().message(),
              HasSubstr(absl::StrCat("pid ", getpid())));
  EXPECT_THAT(second.status().message(), HasSubstr(path));
  // Readers are welcome.
  StoreOptions read_only;
  read_only.read_only = true;
  ASSERT_OK(Store::Open(path, read_only).status());
  // The lock goes with the Store.
  first.reset();
  ASSERT_OK_AND_ASSIGN(second, Store::Open(path));
}

TEST_F(StoreFileTest, AnotherProcessHoldingTheDatabaseIsNamed) {
  const std::string path = dir_.File("other.db");
  { ASSERT_OK(Store::Open(path).status()); }
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    absl::StatusOr<std::unique_ptr<Store>> s = Store::Open(path);
    const char c = s.ok() ? 'y' : 'n';
    (void)!write(ready[1], &c, 1);
    pause();
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  absl::StatusOr<std::unique_ptr<Store>> mine = Store::Open(path);
  EXPECT_EQ(ReasonOf(mine.status()), kReasonDatabaseInUse);
  EXPECT_THAT(mine.status().message(), HasSubstr(absl::StrCat("pid ", child)));
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  close(ready[0]);
  close(ready[1]);
  // The killed process's lock is gone with it.
  ASSERT_OK(Store::Open(path).status());
}

TEST_F(StoreFileTest, UnwritableDirectoryIsPermissionDeniedNotMissing) {
  if (geteuid() == 0) {
    // root writes anyway; check the message through a missing directory.
    absl::StatusOr<std::unique_ptr<Store>> s =
        Store::Open(dir_.File("no/such/dir/x.db"));
    EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(s.status().message(), HasSubstr("does not exist"));
    return;
  }
  const std::string ro = dir_.File("ro");
  std::filesystem::create_directory(ro);
  std::filesystem::permissions(ro, std::filesystem::perms::owner_read |
                                       std::filesystem::perms::owner_exec);
  absl::StatusOr<std::unique_ptr<Store>> s = Store::Open(ro + "/x.db");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(s.status().message(), HasSubstr("must be writable"));
  std::filesystem::permissions(ro, std::filesystem::perms::owner_all);
}

TEST_F(StoreFileTest, DamagedFileIsRefusedAtOpen) {
  const std::string path = dir_.File("damaged.db");
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, Store::Open(path));
    std::vector<RatingRow> rows;
    for (int u = 0; u < 400; ++u) {
      for (int i = 0; i < 20; ++i) {
        rows.push_back(R(absl::StrCat("user-", u), absl::StrCat("item-", i),
                         1 + (u + i) % 5));
      }
    }
    ASSERT_OK(store->UpsertRatings(rows).status());
    ModelInfo meta;
    meta.kind = "full";
    ASSERT_OK(
        store->InsertModel(meta, std::string(200000, 'm'), true).status());
  }
  const auto size = std::filesystem::file_size(path);
  ASSERT_GT(size, 256u * 1024);
  {
    // 64 KiB of zeros in the middle, as the hostile tester did.
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(size / 2 / 4096 * 4096));
    const std::string zeros(64 * 1024, '\0');
    f.write(zeros.data(), static_cast<std::streamsize>(zeros.size()));
  }
  absl::StatusOr<std::unique_ptr<Store>> s = Store::Open(path);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.status().message(), HasSubstr("damaged"));
  // Without the check it opens (the damage shows later).
  StoreOptions unchecked;
  unchecked.check_integrity = false;
  ASSERT_OK(Store::Open(path, unchecked).status());
}

TEST_F(StoreFileTest, FailedTransactionRollsBackEverything) {
  const std::string path = dir_.File("rollback.db");
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, Store::Open(path));
  const std::vector<RatingRow> first = {R("a", "x", 1)};
  ASSERT_TRUE(store->UpsertRatings(first).ok());
  // A trigger added behind the Store's back makes the database refuse the
  // rating 42: a failure in the middle of a transaction.
  RawDb raw(path);
  ASSERT_EQ(raw.Exec("CREATE TRIGGER no42 BEFORE INSERT ON ratings "
                     "WHEN NEW.rating = 42 BEGIN "
                     "SELECT RAISE(ABORT, 'no 42 here'); END"),
            SQLITE_OK);
  const std::vector<RatingRow> batch = {R("new1", "newx", 1), R("new2", "x", 2),
                                        R("a", "x", 5), R("new3", "newy", 42)};
  auto failed = store->UpsertRatings(batch);
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(failed.status().message(), HasSubstr("no 42 here"));
  ASSERT_OK_AND_ASSIGN(Snapshot snap, store->ReadSnapshot());
  EXPECT_THAT(Flatten(snap), ElementsAre("a/x=1"));
  EXPECT_THAT(snap.users, ElementsAre("a"));
  EXPECT_THAT(snap.items, ElementsAre("x"));

  // The ids the failed batch had cached are gone: they are created again (a
  // stale cache entry would point at a rolled-back row and trip the foreign
  // key check).
  ASSERT_EQ(raw.Exec("DROP TRIGGER no42"), SQLITE_OK);
  ASSERT_OK_AND_ASSIGN(UpsertResult r, store->UpsertRatings(batch));
  EXPECT_EQ(r.new_users, 3);
  EXPECT_EQ(r.new_items, 2);
  EXPECT_EQ(r.inserted, 3);
  EXPECT_EQ(r.replaced, 1);
  ASSERT_OK_AND_ASSIGN(snap, store->ReadSnapshot());
  EXPECT_THAT(snap.users, ElementsAre("a", "new1", "new2", "new3"));
}

// Big model blobs pruned: the database gives their pages back and the file
// shrinks.
TEST_F(StoreFileTest, PruningBigBlobsShrinksTheFile) {
  const std::string path = dir_.File("shrink.db");
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, Store::Open(path));
  constexpr size_t kBlob = 4 << 20;
  std::vector<int64_t> versions;
  for (int k = 0; k < 6; ++k) {
    ASSERT_OK_AND_ASSIGN(int64_t v, AddModel(*store, kModelKindOnline, kBlob,
                                             /*activate=*/k == 5));
    versions.push_back(v);
  }
  const std::vector<RatingRow> rows = {R("a", "x", 1)};
  ASSERT_OK(store->UpsertRatings(rows).status());
  ASSERT_OK_AND_ASSIGN(Stats before, store->GetStats());
  EXPECT_GE(before.database_bytes, static_cast<int64_t>(6 * kBlob));
  // Middle versions too (not only the file's tail) are given back.
  ASSERT_OK_AND_ASSIGN(int64_t freed, store->DeleteModel(versions[2]));
  EXPECT_EQ(freed, static_cast<int64_t>(kBlob));
  ASSERT_OK_AND_ASSIGN(PruneResult pruned,
                       store->PruneModels(RetentionPolicy{0, 1}));
  EXPECT_THAT(pruned.deleted_versions,
              ElementsAre(versions[4], versions[3], versions[1], versions[0]));
  EXPECT_EQ(pruned.freed_bytes, static_cast<int64_t>(4 * kBlob));
  ASSERT_OK_AND_ASSIGN(Stats after, store->GetStats());
  EXPECT_EQ(after.model_versions, 1);
  RawDb raw(path);
  const int64_t pages_bytes =
      raw.QueryInt("PRAGMA page_count") * raw.QueryInt("PRAGMA page_size");
  EXPECT_LT(pages_bytes, static_cast<int64_t>(kBlob + (1 << 20)));
  // The WAL keeps at most its size limit once reset; the database file
  // itself is back to about one blob once checkpointed.
  ASSERT_EQ(raw.Exec("PRAGMA wal_checkpoint(TRUNCATE)"), SQLITE_OK);
  EXPECT_LT(std::filesystem::file_size(path), kBlob + (1 << 20));
  ASSERT_OK_AND_ASSIGN(after, store->GetStats());
  EXPECT_LT(after.database_bytes, static_cast<int64_t>(kBlob + (1 << 20)));
  EXPECT_LT(after.database_bytes, before.database_bytes / 4);
  ASSERT_OK_AND_ASSIGN(std::string blob, store->LoadModelBlob(versions[5]));
  EXPECT_EQ(blob.size(), kBlob);
  EXPECT_EQ(raw.QueryText("PRAGMA integrity_check"), "ok");
}

// Rows "<prefix><k>" x 4 items, ids long enough to fill pages quickly.
std::vector<RatingRow> FillerBatch(const std::string& prefix, int rows) {
  std::vector<RatingRow> out;
  for (int k = 0; k < rows; ++k) {
    out.push_back(R(absl::StrCat(prefix, k / 4, std::string(100, 'u')),
                    absl::StrCat("item", k % 4, std::string(100, 'i')), 3, k));
  }
  return out;
}

// Upserts batches until one fails; returns that failure and the batch (and
// the count of batches stored before it).
absl::Status FillUntilFull(Store& store, const std::string& prefix,
                           std::vector<RatingRow>& failed_batch,
                           int& stored_batches) {
  stored_batches = 0;
  for (int b = 0; b < 10000; ++b) {
    std::vector<RatingRow> batch =
        FillerBatch(absl::StrCat(prefix, b, "_"), 200);
    absl::StatusOr<UpsertResult> r = store.UpsertRatings(batch);
    if (!r.ok()) {
      failed_batch = std::move(batch);
      return r.status();
    }
    ++stored_batches;
  }
  return absl::OkStatus();
}

TEST_F(StoreFileTest, MaxBytesFullIsStorageFullAndRecovers) {
  const std::string path = dir_.File("full.db");
  StoreOptions options;
  options.max_bytes = 3 << 20;
  EXPECT_EQ(
      Store::Open(path, StoreOptions{5000, true, false, -1}).status().code(),
      absl::StatusCode::kInvalidArgument);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store,
                       Store::Open(path, options));
  ASSERT_OK_AND_ASSIGN(int64_t full_v,
                       AddModel(*store, kModelKindFull, 600 << 10));
  ASSERT_OK_AND_ASSIGN(int64_t online_v,
                       AddModel(*store, kModelKindOnline, 600 << 10));
  ASSERT_OK_AND_ASSIGN(int64_t active_v,
                       AddModel(*store, kModelKindFull, 10, true));
  // A blob larger than the limit: STORAGE_FULL, nothing stored.
  absl::StatusOr<int64_t> too_big =
      AddModel(*store, kModelKindFull, 4 << 20, true);
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(ReasonOf(too_big.status()), kReasonStorageFull);

  std::vector<RatingRow> failed;
  int stored = 0;
  absl::Status full = FillUntilFull(*store, "a", failed, stored);
  ASSERT_FALSE(full.ok());
  EXPECT_GT(stored, 0);
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
  EXPECT_EQ(ReasonOf(full), kReasonStorageFull);
  EXPECT_THAT(std::string(full.message()),
              testing::StartsWith("storage full: "));
  EXPECT_THAT(full.message(), HasSubstr(path));

  // Nothing of the failed batch is stored; reads keep working.
  ASSERT_OK_AND_ASSIGN(Stats stats, store->GetStats());
  EXPECT_EQ(stats.ratings, stored * 200);
  // The limit is on the file, which stays under it (the WAL does not count).
  EXPECT_EQ(stats.database_max_bytes, 3 << 20);
  EXPECT_LE(stats.database_file_bytes, 3 << 20);
  EXPECT_EQ(stats.database_bytes, stats.database_file_bytes + stats.wal_bytes);
  EXPECT_EQ(stats.model_versions, 3);
  EXPECT_EQ(stats.active_model_version, active_v);
  EXPECT_EQ(store->GetUserRatings(failed[0].user).status().code(),
            absl::StatusCode::kNotFound);
  ASSERT_OK_AND_ASSIGN(Snapshot snap, store->ReadSnapshot());
  EXPECT_EQ(snap.ratings.size(), static_cast<size_t>(stored * 200));
  ASSERT_OK_AND_ASSIGN(std::string blob, store->LoadModelBlob(full_v));
  EXPECT_EQ(blob.size(), 600u << 10);

  // DeleteModel frees space: the same batch now goes in, with its new ids.
  ASSERT_OK_AND_ASSIGN(int64_t freed, store->DeleteModel(full_v));
  EXPECT_EQ(freed, 600 << 10);
  ASSERT_OK_AND_ASSIGN(UpsertResult r, store->UpsertRatings(failed));
  EXPECT_EQ(r.inserted, 200);
  EXPECT_EQ(r.new_users, 50);

  // Full again; PruneModels frees space too.
  full = FillUntilFull(*store, "b", failed, stored);
  EXPECT_EQ(ReasonOf(full), kReasonStorageFull) << full;
  ASSERT_OK_AND_ASSIGN(PruneResult pruned,
                       store->PruneModels(RetentionPolicy{0, 0}));
  EXPECT_THAT(pruned.deleted_versions, ElementsAre(online_v));
  ASSERT_OK_AND_ASSIGN(r, store->UpsertRatings(failed));
  EXPECT_EQ(r.inserted, 200);
  RawDb raw(path);
  EXPECT_EQ(raw.QueryText("PRAGMA integrity_check"), "ok");
}

// A VFS over SQLite's default one that pauses the first read (xRead) of a
// chosen thread until released: a long read held open at a known point.
// Registered as the default VFS while it lives, so a Store opened meanwhile
// uses it for all its connections. One instance at a time.
class PausingVfs {
 public:
  PausingVfs() {
    real_ = sqlite3_vfs_find(nullptr);
    vfs_ = *real_;
    vfs_.szOsFile = static_cast<int>(sizeof(File)) + real_->szOsFile;
    vfs_.zName = "rbmrec_pausing";
    vfs_.xOpen = &Open;
    instance_ = this;
    sqlite3_vfs_register(&vfs_, /*makeDflt=*/1);
  }
  ~PausingVfs() {
    Release();
    sqlite3_vfs_unregister(&vfs_);
    sqlite3_vfs_register(real_, /*makeDflt=*/1);
    instance_ = nullptr;
  }

  // The next read made by the calling thread pauses until Release().
  void ArmForThisThread() {
    absl::MutexLock lock(&mu_);
    armed_ = std::this_thread::get_id();
  }
  // Waits until the armed read has paused; false after `timeout`.
  bool WaitPaused(std::chrono::milliseconds timeout) {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(&paused_),
                                absl::FromChrono(timeout));
  }
  void Release() {
    absl::MutexLock lock(&mu_);
    released_ = true;
  }

 private:
  struct File {
    sqlite3_file base;
    sqlite3_file* real;  // the default VFS's file, right after this struct
  };
  static sqlite3_file* Real(sqlite3_file* f) {
    return reinterpret_cast<File*>(f)->real;
  }

  static int Open(sqlite3_vfs*, const char* name, sqlite3_file* f, int flags,
                  int* out_flags) {
    File* file = reinterpret_cast<File*>(f);
    file->real = reinterpret_cast<sqlite3_file*>(file + 1);
    const int rc = instance_->real_->xOpen(instance_->real_, name, file->real,
                                           flags, out_flags);
    file->base.pMethods = file->real->pMethods != nullptr ? &kMethods : nullptr;
    return rc;
  }

  void MaybePause() {
    absl::MutexLock lock(&mu_);
    if (armed_ != std::this_thread::get_id()) return;
    armed_ = std::thread::id();
    paused_ = true;
    mu_.Await(absl::Condition(&released_));
  }

  static int Read(sqlite3_file* f, void* buf, int n, sqlite3_int64 off) {
    instance_->MaybePause();
    return Real(f)->pMethods->xRead(Real(f), buf, n, off);
  }

  static constexpr sqlite3_io_methods kMethods = {
      3,
      [](sqlite3_file* f) {
        const int rc = Real(f)->pMethods->xClose(Real(f));
        f->pMethods = nullptr;
        return rc;
      },
      &Read,
      [](sqlite3_file* f, const void* b, int n, sqlite3_int64 o) {
        return Real(f)->pMethods->xWrite(Real(f), b, n, o);
      },
      [](sqlite3_file* f, sqlite3_int64 n) {
        return Real(f)->pMethods->xTruncate(Real(f), n);
      },
      [](sqlite3_file* f, int flags) {
        return Real(f)->pMethods->xSync(Real(f), flags);
      },
      [](sqlite3_file* f, sqlite3_int64* n) {
        return Real(f)->pMethods->xFileSize(Real(f), n);
      },
      [](sqlite3_file* f, int l) {
        return Real(f)->pMethods->xLock(Real(f), l);
      },
      [](sqlite3_file* f, int l) {
        return Real(f)->pMethods->xUnlock(Real(f), l);
      },
      [](sqlite3_file* f, int* out) {
        return Real(f)->pMethods->xCheckReservedLock(Real(f), out);
      },
      [](sqlite3_file* f, int op, void* arg) {
        return Real(f)->pMethods->xFileControl(Real(f), op, arg);
      },
      [](sqlite3_file* f) { return Real(f)->pMethods->xSectorSize(Real(f)); },
      [](sqlite3_file* f) {
        return Real(f)->pMethods->xDeviceCharacteristics(Real(f));
      },
      [](sqlite3_file* f, int pg, int size, int extend, void volatile** p) {
        return Real(f)->pMethods->xShmMap(Real(f), pg, size, extend, p);
      },
      [](sqlite3_file* f, int off, int n, int flags) {
        return Real(f)->pMethods->xShmLock(Real(f), off, n, flags);
      },
      [](sqlite3_file* f) { Real(f)->pMethods->xShmBarrier(Real(f)); },
      [](sqlite3_file* f, int del) {
        return Real(f)->pMethods->xShmUnmap(Real(f), del);
      },
      [](sqlite3_file* f, sqlite3_int64 o, int n, void** p) {
        return Real(f)->pMethods->xFetch(Real(f), o, n, p);
      },
      [](sqlite3_file* f, sqlite3_int64 o, void* p) {
        return Real(f)->pMethods->xUnfetch(Real(f), o, p);
      },
  };

  static inline PausingVfs* instance_ = nullptr;
  sqlite3_vfs* real_ = nullptr;
  sqlite3_vfs vfs_{};
  absl::Mutex mu_;
  std::thread::id armed_ ABSL_GUARDED_BY(mu_);
  bool paused_ ABSL_GUARDED_BY(mu_) = false;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
};

// While a long read (ReadSnapshot, LoadModelBlob) is held in the middle of
// reading the file, the point reads, GetStats, ListModels and a write all
// complete: the long read has a connection of its own.
class LongReadTest : public StoreFileTest,
                     public testing::WithParamInterface<bool> {};

TEST_P(LongReadTest, DoesNotBlockPointReadsOrWrites) {
  const bool snapshot = GetParam();
  PausingVfs vfs;
  const std::string path = dir_.File("long.db");
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, Store::Open(path));
  std::vector<RatingRow> rows;
  for (int k = 0; k < 20000; ++k) {
    rows.push_back(R(absl::StrCat("u", k / 100), absl::StrCat("i", k % 400),
                     k % 5 + 1, k));
  }
  ASSERT_OK(store->UpsertRatings(rows).status());
  ASSERT_OK_AND_ASSIGN(int64_t version,
                       AddModel(*store, kModelKindFull, 1 << 20, true));

  bool long_read_ok = false;
  std::thread long_read([&] {
    vfs.ArmForThisThread();
    long_read_ok = snapshot ? store->ReadSnapshot().ok()
                            : store->LoadModelBlob(version).ok();
  });
  const bool paused = vfs.WaitPaused(std::chrono::seconds(10));
  EXPECT_TRUE(paused) << "the long read never read the file";
  auto others = std::async(std::launch::async, [&] {
    const std::vector<std::string> items = {"i1", "i2"};
    const std::vector<RatingRow> more = {R("u1", "i1", 2), R("new", "i1", 1)};
    return store->GetUserRatings("u7").ok() && store->GetTitles(items).ok() &&
           store->GetStats().ok() && store->ListModels().ok() &&
           store->ActiveModelVersion().ok() && store->UpsertRatings(more).ok();
  });
  const bool finished =
      others.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  vfs.Release();
  long_read.join();
  EXPECT_TRUE(finished) << "short reads / writes waited for the long read";
  EXPECT_TRUE(others.get());
  EXPECT_TRUE(long_read_ok);
}

INSTANTIATE_TEST_SUITE_P(SnapshotAndBlob, LongReadTest, testing::Bool(),
                         [](const testing::TestParamInfo<bool>& p) {
                           return p.param ? "ReadSnapshot" : "LoadModelBlob";
                         });

// Child: opens the store, upserts `batches` batches, then dies by SIGKILL
// without closing anything.
void CrashingWriter(const std::string& path, bool sync_full, int batches,
                    int batch_size) {
  StoreOptions options;
  options.synchronous_full = sync_full;
  auto store = Store::Open(path, options);
  if (!store.ok()) _exit(2);
  for (int b = 0; b < batches; ++b) {
    std::vector<RatingRow> rows;
    for (int j = 0; j < batch_size; ++j) {
      rows.push_back(R(absl::StrCat("u", b), absl::StrCat("i", j), j % 5 + 1,
                       b * 1000 + j));
    }
    if (!(*store)->UpsertRatings(rows).ok()) _exit(3);
  }
  raise(SIGKILL);
  _exit(4);  // not reached
}

TEST_F(StoreFileTest, CommittedWritesSurviveKill9) {
  for (bool sync_full : {true, false}) {
    SCOPED_TRACE(sync_full ? "synchronous=FULL" : "synchronous=NORMAL");
    const std::string path =
        dir_.File(sync_full ? "crash_full.db" : "crash_normal.db");
    constexpr int kBatches = 5;
    constexpr int kBatchSize = 300;
    fflush(nullptr);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) CrashingWriter(path, sync_full, kBatches, kBatchSize);
    int wstatus = 0;
    ASSERT_EQ(waitpid(pid, &wstatus, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(wstatus)) << "child exit " << WEXITSTATUS(wstatus);
    ASSERT_EQ(WTERMSIG(wstatus), SIGKILL);
    // The WAL was not checkpointed: the data lives only there.
    EXPECT_TRUE(std::filesystem::exists(path + "-wal"));

    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, Store::Open(path));
    ASSERT_OK_AND_ASSIGN(Stats stats, store->GetStats());
    EXPECT_EQ(stats.users, kBatches);
    EXPECT_EQ(stats.items, kBatchSize);
    EXPECT_EQ(stats.ratings, kBatches * kBatchSize);
    for (int b = 0; b < kBatches; ++b) {
      ASSERT_OK_AND_ASSIGN(std::vector<UserRating> u,
                           store->GetUserRatings(absl::StrCat("u", b)));
      ASSERT_EQ(u.size(), static_cast<size_t>(kBatchSize));
      for (int j = 0; j < kBatchSize; ++j) {
        EXPECT_EQ(u[static_cast<size_t>(j)].item, absl::StrCat("i", j));
        EXPECT_EQ(u[static_cast<size_t>(j)].rating, j % 5 + 1);
        EXPECT_EQ(u[static_cast<size_t>(j)].timestamp, b * 1000 + j);
      }
    }
  }
}

// 100,000 ratings in batches of 5,000 into a new file database: first all
// new, then the same rows again (every row replaces one), then new pairs of
// known users and items; then one snapshot. Prints the times; the bounds are
// loose so a busy CI box passes.
TEST_F(StoreFileTest, BulkUpsertAndSnapshotSpeed) {
  const std::string path = dir_.File("bulk.db");
  constexpr int kRows = 100000;
  constexpr int kBatch = 5000;
  std::vector<RatingRow> rows;
  std::vector<RatingRow> more;
  rows.reserve(kRows);
  more.reserve(kRows);
  for (int k = 0; k < kRows; ++k) {
    // ~1000 users x ~2000 items, MovieLens-like ids.
    rows.push_back(R(absl::StrCat(k / 100), absl::StrCat((k * 37) % 2000 + 1),
                     k % 5 + 1, 881250949 + k));
    more.push_back(R(absl::StrCat(k / 100),
                     absl::StrCat((k * 37 + 1000) % 2000 + 1), k % 5 + 1,
                     881250949 + k));
  }
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, Store::Open(path));
  const auto ms = [](auto d) {
    return std::chrono::duration<double, std::milli>(d).count();
  };
  // Upserts `all` in batches; returns the time in ms and the row counts.
  const auto upsert_all = [&](const std::vector<RatingRow>& all,
                              int64_t& inserted, int64_t& replaced) {
    const auto start = std::chrono::steady_clock::now();
    for (int b = 0; b < kRows; b += kBatch) {
      auto r = store->UpsertRatings(
          absl::MakeConstSpan(all).subspan(static_cast<size_t>(b), kBatch));
      EXPECT_TRUE(r.ok()) << r.status();
      if (!r.ok()) break;
      inserted += r->inserted;
      replaced += r->replaced;
    }
    return ms(std::chrono::steady_clock::now() - start);
  };
  int64_t inserted = 0;
  int64_t replaced = 0;
  const double fresh_ms = upsert_all(rows, inserted, replaced);
  EXPECT_EQ(inserted, kRows);
  EXPECT_EQ(replaced, 0);
  inserted = replaced = 0;
  const double again_ms = upsert_all(rows, inserted, replaced);
  EXPECT_EQ(inserted, 0);
  EXPECT_EQ(replaced, kRows);
  inserted = replaced = 0;
  const double known_ms = upsert_all(more, inserted, replaced);
  EXPECT_EQ(inserted + replaced, kRows);
  const auto snap_start = std::chrono::steady_clock::now();
  ASSERT_OK_AND_ASSIGN(Snapshot snap, store->ReadSnapshot());
  const double snap_ms = ms(std::chrono::steady_clock::now() - snap_start);
  EXPECT_EQ(snap.ratings.size(), static_cast<size_t>(kRows + inserted));
  std::printf(
      "[ PERF     ] upsert %d rows in batches of %d: new %.1f ms, all "
      "replacing %.1f ms, new pairs of known ids %.1f ms; snapshot of %zu: "
      "%.1f ms\n",
      kRows, kBatch, fresh_ms, again_ms, known_ms, snap.ratings.size(),
      snap_ms);
  EXPECT_LT(fresh_ms, 5000.0);
  EXPECT_LT(again_ms, 5000.0);
  EXPECT_LT(known_ms, 5000.0);
  EXPECT_LT(snap_ms, 2000.0);
}

// ---------------------------------------------------------------------------
// PostgreSQL-only behaviour (run by tests/store/pg_test.sh: ctest
// store.postgres; skipped without RBMREC_TEST_PG).

// A raw libpq connection for poking at a database behind the Store's back.
class RawPg {
 public:
  explicit RawPg(const std::string& uri) : conn_(PQconnectdb(uri.c_str())) {}
  ~RawPg() { PQfinish(conn_); }
  bool ok() const { return PQstatus(conn_) == CONNECTION_OK; }
  // Runs `sql`; returns "" on success, else the error message.
  std::string Exec(const std::string& sql) {
    PGresult* r = PQexec(conn_, sql.c_str());
    const ExecStatusType st = PQresultStatus(r);
    std::string err = (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
                          ? ""
                          : std::string(PQresultErrorMessage(r));
    PQclear(r);
    return err;
  }

 private:
  PGconn* conn_;
};

class PostgresStoreTest : public testing::Test {
 protected:
  void SetUp() override {
    if (testing_util::TestPgUri().empty()) {
      GTEST_SKIP() << "RBMREC_TEST_PG is not set: run under "
                      "tests/store/pg_test.sh (ctest store.postgres)";
    }
    ASSERT_OK_AND_ASSIGN(uri_, testing_util::TestPgDatabase(dir_.path()));
  }
  ScratchDir dir_;
  std::string uri_;
};

TEST(PostgresStoreOpenTest, RedactUriHidesEveryFormOfPassword) {
  using internal::RedactUri;
  EXPECT_EQ(RedactUri("postgresql://u:pw@h/db"), "postgresql://u:***@h/db");
  EXPECT_EQ(RedactUri("postgresql://u@h/db?password=pw&port=5"),
            "postgresql://u@h/db?password=***&port=5");
  EXPECT_EQ(RedactUri("postgresql:///db?sslmode=require&password=pw"),
            "postgresql:///db?sslmode=require&password=***");
  EXPECT_EQ(RedactUri("host=h password='p w\\'x' dbname=d"),
            "host=h password=*** dbname=d");
  EXPECT_EQ(RedactUri("host=h password=pw"), "host=h password=***");
  // Not a password parameter: left alone.
  EXPECT_EQ(RedactUri("postgresql://h/db?application_name=password=x"),
            "postgresql://h/db?application_name=password=x");
  EXPECT_EQ(RedactUri("./rbmrec.db"), "./rbmrec.db");
}

TEST(PostgresStoreOpenTest, UnreachableServerIsUnavailableAndHidesPassword) {
  // A socket directory that does not exist: no server to reach.
  auto store = Store::Open(
      "postgresql://rbmrec:s3cret@/rbmrec?host=/"
      "nonexistent_rbmrec_dir&port=1");
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kUnavailable)
      << store.status();
  EXPECT_THAT(std::string(store.status().message()),
              HasSubstr("postgresql://rbmrec:***@"));
  EXPECT_THAT(std::string(store.status().message()),
              ::testing::Not(HasSubstr("s3cret")));
  // A password passed as a parameter is hidden too.
  store = Store::Open(
      "postgresql://rbmrec@/rbmrec?host=/nonexistent_rbmrec_dir&password="
      "s3cret&port=1");
  ASSERT_FALSE(store.ok());
  EXPECT_THAT(std::string(store.status().message()), HasSubstr("password=***"));
  EXPECT_THAT(std::string(store.status().message()),
              ::testing::Not(HasSubstr("s3cret")));
  // postgres:// is the other accepted prefix.
  EXPECT_EQ(
      Store::Open("postgres:///x?host=/nonexistent_rbmrec_dir").status().code(),
      absl::StatusCode::kUnavailable);
}

TEST(PostgresStoreOpenTest, OptionsThatDoNotApplyAreRejected) {
  StoreOptions max;
  max.max_bytes = 1 << 20;
  auto s1 = Store::Open("postgresql:///x?host=/nonexistent_rbmrec_dir", max);
  EXPECT_EQ(s1.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s1.status().message()), HasSubstr("max_bytes"));
  StoreOptions neg;
  neg.busy_timeout_ms = -1;
  EXPECT_EQ(Store::Open("postgresql:///x?host=/nonexistent_rbmrec_dir", neg)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(PostgresStoreTest, ReadOnlyReadsAndRefusesWrites) {
  StoreOptions ro;
  ro.read_only = true;
  // No schema yet: read-only does not create it.
  EXPECT_EQ(Store::Open(uri_, ro).status().code(),
            absl::StatusCode::kFailedPrecondition);
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> rw, Store::Open(uri_));
    ASSERT_OK(rw->UpsertRatings({R("u", "a", 4)}).status());
  }
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, Store::Open(uri_, ro));
  ASSERT_OK_AND_ASSIGN(std::vector<UserRating> u, store->GetUserRatings("u"));
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(store->UpsertRatings({R("u", "b", 1)}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store->PutItems({ItemRow{"x", "X", "", {}, false}}).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store->InsertModel(ModelInfo{}, "blob", true).status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_OK_AND_ASSIGN(Stats stats, store->GetStats());
  EXPECT_EQ(stats.ratings, 1);
}

TEST_F(PostgresStoreTest, NewerSchemaVersionIsRejected) {
  { ASSERT_OK(Store::Open(uri_).status()); }
  RawPg raw(uri_);
  ASSERT_TRUE(raw.ok());
  ASSERT_EQ(raw.Exec("UPDATE schema_version SET version = 99"), "");
  auto store = Store::Open(uri_);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(store.status().message()), HasSubstr("newer"));
}

// A version 1 database (made from a new one: version 1 is version 2 without
// the metrics columns) whose metrics JSON is copied into the columns.
TEST_F(PostgresStoreTest, MigratesTheMetricsOfAVersion1DatabaseIntoColumns) {
  { ASSERT_OK(Store::Open(uri_).status()); }
  {
    RawPg raw(uri_);
    ASSERT_TRUE(raw.ok());
    ASSERT_EQ(raw.Exec(R"sql(
ALTER TABLE models DROP COLUMN validation_rmse, DROP COLUMN epochs,
  DROP COLUMN train_seconds;
ALTER TABLE items DROP COLUMN categories, DROP COLUMN hidden;
DROP TABLE views;
UPDATE schema_version SET version = 1;
INSERT INTO models(created_unix_ms, kind, n_users, n_items, n_ratings,
                   metrics, size_bytes, pinned, model) VALUES
  (1001, 'full', 2, 2, 3, '{"validation_rmse":0.87654321012345678,'
   || '"epochs":12,"train_seconds":3.250,"base_version":0}', 3, false, 'ab1'),
  (1002, 'online', 2, 2, 3, '{"validation_rmse":0,"epochs":0,'
   || '"train_seconds":0,"base_version":1}', 3, false, 'ab2'),
  (1003, 'full', 2, 2, 3, NULL, 3, true, 'ab3'),
  (1004, 'full', 2, 2, 3, '{"rmse": 0.9}', 3, false, 'ab4'),
  (1005, 'full', 2, 2, 3, '{"validation_rmse":"0.5","epochs":7}', 3, false,
   'ab5');
INSERT INTO meta VALUES('active_model_version', '1');
)sql"),
              "");
  }
  // Read-only: not migrated, a clear error.
  StoreOptions ro;
  ro.read_only = true;
  EXPECT_EQ(Store::Open(uri_, ro).status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, Store::Open(uri_));
  ASSERT_OK_AND_ASSIGN(std::vector<ModelInfo> models, store->ListModels());
  ASSERT_EQ(models.size(), 5u);
  const ModelInfo& v1 = models[4];
  EXPECT_EQ(v1.version, 1);
  EXPECT_TRUE(v1.active);
  EXPECT_EQ(v1.validation_rmse, 0.87654321012345678);
  EXPECT_EQ(v1.epochs, 12);
  EXPECT_EQ(v1.train_seconds, 3.25);
  EXPECT_THAT(v1.metrics_json, HasSubstr("\"base_version\":0"));
  EXPECT_EQ(models[3].kind, "online");
  EXPECT_EQ(models[3].validation_rmse, 0);
  EXPECT_TRUE(models[2].pinned);
  EXPECT_EQ(models[2].validation_rmse, 0);  // no metrics
  EXPECT_EQ(models[1].validation_rmse, 0);  // other keys only
  EXPECT_EQ(models[1].metrics_json, R"({"rmse": 0.9})");
  EXPECT_EQ(models[0].validation_rmse, 0);  // not a number
  EXPECT_EQ(models[0].epochs, 7);
  ASSERT_OK_AND_ASSIGN(std::string blob, store->LoadModelBlob(5));
  EXPECT_EQ(blob, "ab5");
  // Reopening does not migrate again.
  store.reset();
  ASSERT_OK_AND_ASSIGN(store, Store::Open(uri_));
  ASSERT_OK_AND_ASSIGN(models, store->ListModels());
  EXPECT_EQ(models[4].epochs, 12);
}

TEST_F(PostgresStoreTest, MigratesAVersion2DatabaseToTheItemCatalogue) {
  { ASSERT_OK(Store::Open(uri_).status()); }
  {
    RawPg raw(uri_);
    ASSERT_TRUE(raw.ok());
    ASSERT_EQ(raw.Exec(R"sql(
ALTER TABLE items DROP COLUMN categories, DROP COLUMN hidden;
DROP TABLE views;
UPDATE schema_version SET version = 2;
INSERT INTO items(ext_id, title) VALUES('x', 'The X'), ('y', NULL);
)sql"),
              "");
  }
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, Store::Open(uri_));
  ASSERT_OK_AND_ASSIGN(std::vector<CatalogueRow> cat, store->ReadCatalogue());
  EXPECT_TRUE(cat.empty());  // no categories, none hidden
  const std::vector<std::string> query = {"x"};
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> titles,
                       store->GetTitles(query));
  EXPECT_THAT(titles, ElementsAre("The X"));
  const std::vector<ItemRow> items = {{"y", "Y", "", {"Drama"}, true}};
  ASSERT_OK(store->PutItems(items));
  ASSERT_OK_AND_ASSIGN(cat, store->ReadCatalogue());
  ASSERT_EQ(cat.size(), 1u);
  EXPECT_THAT(cat[0].categories, ElementsAre("Drama"));
  EXPECT_TRUE(cat[0].hidden);
  // Migrated: a read-only open (which never migrates) now succeeds.
  StoreOptions ro;
  ro.read_only = true;
  EXPECT_TRUE(Store::Open(uri_, ro).ok());
}

TEST_F(PostgresStoreTest, MigratesAVersion3DatabaseToViews) {
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, Store::Open(uri_));
    ASSERT_TRUE(store->UpsertRatings({R("u", "a", 4)}).ok());
  }
  {
    RawPg raw(uri_);
    ASSERT_TRUE(raw.ok());
    ASSERT_EQ(raw.Exec("DROP TABLE views; "
                       "UPDATE schema_version SET version = 3;"),
              "");
  }
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, Store::Open(uri_));
  ASSERT_OK_AND_ASSIGN(Stats stats, store->GetStats());
  EXPECT_EQ(stats.ratings, 1);
  EXPECT_EQ(stats.views, 0);
  ASSERT_TRUE(store->UpsertRatings({View("u", "b", 9)}).ok());
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> uv, store->GetUserViews("u"));
  EXPECT_THAT(uv, ElementsAre("b"));
}

TEST_F(PostgresStoreTest, ConcurrentOpensOfANewDatabaseCreateTheSchemaOnce) {
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      auto store = Store::Open(uri_);
      if (!store.ok()) {
        ADD_FAILURE() << store.status();
        ++failures;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_F(PostgresStoreTest, LockedTableIsUnavailableDatabaseLockedUntilReleased) {
  StoreOptions options;
  options.busy_timeout_ms = 200;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store,
                       Store::Open(uri_, options));
  ASSERT_OK(store->UpsertRatings({R("u", "a", 4)}).status());
  RawPg raw(uri_);
  ASSERT_TRUE(raw.ok());
  ASSERT_EQ(raw.Exec("BEGIN; LOCK TABLE ratings IN ACCESS EXCLUSIVE MODE"), "");
  auto locked = store->UpsertRatings({R("u", "b", 2)});
  ASSERT_FALSE(locked.ok());
  EXPECT_EQ(locked.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(ReasonOf(locked.status()), kReasonDatabaseLocked);
  ASSERT_EQ(raw.Exec("ROLLBACK"), "");
  ASSERT_OK_AND_ASSIGN(UpsertResult r, store->UpsertRatings({R("u", "b", 2)}));
  EXPECT_EQ(r.inserted, 1);
  ASSERT_OK_AND_ASSIGN(std::vector<UserRating> u, store->GetUserRatings("u"));
  EXPECT_EQ(u.size(), 2u);  // the failed batch stored nothing
}

TEST_F(PostgresStoreTest, ReconnectsAfterTheServerRestarts) {
  const char* ctl = std::getenv("RBMREC_TEST_PG_RESTART");
  if (ctl == nullptr || *ctl == '\0') {
    GTEST_SKIP() << "RBMREC_TEST_PG_RESTART (a command that restarts the "
                    "server) is not set; pg_test.sh sets it";
  }
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, Store::Open(uri_));
  ASSERT_OK(store->UpsertRatings({R("u", "a", 4)}).status());
  ASSERT_OK(store->GetUserRatings("u").status());  // a pooled reader
  ASSERT_EQ(std::system(ctl), 0) << ctl;
  // The calls that find their connection broken fail with Unavailable...
  auto w = store->UpsertRatings({R("u", "b", 3)});
  if (!w.ok()) {
    EXPECT_EQ(w.status().code(), absl::StatusCode::kUnavailable) << w.status();
  }
  auto rd = store->GetUserRatings("u");
  if (!rd.ok()) {
    EXPECT_EQ(rd.status().code(), absl::StatusCode::kUnavailable)
        << rd.status();
  }
  EXPECT_FALSE(w.ok() && rd.ok()) << "no call noticed the restart";
  // ... and the next ones reconnect.
  ASSERT_OK_AND_ASSIGN(UpsertResult r, store->UpsertRatings({R("u", "c", 2)}));
  EXPECT_EQ(r.new_users, 0);
  ASSERT_OK_AND_ASSIGN(std::vector<UserRating> u, store->GetUserRatings("u"));
  EXPECT_EQ(u.size(), w.ok() ? 3u : 2u);
  ASSERT_OK_AND_ASSIGN(Snapshot snap, store->ReadSnapshot());
  EXPECT_EQ(snap.users.size(), 1u);
}

// ---------------------------------------------- Sharing (PostgreSQL only)

namespace sharing {

// Waits up to ~5 s until `feed` has delivered at least `n` records (or a
// models signal when n == 0), collecting them.
ChangeBatch WaitFor(ChangeFeed& feed, size_t n) {
  ChangeBatch all;
  for (int i = 0; i < 50; ++i) {
    auto b = feed.Wait(100);
    EXPECT_TRUE(b.ok()) << b.status();
    if (!b.ok()) break;
    all.records.insert(all.records.end(), b->records.begin(), b->records.end());
    all.models_changed |= b->models_changed;
    all.unknown_changes |= b->unknown_changes;
    if (n > 0 ? all.records.size() >= n : all.models_changed) break;
  }
  return all;
}

TEST_F(PostgresStoreTest, SharedStoresSeeEachOthersWritesAndDeletes) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> a, Store::Open(uri_));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> b, Store::Open(uri_));
  EXPECT_TRUE(a->Shared());
  ASSERT_OK(a->UpsertRatings({R("u1", "i1", 4), R("u2", "i2", 3)}).status());
  // b has never seen u1 / i1 / i2: no stale id map.
  ASSERT_OK_AND_ASSIGN(UpsertResult rb,
                       b->UpsertRatings({R("u1", "i1", 5), R("u1", "i3", 1)}));
  EXPECT_EQ(rb.new_users, 0);
  EXPECT_EQ(rb.new_items, 1);
  EXPECT_EQ(rb.replaced, 1);
  ASSERT_TRUE(rb.previous[0].has_value());
  EXPECT_EQ(*rb.previous[0], 4);
  // a deletes u1, b writes u1 again: a new user, nothing dangling.
  ASSERT_OK_AND_ASSIGN(int64_t gone, a->DeleteUser("u1"));
  EXPECT_EQ(gone, 2);
  ASSERT_OK_AND_ASSIGN(UpsertResult again,
                       b->UpsertRatings({R("u1", "i2", 2)}));
  EXPECT_EQ(again.new_users, 1);
  EXPECT_EQ(again.inserted, 1);
  ASSERT_OK_AND_ASSIGN(Snapshot snap, a->ReadSnapshot());
  EXPECT_EQ(snap.ratings.size(), 2u);
  ASSERT_OK_AND_ASSIGN(std::vector<UserRating> u1, a->GetUserRatings("u1"));
  ASSERT_EQ(u1.size(), 1u);
  EXPECT_EQ(u1[0].item, "i2");
  // Items from the other store: PutItems updates in place, no new index.
  ASSERT_OK(b->PutItems({ItemRow{"i1", "One", "", {}, false}}));
  ASSERT_OK_AND_ASSIGN(Stats stats, a->GetStats());
  EXPECT_EQ(stats.items, 3);
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> titles, a->GetTitles({"i1"}));
  EXPECT_EQ(titles[0], "One");
  ASSERT_OK_AND_ASSIGN(int64_t deleted, b->DeleteRatings("u2", {"i2", "zz"}));
  EXPECT_EQ(deleted, 1);
}

TEST_F(PostgresStoreTest, ConcurrentUpsertsAndDeletesOfOneUserLeaveNoOrphans) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> a, Store::Open(uri_));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> b, Store::Open(uri_));
  std::atomic<bool> stop{false};
  std::atomic<int> writes{0};
  std::thread writer([&] {
    for (int i = 0; i < 200 && !stop; ++i) {
      auto r = a->UpsertRatings(
          {R("hot", "i" + std::to_string(i % 7), 1 + i % 5),
           R("hot", "j" + std::to_string(i % 3), 2), R("cold", "i1", 3)});
      if (r.ok()) ++writes;
    }
  });
  for (int i = 0; i < 100; ++i) {
    auto d = b->DeleteUser("hot");
    if (!d.ok()) {
      EXPECT_EQ(d.status().code(), absl::StatusCode::kNotFound);
    }
  }
  writer.join();
  EXPECT_GT(writes.load(), 100);
  // ReadSnapshot fails with DataLoss on a rating of a missing user.
  ASSERT_OK_AND_ASSIGN(Snapshot snap, a->ReadSnapshot());
  RawPg raw(uri_);
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(raw.Exec("DO $$ BEGIN IF EXISTS (SELECT 1 FROM ratings r WHERE "
                     "NOT EXISTS (SELECT 1 FROM users u WHERE u.idx = "
                     "r.user_idx)) THEN RAISE EXCEPTION 'orphans'; END IF; "
                     "END $$"),
            "");
}

TEST_F(PostgresStoreTest, ChangeFeedDeliversOtherStoresCommittedChanges) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> a, Store::Open(uri_));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> b, Store::Open(uri_));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ChangeFeed> feed, b->Subscribe());
  // b's own writes are not delivered to b's feed.
  ASSERT_OK(b->UpsertRatings({R("own", "i1", 1)}).status());
  ASSERT_OK(a->UpsertRatings({R("u", "i1", 4), R("u", "i2", 5)}).status());
  ASSERT_OK(a->UpsertRatings({R("u", "i1", 2)}).status());
  ASSERT_OK(a->DeleteRatings("u", {"i2"}).status());
  ASSERT_OK(a->PutItems({ItemRow{"i9", "Nine", "", {}, false}}));
  // A failed (rolled back) write announces nothing.
  EXPECT_FALSE(a->UpsertRatings({R("v", "i1", 3), R("", "i1", 3)}).ok());
  ASSERT_OK(a->DeleteUser("u").status());
  ChangeBatch got = WaitFor(*feed, 7);
  using K = ChangeRecord::Kind;
  ASSERT_EQ(got.records.size(), 7u);
  EXPECT_EQ(got.records[0].kind, K::kUpsert);
  EXPECT_EQ(got.records[0].user, "u");
  EXPECT_FALSE(got.records[0].previous.has_value());
  EXPECT_EQ(got.records[2].item, "i1");
  EXPECT_EQ(got.records[2].rating, 2);
  EXPECT_EQ(got.records[2].previous, std::optional<double>(4));
  EXPECT_EQ(got.records[3].kind, K::kDelete);
  EXPECT_EQ(got.records[3].item, "i2");
  EXPECT_EQ(got.records[3].rating, 5);
  EXPECT_EQ(got.records[4].kind, K::kItem);
  EXPECT_EQ(got.records[4].item, "i9");
  EXPECT_EQ(got.records[5].kind, K::kDelete);  // DeleteUser: its rating
  EXPECT_EQ(got.records[5].rating, 2);
  EXPECT_EQ(got.records[6].kind, K::kUserDeleted);
  EXPECT_FALSE(got.models_changed);
  // Activations from the other store raise models_changed.
  ASSERT_OK_AND_ASSIGN(int64_t v, a->InsertModel(ModelInfo{}, "m", true));
  EXPECT_TRUE(WaitFor(*feed, 0).models_changed);
  ASSERT_OK(a->InsertModel(ModelInfo{}, "m2", false).status());
  ASSERT_OK(a->ActivateModel(v));
  EXPECT_TRUE(WaitFor(*feed, 0).models_changed);
  // Nothing else is pending.
  ASSERT_OK_AND_ASSIGN(ChangeBatch rest, feed->Wait(200));
  EXPECT_TRUE(rest.records.empty());
  EXPECT_FALSE(rest.models_changed);
}

TEST_F(PostgresStoreTest, OneLeaderAtATimeAndTheLeaseGoesWithItsHolder) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> a, Store::Open(uri_));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> b, Store::Open(uri_));
  ASSERT_OK_AND_ASSIGN(std::string none, a->LeaderAddress());
  EXPECT_EQ(none, "");
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LeaderLease> la, a->TryLead("a:1"));
  ASSERT_NE(la, nullptr);
  ASSERT_OK(la->Check());
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LeaderLease> lb, b->TryLead("b:2"));
  EXPECT_EQ(lb, nullptr);
  ASSERT_OK_AND_ASSIGN(std::string leader, b->LeaderAddress());
  EXPECT_EQ(leader, "a:1");
  la.reset();  // a steps down (or dies): the lock goes with its session
  std::unique_ptr<LeaderLease> next;
  for (int i = 0; i < 50 && next == nullptr; ++i) {
    ASSERT_OK_AND_ASSIGN(next, b->TryLead("b:2"));
    if (next == nullptr)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_NE(next, nullptr);
  ASSERT_OK_AND_ASSIGN(leader, a->LeaderAddress());
  EXPECT_EQ(leader, "b:2");
}

TEST(SqliteSharingTest, SqliteIsNotSharedAndSaysSo) {
  ScratchDir dir;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> s,
                       Store::Open(dir.path() + "/x.db"));
  EXPECT_FALSE(s->Shared());
  EXPECT_EQ(s->Subscribe().status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(s->TryLead("x").status().code(), absl::StatusCode::kUnimplemented);
}

}  // namespace sharing
}  // namespace
}  // namespace rbmrec::store
