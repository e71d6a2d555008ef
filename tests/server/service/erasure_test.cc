// The erasure guarantee of DeleteUser (proto/rbmrec.proto,
// server/service/service.h): after the call the user is answered like a
// never-seen user, and neither the served model nor any stored version holds
// per-user state of them.

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/model.h"
#include "core/model_file.h"
#include "core/online.h"
#include "gtest/gtest.h"
#include "server/service/service.h"
#include "store/store.h"
#include "tests/server/service_fixture.h"

namespace rbmrec::server {
namespace {

using testing::I;
using testing::ServiceFixture;
using testing::U;

class ErasureTest : public ServiceFixture {
 protected:
  static v1::TrainRequest Always() {
    v1::TrainRequest req;
    req.set_activation(v1::ACTIVATE_ALWAYS);
    return req;
  }
  // Every stored version, decoded.
  std::vector<Model> StoredModels() {
    std::vector<Model> out;
    absl::StatusOr<std::vector<store::ModelInfo>> models = store_->ListModels();
    EXPECT_TRUE(models.ok()) << models.status();
    if (!models.ok()) return out;
    for (const store::ModelInfo& m : *models) {
      absl::StatusOr<std::string> blob = store_->LoadModelBlob(m.version);
      EXPECT_TRUE(blob.ok());
      if (!blob.ok()) continue;
      absl::StatusOr<Model> model = DeserializeModel(*blob);
      EXPECT_TRUE(model.ok()) << model.status();
      if (model.ok()) out.push_back(std::move(*model));
    }
    return out;
  }
  // The model holds nothing of `user` (it knew the user before, so
  // `index` is the user's old index).
  static void ExpectNoTraceOf(const Model& model, const std::string& user,
                              int32_t index) {
    EXPECT_EQ(model.users().Find(user), -1);
    ASSERT_LT(index, model.users().size());
    EXPECT_EQ(model.users().Name(index), ErasedUserId(index));
    const RbmParams& irbm = model.item_rbm();
    if (irbm.F == 0) return;
    for (int k = 0; k < irbm.K; ++k) {
      EXPECT_EQ(irbm.W.row(irbm.Row(index, k)).cwiseAbs().maxCoeff(), 0.0f);
      EXPECT_EQ(irbm.b[irbm.Row(index, k)], 0.0f);
    }
  }
};

TEST_F(ErasureTest, DeletedUserIsAnsweredLikeANeverSeenUser) {
  LoadSynthetic();
  TrainDone(Always());
  TrainDone(Always());  // two stored versions, both knowing u5
  const std::string user = U(5);
  const int32_t index =
      service_->registry_for_test().Current().model->users().Find(user);
  ASSERT_GE(index, 0);
  ASSERT_TRUE(PredictS(user, I(1)).ok());

  v1::DeleteUserRequest del;
  del.set_user_id(user);
  absl::StatusOr<v1::DeleteUserResponse> r = service_->DeleteUser(del);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->deleted_ratings(), 0);
  EXPECT_TRUE(r->erased_from_served_model());
  EXPECT_EQ(r->model_versions_rewritten(), 2);
  EXPECT_EQ(r->erasures_since_training(), 1);
  EXPECT_FALSE(r->retrain_started());

  // Answered as a never-seen id is.
  absl::StatusOr<v1::PredictRatingsResponse> gone = PredictS(user, I(1));
  absl::StatusOr<v1::PredictRatingsResponse> never = PredictS("nobody", I(1));
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(never.status().code(), absl::StatusCode::kNotFound);
  // Recommend: the cold start, as for any user without ratings. The
  // popularity order counts the deleted ratings out once the online updater
  // has applied them (asynchronously, as for any write).
  service_->FlushOnlineForTest();
  v1::RecommendRequest rec;
  rec.set_user_id(user);
  rec.set_n(5);
  absl::StatusOr<v1::RecommendResponse> cold = service_->Recommend(rec);
  ASSERT_TRUE(cold.ok()) << cold.status();
  EXPECT_EQ(cold->fallback(), v1::FALLBACK_POPULAR);
  rec.set_user_id("nobody");
  absl::StatusOr<v1::RecommendResponse> nobody = service_->Recommend(rec);
  ASSERT_TRUE(nobody.ok()) << nobody.status();
  EXPECT_EQ(cold->SerializeAsString(), nobody->SerializeAsString());
  // With ad-hoc ratings, the same answer as for any anonymous user.
  v1::PredictRatingsRequest adhoc;
  adhoc.set_user_id(user);
  adhoc.add_item_ids(I(3));
  v1::ItemRating* rating = adhoc.add_ratings();
  rating->set_item_id(I(1));
  rating->set_rating(5);
  absl::StatusOr<v1::PredictRatingsResponse> as_user =
      service_->PredictRatings(adhoc);
  adhoc.set_user_id("");
  absl::StatusOr<v1::PredictRatingsResponse> as_anon =
      service_->PredictRatings(adhoc);
  ASSERT_TRUE(as_user.ok()) << as_user.status();
  ASSERT_TRUE(as_anon.ok()) << as_anon.status();
  ASSERT_EQ(as_user->predictions_size(), 1);
  ASSERT_EQ(as_anon->predictions_size(), 1);
  EXPECT_EQ(as_user->predictions(0).SerializeAsString(),
            as_anon->predictions(0).SerializeAsString());

  // No per-user state in the served model or any stored version.
  ExpectNoTraceOf(*service_->registry_for_test().Current().model, user, index);
  std::vector<Model> stored = StoredModels();
  ASSERT_EQ(stored.size(), 2u);
  for (const Model& m : stored) ExpectNoTraceOf(m, user, index);

  // Deleting again: nothing knows the user any more.
  EXPECT_EQ(service_->DeleteUser(del).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(ErasureTest, ItemInputsLoseExactlyTheUsersContribution) {
  ServiceOptions options = DefaultOptions();
  options.online.enabled = false;
  Start(nullptr, options);
  LoadSynthetic();
  TrainDone(Always());
  std::shared_ptr<const Model> before =
      service_->registry_for_test().Current().model;
  if (before->item_rbm().F == 0) GTEST_SKIP() << "no item-based RBM";
  const std::string user = U(7);
  const int32_t index = before->users().Find(user);
  ASSERT_GE(index, 0);
  // Expected: item_x(q) minus W_I[user, k_q] for each item q the user rated.
  RowMatrixXf expected = before->item_x();
  const RbmParams& irbm = before->item_rbm();
  for (int i = 0; i < testing::kItems; ++i) {
    if (!testing::Rated(7, i)) continue;
    const int32_t q = before->items().Find(I(i));
    absl::StatusOr<int> k = before->scale().Index(testing::PlantedRating(7, i));
    ASSERT_TRUE(k.ok());
    expected.row(q) -= irbm.W.row(irbm.Row(index, *k));
  }
  v1::DeleteUserRequest del;
  del.set_user_id(user);
  ASSERT_TRUE(service_->DeleteUser(del).ok());
  std::shared_ptr<const Model> after =
      service_->registry_for_test().Current().model;
  ASSERT_NE(after, before);
  EXPECT_LT((after->item_x() - expected).cwiseAbs().maxCoeff(), 1e-5f);
  // Another user's answers still come from the model.
  EXPECT_TRUE(PredictS(U(8), I(1)).ok());
}

TEST_F(ErasureTest, ATrainingThatOverlapsAnErasureDoesNotBringTheUserBack) {
  LoadSynthetic();
  TrainDone(Always());
  ModelRegistry& registry = service_->registry_for_test();
  const uint64_t before = registry.ErasureSeq();
  // As TrainingJobs does: the job's data was read before the erasure.
  std::shared_ptr<const Model> trained = registry.Current().model;
  const std::string user = U(9);
  ASSERT_GE(trained->users().Find(user), 0);
  v1::DeleteUserRequest del;
  del.set_user_id(user);
  ASSERT_TRUE(service_->DeleteUser(del).ok());
  store::ModelInfo meta;
  meta.kind = "full";
  absl::StatusOr<ModelRegistry::Published> pub = registry.PublishFull(
      trained, meta, SerializeModel(*trained), Activation::kAlways, 0, before);
  ASSERT_TRUE(pub.ok()) << pub.status();
  EXPECT_EQ(registry.Current().model->users().Find(user), -1);
  absl::StatusOr<std::string> blob = store_->LoadModelBlob(pub->version);
  ASSERT_TRUE(blob.ok());
  absl::StatusOr<Model> stored = DeserializeModel(*blob);
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->users().Find(user), -1);
}

TEST_F(ErasureTest, RetrainAfterErasuresStartsATraining) {
  ServiceOptions options = DefaultOptions();
  options.retrain_after_erasures = 2;
  Start(nullptr, options);
  LoadSynthetic();
  TrainDone(Always());
  v1::DeleteUserRequest del;
  del.set_user_id(U(1));
  absl::StatusOr<v1::DeleteUserResponse> first = service_->DeleteUser(del);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->retrain_started());
  del.set_user_id(U(2));
  absl::StatusOr<v1::DeleteUserResponse> second = service_->DeleteUser(del);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->erasures_since_training(), 2);
  EXPECT_TRUE(second->retrain_started());
  // The started training covers the erasures so far: the count restarts.
  service_->CancelTraining({}).IgnoreError();
  for (int i = 0; i < 200 && service_->GetStats({})->training().running();
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  del.set_user_id(U(3));
  absl::StatusOr<v1::DeleteUserResponse> third = service_->DeleteUser(del);
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_EQ(third->erasures_since_training(), 1);
}

TEST_F(ErasureTest, UnknownUserIsNotFound) {
  LoadSynthetic();
  TrainDone(Always());
  v1::DeleteUserRequest del;
  del.set_user_id("nobody");
  EXPECT_EQ(service_->DeleteUser(del).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace rbmrec::server
