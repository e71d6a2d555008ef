#include "core/error_reason.h"

#include "gtest/gtest.h"

namespace rbmrec {
namespace {

TEST(ErrorReasonTest, AttachesAndReadsBack) {
  absl::Status s =
      WithReason(absl::ResourceExhaustedError("disk full"), kReasonStorageFull);
  EXPECT_EQ(ReasonOf(s), "STORAGE_FULL");
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), "disk full");
}

TEST(ErrorReasonTest, NoReasonIsEmpty) {
  EXPECT_EQ(ReasonOf(absl::InternalError("x")), "");
  EXPECT_EQ(ReasonOf(absl::OkStatus()), "");
}

TEST(ErrorReasonTest, OkStaysOkWithoutPayload) {
  absl::Status s = WithReason(absl::OkStatus(), kReasonLimitExceeded);
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(ReasonOf(s), "");
}

TEST(ErrorReasonTest, LaterReasonReplacesEarlier) {
  absl::Status s = WithReason(
      WithReason(absl::UnavailableError("locked"), kReasonStorageFull),
      kReasonDatabaseLocked);
  EXPECT_EQ(ReasonOf(s), "DATABASE_LOCKED");
}

}  // namespace
TEST(StatusCodeNameTest, SpellsEveryCodeAsTheSpecification) {
  for (int code = 0; code <= 16; ++code) {
    EXPECT_EQ(StatusCodeName(code),
              absl::StatusCodeToString(static_cast<absl::StatusCode>(code)))
        << code;
  }
  EXPECT_STREQ(StatusCodeName(3), "INVALID_ARGUMENT");
  EXPECT_STREQ(StatusCodeName(-1), "UNKNOWN");
  EXPECT_STREQ(StatusCodeName(17), "UNKNOWN");
}

}  // namespace rbmrec
