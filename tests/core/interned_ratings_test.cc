// core/interned_ratings.h: the compact reader gives the Dataset that
// ReadRatingsFile and DatasetFromRaw give, names the first rating off the
// scale by its line, and maps ids between files.

#include "core/interned_ratings.h"

#include <fstream>
#include <string>
#include <vector>

#include "core/fit.h"
#include "gtest/gtest.h"

namespace rbmrec {
namespace {

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(InternedRatings, SameDatasetAsRawRows) {
  const std::string path =
      WriteFile("interned.csv",
                "user,item,rating\nbob,film-b,4\nann,film-a,1\nbob,film-a,5\n"
                "\"c,d\",film-c,2.5\nann,film-b,1\nbob,film-b,3\n");
  ReadOptions ro;
  ro.format = RatingFormat::kCsv;
  absl::StatusOr<InternedRatings> r = ReadRatingsInterned(path, ro);
  absl::StatusOr<ReadResult> raw = ReadRatingsFile(path, ro);
  ASSERT_TRUE(r.ok() && raw.ok()) << r.status() << raw.status();
  EXPECT_EQ(r->read.header_line, 1);
  EXPECT_TRUE(r->read.rows.empty());
  ASSERT_EQ(r->size(), 6u);
  EXPECT_EQ(r->values, (std::vector<double>{4, 1, 5, 2.5, 3}));
  EXPECT_EQ(r->value_line, (std::vector<int64_t>{2, 3, 4, 5, 7}));
  auto scale = RatingScale::Parse("0.5:5:0.5");
  ASSERT_TRUE(scale.ok());
  auto k = ValueIndices(*r, *scale, path);
  ASSERT_TRUE(k.ok()) << k.status();
  std::vector<int32_t> user_map, item_map;
  const Dataset d =
      DatasetFromInterned(*r, 0, r->size(), *scale, *k, &user_map, &item_map);
  absl::StatusOr<Dataset> want = DatasetFromRaw(raw->rows, *scale, path);
  ASSERT_TRUE(want.ok());
  EXPECT_TRUE(d.users == want->users);
  EXPECT_TRUE(d.items == want->items);
  ASSERT_EQ(d.ratings.size(), want->ratings.size());
  for (size_t i = 0; i < d.ratings.size(); ++i) {
    EXPECT_EQ(d.ratings[i].user, want->ratings[i].user);
    EXPECT_EQ(d.ratings[i].item, want->ratings[i].item);
    EXPECT_EQ(d.ratings[i].k, want->ratings[i].k);
  }
  EXPECT_EQ(d.users.Name(2), "c,d");
  EXPECT_EQ(user_map, (std::vector<int32_t>{0, 1, 2}));
}

TEST(InternedRatings, RangeNumbersIdsByFirstAppearanceInIt) {
  const std::string path =
      WriteFile("range.tsv", "a\tx\t1\nb\ty\t2\nc\tx\t3\nb\tz\t4\n");
  ReadOptions ro;
  ro.format = RatingFormat::kTsv;
  absl::StatusOr<InternedRatings> r = ReadRatingsInterned(path, ro);
  ASSERT_TRUE(r.ok()) << r.status();
  const RatingScale scale;
  auto k = ValueIndices(*r, scale, path);
  ASSERT_TRUE(k.ok());
  std::vector<int32_t> user_map, item_map;
  const Dataset d =
      DatasetFromInterned(*r, 2, 4, scale, *k, &user_map, &item_map);
  EXPECT_EQ(user_map, (std::vector<int32_t>{-1, 1, 0}));  // c, then b
  EXPECT_EQ(item_map, (std::vector<int32_t>{0, -1, 1}));  // x, then z
  ASSERT_EQ(d.ratings.size(), 2u);
  EXPECT_EQ(d.ratings[1].k, 3);
}

TEST(InternedRatings, OffScaleNamesTheLineOfTheFirstOne) {
  const std::string path =
      WriteFile("off.tsv", "a\tx\t3\nb\ty\t9\nc\tz\t7\nd\tw\t9\n");
  ReadOptions ro;
  ro.format = RatingFormat::kTsv;
  absl::StatusOr<InternedRatings> r = ReadRatingsInterned(path, ro);
  ASSERT_TRUE(r.ok()) << r.status();
  auto k = ValueIndices(*r, RatingScale(), "off.tsv");
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(k.status().message().rfind("off.tsv:2: ", 0), 0u)
      << k.status().message();
}

TEST(InternedRatings, MalformedLineFailsLikeReadRatingsFile) {
  const std::string path = WriteFile("bad.tsv", "a\tx\t3\nb\ty\n");
  ReadOptions ro;
  ro.format = RatingFormat::kTsv;
  absl::StatusOr<InternedRatings> r = ReadRatingsInterned(path, ro);
  absl::StatusOr<ReadResult> raw = ReadRatingsFile(path, ro);
  ASSERT_FALSE(r.ok());
  ASSERT_FALSE(raw.ok());
  EXPECT_EQ(r.status(), raw.status());
}

TEST(MapIds, FindsEachIdOrMinusOne) {
  IdMap from, to;
  from.GetOrAdd("a");
  from.GetOrAdd("b");
  to.GetOrAdd("b");
  EXPECT_EQ(MapIds(from, to), (std::vector<int32_t>{-1, 0}));
}

}  // namespace
}  // namespace rbmrec
