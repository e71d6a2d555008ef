#ifndef RBMREC_SERVER_HTTP_HTTP_TLS_H_
#define RBMREC_SERVER_HTTP_HTTP_TLS_H_

// The HTTP listener's TLS certificate, replaceable while it serves
// (SIGHUP, as the gRPC port's server/security/tls.h).
//
// libmicrohttpd hands the certificate choice to GnuTLS's retrieve callback
// (MHD_OPTION_HTTPS_CERT_CALLBACK), which has no user argument: the
// callback finds the identity of its listener by the local address of the
// connection's socket (GnuTLS's transport int, which libmicrohttpd sets),
// in a process-wide table that Register/Unregister keep. So:
// - each handshake after Replace returns uses the new certificate;
//   established connections keep their TLS session;
// - a certificate or key that GnuTLS cannot use fails Replace and the one
//   in use stays;
// - replaced identities are kept until the HttpTlsIdentity is destroyed
//   (a handshake may still use one), a few KB per reload.
//
// Thread safety: every method may be called from any thread.

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace rbmrec::server::http {

class HttpTlsIdentity {
 public:
  // InvalidArgument when GnuTLS cannot parse the PEM chain and key.
  static absl::StatusOr<std::unique_ptr<HttpTlsIdentity>> Create(
      const std::string& cert_pem, const std::string& key_pem);
  // Unregister().
  ~HttpTlsIdentity();
  HttpTlsIdentity(const HttpTlsIdentity&) = delete;
  HttpTlsIdentity& operator=(const HttpTlsIdentity&) = delete;

  // Uses `cert_pem` and `key_pem` for the next handshakes; on error the
  // identity in use stays.
  absl::Status Replace(const std::string& cert_pem, const std::string& key_pem)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Answers the handshakes of connections accepted on the socket bound to
  // local port `port` (one registration per identity; a later one moves
  // it).
  void Register(int port);
  void Unregister();

  // For MHD_OPTION_HTTPS_CERT_CALLBACK: a gnutls_certificate_retrieve_
  // function2 (declared void* to keep GnuTLS out of this header).
  static void* RetrieveFunction();

 private:
  struct Pair;
  HttpTlsIdentity() = default;
  static absl::StatusOr<std::shared_ptr<Pair>> Parse(
      const std::string& cert_pem, const std::string& key_pem);
  std::shared_ptr<Pair> Current() const ABSL_LOCKS_EXCLUDED(mu_);
  friend struct TlsRegistry;

  mutable absl::Mutex mu_;
  std::shared_ptr<Pair> current_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<Pair>> retired_ ABSL_GUARDED_BY(mu_);
  int port_ = -1;
};

}  // namespace rbmrec::server::http

#endif  // RBMREC_SERVER_HTTP_HTTP_TLS_H_
