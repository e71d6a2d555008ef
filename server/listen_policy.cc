#include "server/listen_policy.h"

#include <arpa/inet.h>

#include <algorithm>
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

bool ReflectionEnabled(absl::string_view mode, absl::string_view listen) {
  if (mode == "on" || mode == "true") return true;
  if (mode == "off" || mode == "false") return false;
  return IsLoopbackListen(listen);
}

}  // namespace rbmrec::server
