#ifndef RBMREC_SERVER_TRANSPORT_GRPC_SERVER_H_
#define RBMREC_SERVER_TRANSPORT_GRPC_SERVER_H_

// The thin gRPC layer: rbmrec.v1.Rbmrec on top of RbmrecService (sync API
// with gRPC's thread pool; PredictRatings and Recommend on the callback API),
// plus the standard health service and server reflection. Every status goes
// through ToGrpcStatus (server/transport/status.h), which also sends the
// status's error reason as the trailing metadata `rbmrec-error-reason`.
//
// AddRatings reads each message as raw bytes and parses it itself, so that a
// message that cannot be parsed (e.g. invalid UTF-8 in a string field) fails
// the call with INVALID_ARGUMENT, reason MALFORMED_MESSAGE, naming its
// 0-based batch index, instead of looking like the end of the stream. Every
// failed AddRatings call (unparsable message, invalid batch, storage error,
// client gone) carries the trailing metadata `rbmrec-committed-batches` and
// `rbmrec-committed-rows`: the leading batches of the stream that are stored
// and their accepted rows.
//
// Health (grpc.health.v1.Health, Check and Watch):
// - "" (the whole server) is a liveness check: SERVING while the server
//   accepts calls, NOT_SERVING once shutdown has begun.
// - "rbmrec.v1.Rbmrec" is a readiness check: SERVING while a model can serve
//   predictions (GrpcServerOptions::serving), NOT_SERVING while none can
//   (before the first training, or when no stored model loads) and after
//   shutdown has begun. It follows the service within
//   GrpcServerOptions::health_poll_ms, and at once when a Train job
//   succeeds (before its SUCCEEDED message is sent) or ActivateModel
//   answers.
//
// Security: the listening port uses GrpcServerOptions::credentials (TLS,
// server/security/tls.h) or plaintext; with GrpcServerOptions::authorizer every
// rbmrec.v1.Rbmrec method and reflection check the call's token and role
// first (server/security/call_guard.h, roles in server/security/auth.h); health
// never does.
//
// Reflection (GrpcServerOptions::reflection): grpc.reflection.v1 and
// v1alpha, both resolving every service of the server, grpc.health.v1.Health
// included (server/transport/reflection_v1.h).

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/support/server_interceptor.h"
#include "server/security/auth.h"
#include "server/security/call_guard.h"
#include "server/service/service.h"

namespace rbmrec::server {

struct GrpcServerOptions {
  // host:port; port 0 picks a free port (see GrpcServer::port()).
  std::string listen = "127.0.0.1:50051";
  // Upper bound of threads serving RPCs (the gRPC resource quota); 0 leaves
  // gRPC's default.
  int threads = 0;
  // Maximum size of a received and of a sent message, in MiB.
  int max_message_mb = 64;
  // Serve server reflection (grpc.reflection.v1 and v1alpha). With an
  // authorizer, reflection needs the read role.
  bool reflection = true;
  // Transport credentials of the listening port (TLS: server/security/tls.h);
  // null = plaintext.
  std::shared_ptr<grpc::ServerCredentials> credentials;
  // Client tokens and roles: every rbmrec.v1.Rbmrec call and reflection
  // need a token with the method's role (server/security/auth.h), checked
  // before the handler does any work (for unary methods gRPC has parsed the
  // request message by then; AddRatings is checked before its first message is
  // read). grpc.health.v1 needs no token. Null: every call is open. The
  // caller may Reload() it while the server runs.
  std::shared_ptr<const Authorizer> authorizer;
  // Whether a model can serve predictions: the health status of
  // "rbmrec.v1.Rbmrec" is SERVING while it returns true. Called from the
  // health thread every health_poll_ms; must be thread-safe and cheap. Empty:
  // always SERVING.
  std::function<bool()> serving;
  // How often `serving` is polled, in milliseconds (>= 1).
  int health_poll_ms = 200;
  // Server interceptors of every call (e.g.
  // server/metrics/metrics_interceptor.h), created by this function when the
  // server is built; empty: none.
  std::function<std::vector<
      std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>()>
      interceptors;
};

// Thread-safe: port() from any thread; Shutdown() once, from one thread.
class GrpcServer {
 public:
  // Binds and starts serving `service` (not owned; must outlive the server).
  // Unavailable when the address cannot be bound; Internal when a method
  // of rbmrec.v1.Rbmrec has no role in the role table (server/security/auth.h).
  static absl::StatusOr<std::unique_ptr<GrpcServer>> Start(
      RbmrecService* service, const GrpcServerOptions& options);
  // Shuts down now (no grace) if Shutdown() was not called.
  ~GrpcServer();

  // The bound port.
  int port() const { return port_; }
  // Stops accepting calls, lets in-flight calls finish until `deadline`,
  // then cancels the rest. Marks every health status NOT_SERVING first.
  void Shutdown(std::chrono::system_clock::time_point deadline);

 private:
  class Handler;
  GrpcServer() = default;
  // Polls options_.serving and updates the health status of the service.
  void HealthLoop();
  // Sets the readiness of "rbmrec.v1.Rbmrec" from options_.serving() now.
  // Called by the health thread and, so that a client sees the new state as
  // soon as a call that publishes or activates a model answers, by those
  // handlers. Thread-safe.
  void RefreshHealth() ABSL_LOCKS_EXCLUDED(health_mu_);
  void StopHealthLoop();

  GrpcServerOptions options_;
  std::unique_ptr<CallGuard> guard_;
  std::unique_ptr<Handler> handler_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;

  absl::Mutex health_mu_;
  bool health_stop_ ABSL_GUARDED_BY(health_mu_) = false;
  // The status last set for "rbmrec.v1.Rbmrec"; health thread only after
  // Start.
  bool serving_ ABSL_GUARDED_BY(health_mu_) = false;
  std::thread health_thread_;
};

}  // namespace rbmrec::server

#endif  // RBMREC_SERVER_TRANSPORT_GRPC_SERVER_H_
