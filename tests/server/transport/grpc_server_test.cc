// In-process tests of the gRPC layer (server/transport/grpc_server.h): a real
// server on a loopback port over a ":memory:" store, called through a real
// channel. AddRatings is driven with raw byte messages, so a test can send a
// message that a generated stub would not (invalid UTF-8 in a string field).

#include "server/transport/grpc_server.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/impl/client_unary_call.h"
#include "grpcpp/impl/rpc_method.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/sync_stream.h"
#include "gtest/gtest.h"
#include "proto/health.grpc.pb.h"
#include "proto/rbmrec.grpc.pb.h"
#include "store/store.h"
#include "tests/server/grpc_fixture.h"

namespace rbmrec::server {
namespace {

using Trailers = std::map<std::string, std::string>;

constexpr char kAddRatingsMethod[] = "/rbmrec.v1.Rbmrec/AddRatings";

// A batch of `n` valid rows of user `user`.
std::string Batch(const std::string& user, int n) {
  v1::AddRatingsRequest req;
  for (int i = 0; i < n; ++i) {
    v1::Rating* r = req.add_ratings();
    r->set_user_id(user);
    r->set_item_id(absl::StrCat("i", i));
    r->set_rating(1 + i % 5);
  }
  return req.SerializeAsString();
}

// A batch whose user id is not valid UTF-8: the wire bytes of a valid batch
// with the id's bytes replaced (same length).
std::string InvalidUtf8Batch() {
  std::string bytes = Batch("u-BAD", 2);
  absl::StrReplaceAll({{"u-BAD", "u-\xff\xfe\xfd"}}, &bytes);
  v1::AddRatingsRequest check;
  EXPECT_FALSE(check.ParseFromString(bytes)) << "the batch must not parse";
  return bytes;
}

Trailers TrailersOf(const grpc::ClientContext& context) {
  Trailers out;
  for (const auto& [key, value] : context.GetServerTrailingMetadata()) {
    out[std::string(key.data(), key.size())] =
        std::string(value.data(), value.size());
  }
  return out;
}

struct RawResult {
  grpc::Status status;
  Trailers trailers;
  v1::AddRatingsResponse response;
};

// One AddRatings stream of raw messages.
RawResult AddRatingsRaw(const std::shared_ptr<grpc::Channel>& channel,
                        const std::vector<std::string>& messages) {
  grpc::ClientContext context;
  grpc::ByteBuffer response;
  const grpc::internal::RpcMethod method(
      kAddRatingsMethod, grpc::internal::RpcMethod::CLIENT_STREAMING, channel);
  std::unique_ptr<grpc::ClientWriter<grpc::ByteBuffer>> writer(
      grpc::internal::ClientWriterFactory<grpc::ByteBuffer>::Create(
          channel.get(), method, &context, &response));
  for (const std::string& m : messages) {
    grpc::Slice slice(m);
    if (!writer->Write(grpc::ByteBuffer(&slice, 1))) break;
  }
  writer->WritesDone();
  RawResult result;
  result.status = writer->Finish();
  result.trailers = TrailersOf(context);
  if (result.status.ok()) {
    EXPECT_TRUE(grpc::SerializationTraits<v1::AddRatingsResponse>::Deserialize(
                    &response, &result.response)
                    .ok());
  }
  return result;
}

class GrpcServerTest : public ::testing::Test {
 protected:
  // real_serving: readiness from the service itself, polled only once a
  // minute (so that only the refresh after a publish can change it).
  void Start(bool reflection = true, bool real_serving = false) {
    ServiceOptions so = InProcessServiceOptions();
    so.limits.max_batch_rows = 10;
    GrpcServerOptions go;
    go.reflection = reflection;
    go.serving = [this] { return serving_.load(); };
    go.health_poll_ms = 10;
    if (real_serving) {
      go.serving = [this] { return srv_.service->Serving(); };
      go.health_poll_ms = 60000;
    }
    srv_.Start(go, so);
    service_ = srv_.service.get();
    server_ = srv_.server.get();
    channel_ = srv_.channel;
    stub_ = srv_.stub.get();
  }

  void TearDown() override { srv_.Stop(); }

  void AddSomeRatings() {
    grpc::Status s = server::AddSomeRatings(stub_);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }

  // Trains a tiny model that always becomes active; returns its version
  // (0 when the job did not succeed).
  int64_t TrainOnce() {
    grpc::Status status;
    v1::TrainProgress last = TrainTiny(stub_, &status);
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(last.state(), v1::TrainProgress::SUCCEEDED) << last.message();
    return last.state() == v1::TrainProgress::SUCCEEDED ? last.model_version()
                                                        : 0;
  }

  int64_t StoredRatings() {
    grpc::ClientContext context;
    v1::GetStatsResponse stats;
    grpc::Status s = stub_->GetStats(&context, v1::GetStatsRequest(), &stats);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return stats.ratings();
  }

  grpc::health::v1::HealthCheckResponse::ServingStatus Health(
      const std::string& service) {
    auto health = grpc::health::v1::Health::NewStub(channel_);
    grpc::ClientContext context;
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(service);
    grpc::health::v1::HealthCheckResponse response;
    grpc::Status s = health->Check(&context, request, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return response.status();
  }

  // Polls Health(service) until it is `want` (within 5 s).
  bool HealthBecomes(
      const std::string& service,
      grpc::health::v1::HealthCheckResponse::ServingStatus want) {
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < until) {
      if (Health(service) == want) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }

  std::atomic<bool> serving_{false};
  InProcessServer srv_;
  RbmrecService* service_ = nullptr;
  GrpcServer* server_ = nullptr;
  std::shared_ptr<grpc::Channel> channel_;
  v1::Rbmrec::Stub* stub_ = nullptr;
};

TEST_F(GrpcServerTest, ASecondServerOnTheSamePortIsRefused) {
  Start();
  GrpcServerOptions go;
  go.listen = absl::StrCat("127.0.0.1:", server_->port());
  absl::StatusOr<std::unique_ptr<GrpcServer>> second =
      GrpcServer::Start(service_, go);
  ASSERT_FALSE(second.ok()) << "two servers listen on one port";
  EXPECT_NE(second.status().message().find("address already in use"),
            std::string::npos)
      << second.status();
  // The first one still answers.
  grpc::ClientContext context;
  v1::GetStatsResponse stats;
  EXPECT_TRUE(stub_->GetStats(&context, v1::GetStatsRequest(), &stats).ok());
}

TEST_F(GrpcServerTest, ValidRawStreamCommitsEveryBatch) {
  Start();
  RawResult r =
      AddRatingsRaw(channel_, {Batch("a", 3), Batch("b", 4), Batch("c", 2)});
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.response.batches(), 3);
  EXPECT_EQ(r.response.accepted(), 9);
  EXPECT_EQ(r.response.rejected(), 0);
  EXPECT_EQ(r.trailers.count("rbmrec-committed-batches"), 0u);
  EXPECT_EQ(r.trailers.count("rbmrec-error-reason"), 0u);
  EXPECT_EQ(StoredRatings(), 9);
}

TEST_F(GrpcServerTest, MalformedMessageFailsTheCallAndStatesWhatIsCommitted) {
  Start();
  RawResult r = AddRatingsRaw(
      channel_, {Batch("a", 3), InvalidUtf8Batch(), Batch("c", 2)});
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(r.status.error_message().find("batch 1 (0-based)"),
            std::string::npos)
      << r.status.error_message();
  EXPECT_NE(r.status.error_message().find("3 accepted rows"), std::string::npos)
      << r.status.error_message();
  EXPECT_EQ(r.trailers["rbmrec-error-reason"], "MALFORMED_MESSAGE");
  EXPECT_EQ(r.trailers["rbmrec-committed-batches"], "1");
  EXPECT_EQ(r.trailers["rbmrec-committed-rows"], "3");
  // Batch 0 is stored, batches 1 and 2 are not.
  EXPECT_EQ(StoredRatings(), 3);
}

TEST_F(GrpcServerTest, MalformedFirstMessageCommitsNothing) {
  Start();
  RawResult r = AddRatingsRaw(channel_, {"\xff\xff\xff", Batch("a", 3)});
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(r.status.error_message().find("batch 0 (0-based)"),
            std::string::npos)
      << r.status.error_message();
  EXPECT_EQ(r.trailers["rbmrec-error-reason"], "MALFORMED_MESSAGE");
  EXPECT_EQ(r.trailers["rbmrec-committed-batches"], "0");
  EXPECT_EQ(r.trailers["rbmrec-committed-rows"], "0");
  EXPECT_EQ(StoredRatings(), 0);
}

TEST_F(GrpcServerTest, BatchOverTheLimitStatesWhatIsCommitted) {
  Start();  // max_batch_rows = 10
  RawResult r = AddRatingsRaw(
      channel_, {Batch("a", 3), Batch("b", 4), Batch("c", 11), Batch("d", 1)});
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << r.status.error_message();
  EXPECT_EQ(r.trailers["rbmrec-committed-batches"], "2");
  EXPECT_EQ(r.trailers["rbmrec-committed-rows"], "7");
  EXPECT_EQ(StoredRatings(), 7);
}

TEST_F(GrpcServerTest, GeneratedStubStillWorks) {
  Start();
  grpc::ClientContext context;
  v1::AddRatingsResponse response;
  auto writer = stub_->AddRatings(&context, &response);
  v1::AddRatingsRequest batch;
  ASSERT_TRUE(batch.ParseFromString(Batch("a", 5)));
  ASSERT_TRUE(writer->Write(batch));
  writer->WritesDone();
  grpc::Status s = writer->Finish();
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(response.accepted(), 5);
  EXPECT_EQ(response.batches(), 1);
}

TEST_F(GrpcServerTest, ServiceHealthFollowsServingOverallStaysLive) {
  using HS = grpc::health::v1::HealthCheckResponse;
  Start();  // serving_ is false
  EXPECT_EQ(Health("rbmrec.v1.Rbmrec"), HS::NOT_SERVING);
  EXPECT_EQ(Health(""), HS::SERVING);
  serving_ = true;
  EXPECT_TRUE(HealthBecomes("rbmrec.v1.Rbmrec", HS::SERVING));
  EXPECT_EQ(Health(""), HS::SERVING);
  serving_ = false;
  EXPECT_TRUE(HealthBecomes("rbmrec.v1.Rbmrec", HS::NOT_SERVING));
  EXPECT_EQ(Health(""), HS::SERVING);
}

TEST_F(GrpcServerTest, ServiceIsServingAsSoonAsTrainSaysSucceeded) {
  using HS = grpc::health::v1::HealthCheckResponse;
  Start(/*reflection=*/true, /*real_serving=*/true);
  EXPECT_EQ(Health("rbmrec.v1.Rbmrec"), HS::NOT_SERVING);
  AddSomeRatings();
  ASSERT_EQ(TrainOnce(), 1);
  // No polling within the next minute: the publish itself refreshed it.
  EXPECT_EQ(Health("rbmrec.v1.Rbmrec"), HS::SERVING);
}

TEST_F(GrpcServerTest, AStoredVersionThatIsNotLoadedIsServedFromALoaderThread) {
  Start(/*reflection=*/true, /*real_serving=*/true);
  AddSomeRatings();
  ASSERT_EQ(TrainOnce(), 1);
  ASSERT_EQ(TrainOnce(), 2);
  ASSERT_EQ(service_->active_version(), 2);
  // Version 1 is stored, not active and not cached: answering it means a
  // store read and a decode, which the handler hands to the loader.
  EXPECT_FALSE(service_->ModelResident(1));
  {
    // SimilarItems of a version that is not loaded: from the loader too.
    grpc::ClientContext context;
    v1::SimilarItemsRequest request;
    request.add_item_ids("i1");
    request.set_n(3);
    request.set_model_version(1);
    v1::SimilarItemsResponse response;
    grpc::Status s = stub_->SimilarItems(&context, request, &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(response.model_version(), 1);
    EXPECT_EQ(response.items_size(), 3);
    EXPECT_TRUE(service_->ModelResident(1));
  }
  for (int version : {1, 1, 2, 0}) {
    grpc::ClientContext context;
    v1::PredictRatingsRequest request;
    request.set_user_id("u3");
    request.add_item_ids("i1");
    request.set_model_version(version);
    v1::PredictRatingsResponse response;
    grpc::Status s = stub_->PredictRatings(&context, request, &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(response.model_version(), version == 0 ? 2 : version);
    ASSERT_EQ(response.predictions_size(), 1);
  }
  EXPECT_TRUE(service_->ModelResident(1));  // cached by the first call
  grpc::ClientContext context;
  v1::RecommendRequest request;
  request.set_user_id("u3");
  request.set_model_version(1);
  v1::RecommendResponse response;
  grpc::Status s = stub_->Recommend(&context, request, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(response.model_version(), 1);
}

// PredictRatings parses its requests into arenas (server/transport/
// arena_allocator.h) and Recommend reads its id lists in place (server/
// transport/recommend_wire.h): a large request (a long candidate list, more
// than the arena's inline block) answers exactly as the service does in
// process, and so does a small one.
TEST_F(GrpcServerTest, ArenaParsedRequestsAnswerAsTheServiceDoes) {
  Start();
  AddSomeRatings();
  ASSERT_EQ(TrainOnce(), 1);
  for (const int padding : {0, 400}) {
    v1::RecommendRequest request;
    request.set_user_id("u3");
    request.set_n(5);
    for (int i = 0; i < 15; i += 2) {
      request.add_candidate_item_ids(absl::StrCat("i", i));
    }
    // Unknown ids are no candidates; 400 of 100 bytes make the request
    // about 40 KB.
    for (int i = 0; i < padding; ++i) {
      request.add_candidate_item_ids(
          absl::StrCat("unknown-", i, "-", std::string(80, 'x')));
    }
    request.add_exclude_item_ids("i2");
    grpc::ClientContext context;
    v1::RecommendResponse response;
    grpc::Status s = stub_->Recommend(&context, request, &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
    absl::StatusOr<v1::RecommendResponse> direct = service_->Recommend(request);
    ASSERT_TRUE(direct.ok()) << direct.status();
    // The 8 known candidates less the user's rated ones.
    EXPECT_GT(response.candidates(), 0);
    EXPECT_LE(response.candidates(), 8);
    ASSERT_GT(response.recommendations_size(), 0);
    EXPECT_TRUE(
        google::protobuf::util::MessageDifferencer::Equals(response, *direct))
        << response.DebugString() << "\nvs\n"
        << direct->DebugString();

    v1::PredictRatingsRequest predict;
    predict.set_user_id("u3");
    for (int i = 0; i < 15; ++i) predict.add_item_ids(absl::StrCat("i", i));
    grpc::ClientContext predict_context;
    v1::PredictRatingsResponse predicted;
    s = stub_->PredictRatings(&predict_context, predict, &predicted);
    ASSERT_TRUE(s.ok()) << s.error_message();
    absl::StatusOr<v1::PredictRatingsResponse> predicted_direct =
        service_->PredictRatings(predict);
    ASSERT_TRUE(predicted_direct.ok()) << predicted_direct.status();
    EXPECT_EQ(predicted.predictions_size(), 15);
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(
        predicted, *predicted_direct));
  }
}

// Recommend's request bytes as a client may send them: malformed bytes and
// an id that is not UTF-8 are INVALID_ARGUMENT naming the problem (before
// the raw read, protobuf's parse failed the call without naming it).
TEST_F(GrpcServerTest, RecommendRefusesMalformedBytesAndNamesABadId) {
  Start();
  AddSomeRatings();
  ASSERT_EQ(TrainOnce(), 1);
  auto call = [&](const std::string& bytes, v1::RecommendResponse* response) {
    grpc::ClientContext context;
    const grpc::internal::RpcMethod method(
        "/rbmrec.v1.Rbmrec/Recommend", grpc::internal::RpcMethod::NORMAL_RPC,
        channel_);
    grpc::Slice slice(bytes);
    const grpc::ByteBuffer request(&slice, 1);
    grpc::ByteBuffer reply;
    grpc::Status s =
        grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
            channel_.get(), method, &context, request, &reply);
    if (s.ok()) {
      EXPECT_TRUE(grpc::SerializationTraits<v1::RecommendResponse>::Deserialize(
                      &reply, response)
                      .ok());
    }
    return s;
  };
  v1::RecommendRequest good;
  good.set_user_id("u3");
  good.set_n(3);
  good.add_candidate_item_ids("i1");
  good.add_candidate_item_ids("i4");
  v1::RecommendResponse response;
  grpc::Status s = call(good.SerializeAsString(), &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  absl::StatusOr<v1::RecommendResponse> direct = service_->Recommend(good);
  ASSERT_TRUE(direct.ok()) << direct.status();
  EXPECT_TRUE(
      google::protobuf::util::MessageDifferencer::Equals(response, *direct));

  const std::string bytes = good.SerializeAsString();
  s = call(bytes.substr(0, bytes.size() - 1), &response);  // cut short
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("not a valid RecommendRequest"),
            std::string::npos)
      << s.error_message();

  v1::RecommendRequest bad = good;
  bad.add_candidate_item_ids("i-\xff");
  s = call(bad.SerializePartialAsString(), &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("candidate_item_ids[2]"), std::string::npos)
      << s.error_message();
}

// RecommendAll over the network: every user in id order, several messages
// computed on the bulk threads and written in order, each user's answer
// that of Recommend; a client that cancels ends the stream; errors of the
// request end it before any message.
TEST_F(GrpcServerTest, RecommendAllStreamsRecommendsAnswersInUserOrder) {
  Start();
  AddSomeRatings();
  std::vector<v1::AddRatingsRequest> more;  // a batch per user (limit 10)
  for (int u = 20; u < 150; ++u) {
    more.emplace_back();
    for (int i = 0; i < 6; ++i) {
      v1::Rating* r = more.back().add_ratings();
      r->set_user_id(absl::StrCat("u", u));
      r->set_item_id(absl::StrCat("i", (u * 5 + i * 2) % 15));
      r->set_rating(1 + (u * i) % 5);
    }
  }
  ASSERT_TRUE(service_->AddRatings(more).ok());
  ASSERT_EQ(TrainOnce(), 1);
  v1::RecommendAllRequest request;
  request.mutable_template_()->set_n(3);
  grpc::ClientContext context;
  auto reader = stub_->RecommendAll(&context, request);
  v1::RecommendAllResponse message;
  std::vector<std::string> users;
  int messages = 0;
  while (reader->Read(&message)) {
    ++messages;
    EXPECT_EQ(message.model_version(), 1);
    for (const v1::UserRecommendations& u : message.users()) {
      users.push_back(u.user_id());
      grpc::ClientContext one_context;
      v1::RecommendRequest one;
      one.set_user_id(u.user_id());
      one.set_n(3);
      v1::RecommendResponse expected;
      ASSERT_TRUE(stub_->Recommend(&one_context, one, &expected).ok());
      EXPECT_EQ(u.response().SerializeAsString(), expected.SerializeAsString())
          << u.user_id();
    }
  }
  grpc::Status s = reader->Finish();
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_GE(messages, 5);  // 150 users, 32 per message
  ASSERT_EQ(users.size(), 150u);
  EXPECT_TRUE(std::is_sorted(users.begin(), users.end()));
}

TEST_F(GrpcServerTest, RecommendAllCancelledByTheClientEnds) {
  Start();
  AddSomeRatings();
  ASSERT_EQ(TrainOnce(), 1);
  v1::RecommendAllRequest request;
  for (int k = 0; k < 2000; ++k) request.add_user_ids(absl::StrCat("u", k));
  {
    grpc::ClientContext context;
    auto reader = stub_->RecommendAll(&context, request);
    v1::RecommendAllResponse message;
    ASSERT_TRUE(reader->Read(&message));
    EXPECT_EQ(message.users(0).user_id(), "u0");
    context.TryCancel();
    while (reader->Read(&message)) {
    }
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  // Errors of the request end the stream before any message.
  request.mutable_template_()->set_user_id("u1");
  grpc::ClientContext context;
  auto reader = stub_->RecommendAll(&context, request);
  v1::RecommendAllResponse message;
  EXPECT_FALSE(reader->Read(&message));
  grpc::Status s = reader->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("template.user_id"), std::string::npos)
      << s.error_message();
}

}  // namespace
}  // namespace rbmrec::server
