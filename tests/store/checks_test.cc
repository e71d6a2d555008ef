#include "store/checks.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace rbmrec::store::internal {
namespace {

TEST(StoreChecksTest, RowsNameTheFirstBadRowAndField) {
  std::vector<RatingRow> rows(3);
  for (RatingRow& r : rows) {
    r.user = "u";
    r.item = "i";
    r.rating = 4;
  }
  EXPECT_TRUE(CheckRatingRows(rows).ok());
  rows[1].item = "";
  EXPECT_EQ(CheckRatingRows(rows).message(), "row 1: empty item id");
  rows[1].item = std::string(kMaxIdBytes + 1, 'x');
  EXPECT_EQ(CheckRatingRows(rows).message(),
            "row 1: item id is 257 bytes long, the limit is 256");
  rows[1].item = std::string(kMaxIdBytes, 'x');  // at the limit: fine
  rows[2].rating = std::nan("");
  const absl::Status s = CheckRatingRows(rows);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "row 2: rating is not a finite number (nan)");
}

TEST(StoreChecksTest, RetentionPolicyCountsAreNotNegative) {
  EXPECT_TRUE(CheckRetentionPolicy({0, 0}).ok());
  EXPECT_EQ(CheckRetentionPolicy({-1, 2}).message(),
            "retention keep_full must be >= 0, got -1");
  EXPECT_EQ(CheckRetentionPolicy({3, -2}).message(),
            "retention keep_online must be >= 0, got -2");
}

TEST(StoreChecksTest, RetentionKeepsNewestOfEachKindPinnedAndActive) {
  // Versions 9..1, newest first: online 9, 8, 6, 5; full (or any other
  // kind) 7, 4, 3, 2, 1; 2 pinned, 1 active.
  RetentionWalk walk({/*keep_full=*/2, /*keep_online=*/1}, /*active=*/1);
  walk.Visit(9, kModelKindOnline, 90, false);  // newest online: kept
  walk.Visit(8, kModelKindOnline, 80, false);
  walk.Visit(7, kModelKindFull, 70, false);  // newest full: kept
  walk.Visit(6, kModelKindOnline, 60, false);
  walk.Visit(5, kModelKindOnline, 50, true);  // pinned
  walk.Visit(4, "custom", 40, false);         // counts as full: kept
  walk.Visit(3, kModelKindFull, 30, false);
  walk.Visit(2, kModelKindFull, 20, true);   // pinned
  walk.Visit(1, kModelKindFull, 10, false);  // active
  EXPECT_EQ(walk.result().deleted_versions, (std::vector<int64_t>{8, 6, 3}));
  EXPECT_EQ(walk.result().freed_bytes, 80 + 60 + 30);
}

TEST(StoreChecksTest, RetentionOfZeroKeepsOnlyPinnedAndActive) {
  RetentionWalk walk({0, 0}, std::nullopt);
  walk.Visit(3, kModelKindFull, 3, false);
  walk.Visit(2, kModelKindOnline, 2, true);
  walk.Visit(1, kModelKindFull, 1, false);
  EXPECT_EQ(walk.result().deleted_versions, (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(walk.result().freed_bytes, 4);
}

}  // namespace
}  // namespace rbmrec::store::internal
