#include "server/http/http_tls.h"

#include <arpa/inet.h>
#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"

namespace rbmrec::server::http {

// One certificate chain and its key, as GnuTLS hands them to a handshake.
struct HttpTlsIdentity::Pair {
  static constexpr unsigned kMaxChain = 16;
  gnutls_pcert_st chain[kMaxChain];
  unsigned length = 0;
  gnutls_privkey_t key = nullptr;
  ~Pair() {
    for (unsigned i = 0; i < length; ++i) gnutls_pcert_deinit(&chain[i]);
    if (key != nullptr) gnutls_privkey_deinit(key);
  }
};

// The process-wide table of the retrieve callback: local port -> identity.
struct TlsRegistry {
  static absl::Mutex& Mu() {
    static absl::Mutex mu;
    return mu;
  }
  static std::map<int, HttpTlsIdentity*>& Table() {
    static auto* table = new std::map<int, HttpTlsIdentity*>();
    return *table;
  }

  static int Retrieve(gnutls_session_t session,
                      const gnutls_datum_t* /*req_ca_rdn*/, int /*nreqs*/,
                      const gnutls_pk_algorithm_t* /*pk_algos*/,
                      int /*pk_algos_length*/, gnutls_pcert_st** pcert,
                      unsigned int* pcert_length, gnutls_privkey_t* key) {
    const int fd = gnutls_transport_get_int(session);
    sockaddr_storage address{};
    socklen_t size = sizeof address;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) != 0) {
      return -1;
    }
    const int port =
        address.ss_family == AF_INET6
            ? ntohs(reinterpret_cast<sockaddr_in6*>(&address)->sin6_port)
            : ntohs(reinterpret_cast<sockaddr_in*>(&address)->sin_port);
    absl::MutexLock lock(&Mu());
    auto it = Table().find(port);
    if (it == Table().end()) return -1;
    std::shared_ptr<HttpTlsIdentity::Pair> pair = it->second->Current();
    *pcert = pair->chain;
    *pcert_length = pair->length;
    *key = pair->key;
    return 0;  // `pair` stays alive: current_ or retired_ holds it
  }
};

absl::StatusOr<std::shared_ptr<HttpTlsIdentity::Pair>> HttpTlsIdentity::Parse(
    const std::string& cert_pem, const std::string& key_pem) {
  auto pair = std::make_shared<Pair>();
  gnutls_datum_t cert{
      reinterpret_cast<unsigned char*>(const_cast<char*>(cert_pem.data())),
      static_cast<unsigned>(cert_pem.size())};
  unsigned length = Pair::kMaxChain;
  if (int r = gnutls_pcert_list_import_x509_raw(pair->chain, &length, &cert,
                                                GNUTLS_X509_FMT_PEM, 0);
      r < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("HTTP TLS certificate chain: ", gnutls_strerror(r)));
  }
  pair->length = length;
  gnutls_datum_t key{
      reinterpret_cast<unsigned char*>(const_cast<char*>(key_pem.data())),
      static_cast<unsigned>(key_pem.size())};
  if (int r = gnutls_privkey_init(&pair->key); r < 0) {
    return absl::InternalError(gnutls_strerror(r));
  }
  if (int r = gnutls_privkey_import_x509_raw(pair->key, &key,
                                             GNUTLS_X509_FMT_PEM, nullptr, 0);
      r < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("HTTP TLS private key: ", gnutls_strerror(r)));
  }
  return pair;
}

absl::StatusOr<std::unique_ptr<HttpTlsIdentity>> HttpTlsIdentity::Create(
    const std::string& cert_pem, const std::string& key_pem) {
  std::unique_ptr<HttpTlsIdentity> identity(new HttpTlsIdentity());
  if (absl::Status s = identity->Replace(cert_pem, key_pem); !s.ok()) return s;
  return identity;
}

HttpTlsIdentity::~HttpTlsIdentity() { Unregister(); }

absl::Status HttpTlsIdentity::Replace(const std::string& cert_pem,
                                      const std::string& key_pem) {
  absl::StatusOr<std::shared_ptr<Pair>> pair = Parse(cert_pem, key_pem);
  if (!pair.ok()) return pair.status();
  absl::MutexLock lock(&mu_);
  if (current_ != nullptr) retired_.push_back(std::move(current_));
  current_ = *std::move(pair);
  return absl::OkStatus();
}

std::shared_ptr<HttpTlsIdentity::Pair> HttpTlsIdentity::Current() const {
  absl::MutexLock lock(&mu_);
  return current_;
}

void HttpTlsIdentity::Register(int port) {
  absl::MutexLock lock(&TlsRegistry::Mu());
  if (port_ >= 0) TlsRegistry::Table().erase(port_);
  port_ = port;
  TlsRegistry::Table()[port] = this;
}

void HttpTlsIdentity::Unregister() {
  absl::MutexLock lock(&TlsRegistry::Mu());
  if (port_ < 0) return;
  auto it = TlsRegistry::Table().find(port_);
  if (it != TlsRegistry::Table().end() && it->second == this) {
    TlsRegistry::Table().erase(it);
  }
  port_ = -1;
}

void* HttpTlsIdentity::RetrieveFunction() {
  return reinterpret_cast<void*>(&TlsRegistry::Retrieve);
}

}  // namespace rbmrec::server::http
