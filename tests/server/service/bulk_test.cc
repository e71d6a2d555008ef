// Recommend's cold start (a user without ratings gets the empty user's
// answer, marked as a fallback) and RecommendAll (server/service/bulk.h):
// the same answers as one Recommend per user, in user order, resumable,
// from one model snapshot, with clear errors.

#include "server/service/bulk.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/server/service_fixture.h"

namespace rbmrec::server::testing {
namespace {

class BulkTest : public ServiceFixture {
 protected:
  void SetUp() override {
    ServiceOptions o = DefaultOptions();
    o.registry.activation = Activation::kAlways;
    o.online.enabled = false;
    o.limits.max_bulk_users = 8;
    // The empty user's answer: a list that follows the request's ranking
    // (the default, the most-popular list, is in cold_start_test.cc).
    o.cold_start = ColdStart::kEmptyUser;
    Start(nullptr, o);
    LoadSynthetic();
    TrainDone();
  }

  v1::RecommendResponse Rec(const std::string& user, int n = 5,
                            int64_t version = 0) {
    v1::RecommendRequest req;
    req.set_user_id(user);
    req.set_n(n);
    req.set_model_version(version);
    absl::StatusOr<v1::RecommendResponse> r = service_->Recommend(req);
    EXPECT_TRUE(r.ok()) << user << ": " << r.status();
    return r.ok() ? *r : v1::RecommendResponse();
  }

  // Every message of a RecommendAll stream.
  absl::StatusOr<std::vector<v1::RecommendAllResponse>> All(
      const v1::RecommendAllRequest& request) {
    absl::StatusOr<std::unique_ptr<RecommendAllJob>> job =
        service_->StartRecommendAll(request);
    if (!job.ok()) return job.status();
    std::vector<v1::RecommendAllResponse> out;
    absl::Status s =
        DrainRecommendAll(**job, [&](const v1::RecommendAllResponse& m) {
          out.push_back(m);
          return true;
        });
    if (!s.ok()) return s;
    return out;
  }

  static std::vector<std::string> Users(
      const std::vector<v1::RecommendAllResponse>& messages) {
    std::vector<std::string> users;
    for (const v1::RecommendAllResponse& m : messages) {
      for (const v1::UserRecommendations& u : m.users()) {
        users.push_back(u.user_id());
      }
    }
    return users;
  }
};

TEST_F(BulkTest, UnknownUserGetsTheEmptyUsersAnswerMarkedAsFallback) {
  const v1::RecommendResponse cold = Rec("nobody");
  EXPECT_EQ(cold.fallback(), v1::FALLBACK_EMPTY_USER);
  EXPECT_EQ(cold.recommendations_size(), 5);
  // The same list for every user without ratings.
  EXPECT_EQ(Ids(Rec("nobody-else")), Ids(cold));
  // A user with ratings is no fallback, and is answered from them.
  const v1::RecommendResponse u0 = Rec(U(0));
  EXPECT_EQ(u0.fallback(), v1::FALLBACK_NONE);
  EXPECT_NE(Ids(u0), Ids(Rec(U(1))));
  // PredictRatings keeps NOT_FOUND.
  EXPECT_EQ(PredictS("nobody", I(1)).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(BulkTest, DeletedUserIsAColdStart) {
  v1::DeleteUserRequest del;
  del.set_user_id(U(3));
  ASSERT_TRUE(service_->DeleteUser(del).ok());
  // The deleted ratings leave the item histograms asynchronously (online
  // updater); both answers are compared once that has happened.
  service_->FlushOnlineForTest();
  const std::vector<std::string> cold = Ids(Rec("nobody"));
  const v1::RecommendResponse gone = Rec(U(3));
  EXPECT_EQ(gone.fallback(), v1::FALLBACK_EMPTY_USER);
  EXPECT_EQ(Ids(gone), cold);
}

TEST_F(BulkTest, AdHocRatingsAreNoFallback) {
  v1::RecommendRequest req;
  req.set_user_id("nobody");
  req.set_n(5);
  v1::ItemRating* r = req.add_ratings();
  r->set_item_id(I(1));
  r->set_rating(5);
  absl::StatusOr<v1::RecommendResponse> named = service_->Recommend(req);
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_EQ(named->fallback(), v1::FALLBACK_NONE);
  for (const v1::Recommendation& rec : named->recommendations()) {
    EXPECT_NE(rec.item_id(), I(1));  // rated ad hoc: excluded
  }
  req.set_user_id("");
  absl::StatusOr<v1::RecommendResponse> anonymous = service_->Recommend(req);
  ASSERT_TRUE(anonymous.ok()) << anonymous.status();
  EXPECT_EQ(anonymous->fallback(), v1::FALLBACK_NONE);
}

TEST_F(BulkTest, EveryUserInIdOrderWithTheAnswersOfRecommend) {
  // A user whose ratings were all deleted stays listed: a cold start when
  // the model does not know them either ("late", stored after training),
  // answered from the model's parameters when it does (u7).
  ASSERT_TRUE(service_
                  ->AddRatings({[] {
                    v1::AddRatingsRequest b;
                    *b.add_ratings() = Row("late", I(1), 4);
                    return b;
                  }()})
                  .ok());
  for (const std::string& user : {std::string("late"), U(7)}) {
    v1::DeleteRatingsRequest del;
    del.set_user_id(user);
    for (int i = 0; i < kItems; ++i) del.add_item_ids(I(i));
    ASSERT_TRUE(service_->DeleteRatings(del).ok());
  }
  v1::RecommendAllRequest request;
  request.mutable_template_()->set_n(5);
  absl::StatusOr<std::vector<v1::RecommendAllResponse>> messages = All(request);
  ASSERT_TRUE(messages.ok()) << messages.status();
  ASSERT_GT(messages->size(), 1u);
  std::vector<std::string> expected;
  for (int u = 0; u < kUsers; ++u) expected.push_back(U(u));
  expected.push_back("late");
  std::sort(expected.begin(), expected.end());  // "u0" < "u1" < "u10" ...
  EXPECT_EQ(Users(*messages), expected);
  const int64_t version = service_->active_version();
  int cold = 0;
  for (const v1::RecommendAllResponse& m : *messages) {
    EXPECT_EQ(m.model_version(), version);
    EXPECT_GE(m.users_size(), 1);
    EXPECT_LE(m.users_size(), kBulkUsersPerMessage);
    for (const v1::UserRecommendations& u : m.users()) {
      EXPECT_EQ(u.response().SerializeAsString(),
                Rec(u.user_id()).SerializeAsString())
          << u.user_id();
      if (u.response().fallback() == v1::FALLBACK_EMPTY_USER) {
        EXPECT_EQ(u.user_id(), "late");
        ++cold;
      }
    }
  }
  EXPECT_EQ(cold, 1);
}

TEST_F(BulkTest, ListsInRequestOrderAndResumes) {
  v1::RecommendAllRequest request;
  request.mutable_template_()->set_n(3);
  for (const char* u : {"u5", "nobody", "u1", "u5"}) request.add_user_ids(u);
  absl::StatusOr<std::vector<v1::RecommendAllResponse>> messages = All(request);
  ASSERT_TRUE(messages.ok()) << messages.status();
  EXPECT_EQ(Users(*messages),
            (std::vector<std::string>{"u5", "nobody", "u1", "u5"}));
  EXPECT_EQ((*messages)[0].users(1).response().fallback(),
            v1::FALLBACK_EMPTY_USER);
  request.set_start_after_user("nobody");
  messages = All(request);
  ASSERT_TRUE(messages.ok()) << messages.status();
  EXPECT_EQ(Users(*messages), (std::vector<std::string>{"u1", "u5"}));

  // Every user: those after the id, in id order.
  v1::RecommendAllRequest all;
  all.set_start_after_user("u55");
  messages = All(all);
  ASSERT_TRUE(messages.ok()) << messages.status();
  EXPECT_EQ(Users(*messages),
            (std::vector<std::string>{"u56", "u57", "u58", "u59", "u6", "u7",
                                      "u8", "u9"}));
  all.set_start_after_user("u9");
  messages = All(all);
  ASSERT_TRUE(messages.ok()) << messages.status();
  EXPECT_TRUE(messages->empty());
}

TEST_F(BulkTest, OneModelSnapshotForTheWholeStream) {
  const int64_t first = service_->active_version();
  v1::RecommendAllRequest request;
  request.mutable_template_()->set_n(5);
  absl::StatusOr<std::unique_ptr<RecommendAllJob>> job =
      service_->StartRecommendAll(request);
  ASSERT_TRUE(job.ok()) << job.status();
  v1::TrainRequest retrain;
  retrain.mutable_options()->set_seed(99);
  retrain.mutable_options()->set_hidden(5);
  const int64_t second = TrainDone(retrain).model_version();
  ASSERT_GT(second, first);
  ASSERT_EQ(service_->active_version(), second);
  int users = 0;
  ASSERT_TRUE(DrainRecommendAll(**job, [&](const v1::RecommendAllResponse& m) {
                EXPECT_EQ(m.model_version(), first);
                for (const v1::UserRecommendations& u : m.users()) {
                  EXPECT_EQ(u.response().SerializeAsString(),
                            Rec(u.user_id(), 5, first).SerializeAsString());
                  ++users;
                }
                return true;
              }).ok());
  EXPECT_EQ(users, kUsers);
}

TEST_F(BulkTest, ReaderGoingAwayStopsTheStream) {
  v1::RecommendAllRequest request;
  absl::StatusOr<std::unique_ptr<RecommendAllJob>> job =
      service_->StartRecommendAll(request);
  ASSERT_TRUE(job.ok()) << job.status();
  int messages = 0;
  absl::Status s = DrainRecommendAll(**job, [&](const auto&) {
    ++messages;
    return false;
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(messages, 1);
}

TEST_F(BulkTest, ErrorsNameTheField) {
  auto code_and_message = [&](const v1::RecommendAllRequest& r) {
    absl::StatusOr<std::unique_ptr<RecommendAllJob>> job =
        service_->StartRecommendAll(r);
    return job.status();
  };
  v1::RecommendAllRequest r;
  r.mutable_template_()->set_user_id("u1");
  absl::Status s = code_and_message(r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("template.user_id"), std::string::npos) << s;

  r.Clear();
  v1::ItemRating* adhoc = r.mutable_template_()->add_ratings();
  adhoc->set_item_id(I(1));
  adhoc->set_rating(4);
  s = code_and_message(r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("template.ratings"), std::string::npos) << s;

  r.Clear();
  for (int u = 0; u < 9; ++u) r.add_user_ids(U(u));  // limit 8
  s = code_and_message(r);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("--max-bulk-users"), std::string::npos) << s;

  r.Clear();
  r.add_user_ids(U(1));
  r.add_user_ids("");
  s = code_and_message(r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("user_ids[1]"), std::string::npos) << s;

  r.Clear();
  r.add_user_ids(U(1));
  r.set_start_after_user(U(2));
  s = code_and_message(r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("start_after_user"), std::string::npos) << s;

  r.Clear();
  r.mutable_template_()->set_n(-1);
  EXPECT_EQ(code_and_message(r).code(), absl::StatusCode::kInvalidArgument);
  r.Clear();
  r.mutable_template_()->set_model_version(99);
  EXPECT_EQ(code_and_message(r).code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace rbmrec::server::testing
