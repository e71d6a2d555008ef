// The conditional RBM (TrainOptions::conditional, RbmParams::D): off, or
// with D = 0, it is the plain RBM bit for bit; CD learns a D that uses what
// r tells; training is deterministic at any thread count; the online
// functions keep D's shape.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/fit.h"
#include "core/online.h"
#include "core/rbm.h"
#include "core/scoring.h"
#include "gtest/gtest.h"
#include "tests/core/synthetic.h"

namespace rbmrec {
namespace {

TrainOptions SmallOptions() {
  TrainOptions o = testing_data::SmallTrainOptions();
  o.rated_hidden = 0;  // the rating model alone
  return o;
}

// Users of two rating levels (low: ratings around 2, high: around 4, with
// noise of +-1 or +-2) who rate 3 random items of items 0..29 (and 2 more
// in the test part); each user also viewed 5 items without rating them, of
// items 30..39 for a high user and 40..49 for a low one: r tells the level, the
// ratings little.
struct ViewedSet {
  testing_data::Split split;
  SparseRatings views;  // by user: the viewed items
};

ViewedSet ViewsTellTheLevel(int users, uint64_t seed) {
  ViewedSet d;
  Dataset& train = d.split.train;
  Rng rng(seed);
  for (int u = 0; u < users; ++u) train.users.GetOrAdd("u" + std::to_string(u));
  for (int i = 0; i < 50; ++i) train.items.GetOrAdd("i" + std::to_string(i));
  std::vector<Rating> views;
  for (int u = 0; u < users; ++u) {
    const bool high = rng.Below(2) == 1;
    std::vector<int> seen;
    auto fresh = [&](int from, int n) {
      for (;;) {
        const int i = from + static_cast<int>(rng.Below(n));
        if (std::find(seen.begin(), seen.end(), i) == seen.end()) {
          seen.push_back(i);
          return i;
        }
      }
    };
    for (int r = 0; r < 5; ++r) {
      const int item = fresh(0, 30);
      const int noise = static_cast<int>(rng.Below(5)) - 2;
      const int k = std::clamp((high ? 3 : 1) + noise, 0, 4);
      if (r < 3) {
        train.ratings.push_back({u, item, static_cast<uint8_t>(k)});
      } else {
        d.split.test.push_back({u, item, static_cast<double>(k + 1)});
      }
    }
    for (int v = 0; v < 5; ++v)
      views.push_back({u, fresh(high ? 30 : 40, 10), 0});
  }
  d.views = SparseRatings::FromRatings(users, 50, views);
  return d;
}

// With D = 0 a conditional RBM predicts exactly as the plain one, with or
// without extra items: the same bits, one rating or all items at once.
TEST(ConditionalRbm, ZeroDIsThePlainRbm) {
  ViewedSet d = ViewsTellTheLevel(60, 3);
  TrainOptions o = SmallOptions();
  o.max_epochs = 3;
  auto plain = FitModel(d.split.train, o);
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_FALSE(plain->members()[0].conditional());
  ModelParams params = plain->params();
  for (RbmParams& p : params.members) p.D.setZero(p.num_items, p.F);
  const Model zero(std::move(params));
  ASSERT_TRUE(zero.members()[0].conditional());
  const SparseRatings by_user = d.split.train.ByUser();
  std::vector<int32_t> query(50);
  for (int32_t i = 0; i < 50; ++i) query[static_cast<size_t>(i)] = i;
  for (int32_t u = 0; u < 60; u += 7) {
    VisibleSet v{by_user.col.data() + by_user.offsets[u],
                 by_user.k.data() + by_user.offsets[u], by_user.RowSize(u)};
    v.extra = d.views.col.data() + d.views.offsets[u];
    v.n_extra = d.views.RowSize(u);
    for (const PredictMethod method :
         {PredictMethod::kExact, PredictMethod::kMeanField}) {
      std::vector<float> a(50 * 5), b(50 * 5);
      plain->Predict(u, v, query, method, a.data(), nullptr);
      zero.Predict(u, v, query, method, b.data(), nullptr);
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
      RowMatrixXf all_a, all_b;
      ScoringScratch sa, sb;
      PredictAll(*plain, u, v, method, &all_a, &sa);
      PredictAll(zero, u, v, method, &all_b, &sb);
      EXPECT_TRUE(all_a == all_b);
    }
  }
}

// Off, the option leaves D empty and the extra items unused: the same
// model with or without them.
TEST(ConditionalRbm, OffIgnoresTheExtraItems) {
  ViewedSet d = ViewsTellTheLevel(60, 3);
  TrainOptions o = SmallOptions();
  o.max_epochs = 3;
  auto a = FitModel(d.split.train, o);
  auto b = FitModel(d.split.train, o, nullptr, &d.views);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_FALSE(a->options().conditional);
  EXPECT_EQ(a->members()[0].D.size(), 0);
  EXPECT_TRUE(a->members()[0] == b->members()[0]);
  EXPECT_TRUE(a->item_rbm() == b->item_rbm());
}

// The test RMSE of a model trained with `o` (and `extra` in training and
// prediction).
double TestRmse(const ViewedSet& d, const TrainOptions& o,
                const SparseRatings* extra) {
  auto m = FitModel(d.split.train, o, nullptr, extra);
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return NAN;
  if (o.conditional) {
    EXPECT_TRUE(m->options().conditional);
    EXPECT_GT(m->members()[0].D.norm(), 0);
    EXPECT_EQ(m->item_rbm().D.size(), 0);  // the user-based members' alone
  }
  return Evaluate(*m, d.split.train.ByUser(), d.split.test, o.predict, 2, extra)
      .rmse;
}

// Where the viewed items tell the rating level, the conditional RBM given
// them predicts clearly better than the plain RBM, which cannot see them,
// plain and factored; without them (r = the rated items, which say nothing
// of the level here) it is no better. Every run takes its 30 epochs (no
// early stopping on the small validation part, which stopped some runs
// before D had learned anything).
TEST(ConditionalRbm, LearnsWhatTheViewedItemsTell) {
  const ViewedSet d = ViewsTellTheLevel(300, 5);
  for (const int factors : {0, 4}) {
    TrainOptions o = SmallOptions();
    o.item_based = false;
    o.factors = factors;
    o.validation_fraction = 0;
    o.max_epochs = 30;
    o.patience = 1000;
    const double plain = TestRmse(d, o, nullptr);
    o.conditional = true;
    const double viewed = TestRmse(d, o, &d.views);
    const double rated_only = TestRmse(d, o, nullptr);
    EXPECT_LT(viewed, plain - 0.05) << "factors " << factors;
    EXPECT_NEAR(rated_only, plain, 0.02) << "factors " << factors;
  }
}

// Same seed, same conditional model (D included) at 1, 2 and 3 threads,
// plain and factored, and a model other than the plain one.
TEST(ConditionalRbm, SameModelAtAnyThreadCount) {
  const ViewedSet d = ViewsTellTheLevel(150, 9);
  for (const int factors : {0, 4}) {
    TrainOptions o = SmallOptions();
    o.max_epochs = 5;
    o.factors = factors;
    o.conditional = true;
    std::vector<Model> models;
    for (int threads = 1; threads <= 3; ++threads) {
      o.threads = threads;
      auto m = FitModel(d.split.train, o, nullptr, &d.views);
      ASSERT_TRUE(m.ok()) << m.status();
      models.push_back(*std::move(m));
    }
    ASSERT_TRUE(models[0].members()[0].conditional());
    for (size_t t = 1; t < models.size(); ++t) {
      EXPECT_TRUE(models[0].members()[0] == models[t].members()[0]) << factors;
      EXPECT_TRUE(models[0].item_rbm() == models[t].item_rbm()) << factors;
    }
    o.conditional = false;
    auto plain = FitModel(d.split.train, o, nullptr, &d.views);
    ASSERT_TRUE(plain.ok());
    EXPECT_FALSE(models[0].members()[0].W == plain->members()[0].W);
  }
}

// AddItems grows D with zero rows (a new item in r shifts nothing).
TEST(ConditionalRbm, AddItemsGrowsD) {
  const ViewedSet d = ViewsTellTheLevel(60, 3);
  TrainOptions o = SmallOptions();
  o.max_epochs = 2;
  o.conditional = true;
  auto m = FitModel(d.split.train, o, nullptr, &d.views);
  ASSERT_TRUE(m.ok());
  const RowMatrixXf before = m->members()[0].D;
  ASSERT_EQ(AddItems(&*m, {"new1", "new2"}, 1), 2);
  const RbmParams& p = m->members()[0];
  ASSERT_EQ(p.D.rows(), 52);
  EXPECT_TRUE(p.D.topRows(50) == before);
  EXPECT_EQ(p.D.bottomRows(2).norm(), 0);
}

}  // namespace
}  // namespace rbmrec
