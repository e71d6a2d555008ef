#ifndef RBMREC_SERVER_TRANSPORT_REFLECTION_V1_H_
#define RBMREC_SERVER_TRANSPORT_REFLECTION_V1_H_

// gRPC server reflection, both versions clients use, served by
// ReflectionV1Service below:
// - grpc.reflection.v1.ServerReflection (proto/reflection_v1.proto has the
//   v1alpha messages under package grpc.reflection.v1), implemented here the
//   way gRPC's v1alpha plugin is;
// - grpc.reflection.v1alpha.ServerReflection: the same implementation on
//   the v1alpha method path (the two versions' messages are the same on the
//   wire). gRPC's own v1alpha plugin (libgrpc++_reflection; Debian's gRPC
//   1.51 ships only that version) is not used, so that both versions make
//   the same token check.
// Both answer from google::protobuf::DescriptorPool::generated_pool(): every
// .proto compiled into the binary whose generated code is linked in
// (GrpcServer references grpc.health.v1's descriptor for that reason), and
// both list every service registered on the server.

#include <string>
#include <utility>
#include <vector>

#include "grpcpp/server_builder.h"
#include "proto/reflection_v1.grpc.pb.h"
#include "server/security/call_guard.h"

namespace rbmrec::server {

// Serves grpc.reflection.v1.ServerReflection. Requests of one stream are
// answered in order; a file already sent on the stream is not sent again as
// a dependency (the protocol allows it). Errors go into the response's
// error_response (NOT_FOUND for an unknown file/symbol/extension/type,
// UNIMPLEMENTED for an empty request), never into the call's status.
// Thread-safe once the service list is set (before the server serves).
class ReflectionV1Service final
    : public grpc::reflection::v1::ServerReflection::Service {
 public:
  // `service_name`: the reflection service this instance answers for (for
  // the token check's log line). `guard` (not owned, may be null = open)
  // decides each stream before its first request is read (kReflectionRole).
  ReflectionV1Service(std::string service_name, const CallGuard* guard)
      : service_name_(std::move(service_name)), guard_(guard) {}

  // `services`: the server's registered service names; not owned, must
  // outlive this service (gRPC's ServerInitializer::GetServiceList()).
  // REQUIRES: called before the server serves a call.
  void SetServiceList(const std::vector<std::string>* services) {
    services_ = services;
  }

  grpc::Status ServerReflectionInfo(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<grpc::reflection::v1::ServerReflectionResponse,
                               grpc::reflection::v1::ServerReflectionRequest>*
          stream) override;

 private:
  const std::string service_name_;
  const CallGuard* const guard_;
  const std::vector<std::string>* services_ = nullptr;
};

// Makes the server `builder` builds serve reflection v1 and v1alpha
// (`enabled`) or neither (gRPC's v1alpha plugin, which linking
// libgrpc++_reflection adds to every builder, is removed). Each stream is
// first checked by `guard` (not owned, must outlive the server; null =
// open). Affects no other builder. Call before BuildAndStart.
void SetServerReflection(grpc::ServerBuilder* builder, bool enabled,
                         const CallGuard* guard);

}  // namespace rbmrec::server

#endif  // RBMREC_SERVER_TRANSPORT_REFLECTION_V1_H_
