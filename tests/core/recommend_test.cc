#include "core/recommend.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/fit.h"
#include "core/rated_rbm.h"
#include "core/scoring.h"
#include "gtest/gtest.h"
#include "tests/core/synthetic.h"

namespace rbmrec {
namespace {

// rated_factors > 0 below rated_hidden / 2: the rated RBM's W has low
// rank, and serving's p(rated) logits go through its low-rank form.
Model Trained(int users = 80, int items = 30, int epochs = 10,
              int rated_factors = 32) {
  auto s = testing_data::PlantedRatings(users, items, 2, 0.4, 12);
  TrainOptions o;
  o.hidden = 8;
  o.max_epochs = epochs;
  o.threads = 1;
  o.rated_hidden = rated_factors < 32 ? 12 : 6;
  o.rated_factors = rated_factors;
  auto m = FitModel(s.train, o);
  EXPECT_TRUE(m.ok()) << m.status();
  return *std::move(m);
}

UserRatings FirstUser(const Model& m, int32_t* user) {
  *user = m.users().Find("u0");
  UserRatings r;
  // Items 0, 2, 4, ... rated 5 and 1, 3, ... rated 1 (any set will do).
  for (int32_t i = 0; i < 10; ++i) {
    r.items.push_back(i);
    r.ks.push_back(static_cast<uint8_t>(i % 2 == 0 ? 4 : 0));
  }
  return r;
}

class RatedForm : public ::testing::TestWithParam<bool> {
 protected:
  // The model with the low-rank rated form (GetParam()) or without it.
  static Model Trained(int users = 80, int items = 30, int epochs = 10) {
    Model m = rbmrec::Trained(users, items, epochs, GetParam() ? 3 : 32);
    EXPECT_EQ(m.rated_low_rank().empty(), !GetParam());
    if (GetParam()) {
      EXPECT_EQ(m.rated_low_rank().rank(), 3);
      EXPECT_EQ(m.rated_w_half(), nullptr);
    }
    return m;
  }
};
INSTANTIATE_TEST_SUITE_P(Recommend, RatedForm, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "LowRank" : "Full";
                         });

TEST_P(RatedForm, RatedProbabilitiesAreTheRatedRbmsMeanField) {
  const Model m = Trained();
  ASSERT_TRUE(m.HasRatedRbm());
  int32_t user;
  const UserRatings r = FirstUser(m, &user);
  ScoringScratch scratch;
  std::vector<float> p(static_cast<size_t>(m.num_items()));
  RatedProbabilities(m, r.view(), p.data(), &scratch);
  std::vector<float> h(static_cast<size_t>(m.rated_rbm().F));
  RatedHidden(m.rated_rbm(), r.items.data(), 10, h.data());
  for (int32_t i = 0; i < m.num_items(); ++i) {
    double logit = m.rated_rbm().b[i];
    for (int j = 0; j < m.rated_rbm().F; ++j) {
      logit += m.rated_rbm().W(i, j) * h[static_cast<size_t>(j)];
    }
    EXPECT_NEAR(p[static_cast<size_t>(i)], 1 / (1 + std::exp(-logit)), 1e-5);
  }
}

TEST(Recommend, RatedRankingsOrderByTheirScores) {
  const Model m = Trained();
  int32_t user;
  const UserRatings r = FirstUser(m, &user);
  ScoringScratch scratch;
  std::vector<float> p(static_cast<size_t>(m.num_items()));
  RatedProbabilities(m, r.view(), p.data(), &scratch);
  const int k0 = DefaultThresholdIndex(m);
  for (RankBy by : {RankBy::kRated, RankBy::kRatedAtLeast}) {
    for (PredictMethod method :
         {PredictMethod::kExact, PredictMethod::kMeanField}) {
      RankOptions ro;
      ro.by = by;
      ro.k0 = k0;
      ro.method = method;
      ro.n = 8;
      ro.candidates = 10;
      const std::vector<Ranked> out =
          RankItems(m, user, r.view(), r.items, ro, &scratch);
      ASSERT_EQ(out.size(), 8u);
      float prev = 2;
      for (const Ranked& x : out) {
        EXPECT_GE(x.item, 10) << "a rated item was recommended";
        EXPECT_EQ(x.p_rated, p[static_cast<size_t>(x.item)]);
        if (by == RankBy::kRated) {
          EXPECT_EQ(x.score, x.p_rated);
          EXPECT_EQ(x.at_least, 0);
        } else {
          EXPECT_GT(x.at_least, 0);
          EXPECT_FLOAT_EQ(x.score, x.p_rated * x.at_least);
        }
        EXPECT_LE(x.score, prev);
        prev = x.score;
      }
      if (by == RankBy::kRated) {
        // The best p(rated) among the candidates comes first.
        float best = 0;
        for (int32_t i = 10; i < m.num_items(); ++i) {
          if (m.Trained(i)) best = std::max(best, p[static_cast<size_t>(i)]);
        }
        EXPECT_EQ(out[0].score, best);
      }
    }
  }
}

// The bounded search of kRatedAtLeast returns exactly the brute-force top n
// of p(rated) x p(rating >= t) over every candidate item, for each method.
void ExpectBruteForceTopN(const Model& m, const std::vector<int>& ns) {
  int32_t user;
  const UserRatings r = FirstUser(m, &user);
  ScoringScratch scratch;
  std::vector<float> p_rated(static_cast<size_t>(m.num_items()));
  RatedProbabilities(m, r.view(), p_rated.data(), &scratch);
  const int K = m.K();
  for (PredictMethod method :
       {PredictMethod::kExact, PredictMethod::kMeanField}) {
    for (int k0 : {2, 3, 4}) {
      std::vector<int32_t> query;
      for (int32_t i = 10; i < m.num_items(); ++i) {
        if (m.Trained(i)) query.push_back(i);
      }
      std::vector<float> probs(query.size() * static_cast<size_t>(K));
      m.Predict(user, r.view(), query, method, probs.data(), nullptr);
      std::vector<std::pair<float, std::string>> want;
      for (size_t q = 0; q < query.size(); ++q) {
        float at_least = 0;
        for (int k = k0; k < K; ++k) at_least += probs[q * K + k];
        want.emplace_back(p_rated[static_cast<size_t>(query[q])] * at_least,
                          m.items().Name(query[q]));
      }
      std::sort(want.begin(), want.end(), [](const auto& a, const auto& b) {
        return a.first != b.first ? a.first > b.first : a.second < b.second;
      });
      for (int n : ns) {
        RankOptions ro;
        ro.by = RankBy::kRatedAtLeast;
        ro.k0 = k0;
        ro.method = method;
        ro.n = n;
        const std::vector<Ranked> got =
            RankItems(m, user, r.view(), r.items, ro, &scratch);
        ASSERT_EQ(got.size(), std::min(static_cast<size_t>(n), want.size()));
        for (size_t j = 0; j < got.size(); ++j) {
          EXPECT_EQ(m.items().Name(got[j].item), want[j].second)
              << "n " << n << " rank " << j << " k0 " << k0;
          EXPECT_EQ(got[j].score, want[j].first);
        }
      }
    }
  }
}

TEST_P(RatedForm, RatedAtLeastIsTheBruteForceTopN) {
  ExpectBruteForceTopN(Trained(), {1, 5, 12});
}

// With more items than the bounded search orders at first (64), deep lists
// need the items below its first cut too.
TEST_P(RatedForm, RatedAtLeastIsTheBruteForceTopNBeyondTheFirstCut) {
  ExpectBruteForceTopN(Trained(120, 300, 3), {10, 70, 150, 290});
}

// The batched passes (a bulk answer's) give every user exactly what the
// per-user ones give: RatedLogitsBatch against RatedProbabilities,
// ScoreAllMeanFieldBatch against ScoreAllMeanField, and RankItems handed
// them against RankItems alone, for batches of 1 to 8 users.
TEST_P(RatedForm, BatchedPassesAreEachUsersOwnBitForBit) {
  const Model m = Trained();
  ASSERT_TRUE(m.HasRatedRbm());
  const size_t items = static_cast<size_t>(m.num_items());
  std::vector<UserRatings> users(kMaxScoreBatch);
  std::vector<int32_t> model_users(kMaxScoreBatch);
  for (int b = 0; b < kMaxScoreBatch; ++b) {
    model_users[static_cast<size_t>(b)] = b % 3 == 2 ? -1 : b;  // some -1
    UserRatings& r = users[static_cast<size_t>(b)];
    for (int32_t i = b; i < m.num_items(); i += 2 + b % 3) {
      r.items.push_back(i);
      r.ks.push_back(static_cast<uint8_t>((i + b) % m.K()));
    }
  }
  ScoringScratch scratch, alone;
  std::vector<float> want(items), want_scores(items);
  for (int n = 1; n <= kMaxScoreBatch; ++n) {
    std::vector<VisibleSet> views;
    for (int b = 0; b < n; ++b) views.push_back(users[b].view());
    const VisibleSet* vs[kMaxScoreBatch];
    for (int b = 0; b < n; ++b) vs[b] = &views[static_cast<size_t>(b)];
    std::vector<std::vector<float>> logits(n, std::vector<float>(items));
    std::vector<std::vector<float>> scores(n, std::vector<float>(items));
    float* lo[kMaxScoreBatch];
    float* so[kMaxScoreBatch];
    for (int b = 0; b < n; ++b) {
      lo[b] = logits[static_cast<size_t>(b)].data();
      so[b] = scores[static_cast<size_t>(b)].data();
    }
    RatedLogitsBatch(m, vs, n, lo, &scratch);
    RankOptions by_value;
    by_value.by = RankBy::kExpected;
    std::vector<float> values;
    RankValues(m, by_value, &values);
    ScoreAllMeanFieldBatch(m, model_users.data(), vs, n, values.data(), so,
                           &scratch);
    for (int b = 0; b < n; ++b) {
      SCOPED_TRACE(::testing::Message() << "n " << n << ", user " << b);
      const size_t ub = static_cast<size_t>(b);
      RatedProbabilities(m, views[ub], want.data(), &alone);
      ScoreAllMeanField(m, model_users[ub], views[ub], values.data(),
                        want_scores.data(), &alone);
      for (size_t i = 0; i < items; ++i) {
        ASSERT_EQ(StableSigmoid(logits[ub][i]), want[i]) << "item " << i;
        if (std::isnan(want_scores[i])) {
          ASSERT_TRUE(std::isnan(scores[ub][i])) << "item " << i;
        } else {
          ASSERT_EQ(scores[ub][i], want_scores[i]) << "item " << i;
        }
      }
      for (const RankBy by : {RankBy::kExpected, RankBy::kAtLeast,
                              RankBy::kRated, RankBy::kRatedAtLeast}) {
        RankOptions o;
        o.by = by;
        o.k0 = 3;
        o.n = 7;
        const std::vector<Ranked> own = RankItems(m, model_users[ub], views[ub],
                                                  users[ub].items, o, &alone);
        std::vector<float> pass(items);
        if (NeedsRatedRbm(by)) {
          o.rated_logits = logits[ub].data();
        } else {
          ASSERT_TRUE(RanksByMeanField(o));
          std::vector<float> by_values;
          RankValues(m, o, &by_values);
          float* po = pass.data();
          ScoreAllMeanFieldBatch(m, &model_users[ub], &vs[b], 1,
                                 by_values.data(), &po, &scratch);
          o.mean_field_scores = pass.data();
        }
        const std::vector<Ranked> handed = RankItems(
            m, model_users[ub], views[ub], users[ub].items, o, &scratch);
        ASSERT_EQ(handed.size(), own.size());
        for (size_t r = 0; r < own.size(); ++r) {
          EXPECT_EQ(handed[r].item, own[r].item);
          EXPECT_EQ(handed[r].score, own[r].score);
          EXPECT_EQ(handed[r].expected, own[r].expected);
          EXPECT_EQ(handed[r].at_least, own[r].at_least);
          EXPECT_EQ(handed[r].p_rated, own[r].p_rated);
        }
      }
    }
  }
}

TEST(Recommend, DefaultThresholdIsTheFirstValueAtOrAboveTheMean) {
  ModelParams params;
  params.scale = RatingScale();  // 1..5
  params.items.GetOrAdd("a");
  params.items.GetOrAdd("b");
  // Mean rating (3 * 1 + 1 * 5) / 4 = 2: threshold 2 (index 1).
  params.item_hist = {3, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  EXPECT_EQ(DefaultThresholdIndex(Model(params)), 1);
  // Mean 3.5: threshold 4.
  params.item_hist = {0, 0, 1, 1, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(DefaultThresholdIndex(Model(params)), 3);
  // No data: the middle value.
  params.item_hist.assign(10, 0);
  EXPECT_EQ(DefaultThresholdIndex(Model(params)), 2);
}

}  // namespace
}  // namespace rbmrec
