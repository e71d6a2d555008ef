// The HTTP listener with TLS (MHD_USE_TLS, GnuTLS): a client that trusts the
// test CA gets answers; plain HTTP on the TLS port gets none; ReloadTls
// (SIGHUP) switches the certificate of new handshakes, a bad one is refused
// and the one in use stays. Certificates come from make_test_certs.sh
// (openssl).

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/server/http/http_fixture.h"

namespace rbmrec::server::http {
namespace {

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// One request over TLS, verifying the server against `ca_file`; the whole
// answer, or "" when the handshake fails. `serial`: the serial number of
// the server's certificate (-1 without one).
std::string TlsRequest(int port, const std::string& ca_file,
                       const std::string& request, long* serial = nullptr) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  SSL_CTX_load_verify_locations(ctx, ca_file.c_str(), nullptr);
  SSL* ssl = SSL_new(ctx);
  SSL_set_tlsext_host_name(ssl, "localhost");
  SSL_set1_host(ssl, "localhost");
  const int fd = ConnectLoopback(port);
  std::string answer;
  SSL_set_fd(ssl, fd);
  if (serial != nullptr) *serial = -1;
  if (fd >= 0 && SSL_connect(ssl) == 1) {
    if (X509* cert = SSL_get1_peer_certificate(ssl);
        cert != nullptr && serial != nullptr) {
      *serial = ASN1_INTEGER_get(X509_get_serialNumber(cert));
      X509_free(cert);
    } else if (cert != nullptr) {
      X509_free(cert);
    }
    SSL_write(ssl, request.data(), static_cast<int>(request.size()));
    char buf[16384];
    int n;
    while ((n = SSL_read(ssl, buf, sizeof buf)) > 0) answer.append(buf, n);
  }
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  if (fd >= 0) close(fd);
  return answer;
}

// The test certificates in a fresh directory (removed at the end) and a
// server with server.pem (serial 1001).
class HttpTls : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(::testing::TempDir(), "/http_tls_certs.", getpid());
    ASSERT_EQ(std::system(absl::StrCat("bash '", RBMREC_MAKE_TEST_CERTS, "' '",
                                       dir_, "'")
                              .c_str()),
              0)
        << "make_test_certs.sh failed (is openssl installed?)";
    HttpServerOptions o;
    o.tls_cert_pem = ReadText(dir_ + "/server.pem");
    o.tls_key_pem = ReadText(dir_ + "/server.key");
    http_.Start(o);
  }
  void TearDown() override {
    http_.Stop();
    std::system(absl::StrCat("rm -rf '", dir_, "'").c_str());
  }
  std::string dir_;
  InProcessHttp http_;
};

constexpr char kStats[] =
    "GET /v1/stats HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";

TEST_F(HttpTls, ServesTheCertificateAndRefusesPlainHttp) {
  const std::string& dir = dir_;
  InProcessHttp& http = http_;
  const std::string answer = TlsRequest(http.port(), dir + "/ca.pem", kStats);
  EXPECT_TRUE(absl::StartsWith(answer, "HTTP/1.1 200")) << answer;
  EXPECT_TRUE(absl::StrContains(answer, "\"users\":\"0\"")) << answer;
  // A client that does not trust the CA fails the handshake.
  EXPECT_EQ(
      TlsRequest(http.port(), dir + "/other-ca.pem", "GET / HTTP/1.0\r\n\r\n"),
      "");
  // Plain HTTP on the TLS port is no HTTP exchange.
  EXPECT_EQ(Call(http.port(), "GET", "/v1/stats").status, 0);
}

TEST_F(HttpTls, ReloadSwitchesTheCertificateOfNewConnections) {
  const std::string& dir = dir_;
  InProcessHttp& http = http_;
  long serial = 0;
  EXPECT_TRUE(absl::StartsWith(
      TlsRequest(http.port(), dir + "/ca.pem", kStats, &serial),
      "HTTP/1.1 200"));
  EXPECT_EQ(serial, 1001);
  ASSERT_TRUE(http.server
                  ->ReloadTls(ReadText(dir + "/server2.pem"),
                              ReadText(dir + "/server2.key"))
                  .ok());
  EXPECT_TRUE(absl::StartsWith(
      TlsRequest(http.port(), dir + "/ca.pem", kStats, &serial),
      "HTTP/1.1 200"));
  EXPECT_EQ(serial, 1002);
  // A chain or key GnuTLS cannot read is refused; the certificate stays.
  absl::Status bad = http.server->ReloadTls("not a certificate",
                                            ReadText(dir + "/server.key"));
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument) << bad;
  EXPECT_TRUE(absl::StrContains(bad.message(), "certificate chain")) << bad;
  EXPECT_FALSE(
      http.server->ReloadTls(ReadText(dir + "/server.pem"), "no key").ok());
  EXPECT_TRUE(absl::StartsWith(
      TlsRequest(http.port(), dir + "/ca.pem", kStats, &serial),
      "HTTP/1.1 200"));
  EXPECT_EQ(serial, 1002);
}

}  // namespace
}  // namespace rbmrec::server::http
