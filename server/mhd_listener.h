#ifndef RBMREC_SERVER_MHD_LISTENER_H_
#define RBMREC_SERVER_MHD_LISTENER_H_

// What the two libmicrohttpd listeners (--metrics-listen, --http-listen)
// share: HOST:PORT to a socket address, and libmicrohttpd's error messages
// as log lines. Thread-safe.

#include <sys/socket.h>

#include <cstdarg>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rbmrec::server {

struct ListenAddress {
  sockaddr_storage address{};
  bool ipv6 = false;
  int port = 0;  // as given (0: the kernel picks)
  const sockaddr* sockaddr_ptr() const {
    return reinterpret_cast<const sockaddr*>(&address);
  }
};

// `listen` is HOST:PORT: an IPv4 address, [IPv6] or a name that resolves
// (e.g. localhost); port 0 picks a free port. InvalidArgument naming
// `flag` ("--metrics-listen") and the problem.
absl::StatusOr<ListenAddress> ResolveListen(absl::string_view flag,
                                            const std::string& listen);

// An MHD_OPTION_EXTERNAL_LOGGER: one warning log line per libmicrohttpd
// error, its event named by `cls` (a const char*, e.g. "http_error").
void LogMhdError(void* cls, const char* format, va_list args);

}  // namespace rbmrec::server

#endif  // RBMREC_SERVER_MHD_LISTENER_H_
