#ifndef RBMREC_SERVER_SECURITY_CALL_GUARD_H_
#define RBMREC_SERVER_SECURITY_CALL_GUARD_H_

// Token and role checks on the gRPC layer: reads the `authorization`
// metadata of a call, asks the Authorizer (server/security/auth.h) and turns a
// denial into the call's status through ToGrpcStatus
// (server/transport/status.h).

#include <memory>

#include "absl/strings/string_view.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/status.h"
#include "server/security/auth.h"

namespace rbmrec::server {

// Thread-safe (const; the Authorizer is).
class CallGuard {
 public:
  // `authorizer` null: tokens are off and every call is allowed.
  explicit CallGuard(std::shared_ptr<const Authorizer> authorizer)
      : authorizer_(std::move(authorizer)) {}

  bool enabled() const { return authorizer_ != nullptr; }

  // OK when tokens are off or the call's token has at least `needed`.
  // Otherwise UNAUTHENTICATED or PERMISSION_DENIED (Authorizer::Check), and
  // one log line event=call_denied with the method ("/SERVICE/METHOD", e.g.
  // "/rbmrec.v1.Rbmrec/Train"), the peer address, the client's name when
  // the token is known, the code and the role needed; never the token.
  // `method` ("Train") also names the method in the status message.
  grpc::Status Check(grpc::ServerContextBase* context,
                     absl::string_view service, absl::string_view method,
                     Role needed) const {
    return Check(context, service, method, needed, method);
  }
  // The same, with `what` naming the call in the status message instead of
  // `method` ("PredictRatings with ad-hoc ratings ... needs the write
  // role; ..."); the log line names `method`.
  grpc::Status Check(grpc::ServerContextBase* context,
                     absl::string_view service, absl::string_view method,
                     Role needed, absl::string_view what) const;

 private:
  std::shared_ptr<const Authorizer> authorizer_;
};

}  // namespace rbmrec::server

#endif  // RBMREC_SERVER_SECURITY_CALL_GUARD_H_
