#include "server/security/call_guard.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/types/optional.h"
#include "server/log.h"
#include "server/transport/status.h"

namespace rbmrec::server {

grpc::Status CallGuard::Check(grpc::ServerContextBase* context,
                              absl::string_view service,
                              absl::string_view method, Role needed,
                              absl::string_view what) const {
  if (authorizer_ == nullptr) return grpc::Status::OK;
  const auto& metadata = context->client_metadata();
  auto it = metadata.find("authorization");
  absl::optional<absl::string_view> header;
  if (it != metadata.end()) {
    header.emplace(it->second.data(), it->second.size());
  }
  Caller caller;
  absl::Status status = authorizer_->CheckHeader(header, what, needed, &caller);
  if (status.ok()) return grpc::Status::OK;
  Log(LogLevel::kWarn, "call_denied",
      {F("method", absl::StrCat("/", service, "/", method)),
       F("peer", context->peer()),
       F("client", caller.name.empty() ? "-" : caller.name),
       F("code", absl::StatusCodeToString(status.code())),
       F("needs", RoleName(needed))});
  return ToGrpcStatus(status, context);
}

}  // namespace rbmrec::server
