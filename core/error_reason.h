#ifndef RBMREC_CORE_ERROR_REASON_H_
#define RBMREC_CORE_ERROR_REASON_H_

// Machine-readable error reasons carried by an absl::Status.
//
// A reason is a short upper-case word (the values below) stored as a status
// payload. The store and the service attach it where a client must be able
// to tell two failures with the same code apart (a full disk and a request
// over a limit are both RESOURCE_EXHAUSTED); the gRPC layer sends it as the
// trailing metadata `rbmrec-error-reason` (proto/rbmrec.proto lists them).
// Header-only; thread-compatible like absl::Status itself.

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"

namespace rbmrec {

// A request field over a server limit.
inline constexpr absl::string_view kReasonLimitExceeded = "LIMIT_EXCEEDED";
// A training job's estimated memory or model size over the server's limit.
inline constexpr absl::string_view kReasonMemoryLimit = "MEMORY_LIMIT";
// The disk, or the database's size limit, is full.
inline constexpr absl::string_view kReasonStorageFull = "STORAGE_FULL";
// Another process holds the database's write lock.
inline constexpr absl::string_view kReasonDatabaseLocked = "DATABASE_LOCKED";
// Another process is the writer of the SQLite database (its lock file).
inline constexpr absl::string_view kReasonDatabaseInUse = "DATABASE_IN_USE";
// Replicas: the call runs on the leader only (Train, CancelTraining); the
// leader's address travels with it (WithLeader / LeaderOf).
inline constexpr absl::string_view kReasonNotLeader = "NOT_LEADER";
// A request message could not be parsed.
inline constexpr absl::string_view kReasonMalformedMessage =
    "MALFORMED_MESSAGE";

// The name of a status code as the gRPC specification spells it ("OK",
// "INVALID_ARGUMENT", ...; gRPC and absl number their codes alike), or
// "UNKNOWN" for a number outside 0..16. For metrics labels and reports.
inline const char* StatusCodeName(int code) {
  static const char* const kNames[] = {"OK",
                                       "CANCELLED",
                                       "UNKNOWN",
                                       "INVALID_ARGUMENT",
                                       "DEADLINE_EXCEEDED",
                                       "NOT_FOUND",
                                       "ALREADY_EXISTS",
                                       "PERMISSION_DENIED",
                                       "RESOURCE_EXHAUSTED",
                                       "FAILED_PRECONDITION",
                                       "ABORTED",
                                       "OUT_OF_RANGE",
                                       "UNIMPLEMENTED",
                                       "INTERNAL",
                                       "UNAVAILABLE",
                                       "DATA_LOSS",
                                       "UNAUTHENTICATED"};
  return code >= 0 && code < 17 ? kNames[code] : "UNKNOWN";
}

// The payload type URL under which the reason is stored.
inline constexpr absl::string_view kReasonPayloadUrl =
    "type.rbmrec.dev/rbmrec.ErrorReason";

// Returns `status` with `reason` attached. An OK status is returned as is
// (OK carries no payload).
inline absl::Status WithReason(absl::Status status, absl::string_view reason) {
  if (!status.ok()) status.SetPayload(kReasonPayloadUrl, absl::Cord(reason));
  return status;
}

// The payload type URL of the leader's address (reason NOT_LEADER).
inline constexpr absl::string_view kLeaderPayloadUrl =
    "type.rbmrec.dev/rbmrec.Leader";

// Returns `status` with the leader's address attached (not to OK).
inline absl::Status WithLeader(absl::Status status, absl::string_view address) {
  if (!status.ok()) status.SetPayload(kLeaderPayloadUrl, absl::Cord(address));
  return status;
}

// The leader's address attached to `status`, or "" when none.
inline std::string LeaderOf(const absl::Status& status) {
  const auto payload = status.GetPayload(kLeaderPayloadUrl);
  return payload.has_value() ? std::string(*payload) : std::string();
}

// The reason attached to `status`, or "" when none.
inline std::string ReasonOf(const absl::Status& status) {
  const auto payload = status.GetPayload(kReasonPayloadUrl);  // absl::optional
  return payload.has_value() ? std::string(*payload) : std::string();
}

}  // namespace rbmrec

#endif  // RBMREC_CORE_ERROR_REASON_H_
