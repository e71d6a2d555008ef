#ifndef RBMREC_TESTS_SERVER_GRPC_FIXTURE_H_
#define RBMREC_TESTS_SERVER_GRPC_FIXTURE_H_

// The one in-process server of the gRPC-level tests (transport, security,
// metrics): a real RbmrecService over a store (":memory:" by default) and a
// real GrpcServer on a loopback port, with a plain channel and stub for the
// tests that do not need TLS; plus the calls several suites make (a small
// rating set, a tiny training, a reflection stream).

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/impl/rpc_method.h"
#include "grpcpp/support/sync_stream.h"
#include "gtest/gtest.h"
#include "proto/rbmrec.grpc.pb.h"
#include "proto/reflection_v1.grpc.pb.h"
#include "server/service/service.h"
#include "server/transport/grpc_server.h"
#include "store/store.h"

namespace rbmrec::server {

// The service options of in-process servers: no online updater (its
// thread would publish versions behind a test's back).
inline ServiceOptions InProcessServiceOptions() {
  ServiceOptions so;
  so.online.enabled = false;
  return so;
}

// A service over a store, a server for it, and an insecure channel and stub
// (created by Start unless `connect` is false, e.g. for TLS tests that make
// their own). Stop (or the destructor) shuts the server down before the
// service. Not thread-safe; one per test.
struct InProcessServer {
  std::unique_ptr<RbmrecService> service;
  std::unique_ptr<GrpcServer> server;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Rbmrec::Stub> stub;

  // `go.listen` is replaced by 127.0.0.1:0 (a free port). Fails the test
  // (ASSERT) when the store, the service or the server does not start.
  void Start(GrpcServerOptions go,
             ServiceOptions so = InProcessServiceOptions(),
             const std::string& db = ":memory:",
             const store::StoreOptions& store_options = {},
             bool connect = true) {
    absl::StatusOr<std::unique_ptr<store::Store>> store =
        store::Store::Open(db, store_options);
    ASSERT_TRUE(store.ok()) << store.status();
    absl::StatusOr<std::unique_ptr<RbmrecService>> created =
        RbmrecService::Create(std::move(*store), so);
    ASSERT_TRUE(created.ok()) << created.status();
    service = std::move(*created);
    go.listen = "127.0.0.1:0";
    absl::StatusOr<std::unique_ptr<GrpcServer>> started =
        GrpcServer::Start(service.get(), go);
    ASSERT_TRUE(started.ok()) << started.status();
    server = std::move(*started);
    if (!connect) return;
    channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server->port()),
                                  grpc::InsecureChannelCredentials());
    stub = v1::Rbmrec::NewStub(channel);
  }

  void Stop() {
    stub.reset();
    channel.reset();
    if (server != nullptr) server->Shutdown(std::chrono::system_clock::now());
    server.reset();
    if (service != nullptr) service->Shutdown();
    service.reset();
  }

  ~InProcessServer() { Stop(); }
};

// 200 rows (100 distinct ratings) of 20 users u0..u19 on 15 items
// i0..i14, in one AddRatings stream of 20 messages; the call's status.
inline grpc::Status AddSomeRatings(v1::Rbmrec::Stub* stub) {
  grpc::ClientContext context;
  v1::AddRatingsResponse response;
  auto writer = stub->AddRatings(&context, &response);
  for (int u = 0; u < 20; ++u) {
    v1::AddRatingsRequest batch;
    for (int i = 0; i < 10; ++i) {
      v1::Rating* r = batch.add_ratings();
      r->set_user_id(absl::StrCat("u", u));
      r->set_item_id(absl::StrCat("i", (u * 7 + i * 3) % 15));
      r->set_rating(1 + (u + i) % 5);
    }
    if (!writer->Write(batch)) break;
  }
  writer->WritesDone();
  return writer->Finish();
}

// Trains a tiny model (hidden 4, 3 epochs) that always becomes active, and
// reads the progress stream to its end. Returns the last progress message
// (state SUCCEEDED and model_version > 0 when the job succeeded) and sets
// `*status` to the call's status.
inline v1::TrainProgress TrainTiny(v1::Rbmrec::Stub* stub,
                                   grpc::Status* status) {
  v1::TrainRequest request;
  request.mutable_options()->set_hidden(4);
  request.mutable_options()->set_epochs(3);
  request.set_activation(v1::ACTIVATE_ALWAYS);
  grpc::ClientContext context;
  auto reader = stub->Train(&context, request);
  v1::TrainProgress progress, last;
  while (reader->Read(&progress)) last = progress;
  *status = reader->Finish();
  return last;
}

// Sends `requests` on one reflection stream at `path` (v1 and v1alpha share
// their messages' wire format), with `authorization` as the header when not
// empty, and returns the responses (one per request, until the first that
// gets none); `*status` is the stream's status.
inline std::vector<grpc::reflection::v1::ServerReflectionResponse> Reflect(
    const std::shared_ptr<grpc::Channel>& channel, const char* path,
    const std::vector<grpc::reflection::v1::ServerReflectionRequest>& requests,
    grpc::Status* status, const std::string& authorization = "") {
  using ::grpc::reflection::v1::ServerReflectionRequest;
  using ::grpc::reflection::v1::ServerReflectionResponse;
  grpc::ClientContext context;
  if (!authorization.empty()) {
    context.AddMetadata("authorization", authorization);
  }
  const grpc::internal::RpcMethod method(
      path, grpc::internal::RpcMethod::BIDI_STREAMING, channel);
  std::unique_ptr<grpc::ClientReaderWriter<ServerReflectionRequest,
                                           ServerReflectionResponse>>
      stream(grpc::internal::ClientReaderWriterFactory<
             ServerReflectionRequest,
             ServerReflectionResponse>::Create(channel.get(), method,
                                               &context));
  std::vector<ServerReflectionResponse> out;
  for (const ServerReflectionRequest& r : requests) {
    if (!stream->Write(r)) break;
    ServerReflectionResponse response;
    if (!stream->Read(&response)) break;
    out.push_back(response);
  }
  stream->WritesDone();
  *status = stream->Finish();
  return out;
}

}  // namespace rbmrec::server

#endif  // RBMREC_TESTS_SERVER_GRPC_FIXTURE_H_
