// ReadCaches on a store: read-through, invalidation by writes, and user
// resolution against a model snapshot.

#include "server/caches/read_caches.h"

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "store/store.h"

namespace rbmrec::server {
namespace {

class ReadCachesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<store::Store>> st =
        store::Store::Open(":memory:");
    ASSERT_TRUE(st.ok());
    store_ = std::move(*st);
    caches_ = std::make_unique<ReadCaches>(store_.get(), 1 << 20);
    ASSERT_TRUE(
        store_->UpsertRatings({{"ann", "a", 4, 0}, {"ann", "b", 2, 0}}).ok());
    ModelParams params;
    params.scale = *RatingScale::Create(1, 5, 1);
    params.items.GetOrAdd("a");
    params.items.GetOrAdd("b");
    model_ = std::make_shared<const Model>(std::move(params));
  }
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<ReadCaches> caches_;
  std::shared_ptr<const Model> model_;
  google::protobuf::RepeatedPtrField<v1::ItemRating> none_;
};

TEST_F(ReadCachesTest, ReadsThroughAndForgetsOnInvalidation) {
  absl::StatusOr<ReadCaches::UserRatingsPtr> r = caches_->UserRatings("ann");
  ASSERT_TRUE(r.ok());
  ASSERT_NE(*r, nullptr);
  EXPECT_EQ((*r)->size(), 2u);
  // A write the cache is not told about is not seen (served from cache)...
  ASSERT_TRUE(store_->UpsertRatings({{"ann", "c", 5, 0}}).ok());
  EXPECT_EQ((*caches_->UserRatings("ann"))->size(), 2u);
  // ...until the writer invalidates.
  caches_->InvalidateUsers({"ann"});
  EXPECT_EQ((*caches_->UserRatings("ann"))->size(), 3u);
  r = caches_->UserRatings("nobody");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, nullptr);
}

TEST_F(ReadCachesTest, ResolvesAgainstTheModelAndCachesPerSnapshot) {
  absl::StatusOr<UserView> v = caches_->Resolve(model_, "ann", none_);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_TRUE(v->folded_in);
  ASSERT_EQ(v->resolved->ratings.items.size(), 2u);
  EXPECT_EQ(v->resolved->ratings.ks[0], 3);  // rating 4 on 1..5
  absl::StatusOr<UserView> again = caches_->Resolve(model_, "ann", none_);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->resolved, v->resolved);  // cached
  auto other = std::make_shared<const Model>(*model_);
  absl::StatusOr<UserView> fresh = caches_->Resolve(other, "ann", none_);
  ASSERT_TRUE(fresh.ok());
  EXPECT_NE(fresh->resolved, v->resolved);  // another snapshot
  EXPECT_EQ(caches_->Resolve(model_, "nobody", none_).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(caches_->Resolve(model_, "", none_).status().code(),
            absl::StatusCode::kInvalidArgument);
  google::protobuf::RepeatedPtrField<v1::ItemRating> adhoc;
  v1::ItemRating* r = adhoc.Add();
  r->set_item_id("a");
  r->set_rating(1);
  absl::StatusOr<UserView> merged = caches_->Resolve(model_, "ann", adhoc);
  ASSERT_TRUE(merged.ok());
  EXPECT_EQ(merged->resolved->ratings.ks[0], 0);  // the ad-hoc rating wins
}

// A model with one user-based RBM whose weight rows tell the items and
// ratings apart, so the hidden input says which ratings it was built from.
std::shared_ptr<const Model> ModelWithMember(float scale) {
  ModelParams params;
  params.scale = *RatingScale::Create(1, 5, 1);
  for (const char* id : {"a", "b", "c"}) params.items.GetOrAdd(id);
  RbmParams p;
  p.Resize(3, 5, 4);
  for (Eigen::Index r = 0; r < p.W.rows(); ++r) {
    for (Eigen::Index j = 0; j < p.W.cols(); ++j) {
      p.W(r, j) = scale * static_cast<float>(r * 10 + j);
    }
  }
  p.c.setConstant(0.5f);
  params.members.push_back(std::move(p));
  return std::make_shared<const Model>(std::move(params));
}

// The cached hidden inputs are those of the ratings and model they were
// resolved from: recomputed after a write of the user's ratings (once the
// writer invalidates, as every write path does) and for another snapshot.
TEST_F(ReadCachesTest, HiddenInputsFollowWritesAndModels) {
  const std::shared_ptr<const Model> m1 = ModelWithMember(1.0f);
  auto check = [](const std::shared_ptr<const Model>& m, const UserView& v) {
    std::vector<float> want;
    m->MemberInputs(v.ratings(), &want);
    EXPECT_EQ(v.resolved->member_x, want);
    return want;
  };
  absl::StatusOr<UserView> v = caches_->Resolve(m1, "ann", none_);
  ASSERT_TRUE(v.ok()) << v.status();
  const std::vector<float> before = check(m1, *v);
  ASSERT_EQ(before.size(), 4u);
  ASSERT_TRUE(store_->UpsertRatings({{"ann", "c", 5, 0}}).ok());
  caches_->InvalidateUsers({"ann"});
  v = caches_->Resolve(m1, "ann", none_);
  ASSERT_TRUE(v.ok());
  ASSERT_EQ(v->resolved->ratings.items.size(), 3u);
  const std::vector<float> after = check(m1, *v);
  EXPECT_NE(after, before);
  ASSERT_TRUE(store_->DeleteRatings("ann", {"a"}).ok());
  caches_->InvalidateUsers({"ann"});
  v = caches_->Resolve(m1, "ann", none_);
  ASSERT_TRUE(v.ok());
  ASSERT_EQ(v->resolved->ratings.items.size(), 2u);
  EXPECT_NE(check(m1, *v), after);
  const std::shared_ptr<const Model> m2 = ModelWithMember(2.0f);
  absl::StatusOr<UserView> swapped = caches_->Resolve(m2, "ann", none_);
  ASSERT_TRUE(swapped.ok());
  EXPECT_NE(check(m2, *swapped), v->resolved->member_x);
  ASSERT_TRUE(store_->DeleteUser("ann").ok());
  caches_->InvalidateUsers({"ann"});
  EXPECT_EQ(caches_->Resolve(m2, "ann", none_).status().code(),
            absl::StatusCode::kNotFound);
}

// The factorisation's fold-in (MemberInputs' last part) carries over to a
// newer snapshot with the same factorisation (an online update's copy) for
// the same ratings, and is computed again after a write or for another
// factorisation: the cached inputs are always the snapshot's own.
TEST_F(ReadCachesTest, FoldInCarriesOverToASnapshotWithTheSameFactorisation) {
  auto with_mf = [](float shift) {
    ModelParams params;
    params.scale = *RatingScale::Create(1, 5, 1);
    for (const char* id : {"a", "b", "c"}) params.items.GetOrAdd(id);
    params.mf.factors = 3;
    params.mf.fold_epochs = 4;
    params.mf.lambda = 0.05f;
    params.mf.learning_rate = 0.1f;
    params.mf.seed = 5;
    params.mf.q = RowMatrixXf::Constant(3, 3, 0.2f);
    params.mf.q(1, 2) += shift;
    params.mf.trained.assign(3, 1);
    return std::make_shared<const Model>(std::move(params));
  };
  auto fresh = [](const std::shared_ptr<const Model>& m, const UserView& v) {
    std::vector<float> x;
    m->MemberInputs(v.ratings(), &x);
    return x;
  };
  const std::shared_ptr<const Model> m1 = with_mf(0.3f);
  absl::StatusOr<UserView> v1 = caches_->Resolve(m1, "ann", none_);
  ASSERT_TRUE(v1.ok()) << v1.status();
  ASSERT_EQ(v1->resolved->member_x.size(), 4u);
  EXPECT_EQ(v1->resolved->member_x, fresh(m1, *v1));
  EXPECT_EQ(v1->resolved->mf_fingerprint, m1->MfFingerprint());
  // An online update's snapshot: a copy, the same factorisation.
  const auto m2 = std::make_shared<const Model>(*m1);
  absl::StatusOr<UserView> v2 = caches_->Resolve(m2, "ann", none_);
  ASSERT_TRUE(v2.ok());
  EXPECT_NE(v2->resolved, v1->resolved);
  EXPECT_EQ(v2->resolved->member_x, fresh(m2, *v2));
  // Another factorisation: folded in against its own factors.
  const std::shared_ptr<const Model> m3 = with_mf(-0.3f);
  absl::StatusOr<UserView> v3 = caches_->Resolve(m3, "ann", none_);
  ASSERT_TRUE(v3.ok());
  EXPECT_EQ(v3->resolved->member_x, fresh(m3, *v3));
  EXPECT_NE(v3->resolved->member_x, v2->resolved->member_x);
  // A write, then a newer snapshot of the same factorisation: the new
  // ratings' fold-in, not the cached one.
  ASSERT_TRUE(store_->UpsertRatings({{"ann", "c", 5, 0}}).ok());
  caches_->InvalidateUsers({"ann"});
  const auto m4 = std::make_shared<const Model>(*m3);
  absl::StatusOr<UserView> v4 = caches_->Resolve(m4, "ann", none_);
  ASSERT_TRUE(v4.ok());
  ASSERT_EQ(v4->resolved->ratings.items.size(), 3u);
  EXPECT_EQ(v4->resolved->member_x, fresh(m4, *v4));
  EXPECT_NE(v4->resolved->member_x, v3->resolved->member_x);
}

TEST_F(ReadCachesTest, TitlesFollowInvalidation) {
  ASSERT_TRUE(store_->PutItems({{"a", "Alpha", "", {}, false}}).ok());
  EXPECT_EQ(caches_->Titles({"a", "zz"}),
            (std::vector<std::string>{"Alpha", ""}));
  ASSERT_TRUE(store_->PutItems({{"a", "Beta", "", {}, false}}).ok());
  EXPECT_EQ(caches_->Titles({"a"})[0], "Alpha");
  caches_->InvalidateTitles({"a"});
  EXPECT_EQ(caches_->Titles({"a"})[0], "Beta");
}

}  // namespace
}  // namespace rbmrec::server
