#include "core/ratings.h"

#include <cstdint>
#include <map>
#include <random>
#include <utility>
#include <vector>

#include "core/trainer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rbmrec {
namespace {

using ::testing::ElementsAre;

Rating R(int32_t user, int32_t item, int k) {
  Rating r;
  r.user = user;
  r.item = item;
  r.k = static_cast<uint8_t>(k);
  return r;
}

// Checks the CSR invariants: offsets of size rows+1 from 0 to nnz, cols in
// range and strictly increasing within each row.
void ExpectWellFormed(const SparseRatings& s) {
  ASSERT_EQ(s.offsets.size(), static_cast<size_t>(s.rows) + 1);
  EXPECT_EQ(s.offsets.front(), 0);
  EXPECT_EQ(s.offsets.back(), s.nnz());
  EXPECT_EQ(s.col.size(), s.k.size());
  for (int32_t r = 0; r < s.rows; ++r) {
    ASSERT_LE(s.offsets[r], s.offsets[r + 1]);
    for (int64_t i = s.offsets[r]; i < s.offsets[r + 1]; ++i) {
      ASSERT_GE(s.col[i], 0);
      ASSERT_LT(s.col[i], s.cols);
      if (i > s.offsets[r]) {
        ASSERT_LT(s.col[i - 1], s.col[i]);
      }
    }
  }
}

std::vector<std::pair<int32_t, int>> Row(const SparseRatings& s, int32_t r) {
  std::vector<std::pair<int32_t, int>> out;
  for (int64_t i = s.offsets[r]; i < s.offsets[r + 1]; ++i) {
    out.emplace_back(s.col[i], s.k[i]);
  }
  return out;
}

using Entry = std::pair<int32_t, int>;

TEST(SparseRatingsTest, DefaultIsEmpty) {
  const SparseRatings s;
  EXPECT_EQ(s.rows, 0);
  EXPECT_EQ(s.nnz(), 0);
  EXPECT_EQ(s.offsets.size(), 1u);
}

TEST(SparseRatingsTest, EmptyInputKeepsShape) {
  const SparseRatings s = SparseRatings::FromRatings(3, 4, {});
  EXPECT_EQ(s.rows, 3);
  EXPECT_EQ(s.cols, 4);
  EXPECT_EQ(s.nnz(), 0);
  EXPECT_THAT(s.offsets, ElementsAre(0, 0, 0, 0));
  ExpectWellFormed(s);
}

TEST(SparseRatingsTest, GroupsByRowAndSortsByCol) {
  const std::vector<Rating> ratings = {R(2, 3, 4), R(0, 2, 1), R(2, 0, 2),
                                       R(0, 1, 3), R(2, 1, 0)};
  const SparseRatings s = SparseRatings::FromRatings(4, 5, ratings);
  ExpectWellFormed(s);
  EXPECT_EQ(s.rows, 4);
  EXPECT_EQ(s.cols, 5);
  EXPECT_EQ(s.nnz(), 5);
  EXPECT_THAT(s.offsets, ElementsAre(0, 2, 2, 5, 5));
  EXPECT_THAT(Row(s, 0), ElementsAre(Entry(1, 3), Entry(2, 1)));
  EXPECT_TRUE(Row(s, 1).empty());
  EXPECT_THAT(Row(s, 2), ElementsAre(Entry(0, 2), Entry(1, 0), Entry(3, 4)));
  EXPECT_EQ(s.RowSize(0), 2);
  EXPECT_EQ(s.RowSize(1), 0);
  EXPECT_EQ(s.RowSize(2), 3);
  EXPECT_EQ(s.RowSize(3), 0);
}

TEST(SparseRatingsTest, LaterDuplicateReplacesEarlier) {
  const std::vector<Rating> ratings = {R(0, 1, 1), R(1, 1, 2), R(0, 0, 0),
                                       R(0, 1, 4), R(1, 1, 3), R(0, 1, 2)};
  const SparseRatings s = SparseRatings::FromRatings(2, 2, ratings);
  ExpectWellFormed(s);
  EXPECT_EQ(s.nnz(), 3);
  EXPECT_THAT(Row(s, 0), ElementsAre(Entry(0, 0), Entry(1, 2)));
  EXPECT_THAT(Row(s, 1), ElementsAre(Entry(1, 3)));
}

// Without values (k empty: which entries exist), the transpose has none.
TEST(SparseRatingsTest, TransposeWithoutValuesHasNone) {
  SparseRatings s;
  s.rows = 2;
  s.cols = 3;
  s.offsets = {0, 2, 3};
  s.col = {0, 2, 2};
  const SparseRatings t = s.Transpose();
  EXPECT_EQ(t.rows, 3);
  EXPECT_EQ(t.offsets, (std::vector<int64_t>{0, 1, 1, 3}));
  EXPECT_EQ(t.col, (std::vector<int32_t>{0, 0, 1}));
  EXPECT_TRUE(t.k.empty());
}

TEST(SparseRatingsTest, TransposeSwapsRowsAndCols) {
  const std::vector<Rating> ratings = {R(0, 2, 1), R(1, 0, 2), R(1, 2, 3),
                                       R(2, 2, 4)};
  const SparseRatings s = SparseRatings::FromRatings(3, 4, ratings);
  const SparseRatings t = s.Transpose();
  ExpectWellFormed(t);
  EXPECT_EQ(t.rows, 4);
  EXPECT_EQ(t.cols, 3);
  EXPECT_EQ(t.nnz(), 4);
  EXPECT_THAT(Row(t, 0), ElementsAre(Entry(1, 2)));
  EXPECT_TRUE(Row(t, 1).empty());
  EXPECT_THAT(Row(t, 2), ElementsAre(Entry(0, 1), Entry(1, 3), Entry(2, 4)));
  EXPECT_TRUE(Row(t, 3).empty());

  const SparseRatings back = t.Transpose();
  EXPECT_EQ(back.rows, s.rows);
  EXPECT_EQ(back.cols, s.cols);
  EXPECT_EQ(back.offsets, s.offsets);
  EXPECT_EQ(back.col, s.col);
  EXPECT_EQ(back.k, s.k);
}

TEST(SparseRatingsTest, MatchesReferenceOnRandomData) {
  std::mt19937 rng(42);
  const int32_t rows = 300;
  const int32_t cols = 200;
  std::uniform_int_distribution<int32_t> user(0, rows - 1);
  std::uniform_int_distribution<int32_t> item(0, cols - 1);
  std::uniform_int_distribution<int> k(0, 9);
  std::vector<Rating> ratings;
  std::map<std::pair<int32_t, int32_t>, int> reference;  // last one wins
  for (int i = 0; i < 30000; ++i) {  // dense enough to have many duplicates
    const Rating r = R(user(rng), item(rng), k(rng));
    ratings.push_back(r);
    reference[{r.user, r.item}] = r.k;
  }
  const SparseRatings s = SparseRatings::FromRatings(rows, cols, ratings);
  ExpectWellFormed(s);
  ASSERT_EQ(s.nnz(), static_cast<int64_t>(reference.size()));
  auto it = reference.begin();
  for (int32_t r = 0; r < rows; ++r) {
    for (int64_t i = s.offsets[r]; i < s.offsets[r + 1]; ++i, ++it) {
      ASSERT_EQ(it->first.first, r);
      ASSERT_EQ(it->first.second, s.col[i]);
      ASSERT_EQ(it->second, s.k[i]);
    }
  }

  const SparseRatings t = s.Transpose();
  ExpectWellFormed(t);
  ASSERT_EQ(t.nnz(), s.nnz());
  for (int32_t c = 0; c < t.rows; ++c) {
    for (int64_t i = t.offsets[c]; i < t.offsets[c + 1]; ++i) {
      ASSERT_EQ(t.k[i], reference.at({t.col[i], c}));
    }
  }
}

TEST(SparseRatingsTest, DatasetByUser) {
  Dataset data;
  data.users.GetOrAdd("alice");
  data.users.GetOrAdd("bob");
  data.items.GetOrAdd("m1");
  data.items.GetOrAdd("m2");
  data.items.GetOrAdd("m3");
  data.ratings = {R(1, 2, 4), R(0, 0, 1), R(1, 0, 3)};
  const SparseRatings s = data.ByUser();
  ExpectWellFormed(s);
  EXPECT_EQ(s.rows, 2);
  EXPECT_EQ(s.cols, 3);
  EXPECT_THAT(Row(s, 0), ElementsAre(Entry(0, 1)));
  EXPECT_THAT(Row(s, 1), ElementsAre(Entry(0, 3), Entry(2, 4)));
}

// Merge gives back what CarveValidation split.
TEST(SparseRatings, MergeOfTheValidationSplitIsTheWhole) {
  std::vector<Rating> ratings;
  std::mt19937 gen(5);
  for (int n = 0; n < 400; ++n) {
    ratings.push_back(R(static_cast<int32_t>(gen() % 30),
                        static_cast<int32_t>(gen() % 40),
                        static_cast<int>(gen() % 5)));
  }
  const SparseRatings whole = SparseRatings::FromRatings(30, 40, ratings);
  SparseRatings train, valid;
  CarveValidation(whole, 0.3, 9, &train, &valid);
  ASSERT_GT(valid.nnz(), 0);
  const SparseRatings merged = SparseRatings::Merge(train, valid);
  ExpectWellFormed(merged);
  EXPECT_EQ(merged.offsets, whole.offsets);
  EXPECT_EQ(merged.col, whole.col);
  EXPECT_EQ(merged.k, whole.k);
}

}  // namespace
}  // namespace rbmrec
