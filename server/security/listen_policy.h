#ifndef RBMREC_SERVER_SECURITY_LISTEN_POLICY_H_
#define RBMREC_SERVER_SECURITY_LISTEN_POLICY_H_

// The server's secure defaults: which listen addresses count as local, and
// whether a configuration may serve on the address it names.

#include <string>

#include "absl/strings/string_view.h"

namespace rbmrec::server {

// Whether `listen` (the --listen value, HOST:PORT) reaches this host only:
// HOST is 127.0.0.0/8, ::1 (written [::1]) or localhost; a unix: or
// unix-abstract: socket also counts. 0.0.0.0, [::], an empty host and
// every other name or address do not.
bool IsLoopbackListen(absl::string_view listen);

// Empty when the server may serve on `listen` with this configuration;
// otherwise the one line to print (it starts with "rbmrec-server: refusing
// to serve" and names what is missing and --insecure). A non-loopback
// address needs TLS and tokens, unless `insecure`.
std::string RefusalLine(absl::string_view listen, bool tls, bool tokens,
                        bool insecure);

// Why a TCP listener cannot be bound on `listen` (HOST:PORT; a name is
// resolved), tried with a socket of our own and SO_REUSEADDR as gRPC does
// but never SO_REUSEPORT: e.g. "address already in use: another process
// listens on 127.0.0.1:50051". "" when a bind succeeds, for unix: addresses
// and when HOST:PORT does not parse (the caller reports that). For the
// message after gRPC failed to listen; the socket is closed again.
std::string BindProblem(absl::string_view listen);

// --reflection: "on"/"true" -> true, "off"/"false" -> false, "auto" -> on
// exactly when the address is loopback.
bool ReflectionEnabled(absl::string_view mode, absl::string_view listen);

}  // namespace rbmrec::server

#endif  // RBMREC_SERVER_SECURITY_LISTEN_POLICY_H_
