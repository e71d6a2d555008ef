// Tokens and roles on a real server (GrpcServerOptions::authorizer): every
// rbmrec.v1.Rbmrec method, taken from the service descriptor, x every role x
// {no token, bad token, right token}; health needs no token; reflection needs
// the read role; denied calls are logged without the token.

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "proto/health.grpc.pb.h"
#include "server/security/auth.h"
#include "tests/server/security_fixture.h"
#include "tests/server/service_fixture.h"

namespace rbmrec::server {
namespace {

// The contract (docs/security.md), written out here rather than
// taken from server/security/auth.cc, so that the test checks the table instead
// of repeating it. A method of the service that is missing here fails the test.
const std::map<std::string, Role>& ExpectedRoles() {
  static const auto* roles = new std::map<std::string, Role>{
      {"PredictRatings", Role::kRead}, {"Recommend", Role::kRead},
      {"GetStats", Role::kRead},       {"ListModels", Role::kRead},
      {"SimilarItems", Role::kRead},   {"RecommendAll", Role::kRead},
      {"AddRatings", Role::kWrite},    {"DeleteRatings", Role::kWrite},
      {"DeleteUser", Role::kWrite},    {"PutItems", Role::kWrite},
      {"Train", Role::kAdmin},         {"CancelTraining", Role::kAdmin},
      {"ActivateModel", Role::kAdmin}, {"DeleteModel", Role::kAdmin},
      {"PinModel", Role::kAdmin},      {"PruneModels", Role::kAdmin},
      {"GetItem", Role::kRead},        {"GetUserRatings", Role::kWrite},
  };
  return *roles;
}

constexpr char kReadToken[] = "rbmrec_read-token-for-tests";
constexpr char kWriteToken[] = "rbmrec_write-token-for-tests";
constexpr char kAdminToken[] = "rbmrec_admin-token-for-tests";
constexpr char kUnknownToken[] = "rbmrec_unknown-SECRET-token";

std::string Bearer(const std::string& token) {
  return absl::StrCat("Bearer ", token);
}

class SecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<TokenTable> table = TokenTable::Parse(
        absl::StrCat("reader read ", TokenHashText(kReadToken), "\n",
                     "writer write ", TokenHashText(kWriteToken), "\n",
                     "boss admin ", TokenHashText(kAdminToken), "\n"),
        "test-tokens");
    ASSERT_TRUE(table.ok()) << table.status();
    GrpcServerOptions go;
    go.reflection = true;
    go.authorizer = std::make_shared<Authorizer>(std::move(*table));
    server_.Start(go);
    channel_ =
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_.server->port()),
                            grpc::InsecureChannelCredentials());
  }

  TestServer server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(SecurityTest, EveryMethodEveryRoleEveryToken) {
  const google::protobuf::ServiceDescriptor& service = RbmrecDescriptor();
  ASSERT_GT(service.method_count(), 0);
  struct Client {
    const char* label;
    std::string header;
    absl::optional<Role> role;  // nullopt: no valid token
  };
  const std::vector<Client> clients = {
      {"no token", "", absl::nullopt},
      {"unknown token", Bearer(kUnknownToken), absl::nullopt},
      {"not a bearer header", absl::StrCat("Basic ", kAdminToken),
       absl::nullopt},
      {"read", Bearer(kReadToken), Role::kRead},
      {"write", Bearer(kWriteToken), Role::kWrite},
      {"admin", Bearer(kAdminToken), Role::kAdmin},
  };
  int allowed = 0;
  for (int i = 0; i < service.method_count(); ++i) {
    const google::protobuf::MethodDescriptor& method = *service.method(i);
    auto expected = ExpectedRoles().find(method.name());
    ASSERT_NE(expected, ExpectedRoles().end())
        << method.name()
        << " is an RPC without an expected role in this test: add it to "
           "ExpectedRoles (and the roles table of docs/security.md)";
    const Role needed = expected->second;
    for (const Client& client : clients) {
      SCOPED_TRACE(absl::StrCat(method.name(), ", ", client.label));
      grpc::Status s = CallEmpty(channel_, method, client.header);
      if (!client.role.has_value()) {
        EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED)
            << s.error_message();
        EXPECT_TRUE(
            absl::StartsWith(s.error_message(), "missing or unknown token"))
            << s.error_message();
      } else if (*client.role < needed) {
        EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED)
            << s.error_message();
        EXPECT_TRUE(absl::StrContains(
            s.error_message(),
            absl::StrCat(method.name(), " needs the ", RoleName(needed),
                         " role; client '")))
            << s.error_message();
      } else {
        // Allowed: it may fail for other reasons (empty request).
        EXPECT_NE(s.error_code(), grpc::StatusCode::UNAUTHENTICATED)
            << s.error_message();
        EXPECT_NE(s.error_code(), grpc::StatusCode::PERMISSION_DENIED)
            << s.error_message();
        ++allowed;
      }
    }
  }
  // read: the read methods, write: read and write ones, admin: all.
  int read = 0, write = 0;
  for (const auto& [method, role] : ExpectedRoles()) {
    read += role == Role::kRead;
    write += role != Role::kAdmin;
  }
  EXPECT_EQ(read, 7);  // PredictRatings, Recommend, GetStats, ListModels,
                       // SimilarItems, RecommendAll, GetItem
  EXPECT_EQ(allowed, read + write + service.method_count());
}

TEST_F(SecurityTest, AddRatingsIsRefusedBeforeAnyBatchIsStored) {
  auto stub = v1::Rbmrec::NewStub(channel_);
  {
    grpc::ClientContext context;
    context.AddMetadata("authorization", Bearer(kReadToken));
    v1::AddRatingsResponse response;
    auto writer = stub->AddRatings(&context, &response);
    v1::AddRatingsRequest batch;
    v1::Rating* r = batch.add_ratings();
    r->set_user_id("u1");
    r->set_item_id("i1");
    r->set_rating(4);
    writer->Write(batch);
    writer->WritesDone();
    EXPECT_EQ(writer->Finish().error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  grpc::ClientContext context;
  context.AddMetadata("authorization", Bearer(kReadToken));
  v1::GetStatsResponse stats;
  ASSERT_TRUE(stub->GetStats(&context, v1::GetStatsRequest(), &stats).ok());
  EXPECT_EQ(stats.ratings(), 0);
}

// The privacy rule: ad-hoc ratings merged over a stored user's need the
// write role. Probing with them recovers a stored rating exactly (the one
// value that leaves the answer unchanged is the stored one): the write
// token still can, a read token cannot; anonymous ad-hoc ratings stay read.
TEST_F(SecurityTest, ReadTokenCannotProbeStoredRatingsWithAdHocRatings) {
  ASSERT_TRUE(server_.service->AddRatings({testing::SyntheticBatch()}).ok());
  v1::TrainRequest train;
  train.mutable_options()->set_hidden(6);
  train.mutable_options()->set_epochs(5);
  train.mutable_options()->set_threads(1);
  ASSERT_TRUE(server_.service
                  ->Train(train, [](const v1::TrainProgress&) { return true; })
                  .ok());
  ASSERT_GT(server_.service->active_version(), 0);
  // u0 rated i0 (Rated(0, 0)); the probe predicts another item.
  ASSERT_TRUE(testing::Rated(0, 0));
  const double stored = testing::PlantedRating(0, 0);
  auto stub = v1::Rbmrec::NewStub(channel_);
  auto predict = [&](const char* token, const std::string& user, double adhoc,
                     v1::PredictRatingsResponse* out) {
    grpc::ClientContext context;
    context.AddMetadata("authorization", Bearer(token));
    v1::PredictRatingsRequest req;
    req.set_user_id(user);
    req.add_item_ids(testing::I(25));
    if (adhoc > 0) {
      v1::ItemRating* r = req.add_ratings();
      r->set_item_id(testing::I(0));
      r->set_rating(adhoc);
    }
    return stub->PredictRatings(&context, req, out);
  };
  v1::PredictRatingsResponse base;
  ASSERT_TRUE(predict(kReadToken, "u0", 0, &base).ok());  // plain: read
  auto recover = [&](const char* token, grpc::Status* last) {
    std::vector<double> unchanged;
    for (double k = 1; k <= 5; ++k) {
      v1::PredictRatingsResponse probe;
      *last = predict(token, "u0", k, &probe);
      if (!last->ok()) continue;
      if (probe.predictions(0).SerializeAsString() ==
          base.predictions(0).SerializeAsString()) {
        unchanged.push_back(k);
      }
    }
    return unchanged;
  };
  grpc::Status last;
  EXPECT_EQ(recover(kWriteToken, &last), std::vector<double>{stored});
  EXPECT_TRUE(last.ok()) << last.error_message();
  EXPECT_TRUE(recover(kReadToken, &last).empty());
  EXPECT_EQ(last.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(absl::StrContains(last.error_message(),
                                "ad-hoc ratings merged over a stored user's"))
      << last.error_message();
  EXPECT_TRUE(absl::StrContains(last.error_message(), "needs the write role"))
      << last.error_message();

  // Recommend: the same rule.
  {
    grpc::ClientContext context;
    context.AddMetadata("authorization", Bearer(kReadToken));
    v1::RecommendRequest req;
    req.set_user_id("u0");
    v1::ItemRating* r = req.add_ratings();
    r->set_item_id(testing::I(0));
    r->set_rating(stored);
    v1::RecommendResponse resp;
    EXPECT_EQ(stub->Recommend(&context, req, &resp).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  // Anonymous ad-hoc ratings need only read.
  v1::PredictRatingsResponse anonymous;
  grpc::Status s = predict(kReadToken, "", 5, &anonymous);
  EXPECT_TRUE(s.ok()) << s.error_message();

  // GetUserRatings, which hands out the stored ratings themselves: the
  // same rule, write role; the write token reads the stored rating.
  auto user_ratings = [&](const char* token, v1::GetUserRatingsResponse* out) {
    grpc::ClientContext context;
    context.AddMetadata("authorization", Bearer(token));
    v1::GetUserRatingsRequest req;
    req.set_user_id("u0");
    return stub->GetUserRatings(&context, req, out);
  };
  v1::GetUserRatingsResponse page;
  s = user_ratings(kReadToken, &page);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(absl::StrContains(s.error_message(),
                                "GetUserRatings needs the write role"))
      << s.error_message();
  EXPECT_EQ(page.ratings_size(), 0);
  s = user_ratings(kWriteToken, &page);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_GT(page.ratings_size(), 0);
  EXPECT_EQ(page.ratings(0).item_id(), testing::I(0));
  EXPECT_EQ(page.ratings(0).rating(), stored);
}

TEST_F(SecurityTest, HealthNeedsNoToken) {
  auto health = grpc::health::v1::Health::NewStub(channel_);
  for (const std::string& name :
       {std::string(), std::string("rbmrec.v1.Rbmrec")}) {
    grpc::ClientContext context;
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(name);
    grpc::health::v1::HealthCheckResponse response;
    grpc::Status s = health->Check(&context, request, &response);
    EXPECT_TRUE(s.ok()) << name << ": " << s.error_message();
  }
}

TEST_F(SecurityTest, ReflectionNeedsTheReadRole) {
  for (const char* path :
       {"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"}) {
    SCOPED_TRACE(path);
    int services = 0;
    EXPECT_EQ(ListServices(channel_, path, "", &services).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(services, 0);
    EXPECT_EQ(ListServices(channel_, path, Bearer(kUnknownToken), &services)
                  .error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(services, 0);
    grpc::Status s =
        ListServices(channel_, path, Bearer(kReadToken), &services);
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_GE(services, 4);  // rbmrec, health, reflection v1 and v1alpha
  }
}

// Captures what the process writes to stderr (the server's log) while alive.
class StderrCapture {
 public:
  StderrCapture() {
    path_ = absl::StrCat(::testing::TempDir(), "/security_test_stderr.log");
    std::fflush(stderr);
    saved_ = dup(2);
    int fd = open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 2);
    close(fd);
  }
  std::string Finish() {
    std::fflush(stderr);
    dup2(saved_, 2);
    close(saved_);
    std::ifstream in(path_);
    std::stringstream text;
    text << in.rdbuf();
    std::remove(path_.c_str());
    return text.str();
  }

 private:
  std::string path_;
  int saved_ = -1;
};

TEST_F(SecurityTest, DeniedCallsAreLoggedWithPeerAndMethodButNoToken) {
  const google::protobuf::MethodDescriptor* train =
      RbmrecDescriptor().FindMethodByName("Train");
  const google::protobuf::MethodDescriptor* stats =
      RbmrecDescriptor().FindMethodByName("GetStats");
  ASSERT_NE(train, nullptr);
  StderrCapture capture;
  const grpc::Status unknown =
      CallEmpty(channel_, *train, Bearer(kUnknownToken));
  const grpc::Status too_low = CallEmpty(channel_, *train, Bearer(kReadToken));
  const grpc::Status ok = CallEmpty(channel_, *stats, Bearer(kReadToken));
  const std::string log = capture.Finish();
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(too_low.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(ok.ok()) << ok.error_message();

  std::vector<std::string> denied;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (absl::StrContains(line, "event=call_denied")) {
      denied.emplace_back(line);
    }
  }
  ASSERT_EQ(denied.size(), 2u) << log;
  for (const std::string& line : denied) {
    EXPECT_TRUE(absl::StrContains(line, "method=/rbmrec.v1.Rbmrec/Train"))
        << line;
    EXPECT_TRUE(absl::StrContains(line, "peer=ipv4:127.0.0.1:")) << line;
  }
  EXPECT_TRUE(absl::StrContains(denied[0], "code=UNAUTHENTICATED"));
  EXPECT_TRUE(absl::StrContains(denied[1], "client=reader"));
  EXPECT_TRUE(absl::StrContains(denied[1], "code=PERMISSION_DENIED"));
  EXPECT_TRUE(absl::StrContains(denied[1], "needs=admin"));
  for (const char* secret : {kUnknownToken, kReadToken, "SECRET"}) {
    EXPECT_FALSE(absl::StrContains(log, secret)) << log;
  }
}

TEST(SecurityOffTest, WithoutAnAuthorizerEveryCallIsOpen) {
  TestServer server;
  server.Start(GrpcServerOptions());
  auto channel =
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", server.server->port()),
                          grpc::InsecureChannelCredentials());
  const google::protobuf::ServiceDescriptor& service = RbmrecDescriptor();
  for (int i = 0; i < service.method_count(); ++i) {
    grpc::Status s = CallEmpty(channel, *service.method(i), "");
    EXPECT_NE(s.error_code(), grpc::StatusCode::UNAUTHENTICATED)
        << service.method(i)->name();
    EXPECT_NE(s.error_code(), grpc::StatusCode::PERMISSION_DENIED)
        << service.method(i)->name();
  }
}

}  // namespace
}  // namespace rbmrec::server
