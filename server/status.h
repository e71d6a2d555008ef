#ifndef RBMREC_SERVER_STATUS_H_
#define RBMREC_SERVER_STATUS_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace rbmrec::server {

// THE one place where absl::Status becomes grpc::Status: the canonical codes
// map one to one (they share numbering), the message is kept as is.
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace rbmrec::server

#endif  // RBMREC_SERVER_STATUS_H_
