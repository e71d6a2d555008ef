// TLS and token settings of the client (client/security.h) and the CLI with
// them: precedence of flags over environment, file errors, the token sent as
// metadata (never on health, never printed), hints for UNAUTHENTICATED,
// PERMISSION_DENIED and failed TLS handshakes. The TLS cases run an
// in-process fake server with certificates made by docker/make-certs.sh.

#include "client/security.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/commands.h"
#include "gmock/gmock.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "proto/health.grpc.pb.h"
#include "proto/rbmrec.grpc.pb.h"

namespace rbmrec::client {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr char kAdminToken[] = "rbmrec_ADMINsecretADMINsecretADMINsecret0001";
constexpr char kReaderToken[] = "rbmrec_READERsecretREADERsecretREADERsecr02";
constexpr char kUnknownToken[] = "rbmrec_UNKNOWNsecretUNKNOWNsecretUNKNOWN03";

std::string TempPath(const std::string& name) {
  return absl::StrCat(::testing::TempDir(), "/sec_", getpid(), "_", name);
}

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = TempPath(name);
  std::ofstream(path) << text;
  return path;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// ---------------------------------------------------------------------------
// LoadSecurity without TLS files

TEST(LoadSecurityTest, NothingSetMeansNoTlsAndNoToken) {
  absl::StatusOr<ClientSecurity> s = LoadSecurity({}, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE(s->tls);
  EXPECT_EQ(s->token, "");
}

TEST(LoadSecurityTest, TokenFlagWinsOverEnvironment) {
  const std::string file =
      WriteFile("flag.token", "  tok_from_file \nsecond\n");
  SecuritySettings flags;
  flags.token_file = file;
  SecuritySettings env;
  env.token = "tok_from_env";
  absl::StatusOr<ClientSecurity> s = LoadSecurity(flags, env);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->token, "tok_from_file");  // first line, trimmed
  EXPECT_EQ(s->token_source, absl::StrCat("--token-file ", file));

  s = LoadSecurity({}, env);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->token, "tok_from_env");
  EXPECT_EQ(s->token_source, "$RBMREC_TOKEN");

  SecuritySettings env_file;
  env_file.token_file = file;
  s = LoadSecurity({}, env_file);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->token, "tok_from_file");
  EXPECT_EQ(s->token_source, absl::StrCat("$RBMREC_TOKEN_FILE (", file, ")"));

  // An empty flag means "no token", whatever the environment says.
  flags.token_file = "";
  s = LoadSecurity(flags, env);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->token, "");
  std::remove(file.c_str());
}

TEST(LoadSecurityTest, BothTokenVariablesIsAnError) {
  SecuritySettings env;
  env.token = "a";
  env.token_file = "/nonexistent";
  absl::StatusOr<ClientSecurity> s = LoadSecurity({}, env);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()),
              AllOf(HasSubstr("RBMREC_TOKEN"), HasSubstr("RBMREC_TOKEN_FILE")));
}

TEST(LoadSecurityTest, TokenFileErrorsNameTheFileButNeverTheToken) {
  SecuritySettings flags;
  flags.token_file = TempPath("missing.token");
  absl::StatusOr<ClientSecurity> s = LoadSecurity(flags, {});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.status().message()),
              AllOf(HasSubstr("--token-file"), HasSubstr(*flags.token_file),
                    HasSubstr("No such file")));

  flags.token_file = WriteFile("empty.token", "\n\nsecond line\n");
  s = LoadSecurity(flags, {});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()),
              AllOf(HasSubstr(*flags.token_file), HasSubstr("empty")));
  std::remove(flags.token_file->c_str());

  // A token with a character gRPC cannot send: the error points at it
  // without showing the token.
  flags.token_file = WriteFile("bad.token", "secret\x01part\n");
  s = LoadSecurity(flags, {});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()),
              AllOf(HasSubstr(*flags.token_file), HasSubstr("printable ASCII"),
                    Not(HasSubstr("secret")), Not(HasSubstr("part"))));
  std::remove(flags.token_file->c_str());

  SecuritySettings env;
  env.token = "has space";
  s = LoadSecurity({}, env);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()),
              AllOf(HasSubstr("$RBMREC_TOKEN"), Not(HasSubstr("has"))));
}

TEST(LoadSecurityTest, TlsSettingsMustFitTogether) {
  SecuritySettings flags;
  flags.tls_cert = "client.pem";
  absl::StatusOr<ClientSecurity> s = LoadSecurity(flags, {});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()),
              AllOf(StartsWith("--tls-cert needs --tls-key")));

  flags.tls_key = "client.key";
  s = LoadSecurity(flags, {});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()),
              AllOf(StartsWith("--tls-cert"), HasSubstr("--tls-ca")));

  SecuritySettings env;
  env.tls_server_name = "rbmrec";
  s = LoadSecurity({}, env);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()),
              StartsWith("$RBMREC_TLS_SERVER_NAME"));

  // An empty flag switches its variable off: the server's own
  // RBMREC_TLS_CERT/KEY in the image are not taken as a client certificate.
  env = {};
  env.tls_cert = "/etc/rbmrec/tls/server.pem";
  env.tls_key = "/etc/rbmrec/tls/server.key";
  flags = {};
  flags.tls_cert = "";
  flags.tls_key = "";
  s = LoadSecurity(flags, env);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE(s->tls);
}

TEST(LoadSecurityTest, CaFileErrorsNameTheFlagOrVariableAndFile) {
  SecuritySettings env;
  env.tls_ca = TempPath("missing-ca.pem");
  absl::StatusOr<ClientSecurity> s = LoadSecurity({}, env);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()),
              StartsWith(absl::StrCat("$RBMREC_TLS_CA (", *env.tls_ca,
                                      "): cannot read")));

  SecuritySettings flags;
  flags.tls_ca = WriteFile("not-a-ca.pem", "hello\n");
  s = LoadSecurity(flags, env);  // the flag wins over the variable
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()),
              AllOf(StartsWith(absl::StrCat("--tls-ca ", *flags.tls_ca)),
                    HasSubstr("no PEM certificate")));
  std::remove(flags.tls_ca->c_str());
}

TEST(SecurityTest, LoopbackTargets) {
  for (const char* t :
       {"127.0.0.1:50051", "localhost:1", "[::1]:50051", "unix:/tmp/s",
        "dns:///localhost:5", "127.1.2.3:9", "LOCALHOST:1"}) {
    EXPECT_TRUE(IsLoopbackTarget(t)) << t;
  }
  for (const char* t : {"10.0.0.1:50051", "rbmrec:50051", "[2001:db8::1]:1",
                        "example.org:443", "dns:///example.org:1"}) {
    EXPECT_FALSE(IsLoopbackTarget(t)) << t;
  }
}

TEST(SecurityTest, LoopbackIsDecidedByParsingEveryAddress) {
  for (const char* t :
       {"127.0.0.1", "127.0.0.1:50051", "127.255.0.9:1", "[::1]:50051", "[::1]",
        "::1", "localhost", "localhost:1", "LocalHost:1", "dns:///localhost:5",
        "dns:127.0.0.1:5", "ipv4:127.0.0.1:1,127.0.0.2:2",
        "ipv6:[::1]:1,[::1]:2", "[::ffff:127.0.0.1]:5", "unix:/tmp/s",
        "unix-abstract:x"}) {
    EXPECT_TRUE(IsLoopbackTarget(t)) << t;
  }
  // Names that only start like a loopback address, lists with one address
  // off loopback, and what does not parse as an address.
  for (const char* t : {"127.evil.example:50051",
                        "127.evil.example",
                        "127.0.0.1.evil.example:1",
                        "localhost.evil.example:1",
                        "evil-localhost:1",
                        "dns:///127.evil.example:1",
                        "ipv4:127.0.0.1:1,10.0.0.1:2",
                        "ipv4:10.0.0.1:2,127.0.0.1:1",
                        "ipv6:[::1]:1,[2001:db8::1]:1",
                        "ipv4:127.0.0.1:1,",
                        "127.1:1",
                        "0x7f000001:1",
                        "128.0.0.1:1",
                        "[::2]:1",
                        "[::1]x:1",
                        "[::1:1",
                        ":50051",
                        "",
                        "dns://192.0.2.53/localhost:1",
                        "localhost:1,evil.example:2",
                        "[::ffff:10.0.0.1]:5"}) {
    EXPECT_FALSE(IsLoopbackTarget(t)) << t;
  }
}

TEST(SecurityTest, WarnsForEveryAddressOffLoopback) {
  ClientSecurity s;
  s.token = kAdminToken;
  s.token_source = "$RBMREC_TOKEN";
  EXPECT_THAT(TokenOverPlaintextWarning("127.evil.example:50051", s),
              StartsWith("warning: sending the token from $RBMREC_TOKEN "
                         "without TLS to 127.evil.example:50051, which is "
                         "not a loopback address"));
  EXPECT_THAT(TokenOverPlaintextWarning("localhost.evil.example:1", s),
              HasSubstr("not a loopback address"));
  EXPECT_THAT(
      TokenOverPlaintextWarning("ipv4:127.0.0.1:1,10.1.2.3:2", s),
      StartsWith("warning: sending the token from $RBMREC_TOKEN without TLS "
                 "to ipv4:127.0.0.1:1,10.1.2.3:2, where 10.1.2.3:2 is not a "
                 "loopback address"));
  EXPECT_EQ(TokenOverPlaintextWarning("ipv4:127.0.0.1:1,127.0.0.2:2", s), "");
  EXPECT_EQ(TokenOverPlaintextWarning("[::1]:1", s), "");
  EXPECT_EQ(TokenOverPlaintextWarning("localhost:1", s), "");
}

TEST(SecurityTest, NoTlsHintWhenAnEstablishedConnectionDrops) {
  // A server that dies mid-call: the connection was up, so TLS settings are
  // not the problem (with or without TLS).
  ClientSecurity plain;
  ClientSecurity tls;
  tls.tls = true;
  tls.ca_source = "--tls-ca ca.pem";
  for (const char* message :
       {"rpc Train: Socket closed", "rpc Train: Connection reset by peer",
        "rpc Train: Broken pipe", "rpc Train: GOAWAY received",
        "rpc Train: Connection reset by peer (ssl)"}) {
    EXPECT_EQ(SecurityHint(absl::UnavailableError(message), plain), "")
        << message;
    EXPECT_EQ(SecurityHint(absl::UnavailableError(message), tls), "")
        << message;
  }
  // The same words while connecting do point at TLS.
  EXPECT_THAT(
      SecurityHint(absl::UnavailableError(
                       "rpc Health.Check: failed to connect to all addresses; "
                       "last error: UNAVAILABLE: ipv4:127.0.0.1:5: Socket "
                       "closed"),
                   plain),
      HasSubstr("give --tls-ca FILE"));
  EXPECT_THAT(
      SecurityHint(absl::UnavailableError(
                       "rpc Health.Check: failed to connect to all addresses; "
                       "last error: UNAVAILABLE: ipv4:127.0.0.1:5: Socket "
                       "closed"),
                   tls),
      HasSubstr("during the TLS handshake"));
}

TEST(SecurityTest, WarnsBeforeSendingATokenInTheClearOffLoopback) {
  ClientSecurity s;
  s.token = kAdminToken;
  s.token_source = "$RBMREC_TOKEN";
  const std::string w = TokenOverPlaintextWarning("10.1.2.3:50051", s);
  EXPECT_THAT(w,
              AllOf(HasSubstr("without TLS"), HasSubstr("--tls-ca"),
                    HasSubstr("$RBMREC_TOKEN"), Not(HasSubstr(kAdminToken))));
  EXPECT_EQ(TokenOverPlaintextWarning("127.0.0.1:50051", s), "");
  s.tls = true;
  EXPECT_EQ(TokenOverPlaintextWarning("10.1.2.3:50051", s), "");
}

TEST(SecurityTest, HintsForTlsFailures) {
  ClientSecurity tls;
  tls.tls = true;
  tls.ca_source = "--tls-ca other-ca.pem";
  EXPECT_THAT(SecurityHint(
                  absl::UnavailableError(
                      "rpc GetStats: failed to connect to all addresses; last "
                      "error: UNKNOWN: ipv4:127.0.0.1:1: Ssl handshake failed: "
                      "SSL_ERROR_SSL: error:1000007d:SSL "
                      "routines:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED"),
                  tls),
              AllOf(HasSubstr("not signed by --tls-ca other-ca.pem")));
  EXPECT_THAT(
      SecurityHint(absl::UnavailableError(
                       "rpc Health.Check: failed to connect to all addresses; "
                       "last error: UNKNOWN: ipv4:127.0.0.1:1: Custom "
                       "verification check failed with error: "
                       "UNAUTHENTICATED: Hostname Verification Check failed."),
                   tls),
      HasSubstr("does not name the host of --server"));
  EXPECT_EQ(
      SecurityHint(absl::UnavailableError("rpc X: connection refused"), tls),
      "");
  EXPECT_EQ(SecurityHint(absl::NotFoundError("rpc X: no such user"), tls), "");
}

// ---------------------------------------------------------------------------
// The CLI against a fake server that checks tokens like rbmrec-server.

// Knows kAdminToken (admin) and kReaderToken (read); records the
// authorization metadata of every call.
class AuthFake final : public v1::Rbmrec::Service {
 public:
  grpc::Status GetStats(grpc::ServerContext* context,
                        const v1::GetStatsRequest*,
                        v1::GetStatsResponse* response) override {
    if (grpc::Status s = Check(context, "read"); !s.ok()) return s;
    response->set_users(3);
    return grpc::Status::OK;
  }
  grpc::Status Train(grpc::ServerContext* context, const v1::TrainRequest*,
                     grpc::ServerWriter<v1::TrainProgress>* writer) override {
    if (grpc::Status s = Check(context, "admin"); !s.ok()) return s;
    v1::TrainProgress p;
    p.set_state(v1::TrainProgress::SUCCEEDED);
    p.set_model_version(2);
    writer->Write(p);
    return grpc::Status::OK;
  }

  std::vector<std::string> Seen() {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }

 private:
  grpc::Status Check(grpc::ServerContext* context, const std::string& need) {
    const auto& md = context->client_metadata();
    auto it = md.find("authorization");
    std::string value;
    if (it != md.end()) value.assign(it->second.data(), it->second.size());
    {
      std::lock_guard<std::mutex> lock(mu_);
      seen_.push_back(value);
    }
    std::string role;
    if (value == absl::StrCat("Bearer ", kAdminToken)) role = "admin";
    if (value == absl::StrCat("Bearer ", kReaderToken)) role = "read";
    if (role.empty()) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "missing or unknown token");
    }
    if (need == "admin" && role != "admin") {
      return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                          "Train needs the admin role; client 'bob' has read");
    }
    return grpc::Status::OK;
  }

  std::mutex mu_;
  std::vector<std::string> seen_;
};

// A health service that records the authorization metadata it gets.
class HealthFake final : public grpc::health::v1::Health::Service {
 public:
  grpc::Status Check(grpc::ServerContext* context,
                     const grpc::health::v1::HealthCheckRequest*,
                     grpc::health::v1::HealthCheckResponse* response) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++calls_;
    if (context->client_metadata().count("authorization") > 0) {
      ++with_token_;
    }
    response->set_status(grpc::health::v1::HealthCheckResponse::SERVING);
    return grpc::Status::OK;
  }
  int calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }
  int with_token() {
    std::lock_guard<std::mutex> lock(mu_);
    return with_token_;
  }

 private:
  std::mutex mu_;
  int calls_ = 0;
  int with_token_ = 0;
};

struct CliResult {
  int code = 0;
  std::string out;
  std::string err;
};

CliResult RunWith(const std::vector<std::string>& args,
                  const SecuritySettings& env_security) {
  Environment env;
  env.security_env = env_security;
  std::ostringstream out;
  std::ostringstream err;
  const int code = RunCli(args, env, out, err);
  return {code, out.str(), err.str()};
}

class FakeServer {
 public:
  // Plain when `creds` is null.
  explicit FakeServer(std::shared_ptr<grpc::ServerCredentials> creds) {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0",
                             creds ? creds : grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(&service);
    builder.RegisterService(&health);
    server_ = builder.BuildAndStart();
    address = absl::StrCat("127.0.0.1:", port);
  }
  ~FakeServer() {
    if (server_) server_->Shutdown();
  }
  bool ok() const { return server_ != nullptr; }

  AuthFake service;
  HealthFake health;
  std::string address;

 private:
  std::unique_ptr<grpc::Server> server_;
};

class CliTokenTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(server_.ok()); }

  CliResult Run(std::vector<std::string> args,
                const SecuritySettings& env = {}) {
    args.insert(args.begin(), {"--server", server_.address, "--timeout", "5"});
    return RunWith(args, env);
  }

  FakeServer server_{nullptr};
};

TEST_F(CliTokenTest, SendsTheTokenOnEveryCallButHealth) {
  SecuritySettings env;
  env.token = kAdminToken;
  CliResult r = Run({"stats"}, env);
  EXPECT_EQ(r.code, kExitOk) << r.err;
  r = Run({"train"}, env);
  EXPECT_EQ(r.code, kExitOk) << r.err;
  r = Run({"health"}, env);
  EXPECT_EQ(r.code, kExitOk) << r.err;
  const std::string bearer = absl::StrCat("Bearer ", kAdminToken);
  EXPECT_THAT(server_.service.Seen(), ::testing::ElementsAre(bearer, bearer));
  EXPECT_EQ(server_.health.calls(), 1);
  EXPECT_EQ(server_.health.with_token(), 0);
}

TEST_F(CliTokenTest, TokenFileFlagWinsOverTheEnvironment) {
  const std::string file =
      WriteFile("reader.token", absl::StrCat(kReaderToken, "\n"));
  SecuritySettings env;
  env.token = kAdminToken;
  CliResult r = Run({"--token-file", file, "stats"}, env);
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(server_.service.Seen(),
              ::testing::ElementsAre(absl::StrCat("Bearer ", kReaderToken)));
  std::remove(file.c_str());
}

TEST_F(CliTokenTest, UnauthenticatedPrintsTheMessageAndAHint) {
  CliResult r = Run({"stats"});
  EXPECT_EQ(r.code, kExitRpc);
  EXPECT_EQ(r.err,
            "error: UNAUTHENTICATED: rpc GetStats: missing or unknown token\n"
            "hint: the server needs a token: give --token-file FILE or set "
            "RBMREC_TOKEN (the server's admin makes one with 'rbmrec-server "
            "token new NAME ROLE')\n");

  SecuritySettings env;
  env.token = kUnknownToken;
  r = Run({"stats"}, env);
  EXPECT_EQ(r.code, kExitRpc);
  EXPECT_THAT(r.err,
              AllOf(HasSubstr("error: UNAUTHENTICATED: rpc GetStats: missing "
                              "or unknown token\n"),
                    HasSubstr("hint: the server does not accept the token "
                              "from $RBMREC_TOKEN"),
                    Not(HasSubstr(kUnknownToken))));
}

TEST_F(CliTokenTest, PermissionDeniedPrintsTheRoleNeededAndAHint) {
  const std::string file =
      WriteFile("reader2.token", absl::StrCat(kReaderToken, "\n"));
  CliResult r = Run({"--token-file", file, "train"});
  EXPECT_EQ(r.code, kExitRpc);
  EXPECT_THAT(
      r.err,
      AllOf(StartsWith("error: PERMISSION_DENIED: rpc Train: Train needs the "
                       "admin role; client 'bob' has read\n"),
            HasSubstr(absl::StrCat("hint: the token from --token-file ", file,
                                   " has too low a role"))));
  std::remove(file.c_str());
}

TEST_F(CliTokenTest, TheTokenIsNeverPrinted) {
  // Every output path of a failing and a succeeding command, text and JSON.
  for (const char* token : {kAdminToken, kReaderToken, kUnknownToken}) {
    SecuritySettings env;
    env.token = token;
    for (const std::vector<std::string>& args :
         std::vector<std::vector<std::string>>{
             {"stats"},
             {"--json", "stats"},
             {"train"},
             {"--json", "train"},
             {"health"},
             {"--server", "10.255.255.1:9", "--timeout", "0.2", "stats"}}) {
      const CliResult r = Run(args, env);
      EXPECT_THAT(r.out, Not(HasSubstr(token)));
      EXPECT_THAT(r.err, Not(HasSubstr(token)));
      EXPECT_THAT(r.err, Not(HasSubstr("secret")));
    }
  }
}

TEST_F(CliTokenTest, UnreadableTokenFileExitsOneNamingTheFile) {
  const std::string missing = TempPath("nope.token");
  CliResult r = Run({"--token-file", missing, "stats"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, AllOf(StartsWith("error: NOT_FOUND: --token-file "),
                           HasSubstr(missing)));
  EXPECT_TRUE(server_.service.Seen().empty());  // nothing was sent

  SecuritySettings env;
  env.token_file = missing;
  r = Run({"--json", "stats"}, env);
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.out, HasSubstr("RBMREC_TOKEN_FILE"));
}

TEST(BalancedTarget, UriTargetsSpreadCallsOverEveryServer) {
  EXPECT_TRUE(IsBalancedTarget("dns:///rbmrec:50051"));
  EXPECT_TRUE(IsBalancedTarget("ipv4:10.0.0.1:1,10.0.0.2:1"));
  EXPECT_TRUE(IsBalancedTarget("ipv6:[::1]:1"));
  EXPECT_FALSE(IsBalancedTarget("localhost:50051"));
  EXPECT_FALSE(IsBalancedTarget("unix:/tmp/s"));
  FakeServer a(nullptr), b(nullptr);
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string target = absl::StrCat("ipv4:", a.address, ",", b.address);
  std::shared_ptr<grpc::Channel> channel =
      CreateSecureChannel(target, ClientSecurity{}, grpc::ChannelArguments());
  auto stub = grpc::health::v1::Health::NewStub(channel);
  auto check = [&] {
    grpc::ClientContext context;
    context.set_wait_for_ready(true);
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(10));
    grpc::health::v1::HealthCheckRequest request;
    grpc::health::v1::HealthCheckResponse response;
    return stub->Check(&context, request, &response).ok();
  };
  // Calls go to whichever server is ready while the other connects (on a
  // loaded machine that can be many): call until both have had one, at
  // most 200 calls.
  for (int i = 0; i < 200 && (a.health.calls() == 0 || b.health.calls() == 0);
       ++i) {
    ASSERT_TRUE(check());
  }
  ASSERT_GT(a.health.calls(), 0);
  ASSERT_GT(b.health.calls(), 0);
  // Both ready: round_robin alternates over them.
  const int a0 = a.health.calls(), b0 = b.health.calls();
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(check());
  EXPECT_GE(a.health.calls() - a0, 5);
  EXPECT_GE(b.health.calls() - b0, 5);
  EXPECT_EQ(a.health.calls() - a0 + b.health.calls() - b0, 20);
  // A plain HOST:PORT goes to that one server.
  std::shared_ptr<grpc::Channel> plain = CreateSecureChannel(
      a.address, ClientSecurity{}, grpc::ChannelArguments());
  auto one = grpc::health::v1::Health::NewStub(plain);
  const int before = a.health.calls();
  for (int i = 0; i < 4; ++i) {
    grpc::ClientContext context;
    grpc::health::v1::HealthCheckRequest request;
    grpc::health::v1::HealthCheckResponse response;
    ASSERT_TRUE(one->Check(&context, request, &response).ok());
  }
  EXPECT_EQ(a.health.calls(), before + 4);
}

TEST_F(CliTokenTest, TokenInTheClearOffLoopbackWarns) {
  SecuritySettings env;
  env.token = kAdminToken;
  const CliResult r =
      RunWith({"--server", "192.0.2.1:9", "--timeout", "0.2", "stats"}, env);
  EXPECT_EQ(r.code, kExitRpc);
  EXPECT_THAT(r.err, AllOf(StartsWith("warning: sending the token from "
                                      "$RBMREC_TOKEN without TLS to "
                                      "192.0.2.1:9"),
                           Not(HasSubstr(kAdminToken))));
}

// ---------------------------------------------------------------------------
// A connection that drops mid-call (the server died): no TLS hint.

// A TCP proxy to 127.0.0.1:`upstream_port` whose connections Cut() closes at
// once, as the kernel does when a server process dies.
class CuttableProxy {
 public:
  explicit CuttableProxy(int upstream_port) : upstream_port_(upstream_port) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (listen_fd_ < 0 ||
        ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        ::listen(listen_fd_, 16) != 0 ||
        ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) !=
            0) {
      return;
    }
    address = absl::StrCat("127.0.0.1:", ntohs(addr.sin_port));
    accept_thread_ = std::thread([this] { AcceptLoop(); });
  }
  ~CuttableProxy() {
    Cut();
    if (accept_thread_.joinable()) accept_thread_.join();
    // No pump starts after the accept loop ended.
    for (std::thread& t : pumps_) t.join();
    std::lock_guard<std::mutex> lock(mu_);
    for (int fd : fds_) ::close(fd);
    if (listen_fd_ >= 0) ::close(listen_fd_);
  }
  bool ok() const { return !address.empty(); }

  // Closes every connection and stops accepting new ones.
  void Cut() {
    std::lock_guard<std::mutex> lock(mu_);
    cut_ = true;
    if (listen_fd_ >= 0) ::shutdown(listen_fd_, SHUT_RDWR);
    for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
  }

  std::string address;

 private:
  void AcceptLoop() {
    while (true) {
      const int client = ::accept(listen_fd_, nullptr, nullptr);
      if (client < 0) return;
      const int server = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      addr.sin_port = htons(static_cast<uint16_t>(upstream_port_));
      std::lock_guard<std::mutex> lock(mu_);
      fds_.push_back(client);
      fds_.push_back(server);
      if (cut_ || ::connect(server, reinterpret_cast<sockaddr*>(&addr),
                            sizeof(addr)) != 0) {
        ::shutdown(client, SHUT_RDWR);
        continue;
      }
      pumps_.emplace_back([client, server] { Pump(client, server); });
      pumps_.emplace_back([client, server] { Pump(server, client); });
    }
  }
  static void Pump(int from, int to) {
    char buf[16384];
    while (true) {
      const ssize_t n = ::read(from, buf, sizeof(buf));
      if (n <= 0) break;
      if (::send(to, buf, static_cast<size_t>(n), MSG_NOSIGNAL) != n) break;
    }
    ::shutdown(to, SHUT_RDWR);
  }

  const int upstream_port_;
  int listen_fd_ = -1;
  std::mutex mu_;
  bool cut_ = false;
  std::vector<int> fds_;
  std::thread accept_thread_;
  std::vector<std::thread> pumps_;  // guarded by mu_ while accepting
};

// Train sends one RUNNING message, then waits (as a long job would) until
// the call ends.
class SlowTrainFake final : public v1::Rbmrec::Service {
 public:
  grpc::Status Train(grpc::ServerContext* context, const v1::TrainRequest*,
                     grpc::ServerWriter<v1::TrainProgress>* writer) override {
    v1::TrainProgress p;
    p.set_state(v1::TrainProgress::RUNNING);
    p.set_epoch(1);
    p.set_max_epochs(100);
    writer->Write(p);
    {
      std::lock_guard<std::mutex> lock(mu_);
      running_ = true;
    }
    cv_.notify_all();
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!context->IsCancelled() &&
           std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return grpc::Status::CANCELLED;
  }
  // Waits until a Train call has sent its first message.
  bool WaitRunning() {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(20),
                        [this] { return running_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool running_ = false;
};

// Runs `train` through a proxy that is cut once the job runs; returns the
// CLI's result.
CliResult TrainCutMidway(std::shared_ptr<grpc::ServerCredentials> creds,
                         const std::vector<std::string>& flags) {
  SlowTrainFake service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(
      "127.0.0.1:0", creds ? creds : grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  EXPECT_NE(server, nullptr);
  if (server == nullptr) return {};
  CuttableProxy proxy(port);
  EXPECT_TRUE(proxy.ok());
  std::vector<std::string> args = {"--server", proxy.address, "--timeout", "5"};
  args.insert(args.end(), flags.begin(), flags.end());
  args.push_back("train");
  CliResult result;
  std::thread cli([&] { result = RunWith(args, {}); });
  EXPECT_TRUE(service.WaitRunning());
  proxy.Cut();
  cli.join();
  server->Shutdown(std::chrono::system_clock::now());
  return result;
}

TEST(DroppedConnectionTest, ServerDyingMidTrainGivesNoTlsHint) {
  const CliResult r = TrainCutMidway(nullptr, {});
  EXPECT_EQ(r.code, kExitRpc);
  EXPECT_THAT(r.err, StartsWith("error: UNAVAILABLE: rpc Train: ")) << r.err;
  EXPECT_THAT(r.err, Not(HasSubstr("--tls-ca"))) << r.err;
  EXPECT_THAT(r.err, Not(HasSubstr("hint:"))) << r.err;
}

// ---------------------------------------------------------------------------
// TLS, with certificates from docker/make-certs.sh.

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(TempPath("certs"));
    other_ = new std::string(TempPath("other-certs"));
    for (const std::string* d : {dir_, other_}) {
      const std::string cmd =
          absl::StrCat("bash " RBMREC_SOURCE_DIR "/docker/make-certs.sh '", *d,
                       "' >/dev/null 2>&1");
      made_ = made_ && std::system(cmd.c_str()) == 0;
    }
  }
  static void TearDownTestSuite() {
    for (std::string* d : {dir_, other_}) {
      std::system(absl::StrCat("rm -rf '", *d, "'").c_str());
      delete d;
    }
  }
  void SetUp() override {
    if (!made_) GTEST_SKIP() << "docker/make-certs.sh failed (no openssl?)";
  }

  static std::string File(const std::string& name) {
    return absl::StrCat(*dir_, "/", name);
  }
  static std::string OtherFile(const std::string& name) {
    return absl::StrCat(*other_, "/", name);
  }
  // TLS server credentials; with mTLS the client certificate is required
  // and verified against the CA.
  static std::shared_ptr<grpc::ServerCredentials> ServerCreds(bool mtls) {
    grpc::SslServerCredentialsOptions options(
        mtls ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
             : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
    options.pem_key_cert_pairs.push_back(
        {ReadFile(File("server.key")), ReadFile(File("server.pem"))});
    if (mtls) options.pem_root_certs = ReadFile(File("ca.pem"));
    return grpc::SslServerCredentials(options);
  }

  static std::string* dir_;
  static std::string* other_;
  static bool made_;
};
std::string* TlsTest::dir_ = nullptr;
std::string* TlsTest::other_ = nullptr;
bool TlsTest::made_ = true;

TEST_F(TlsTest, WithTheCaWorksAndTheTokenIsSent) {
  FakeServer server(ServerCreds(false));
  ASSERT_TRUE(server.ok());
  SecuritySettings env;
  env.token = kAdminToken;
  CliResult r = RunWith(
      {"--server", server.address, "--tls-ca", File("ca.pem"), "stats"}, env);
  EXPECT_EQ(r.code, kExitOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("users"));
  // The CA from the environment, and the health check without a token.
  env.tls_ca = File("ca.pem");
  r = RunWith({"--server", server.address, "health"}, env);
  EXPECT_EQ(r.code, kExitOk) << r.err;
  // Server name override: the certificate names "rbmrec" too.
  r = RunWith(
      {"--server", server.address, "--tls-server-name", "rbmrec", "health"},
      env);
  EXPECT_EQ(r.code, kExitOk) << r.err;
}

TEST_F(TlsTest, FailuresExplainWhatToChange) {
  FakeServer server(ServerCreds(false));
  ASSERT_TRUE(server.ok());
  // A CA that did not sign the server's certificate.
  CliResult r = RunWith({"--server", server.address, "--timeout", "5",
                         "--tls-ca", OtherFile("ca.pem"), "health"},
                        {});
  EXPECT_EQ(r.code, kExitRpc);
  EXPECT_THAT(r.err, AllOf(StartsWith("error: UNAVAILABLE: rpc Health.Check"),
                           HasSubstr(absl::StrCat(
                               "hint: the server's certificate is not signed "
                               "by --tls-ca ",
                               OtherFile("ca.pem")))))
      << r.err;
  // A name the certificate does not hold.
  r = RunWith(
      {"--server", server.address, "--timeout", "5", "--tls-ca", File("ca.pem"),
       "--tls-server-name", "elsewhere.example", "health"},
      {});
  EXPECT_EQ(r.code, kExitRpc);
  EXPECT_THAT(r.err, HasSubstr("hint: the server's certificate does not name"))
      << r.err;
  // No TLS against a TLS server.
  r = RunWith({"--server", server.address, "--timeout", "5", "health"}, {});
  EXPECT_EQ(r.code, kExitRpc);
  EXPECT_THAT(r.err, HasSubstr("hint: if the server uses TLS, give --tls-ca"))
      << r.err;
}

TEST_F(TlsTest, TlsAgainstAPlainServerSaysSo) {
  FakeServer server(nullptr);
  ASSERT_TRUE(server.ok());
  const CliResult r = RunWith({"--server", server.address, "--timeout", "5",
                               "--tls-ca", File("ca.pem"), "health"},
                              {});
  EXPECT_EQ(r.code, kExitRpc);
  EXPECT_THAT(r.err, HasSubstr("hint: the TLS handshake failed: the server "
                               "may not use TLS"))
      << r.err;
}

TEST_F(TlsTest, ServerDyingMidTrainGivesNoHandshakeHint) {
  const CliResult r =
      TrainCutMidway(ServerCreds(false), {"--tls-ca", File("ca.pem")});
  EXPECT_EQ(r.code, kExitRpc);
  EXPECT_THAT(r.err, StartsWith("error: UNAVAILABLE: rpc Train: ")) << r.err;
  EXPECT_THAT(r.err, Not(HasSubstr("hint:"))) << r.err;
}

TEST_F(TlsTest, MutualTlsNeedsTheClientCertificate) {
  FakeServer server(ServerCreds(true));
  ASSERT_TRUE(server.ok());
  CliResult r = RunWith({"--server", server.address, "--timeout", "5",
                         "--tls-ca", File("ca.pem"), "health"},
                        {});
  EXPECT_EQ(r.code, kExitRpc);
  EXPECT_THAT(r.err, HasSubstr("the server requires a client "
                               "certificate: give --tls-cert FILE --tls-key "
                               "FILE"))
      << r.err;

  SecuritySettings env;  // the client certificate from the environment
  env.tls_cert = File("client.pem");
  env.tls_key = File("client.key");
  r = RunWith(
      {"--server", server.address, "--tls-ca", File("ca.pem"), "health"}, env);
  EXPECT_EQ(r.code, kExitOk) << r.err;

  // A certificate from another CA is refused.
  r = RunWith({"--server", server.address, "--timeout", "5", "--tls-ca",
               File("ca.pem"), "--tls-cert", OtherFile("client.pem"),
               "--tls-key", OtherFile("client.key"), "health"},
              {});
  EXPECT_EQ(r.code, kExitRpc);
  EXPECT_THAT(r.err, HasSubstr("the server does not accept the client "
                               "certificate"))
      << r.err;
}

}  // namespace
}  // namespace rbmrec::client
