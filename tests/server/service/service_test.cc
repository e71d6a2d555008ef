// In-process tests of RbmrecService on a ":memory:" store with a small
// synthetic data set with planted structure: 60 users x 40 items, users of
// group g (= user % 2) rate items of the same half (item / 20 == g) 4-5 and
// the other half 1-2.

#include "server/service/service.h"

#include <chrono>
#include <cmath>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/caches/bounded_cache.h"
#include "store/store.h"

namespace rbmrec::server {
namespace {

constexpr int kUsers = 60;
constexpr int kItems = 40;

std::string U(int u) { return absl::StrCat("u", u); }
std::string I(int i) { return absl::StrCat("i", i); }

double PlantedRating(int u, int i) {
  const bool likes = (i / 20) == (u % 2);
  const int wiggle = (u * 7 + i * 3) % 2;
  return likes ? 4.0 + wiggle : 1.0 + wiggle;
}

bool Rated(int u, int i) { return (u * 13 + i * 7) % 5 < 3; }  // ~60%

v1::AddRatingsRequest SyntheticBatch() {
  v1::AddRatingsRequest req;
  for (int u = 0; u < kUsers; ++u) {
    for (int i = 0; i < kItems; ++i) {
      if (!Rated(u, i)) continue;
      v1::Rating* r = req.add_ratings();
      r->set_user_id(U(u));
      r->set_item_id(I(i));
      r->set_rating(PlantedRating(u, i));
    }
  }
  return req;
}

v1::Rating Row(const std::string& u, const std::string& i, double r) {
  v1::Rating row;
  row.set_user_id(u);
  row.set_item_id(i);
  row.set_rating(r);
  return row;
}

size_t LengthPlus10(const std::string& key, const std::string& value) {
  return key.size() + value.size() + 10;
}

TEST(BoundedCacheTest, StaysUnderItsByteBudget) {
  BoundedCache<std::string, &LengthPlus10> cache(100);
  cache.Put("a", std::string(20, 'x'));  // 31 bytes
  cache.Put("b", std::string(20, 'y'));  // 62
  ASSERT_NE(cache.Find("a"), nullptr);
  EXPECT_EQ(*cache.Find("b"), std::string(20, 'y'));
  EXPECT_EQ(cache.bytes(), 62u);
  cache.Put("a", std::string(5, 'z'));  // replaces: 62 - 31 + 16
  EXPECT_EQ(cache.bytes(), 47u);
  EXPECT_EQ(*cache.Find("a"), "zzzzz");
  cache.Put("c", std::string(50, 'w'));  // 47 + 61 > 100: emptied first
  EXPECT_EQ(cache.Find("a"), nullptr);
  EXPECT_EQ(cache.Find("b"), nullptr);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.bytes(), 61u);
  cache.Put("huge", std::string(200, 'h'));  // over the whole budget
  EXPECT_EQ(cache.Find("huge"), nullptr);
  EXPECT_EQ(cache.bytes(), 61u);
  cache.Erase("c");
  cache.Erase("never-there");
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(cache.bytes(), 0u);
}

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(nullptr); }

  // (Re)creates the service; `prepare` may write to the store first.
  void Start(const std::function<void(store::Store*)>& prepare,
             ServiceOptions options = DefaultOptions()) {
    service_.reset();
    absl::StatusOr<std::unique_ptr<store::Store>> st =
        store::Store::Open(":memory:");
    ASSERT_TRUE(st.ok()) << st.status();
    store_ = st->get();
    if (prepare) prepare(store_);
    absl::StatusOr<std::unique_ptr<RbmrecService>> svc =
        RbmrecService::Create(std::move(*st), options);
    ASSERT_TRUE(svc.ok()) << svc.status();
    service_ = std::move(*svc);
  }

  static ServiceOptions DefaultOptions() {
    ServiceOptions o;
    o.train_defaults.hidden = 8;
    o.train_defaults.max_epochs = 40;
    o.train_defaults.learning_rate = 0.1f;
    o.train_defaults.threads = 1;
    o.train_defaults.validation_fraction = 0.1;
    o.max_train_threads = 1;
    o.limits.max_batch_rows = 5000;
    o.online.publish_seconds = 3600;
    // These tests publish every model they train; the if-better policy has
    // its own tests (registry_test.cc).
    o.registry.activation = Activation::kAlways;
    return o;
  }

  void LoadSynthetic() {
    absl::StatusOr<v1::AddRatingsResponse> r =
        service_->AddRatings({SyntheticBatch()});
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->rejected(), 0);
  }

  // Trains synchronously; returns all progress messages.
  std::vector<v1::TrainProgress> TrainSync(v1::TrainRequest req = {}) {
    std::vector<v1::TrainProgress> out;
    absl::Status s = service_->Train(req, [&](const v1::TrainProgress& p) {
      out.push_back(p);
      return true;
    });
    EXPECT_TRUE(s.ok()) << s;
    return out;
  }

  int64_t TrainOk() {
    std::vector<v1::TrainProgress> p = TrainSync();
    EXPECT_FALSE(p.empty());
    if (p.empty()) return 0;
    EXPECT_EQ(p.back().state(), v1::TrainProgress::SUCCEEDED)
        << p.back().message();
    return p.back().model_version();
  }

  v1::PredictRatingsResponse Predict(const std::string& user,
                                     std::vector<std::string> items) {
    v1::PredictRatingsRequest req;
    req.set_user_id(user);
    for (auto& i : items) req.add_item_ids(i);
    absl::StatusOr<v1::PredictRatingsResponse> r =
        service_->PredictRatings(req);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : v1::PredictRatingsResponse{};
  }

  store::Store* store_ = nullptr;  // owned by service_
  std::unique_ptr<RbmrecService> service_;
};

TEST_F(ServiceTest, AddRatingsValidatesEachRow) {
  v1::AddRatingsRequest b;
  *b.add_ratings() = Row("u1", "i1", 4);                   // ok
  *b.add_ratings() = Row("", "i1", 4);                     // empty user
  *b.add_ratings() = Row("u1", std::string(300, 'x'), 4);  // long item
  *b.add_ratings() = Row("u1", "i2", std::nan(""));        // NaN
  *b.add_ratings() = Row("u1", "i3", 7);                   // off scale
  *b.add_ratings() = Row("u1", "i4", 2.5);                 // off step
  *b.add_ratings() = Row("u2", "i1", 3);                   // ok
  absl::StatusOr<v1::AddRatingsResponse> r = service_->AddRatings({b});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->accepted(), 2);
  EXPECT_EQ(r->rejected(), 5);
  EXPECT_EQ(r->batches(), 1);
  ASSERT_EQ(r->rejected_rows_size(), 5);
  EXPECT_EQ(r->rejected_rows(0).row(), 1);
  EXPECT_NE(r->rejected_rows(0).reason().find("row 1"), std::string::npos);
  EXPECT_NE(r->rejected_rows(0).reason().find("user_id is empty"),
            std::string::npos);
  EXPECT_NE(r->rejected_rows(1).reason().find("item_id is 300 bytes"),
            std::string::npos);
  EXPECT_EQ(r->rejected_rows(1).item_id().size(), 256u);
  EXPECT_NE(r->rejected_rows(2).reason().find("NaN"), std::string::npos);
  EXPECT_NE(
      r->rejected_rows(3).reason().find("rating 7 is off the scale 1:5:1"),
      std::string::npos);
  EXPECT_EQ(r->rejected_rows(4).row(), 5);
  absl::StatusOr<v1::GetStatsResponse> st = service_->GetStats({});
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->ratings(), 2);
}

TEST_F(ServiceTest, AddRatingsStoresTheScaleValueAndSaysWhyARatingIsOff) {
  v1::AddRatingsRequest b;
  *b.add_ratings() = Row("u1", "i1", 4.0000001);  // within the tolerance
  *b.add_ratings() = Row("u1", "i2", 4.000001);   // not on a step
  *b.add_ratings() = Row("u1", "i3", 5.00001);    // off the scale
  *b.add_ratings() = Row("u1", "i4", 1 - 1e-9);   // within the tolerance
  absl::StatusOr<v1::AddRatingsResponse> r = service_->AddRatings({b});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->accepted(), 2);
  ASSERT_EQ(r->rejected_rows_size(), 2);
  EXPECT_EQ(r->rejected_rows(0).reason(),
            "batch 0 row 1: rating 4.000001 is not on a step of the scale "
            "1:5:1");
  EXPECT_EQ(r->rejected_rows(1).reason(),
            "batch 0 row 2: rating 5.00001 is off the scale 1:5:1");
  absl::StatusOr<std::vector<store::UserRating>> got =
      store_->GetUserRatings("u1");
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[0].item, "i1");
  EXPECT_EQ((*got)[0].rating, 4.0);  // exactly, not 4.0000001
  EXPECT_EQ((*got)[1].item, "i4");
  EXPECT_EQ((*got)[1].rating, 1.0);
}

TEST_F(ServiceTest, OversizedBatchFailsAndStoresNothingOfIt) {
  v1::AddRatingsRequest small;
  *small.add_ratings() = Row("u1", "i1", 4);
  v1::AddRatingsRequest big;
  for (int i = 0; i < 5001; ++i) *big.add_ratings() = Row("u9", I(i), 3);
  RbmrecService::AddRatingsSession session = service_->StartAddRatings();
  ASSERT_TRUE(session.AddBatch(small).ok());
  absl::Status s = session.AddBatch(big);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("5000"), std::string::npos) << s;
  absl::StatusOr<v1::GetStatsResponse> st = service_->GetStats({});
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->ratings(), 1);  // the earlier batch stays
}

TEST_F(ServiceTest, UpsertAndDuplicatesInABatchLaterWins) {
  v1::AddRatingsRequest b1;
  *b1.add_ratings() = Row("u1", "i1", 2);
  ASSERT_TRUE(service_->AddRatings({b1}).ok());
  v1::AddRatingsRequest b2;
  *b2.add_ratings() = Row("u1", "i1", 3);  // replaces stored
  *b2.add_ratings() = Row("u1", "i2", 1);
  *b2.add_ratings() = Row("u1", "i2", 5);  // replaces the row above
  absl::StatusOr<v1::AddRatingsResponse> r = service_->AddRatings({b2});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->accepted(), 3);
  EXPECT_EQ(r->replaced(), 2);
  absl::StatusOr<std::vector<store::UserRating>> got =
      store_->GetUserRatings("u1");
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[0].rating, 3);
  EXPECT_EQ((*got)[1].rating, 5);
}

TEST_F(ServiceTest, DeleteRatingsAndUser) {
  LoadSynthetic();
  v1::DeleteRatingsRequest dr;
  dr.set_user_id("u0");
  dr.add_item_ids("i0");
  dr.add_item_ids("nope");
  absl::StatusOr<v1::DeleteRatingsResponse> d = service_->DeleteRatings(dr);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->deleted(), Rated(0, 0) ? 1 : 0);
  v1::DeleteUserRequest du;
  du.set_user_id("u1");
  absl::StatusOr<v1::DeleteUserResponse> u = service_->DeleteUser(du);
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_GT(u->deleted_ratings(), 0);
  du.set_user_id("ghost");
  EXPECT_EQ(service_->DeleteUser(du).status().code(),
            absl::StatusCode::kNotFound);
  du.set_user_id("");
  EXPECT_EQ(service_->DeleteUser(du).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// An unknown user is NOT_FOUND in DeleteRatings as in DeleteUser; a known
// user is OK whatever is left to delete.
TEST_F(ServiceTest, DeleteRatingsOfAnUnknownUserIsNotFound) {
  v1::AddRatingsRequest b;
  *b.add_ratings() = Row("ann", "i1", 4);
  ASSERT_TRUE(service_->AddRatings({b}).ok());
  v1::DeleteRatingsRequest dr;
  dr.set_user_id("ghost");
  dr.add_item_ids("i1");
  absl::StatusOr<v1::DeleteRatingsResponse> d = service_->DeleteRatings(dr);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(d.status().message(), "user_id 'ghost' not found");
  dr.clear_item_ids();
  EXPECT_EQ(service_->DeleteRatings(dr).status().code(),
            absl::StatusCode::kNotFound);

  dr.set_user_id("ann");
  dr.add_item_ids("i1");
  d = service_->DeleteRatings(dr);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->deleted(), 1);
  d = service_->DeleteRatings(dr);  // again: the user stays known
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->deleted(), 0);

  v1::DeleteUserRequest du;
  du.set_user_id("ann");
  ASSERT_TRUE(service_->DeleteUser(du).ok());
  d = service_->DeleteRatings(dr);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(d.status().message(), "user_id 'ann' not found");
}

TEST_F(ServiceTest, NoModelAndNoRatings) {
  v1::PredictRatingsRequest req;
  req.set_user_id("u1");
  req.add_item_ids("i1");
  EXPECT_EQ(service_->PredictRatings(req).status().code(),
            absl::StatusCode::kFailedPrecondition);
  absl::Status s =
      service_->Train({}, [](const v1::TrainProgress&) { return true; });
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
}

TEST_F(ServiceTest, TrainStreamsProgressAndPublishes) {
  LoadSynthetic();
  std::vector<v1::TrainProgress> p = TrainSync();
  ASSERT_GE(p.size(), 3u);
  EXPECT_EQ(p.front().state(), v1::TrainProgress::QUEUED);
  EXPECT_EQ(p[1].state(), v1::TrainProgress::RUNNING);
  EXPECT_EQ(p[1].epoch(), 1);
  EXPECT_EQ(p[1].max_epochs(), 40);
  EXPECT_GT(p[1].train_rmse(), 0);
  EXPECT_GT(p[1].validation_rmse(), 0);
  EXPECT_GT(p[1].eta_seconds(), 0);
  const v1::TrainProgress& last = p.back();
  ASSERT_EQ(last.state(), v1::TrainProgress::SUCCEEDED) << last.message();
  EXPECT_GT(last.model_version(), 0);
  EXPECT_EQ(service_->active_version(), last.model_version());
  absl::StatusOr<v1::ListModelsResponse> models = service_->ListModels({});
  ASSERT_TRUE(models.ok());
  ASSERT_EQ(models->models_size(), 1);
  EXPECT_TRUE(models->models(0).active());
  EXPECT_EQ(models->models(0).kind(), "full");
  EXPECT_EQ(models->models(0).n_items(), kItems);
  EXPECT_GT(models->models(0).validation_rmse(), 0);
  EXPECT_GT(models->models(0).epochs(), 0);
  // Every epoch message names its RBM (user and item train side by side,
  // then the factorisation, the rated RBM last); the final one carries the
  // published model's figures.
  int user = 0, item = 0, factorisation = 0, rated = 0;
  for (const v1::TrainProgress& m : p) {
    if (m.state() != v1::TrainProgress::RUNNING) {
      EXPECT_EQ(m.rbm(), "");
      continue;
    }
    EXPECT_TRUE(m.rbm() == "user" || m.rbm() == "item" ||
                m.rbm() == "factorisation" || m.rbm() == "rated")
        << m.rbm();
    (m.rbm() == "user"            ? user
     : m.rbm() == "item"          ? item
     : m.rbm() == "factorisation" ? factorisation
                                  : rated)++;
    if (m.rbm() != "rated") {
      EXPECT_EQ(rated, 0) << "rated RBM not last";
    }
    if (m.rbm() == "user" || m.rbm() == "item") {
      EXPECT_EQ(factorisation, 0) << "factorisation before an RBM";
    }
  }
  EXPECT_GT(user, 0);
  EXPECT_GT(item, 0);
  EXPECT_GT(factorisation, 0);
  EXPECT_GT(rated, 0);
  EXPECT_NEAR(last.validation_rmse(), models->models(0).validation_rmse(),
              1e-6);
  EXPECT_EQ(last.epoch(), models->models(0).epochs());
}

TEST_F(ServiceTest, TrainOptionsAreValidated) {
  LoadSynthetic();
  v1::TrainRequest req;
  req.mutable_options()->set_momentum(1.5);
  absl::Status s =
      service_->Train(req, [](const v1::TrainProgress&) { return true; });
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("momentum"), std::string::npos) << s;
  req.mutable_options()->clear_momentum();
  req.mutable_options()->set_average(1.0);
  s = service_->Train(req, [](const v1::TrainProgress&) { return true; });
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("average"), std::string::npos) << s;
  req.mutable_options()->clear_average();
  req.mutable_options()->set_factors(-2);
  s = service_->Train(req, [](const v1::TrainProgress&) { return true; });
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("factors"), std::string::npos) << s;
  req.mutable_options()->clear_factors();
  req.mutable_options()->set_rated_factors(-1);
  s = service_->Train(req, [](const v1::TrainProgress&) { return true; });
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("rated_factors"), std::string::npos) << s;
  req.mutable_options()->clear_rated_factors();
  req.mutable_options()->set_mf_factors(1025);
  s = service_->Train(req, [](const v1::TrainProgress&) { return true; });
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("mf_factors"), std::string::npos) << s;
}

// TrainOptions.mf_factors reaches the trainer: with 0 the served
// distributions are the RBMs' alone, with 8 factors (kept on this data)
// they are tilted to the blended mean, so they differ; both are
// distributions.
TEST_F(ServiceTest, MfFactorsReachTheTrainer) {
  LoadSynthetic();
  std::vector<std::vector<double>> expected;
  for (int factors : {0, 8}) {
    v1::TrainRequest train;
    train.mutable_options()->set_mf_factors(factors);
    train.mutable_options()->set_rated_hidden(0);
    train.set_activation(v1::ACTIVATE_ALWAYS);
    const std::vector<v1::TrainProgress> done = TrainSync(train);
    ASSERT_FALSE(done.empty());
    ASSERT_EQ(done.back().state(), v1::TrainProgress::SUCCEEDED);
    v1::PredictRatingsResponse p = Predict(U(3), {I(1), I(2), I(5)});
    ASSERT_EQ(p.predictions_size(), 3);
    std::vector<double> e;
    for (const auto& pred : p.predictions()) {
      double sum = 0;
      for (double x : pred.probabilities()) sum += x;
      EXPECT_NEAR(sum, 1.0, 1e-5);
      e.push_back(pred.expected_rating());
    }
    expected.push_back(e);
  }
  EXPECT_NE(expected[0], expected[1]);
}

// TrainOptions.factors reaches the trainer: a factored model trains and
// serves distributions like any other.
TEST_F(ServiceTest, FactoredTrainingServesDistributions) {
  LoadSynthetic();
  v1::TrainRequest train;
  train.mutable_options()->set_factors(3);  // the test defaults' hidden is 8
  train.mutable_options()->set_rated_hidden(0);
  const std::vector<v1::TrainProgress> done = TrainSync(train);
  ASSERT_FALSE(done.empty());
  EXPECT_EQ(done.back().state(), v1::TrainProgress::SUCCEEDED);
  ASSERT_GT(done.back().model_version(), 0);
  v1::PredictRatingsResponse p = Predict(U(3), {I(1), I(2)});
  ASSERT_EQ(p.predictions_size(), 2);
  for (const auto& pred : p.predictions()) {
    double sum = 0;
    for (double x : pred.probabilities()) sum += x;
    EXPECT_NEAR(sum, 1.0, 1e-5);
    EXPECT_GE(pred.expected_rating(), 1.0);
    EXPECT_LE(pred.expected_rating(), 5.0);
  }
}

// TrainOptions.rated_factors reaches the rated RBM: the same request with
// it 0 (unfactored) and 3 serves different p(rated), both in (0, 1).
TEST_F(ServiceTest, RatedFactorsReachTheRatedRbm) {
  LoadSynthetic();
  std::vector<std::vector<double>> rated;
  for (int factors : {0, 3}) {
    v1::TrainRequest train;
    train.mutable_options()->set_rated_hidden(8);
    train.mutable_options()->set_rated_factors(factors);
    train.set_activation(v1::ACTIVATE_ALWAYS);
    const std::vector<v1::TrainProgress> done = TrainSync(train);
    ASSERT_FALSE(done.empty());
    ASSERT_EQ(done.back().state(), v1::TrainProgress::SUCCEEDED);
    v1::RecommendRequest req;
    req.set_user_id(U(3));
    req.set_n(5);
    req.set_rank_by(v1::PROBABILITY_RATED);
    absl::StatusOr<v1::RecommendResponse> r = service_->Recommend(req);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->model_version(), done.back().model_version());
    ASSERT_EQ(r->recommendations_size(), 5);
    std::vector<double> p;
    for (const auto& rec : r->recommendations()) {
      EXPECT_GT(rec.probability_rated(), 0);
      EXPECT_LT(rec.probability_rated(), 1);
      p.push_back(rec.probability_rated());
    }
    rated.push_back(p);
  }
  EXPECT_NE(rated[0], rated[1]);
}

TEST_F(ServiceTest, SecondTrainFailsWhileOneRunsAndCancelStopsIt) {
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
  std::thread first([&] {
    absl::Status s = service_->Train(req, [&](const v1::TrainProgress& p) {
      got.push_back(p);
      if (p.state() == v1::TrainProgress::RUNNING && !signalled) {
        signalled = true;
        running.set_value();
      }
      return true;
    });
    EXPECT_TRUE(s.ok()) << s;
  });
  running.get_future().wait();
  absl::Status second =
      service_->Train({}, [](const v1::TrainProgress&) { return true; });
  EXPECT_EQ(second.code(), absl::StatusCode::kFailedPrecondition) << second;
  absl::StatusOr<v1::GetStatsResponse> st = service_->GetStats({});
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE(st->training().running());
  absl::StatusOr<v1::CancelTrainingResponse> c = service_->CancelTraining({});
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->was_running());
  first.join();
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got.back().state(), v1::TrainProgress::CANCELLED);
  EXPECT_EQ(service_->active_version(), 0);
  // The slot is free again.
  EXPECT_GT(TrainOk(), 0);
}

TEST_F(ServiceTest, PredictRatingsDistributions) {
  LoadSynthetic();
  const int64_t version = TrainOk();
  v1::PredictRatingsResponse r = Predict("u0", {"i1", "i2", "i25", "i39"});
  EXPECT_EQ(r.model_version(), version);
  EXPECT_FALSE(r.folded_in());
  ASSERT_EQ(r.scale().values_size(), 5);
  ASSERT_EQ(r.predictions_size(), 4);
  for (const v1::ItemPrediction& p : r.predictions()) {
    ASSERT_EQ(p.probabilities_size(), 5);
    double sum = 0;
    for (double q : p.probabilities()) {
      EXPECT_TRUE(std::isfinite(q));
      EXPECT_GE(q, 0);
      sum += q;
    }
    EXPECT_NEAR(sum, 1.0, 1e-4);
    EXPECT_GE(p.expected_rating(), 1.0);
    EXPECT_LE(p.expected_rating(), 5.0);
    EXPECT_FALSE(p.fallback());
  }
  // The planted structure: user 0 (group 0) likes items 0..19.
  EXPECT_GT(r.predictions(0).expected_rating(),
            r.predictions(2).expected_rating());
  // An item unknown to the model gets the fallback.
  v1::PredictRatingsResponse f = Predict("u0", {"brand-new"});
  ASSERT_EQ(f.predictions_size(), 1);
  EXPECT_TRUE(f.predictions(0).fallback());
}

TEST_F(ServiceTest, PredictErrors) {
  LoadSynthetic();
  TrainOk();
  v1::PredictRatingsRequest req;
  req.set_user_id("u0");
  EXPECT_EQ(service_->PredictRatings(req).status().code(),
            absl::StatusCode::kInvalidArgument);
  req.add_item_ids("i1");
  req.set_user_id("nobody");
  absl::Status s = service_->PredictRatings(req).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.message().find("nobody"), std::string::npos) << s;
  req.set_user_id("u0");
  req.set_model_version(99);
  EXPECT_EQ(service_->PredictRatings(req).status().code(),
            absl::StatusCode::kNotFound);
  req.set_model_version(0);
  for (int i = 0; i < 1001; ++i) req.add_item_ids("i1");
  EXPECT_EQ(service_->PredictRatings(req).status().code(),
            absl::StatusCode::kResourceExhausted);
  v1::PredictRatingsRequest bad;
  bad.add_item_ids("i1");
  v1::ItemRating* ir = bad.add_ratings();
  ir->set_item_id("i2");
  ir->set_rating(9);
  s = service_->PredictRatings(bad).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("ratings[0]"), std::string::npos) << s;
}

TEST_F(ServiceTest, FoldsInAUserAddedAfterTraining) {
  LoadSynthetic();
  TrainOk();
  v1::AddRatingsRequest b;
  for (int i = 0; i < 20; i += 2) *b.add_ratings() = Row("late", I(i), 5);
  for (int i = 20; i < 40; i += 2) *b.add_ratings() = Row("late", I(i), 1);
  ASSERT_TRUE(service_->AddRatings({b}).ok());
  service_->FlushOnlineForTest();  // answers from the updated model
  v1::PredictRatingsResponse r = Predict("late", {"i1", "i21"});
  EXPECT_TRUE(r.folded_in());
  ASSERT_EQ(r.predictions_size(), 2);
  EXPECT_GT(r.predictions(0).expected_rating(),
            r.predictions(1).expected_rating());
}

TEST_F(ServiceTest, ReadCachesSeeEveryWrite) {
  LoadSynthetic();
  TrainOk();
  v1::AddRatingsRequest b;
  *b.add_ratings() = Row("cached", "i1", 5);
  ASSERT_TRUE(service_->AddRatings({b}).ok());
  service_->FlushOnlineForTest();  // answers from the updated model
  v1::PutItemsRequest items;
  v1::Item* item = items.add_items();
  item->set_item_id("i2");
  item->set_title("Old");
  ASSERT_TRUE(service_->PutItems(items).ok());
  EXPECT_EQ(Predict("cached", {"i2"}).predictions(0).title(), "Old");
  item->set_title("New");
  ASSERT_TRUE(service_->PutItems(items).ok());
  EXPECT_EQ(Predict("cached", {"i2"}).predictions(0).title(), "New");
  v1::DeleteUserRequest du;
  du.set_user_id("cached");
  ASSERT_TRUE(service_->DeleteUser(du).ok());
  v1::PredictRatingsRequest req;
  req.set_user_id("cached");
  req.add_item_ids("i2");
  EXPECT_EQ(service_->PredictRatings(req).status().code(),
            absl::StatusCode::kNotFound);
  ASSERT_TRUE(service_->AddRatings({b}).ok());
  service_->FlushOnlineForTest();  // answers from the updated model
  EXPECT_TRUE(service_->PredictRatings(req).ok());
}

// Named users are resolved once per (user, model snapshot) and cached; the
// cached answers must follow rating changes and model changes, and equal the
// uncached (ad-hoc ratings) path.
TEST_F(ServiceTest, ResolvedUserCacheFollowsRatingsAndModels) {
  LoadSynthetic();
  const int64_t first_version = TrainOk();
  v1::AddRatingsRequest b;
  for (int i = 0; i < 20; i += 2) *b.add_ratings() = Row("fan", I(i), 5);
  ASSERT_TRUE(service_->AddRatings({b}).ok());
  service_->FlushOnlineForTest();  // answers from the updated model
  auto anonymous = [&](const v1::AddRatingsRequest& rows) {
    v1::PredictRatingsRequest req;
    for (const v1::Rating& r : rows.ratings()) {
      v1::ItemRating* ir = req.add_ratings();
      ir->set_item_id(r.item_id());
      ir->set_rating(r.rating());
    }
    req.add_item_ids("i21");
    absl::StatusOr<v1::PredictRatingsResponse> r =
        service_->PredictRatings(req);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->predictions(0).expected_rating() : -1.0;
  };
  const double first = Predict("fan", {"i21"}).predictions(0).expected_rating();
  EXPECT_EQ(Predict("fan", {"i21"}).predictions(0).expected_rating(), first);
  EXPECT_NEAR(first, anonymous(b), 1e-6);

  // New ratings of the same user change the answer (cache invalidated).
  for (int i = 20; i < 40; i += 2) *b.add_ratings() = Row("fan", I(i), 1);
  ASSERT_TRUE(service_->AddRatings({b}).ok());
  service_->FlushOnlineForTest();  // answers from the updated model
  const double second =
      Predict("fan", {"i21"}).predictions(0).expected_rating();
  EXPECT_NE(second, first);
  EXPECT_NEAR(second, anonymous(b), 1e-6);

  // A rated item is no longer recommended.
  v1::RecommendRequest rec;
  rec.set_user_id("fan");
  rec.set_n(kItems);
  auto recommended = [&](const std::string& item) {
    absl::StatusOr<v1::RecommendResponse> r = service_->Recommend(rec);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return false;
    for (const v1::Recommendation& x : r->recommendations()) {
      if (x.item_id() == item) return true;
    }
    return false;
  };
  EXPECT_TRUE(recommended("i39"));
  v1::AddRatingsRequest one;
  *one.add_ratings() = Row("fan", "i39", 3);
  ASSERT_TRUE(service_->AddRatings({one}).ok());
  service_->FlushOnlineForTest();  // answers from the updated model
  EXPECT_FALSE(recommended("i39"));
  *b.add_ratings() = Row("fan", "i39", 3);

  // New model snapshots re-resolve the user: one trained on fan's ratings
  // (fan is a training user there), then the first one again.
  TrainOk();
  EXPECT_FALSE(Predict("fan", {"i21"}).folded_in());
  v1::ActivateModelRequest act;
  act.set_version(first_version);
  ASSERT_TRUE(service_->ActivateModel(act).ok());
  const v1::PredictRatingsResponse back = Predict("fan", {"i21"});
  EXPECT_TRUE(back.folded_in());
  EXPECT_NEAR(back.predictions(0).expected_rating(), anonymous(b), 1e-6);
}

TEST_F(ServiceTest, AnonymousUserWithAdHocRatings) {
  LoadSynthetic();
  TrainOk();
  v1::PredictRatingsRequest req;
  for (int i = 20; i < 40; i += 3) {
    v1::ItemRating* r = req.add_ratings();
    r->set_item_id(I(i));
    r->set_rating(5);
  }
  req.add_item_ids("i22");
  req.add_item_ids("i2");
  absl::StatusOr<v1::PredictRatingsResponse> r = service_->PredictRatings(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->folded_in());
  EXPECT_GT(r->predictions(0).expected_rating(),
            r->predictions(1).expected_rating());
  // Nothing was stored.
  absl::StatusOr<v1::GetStatsResponse> st = service_->GetStats({});
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->ratings(), SyntheticBatch().ratings_size());
}

TEST_F(ServiceTest, RecommendExcludesRatedItemsAndIsSorted) {
  LoadSynthetic();
  const int64_t version = TrainOk();
  ASSERT_TRUE(
      store_->PutItems({store::ItemRow{"i3", "Item Three", "", {}, false}})
          .ok());
  for (v1::RankBy rank :
       {v1::EXPECTED_RATING, v1::PROBABILITY_AT_LEAST, v1::PROBABILITY_RATED,
        v1::PROBABILITY_RATED_AT_LEAST}) {
    SCOPED_TRACE(v1::RankBy_Name(rank));
    v1::RecommendRequest req;
    req.set_user_id("u0");
    req.set_n(50);
    req.set_rank_by(rank);
    req.set_threshold(4);
    absl::StatusOr<v1::RecommendResponse> r = service_->Recommend(req);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->model_version(), version);
    EXPECT_EQ(r->rank_by(), rank);
    const bool by_rated =
        rank == v1::PROBABILITY_RATED || rank == v1::PROBABILITY_RATED_AT_LEAST;
    const bool by_prob = rank == v1::PROBABILITY_AT_LEAST ||
                         rank == v1::PROBABILITY_RATED_AT_LEAST;
    EXPECT_EQ(r->threshold(), by_prob ? 4.0 : 0.0);
    int unrated = 0;
    for (int i = 0; i < kItems; ++i) unrated += Rated(0, i) ? 0 : 1;
    ASSERT_EQ(r->recommendations_size(), unrated);
    double prev = 1e9;
    for (int k = 0; k < r->recommendations_size(); ++k) {
      const v1::Recommendation& rec = r->recommendations(k);
      EXPECT_EQ(rec.rank(), k + 1);
      const int item = std::stoi(rec.item_id().substr(1));
      EXPECT_FALSE(Rated(0, item)) << rec.item_id();
      double score = rank == v1::EXPECTED_RATING ? rec.expected_rating() : 1.0;
      if (by_prob) {
        score *= rec.probability_at_least();
      } else {
        EXPECT_EQ(rec.probability_at_least(), 0);
      }
      if (by_rated) {
        EXPECT_GT(rec.probability_rated(), 0);
        EXPECT_LT(rec.probability_rated(), 1);
        score *= rec.probability_rated();
      } else {
        EXPECT_EQ(rec.probability_rated(), 0);
      }
      EXPECT_LE(score, prev + 1e-6);
      prev = score;
      if (rec.item_id() == "i3") {
        EXPECT_EQ(rec.title(), "Item Three");
      }
    }
    // Group 0 likes the first half: the top item is from it (every user
    // rates 60% of the items, whatever they think of them, so p(rated)
    // alone says nothing about taste here).
    if (rank != v1::PROBABILITY_RATED) {
      EXPECT_LT(std::stoi(r->recommendations(0).item_id().substr(1)), 20);
    }
  }
  v1::RecommendRequest req;
  req.set_user_id("u0");
  EXPECT_EQ(service_->Recommend(req)->recommendations_size(), 10);
  req.set_n(-1);
  EXPECT_EQ(service_->Recommend(req).status().code(),
            absl::StatusCode::kInvalidArgument);
  req.set_n(3);
  req.set_rank_by(v1::PROBABILITY_AT_LEAST);
  req.set_threshold(6);
  EXPECT_EQ(service_->Recommend(req).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ServiceTest, RecommendDefaultsToRatedAndLikedWhenTheModelCan) {
  LoadSynthetic();
  // Without the item regression (item_regression 0): p(rated) x p(>= t).
  v1::TrainRequest without;
  without.mutable_options()->set_item_regression(0);
  TrainSync(without);
  v1::RecommendRequest req;
  req.set_user_id("u1");
  absl::StatusOr<v1::RecommendResponse> plain = service_->Recommend(req);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->rank_by(), v1::PROBABILITY_RATED_AT_LEAST);
  EXPECT_GT(plain->recommendations(0).probability_rated(), 0);
  // With Train's default (-1, the size rule, which 40 items pass): the
  // regression's product.
  TrainOk();
  req.set_user_id("u1");
  absl::StatusOr<v1::RecommendResponse> r = service_->Recommend(req);
  ASSERT_TRUE(r.ok()) << r.status();
  // The model has the item regression (40 items: its size rule allows it).
  EXPECT_EQ(r->rank_by(), v1::ITEM_REGRESSION_AT_LEAST);
  // The default threshold: the first scale value at or above the mean
  // training rating (the planted ratings are 1, 2, 4 or 5, half and half).
  double sum = 0;
  int n = 0;
  for (int u = 0; u < kUsers; ++u) {
    for (int i = 0; i < kItems; ++i) {
      if (Rated(u, i)) {
        sum += PlantedRating(u, i);
        ++n;
      }
    }
  }
  EXPECT_EQ(r->threshold(), std::ceil(sum / n));
  ASSERT_EQ(r->recommendations_size(), 10);
  EXPECT_EQ(r->recommendations(0).probability_rated(), 0);
  EXPECT_GT(r->recommendations(0).item_regression_score(), 0);
  EXPECT_GT(r->recommendations(0).probability_at_least(), 0);
  // An explicit threshold is used as given.
  req.set_threshold(5);
  r = service_->Recommend(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->threshold(), 5);
  // p(rated) x p(rating >= t) by name, with p(rated) reported.
  req.set_rank_by(v1::PROBABILITY_RATED_AT_LEAST);
  r = service_->Recommend(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->recommendations(0).probability_rated(), 0);
  EXPECT_EQ(r->recommendations(0).item_regression_score(), 0);
}

// p(rated) is folded in from the user's ratings: an anonymous user with
// u0's ratings gets u0's p(rated) list, and a stored rating changes it at
// once (no retraining).
TEST_F(ServiceTest, RatedRankingFoldsInFromTheUsersRatings) {
  LoadSynthetic();
  TrainOk();
  v1::RecommendRequest known;
  known.set_user_id("u0");
  known.set_rank_by(v1::PROBABILITY_RATED);
  known.set_n(5);
  absl::StatusOr<v1::RecommendResponse> a = service_->Recommend(known);
  ASSERT_TRUE(a.ok()) << a.status();
  v1::RecommendRequest anon = known;
  anon.clear_user_id();
  for (int i = 0; i < kItems; ++i) {
    if (!Rated(0, i)) continue;
    v1::ItemRating* r = anon.add_ratings();
    r->set_item_id(I(i));
    r->set_rating(PlantedRating(0, i));
  }
  absl::StatusOr<v1::RecommendResponse> b = service_->Recommend(anon);
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(a->recommendations_size(), 5);
  ASSERT_EQ(b->recommendations_size(), 5);
  for (int k = 0; k < 5; ++k) {
    EXPECT_EQ(a->recommendations(k).item_id(), b->recommendations(k).item_id());
    EXPECT_EQ(a->recommendations(k).probability_rated(),
              b->recommendations(k).probability_rated());
  }
  // u0 rates the top item: it leaves the list and the others' p(rated)
  // change (the user's hidden state moved).
  const std::string top = a->recommendations(0).item_id();
  v1::AddRatingsRequest add;
  *add.add_ratings() = Row("u0", top, 3);
  ASSERT_TRUE(service_->AddRatings({add}).ok());
  absl::StatusOr<v1::RecommendResponse> c = service_->Recommend(known);
  ASSERT_TRUE(c.ok()) << c.status();
  bool changed = false;
  for (const v1::Recommendation& r : c->recommendations()) {
    EXPECT_NE(r.item_id(), top);
    for (const v1::Recommendation& old : a->recommendations()) {
      if (old.item_id() == r.item_id() &&
          old.probability_rated() != r.probability_rated()) {
        changed = true;
      }
    }
  }
  EXPECT_TRUE(changed);
}

TEST_F(ServiceTest, RecommendWithoutTheRatedRbmFallsBackOrSaysWhy) {
  LoadSynthetic();
  v1::TrainRequest train;
  train.mutable_options()->set_rated_hidden(0);
  const std::vector<v1::TrainProgress> done = TrainSync(train);
  ASSERT_FALSE(done.empty());
  const int64_t version = done.back().model_version();
  ASSERT_GT(version, 0);
  v1::RecommendRequest req;
  req.set_user_id("u1");
  absl::StatusOr<v1::RecommendResponse> r = service_->Recommend(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rank_by(), v1::EXPECTED_RATING);
  req.set_threshold(4);
  r = service_->Recommend(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rank_by(), v1::PROBABILITY_AT_LEAST);
  for (v1::RankBy rank : {v1::PROBABILITY_RATED, v1::PROBABILITY_RATED_AT_LEAST,
                          v1::ITEM_REGRESSION_AT_LEAST}) {
    req.set_rank_by(rank);
    absl::Status s = service_->Recommend(req).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_NE(s.message().find(absl::StrCat("model version ", version)),
              std::string::npos)
        << s;
    EXPECT_NE(s.message().find(v1::RankBy_Name(rank)), std::string::npos) << s;
  }
  train.mutable_options()->set_rated_hidden(-2);
  EXPECT_EQ(
      service_->Train(train, [](const v1::TrainProgress&) { return true; })
          .code(),
      absl::StatusCode::kInvalidArgument);
  // The rated RBM without the item regression: the default is p(rated) x
  // p(rating >= t), and the regression's ranking says why it is missing.
  train.mutable_options()->set_rated_hidden(-1);
  train.mutable_options()->set_item_regression(0);
  TrainSync(train);
  req.clear_threshold();
  req.set_rank_by(v1::RANK_BY_UNSPECIFIED);
  r = service_->Recommend(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rank_by(), v1::PROBABILITY_RATED_AT_LEAST);
  req.set_rank_by(v1::ITEM_REGRESSION_AT_LEAST);
  absl::Status s = service_->Recommend(req).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("no item regression"), std::string::npos) << s;
  train.mutable_options()->set_item_regression(2);
  s = service_->Train(train, [](const v1::TrainProgress&) { return true; });
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("item_regression"), std::string::npos) << s;
}

TEST_F(ServiceTest, RecommendReRankingReportsExactNumbers) {
  ServiceOptions o = DefaultOptions();
  o.recommend_candidates = 5;  // 40 items > max(5, 3n): the re-rank path
  Start(nullptr, o);
  LoadSynthetic();
  v1::TrainRequest train;
  train.mutable_options()->set_item_regression(-1);
  TrainSync(train);
  // The score each ranking sorts by, from the numbers it reports.
  auto score = [](v1::RankBy by, const v1::Recommendation& rec) {
    switch (by) {
      case v1::EXPECTED_RATING:
        return rec.expected_rating();
      case v1::PROBABILITY_RATED_AT_LEAST:
        return rec.probability_rated() * rec.probability_at_least();
      case v1::ITEM_REGRESSION_AT_LEAST:
        return std::max(rec.item_regression_score(), 0.0) *
               rec.probability_at_least();
      default:
        ADD_FAILURE() << v1::RankBy_Name(by);
        return 0.0;
    }
  };
  // The default ranking (the item regression's score x p(rating >= t)),
  // p(rated) x p(rating >= t) and the expected rating.
  for (v1::RankBy by : {v1::RANK_BY_UNSPECIFIED, v1::PROBABILITY_RATED_AT_LEAST,
                        v1::EXPECTED_RATING}) {
    SCOPED_TRACE(v1::RankBy_Name(by));
    v1::RecommendRequest req;
    req.set_user_id("u3");
    req.set_n(3);
    req.set_rank_by(by);
    absl::StatusOr<v1::RecommendResponse> r = service_->Recommend(req);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->recommendations_size(), 3);
    if (by == v1::RANK_BY_UNSPECIFIED) {
      EXPECT_EQ(r->rank_by(), v1::ITEM_REGRESSION_AT_LEAST);
    }
    std::vector<std::string> ids;
    for (const auto& rec : r->recommendations()) ids.push_back(rec.item_id());
    v1::PredictRatingsResponse p = Predict("u3", ids);
    for (int k = 0; k < 3; ++k) {
      EXPECT_NEAR(r->recommendations(k).expected_rating(),
                  p.predictions(k).expected_rating(), 1e-5);
      if (k > 0) {
        EXPECT_LE(score(r->rank_by(), r->recommendations(k)),
                  score(r->rank_by(), r->recommendations(k - 1)) + 1e-6);
      }
    }
  }
}

// The two-stage ranking (mean-field scores for all items, the requested
// method for the best candidates) against exact scoring of every item, and
// MEAN_FIELD answers against PredictRatings.
TEST_F(ServiceTest, RecommendTwoStageMatchesFullScoring) {
  ServiceOptions full = DefaultOptions();
  full.recommend_candidates = 0;  // exact over every item
  ServiceOptions two_stage = DefaultOptions();
  // Users have ~16 unrated items; 9 = max(5, 3n) of them are candidates.
  two_stage.recommend_candidates = 5;
  std::vector<std::vector<std::string>> want;
  for (const ServiceOptions& o : {full, two_stage}) {
    Start(nullptr, o);
    LoadSynthetic();
    TrainOk();
    std::vector<std::vector<std::string>> got;
    for (int u = 0; u < kUsers; u += 7) {
      v1::RecommendRequest req;
      req.set_user_id(U(u));
      req.set_n(3);
      absl::StatusOr<v1::RecommendResponse> r = service_->Recommend(req);
      ASSERT_TRUE(r.ok()) << r.status();
      got.emplace_back();
      for (const auto& rec : r->recommendations()) {
        got.back().push_back(rec.item_id());
      }
      req.set_method(v1::MEAN_FIELD);
      r = service_->Recommend(req);
      ASSERT_TRUE(r.ok()) << r.status();
      std::vector<std::string> ids;
      for (const auto& rec : r->recommendations()) ids.push_back(rec.item_id());
      v1::PredictRatingsRequest p;
      p.set_user_id(U(u));
      p.set_method(v1::MEAN_FIELD);
      for (const std::string& id : ids) p.add_item_ids(id);
      absl::StatusOr<v1::PredictRatingsResponse> pr =
          service_->PredictRatings(p);
      ASSERT_TRUE(pr.ok()) << pr.status();
      for (int k = 0; k < r->recommendations_size(); ++k) {
        EXPECT_NEAR(r->recommendations(k).expected_rating(),
                    pr->predictions(k).expected_rating(), 1e-5);
      }
    }
    if (want.empty()) {
      want = got;  // training is seeded: both servers have the same model
    } else {
      EXPECT_EQ(got, want);
    }
  }
}

TEST_F(ServiceTest, ActivateModelRollsBack) {
  LoadSynthetic();
  const int64_t v1_ = TrainOk();
  const int64_t v2_ = TrainOk();
  ASSERT_GT(v2_, v1_);
  v1::ActivateModelRequest req;
  req.set_version(v1_);
  absl::StatusOr<v1::ModelInfo> info = service_->ActivateModel(req);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_TRUE(info->active());
  EXPECT_EQ(info->version(), v1_);
  EXPECT_EQ(Predict("u0", {"i1"}).model_version(), v1_);
  absl::StatusOr<std::optional<int64_t>> stored = store_->ActiveModelVersion();
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->value_or(0), v1_);
  // An explicit version still answers.
  v1::PredictRatingsRequest pr;
  pr.set_user_id("u0");
  pr.add_item_ids("i1");
  pr.set_model_version(v2_);
  absl::StatusOr<v1::PredictRatingsResponse> r = service_->PredictRatings(pr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->model_version(), v2_);
  req.set_version(77);
  EXPECT_EQ(service_->ActivateModel(req).status().code(),
            absl::StatusCode::kNotFound);
  req.set_version(0);
  EXPECT_EQ(service_->ActivateModel(req).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ServiceTest, CorruptModelBlobIsDataLossAndServingContinues) {
  int64_t corrupt = 0;
  Start([&](store::Store* st) {
    store::ModelInfo meta;
    meta.kind = "full";
    absl::StatusOr<int64_t> v = st->InsertModel(meta, "not a model", false);
    ASSERT_TRUE(v.ok()) << v.status();
    corrupt = *v;
  });
  LoadSynthetic();
  const int64_t good = TrainOk();
  v1::ActivateModelRequest req;
  req.set_version(corrupt);
  absl::Status s = service_->ActivateModel(req).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("corrupt"), std::string::npos) << s;
  EXPECT_EQ(service_->active_version(), good);
  EXPECT_EQ(Predict("u0", {"i1"}).model_version(), good);
}

TEST_F(ServiceTest, CorruptActiveModelAtStartServesWithoutModel) {
  Start([&](store::Store* st) {
    store::ModelInfo meta;
    meta.kind = "full";
    ASSERT_TRUE(st->InsertModel(meta, "garbage", true).ok());
  });
  absl::StatusOr<v1::GetStatsResponse> stats = service_->GetStats({});
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->active_model_version(), 0);
  EXPECT_NE(stats->model_load_error().find("active model version 1 could "
                                           "not be loaded"),
            std::string::npos)
      << stats->model_load_error();
  LoadSynthetic();
  EXPECT_GT(TrainOk(), 0);  // and it can recover by training
  stats = service_->GetStats({});
  ASSERT_TRUE(stats.ok());
  EXPECT_GT(stats->active_model_version(), 0);
  EXPECT_EQ(stats->model_load_error(), "");
}

TEST_F(ServiceTest, OnlineUpdatesPublishAndPersist) {
  LoadSynthetic();
  const int64_t full = TrainOk();
  v1::AddRatingsRequest b;
  *b.add_ratings() = Row("u0", "i-new", 5);  // a new item
  *b.add_ratings() = Row("u0", "i1", 1);
  ASSERT_TRUE(service_->AddRatings({b}).ok());
  service_->FlushOnlineForTest();
  absl::StatusOr<v1::GetStatsResponse> st = service_->GetStats({});
  ASSERT_TRUE(st.ok());
  EXPECT_GE(st->online_updates(), 1);
  // The new item now has parameters (and a histogram entry).
  v1::PredictRatingsResponse r = Predict("u0", {"i-new"});
  EXPECT_FALSE(r.predictions(0).fallback());
  EXPECT_EQ(r.model_version(), full);  // not persisted yet
  ASSERT_TRUE(service_->PersistOnlineForTest().ok());
  absl::StatusOr<v1::ListModelsResponse> models = service_->ListModels({});
  ASSERT_TRUE(models.ok());
  ASSERT_EQ(models->models_size(), 2);
  EXPECT_EQ(models->models(0).kind(), "online");
  EXPECT_TRUE(models->models(0).active());
  EXPECT_EQ(models->models(0).n_items(), kItems + 1);
  EXPECT_EQ(Predict("u0", {"i-new"}).model_version(),
            models->models(0).version());
}

TEST_F(ServiceTest, ShutdownPersistsPendingOnlineUpdates) {
  LoadSynthetic();
  TrainOk();
  v1::AddRatingsRequest b;
  *b.add_ratings() = Row("u5", "i2", 3);
  ASSERT_TRUE(service_->AddRatings({b}).ok());
  service_->Shutdown();
  absl::StatusOr<std::vector<store::ModelInfo>> models = store_->ListModels();
  ASSERT_TRUE(models.ok());
  ASSERT_EQ(models->size(), 2u);
  EXPECT_EQ((*models)[0].kind, "online");
  EXPECT_TRUE((*models)[0].active);
}

}  // namespace
}  // namespace rbmrec::server
