#include "server/http/http_status.h"

#include <string>
#include <string_view>

#include "absl/strings/string_view.h"
#include "core/error_reason.h"
#include "core/utf8.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace rbmrec::server::http {

namespace {

// `s` with every byte that starts no well-formed UTF-8 sequence replaced by
// U+FFFD: a message may quote what a client sent (protobuf's JSON parser
// does), and JSON text must be UTF-8.
std::string ValidUtf8(absl::string_view s) {
  std::string out;
  while (!s.empty()) {
    const size_t bad = FirstInvalidUtf8(std::string_view(s.data(), s.size()));
    if (bad == std::string_view::npos) {
      out.append(s.data(), s.size());
      break;
    }
    out.append(s.data(), bad);
    out += "\xEF\xBF\xBD";
    s.remove_prefix(bad + 1);
  }
  return out;
}

}  // namespace

int HttpStatusOf(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kAborted:
      return 409;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kCancelled:
      return 499;
    case absl::StatusCode::kUnimplemented:
      return 501;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

std::string ErrorJson(const absl::Status& status, int http_code) {
  google::protobuf::Struct body;
  google::protobuf::Struct* error =
      (*body.mutable_fields())["error"].mutable_struct_value();
  auto& fields = *error->mutable_fields();
  fields["code"].set_number_value(http_code != 0 ? http_code
                                                 : HttpStatusOf(status.code()));
  fields["status"].set_string_value(absl::StatusCodeToString(status.code()));
  fields["message"].set_string_value(ValidUtf8(status.message()));
  if (std::string reason = ReasonOf(status); !reason.empty()) {
    fields["reason"].set_string_value(ValidUtf8(reason));
  }
  if (std::string leader = LeaderOf(status); !leader.empty()) {
    fields["leader"].set_string_value(ValidUtf8(leader));
  }
  std::string out;
  // Cannot fail: every string is valid UTF-8.
  (void)google::protobuf::util::MessageToJsonString(body, &out);
  return out;
}

}  // namespace rbmrec::server::http
