#include "client/security.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_certificate_verifier.h"
#include "grpcpp/security/tls_credentials_options.h"

namespace rbmrec::client {
namespace {

// Larger PEM or token files are refused (a wrong path, e.g. a database).
constexpr size_t kMaxFileBytes = 1 << 20;

// A setting with where it came from.
struct Resolved {
  std::optional<std::string> value;  // nullopt or "": not set
  std::string source;                // "--tls-ca" or "$RBMREC_TLS_CA"

  bool set() const { return value.has_value() && !value->empty(); }
  // "--tls-ca ca.pem" / "$RBMREC_TLS_CA (ca.pem)", for file settings.
  std::string Describe() const {
    if (absl::StartsWith(source, "$")) {
      return absl::StrCat(source, " (", value.value_or(""), ")");
    }
    return absl::StrCat(source, " ", value.value_or(""));
  }
};

Resolved Pick(const std::optional<std::string>& flag,
              absl::string_view flag_name,
              const std::optional<std::string>& env,
              absl::string_view env_name) {
  if (flag.has_value()) return {flag, std::string(flag_name)};
  if (env.has_value()) return {env, absl::StrCat("$", env_name)};
  return {std::nullopt, ""};
}

absl::StatusOr<std::string> ReadSmallFile(const Resolved& setting) {
  const std::string& path = *setting.value;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    const int err = errno;
    const std::string message =
        absl::StrCat(setting.Describe(), ": cannot read: ", std::strerror(err));
    if (err == ENOENT) return absl::NotFoundError(message);
    if (err == EACCES) return absl::PermissionDeniedError(message);
    return absl::InvalidArgumentError(message);
  }
  std::string data;
  char buf[8192];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) {
    data.append(buf, n);
    if (data.size() > kMaxFileBytes) break;
  }
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed) {
    return absl::InvalidArgumentError(absl::StrCat(
        setting.Describe(), ": cannot read: ", std::strerror(err)));
  }
  if (data.size() > kMaxFileBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(setting.Describe(), ": larger than ", kMaxFileBytes,
                     " bytes; is this the right file?"));
  }
  return data;
}

absl::StatusOr<std::string> ReadPem(const Resolved& setting,
                                    absl::string_view marker,
                                    absl::string_view what) {
  absl::StatusOr<std::string> data = ReadSmallFile(setting);
  if (!data.ok()) return data.status();
  if (!absl::StrContains(*data, marker)) {
    return absl::InvalidArgumentError(absl::StrCat(
        setting.Describe(), ": no PEM ", what, " (no '", marker, "' line)"));
  }
  return data;
}

// The token of a token file: its first line without surrounding whitespace.
absl::StatusOr<std::string> ReadTokenFile(const Resolved& setting) {
  absl::StatusOr<std::string> data = ReadSmallFile(setting);
  if (!data.ok()) return data.status();
  absl::string_view first(*data);
  first = first.substr(0, first.find('\n'));
  first = absl::StripAsciiWhitespace(first);
  if (first.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        setting.Describe(), ": the first line is empty (expected the token)"));
  }
  return std::string(first);
}

// A token must be a valid metadata value without spaces: printable ASCII.
absl::Status CheckToken(absl::string_view token, absl::string_view source) {
  for (size_t i = 0; i < token.size(); ++i) {
    const auto c = static_cast<unsigned char>(token[i]);
    if (c < 0x21 || c > 0x7E) {
      return absl::InvalidArgumentError(absl::StrCat(
          source,
          ": the token holds a character that is not printable ASCII "
          "(at offset ",
          i, "); expected one token such as 'rbmrec_...'"));
    }
  }
  return absl::OkStatus();
}

// Whether `host` is an IP address of this machine: IPv4 127.0.0.0/8 (in
// dotted-quad form), ::1, or ::ffff:127.x.y.z. Parsed, never matched as a
// prefix: "127.evil.example" is a name, not an address.
bool IsLoopbackIp(absl::string_view host) {
  const std::string h(host);
  in_addr v4{};
  if (inet_pton(AF_INET, h.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, h.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

// The host of one address: "host:port", "[v6]:port", "[v6]", a bare host or
// a bare IPv6 address; nullopt when malformed.
std::optional<absl::string_view> AddressHost(absl::string_view address) {
  if (!address.empty() && address[0] == '[') {
    const size_t close = address.find(']');
    if (close == absl::string_view::npos) return std::nullopt;
    const absl::string_view after = address.substr(close + 1);
    if (!after.empty() && after[0] != ':') return std::nullopt;
    return address.substr(1, close - 1);
  }
  const size_t colon = address.find(':');
  // No colon, or several (a bare IPv6 address): all of it.
  if (colon == absl::string_view::npos || colon != address.rfind(':')) {
    return address;
  }
  return address.substr(0, colon);
}

// The first address of `target` that is not on this machine, or nullopt
// when every one is. Every address of a list counts ("ipv4:A:P,B:P",
// "ipv6:[A]:P,[B]:P"); "localhost" counts as loopback only where the system
// resolver looks it up (a plain target, or dns:///), not through the DNS
// server named in "dns://SERVER/NAME".
std::optional<std::string> FirstNonLoopbackAddress(absl::string_view target) {
  if (absl::StartsWith(target, "unix:") ||
      absl::StartsWith(target, "unix-abstract:")) {
    return std::nullopt;
  }
  absl::string_view rest = target;
  bool names_ok = true;
  bool list = false;
  if (absl::ConsumePrefix(&rest, "dns:")) {
    if (absl::ConsumePrefix(&rest, "//")) {
      const size_t slash = rest.find('/');
      if (slash == absl::string_view::npos) return std::string(target);
      names_ok = slash == 0;  // no DNS server named
      rest.remove_prefix(slash + 1);
    }
  } else if (absl::ConsumePrefix(&rest, "ipv4:") ||
             absl::ConsumePrefix(&rest, "ipv6:")) {
    list = true;
    names_ok = false;  // addresses only
  }
  std::vector<absl::string_view> addresses = {rest};
  if (list) addresses = absl::StrSplit(rest, ',');
  for (const absl::string_view address : addresses) {
    const std::optional<absl::string_view> host = AddressHost(address);
    const bool loopback =
        host.has_value() &&
        (IsLoopbackIp(*host) ||
         (names_ok && absl::EqualsIgnoreCase(*host, "localhost")));
    if (!loopback) {
      return std::string(address.empty() ? target : address);
    }
  }
  return std::nullopt;
}

}  // namespace

SecuritySettings SecurityEnvFromProcess() {
  auto get = [](const char* name) -> std::optional<std::string> {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') return std::nullopt;
    return std::string(value);
  };
  SecuritySettings env;
  env.tls_ca = get("RBMREC_TLS_CA");
  env.tls_cert = get("RBMREC_TLS_CERT");
  env.tls_key = get("RBMREC_TLS_KEY");
  env.tls_server_name = get("RBMREC_TLS_SERVER_NAME");
  env.token_file = get("RBMREC_TOKEN_FILE");
  env.token = get("RBMREC_TOKEN");
  return env;
}

absl::StatusOr<ClientSecurity> LoadSecurity(const SecuritySettings& flags,
                                            const SecuritySettings& env) {
  const Resolved ca =
      Pick(flags.tls_ca, "--tls-ca", env.tls_ca, "RBMREC_TLS_CA");
  const Resolved cert =
      Pick(flags.tls_cert, "--tls-cert", env.tls_cert, "RBMREC_TLS_CERT");
  const Resolved key =
      Pick(flags.tls_key, "--tls-key", env.tls_key, "RBMREC_TLS_KEY");
  const Resolved name = Pick(flags.tls_server_name, "--tls-server-name",
                             env.tls_server_name, "RBMREC_TLS_SERVER_NAME");

  ClientSecurity out;
  if (cert.set() != key.set()) {
    const Resolved& given = cert.set() ? cert : key;
    return absl::InvalidArgumentError(absl::StrCat(
        given.source, " needs ", cert.set() ? "--tls-key" : "--tls-cert",
        " too (a client certificate and its key go together)"));
  }
  if (!ca.set()) {
    for (const Resolved* r : {&cert, &name}) {
      if (r->set()) {
        return absl::InvalidArgumentError(absl::StrCat(
            r->source,
            " applies only with TLS: give --tls-ca FILE (the CA that signed "
            "the server's certificate)"));
      }
    }
  } else {
    out.tls = true;
    out.ca_source = ca.Describe();
    absl::StatusOr<std::string> pem =
        ReadPem(ca, "-----BEGIN CERTIFICATE-----", "certificate");
    if (!pem.ok()) return pem.status();
    out.ca_pem = *std::move(pem);
    if (cert.set()) {
      pem = ReadPem(cert, "-----BEGIN CERTIFICATE-----", "certificate");
      if (!pem.ok()) return pem.status();
      out.cert_pem = *std::move(pem);
      pem = ReadPem(key, "PRIVATE KEY-----", "private key");
      if (!pem.ok()) return pem.status();
      out.key_pem = *std::move(pem);
    }
    if (name.set()) out.server_name = *name.value;
  }

  // The token: --token-file, else $RBMREC_TOKEN, else $RBMREC_TOKEN_FILE.
  if (flags.token_file.has_value()) {
    if (!flags.token_file->empty()) {
      const Resolved file{flags.token_file, "--token-file"};
      absl::StatusOr<std::string> token = ReadTokenFile(file);
      if (!token.ok()) return token.status();
      out.token = *std::move(token);
      out.token_source = file.Describe();
    }
  } else if (env.token.has_value() && env.token_file.has_value()) {
    return absl::InvalidArgumentError(
        "both $RBMREC_TOKEN and $RBMREC_TOKEN_FILE are set; unset one (or "
        "give --token-file)");
  } else if (env.token.has_value()) {
    out.token = std::string(absl::StripAsciiWhitespace(*env.token));
    out.token_source = "$RBMREC_TOKEN";
  } else if (env.token_file.has_value()) {
    const Resolved file{env.token_file, "$RBMREC_TOKEN_FILE"};
    absl::StatusOr<std::string> token = ReadTokenFile(file);
    if (!token.ok()) return token.status();
    out.token = *std::move(token);
    out.token_source = file.Describe();
  }
  if (absl::Status s = CheckToken(out.token, out.token_source); !s.ok()) {
    return s;
  }
  return out;
}

bool IsBalancedTarget(absl::string_view target) {
  return absl::StartsWith(target, "dns:") ||
         absl::StartsWith(target, "ipv4:") || absl::StartsWith(target, "ipv6:");
}

std::shared_ptr<grpc::Channel> CreateSecureChannel(
    const std::string& target, const ClientSecurity& security,
    grpc::ChannelArguments args) {
  if (IsBalancedTarget(target)) args.SetLoadBalancingPolicyName("round_robin");
  if (!security.tls) {
    return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(),
                                     args);
  }
  // gRPC's TLS credentials rather than SslCredentials, for one setting:
  // SslCredentials re-checks on every call that the call's host is named by
  // the server's certificate (building the peer from the auth context and
  // matching names: ~1 us of client CPU per call, a tenth of what TLS adds
  // to a small call). The host of every call here is the channel's, which
  // the handshake already checked (HostNameCertificateVerifier, against
  // --tls-server-name when given), so the per-call check is off; the
  // certificate chain and the name are verified as with SslCredentials.
  namespace tls = grpc::experimental;
  std::vector<tls::IdentityKeyCertPair> identity;
  if (!security.cert_pem.empty()) {
    identity.push_back({security.key_pem, security.cert_pem});
  }
  tls::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(
      std::make_shared<tls::StaticDataCertificateProvider>(security.ca_pem,
                                                           identity));
  options.watch_root_certs();
  if (!identity.empty()) options.watch_identity_key_cert_pairs();
  options.set_verify_server_certs(true);
  options.set_certificate_verifier(
      std::make_shared<tls::HostNameCertificateVerifier>());
  options.set_check_call_host(false);
  if (!security.server_name.empty()) {
    args.SetSslTargetNameOverride(security.server_name);
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials =
      tls::TlsCredentials(options);
  if (credentials == nullptr) {
    // Not expected (the options are complete); fail closed, never in the
    // clear.
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = security.ca_pem;
    ssl.pem_cert_chain = security.cert_pem;
    ssl.pem_private_key = security.key_pem;
    credentials = grpc::SslCredentials(ssl);
  }
  return grpc::CreateCustomChannel(target, credentials, args);
}

void AddToken(const ClientSecurity& security, grpc::ClientContext* context) {
  if (security.token.empty()) return;
  context->AddMetadata(kAuthorizationMetadataKey,
                       absl::StrCat(kBearerPrefix, security.token));
}

bool IsLoopbackTarget(absl::string_view target) {
  return !FirstNonLoopbackAddress(target).has_value();
}

std::string TokenOverPlaintextWarning(const std::string& target,
                                      const ClientSecurity& security) {
  if (security.token.empty() || security.tls) return "";
  const std::optional<std::string> off = FirstNonLoopbackAddress(target);
  if (!off.has_value()) return "";
  return absl::StrCat(
      "warning: sending the token from ", security.token_source,
      " without TLS to ", target,
      *off == target ? ", which is" : absl::StrCat(", where ", *off, " is"),
      " not a loopback address: anyone on the network path can read it; give "
      "--tls-ca FILE");
}

std::string SecurityHint(const absl::Status& status,
                         const ClientSecurity& security) {
  // Matched case-insensitively: the texts come from gRPC and OpenSSL.
  const std::string message = absl::AsciiStrToLower(status.message());
  auto has = [&message](absl::string_view needle) {
    return absl::StrContains(message, absl::AsciiStrToLower(needle));
  };
  switch (status.code()) {
    case absl::StatusCode::kUnauthenticated:
      if (security.token.empty()) {
        return "the server needs a token: give --token-file FILE or set "
               "RBMREC_TOKEN (the server's admin makes one with "
               "'rbmrec-server token new NAME ROLE')";
      }
      return absl::StrCat(
          "the server does not accept the token from ", security.token_source,
          " (unknown, or removed from its --auth-tokens file); check "
          "--token-file / RBMREC_TOKEN");
    case absl::StatusCode::kPermissionDenied:
      if (security.token.empty()) return "";
      return absl::StrCat(
          "the token from ", security.token_source,
          " has too low a role for this command; use a token with the role "
          "named above (--token-file FILE or RBMREC_TOKEN)");
    case absl::StatusCode::kUnavailable:
      break;
    default:
      return "";
  }
  // TLS settings matter only while connecting: gRPC says "failed to connect
  // to all addresses" when no connection could be made. A connection that
  // was up and dropped ("Socket closed" mid-call: the server died or was
  // restarted) says nothing about TLS.
  if (!has("failed to connect")) return "";
  const bool handshake = has("handshake") || has("ssl") || has("tls");
  if (!security.tls) {
    if (handshake || has("socket closed") || has("connection reset")) {
      return "if the server uses TLS, give --tls-ca FILE (the CA that signed "
             "its certificate)";
    }
    return "";
  }
  if (has("CERTIFICATE_VERIFY_FAILED") || has("certificate verify failed")) {
    return absl::StrCat("the server's certificate is not signed by ",
                        security.ca_source,
                        " (wrong CA file?), or it has expired");
  }
  // "Hostname Verification Check failed": gRPC's TLS credentials (the
  // channels made here); the others: SslCredentials.
  if (has("peer name") || has("not in peer certificate") ||
      has("hostname verification")) {
    return "the server's certificate does not name the host of --server; "
           "give --tls-server-name NAME (a name in the certificate)";
  }
  // A server that requires a client certificate closes the connection
  // during the handshake when it gets none or one it does not trust.
  if (has("CERTIFICATE_REQUIRED") || has("BAD_CERTIFICATE") ||
      has("UNKNOWN_CA") || has("socket closed") || has("connection reset")) {
    return security.cert_pem.empty()
               ? "the server closed the connection during the TLS handshake: "
                 "the server requires a client certificate: give --tls-cert "
                 "FILE --tls-key FILE"
               : "the server closed the connection during the TLS handshake: "
                 "the server does not accept the client certificate "
                 "(--tls-cert): is it signed by the server's --tls-client-ca?";
  }
  if (handshake || has("WRONG_VERSION") || has("wrong version")) {
    return absl::StrCat(
        "the TLS handshake failed: the server may not use TLS (then drop ",
        security.ca_source, ")");
  }
  return "";
}

}  // namespace rbmrec::client
