#include "server/transport/status.h"

#include "core/error_reason.h"
#include "gtest/gtest.h"

namespace rbmrec::server {
namespace {

TEST(StatusMapping, EveryCodeMapsOneToOneAndKeepsTheMessage) {
  const struct {
    absl::Status in;
    grpc::StatusCode out;
  } table[] = {
      {absl::CancelledError("a"), grpc::StatusCode::CANCELLED},
      {absl::UnknownError("a"), grpc::StatusCode::UNKNOWN},
      {absl::InvalidArgumentError("a"), grpc::StatusCode::INVALID_ARGUMENT},
      {absl::DeadlineExceededError("a"), grpc::StatusCode::DEADLINE_EXCEEDED},
      {absl::NotFoundError("a"), grpc::StatusCode::NOT_FOUND},
      {absl::AlreadyExistsError("a"), grpc::StatusCode::ALREADY_EXISTS},
      {absl::PermissionDeniedError("a"), grpc::StatusCode::PERMISSION_DENIED},
      {absl::ResourceExhaustedError("a"), grpc::StatusCode::RESOURCE_EXHAUSTED},
      {absl::FailedPreconditionError("a"),
       grpc::StatusCode::FAILED_PRECONDITION},
      {absl::AbortedError("a"), grpc::StatusCode::ABORTED},
      {absl::OutOfRangeError("a"), grpc::StatusCode::OUT_OF_RANGE},
      {absl::UnimplementedError("a"), grpc::StatusCode::UNIMPLEMENTED},
      {absl::InternalError("a"), grpc::StatusCode::INTERNAL},
      {absl::UnavailableError("a"), grpc::StatusCode::UNAVAILABLE},
      {absl::DataLossError("a"), grpc::StatusCode::DATA_LOSS},
      {absl::UnauthenticatedError("a"), grpc::StatusCode::UNAUTHENTICATED},
  };
  for (const auto& row : table) {
    grpc::Status g = ToGrpcStatus(row.in);
    EXPECT_EQ(g.error_code(), row.out) << row.in;
    EXPECT_EQ(g.error_message(), "a");
  }
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  EXPECT_EQ(ToGrpcStatus(absl::Status(static_cast<absl::StatusCode>(99), "x"))
                .error_code(),
            grpc::StatusCode::UNKNOWN);
}

TEST(StatusMapping, ReasonBecomesTrailingMetadata) {
  const absl::Status full =
      WithReason(absl::ResourceExhaustedError("disk full"), kReasonStorageFull);
  const auto md = ErrorMetadata(full);
  ASSERT_EQ(md.size(), 1u);
  EXPECT_EQ(md[0].first, "rbmrec-error-reason");
  EXPECT_EQ(md[0].second, "STORAGE_FULL");
  // The code and message are those of the status; the reason is not part of
  // the message.
  grpc::Status g = ToGrpcStatus(full, nullptr);
  EXPECT_EQ(g.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(g.error_message(), "disk full");
}

TEST(StatusMapping, NoReasonNoMetadata) {
  EXPECT_TRUE(ErrorMetadata(absl::InvalidArgumentError("x")).empty());
  EXPECT_TRUE(ErrorMetadata(absl::OkStatus()).empty());
  // Another payload is not a reason.
  absl::Status other = absl::InternalError("x");
  other.SetPayload("type.example/other", absl::Cord("LIMIT_EXCEEDED"));
  EXPECT_TRUE(ErrorMetadata(other).empty());
}

TEST(StatusMapping, EveryReasonIsSentAsIs) {
  for (absl::string_view reason :
       {kReasonLimitExceeded, kReasonMemoryLimit, kReasonStorageFull,
        kReasonDatabaseLocked, kReasonMalformedMessage, kReasonNotLeader}) {
    const auto md =
        ErrorMetadata(WithReason(absl::UnavailableError("x"), reason));
    ASSERT_EQ(md.size(), 1u) << reason;
    EXPECT_EQ(md[0].second, reason);
  }
}

TEST(StatusMapping, LeaderAddressBecomesTrailingMetadata) {
  const absl::Status refused = WithLeader(
      WithReason(absl::FailedPreconditionError("follower"), kReasonNotLeader),
      "10.0.0.7:50051");
  EXPECT_EQ(LeaderOf(refused), "10.0.0.7:50051");
  const auto md = ErrorMetadata(refused);
  ASSERT_EQ(md.size(), 2u);
  EXPECT_EQ(md[0].first, "rbmrec-error-reason");
  EXPECT_EQ(md[0].second, "NOT_LEADER");
  EXPECT_EQ(md[1].first, "rbmrec-leader");
  EXPECT_EQ(md[1].second, "10.0.0.7:50051");
  EXPECT_EQ(LeaderOf(absl::OkStatus()), "");
  EXPECT_EQ(LeaderOf(WithLeader(absl::OkStatus(), "x:1")), "");
}

}  // namespace
}  // namespace rbmrec::server
