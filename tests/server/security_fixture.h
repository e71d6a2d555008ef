#ifndef RBMREC_TESTS_SERVER_SECURITY_FIXTURE_H_
#define RBMREC_TESTS_SERVER_SECURITY_FIXTURE_H_

// Helpers of the security tests: a real server over a ":memory:" store on a
// loopback port, and calls of any rbmrec.v1.Rbmrec method by its
// descriptor, with raw (empty) messages.

#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/impl/client_unary_call.h"
#include "grpcpp/impl/rpc_method.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/sync_stream.h"
#include "gtest/gtest.h"
#include "proto/rbmrec.grpc.pb.h"
#include "proto/reflection_v1.grpc.pb.h"
#include "server/service/service.h"
#include "server/transport/grpc_server.h"
#include "store/store.h"
#include "tests/server/grpc_fixture.h"

namespace rbmrec::server {

// A service over an empty in-memory store, and a server for it.
using TestServer = InProcessServer;

inline const google::protobuf::ServiceDescriptor& RbmrecDescriptor() {
  const google::protobuf::ServiceDescriptor* s =
      v1::Rating::descriptor()->file()->FindServiceByName("Rbmrec");
  EXPECT_NE(s, nullptr);
  return *s;
}

// One call of `method` with an empty request message (streaming requests:
// no message), `authorization` as the header when not empty; reads a
// streamed response to its end. 10 s deadline.
inline grpc::Status CallEmpty(const std::shared_ptr<grpc::Channel>& channel,
                              const google::protobuf::MethodDescriptor& method,
                              const std::string& authorization) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(10));
  if (!authorization.empty()) {
    context.AddMetadata("authorization", authorization);
  }
  const std::string path =
      absl::StrCat("/", method.service()->full_name(), "/", method.name());
  grpc::ByteBuffer request;
  grpc::ByteBuffer response;
  grpc::Slice empty("");
  request = grpc::ByteBuffer(&empty, 1);
  if (method.client_streaming()) {
    const grpc::internal::RpcMethod rpc(
        path.c_str(), grpc::internal::RpcMethod::CLIENT_STREAMING, channel);
    std::unique_ptr<grpc::ClientWriter<grpc::ByteBuffer>> writer(
        grpc::internal::ClientWriterFactory<grpc::ByteBuffer>::Create(
            channel.get(), rpc, &context, &response));
    writer->WritesDone();
    return writer->Finish();
  }
  if (method.server_streaming()) {
    const grpc::internal::RpcMethod rpc(
        path.c_str(), grpc::internal::RpcMethod::SERVER_STREAMING, channel);
    std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> reader(
        grpc::internal::ClientReaderFactory<grpc::ByteBuffer>::Create(
            channel.get(), rpc, &context, request));
    while (reader->Read(&response)) {
    }
    return reader->Finish();
  }
  const grpc::internal::RpcMethod rpc(
      path.c_str(), grpc::internal::RpcMethod::NORMAL_RPC, channel);
  return grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
      channel.get(), rpc, &context, request, &response);
}

// One reflection list_services exchange on `path` with `header`.
inline grpc::Status ListServices(const std::shared_ptr<grpc::Channel>& channel,
                                 const char* path, const std::string& header,
                                 int* services) {
  grpc::reflection::v1::ServerReflectionRequest request;
  request.set_list_services("");
  grpc::Status status;
  const auto responses = Reflect(channel, path, {request}, &status, header);
  *services = responses.empty()
                  ? 0
                  : responses[0].list_services_response().service_size();
  return status;
}

}  // namespace rbmrec::server

#endif  // RBMREC_TESTS_SERVER_SECURITY_FIXTURE_H_
