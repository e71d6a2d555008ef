// ModelRegistry through the service (retention, pins, deletion, activation
// policy, fallback at start) and VersionCache alone.

#include "server/models/model_registry.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/model.h"
#include "gtest/gtest.h"
#include "server/service/service.h"
#include "store/store.h"
#include "tests/server/service_fixture.h"

namespace rbmrec::server {
namespace {

using testing::ServiceFixture;

class RegistryTest : public ServiceFixture {
 protected:
  std::vector<store::ModelInfo> Models() {
    absl::StatusOr<std::vector<store::ModelInfo>> m = store_->ListModels();
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? *m : std::vector<store::ModelInfo>{};
  }
  int Count(const std::string& kind) {
    int n = 0;
    for (const store::ModelInfo& m : Models()) n += m.kind == kind;
    return n;
  }
  static v1::TrainRequest Always() {
    v1::TrainRequest req;
    req.set_activation(v1::ACTIVATE_ALWAYS);
    return req;
  }
  // One online publish: a new rating, applied and persisted.
  void OnlinePublish(int round) {
    v1::AddRatingsRequest b;
    *b.add_ratings() =
        testing::Row("u1", testing::I(round % 40), 1 + round % 5);
    ASSERT_TRUE(service_->AddRatings({b}).ok());
    service_->FlushOnlineForTest();
    ASSERT_TRUE(service_->PersistOnlineForTest().ok());
  }
};

TEST_F(RegistryTest, ServingOnlyWithAModel) {
  EXPECT_FALSE(service_->Serving());
  EXPECT_EQ(PredictS("u0", "i1").status().code(),
            absl::StatusCode::kFailedPrecondition);
  LoadSynthetic();
  TrainDone();
  EXPECT_TRUE(service_->Serving());
  EXPECT_TRUE(PredictS("u0", "i1").ok());
}

TEST_F(RegistryTest, RetentionBoundsVersionsAfterManyPublishes) {
  LoadSynthetic();
  for (int i = 0; i < 5; ++i) TrainDone(Always());
  EXPECT_EQ(Count("full"), 3);  // keep_full_models default
  for (int round = 0; round < 8; ++round) OnlinePublish(round);
  EXPECT_EQ(Count("online"), 2);  // keep_online_models default
  EXPECT_EQ(Count("full"), 3);
  const std::vector<store::ModelInfo> models = Models();
  ASSERT_FALSE(models.empty());
  EXPECT_EQ(models[0].kind, "online");
  EXPECT_TRUE(models[0].active);
  absl::StatusOr<v1::GetStatsResponse> stats = service_->GetStats({});
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->model_versions(), 5);
  EXPECT_EQ(stats->active_model_version(), models[0].version);
}

TEST_F(RegistryTest, FollowServesTheVersionAnotherProcessActivated) {
  LoadSynthetic();
  TrainDone(Always());
  TrainDone(Always());
  const std::vector<store::ModelInfo> models = Models();
  ASSERT_EQ(models.size(), 2u);
  const int64_t older = models[1].version;
  const int64_t newer = models[0].version;
  ModelRegistry& registry = service_->registry_for_test();
  ASSERT_EQ(registry.Current().version, newer);
  // Nothing changed in the store: Follow keeps the served model.
  const Served before = registry.Current();
  absl::StatusOr<int64_t> same = registry.Follow(0);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(*same, newer);
  EXPECT_EQ(registry.Current().model, before.model);
  // "Another process" (the store directly) activates the older version.
  ASSERT_TRUE(store_->ActivateModel(older).ok());
  EXPECT_EQ(registry.Current().version, newer);  // not until Follow
  absl::StatusOr<int64_t> followed = registry.Follow(7);
  ASSERT_TRUE(followed.ok()) << followed.status();
  EXPECT_EQ(*followed, older);
  EXPECT_EQ(registry.Current().version, older);
  EXPECT_EQ(registry.Current().online_seq, 7u);
  EXPECT_TRUE(PredictS("u0", "i1").ok());
  absl::StatusOr<v1::GetStatsResponse> stats = service_->GetStats({});
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->active_model_version(), older);
  EXPECT_TRUE(stats->leader());  // SQLite: the only process leads
  EXPECT_EQ(stats->leader_address(), "");
}

TEST_F(RegistryTest, PinDeleteAndPrune) {
  LoadSynthetic();
  const int64_t first = TrainDone(Always()).model_version();
  v1::PinModelRequest pin;
  pin.set_version(first);
  pin.set_pinned(true);
  absl::StatusOr<v1::ModelInfo> pinned = service_->PinModel(pin);
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  EXPECT_TRUE(pinned->pinned());
  std::vector<int64_t> versions;
  for (int i = 0; i < 4; ++i)
    versions.push_back(TrainDone(Always()).model_version());
  // 3 newest full + the pinned first one.
  std::vector<store::ModelInfo> models = Models();
  ASSERT_EQ(models.size(), 4u);
  EXPECT_EQ(models.back().version, first);
  EXPECT_TRUE(models.back().pinned);

  v1::DeleteModelRequest del;
  del.set_version(versions.back());  // active
  absl::Status s = service_->DeleteModel(del).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  del.set_version(first);  // pinned
  s = service_->DeleteModel(del).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("pinned"), std::string::npos) << s;
  del.set_force(true);
  absl::StatusOr<v1::DeleteModelResponse> freed = service_->DeleteModel(del);
  ASSERT_TRUE(freed.ok()) << freed.status();
  EXPECT_GT(freed->freed_bytes(), 0);
  EXPECT_EQ(service_->DeleteModel(del).status().code(),
            absl::StatusCode::kNotFound);
  del.set_version(0);
  EXPECT_EQ(service_->DeleteModel(del).status().code(),
            absl::StatusCode::kInvalidArgument);
  pin.set_version(12345);
  EXPECT_EQ(service_->PinModel(pin).status().code(),
            absl::StatusCode::kNotFound);

  v1::PruneModelsRequest prune;
  prune.set_keep_full(1);
  absl::StatusOr<v1::PruneModelsResponse> pruned = service_->PruneModels(prune);
  ASSERT_TRUE(pruned.ok()) << pruned.status();
  ASSERT_EQ(pruned->deleted_versions_size(), 2);
  EXPECT_EQ(pruned->deleted_versions(0), versions[2]);  // newest first
  EXPECT_EQ(pruned->deleted_versions(1), versions[1]);
  EXPECT_GT(pruned->freed_bytes(), 0);
  models = Models();
  ASSERT_EQ(models.size(), 1u);
  EXPECT_TRUE(models[0].active);
  prune.set_keep_full(-1);
  EXPECT_EQ(service_->PruneModels(prune).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(RegistryTest, IfBetterKeepsTheGoodModelWhenAJobIsWorse) {
  LoadSynthetic();
  const v1::TrainProgress good = TrainDone();  // nothing served: activated
  EXPECT_TRUE(good.activated()) << good.message();
  ASSERT_GT(good.validation_rmse(), 0);
  v1::TrainRequest bad;
  bad.mutable_options()->set_hidden(1);
  bad.mutable_options()->set_epochs(1);
  bad.mutable_options()->set_learning_rate(1e-6);
  const v1::TrainProgress worse = TrainDone(bad);
  ASSERT_GT(worse.validation_rmse(), good.validation_rmse() + 0.005)
      << "the test needs a clearly worse model";
  EXPECT_FALSE(worse.activated());
  EXPECT_NE(worse.message().find("not activated"), std::string::npos)
      << worse.message();
  EXPECT_GT(worse.model_version(), good.model_version());  // stored
  EXPECT_EQ(service_->active_version(), good.model_version());
  absl::StatusOr<std::optional<int64_t>> active = store_->ActiveModelVersion();
  ASSERT_TRUE(active.ok());
  EXPECT_EQ(active->value_or(0), good.model_version());
  // The stored but inactive version still answers explicit requests.
  v1::PredictRatingsRequest req;
  req.set_user_id("u0");
  req.add_item_ids("i1");
  req.set_model_version(worse.model_version());
  absl::StatusOr<v1::PredictRatingsResponse> r = service_->PredictRatings(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->model_version(), worse.model_version());

  bad.set_activation(v1::ACTIVATE_NEVER);
  const v1::TrainProgress never = TrainDone(bad);
  EXPECT_FALSE(never.activated());
  EXPECT_NE(never.message().find("never"), std::string::npos);
  bad.set_activation(v1::ACTIVATE_ALWAYS);
  const v1::TrainProgress always = TrainDone(bad);
  EXPECT_TRUE(always.activated());
  EXPECT_EQ(service_->active_version(), always.model_version());

  bad.set_activation(static_cast<v1::ActivationPolicy>(5));
  EXPECT_EQ(service_->Train(bad, [](const v1::TrainProgress&) { return true; })
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(RegistryTest, IfBetterDoesNotSwapWhenARmseIsMissing) {
  LoadSynthetic();
  const v1::TrainProgress good = TrainDone();
  ASSERT_TRUE(good.activated());
  v1::TrainRequest unvalidated;
  unvalidated.mutable_options()->set_validation_fraction(0);
  unvalidated.mutable_options()->set_epochs(3);
  const v1::TrainProgress blind = TrainDone(unvalidated);
  EXPECT_FALSE(blind.activated());
  EXPECT_NE(blind.message().find("this one has none"), std::string::npos)
      << blind.message();
  EXPECT_EQ(service_->active_version(), good.model_version());
  // Served by hand, the model without an RMSE is then the active one: a
  // validated job cannot be compared with it either.
  v1::ActivateModelRequest activate;
  activate.set_version(blind.model_version());
  ASSERT_TRUE(service_->ActivateModel(activate).ok());
  const v1::TrainProgress next = TrainDone();
  EXPECT_FALSE(next.activated());
  EXPECT_NE(next.message().find(absl::StrCat(
                "the active version ", blind.model_version(), " has none")),
            std::string::npos)
      << next.message();
  EXPECT_EQ(service_->active_version(), blind.model_version());
}

TEST_F(RegistryTest, ListModelsMarksCorruptVersions) {
  LoadSynthetic();
  const int64_t good = TrainDone().model_version();
  absl::StatusOr<std::string> blob = store_->LoadModelBlob(good);
  ASSERT_TRUE(blob.ok());
  (*blob)[blob->size() / 2] ^= 0x10;
  store::ModelInfo meta;
  meta.kind = "full";
  absl::StatusOr<int64_t> corrupt = store_->InsertModel(meta, *blob, false);
  ASSERT_TRUE(corrupt.ok());
  auto corrupt_of = [&](const v1::ListModelsResponse& r, int64_t v) {
    for (const v1::ModelInfo& m : r.models()) {
      if (m.version() == v) return m.corrupt();
    }
    return std::string("<missing>");
  };
  // Not known yet without verify; verify reads every blob.
  absl::StatusOr<v1::ListModelsResponse> listed = service_->ListModels({});
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(corrupt_of(*listed, *corrupt), "");
  v1::ListModelsRequest verify;
  verify.set_verify(true);
  listed = service_->ListModels(verify);
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_NE(corrupt_of(*listed, *corrupt).find("checksum"), std::string::npos)
      << corrupt_of(*listed, *corrupt);
  EXPECT_EQ(corrupt_of(*listed, good), "");
  // Remembered afterwards.
  listed = service_->ListModels({});
  ASSERT_TRUE(listed.ok());
  EXPECT_NE(corrupt_of(*listed, *corrupt), "");
}

TEST_F(RegistryTest, ActivatingACorruptVersionFailsAndKeepsTheOldOne) {
  LoadSynthetic();
  const int64_t good = TrainDone().model_version();
  absl::StatusOr<std::string> blob = store_->LoadModelBlob(good);
  ASSERT_TRUE(blob.ok());
  (*blob)[blob->size() / 2] ^= 0x10;  // a bit flip
  store::ModelInfo meta;
  meta.kind = "full";
  absl::StatusOr<int64_t> corrupt = store_->InsertModel(meta, *blob, false);
  ASSERT_TRUE(corrupt.ok());
  v1::ActivateModelRequest req;
  req.set_version(*corrupt);
  absl::Status s = service_->ActivateModel(req).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("unchanged"), std::string::npos) << s;
  EXPECT_EQ(service_->active_version(), good);
  absl::StatusOr<std::optional<int64_t>> active = store_->ActiveModelVersion();
  ASSERT_TRUE(active.ok());
  EXPECT_EQ(active->value_or(0), good);
  EXPECT_TRUE(PredictS("u0", "i1").ok());
}

// Stores a copy of `version`'s blob with one bit flipped as a new version
// and makes it the active one (the database at `path`, no server running).
void StoreDamagedCopyAsActive(const std::string& path, int64_t version) {
  absl::StatusOr<std::unique_ptr<store::Store>> st = store::Store::Open(path);
  ASSERT_TRUE(st.ok()) << st.status();
  absl::StatusOr<std::string> blob = (*st)->LoadModelBlob(version);
  ASSERT_TRUE(blob.ok());
  (*blob)[blob->size() / 3] ^= 0x01;
  store::ModelInfo meta;
  meta.kind = "full";
  ASSERT_TRUE((*st)->InsertModel(meta, *blob, true).ok());
}

TEST(RegistryStartTest, CorruptActiveBlobFallsBackToTheNewestIntactVersion) {
  const std::string path =
      (std::filesystem::temp_directory_path() /
       ("rbmrec_registry_test_" + std::to_string(::getpid()) + ".db"))
          .string();
  std::filesystem::remove(path);
  ServiceOptions options = ServiceFixture::DefaultOptions();
  options.registry.activation = Activation::kAlways;
  int64_t intact = 0;
  {
    absl::StatusOr<std::unique_ptr<store::Store>> st = store::Store::Open(path);
    ASSERT_TRUE(st.ok()) << st.status();
    absl::StatusOr<std::unique_ptr<RbmrecService>> svc =
        RbmrecService::Create(std::move(*st), options);
    ASSERT_TRUE(svc.ok());
    ASSERT_TRUE((*svc)->AddRatings({testing::SyntheticBatch()}).ok());
    for (int i = 0; i < 2; ++i) {
      v1::TrainProgress last;
      ASSERT_TRUE((*svc)
                      ->Train({},
                              [&](const v1::TrainProgress& p) {
                                last = p;
                                return true;
                              })
                      .ok());
      ASSERT_EQ(last.state(), v1::TrainProgress::SUCCEEDED);
      intact = last.model_version();
    }
  }
  // A bit flip in a copy of the newest model, stored as the active one.
  StoreDamagedCopyAsActive(path, intact);
  absl::StatusOr<std::unique_ptr<store::Store>> st = store::Store::Open(path);
  ASSERT_TRUE(st.ok());
  store::Store* store = st->get();
  absl::StatusOr<std::unique_ptr<RbmrecService>> svc =
      RbmrecService::Create(std::move(*st), options);
  ASSERT_TRUE(svc.ok());
  EXPECT_TRUE((*svc)->Serving());
  EXPECT_EQ((*svc)->active_version(), intact);
  absl::StatusOr<v1::ListModelsResponse> models = (*svc)->ListModels({});
  ASSERT_TRUE(models.ok());
  for (const v1::ModelInfo& m : models->models()) {
    EXPECT_EQ(m.active(), m.version() == intact) << m.version();
  }
  absl::StatusOr<std::optional<int64_t>> active = store->ActiveModelVersion();
  ASSERT_TRUE(active.ok());
  EXPECT_EQ(active->value_or(0), intact);
  absl::StatusOr<v1::GetStatsResponse> stats = (*svc)->GetStats({});
  ASSERT_TRUE(stats.ok());
  EXPECT_NE(stats->model_load_error().find("could not be loaded"),
            std::string::npos)
      << stats->model_load_error();
  EXPECT_NE(stats->model_load_error().find(
                absl::StrCat("fell back to version ", intact)),
            std::string::npos)
      << stats->model_load_error();
  v1::PredictRatingsRequest req;
  req.set_user_id("u0");
  req.add_item_ids("i1");
  EXPECT_TRUE((*svc)->PredictRatings(req).ok());
  svc->reset();
  std::filesystem::remove(path);
  std::filesystem::remove(path + "-wal");
  std::filesystem::remove(path + "-shm");
  std::filesystem::remove(path + ".lock");
}

TEST(RegistryStartTest, FallbackPrefersTheLastActiveVersionOverANewerOne) {
  const std::string path =
      (std::filesystem::temp_directory_path() /
       ("rbmrec_registry_last_active_" + std::to_string(::getpid()) + ".db"))
          .string();
  std::filesystem::remove(path);
  ServiceOptions options = ServiceFixture::DefaultOptions();
  int64_t was_active = 0, never = 0;
  {
    absl::StatusOr<std::unique_ptr<store::Store>> st = store::Store::Open(path);
    ASSERT_TRUE(st.ok()) << st.status();
    absl::StatusOr<std::unique_ptr<RbmrecService>> svc =
        RbmrecService::Create(std::move(*st), options);
    ASSERT_TRUE(svc.ok());
    ASSERT_TRUE((*svc)->AddRatings({testing::SyntheticBatch()}).ok());
    for (v1::ActivationPolicy policy :
         {v1::ACTIVATE_ALWAYS, v1::ACTIVATE_NEVER}) {
      v1::TrainRequest req;
      req.set_activation(policy);
      v1::TrainProgress last;
      ASSERT_TRUE((*svc)
                      ->Train(req,
                              [&](const v1::TrainProgress& p) {
                                last = p;
                                return true;
                              })
                      .ok());
      ASSERT_EQ(last.state(), v1::TrainProgress::SUCCEEDED);
      (policy == v1::ACTIVATE_ALWAYS ? was_active : never) =
          last.model_version();
    }
  }
  StoreDamagedCopyAsActive(path, was_active);
  absl::StatusOr<std::unique_ptr<store::Store>> st = store::Store::Open(path);
  ASSERT_TRUE(st.ok());
  absl::StatusOr<std::unique_ptr<RbmrecService>> svc =
      RbmrecService::Create(std::move(*st), options);
  ASSERT_TRUE(svc.ok());
  // Not the newest intact version (trained with activation never).
  EXPECT_GT(never, was_active);
  EXPECT_EQ((*svc)->active_version(), was_active);
  absl::StatusOr<v1::GetStatsResponse> stats = (*svc)->GetStats({});
  ASSERT_TRUE(stats.ok());
  EXPECT_NE(stats->model_load_error().find("most recently active"),
            std::string::npos)
      << stats->model_load_error();
  svc->reset();
  for (const char* suffix : {"", "-wal", "-shm", ".lock"}) {
    std::filesystem::remove(path + suffix);
  }
}

TEST(VersionCacheTest, StaysUnderItsByteBudgetLeastRecentlyUsedFirst) {
  auto model = [](int items) {
    ModelParams params;
    params.item_x.setZero(items, 100);  // 400 bytes an item
    return std::make_shared<const Model>(std::move(params));
  };
  const size_t one = VersionCache::ModelBytes(*model(100));
  VersionCache cache(2 * one + one / 2);
  cache.Put(1, model(100));
  cache.Put(2, model(100));
  ASSERT_NE(cache.Find(1), nullptr);  // 1 is now the most recent
  cache.Put(3, model(100));           // evicts 2
  EXPECT_EQ(cache.Find(2), nullptr);
  EXPECT_NE(cache.Find(1), nullptr);
  EXPECT_NE(cache.Find(3), nullptr);
  EXPECT_LE(cache.bytes(), 2 * one + one / 2);
  EXPECT_EQ(cache.size(), 2u);
  cache.Put(4, model(1000));  // larger than the whole budget: not kept
  EXPECT_EQ(cache.Find(4), nullptr);
  EXPECT_EQ(cache.size(), 2u);
  cache.Erase(1);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.bytes(), one);
}

}  // namespace
}  // namespace rbmrec::server
