#include "core/online.h"

#include <algorithm>
#include <cmath>

#include "core/fit.h"
#include "core/low_rank.h"
#include "gtest/gtest.h"
#include "tests/core/synthetic.h"

namespace rbmrec {
namespace {

// c_I + sum of W_I[u, k] over `raters` ((model user, rating index) pairs):
// what FitModel computes as item_x for an item with those ratings.
Eigen::VectorXf ItemInputOf(
    const Model& m, const std::vector<std::pair<int32_t, int>>& raters) {
  Eigen::VectorXf x = m.item_rbm().c;
  for (const auto& [u, k] : raters) {
    x += m.item_rbm().W.row(m.item_rbm().Row(u, k)).transpose();
  }
  return x;
}

// A small model of planted ratings (30 users, 12 items) with its I-RBM.
absl::StatusOr<Model> FitSmall(const testing_data::Split& s) {
  TrainOptions o;
  o.hidden = 5;
  o.max_epochs = 3;
  o.threads = 1;
  return FitModel(s.train, o);
}

TEST(Online, AdjustItemInputFollowsTheItemsRatings) {
  auto s = testing_data::PlantedRatings(30, 12, 2, 0.5, 21);
  auto model = FitSmall(s);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_GT(model->item_rbm().F, 0);
  Model& m = *model;

  // Item 0's raters in the training data, as the model indexes them.
  const int32_t item = m.items().Find("i0");
  ASSERT_GE(item, 0);
  std::vector<std::pair<int32_t, int>> raters;
  std::vector<bool> rated(static_cast<size_t>(m.users().size()), false);
  for (const Rating& r : s.train.ratings) {
    if (s.train.items.Name(r.item) != "i0") continue;
    const int32_t u = m.users().Find(s.train.users.Name(r.user));
    raters.emplace_back(u, r.k);
    rated[static_cast<size_t>(u)] = true;
  }
  ASSERT_FALSE(raters.empty());
  auto expect_input = [&](const std::vector<std::pair<int32_t, int>>& want) {
    const Eigen::VectorXf x = ItemInputOf(m, want);
    EXPECT_LT((m.item_x().row(item).transpose() - x).cwiseAbs().maxCoeff(),
              1e-5f);
    for (int j = 0; j < m.item_rbm().F; ++j) {
      EXPECT_NEAR(m.item_hT()(j, item), 1.0f / (1.0f + std::exp(-x[j])), 1e-6f);
    }
  };
  expect_input(raters);

  // A training user who had not rated the item rates it 5 (index 4) ...
  int32_t newcomer = -1;
  for (int32_t u = 0; u < m.users().size(); ++u) {
    if (!rated[static_cast<size_t>(u)]) newcomer = u;
  }
  ASSERT_GE(newcomer, 0);
  AdjustItemInput(&m, newcomer, item, 4, +1);
  std::vector<std::pair<int32_t, int>> more = raters;
  more.emplace_back(newcomer, 4);
  expect_input(more);
  // ... and removes it again.
  AdjustItemInput(&m, newcomer, item, 4, -1);
  expect_input(raters);

  // Users the I-RBM does not know change nothing.
  const RowMatrixXf before = m.item_x();
  AdjustItemInput(&m, -1, item, 2, +1);
  AdjustItemInput(&m, m.item_rbm().num_items, item, 2, +1);
  EXPECT_TRUE(m.item_x() == before);

  // A new item starts from c_I on its first rating by a training user.
  ASSERT_EQ(AddItems(&m, {"fresh"}, 1), 1);
  const int32_t fresh = m.items().Find("fresh");
  EXPECT_FALSE(m.UsesItemRbm(newcomer, fresh));
  AdjustItemInput(&m, newcomer, fresh, 1, -1);  // nothing to remove
  EXPECT_FALSE(m.UsesItemRbm(newcomer, fresh));
  AdjustItemInput(&m, newcomer, fresh, 1, +1);
  EXPECT_TRUE(m.UsesItemRbm(newcomer, fresh) || m.params().user_weight >= 1.0f);
  const Eigen::VectorXf want = ItemInputOf(m, {{newcomer, 1}});
  EXPECT_LT((m.item_x().row(fresh).transpose() - want).cwiseAbs().maxCoeff(),
            1e-6f);
}

}  // namespace
}  // namespace rbmrec

namespace rbmrec {
namespace {

// The U/I weight's item part follows the item's rating count through
// AdjustHistogram, AddItems and CopyItemState: the edited model weighs as
// a model built afresh from its parameters does.
TEST(Online, UserWeightFollowsTheItemsCount) {
  auto fit = FitSmall(testing_data::PlantedRatings(30, 12, 2, 0.5, 21));
  ASSERT_TRUE(fit.ok()) << fit.status();
  Model m = WithUserWeight(*std::move(fit), 0.2f, 0.0f, 0.1f);
  auto expect_fresh = [](const Model& edited) {
    const Model fresh(edited.params());
    for (int32_t i = 0; i < edited.num_items(); ++i) {
      for (int64_t n : {0, 3, 40}) {
        EXPECT_EQ(edited.UserWeight(n, i), fresh.UserWeight(n, i)) << i;
      }
    }
  };
  const int32_t item = m.items().Find("i0");
  ASSERT_GE(item, 0);
  const float before = m.UserWeight(10, item);
  for (int r = 0; r < 30; ++r) AdjustHistogram(&m, item, 4, 1);
  EXPECT_GT(m.UserWeight(10, item), before);  // more ratings, more U-RBM
  expect_fresh(m);
  ASSERT_EQ(AddItems(&m, {"brand-new-item"}, 1), 1);
  const int32_t fresh_item = m.items().Find("brand-new-item");
  EXPECT_FLOAT_EQ(m.UserWeight(0, fresh_item), 0.2f);  // log(1 + 0) = 0
  AdjustHistogram(&m, fresh_item, 2, 1);
  expect_fresh(m);
  Model copy(m.params());
  for (int r = 0; r < 5; ++r) AdjustHistogram(&m, fresh_item, 3, 1);
  CopyItemState(m, {fresh_item}, &copy);
  EXPECT_EQ(copy.UserWeight(7, fresh_item), m.UserWeight(7, fresh_item));
  expect_fresh(copy);
}

TEST(Online, NewItemsJoinTheRatedRbmAndRiseWithTheirRatings) {
  auto s = testing_data::PlantedRatings(30, 12, 2, 0.5, 8);
  TrainOptions o;
  o.hidden = 5;
  o.max_epochs = 2;
  o.threads = 1;
  o.rated_hidden = 4;
  auto model = FitModel(s.train, o);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_TRUE(model->HasRatedRbm());
  Model before = *model;
  Model& m = *model;
  ASSERT_EQ(AddItems(&m, {"new1", "i0"}, 3), 1);
  ASSERT_TRUE(m.HasRatedRbm());
  const int32_t item = m.items().Find("new1");
  ASSERT_EQ(item, 12);
  EXPECT_EQ(m.rated_rbm().num_items, 13);
  EXPECT_TRUE(m.rated_rbm().W.row(item).isZero(0));
  EXPECT_EQ(m.rated_rbm().b[item], NewItemRatedBias(m, 0));
  // The old items' parameters are untouched.
  EXPECT_TRUE(m.rated_rbm().W.topRows(12) == before.rated_rbm().W);
  EXPECT_TRUE(m.rated_rbm().b.head(12) == before.rated_rbm().b);
  EXPECT_TRUE(m.rated_rbm().c == before.rated_rbm().c);
  // Ratings of the new item raise its p(rated); a trained item's bias stays.
  const float b0 = m.rated_rbm().b[item];
  AdjustHistogram(&m, item, 4, +1);
  AdjustHistogram(&m, item, 3, +1);
  EXPECT_EQ(m.rated_rbm().b[item], NewItemRatedBias(m, 2));
  EXPECT_GT(m.rated_rbm().b[item], b0);
  const float trained = m.rated_rbm().b[0];
  AdjustHistogram(&m, 0, 4, +1);
  EXPECT_EQ(m.rated_rbm().b[0], trained);
  // CopyItemState carries the new item's rated-RBM state across.
  Model copy = before;
  ASSERT_EQ(AddItems(&copy, {"new1"}, 3), 1);
  ASSERT_TRUE(SameShape(m, copy));
  CopyItemState(m, {item, 0}, &copy);
  EXPECT_EQ(copy.rated_rbm().b[item], m.rated_rbm().b[item]);
  EXPECT_TRUE(copy.rated_rbm() == m.rated_rbm());
  // The half-precision copy serving reads stays in step with W: after
  // AddItems, and after CopyItemState from a model whose row differs.
  auto expect_half_in_step = [](const Model& edited) {
    const Model fresh(edited.params());
    if (fresh.rated_w_half() == nullptr) {
      EXPECT_EQ(edited.rated_w_half(), nullptr);
      return;
    }
    ASSERT_NE(edited.rated_w_half(), nullptr);
    const size_t n = static_cast<size_t>(edited.rated_rbm().W.size());
    EXPECT_TRUE(std::equal(edited.rated_w_half(), edited.rated_w_half() + n,
                           fresh.rated_w_half()));
  };
  expect_half_in_step(m);
  ModelParams changed = m.params();
  changed.rated_rbm.W.row(0).array() += 0.25f;
  const Model source(std::move(changed));
  CopyItemState(source, {0}, &copy);
  expect_half_in_step(copy);
  EXPECT_TRUE(copy.rated_rbm().W.row(0) == source.rated_rbm().W.row(0));
  // The bias never reaches +infinity, however many ratings.
  EXPECT_LT(NewItemRatedBias(m, 1000000), 5.0f);
}

// Every rated logit through the low-rank form (LowRankRow) within
// kLowRankRowTolerance of W_i . h.
void ExpectLowRankServes(const Model& m) {
  const LowRankRows& lr = m.rated_low_rank();
  const RbmParams& p = m.rated_rbm();
  ASSERT_EQ(lr.u.rows(), p.W.rows());
  std::vector<float> h(static_cast<size_t>(p.F)),
      z(static_cast<size_t>(lr.rank()));
  for (int j = 0; j < p.F; ++j)
    h[static_cast<size_t>(j)] = 0.1f * static_cast<float>(j % 9);
  LowRankInput(lr, h.data(), z.data());
  for (int64_t i = 0; i < p.W.rows(); ++i) {
    double want = 0;
    for (int j = 0; j < p.F; ++j) {
      want += static_cast<double>(p.W(i, j)) * h[static_cast<size_t>(j)];
    }
    EXPECT_NEAR(LowRankRow(lr, p.W, i, h.data(), z.data()), want, 2e-4)
        << "row " << i;
  }
}

// The rated RBM's low-rank form follows AddItems (zero rows, on V's span)
// and CopyItemState (a row off the span is served exactly).
TEST(Online, LowRankRatedFormFollowsItemEdits) {
  auto s = testing_data::PlantedRatings(30, 12, 2, 0.5, 8);
  TrainOptions o;
  o.hidden = 5;
  o.max_epochs = 2;
  o.threads = 1;
  o.rated_hidden = 8;
  o.rated_factors = 2;
  auto model = FitModel(s.train, o);
  ASSERT_TRUE(model.ok()) << model.status();
  Model& m = *model;
  ASSERT_EQ(m.rated_low_rank().rank(), 2);
  ExpectLowRankServes(m);
  const Model before = m;
  ASSERT_EQ(AddItems(&m, {"new1", "new2"}, 3), 2);
  EXPECT_TRUE(m.rated_low_rank().exact_rows.empty());
  ExpectLowRankServes(m);
  ModelParams changed = m.params();
  changed.rated_rbm.W.row(0).array() += 0.25f;
  const Model source(std::move(changed));
  Model copy = m;
  CopyItemState(source, {0}, &copy);
  EXPECT_EQ(copy.rated_low_rank().exact_rows, std::vector<int32_t>{0});
  ExpectLowRankServes(copy);
  CopyItemState(before, {0}, &copy);
  EXPECT_TRUE(copy.rated_low_rank().exact_rows.empty());
  ExpectLowRankServes(copy);
}

}  // namespace
}  // namespace rbmrec

namespace rbmrec {
namespace {

// The exp(W) tables exact predictions read, after each online edit, are
// those of a model built afresh from the edited parameters.
void ExpectTablesAsBuiltAfresh(const Model& m) {
  const Model fresh(ModelParams(m.params()));
  for (size_t e = 0; e < m.members().size(); ++e) {
    EXPECT_TRUE(m.member_exp(e).ew == fresh.member_exp(e).ew) << "member " << e;
    EXPECT_EQ(m.member_exp(e).ok, fresh.member_exp(e).ok);
    EXPECT_EQ(m.member_exp(e).ew.rows(), m.members()[e].W.rows());
  }
  EXPECT_TRUE(m.item_rbm_exp().ew == fresh.item_rbm_exp().ew);
  EXPECT_EQ(m.item_rbm_exp().ok, fresh.item_rbm_exp().ok);
  const int F = m.item_rbm().F;
  for (int32_t i = 0; i < m.item_x().rows(); ++i) {
    const ExpInputView a = m.ItemExpInput(i), b = fresh.ItemExpInput(i);
    EXPECT_TRUE(std::equal(a.ex, a.ex + F, b.ex)) << "item " << i;
    ASSERT_EQ(a.n_hi, b.n_hi) << "item " << i;
    EXPECT_TRUE(std::equal(a.hi, a.hi + a.n_hi, b.hi)) << "item " << i;
    EXPECT_EQ(a.hi_sum, b.hi_sum) << "item " << i;
  }
}

TEST(Online, ExpTablesFollowEveryEdit) {
  auto s = testing_data::PlantedRatings(30, 12, 2, 0.5, 23);
  auto model = FitSmall(s);
  ASSERT_TRUE(model.ok()) << model.status();
  Model& m = *model;
  ASSERT_FALSE(m.member_exp(0).ok.empty());
  ASSERT_FALSE(m.item_rbm_exp().ok.empty());
  ExpectTablesAsBuiltAfresh(m);

  ASSERT_EQ(AddItems(&m, {"new1", "new2"}, 5), 2);
  ExpectTablesAsBuiltAfresh(m);

  const std::vector<int32_t> items = {0, 3, m.items().Find("new1")};
  const std::vector<uint8_t> ks = {4, 0, 2};
  OnlineOptions o;
  o.steps = 2;
  OnlineUserUpdate(&m, VisibleSet{items.data(), ks.data(), 3}, o, 99);
  ExpectTablesAsBuiltAfresh(m);

  const Model before(ModelParams(m.params()));
  Model copy(ModelParams(m.params()));
  OnlineUserUpdate(&m, VisibleSet{items.data(), ks.data(), 2}, o, 7);
  CopyItemState(m, {0, 3}, &copy);
  ExpectTablesAsBuiltAfresh(copy);
  EXPECT_FALSE(copy.member_exp(0).ew == before.member_exp(0).ew);

  const std::string user = m.users().Name(2);
  const std::vector<int32_t> rated = {1};
  const std::vector<uint8_t> rk = {3};
  AdjustItemInput(&m, 1, 4, 2, +1);
  ExpectTablesAsBuiltAfresh(m);
  ASSERT_TRUE(EraseUser(&m, user, VisibleSet{rated.data(), rk.data(), 1}));
  ExpectTablesAsBuiltAfresh(m);
}

// Erasure takes the user's training row out of the item regression exactly
// (as a fit without it), whatever ratings the caller passes.
TEST(Online, EraseUserTakesTheUserOutOfTheItemRegression) {
  auto s = testing_data::PlantedRatings(60, 20, 2, 0.4, 9);
  TrainOptions o = testing_data::SmallTrainOptions();
  o.item_regression = 1;
  absl::StatusOr<Model> model = FitModel(s.train, o);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_TRUE(model->HasItemRegression());
  const int32_t gone = 5;
  const SparseRatings by_user = s.train.ByUser();
  std::vector<Rating> kept;
  for (int32_t u = 0; u < by_user.rows; ++u) {
    for (int64_t y = by_user.offsets[u]; y < by_user.offsets[u + 1]; ++y) {
      if (u != gone) kept.push_back({u, by_user.col[y], by_user.k[y]});
    }
  }
  ItemRegressionOptions ro;
  ro.lambda = model->item_regression().lambda;
  absl::StatusOr<ItemRegression> refit = FitItemRegression(
      SparseRatings::FromRatings(by_user.rows, by_user.cols, kept), ro);
  ASSERT_TRUE(refit.ok());
  const std::vector<float> before = model->item_regression().inverse;
  const std::vector<int32_t> other = {0};  // not the user's ratings
  const std::vector<uint8_t> k = {4};
  ASSERT_TRUE(EraseUser(&*model, model->users().Name(gone),
                        VisibleSet{other.data(), k.data(), 1}));
  ASSERT_TRUE(model->HasItemRegression());
  const std::vector<float>& after = model->item_regression().inverse;
  float worst = 0, moved = 0;
  for (size_t i = 0; i < after.size(); ++i) {
    worst = std::max(worst, std::abs(after[i] - refit->inverse[i]));
    moved = std::max(moved, std::abs(after[i] - before[i]));
  }
  EXPECT_LT(worst, 1e-6f * 100);
  EXPECT_GT(moved, worst * 10);
}

}  // namespace
}  // namespace rbmrec
