#ifndef RBMREC_SERVER_GRPC_SERVER_H_
#define RBMREC_SERVER_GRPC_SERVER_H_

// The thin gRPC layer: rbmrec.v1.Rbmrec on top of RbmrecService (sync API
// with gRPC's thread pool), plus the standard health service and server
// reflection. Every status goes through ToGrpcStatus (server/status.h).

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/server.h"
#include "server/service.h"

namespace rbmrec::server {

struct GrpcServerOptions {
  // host:port; port 0 picks a free port (see GrpcServer::port()).
  std::string listen = "127.0.0.1:50051";
  // Upper bound of threads serving RPCs (the gRPC resource quota); 0 leaves
  // gRPC's default.
  int threads = 0;
  // Maximum size of a received and of a sent message, in MiB.
  int max_message_mb = 64;
};

class GrpcServer {
 public:
  // Binds and starts serving `service` (not owned; must outlive the server).
  // Unavailable when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<GrpcServer>> Start(
      RbmrecService* service, const GrpcServerOptions& options);
  ~GrpcServer();

  // The bound port.
  int port() const { return port_; }
  // Stops accepting calls, lets in-flight calls finish until `deadline`,
  // then cancels the rest. Marks the health service NOT_SERVING first.
  void Shutdown(std::chrono::system_clock::time_point deadline);

 private:
  class Handler;
  GrpcServer() = default;
  std::unique_ptr<Handler> handler_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace rbmrec::server

#endif  // RBMREC_SERVER_GRPC_SERVER_H_
