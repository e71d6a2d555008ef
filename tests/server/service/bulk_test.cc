// Recommend's cold start (a user without ratings gets the empty user's
// answer, marked as a fallback) and RecommendAll (server/service/bulk.h):
// the same answers as one Recommend per user, in user order, resumable,
// from one model snapshot, with clear errors.

#include "server/service/bulk.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
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

  // Runs `request` as a RecommendAll stream and compares every user's
  // answer with Recommend of the template and the user's id, bit for bit
  // (serialized). Returns the users answered.
  int ExpectSameAsRecommend(const v1::RecommendAllRequest& request) {
    absl::StatusOr<std::vector<v1::RecommendAllResponse>> messages =
        All(request);
    EXPECT_TRUE(messages.ok()) << messages.status();
    if (!messages.ok()) return 0;
    int users = 0;
    for (const v1::RecommendAllResponse& m : *messages) {
      for (const v1::UserRecommendations& u : m.users()) {
        v1::RecommendRequest one = request.template_();
        one.set_user_id(u.user_id());
        absl::StatusOr<v1::RecommendResponse> r = service_->Recommend(one);
        EXPECT_TRUE(r.ok()) << u.user_id() << ": " << r.status();
        if (!r.ok()) continue;
        EXPECT_EQ(u.response().SerializeAsString(), r->SerializeAsString())
            << u.user_id() << " with "
            << request.template_().ShortDebugString();
        ++users;
      }
    }
    return users;
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

// Item i: categories "mod4-<i % 4>"; item 3 hidden.
v1::PutItemsRequest BulkCatalogue() {
  v1::PutItemsRequest req;
  for (int i = 0; i < kItems; ++i) {
    v1::Item* item = req.add_items();
    item->set_item_id(I(i));
    item->add_categories(absl::StrCat("mod4-", i % 4));
    item->set_hidden(i == 3);
  }
  return req;
}

// Every ranking and method, with and without each filter and a page: the
// batched answers (shared passes over W, up to 8 users at a time) equal
// Recommend's for every stored user and for listed ones (a cold start).
TEST_F(BulkTest, EveryRankingFilterAndPageEqualsRecommend) {
  ASSERT_TRUE(service_->PutItems(BulkCatalogue()).ok());
  const std::vector<v1::RankBy> rankings = {
      v1::RANK_BY_UNSPECIFIED, v1::EXPECTED_RATING, v1::PROBABILITY_AT_LEAST,
      v1::PROBABILITY_RATED, v1::PROBABILITY_RATED_AT_LEAST};
  for (const v1::RankBy by : rankings) {
    for (const v1::Method method : {v1::METHOD_UNSPECIFIED, v1::MEAN_FIELD}) {
      for (int filter = 0; filter < 5; ++filter) {
        v1::RecommendAllRequest request;
        v1::RecommendRequest& t = *request.mutable_template_();
        t.set_n(5);
        t.set_rank_by(by);
        t.set_method(method);
        if (by == v1::PROBABILITY_AT_LEAST) t.set_threshold(4);
        switch (filter) {
          case 1:
            t.add_categories("mod4-1");
            break;
          case 2:
            for (int i : {0, 1, 2, 5, 8}) t.add_exclude_item_ids(I(i));
            break;
          case 3:
            for (int i : {4, 6, 7, 9, 11}) t.add_candidate_item_ids(I(i));
            break;
          case 4:
            t.set_offset(3);
            break;
        }
        EXPECT_EQ(ExpectSameAsRecommend(request), kUsers)
            << t.ShortDebugString();
        // Listed users, with a cold start and a repeat in one batch.
        for (const char* u : {"u5", "nobody", "u1", "u5", "u42"}) {
          request.add_user_ids(u);
        }
        EXPECT_EQ(ExpectSameAsRecommend(request), 5) << t.ShortDebugString();
      }
    }
  }
}

// Without the rated RBM the default ranking and the distribution rankings
// still equal Recommend's; the p(rated) rankings fail up front.
TEST_F(BulkTest, ModelWithoutTheRatedRbm) {
  v1::TrainRequest train;
  train.mutable_options()->set_rated_hidden(0);
  TrainDone(train);
  for (const v1::RankBy by : {v1::RANK_BY_UNSPECIFIED, v1::EXPECTED_RATING,
                              v1::PROBABILITY_AT_LEAST}) {
    v1::RecommendAllRequest request;
    request.mutable_template_()->set_n(4);
    request.mutable_template_()->set_rank_by(by);
    if (by == v1::PROBABILITY_AT_LEAST) {
      request.mutable_template_()->set_threshold(4);
    }
    EXPECT_EQ(ExpectSameAsRecommend(request), kUsers) << by;
  }
  v1::RecommendAllRequest rated;
  rated.mutable_template_()->set_rank_by(v1::PROBABILITY_RATED_AT_LEAST);
  EXPECT_EQ(service_->StartRecommendAll(rated).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// A user deleted while the stream runs (after its first message), one the
// model does not know (stored after training): every stored user's stream
// skips them (their id leaves the store), a listed one is answered as a
// cold start; every later answer equals Recommend's on the stream's model.
TEST_F(BulkTest, UserDeletedMidStreamIsSkippedOrAColdStart) {
  ServiceOptions o = DefaultOptions();
  o.registry.activation = Activation::kAlways;
  o.online.enabled = false;
  o.limits.max_bulk_users = kUsers + 1;
  o.cold_start = ColdStart::kEmptyUser;
  Start(nullptr, o);
  LoadSynthetic();
  TrainDone();
  const std::string late = "zz-late";  // after every "u.." id
  std::vector<std::string> ids;
  for (int u = 0; u < kUsers; ++u) ids.push_back(U(u));
  std::sort(ids.begin(), ids.end());
  ids.push_back(late);
  v1::RecommendAllRequest stored;
  stored.mutable_template_()->set_n(5);
  v1::RecommendAllRequest listed = stored;
  for (const std::string& id : ids) listed.add_user_ids(id);
  for (const bool list : {false, true}) {
    SCOPED_TRACE(list ? "listed users" : "every stored user");
    ASSERT_TRUE(service_
                    ->AddRatings({[&] {
                      v1::AddRatingsRequest b;
                      *b.add_ratings() = Row(late, I(1), 4);
                      return b;
                    }()})
                    .ok());
    absl::StatusOr<std::unique_ptr<RecommendAllJob>> job =
        service_->StartRecommendAll(list ? listed : stored);
    ASSERT_TRUE(job.ok()) << job.status();
    const int64_t version = (*job)->model_version();
    std::vector<v1::UserRecommendations> later;
    int messages = 0;
    ASSERT_TRUE(
        DrainRecommendAll(**job, [&](const v1::RecommendAllResponse& m) {
          if (++messages > 1) {
            later.insert(later.end(), m.users().begin(), m.users().end());
            return true;
          }
          v1::DeleteUserRequest del;
          del.set_user_id(late);
          EXPECT_TRUE(service_->DeleteUser(del).ok());
          service_->FlushOnlineForTest();
          return true;
        }).ok());
    ASSERT_GT(messages, 1);
    ASSERT_FALSE(later.empty());
    if (list) {
      EXPECT_EQ(later.back().user_id(), late);
      EXPECT_EQ(later.back().response().fallback(), v1::FALLBACK_EMPTY_USER);
    } else {
      EXPECT_EQ(later.back().user_id(), U(9));  // skipped
    }
    for (const v1::UserRecommendations& u : later) {
      EXPECT_EQ(u.response().SerializeAsString(),
                Rec(u.user_id(), 5, version).SerializeAsString())
          << u.user_id();
    }
  }
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
