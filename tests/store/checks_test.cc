#include "store/checks.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
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

TEST(StoreChecksTest, IdsHoldOnlyOrdinaryCodePoints) {
  struct Case {
    std::string id;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"a\x1b[2J",
       "row 0: user id contains the control character U+001B at "
       "byte 1"},
      {"c1\xc2\x9b",
       "row 0: user id contains the control character U+009B "
       "at byte 2"},
      {"l\xe2\x80\xa8",
       "row 0: user id contains the line separator U+2028 "
       "at byte 1"},
      {"p\xe2\x80\xa9",
       "row 0: user id contains the paragraph separator "
       "U+2029 at byte 1"},
      {"abc\xe2\x80\xae"
       "evil",
       "row 0: user id contains the bidirectional formatting character "
       "U+202E at byte 3"},
      {"\xe2\x81\xa6x",
       "row 0: user id contains the bidirectional "
       "formatting character U+2066 at byte 0"},
      {"m\xe2\x80\x8f",
       "row 0: user id contains the bidirectional mark "
       "U+200F at byte 1"},
      {"a\xd8\x9c",
       "row 0: user id contains the bidirectional mark U+061C "
       "at byte 1"},
      {"caf\xe9", "row 0: user id contains invalid UTF-8 at byte 3"},
  };
  for (const Case& c : cases) {
    std::vector<RatingRow> rows(1);
    rows[0].user = c.id;
    rows[0].item = "i";
    rows[0].rating = 4;
    const absl::Status s = CheckRatingRows(rows);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_EQ(s.message(), c.message);
    EXPECT_EQ(CheckId(c.id, "item", 4, "item").message(),
              absl::StrCat("item 4: item id contains ",
                           c.message.substr(c.message.find("contains ") + 9)));
  }
  // Other scripts, emoji and right-to-left letters are ordinary.
  for (const std::string ok :
       {"caf\xc3\xa9", "\xd7\xa9\xd7\x9c\xd7\x95\xd7\x9d", "\xf0\x9f\x98\x80",
        "a b"}) {
    EXPECT_TRUE(CheckId(ok, "row", 0, "user").ok()) << ok;
  }
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
