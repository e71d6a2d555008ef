#include "server/security/listen_policy.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace rbmrec::server {

bool IsLoopbackListen(absl::string_view listen) {
  if (absl::StartsWith(listen, "unix:") ||
      absl::StartsWith(listen, "unix-abstract:")) {
    return true;
  }
  absl::ConsumePrefix(&listen, "ipv4:");
  absl::ConsumePrefix(&listen, "ipv6:");
  const size_t colon = listen.rfind(':');
  if (colon == absl::string_view::npos) return false;
  absl::string_view host = listen.substr(0, colon);
  if (absl::ConsumePrefix(&host, "[")) {
    if (!absl::ConsumeSuffix(&host, "]")) return false;
  }
  if (absl::EqualsIgnoreCase(host, "localhost")) return true;
  const std::string h(host);
  unsigned char v4[4];
  if (inet_pton(AF_INET, h.c_str(), v4) == 1) return v4[0] == 127;
  unsigned char v6[16];
  if (inet_pton(AF_INET6, h.c_str(), v6) == 1) {
    static const unsigned char kLoopback[16] = {0, 0, 0, 0, 0, 0, 0, 0,
                                                0, 0, 0, 0, 0, 0, 0, 1};
    return std::equal(v6, v6 + 16, kLoopback);
  }
  return false;
}

std::string RefusalLine(absl::string_view listen, bool tls, bool tokens,
                        bool insecure) {
  if (insecure || (tls && tokens) || IsLoopbackListen(listen)) return "";
  std::vector<std::string> missing;
  if (!tls) missing.push_back("TLS (--tls-cert and --tls-key)");
  if (!tokens) missing.push_back("client tokens (--auth-tokens)");
  return absl::StrCat(
      "rbmrec-server: refusing to serve on ", listen,
      " (not a loopback address) without ", absl::StrJoin(missing, " and "),
      "; set them, listen on 127.0.0.1, or pass --insecure to serve this "
      "open API to the network anyway");
}

std::string BindProblem(absl::string_view listen) {
  if (absl::StartsWith(listen, "unix:") ||
      absl::StartsWith(listen, "unix-abstract:")) {
    return "";
  }
  absl::ConsumePrefix(&listen, "ipv4:");
  absl::ConsumePrefix(&listen, "ipv6:");
  const size_t colon = listen.rfind(':');
  if (colon == absl::string_view::npos) return "";
  absl::string_view host = listen.substr(0, colon);
  const std::string port(listen.substr(colon + 1));
  if (absl::ConsumePrefix(&host, "[") && !absl::ConsumeSuffix(&host, "]")) {
    return "";
  }
  const std::string h(host);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (getaddrinfo(h.empty() ? nullptr : h.c_str(), port.c_str(), &hints,
                  &found) != 0) {
    return "";
  }
  std::string problem;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    const int rc = bind(fd, a->ai_addr, a->ai_addrlen);
    const int err = errno;
    close(fd);
    if (rc == 0) continue;
    if (err == EADDRINUSE) {
      problem =
          absl::StrCat("address already in use: another process listens on ",
                       listen, " (another rbmrec-server?)");
    } else {
      problem = absl::StrCat(std::strerror(err), " (binding ", listen, ")");
    }
    break;
  }
  freeaddrinfo(found);
  return problem;
}

bool ReflectionEnabled(absl::string_view mode, absl::string_view listen) {
  if (mode == "on" || mode == "true") return true;
  if (mode == "off" || mode == "false") return false;
  return IsLoopbackListen(listen);
}

}  // namespace rbmrec::server
