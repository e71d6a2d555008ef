#include "core/similar.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "core/fit.h"
#include "core/rng.h"
#include "gtest/gtest.h"
#include "tests/core/synthetic.h"

namespace rbmrec {
namespace {

// m random item vectors (D dims) with counts 1..50; item `untrained` gets
// count 0.
struct Fixture {
  RowMatrixXf vectors;
  std::vector<uint32_t> counts;
};

Fixture RandomItems(int m, int D, uint64_t seed, int untrained = -1) {
  Fixture f;
  Rng rng(seed);
  f.vectors.resize(m, D);
  f.counts.resize(static_cast<size_t>(m));
  for (int i = 0; i < m; ++i) {
    for (int d = 0; d < D; ++d) {
      f.vectors(i, d) = static_cast<float>(rng.Normal());
    }
    f.counts[static_cast<size_t>(i)] = 1 + static_cast<uint32_t>(rng.Below(50));
  }
  if (untrained >= 0) f.counts[static_cast<size_t>(untrained)] = 0;
  return f;
}

// The definition, in double: mean cosine to the queries plus
// weight * log(1 + count).
double BruteScore(const Fixture& f, const std::vector<int32_t>& query,
                  int32_t j, double weight) {
  double sum = 0;
  for (const int32_t q : query) {
    const auto a = f.vectors.row(q).cast<double>();
    const auto b = f.vectors.row(j).cast<double>();
    sum += a.dot(b) / (a.norm() * b.norm());
  }
  const double cos = sum / static_cast<double>(query.size());
  return cos + weight * std::log1p(f.counts[static_cast<size_t>(j)]);
}

// The brute-force top n over the filtered set, given the index's scores:
// a full sort by (score desc, index asc).
std::vector<int32_t> BruteTop(const std::vector<float>& scores,
                              const std::vector<int32_t>& query,
                              const std::vector<int32_t>& excluded,
                              const std::vector<uint8_t>& allowed, int n) {
  std::vector<std::pair<float, int32_t>> all;
  for (int32_t j = 0; j < static_cast<int32_t>(scores.size()); ++j) {
    const auto in = [j](const std::vector<int32_t>& v) {
      return std::find(v.begin(), v.end(), j) != v.end();
    };
    if (in(query) || in(excluded) || std::isnan(scores[static_cast<size_t>(j)]))
      continue;
    if (!allowed.empty() && !allowed[static_cast<size_t>(j)]) continue;
    all.emplace_back(scores[static_cast<size_t>(j)], j);
  }
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  std::vector<int32_t> out;
  for (size_t r = 0; r < all.size() && r < static_cast<size_t>(n); ++r) {
    out.push_back(all[r].second);
  }
  return out;
}

// SimilarItems' n best for `query` with no filters.
absl::StatusOr<std::vector<SimilarItem>> Top(const ItemSimilarity& index,
                                             const std::vector<int32_t>& query,
                                             int n) {
  SimilarScratch scratch;
  SimilarRequest request;
  request.n = n;
  return SimilarItems(index, query, request, &scratch);
}

std::vector<int32_t> Items(const std::vector<SimilarItem>& v) {
  std::vector<int32_t> out;
  for (const SimilarItem& s : v) out.push_back(s.item);
  return out;
}

TEST(ItemSimilarity, ScoresAreTheMeanCosinePlusLogCountTerm) {
  const Fixture f = RandomItems(40, 7, 1);
  for (const float weight : {0.0f, 0.22f}) {
    auto index =
        ItemSimilarity::FromVectors(f.vectors, f.counts, false, weight);
    ASSERT_TRUE(index.ok()) << index.status();
    SimilarScratch scratch;
    std::vector<float> scores;
    for (const std::vector<int32_t>& query :
         {std::vector<int32_t>{3}, std::vector<int32_t>{3, 17, 29}}) {
      ASSERT_TRUE(index->Score(query, &scores, &scratch).ok());
      for (int32_t j = 0; j < 40; ++j) {
        const double want = BruteScore(f, query, j, weight);
        EXPECT_NEAR(scores[static_cast<size_t>(j)], want,
                    1e-5 * std::max(1.0, std::abs(want)));
      }
    }
  }
}

TEST(SimilarItems, ExactTopNOverTheFilteredSet) {
  const Fixture f = RandomItems(200, 9, 2, /*untrained=*/11);
  auto index = ItemSimilarity::FromVectors(f.vectors, f.counts, false, 0.5f);
  ASSERT_TRUE(index.ok());
  SimilarScratch scratch;
  Rng rng(5);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<int32_t> query;
    const int nq = 1 + static_cast<int>(rng.Below(3));
    while (static_cast<int>(query.size()) < nq) {
      const int32_t q = static_cast<int32_t>(rng.Below(200));
      if (q != 11) query.push_back(q);
    }
    std::vector<int32_t> excluded;
    for (int e = 0; e < 30; ++e) {
      excluded.push_back(static_cast<int32_t>(rng.Below(200)));
    }
    excluded.push_back(-3);   // out of range: ignored
    excluded.push_back(999);  // likewise
    std::vector<uint8_t> allowed;
    if (trial % 2 == 1) {
      allowed.resize(200);
      for (auto& a : allowed) a = rng.Below(3) != 0;
    }
    SimilarRequest request;
    request.n = 1 + static_cast<int>(rng.Below(15));
    request.excluded = excluded;
    request.allowed = allowed;
    auto got = SimilarItems(*index, query, request, &scratch);
    ASSERT_TRUE(got.ok()) << got.status();
    std::vector<float> scores;
    ASSERT_TRUE(index->Score(query, &scores, &scratch).ok());
    EXPECT_EQ(Items(*got),
              BruteTop(scores, query, excluded, allowed, request.n));
    for (const SimilarItem& s : *got) {
      EXPECT_EQ(s.score, scores[static_cast<size_t>(s.item)]);
      EXPECT_NE(s.item, 11);  // never an item without training data
      EXPECT_EQ(std::count(query.begin(), query.end(), s.item), 0);
      EXPECT_EQ(std::count(excluded.begin(), excluded.end(), s.item), 0);
      if (!allowed.empty()) {
        EXPECT_TRUE(allowed[static_cast<size_t>(s.item)]);
      }
    }
  }
}

TEST(SimilarItems, TiesGoToTheLowerIndex) {
  // Items 2, 5, 7 and 9 have the same vector and count: equal scores.
  Fixture f = RandomItems(12, 4, 3);
  for (const int i : {5, 7, 9}) {
    f.vectors.row(i) = f.vectors.row(2);
    f.counts[static_cast<size_t>(i)] = f.counts[2];
  }
  auto index = ItemSimilarity::FromVectors(f.vectors, f.counts, false, 0.5f);
  ASSERT_TRUE(index.ok());
  auto got = Top(*index, {7}, 3);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(Items(*got), (std::vector<int32_t>{2, 5, 9}));
  EXPECT_EQ((*got)[0].score, (*got)[2].score);
}

TEST(SimilarItems, NLargerThanTheCandidatesGivesThemAll) {
  const Fixture f = RandomItems(10, 5, 4);
  auto index = ItemSimilarity::FromVectors(f.vectors, f.counts, true, 0.0f);
  ASSERT_TRUE(index.ok());
  SimilarScratch scratch;
  SimilarRequest request;
  request.n = 100;
  const std::vector<int32_t> excluded = {1, 2, 3};
  request.excluded = excluded;
  const std::vector<int32_t> query = {0, 4};
  auto got = SimilarItems(*index, query, request, &scratch);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 5u);  // 10 - 2 queries - 3 excluded
  for (size_t r = 1; r < got->size(); ++r) {
    EXPECT_GE((*got)[r - 1].score, (*got)[r].score);
  }
}

TEST(SimilarItems, MultiItemQueryIsTheMeanOfTheSingleOnes) {
  const Fixture f = RandomItems(30, 6, 6);
  auto index = ItemSimilarity::FromVectors(f.vectors, f.counts, false, 0.0f);
  ASSERT_TRUE(index.ok());
  SimilarScratch scratch;
  std::vector<float> a, b, both;
  ASSERT_TRUE(index->Score(std::vector<int32_t>{4}, &a, &scratch).ok());
  ASSERT_TRUE(index->Score(std::vector<int32_t>{9}, &b, &scratch).ok());
  ASSERT_TRUE(index->Score(std::vector<int32_t>{4, 9}, &both, &scratch).ok());
  for (size_t j = 0; j < 30; ++j) {
    EXPECT_NEAR(both[j], (a[j] + b[j]) / 2, 1e-6);
  }
}

TEST(SimilarItems, ConcurrentQueriesWithTheirOwnScratch) {
  const Fixture f = RandomItems(300, 16, 8);
  auto index = ItemSimilarity::FromVectors(f.vectors, f.counts, false, 0.22f);
  ASSERT_TRUE(index.ok());
  std::vector<std::vector<int32_t>> want(300);
  for (int32_t q = 0; q < 300; ++q)
    want[static_cast<size_t>(q)] = Items(*Top(*index, {q}, 10));
  std::vector<int> mismatches(2, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      SimilarScratch scratch;  // one per thread
      SimilarRequest request;
      for (int32_t q = 0; q < 300; ++q) {
        const std::vector<int32_t> query = {q};
        auto got = SimilarItems(*index, query, request, &scratch);
        if (!got.ok() || Items(*got) != want[static_cast<size_t>(q)]) {
          ++mismatches[static_cast<size_t>(t)];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches, (std::vector<int>{0, 0}));
}

// The neighbour lists answer single-item queries exactly as the full scan:
// same items, same scores (bit for bit), under exclusions and `allowed`
// masks narrow and wide; a list that cannot decide says so, and the
// caller's fallback gives the same answer.
TEST(NeighbourLists, AnswersEqualTheExactScan) {
  const Fixture f = RandomItems(300, 12, 9, /*untrained=*/17);
  auto index = ItemSimilarity::FromVectors(f.vectors, f.counts, false, 0.3f);
  ASSERT_TRUE(index.ok());
  // Short lists (20 of 298 candidates), so filters often leave fewer than
  // n on a list and the fallback is exercised too.
  std::optional<NeighbourLists> lists = NeighbourLists::Build(*index, 20);
  ASSERT_TRUE(lists.has_value());
  EXPECT_EQ(lists->num_items(), 300);
  SimilarScratch scratch;
  Rng rng(11);
  int decided = 0, fell_back = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const int32_t q = static_cast<int32_t>(rng.Below(300));
    std::vector<int32_t> excluded;
    const int n_excluded = static_cast<int>(rng.Below(40));
    for (int e = 0; e < n_excluded; ++e) {
      excluded.push_back(static_cast<int32_t>(rng.Below(300)));
    }
    std::vector<uint8_t> allowed;
    if (trial % 3 != 0) {
      // Wide (3 in 4 allowed) or narrow (1 in 5).
      allowed.resize(300);
      for (auto& x : allowed) {
        x = trial % 3 == 1 ? rng.Below(4) != 0 : rng.Below(5) == 0;
      }
    }
    SimilarRequest request;
    request.n = 1 + static_cast<int>(rng.Below(25));
    request.excluded = excluded;
    request.allowed = allowed;
    const std::vector<int32_t> query = {q};
    auto want = SimilarItems(*index, query, request, &scratch);
    auto got = SimilarItems(*index, &*lists, query, request, &scratch);
    if (q == 17) {  // no vector: the same error either way
      EXPECT_FALSE(want.ok());
      EXPECT_EQ(got.status(), want.status());
      continue;
    }
    ASSERT_TRUE(want.ok() && got.ok()) << want.status() << got.status();
    ASSERT_EQ(got->size(), want->size()) << "trial " << trial;
    for (size_t r = 0; r < want->size(); ++r) {
      EXPECT_EQ((*got)[r].item, (*want)[r].item) << "trial " << trial;
      EXPECT_EQ((*got)[r].score, (*want)[r].score) << "trial " << trial;
    }
    std::vector<SimilarItem> direct;
    if (lists->Answer(q, request, &scratch, &direct)) {
      ++decided;
      EXPECT_EQ(Items(direct), Items(*want)) << "trial " << trial;
    } else {
      ++fell_back;
    }
  }
  EXPECT_GT(decided, 100);
  EXPECT_GT(fell_back, 10);
  // A list longer than the candidates holds them all: always decides.
  std::optional<NeighbourLists> whole = NeighbourLists::Build(*index, 400);
  ASSERT_TRUE(whole.has_value());
  SimilarRequest all;
  all.n = 300;
  std::vector<SimilarItem> direct;
  EXPECT_TRUE(whole->Answer(5, all, &scratch, &direct));
  EXPECT_EQ(Items(direct), Items(*SimilarItems(*index, {5}, all, &scratch)));
}

// An ItemFilter in the request acts as an `allowed` mask would, on both
// paths; stopping a build gives no lists.
TEST(NeighbourLists, ItemFilterAndStop) {
  const Fixture f = RandomItems(120, 8, 10);
  auto index = ItemSimilarity::FromVectors(f.vectors, f.counts, false, 0.1f);
  ASSERT_TRUE(index.ok());
  std::optional<NeighbourLists> lists = NeighbourLists::Build(*index, 30);
  ASSERT_TRUE(lists.has_value());
  SimilarScratch scratch;
  for (int32_t q = 0; q < 120; q += 7) {
    std::vector<uint8_t> mask(120, 0);
    for (int32_t j = q % 3; j < 120; j += 3) mask[static_cast<size_t>(j)] = 1;
    const ItemFilter filter = ItemFilter::FromMask(mask);
    SimilarRequest by_filter;
    by_filter.n = 12;
    by_filter.filter = &filter;
    SimilarRequest by_mask;
    by_mask.n = 12;
    by_mask.allowed = mask;
    const std::vector<int32_t> query = {q};
    auto a = SimilarItems(*index, &*lists, query, by_filter, &scratch);
    auto b = SimilarItems(*index, query, by_mask, &scratch);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(Items(*a), Items(*b)) << q;
  }
  std::atomic<bool> stop{true};
  EXPECT_FALSE(NeighbourLists::Build(*index, 30, &stop).has_value());
}

TEST(SimilarItems, Errors) {
  const Fixture f = RandomItems(8, 3, 7, /*untrained=*/2);
  auto index = ItemSimilarity::FromVectors(f.vectors, f.counts, false, 0.5f);
  ASSERT_TRUE(index.ok());
  SimilarScratch scratch;
  SimilarRequest request;
  const auto run = [&](std::vector<int32_t> query) {
    return SimilarItems(*index, query, request, &scratch).status().code();
  };
  EXPECT_EQ(run({}), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(run({8}), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(run({-1}), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(run({2}), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(run({2, 3}), absl::StatusCode::kOk);  // 2 left out of the mean
  request.n = 0;
  EXPECT_EQ(run({3}), absl::StatusCode::kInvalidArgument);
  request.n = 3;
  const std::vector<uint8_t> allowed(7, 1);
  request.allowed = allowed;
  EXPECT_EQ(run({3}), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ItemSimilarity::FromVectors(f.vectors, {1, 2}, false, 0.5f)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ItemSimilarity::FromVectors(f.vectors, f.counts, false, -1)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

Model Trained(int rated_hidden) {
  auto s = testing_data::PlantedRatings(120, 40, 2, 0.4, 12);
  TrainOptions o;
  o.hidden = 8;
  o.max_epochs = 10;
  o.threads = 1;
  o.rated_hidden = rated_hidden;
  o.rated_max_epochs = 20;
  auto m = FitModel(s.train, o);
  EXPECT_TRUE(m.ok()) << m.status();
  return *std::move(m);
}

TEST(ItemSimilarity, BuildNeedsTheRatedRbm) {
  const Model m = Trained(0);
  EXPECT_EQ(ItemSimilarity::Build(m, SimilarityOptions()).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(ItemSimilarity, BuiltFromTheRatedRbmsWeights) {
  const Model m = Trained(6);
  ASSERT_TRUE(m.HasRatedRbm());
  auto index = ItemSimilarity::Build(m, SimilarityOptions());
  ASSERT_TRUE(index.ok()) << index.status();
  std::vector<uint32_t> counts;
  for (int32_t i = 0; i < m.num_items(); ++i) counts.push_back(m.ItemCount(i));
  auto direct = ItemSimilarity::FromVectors(
      m.rated_rbm().W, counts, false, SimilarityOptions().popularity_weight);
  ASSERT_TRUE(direct.ok());
  auto a = Top(*index, {0}, 5);
  auto b = Top(*direct, {0}, 5);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(Items(*a), Items(*b));
}

TEST(ItemSimilarity, ConditionalIsTheRatedRbmsLiftedLogit) {
  const Model m = Trained(6);
  SimilarityOptions o;
  o.measure = SimilarityMeasure::kRatedConditional;
  o.lift = 0.5f;
  auto index = ItemSimilarity::Build(m, o);
  ASSERT_TRUE(index.ok()) << index.status();
  const RbmParams& p = m.rated_rbm();
  const auto logits = [&](const std::vector<int32_t>& items) {
    Eigen::VectorXf x = p.c;
    for (const int32_t i : items) x += p.W.row(i).transpose();
    for (int j = 0; j < p.F; ++j) x[j] = 1 / (1 + std::exp(-x[j]));
    return Eigen::VectorXf(p.W * x + p.b);
  };
  const std::vector<int32_t> query = {1, 6};
  const Eigen::VectorXf given = logits(query), prior = logits({});
  SimilarScratch scratch;
  std::vector<float> scores;
  ASSERT_TRUE(index->Score(query, &scores, &scratch).ok());
  for (int32_t j = 0; j < m.num_items(); ++j) {
    EXPECT_NEAR(scores[static_cast<size_t>(j)], given[j] - 0.5f * prior[j],
                1e-4);
  }
  EXPECT_EQ(ItemSimilarity::Build(
                m, {SimilarityMeasure::kRatedConditional, 0.5f, false, 1.5f})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace rbmrec
