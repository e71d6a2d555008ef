// The item catalogue and filters (core/item_filter.h), and Recommend's
// ranking over a filter (core/recommend.h): the exact top n of the allowed
// items, equal to a brute-force filter over a full ranking.

#include "core/item_filter.h"

#include <algorithm>
#include <string>
#include <vector>

#include "core/fit.h"
#include "core/recommend.h"
#include "gtest/gtest.h"
#include "tests/core/synthetic.h"

namespace rbmrec {
namespace {

// rated_factors 3: the rated RBM's W has low rank (Model::rated_low_rank).
Model Trained(int rated_factors = 32) {
  auto s = testing_data::PlantedRatings(80, 40, 2, 0.4, 12);
  TrainOptions o;
  o.hidden = 8;
  o.max_epochs = 8;
  o.threads = 1;
  o.rated_hidden = rated_factors < 32 ? 12 : 6;
  o.rated_factors = rated_factors;
  auto m = FitModel(s.train, o);
  EXPECT_TRUE(m.ok()) << m.status();
  return *std::move(m);
}

// Item i gets category "mod3-<i % 3>" and, for even i, "even"; every 7th
// item is hidden.
std::vector<CatalogueEntry> Entries(const Model& m) {
  std::vector<CatalogueEntry> out;
  for (int32_t i = 0; i < m.num_items(); ++i) {
    CatalogueEntry e;
    e.item = m.items().Name(i);
    e.categories.push_back("mod3-" + std::to_string(i % 3));
    if (i % 2 == 0) e.categories.push_back("even");
    e.hidden = i % 7 == 0;
    out.push_back(e);
  }
  out.push_back({"not-in-the-model", {"even"}, false});
  return out;
}

UserRatings SomeRatings() {
  UserRatings r;
  for (int32_t i = 1; i < 12; i += 2) {
    r.items.push_back(i);
    r.ks.push_back(static_cast<uint8_t>(i % 4 == 1 ? 4 : 1));
  }
  return r;
}

std::vector<int32_t> Items(const std::vector<Ranked>& ranked) {
  std::vector<int32_t> out;
  for (const Ranked& r : ranked) out.push_back(r.item);
  return out;
}

TEST(ItemBitset, SetTestCountAndOr) {
  ItemBitset a(70, true);
  EXPECT_EQ(a.Count(), 70);
  EXPECT_FALSE(a.Test(70));
  EXPECT_FALSE(a.Test(-1));
  ItemBitset b(70);
  b.Set(3);
  b.Set(69);
  EXPECT_EQ(b.Count(), 2);
  a.And(b);
  EXPECT_TRUE(a.Test(69));
  EXPECT_FALSE(a.Test(4));
  a.Reset(69);
  EXPECT_EQ(a.Count(), 1);
}

TEST(ItemBitset, MarkUnsetMarksExactlyTheItemsOutsideTheSet) {
  for (const int32_t size : {1, 63, 64, 65, 130}) {
    ItemBitset b(size, true);
    for (int32_t i = 0; i < size; i += 3) b.Reset(i);
    std::vector<uint8_t> out(static_cast<size_t>(size), 0);
    b.MarkUnset(out.data());
    for (int32_t i = 0; i < size; ++i) {
      EXPECT_EQ(out[static_cast<size_t>(i)], i % 3 == 0 ? 1 : 0)
          << "size " << size << " item " << i;
    }
  }
  // Nothing beyond size() is written.
  std::vector<uint8_t> out(71, 7);
  ItemBitset(70).MarkUnset(out.data());
  EXPECT_EQ(std::count(out.begin(), out.end(), 1), 70);
  EXPECT_EQ(out[70], 7);
}

TEST(ItemBitset, AppendSetListsTheSetInIncreasingOrder) {
  for (const int32_t size : {1, 63, 64, 65, 130}) {
    ItemBitset b(size);
    std::vector<int32_t> want;
    for (int32_t i = size - 1; i >= 0; i -= 5) b.Set(i);
    for (int32_t i = 0; i < size; ++i) {
      if (b.Test(i)) want.push_back(i);
    }
    std::vector<int32_t> got = {-7};  // appended after what is there
    b.AppendSet(&got);
    want.insert(want.begin(), -7);
    EXPECT_EQ(got, want) << "size " << size;
  }
}

TEST(ItemFilter, NarrowItemsListAQuarterOrFewer) {
  for (const int32_t allowed : {0, 1, 25, 26, 100}) {
    std::vector<uint8_t> mask(100, 0);
    for (int32_t i = 0; i < allowed; ++i) {
      mask[static_cast<size_t>((i * 37) % 100)] = 1;
    }
    const ItemFilter f = ItemFilter::FromMask(mask);
    ASSERT_EQ(f.count(), allowed);
    const std::vector<int32_t>* items = f.narrow_items();
    if (allowed > 25) {
      EXPECT_EQ(items, nullptr) << allowed;
      continue;
    }
    ASSERT_NE(items, nullptr) << allowed;
    std::vector<int32_t> want;
    for (int32_t i = 0; i < 100; ++i) {
      if (f.Allowed(i)) want.push_back(i);
    }
    EXPECT_EQ(*items, want);
  }
}

TEST(ItemFilter, CategoriesHiddenCandidatesAndExclusions) {
  const Model m = Trained();
  const Catalogue cat(m, Entries(m));
  FilterSpec spec;
  spec.any_categories = {"mod3-0", "mod3-1"};
  spec.all_categories = {"even"};
  spec.exclude = {2, -5, 100000};
  ItemFilter f = ItemFilter::Build(cat, spec);
  int64_t want = 0;
  for (int32_t i = 0; i < m.num_items(); ++i) {
    const bool ok =
        m.Trained(i) && i % 7 != 0 && i % 3 != 2 && i % 2 == 0 && i != 2;
    EXPECT_EQ(f.Allowed(i), ok) << i;
    want += ok;
  }
  EXPECT_EQ(f.count(), want);
  EXPECT_GT(want, 3);

  spec = FilterSpec();
  spec.use_candidates = true;
  spec.candidates = {4, 5, 7, -1};  // 7 is hidden
  f = ItemFilter::Build(cat, spec);
  EXPECT_EQ(f.count(), 2);
  EXPECT_TRUE(f.Allowed(4) && f.Allowed(5));

  spec = FilterSpec();
  spec.all_categories = {"even", "no-such-category"};
  EXPECT_EQ(ItemFilter::Build(cat, spec).count(), 0);
  spec = FilterSpec();
  spec.any_categories = {"no-such-category"};
  EXPECT_EQ(ItemFilter::Build(cat, spec).count(), 0);
}

// Every ranking over `spec`'s filter, the exact path (candidates 0): the
// top n of the allowed items equals the full unfiltered ranking with the
// disallowed items struck out, cut to n, with the same scores bit for bit.
void ExpectBruteForceFilter(const Model& m, FilterSpec spec) {
  const Catalogue cat(m, Entries(m));
  const UserRatings r = SomeRatings();
  const int32_t user = m.users().Find("u0");
  spec.exclude.insert(spec.exclude.end(), r.items.begin(), r.items.end());
  const ItemFilter f = ItemFilter::Build(cat, spec);
  ASSERT_GE(f.count(), 7);
  ScoringScratch scratch;
  for (RankBy by : {RankBy::kExpected, RankBy::kAtLeast, RankBy::kRated,
                    RankBy::kRatedAtLeast}) {
    RankOptions ro;
    ro.by = by;
    ro.k0 = DefaultThresholdIndex(m);
    ro.method = PredictMethod::kExact;
    ro.candidates = 0;
    ro.n = m.num_items();
    const std::vector<Ranked> full =
        RankItems(m, user, r.view(), r.items, ro, &scratch);
    std::vector<Ranked> want;
    for (const Ranked& x : full) {
      if (f.Allowed(x.item) && want.size() < 7) want.push_back(x);
    }
    ro.n = 7;
    ro.filter = &f;
    const std::vector<Ranked> got =
        RankItems(m, user, r.view(), r.items, ro, &scratch);
    EXPECT_EQ(Items(got), Items(want)) << "ranking " << static_cast<int>(by);
    for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
      EXPECT_EQ(got[i].score, want[i].score) << static_cast<int>(by);
      EXPECT_EQ(got[i].p_rated, want[i].p_rated) << static_cast<int>(by);
    }
  }
}

TEST(ItemFilter, FilteredRankingIsTheBruteForceFilterOfTheFullRanking) {
  const Model m = Trained();
  ASSERT_TRUE(m.HasRatedRbm());
  FilterSpec spec;
  spec.any_categories = {"mod3-0", "mod3-2"};
  spec.exclude = {6};
  ExpectBruteForceFilter(m, spec);
}

// A narrow candidate set (at most a quarter of the items): the p(rated)
// rankings score only the candidates' rows, with the same numbers as the
// full pass, so the answer is still the brute-force filter's.
TEST(ItemFilter, NarrowCandidateSetIsTheBruteForceFilterToo) {
  const Model m = Trained();
  ASSERT_TRUE(m.HasRatedRbm());
  FilterSpec spec;
  spec.use_candidates = true;
  spec.candidates = {2, 3, 4, 8, 13, 17, 19, 22, 25, 30};  // 10 of 40
  ExpectBruteForceFilter(m, spec);
  // The same through the rated RBM's low-rank form (LowRankRow per row).
  const Model low = Trained(3);
  ASSERT_FALSE(low.rated_low_rank().empty());
  ExpectBruteForceFilter(low, spec);
}

// The mean-field prefilter path: only allowed items come back, and a
// narrow filter still fills n when n items are allowed.
TEST(ItemFilter, PrefilterPathReturnsOnlyAllowedItemsAndFillsN) {
  const Model m = Trained();
  const Catalogue cat(m, Entries(m));
  const UserRatings r = SomeRatings();
  const int32_t user = m.users().Find("u0");
  FilterSpec spec;
  spec.use_candidates = true;
  spec.candidates = {38, 20, 22, 26, 39};  // 0 mod 7 would be hidden
  spec.exclude = r.items;
  const ItemFilter f = ItemFilter::Build(cat, spec);
  int64_t allowed_trained = 0;
  for (const int32_t i : spec.candidates) allowed_trained += m.Trained(i);
  ASSERT_EQ(f.count(), allowed_trained);
  ASSERT_GE(f.count(), 4);
  ScoringScratch scratch;
  for (RankBy by : {RankBy::kExpected, RankBy::kAtLeast, RankBy::kRated,
                    RankBy::kRatedAtLeast}) {
    for (PredictMethod method :
         {PredictMethod::kExact, PredictMethod::kMeanField}) {
      RankOptions ro;
      ro.by = by;
      ro.k0 = DefaultThresholdIndex(m);
      ro.method = method;
      ro.candidates = 3;
      ro.n = static_cast<int>(f.count());
      ro.filter = &f;
      const std::vector<Ranked> got =
          RankItems(m, user, r.view(), r.items, ro, &scratch);
      EXPECT_EQ(static_cast<int64_t>(got.size()), f.count());
      for (const Ranked& x : got) EXPECT_TRUE(f.Allowed(x.item)) << x.item;
    }
  }
}

}  // namespace
}  // namespace rbmrec
