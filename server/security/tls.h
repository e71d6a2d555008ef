#ifndef RBMREC_SERVER_SECURITY_TLS_H_
#define RBMREC_SERVER_SECURITY_TLS_H_

// Server TLS from PEM files, reloadable while the server runs.
//
// How a reload works: the server never lets gRPC read the operator's files.
// It reads and validates them itself (at start, and again on each Reload),
// and hands the validated PEM data to gRPC's FileWatcherCertificateProvider
// through in-memory files (memfd, opened by gRPC as /proc/self/fd/N; the
// key and certificate chain sit in one such file, so they always change
// together). Reload replaces those in-memory files atomically (dup3); the
// watcher, which polls them every `refresh_seconds`, then switches gRPC to
// the new certificate. So:
// - files changed on disk are not used until Reload (SIGHUP) is called;
// - a file that is missing, unparsable or whose key does not match its
//   certificate fails Reload, is logged by the caller, and the certificate
//   in use stays;
// - connections accepted from the watcher's next poll (at most
//   refresh_seconds after Reload) are handshaken with the new certificate
//   (and the new client CA); established connections keep the TLS session
//   they have, so in-flight calls are not dropped.

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/security/server_credentials.h"

namespace rbmrec::server {

struct TlsFiles {
  std::string cert;       // --tls-cert: PEM certificate chain, leaf first
  std::string key;        // --tls-key: PEM private key of the leaf
  std::string client_ca;  // --tls-client-ca: PEM CA bundle; empty: no mTLS
};

// PEM data read from TlsFiles and checked.
struct TlsMaterial {
  std::string cert_pem;
  std::string key_pem;
  std::string client_ca_pem;
  // The leaf certificate: "subject=... serial=HEX not_after=..." for logs.
  std::string summary;
};

// Reads the files and checks that the certificate file holds at least one
// PEM certificate, the key file a PEM private key matching the first
// certificate, and the client CA file (when set) at least one certificate.
// InvalidArgument (NotFound for a missing file) naming the flag and the
// file.
absl::StatusOr<TlsMaterial> LoadTlsMaterial(const TlsFiles& files);

// Thread-safe.
class TlsCredentials {
 public:
  // LoadTlsMaterial errors; Internal when the in-memory files cannot be
  // made. `refresh_seconds` >= 1.
  static absl::StatusOr<std::unique_ptr<TlsCredentials>> Create(
      TlsFiles files, unsigned refresh_seconds = 1);
  ~TlsCredentials();

  // For GrpcServerOptions::credentials: TLS with the certificate, and with
  // a client CA, REQUIRE and VERIFY client certificates (mTLS). gRPC's
  // provider holds the in-memory files: this object must outlive the
  // server.
  std::shared_ptr<grpc::ServerCredentials> server_credentials() const {
    return credentials_;
  }

  // Re-reads and validates the files (see the file comment). On error the
  // material in use stays and the error is returned.
  absl::Status Reload() ABSL_LOCKS_EXCLUDED(mu_);

  // TlsMaterial::summary of the material in use.
  std::string summary() const ABSL_LOCKS_EXCLUDED(mu_);
  const TlsFiles& files() const { return files_; }

 private:
  TlsCredentials() = default;
  absl::Status Install(const TlsMaterial& material)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  TlsFiles files_;
  mutable absl::Mutex mu_;
  int identity_fd_ = -1;  // key + chain; the number stays, its file changes
  int ca_fd_ = -1;        // client CA; -1 without mTLS
  std::string summary_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<grpc::ServerCredentials> credentials_;
};

}  // namespace rbmrec::server

#endif  // RBMREC_SERVER_SECURITY_TLS_H_
