#ifndef RBMREC_SERVER_HTTP_HTTP_STATUS_H_
#define RBMREC_SERVER_HTTP_HTTP_STATUS_H_

// THE one place where an absl::Status becomes an HTTP status and error body
// (the gRPC mapping is server/transport/status.h). Codes map as Google's API
// design guide does: INVALID_ARGUMENT, FAILED_PRECONDITION and OUT_OF_RANGE
// 400, UNAUTHENTICATED 401, PERMISSION_DENIED 403, NOT_FOUND 404,
// ALREADY_EXISTS and ABORTED 409, RESOURCE_EXHAUSTED 429, CANCELLED 499,
// UNIMPLEMENTED 501, UNAVAILABLE 503, DEADLINE_EXCEEDED 504, others 500.

#include <string>

#include "absl/status/status.h"

namespace rbmrec::server::http {

int HttpStatusOf(absl::StatusCode code);

// The JSON error body of a non-OK `status`, built as a
// google.protobuf.Struct and printed by protobuf's JSON printer:
//   {"error":{"code":404,"status":"NOT_FOUND","message":"...",
//             "reason":"LIMIT_EXCEEDED","leader":"HOST:PORT"}}
// `code` is the HTTP status: HttpStatusOf(status.code()), or `http_code`
// when it is not 0 (405 and 413, which no gRPC code maps to); "reason"
// (core/error_reason.h) and "leader" (reason NOT_LEADER) only when the
// status carries them.
std::string ErrorJson(const absl::Status& status, int http_code = 0);

}  // namespace rbmrec::server::http

#endif  // RBMREC_SERVER_HTTP_HTTP_STATUS_H_
