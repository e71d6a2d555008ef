// TrainingJobs through the service: admission limits (option caps, memory
// and model size estimates) and the TrainProgress contract of rbmrec.proto.

#include "server/models/training_jobs.h"

#include <cstdint>
#include <future>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "core/error_reason.h"
#include "gtest/gtest.h"
#include "server/service/service.h"
#include "tests/server/service_fixture.h"

namespace rbmrec::server {
namespace {

using testing::ServiceFixture;

class TrainingJobsTest : public ServiceFixture {
 protected:
  absl::Status TrainStatus(const v1::TrainRequest& req) {
    return service_->Train(req, [](const v1::TrainProgress&) { return true; });
  }
};

TEST_F(TrainingJobsTest, HugeBatchOrHiddenIsAnErrorNotACrash) {
  LoadSynthetic();
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  for (const char* field :
       {"batch_size", "hidden", "epochs", "cd_steps", "ensemble", "threads"}) {
    v1::TrainRequest req;
    v1::TrainOptions* o = req.mutable_options();
    const std::string f = field;
    if (f == "batch_size") o->set_batch_size(kMax);
    if (f == "hidden") o->set_hidden(kMax);
    if (f == "epochs") o->set_epochs(kMax);
    if (f == "cd_steps") o->set_cd_steps(kMax);
    if (f == "ensemble") o->set_ensemble(kMax);
    if (f == "threads") o->set_threads(kMax);
    absl::Status s = TrainStatus(req);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument)
        << field << ": " << s;
    EXPECT_NE(s.message().find(field), std::string::npos) << s;
    EXPECT_EQ(ReasonOf(s), kReasonLimitExceeded) << field;
  }
  v1::TrainRequest neg;
  neg.mutable_options()->set_batch_size(-1);
  EXPECT_EQ(TrainStatus(neg).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(service_->active_version(), 0);
}

TEST_F(TrainingJobsTest, MemoryAdmissionRefusesWithTheEstimateAndTheLimit) {
  ServiceOptions options = DefaultOptions();
  options.training.max_train_memory_bytes = int64_t{64} << 20;  // 64 MiB
  Start(nullptr, options);
  LoadSynthetic();
  v1::TrainRequest req;
  req.mutable_options()->set_batch_size(kMaxBatchSize);  // within the cap
  req.mutable_options()->set_hidden(kMaxHidden);
  absl::Status s = TrainStatus(req);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_EQ(ReasonOf(s), kReasonMemoryLimit);
  EXPECT_NE(s.message().find("estimated"), std::string::npos) << s;
  EXPECT_NE(s.message().find("64.0 MiB"), std::string::npos) << s;
  EXPECT_NE(s.message().find("--max-train-memory-mb"), std::string::npos) << s;
  // The model-size limit.
  options.training.max_train_memory_bytes = int64_t{1} << 40;
  options.training.max_model_bytes = 100000;
  Start(nullptr, options);
  LoadSynthetic();
  v1::TrainRequest big;
  big.mutable_options()->set_hidden(1000);  // 40 items x 5 x 1000 floats
  s = TrainStatus(big);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_EQ(ReasonOf(s), kReasonMemoryLimit);
  EXPECT_NE(s.message().find("--max-model-mb"), std::string::npos) << s;
  // A small job passes both.
  EXPECT_GT(TrainDone().model_version(), 0);
}

TEST_F(TrainingJobsTest, ValidationFractionHalfIsAccepted) {
  LoadSynthetic();
  v1::TrainRequest req;
  req.mutable_options()->set_validation_fraction(0.5);
  EXPECT_GT(TrainDone(req).model_version(), 0);
  req.mutable_options()->set_validation_fraction(0.51);
  EXPECT_EQ(TrainStatus(req).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(TrainingJobsTest, ValidationRmseIsZeroWithoutValidation) {
  LoadSynthetic();
  v1::TrainRequest req;
  req.mutable_options()->set_validation_fraction(0);
  req.mutable_options()->set_epochs(5);
  const std::vector<v1::TrainProgress> p = TrainSync(req);
  ASSERT_FALSE(p.empty());
  int running = 0;
  for (const v1::TrainProgress& m : p) {
    EXPECT_EQ(m.validation_rmse(), 0) << m.ShortDebugString();
    if (m.state() == v1::TrainProgress::RUNNING && m.rbm() != "rated") {
      ++running;
      EXPECT_GT(m.train_rmse(), 0);
    }
  }
  EXPECT_GT(running, 0);
  EXPECT_EQ(p.back().state(), v1::TrainProgress::SUCCEEDED);
  absl::StatusOr<v1::ListModelsResponse> models = service_->ListModels({});
  ASSERT_TRUE(models.ok());
  EXPECT_EQ(models->models(0).validation_rmse(), 0);
}

TEST_F(TrainingJobsTest, ProgressFollowsTheProto) {
  LoadSynthetic();
  v1::TrainRequest req;
  req.mutable_options()->set_epochs(200);  // early stopping ends sooner
  // With the default momentum (0.8) no RBM of this small synthetic set
  // stops early within 200 epochs; with 0.9 the user-based one does, and
  // the early-stop message is part of what this test checks.
  req.mutable_options()->set_momentum(0.9);
  const std::vector<v1::TrainProgress> p = TrainSync(req);
  ASSERT_GE(p.size(), 3u);
  EXPECT_EQ(p.front().state(), v1::TrainProgress::QUEUED);
  int rated = 0, factorisation = 0;
  for (const v1::TrainProgress& m : p) {
    EXPECT_LE(m.epoch(), m.max_epochs()) << m.ShortDebugString();
    if (m.rbm() == "rated") {
      // The rated RBM trains last, with its own epoch limit and no RMSEs.
      ++rated;
      EXPECT_EQ(m.max_epochs(), rbmrec::TrainOptions{}.rated_max_epochs);
      EXPECT_EQ(m.train_rmse(), 0);
      continue;
    }
    if (m.rbm() == "factorisation") {
      // After the rating RBMs, before the rated one: its passes numbered
      // on (1, 2, ...) over both trainings (30 + 10 at most), the train
      // RMSE of each pass and no validation RMSE.
      EXPECT_EQ(rated, 0) << "factorisation after the rated RBM";
      EXPECT_EQ(m.epoch(), ++factorisation);
      EXPECT_EQ(m.max_epochs(), 40);
      EXPECT_GT(m.train_rmse(), 0);
      EXPECT_LT(m.train_rmse(), 4);
      EXPECT_EQ(m.validation_rmse(), 0);
      // Its own time left: none after its last pass (the rating RBMs'
      // early stops leave their own epoch count short of its limit).
      EXPECT_GE(m.eta_seconds(), 0);
      if (m.epoch() == m.max_epochs()) {
        EXPECT_EQ(m.eta_seconds(), 0);
      }
      continue;
    }
    EXPECT_EQ(m.max_epochs(), 200);
    if (m.state() == v1::TrainProgress::RUNNING) {
      EXPECT_TRUE(m.rbm() == "user" || m.rbm() == "item") << m.rbm();
      EXPECT_EQ(rated, 0) << "user/item after the rated RBM";
      EXPECT_EQ(factorisation, 0) << "user/item after the factorisation";
    }
  }
  EXPECT_GT(rated, 0);
  // 30 passes on the training part, and 10 more on all ratings when the
  // blend is kept.
  EXPECT_TRUE(factorisation == 30 || factorisation == 40) << factorisation;
  const v1::TrainProgress& done = p.back();
  ASSERT_EQ(done.state(), v1::TrainProgress::SUCCEEDED) << done.message();
  EXPECT_EQ(done.rbm(), "");
  EXPECT_TRUE(done.activated());
  EXPECT_GT(done.validation_rmse(), 0);
  int largest = 0;
  for (const v1::TrainProgress& m : p) {
    if (m.state() == v1::TrainProgress::RUNNING) {
      largest = std::max(largest, m.epoch());
    }
  }
  EXPECT_EQ(done.epoch(), largest);
  EXPECT_EQ(done.message().rfind("stopped early: validation RMSE", 0), 0u)
      << done.message();
  EXPECT_NE(done.message().find("user RBM after"), std::string::npos)
      << done.message();
}

TEST_F(TrainingJobsTest, WithoutValidationTheEarlyStopNamesTheTrainingRmse) {
  LoadSynthetic();
  v1::TrainRequest req;
  req.mutable_options()->set_validation_fraction(0);
  req.mutable_options()->set_epochs(100000);  // the plateau ends it
  const std::vector<v1::TrainProgress> p = TrainSync(req);
  ASSERT_FALSE(p.empty());
  const v1::TrainProgress& done = p.back();
  ASSERT_EQ(done.state(), v1::TrainProgress::SUCCEEDED) << done.message();
  EXPECT_LT(done.epoch(), 100000);
  EXPECT_EQ(
      done.message().rfind("stopped early: training RMSE did not improve", 0),
      0u)
      << done.message();
}

TEST_F(TrainingJobsTest, CancelledMessageHasNoRbmAndStatsAlwaysHaveTraining) {
  absl::StatusOr<v1::GetStatsResponse> idle = service_->GetStats({});
  ASSERT_TRUE(idle.ok());
  EXPECT_TRUE(idle->has_training());
  EXPECT_FALSE(idle->training().running());
  // Training that only the cancel below ends (no early stop on a converged
  // training RMSE, which a loaded machine could reach before the cancel).
  ServiceOptions options = DefaultOptions();
  options.train_defaults.patience = 1000000;
  Start(nullptr, options);
  LoadSynthetic();
  v1::TrainRequest req;
  req.mutable_options()->set_epochs(100000);
  req.mutable_options()->set_validation_fraction(0);
  std::promise<void> running;
  bool signalled = false;
  std::vector<v1::TrainProgress> got;
  std::thread job([&] {
    EXPECT_TRUE(service_
                    ->Train(req,
                            [&](const v1::TrainProgress& p) {
                              got.push_back(p);
                              if (p.state() == v1::TrainProgress::RUNNING &&
                                  !signalled) {
                                signalled = true;
                                running.set_value();
                              }
                              return true;
                            })
                    .ok());
  });
  running.get_future().wait();
  absl::StatusOr<v1::GetStatsResponse> busy = service_->GetStats({});
  ASSERT_TRUE(busy.ok());
  EXPECT_TRUE(busy->training().running());
  EXPECT_EQ(busy->training().max_epochs(), 100000);
  ASSERT_TRUE(service_->CancelTraining({}).ok());
  job.join();
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got.back().state(), v1::TrainProgress::CANCELLED);
  EXPECT_EQ(got.back().rbm(), "");
  EXPECT_FALSE(got.back().activated());
  idle = service_->GetStats({});
  ASSERT_TRUE(idle.ok());
  EXPECT_TRUE(idle->has_training());
  EXPECT_FALSE(idle->training().running());
}

}  // namespace
}  // namespace rbmrec::server
