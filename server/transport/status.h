#ifndef RBMREC_SERVER_TRANSPORT_STATUS_H_
#define RBMREC_SERVER_TRANSPORT_STATUS_H_

// THE one place where absl::Status becomes grpc::Status, and where the
// server's machine-readable error details become trailing metadata.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/status.h"

namespace rbmrec::server {

// Trailing metadata of a failed call: the reason attached to the status
// (core/error_reason.h; LIMIT_EXCEEDED, STORAGE_FULL, ...).
inline constexpr absl::string_view kErrorReasonKey = "rbmrec-error-reason";
// Trailing metadata of a failed AddRatings call: how many leading batches of
// the stream, and how many accepted rows in them, are committed.
inline constexpr absl::string_view kCommittedBatchesKey =
    "rbmrec-committed-batches";
inline constexpr absl::string_view kCommittedRowsKey = "rbmrec-committed-rows";
// Trailing metadata of a call refused by a follower replica (reason
// NOT_LEADER): the leader's address, HOST:PORT.
inline constexpr absl::string_view kLeaderKey = "rbmrec-leader";

// The canonical codes map one to one (they share numbering; an unknown code
// becomes UNKNOWN), the message is kept as is. Error details (the reason) are
// dropped: use the overload with a context to send them.
grpc::Status ToGrpcStatus(const absl::Status& status);

// The trailing metadata that carries the details of `status`: the pair
// (kErrorReasonKey, reason) when a reason is attached to a non-OK status,
// and (kLeaderKey, address) when a leader's address is (WithLeader), else
// nothing.
std::vector<std::pair<std::string, std::string>> ErrorMetadata(
    const absl::Status& status);

// ToGrpcStatus, and adds ErrorMetadata(status) to `context`'s trailing
// metadata. `context` may be null (no metadata is sent). REQUIRES: called
// from the call's handler before the call finishes.
grpc::Status ToGrpcStatus(const absl::Status& status,
                          grpc::ServerContextBase* context);

// Adds the committed counts of a failed AddRatings stream
// (kCommittedBatchesKey, kCommittedRowsKey) to `context`'s trailing metadata.
// Same REQUIRES.
void AddCommittedMetadata(grpc::ServerContextBase* context, int64_t batches,
                          int64_t rows);

}  // namespace rbmrec::server

#endif  // RBMREC_SERVER_TRANSPORT_STATUS_H_
