#include "server/mhd_listener.h"

#include <netdb.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "server/log.h"

namespace rbmrec::server {

absl::StatusOr<ListenAddress> ResolveListen(absl::string_view flag,
                                            const std::string& listen) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": expected HOST:PORT, got '", listen, "'"));
  }
  absl::string_view host = absl::string_view(listen).substr(0, colon);
  const std::string port_text = listen.substr(colon + 1);
  int port = 0;
  if (!absl::SimpleAtoi(port_text, &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": bad port '", port_text, "' in '", listen, "'"));
  }
  if (absl::ConsumePrefix(&host, "[") && !absl::ConsumeSuffix(&host, "]")) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": unbalanced [ in '", listen, "'"));
  }
  if (host.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, ": no host in '", listen,
        "' (use 127.0.0.1:PORT, or 0.0.0.0:PORT with --insecure)"));
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string host_text(host);
  if (int rc =
          getaddrinfo(host_text.c_str(), port_text.c_str(), &hints, &found);
      rc != 0 || found == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, ": cannot resolve '", host_text, "': ", gai_strerror(rc)));
  }
  ListenAddress out;
  std::memcpy(&out.address, found->ai_addr,
              std::min<size_t>(found->ai_addrlen, sizeof out.address));
  out.ipv6 = found->ai_family == AF_INET6;
  out.port = port;
  freeaddrinfo(found);
  return out;
}

void LogMhdError(void* cls, const char* format, va_list args) {
  char text[512];
  std::vsnprintf(text, sizeof text, format, args);
  absl::string_view message(text);
  while (absl::ConsumeSuffix(&message, "\n")) {
  }
  Log(LogLevel::kWarn, static_cast<const char*>(cls), {F("error", message)});
}

}  // namespace rbmrec::server
