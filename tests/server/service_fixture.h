#ifndef RBMREC_TESTS_SERVER_SERVICE_FIXTURE_H_
#define RBMREC_TESTS_SERVER_SERVICE_FIXTURE_H_

// A service on a ":memory:" store with a small synthetic data set with
// planted structure: 60 users x 40 items, users of group g (= user % 2)
// rate items of the same half (item / 20 == g) 4-5 and the other half 1-2.

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/service/service.h"
#include "store/store.h"

namespace rbmrec::server::testing {

inline constexpr int kUsers = 60;
inline constexpr int kItems = 40;

inline std::string U(int u) { return absl::StrCat("u", u); }
inline std::string I(int i) { return absl::StrCat("i", i); }

inline double PlantedRating(int u, int i) {
  const bool likes = (i / 20) == (u % 2);
  const int wiggle = (u * 7 + i * 3) % 2;
  return likes ? 4.0 + wiggle : 1.0 + wiggle;
}

inline bool Rated(int u, int i) { return (u * 13 + i * 7) % 5 < 3; }

inline v1::AddRatingsRequest SyntheticBatch() {
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

// The item ids of a Recommend answer, best first.
inline std::vector<std::string> Ids(const v1::RecommendResponse& r) {
  std::vector<std::string> out;
  for (const v1::Recommendation& x : r.recommendations()) {
    out.push_back(x.item_id());
  }
  return out;
}

inline v1::Rating Row(const std::string& u, const std::string& i, double r) {
  v1::Rating row;
  row.set_user_id(u);
  row.set_item_id(i);
  row.set_rating(r);
  return row;
}

class ServiceFixture : public ::testing::Test {
 public:
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
    return o;
  }

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

  void LoadSynthetic() {
    absl::StatusOr<v1::AddRatingsResponse> r =
        service_->AddRatings({SyntheticBatch()});
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->rejected(), 0);
  }

  // Trains synchronously; returns all progress messages.
  std::vector<v1::TrainProgress> TrainSync(const v1::TrainRequest& req = {}) {
    std::vector<v1::TrainProgress> out;
    absl::Status s = service_->Train(req, [&](const v1::TrainProgress& p) {
      out.push_back(p);
      return true;
    });
    EXPECT_TRUE(s.ok()) << s;
    return out;
  }

  // The terminal message of a job that must succeed.
  v1::TrainProgress TrainDone(const v1::TrainRequest& req = {}) {
    std::vector<v1::TrainProgress> p = TrainSync(req);
    EXPECT_FALSE(p.empty());
    if (p.empty()) return {};
    EXPECT_EQ(p.back().state(), v1::TrainProgress::SUCCEEDED)
        << p.back().message();
    return p.back();
  }

  absl::StatusOr<v1::PredictRatingsResponse> PredictS(const std::string& user,
                                                      const std::string& item) {
    v1::PredictRatingsRequest req;
    req.set_user_id(user);
    req.add_item_ids(item);
    return service_->PredictRatings(req);
  }

  store::Store* store_ = nullptr;  // owned by service_
  std::unique_ptr<RbmrecService> service_;
};

}  // namespace rbmrec::server::testing

#endif  // RBMREC_TESTS_SERVER_SERVICE_FIXTURE_H_
