#include "server/transport/status.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "core/error_reason.h"

namespace rbmrec::server {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  grpc::StatusCode code = grpc::StatusCode::UNKNOWN;
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return grpc::Status::OK;
    case absl::StatusCode::kCancelled:
      code = grpc::StatusCode::CANCELLED;
      break;
    case absl::StatusCode::kUnknown:
      code = grpc::StatusCode::UNKNOWN;
      break;
    case absl::StatusCode::kInvalidArgument:
      code = grpc::StatusCode::INVALID_ARGUMENT;
      break;
    case absl::StatusCode::kDeadlineExceeded:
      code = grpc::StatusCode::DEADLINE_EXCEEDED;
      break;
    case absl::StatusCode::kNotFound:
      code = grpc::StatusCode::NOT_FOUND;
      break;
    case absl::StatusCode::kAlreadyExists:
      code = grpc::StatusCode::ALREADY_EXISTS;
      break;
    case absl::StatusCode::kPermissionDenied:
      code = grpc::StatusCode::PERMISSION_DENIED;
      break;
    case absl::StatusCode::kResourceExhausted:
      code = grpc::StatusCode::RESOURCE_EXHAUSTED;
      break;
    case absl::StatusCode::kFailedPrecondition:
      code = grpc::StatusCode::FAILED_PRECONDITION;
      break;
    case absl::StatusCode::kAborted:
      code = grpc::StatusCode::ABORTED;
      break;
    case absl::StatusCode::kOutOfRange:
      code = grpc::StatusCode::OUT_OF_RANGE;
      break;
    case absl::StatusCode::kUnimplemented:
      code = grpc::StatusCode::UNIMPLEMENTED;
      break;
    case absl::StatusCode::kInternal:
      code = grpc::StatusCode::INTERNAL;
      break;
    case absl::StatusCode::kUnavailable:
      code = grpc::StatusCode::UNAVAILABLE;
      break;
    case absl::StatusCode::kDataLoss:
      code = grpc::StatusCode::DATA_LOSS;
      break;
    case absl::StatusCode::kUnauthenticated:
      code = grpc::StatusCode::UNAUTHENTICATED;
      break;
    default:
      code = grpc::StatusCode::UNKNOWN;
      break;
  }
  return grpc::Status(code, std::string(status.message()));
}

std::vector<std::pair<std::string, std::string>> ErrorMetadata(
    const absl::Status& status) {
  std::vector<std::pair<std::string, std::string>> out;
  if (status.ok()) return out;
  if (std::string reason = ReasonOf(status); !reason.empty()) {
    out.emplace_back(std::string(kErrorReasonKey), std::move(reason));
  }
  if (std::string leader = LeaderOf(status); !leader.empty()) {
    out.emplace_back(std::string(kLeaderKey), std::move(leader));
  }
  return out;
}

grpc::Status ToGrpcStatus(const absl::Status& status,
                          grpc::ServerContextBase* context) {
  if (context != nullptr) {
    for (const auto& [key, value] : ErrorMetadata(status)) {
      context->AddTrailingMetadata(key, value);
    }
  }
  return ToGrpcStatus(status);
}

void AddCommittedMetadata(grpc::ServerContextBase* context, int64_t batches,
                          int64_t rows) {
  if (context == nullptr) return;
  context->AddTrailingMetadata(std::string(kCommittedBatchesKey),
                               absl::StrCat(batches));
  context->AddTrailingMetadata(std::string(kCommittedRowsKey),
                               absl::StrCat(rows));
}

}  // namespace rbmrec::server
