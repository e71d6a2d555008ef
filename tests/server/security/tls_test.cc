// TLS on a real server (server/security/tls.h): certificate checks at start, a
// client without the CA fails, mTLS needs a client certificate from the CA, and
// a reload switches new connections to a new certificate while a call that is
// in flight on an old connection completes. Certificates come from
// make_test_certs.sh (openssl).

#include "server/security/tls.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/health.grpc.pb.h"
#include "proto/rbmrec.grpc.pb.h"
#include "tests/server/security_fixture.h"

namespace rbmrec::server {
namespace {

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
}

class TlsTest : public ::testing::Test {
 protected:
  // One directory per process: ctest runs the cases as parallel processes.
  static void SetUpTestSuite() {
    dir_ = new std::string(
        absl::StrCat(::testing::TempDir(), "/tls_test_certs.", getpid()));
    const std::string command =
        absl::StrCat("bash '", RBMREC_MAKE_TEST_CERTS, "' '", *dir_, "'");
    certs_made_ = std::system(command.c_str()) == 0;
  }
  static void TearDownTestSuite() {
    std::system(absl::StrCat("rm -rf '", *dir_, "'").c_str());
    delete dir_;
  }
  void SetUp() override {
    ASSERT_TRUE(certs_made_) << "make_test_certs.sh failed (is openssl "
                                "installed?)";
  }
  static std::string File(const std::string& name) {
    return absl::StrCat(*dir_, "/", name);
  }

  // Starts a server whose certificate files are copies of server.pem/key
  // (live-*.pem, which a test may overwrite).
  void Start(bool mtls) {
    WriteText(File("live-cert.pem"), ReadText(File("server.pem")));
    WriteText(File("live-key.pem"), ReadText(File("server.key")));
    TlsFiles files;
    files.cert = File("live-cert.pem");
    files.key = File("live-key.pem");
    if (mtls) files.client_ca = File("ca.pem");
    absl::StatusOr<std::unique_ptr<TlsCredentials>> tls =
        TlsCredentials::Create(files, /*refresh_seconds=*/1);
    ASSERT_TRUE(tls.ok()) << tls.status();
    tls_ = std::move(*tls);
    GrpcServerOptions go;
    go.reflection = true;
    go.credentials = tls_->server_credentials();
    server_.Start(go);
  }

  // A channel of its own (no subchannel shared with other channels).
  std::shared_ptr<grpc::Channel> Channel(
      const std::shared_ptr<grpc::ChannelCredentials>& credentials) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetSslTargetNameOverride("localhost");
    return grpc::CreateCustomChannel(
        absl::StrCat("127.0.0.1:", server_.server->port()), credentials, args);
  }
  std::shared_ptr<grpc::ChannelCredentials> Ssl(
      const std::string& ca, const std::string& client = "") {
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = ReadText(File(ca));
    if (!client.empty()) {
      options.pem_cert_chain = ReadText(File(client + ".pem"));
      options.pem_private_key = ReadText(File(client + ".key"));
    }
    return grpc::SslCredentials(options);
  }

  // GetStats on `channel`; `common_name` (may be null) gets the CN of the
  // certificate the server presented on that connection.
  grpc::Status Stats(const std::shared_ptr<grpc::Channel>& channel,
                     std::string* common_name = nullptr) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(5));
    v1::GetStatsResponse response;
    grpc::Status s = v1::Rbmrec::NewStub(channel)->GetStats(
        &context, v1::GetStatsRequest(), &response);
    if (s.ok() && common_name != nullptr) {
      std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
      common_name->clear();
      for (const grpc::string_ref& v :
           auth->FindPropertyValues("x509_common_name")) {
        common_name->assign(v.data(), v.size());
      }
    }
    return s;
  }

  static std::string* dir_;
  static bool certs_made_;
  std::unique_ptr<TlsCredentials> tls_;  // outlives server_ (declared first)
  TestServer server_;
};
std::string* TlsTest::dir_ = nullptr;
bool TlsTest::certs_made_ = false;

TEST_F(TlsTest, AClientNeedsTheCaAndHealthAndReflectionWorkOverTls) {
  Start(/*mtls=*/false);
  std::string cn;
  grpc::Status ok = Stats(Channel(Ssl("ca.pem")), &cn);
  ASSERT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_EQ(cn, "rbmrec test server");

  EXPECT_EQ(Stats(Channel(Ssl("other-ca.pem"))).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Stats(Channel(grpc::InsecureChannelCredentials())).error_code(),
            grpc::StatusCode::UNAVAILABLE);

  auto channel = Channel(Ssl("ca.pem"));
  grpc::ClientContext context;
  grpc::health::v1::HealthCheckResponse health;
  grpc::Status h = grpc::health::v1::Health::NewStub(channel)->Check(
      &context, grpc::health::v1::HealthCheckRequest(), &health);
  EXPECT_TRUE(h.ok()) << h.error_message();
  const google::protobuf::MethodDescriptor* list =
      RbmrecDescriptor().FindMethodByName("ListModels");
  EXPECT_TRUE(CallEmpty(channel, *list, "").ok());
  for (const char* path :
       {"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"}) {
    int services = 0;
    grpc::Status r = ListServices(channel, path, "", &services);
    EXPECT_TRUE(r.ok()) << path << ": " << r.error_message();
    EXPECT_GE(services, 4) << path;
  }
}

TEST_F(TlsTest, MutualTlsNeedsAClientCertificateFromTheCa) {
  Start(/*mtls=*/true);
  EXPECT_EQ(Stats(Channel(Ssl("ca.pem"))).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Stats(Channel(Ssl("ca.pem", "other-client"))).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  grpc::Status ok = Stats(Channel(Ssl("ca.pem", "client")));
  EXPECT_TRUE(ok.ok()) << ok.error_message();
}

TEST_F(TlsTest, ReloadServesTheNewCertificateToNewConnectionsOnly) {
  Start(/*mtls=*/false);
  auto old_channel = Channel(Ssl("ca.pem"));
  std::string cn;
  ASSERT_TRUE(Stats(old_channel, &cn).ok());
  ASSERT_EQ(cn, "rbmrec test server");

  // A call in flight across the reload: a client stream, one batch before
  // and one after.
  auto stub = v1::Rbmrec::NewStub(old_channel);
  grpc::ClientContext stream_context;
  v1::AddRatingsResponse added;
  auto writer = stub->AddRatings(&stream_context, &added);
  auto batch = [](const std::string& user) {
    v1::AddRatingsRequest b;
    v1::Rating* r = b.add_ratings();
    r->set_user_id(user);
    r->set_item_id("i1");
    r->set_rating(3);
    return b;
  };
  ASSERT_TRUE(writer->Write(batch("u1")));

  // Files changed on disk are not used before Reload.
  WriteText(File("live-cert.pem"), ReadText(File("server2.pem")));
  WriteText(File("live-key.pem"), ReadText(File("server2.key")));
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  ASSERT_TRUE(Stats(Channel(Ssl("ca.pem")), &cn).ok());
  EXPECT_EQ(cn, "rbmrec test server");

  ASSERT_TRUE(tls_->Reload().ok());
  EXPECT_TRUE(absl::StrContains(tls_->summary(), "serial=03EA"))  // 1002
      << tls_->summary();
  bool switched = false;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!switched && std::chrono::steady_clock::now() < until) {
    ASSERT_TRUE(Stats(Channel(Ssl("ca.pem")), &cn).ok());
    switched = cn == "rbmrec test server2";
    if (!switched) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(switched) << "new connections still see " << cn;

  // The old connection and its in-flight stream carry on.
  ASSERT_TRUE(writer->Write(batch("u2")));
  writer->WritesDone();
  grpc::Status finished = writer->Finish();
  ASSERT_TRUE(finished.ok()) << finished.error_message();
  EXPECT_EQ(added.batches(), 2);
  ASSERT_TRUE(Stats(old_channel, &cn).ok());
  EXPECT_EQ(cn, "rbmrec test server");
}

TEST_F(TlsTest, ABadFileAtReloadKeepsTheCertificateInUse) {
  Start(/*mtls=*/false);
  WriteText(File("live-cert.pem"), "not a certificate\n");
  absl::Status s = tls_->Reload();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(
      s.message(), absl::StrCat("--tls-cert ", File("live-cert.pem"))))
      << s.message();
  // A key that does not match the certificate.
  WriteText(File("live-cert.pem"), ReadText(File("server.pem")));
  WriteText(File("live-key.pem"), ReadText(File("server2.key")));
  s = tls_->Reload();
  EXPECT_TRUE(absl::StrContains(s.message(), "does not match")) << s.message();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  std::string cn;
  grpc::Status ok = Stats(Channel(Ssl("ca.pem")), &cn);
  ASSERT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_EQ(cn, "rbmrec test server");
}

TEST_F(TlsTest, StartUpChecksNameTheBadFile) {
  TlsFiles files;
  files.cert = File("server.pem");
  files.key = File("server.key");
  EXPECT_TRUE(LoadTlsMaterial(files).ok());

  TlsFiles missing = files;
  missing.cert = File("no-such.pem");
  absl::StatusOr<TlsMaterial> m = LoadTlsMaterial(missing);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(m.status().message(),
                                absl::StrCat("--tls-cert ", missing.cert)));

  TlsFiles key_is_cert = files;
  key_is_cert.key = File("server.pem");
  m = LoadTlsMaterial(key_is_cert);
  EXPECT_TRUE(absl::StrContains(m.status().message(),
                                absl::StrCat("--tls-key ", key_is_cert.key)))
      << m.status();

  TlsFiles mismatch = files;
  mismatch.key = File("client.key");
  m = LoadTlsMaterial(mismatch);
  EXPECT_TRUE(absl::StrContains(m.status().message(), "does not match"))
      << m.status();

  TlsFiles bad_ca = files;
  bad_ca.client_ca = File("server.key");
  m = LoadTlsMaterial(bad_ca);
  EXPECT_TRUE(absl::StrContains(
      m.status().message(), absl::StrCat("--tls-client-ca ", bad_ca.client_ca)))
      << m.status();
}

}  // namespace
}  // namespace rbmrec::server
