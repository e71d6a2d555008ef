#ifndef RBMREC_CLIENT_SECURITY_H_
#define RBMREC_CLIENT_SECURITY_H_

// How a client (the rbmrec CLI, rbmrec-loadgen, any user of RbmrecClient)
// reaches a server that uses TLS and tokens: the settings from flags and
// environment, loading the files they name, the channel built from them, the
// `authorization` metadata of each call, and hints for the errors a wrong
// setting causes.
//
// Settings (a flag wins over its environment variable; a flag given as ""
// means "not set", ignoring the variable):
//   --tls-ca FILE           $RBMREC_TLS_CA   TLS on, the server's certificate
//                                            verified against this PEM CA
//   --tls-cert FILE         $RBMREC_TLS_CERT client certificate (mTLS), PEM
//   --tls-key FILE          $RBMREC_TLS_KEY  its private key, PEM
//   --tls-server-name NAME  $RBMREC_TLS_SERVER_NAME  the name checked in the
//                                            server's certificate (default:
//                                            the host of the target)
//   --token-file FILE       $RBMREC_TOKEN_FILE  token: first line of FILE
//                           $RBMREC_TOKEN    the token itself
// The token comes from --token-file; else $RBMREC_TOKEN; else
// $RBMREC_TOKEN_FILE (both variables set is an error). `--token-file ''`
// sends no token whatever the variables say.
//
// The token is sent as `authorization: Bearer TOKEN` metadata on every call
// except grpc.health.v1 (which never needs one). It is added to each call's
// ClientContext, not through gRPC call credentials: gRPC sends call
// credentials only over TLS, and rbmrec-server accepts tokens without TLS on
// a loopback address. TokenOverPlaintextWarning says when that exposes the
// token. No function here ever puts the token into a message.

#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/channel_arguments.h"

namespace rbmrec::client {

// The metadata key of the token and its value's prefix.
inline constexpr char kAuthorizationMetadataKey[] = "authorization";
inline constexpr char kBearerPrefix[] = "Bearer ";

// One setting as given: nullopt when absent.
struct SecuritySettings {
  std::optional<std::string> tls_ca;
  std::optional<std::string> tls_cert;
  std::optional<std::string> tls_key;
  std::optional<std::string> tls_server_name;
  std::optional<std::string> token_file;
  std::optional<std::string> token;  // environment only ($RBMREC_TOKEN)
};

// The RBMREC_TLS_* / RBMREC_TOKEN* variables of this process (unset and
// empty variables are nullopt).
SecuritySettings SecurityEnvFromProcess();

// The security of a connection, with the files already read.
struct ClientSecurity {
  bool tls = false;         // TLS on (a CA was given)
  std::string ca_pem;       // root certificates (when tls)
  std::string cert_pem;     // client certificate chain; "" = none
  std::string key_pem;      // its private key; "" when cert_pem is ""
  std::string server_name;  // "" = the target's host
  std::string token;        // "" = no token
  // Where the CA and the token came from, for messages and hints, e.g.
  // "--tls-ca ca.pem", "$RBMREC_TLS_CA (ca.pem)", "$RBMREC_TOKEN",
  // "--token-file admin.token" ("" when not set). Never holds the token.
  std::string ca_source;
  std::string token_source;
};

// Resolves `flags` over `env` and reads the files. Errors
// (InvalidArgument / NotFound / PermissionDenied) name the flag or variable
// and the file: unreadable file, a CA or certificate file without a PEM
// certificate, a key file without a PEM private key, a token file whose
// first line is empty or holds a character other than printable ASCII (the
// token itself is never shown), --tls-cert without --tls-key (or the
// reverse), --tls-cert/--tls-server-name without --tls-ca, and both
// $RBMREC_TOKEN and $RBMREC_TOKEN_FILE set.
absl::StatusOr<ClientSecurity> LoadSecurity(const SecuritySettings& flags,
                                            const SecuritySettings& env);

// True for gRPC target URIs that may name several servers:
// "dns:///HOST:PORT" (every address HOST resolves to), "ipv4:A:P,B:P",
// "ipv6:[A]:P,[B]:P". A plain "HOST:PORT" is not one.
bool IsBalancedTarget(absl::string_view target);

// A channel to `target` with `security`: TLS credentials (root certificates,
// optional client certificate) and the server-name override
// (GRPC_SSL_TARGET_NAME_OVERRIDE_ARG), or insecure credentials. `args` are
// the caller's other channel arguments. For IsBalancedTarget targets the
// calls are spread over every address by gRPC's round_robin policy (each
// call goes to the next ready server); a plain HOST:PORT uses gRPC's default
// (the first address that connects).
std::shared_ptr<grpc::Channel> CreateSecureChannel(
    const std::string& target, const ClientSecurity& security,
    grpc::ChannelArguments args);

// Adds the `authorization: Bearer TOKEN` metadata to `context` when
// `security` has a token; nothing otherwise.
void AddToken(const ClientSecurity& security, grpc::ClientContext* context);

// Whether every address of `target` ("host:port", "[v6]:port", "unix:...",
// "dns:///h:p", the lists "ipv4:A:P,B:P" and "ipv6:[A]:P,[B]:P") is on this
// machine: an IPv4 address in 127.0.0.0/8 (dotted quad), ::1 (or
// ::ffff:127.x.y.z), exactly "localhost" (any case; not when a dns:// URI
// names its own DNS server), or a Unix socket. Addresses are parsed, never
// matched by prefix: "127.evil.example" and "localhost.evil.example" are
// not loopback, nor is anything that does not parse.
bool IsLoopbackTarget(absl::string_view target);

// A one-line warning when a token would be sent without TLS to a target
// with an address that is not loopback (anyone on the path could read it),
// naming that address when `target` is a list; "" otherwise.
std::string TokenOverPlaintextWarning(const std::string& target,
                                      const ClientSecurity& security);

// What to do about a failed call's `status` given the connection's
// `security` (one line, no trailing newline; "" when nothing specific):
// UNAUTHENTICATED -> where the token comes from (or that none was given);
// PERMISSION_DENIED -> the token's role is too low; UNAVAILABLE while
// connecting ("failed to connect to all addresses") after a failed or
// refused TLS handshake -> the server certificate is not signed by the CA,
// its name does not match, the server wants a client certificate, or the
// server does (not) use TLS. A connection that was up and dropped mid-call
// (the server died) gets no TLS hint.
std::string SecurityHint(const absl::Status& status,
                         const ClientSecurity& security);

}  // namespace rbmrec::client

#endif  // RBMREC_CLIENT_SECURITY_H_
