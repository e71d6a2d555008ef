#include "server/security/tls.h"

#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"

namespace rbmrec::server {
namespace {

// The first OpenSSL error queued, as text (and clears the queue).
std::string OpenSslError() {
  unsigned long code = ERR_get_error();  // NOLINT(runtime/int)
  ERR_clear_error();
  if (code == 0) return "no PEM data of that kind";
  char buffer[256];
  ERR_error_string_n(code, buffer, sizeof(buffer));
  return buffer;
}

absl::StatusOr<std::string> ReadFile(const std::string& flag,
                                     const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    const int err = errno;
    std::string message =
        absl::StrCat(flag, " ", path, ": cannot read: ", std::strerror(err));
    if (err == ENOENT) return absl::NotFoundError(message);
    return absl::InvalidArgumentError(message);
  }
  std::string text;
  char buffer[8192];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), f)) > 0) {
    text.append(buffer, n);
    if (text.size() > (size_t{4} << 20)) break;
  }
  const bool error = std::ferror(f) != 0;
  std::fclose(f);
  if (error) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " ", path, ": read error"));
  }
  if (text.size() > (size_t{4} << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " ", path, ": larger than 4 MiB"));
  }
  return text;
}

struct BioDeleter {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Deleter {
  void operator()(X509* x) const { X509_free(x); }
};
struct PkeyDeleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using BioPtr = std::unique_ptr<BIO, BioDeleter>;
using X509Ptr = std::unique_ptr<X509, X509Deleter>;

BioPtr MemBio(const std::string& data) {
  return BioPtr(BIO_new_mem_buf(data.data(), static_cast<int>(data.size())));
}

// The certificates in `pem`, first one first; error when there is none.
absl::StatusOr<std::vector<X509Ptr>> ParseCerts(const std::string& flag,
                                                const std::string& path,
                                                const std::string& pem) {
  BioPtr bio = MemBio(pem);
  std::vector<X509Ptr> certs;
  while (X509* x = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    certs.emplace_back(x);
  }
  ERR_clear_error();  // the end of the data
  if (certs.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " ", path,
                     ": no PEM certificate (-----BEGIN CERTIFICATE-----) "
                     "could be parsed"));
  }
  return certs;
}

std::string Summary(X509* leaf) {
  char subject[512];
  X509_NAME_oneline(X509_get_subject_name(leaf), subject, sizeof(subject));
  std::string serial = "?";
  if (BIGNUM* bn = ASN1_INTEGER_to_BN(X509_get_serialNumber(leaf), nullptr)) {
    if (char* hex = BN_bn2hex(bn)) {
      serial = hex;
      OPENSSL_free(hex);
    }
    BN_free(bn);
  }
  std::string not_after = "?";
  BioPtr out(BIO_new(BIO_s_mem()));
  if (ASN1_TIME_print(out.get(), X509_get0_notAfter(leaf)) == 1) {
    char* data = nullptr;
    long n = BIO_get_mem_data(out.get(), &data);  // NOLINT(runtime/int)
    not_after.assign(data, static_cast<size_t>(n));
  }
  return absl::StrCat("subject=", subject, " serial=", serial,
                      " not_after=", not_after);
}

// An in-memory file (memfd) holding `data`, its mtime after `after` (so that
// gRPC's watcher, which compares modification times in seconds around its
// reads, notices a swap in the middle of a read and reads again).
absl::StatusOr<int> MemFile(const char* name, const std::string& data,
                            time_t after) {
  int fd = memfd_create(name, MFD_CLOEXEC);
  if (fd < 0) {
    return absl::InternalError(
        absl::StrCat("memfd_create: ", std::strerror(errno)));
  }
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      close(fd);
      return absl::InternalError(
          absl::StrCat("writing an in-memory file: ", std::strerror(err)));
    }
    done += static_cast<size_t>(n);
  }
  struct timespec times[2];
  clock_gettime(CLOCK_REALTIME, &times[0]);
  if (times[0].tv_sec <= after) times[0].tv_sec = after + 1;
  times[1] = times[0];
  futimens(fd, times);
  return fd;
}

time_t ModificationTime(int fd) {
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) return 0;
  return st.st_mtime;
}

// Makes `target` (an open descriptor number) refer to a new in-memory file
// holding `data`; with target < 0, returns a new descriptor instead.
absl::StatusOr<int> Replace(int target, const char* name,
                            const std::string& data) {
  absl::StatusOr<int> fd = MemFile(name, data, ModificationTime(target));
  if (!fd.ok() || target < 0) return fd;
  if (dup3(*fd, target, O_CLOEXEC) < 0) {
    const int err = errno;
    close(*fd);
    return absl::InternalError(absl::StrCat("dup3: ", std::strerror(err)));
  }
  close(*fd);
  return target;
}

std::string ProcPath(int fd) { return absl::StrCat("/proc/self/fd/", fd); }

}  // namespace

absl::StatusOr<TlsMaterial> LoadTlsMaterial(const TlsFiles& files) {
  TlsMaterial m;
  absl::StatusOr<std::string> cert = ReadFile("--tls-cert", files.cert);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadFile("--tls-key", files.key);
  if (!key.ok()) return key.status();
  absl::StatusOr<std::vector<X509Ptr>> chain =
      ParseCerts("--tls-cert", files.cert, *cert);
  if (!chain.ok()) return chain.status();
  BioPtr key_bio = MemBio(*key);
  std::unique_ptr<EVP_PKEY, PkeyDeleter> pkey(
      PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  if (pkey == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls-key ", files.key,
                     ": no unencrypted PEM private key could be parsed (",
                     OpenSslError(), ")"));
  }
  if (X509_check_private_key(chain->front().get(), pkey.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        absl::StrCat("--tls-key ", files.key,
                     ": the private key does not match the certificate in "
                     "--tls-cert ",
                     files.cert));
  }
  m.summary = Summary(chain->front().get());
  if (!files.client_ca.empty()) {
    absl::StatusOr<std::string> ca =
        ReadFile("--tls-client-ca", files.client_ca);
    if (!ca.ok()) return ca.status();
    absl::StatusOr<std::vector<X509Ptr>> cas =
        ParseCerts("--tls-client-ca", files.client_ca, *ca);
    if (!cas.ok()) return cas.status();
    m.client_ca_pem = std::move(*ca);
  }
  m.cert_pem = std::move(*cert);
  m.key_pem = std::move(*key);
  return m;
}

absl::StatusOr<std::unique_ptr<TlsCredentials>> TlsCredentials::Create(
    TlsFiles files, unsigned refresh_seconds) {
  absl::StatusOr<TlsMaterial> material = LoadTlsMaterial(files);
  if (!material.ok()) return material.status();
  std::unique_ptr<TlsCredentials> tls(new TlsCredentials());
  tls->files_ = std::move(files);
  {
    absl::MutexLock lock(&tls->mu_);
    if (absl::Status s = tls->Install(*material); !s.ok()) return s;
  }
  // gRPC's watcher reads the in-memory files by path: check it can.
  if (absl::StatusOr<std::string> back =
          ReadFile("TLS in-memory file", ProcPath(tls->identity_fd_));
      !back.ok() || back->empty()) {
    return absl::InternalError(
        absl::StrCat("cannot read back ", ProcPath(tls->identity_fd_),
                     " (TLS needs /proc mounted): ",
                     back.ok() ? "empty" : back.status().message()));
  }
  std::shared_ptr<grpc::experimental::CertificateProviderInterface> provider;
  if (tls->ca_fd_ >= 0) {
    provider =
        std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
            ProcPath(tls->identity_fd_), ProcPath(tls->identity_fd_),
            ProcPath(tls->ca_fd_), std::max(1u, refresh_seconds));
  } else {
    provider =
        std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
            ProcPath(tls->identity_fd_), ProcPath(tls->identity_fd_),
            std::max(1u, refresh_seconds));
  }
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (tls->ca_fd_ >= 0) {
    options.watch_root_certs();
    options.set_cert_request_type(
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  } else {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  }
  tls->credentials_ = grpc::experimental::TlsServerCredentials(options);
  if (tls->credentials_ == nullptr) {
    return absl::InternalError("gRPC could not make the TLS credentials");
  }
  return tls;
}

TlsCredentials::~TlsCredentials() {
  // Our reference to gRPC's provider (and its watcher) goes before the
  // descriptors it reads.
  credentials_.reset();
  if (identity_fd_ >= 0) close(identity_fd_);
  if (ca_fd_ >= 0) close(ca_fd_);
}

absl::Status TlsCredentials::Install(const TlsMaterial& material) {
  // The key first: gRPC reads the key and the chain from this one file.
  absl::StatusOr<int> identity =
      Replace(identity_fd_, "rbmrec-tls-identity",
              absl::StrCat(material.key_pem, "\n", material.cert_pem));
  if (!identity.ok()) return identity.status();
  identity_fd_ = *identity;
  if (!material.client_ca_pem.empty()) {
    absl::StatusOr<int> ca =
        Replace(ca_fd_, "rbmrec-tls-client-ca", material.client_ca_pem);
    if (!ca.ok()) return ca.status();
    ca_fd_ = *ca;
  }
  summary_ = material.summary;
  return absl::OkStatus();
}

absl::Status TlsCredentials::Reload() {
  absl::StatusOr<TlsMaterial> material = LoadTlsMaterial(files_);
  if (!material.ok()) return material.status();
  absl::MutexLock lock(&mu_);
  return Install(*material);
}

std::string TlsCredentials::summary() const {
  absl::MutexLock lock(&mu_);
  return summary_;
}

}  // namespace rbmrec::server
