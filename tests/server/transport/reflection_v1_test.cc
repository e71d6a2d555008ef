// Server reflection (server/transport/reflection_v1.h) on a real in-process
// server: v1 and v1alpha list and resolve the services, files by name,
// symbols, extensions and the errors of each request kind, the "already
// sent on this stream" rule, and the switch that turns reflection off.

#include "server/transport/reflection_v1.h"

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "google/protobuf/descriptor.pb.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/impl/rpc_method.h"
#include "grpcpp/support/sync_stream.h"
#include "gtest/gtest.h"
#include "proto/reflection_v1.grpc.pb.h"
#include "tests/server/grpc_fixture.h"

namespace rbmrec::server {
namespace {

using ::grpc::reflection::v1::ServerReflectionRequest;
using ::grpc::reflection::v1::ServerReflectionResponse;

constexpr char kReflectionV1[] =
    "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo";
constexpr char kReflectionV1alpha[] =
    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";

ServerReflectionRequest ListServices() {
  ServerReflectionRequest r;
  r.set_list_services("");
  return r;
}
ServerReflectionRequest Symbol(const std::string& name) {
  ServerReflectionRequest r;
  r.set_file_containing_symbol(name);
  return r;
}

// The file descriptors of a reflection response, by file name.
std::map<std::string, google::protobuf::FileDescriptorProto> Files(
    const ServerReflectionResponse& response) {
  std::map<std::string, google::protobuf::FileDescriptorProto> out;
  for (const std::string& bytes :
       response.file_descriptor_response().file_descriptor_proto()) {
    google::protobuf::FileDescriptorProto file;
    EXPECT_TRUE(file.ParseFromString(bytes));
    out[file.name()] = file;
  }
  return out;
}

bool HasService(const google::protobuf::FileDescriptorProto& file,
                const std::string& name) {
  for (const auto& s : file.service()) {
    if (s.name() == name) return true;
  }
  return false;
}

class ReflectionV1Test : public ::testing::Test {
 protected:
  void Start(bool reflection) {
    GrpcServerOptions go;
    go.reflection = reflection;
    srv_.Start(go);
  }
  InProcessServer srv_;
};

TEST_F(ReflectionV1Test, ReflectionV1AndV1alphaListAndResolveTheServices) {
  Start(/*reflection=*/true);
  for (const char* path : {kReflectionV1, kReflectionV1alpha}) {
    SCOPED_TRACE(path);
    grpc::Status status;
    std::vector<ServerReflectionResponse> responses =
        Reflect(srv_.channel, path,
                {ListServices(), Symbol("rbmrec.v1.Rbmrec"),
                 Symbol("grpc.health.v1.Health"), Symbol("no.such.Symbol")},
                &status);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(responses.size(), 4u);

    std::vector<std::string> names;
    for (const auto& s : responses[0].list_services_response().service()) {
      names.push_back(s.name());
    }
    for (const char* want : {"rbmrec.v1.Rbmrec", "grpc.health.v1.Health",
                             "grpc.reflection.v1.ServerReflection",
                             "grpc.reflection.v1alpha.ServerReflection"}) {
      EXPECT_NE(std::find(names.begin(), names.end(), want), names.end())
          << want;
    }

    auto rbmrec = Files(responses[1]);
    ASSERT_EQ(rbmrec.count("proto/rbmrec.proto"), 1u);
    EXPECT_TRUE(HasService(rbmrec["proto/rbmrec.proto"], "Rbmrec"));
    EXPECT_EQ(rbmrec["proto/rbmrec.proto"].package(), "rbmrec.v1");

    auto health = Files(responses[2]);
    ASSERT_EQ(health.count("proto/health.proto"), 1u)
        << responses[2].DebugString();
    EXPECT_TRUE(HasService(health["proto/health.proto"], "Health"));
    EXPECT_EQ(health["proto/health.proto"].package(), "grpc.health.v1");

    EXPECT_EQ(responses[3].error_response().error_code(),
              static_cast<int>(grpc::StatusCode::NOT_FOUND));
  }
}

TEST_F(ReflectionV1Test, ReflectionV1ResolvesItselfAndFilesByName) {
  Start(/*reflection=*/true);
  ServerReflectionRequest by_name;
  by_name.set_file_by_filename("proto/reflection_v1.proto");
  grpc::Status status;
  std::vector<ServerReflectionResponse> responses =
      Reflect(srv_.channel, kReflectionV1,
              {Symbol("grpc.reflection.v1.ServerReflection"), by_name,
               ServerReflectionRequest()},
              &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(responses.size(), 3u);
  auto files = Files(responses[0]);
  ASSERT_EQ(files.count("proto/reflection_v1.proto"), 1u);
  EXPECT_TRUE(
      HasService(files["proto/reflection_v1.proto"], "ServerReflection"));
  // Already sent on this stream: not sent again.
  EXPECT_EQ(
      responses[1].file_descriptor_response().file_descriptor_proto_size(), 0);
  EXPECT_EQ(responses[1].error_response().error_code(), 0);
  EXPECT_EQ(responses[2].error_response().error_code(),
            static_cast<int>(grpc::StatusCode::UNIMPLEMENTED));
}

TEST_F(ReflectionV1Test, ReflectionCanBeTurnedOff) {
  Start(/*reflection=*/false);
  for (const char* path : {kReflectionV1, kReflectionV1alpha}) {
    grpc::Status status;
    Reflect(srv_.channel, path, {ListServices()}, &status);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED) << path;
  }
}

TEST_F(ReflectionV1Test, ErrorsOfEachRequestKindAreInTheResponseNotTheStatus) {
  Start(/*reflection=*/true);
  ServerReflectionRequest no_file;
  no_file.set_file_by_filename("proto/no_such.proto");
  ServerReflectionRequest extension;
  extension.mutable_file_containing_extension()->set_containing_type(
      "rbmrec.v1.Rating");
  extension.mutable_file_containing_extension()->set_extension_number(1000);
  ServerReflectionRequest numbers;
  numbers.set_all_extension_numbers_of_type("no.such.Type");
  grpc::Status status;
  std::vector<ServerReflectionResponse> responses = Reflect(
      srv_.channel, kReflectionV1, {no_file, extension, numbers}, &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(responses.size(), 3u);
  for (const ServerReflectionResponse& r : responses) {
    EXPECT_EQ(r.error_response().error_code(),
              static_cast<int>(grpc::StatusCode::NOT_FOUND))
        << r.DebugString();
    EXPECT_FALSE(r.error_response().error_message().empty());
  }
  // Each response echoes its request.
  EXPECT_EQ(responses[0].original_request().file_by_filename(),
            "proto/no_such.proto");
}

TEST_F(ReflectionV1Test, AFileIsSentOncePerStreamButAgainOnANewStream) {
  Start(/*reflection=*/true);
  grpc::Status status;
  // rbmrec.v1.Rating and rbmrec.v1.Rbmrec live in the same file.
  std::vector<ServerReflectionResponse> one = Reflect(
      srv_.channel, kReflectionV1,
      {Symbol("rbmrec.v1.Rating"), Symbol("rbmrec.v1.Rbmrec")}, &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(one.size(), 2u);
  EXPECT_EQ(Files(one[0]).count("proto/rbmrec.proto"), 1u);
  EXPECT_EQ(Files(one[1]).count("proto/rbmrec.proto"), 0u);
  EXPECT_EQ(one[1].error_response().error_code(), 0);
  std::vector<ServerReflectionResponse> two = Reflect(
      srv_.channel, kReflectionV1alpha, {Symbol("rbmrec.v1.Rbmrec")}, &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(two.size(), 1u);
  EXPECT_EQ(Files(two[0]).count("proto/rbmrec.proto"), 1u);
}

TEST_F(ReflectionV1Test, AMethodNameResolvesToItsServicesFile) {
  Start(/*reflection=*/true);
  grpc::Status status;
  std::vector<ServerReflectionResponse> r =
      Reflect(srv_.channel, kReflectionV1,
              {Symbol("rbmrec.v1.Rbmrec.Recommend")}, &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(r.size(), 1u);
  auto files = Files(r[0]);
  ASSERT_EQ(files.count("proto/rbmrec.proto"), 1u) << r[0].DebugString();
  EXPECT_TRUE(HasService(files["proto/rbmrec.proto"], "Rbmrec"));
}

}  // namespace
}  // namespace rbmrec::server
