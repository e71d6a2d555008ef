#ifndef RBMREC_SERVER_REFLECTION_V1_H_
#define RBMREC_SERVER_REFLECTION_V1_H_

// gRPC server reflection, both versions clients use:
// - grpc.reflection.v1alpha.ServerReflection: gRPC's own plugin
//   (libgrpc++_reflection; Debian's gRPC 1.51 ships only this version);
// - grpc.reflection.v1.ServerReflection: ReflectionV1Service below, the same
//   protocol (proto/reflection_v1.proto has the v1alpha messages under
//   package grpc.reflection.v1), implemented here the way the v1alpha plugin
//   is.
// Both answer from google::protobuf::DescriptorPool::generated_pool(): every
// .proto compiled into the binary whose generated code is linked in
// (GrpcServer references grpc.health.v1's descriptor for that reason), and
// both list every service registered on the server.

#include <string>
#include <vector>

#include "grpcpp/server_builder.h"
#include "proto/reflection_v1.grpc.pb.h"

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
  const std::vector<std::string>* services_ = nullptr;
};

// Makes the server `builder` builds serve reflection v1 and v1alpha
// (`enabled`) or neither (gRPC's v1alpha plugin, which linking
// libgrpc++_reflection adds to every builder, is removed). Affects no other
// builder. Call before BuildAndStart.
void SetServerReflection(grpc::ServerBuilder* builder, bool enabled);

}  // namespace rbmrec::server

#endif  // RBMREC_SERVER_REFLECTION_V1_H_
