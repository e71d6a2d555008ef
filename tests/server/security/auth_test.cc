// Tokens, roles and the listen policy (server/security/auth.h,
// server/security/listen_policy.h), without a network.

#include "server/security/auth.h"

#include <sys/stat.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
#include "gtest/gtest.h"
#include "proto/rbmrec.pb.h"
#include "server/security/listen_policy.h"

namespace rbmrec::server {
namespace {

std::string Line(const std::string& name, const std::string& role,
                 const std::string& token) {
  return absl::StrCat(name, " ", role, " ", TokenHashText(token), "\n");
}

// Writes a token file with `mode` (whatever the umask).
void WriteTokenFile(const std::string& path, const std::string& text,
                    mode_t mode = 0600) {
  std::ofstream(path, std::ios::trunc) << text;
  ASSERT_EQ(chmod(path.c_str(), mode), 0) << path;
}

TEST(TokenHashTest, IsSha256OfTheTokenBytesInLowercaseHex) {
  // SHA-256("abc"), FIPS 180-2 test vector.
  EXPECT_EQ(TokenHashText("abc"),
            "sha256:"
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(TokenTableTest, ParsesCommentsBlankLinesTabsAndCrlf) {
  const std::string text = absl::StrCat(
      "# clients\n\n", Line("alice", "admin", "t-alice"), "bob\twrite\t",
      TokenHashText("t-bob"), "\r\n", "   # indented comment\n",
      "carol.x@y-z_1 read  ", TokenHashText("t-carol"), "   \n");
  absl::StatusOr<TokenTable> table = TokenTable::Parse(text, "tokens.txt");
  ASSERT_TRUE(table.ok()) << table.status();
  ASSERT_EQ(table->entries().size(), 3u);
  const TokenEntry* bob = table->Find("t-bob");
  ASSERT_NE(bob, nullptr);
  EXPECT_EQ(bob->name, "bob");
  EXPECT_EQ(bob->role, Role::kWrite);
  EXPECT_EQ(table->Find("t-carol")->name, "carol.x@y-z_1");
  EXPECT_EQ(table->Find("t-alice")->role, Role::kAdmin);
}

TEST(TokenTableTest, ParseErrorsNameTheFileAndLine) {
  const std::string good = Line("alice", "admin", "t-alice");
  struct Case {
    std::string bad_line;
    std::string expected;
  };
  const std::string hash = TokenHashText("t-x");
  const std::vector<Case> cases = {
      {"x read", "tokens.txt:3: expected 3 fields"},
      {absl::StrCat("x read ", hash, " extra"), "tokens.txt:3: expected 3"},
      {absl::StrCat("bad/name read ", hash), "tokens.txt:3: NAME must be"},
      {absl::StrCat(std::string(65, 'n'), " read ", hash),
       "tokens.txt:3: NAME must be"},
      {absl::StrCat("x root ", hash), "tokens.txt:3: ROLE of client 'x'"},
      {absl::StrCat("x Read ", hash), "tokens.txt:3: ROLE of client 'x'"},
      {"x read t-x", "tokens.txt:3: the hash of client 'x'"},
      {"x read sha256:abc", "tokens.txt:3: the hash of client 'x'"},
      {absl::StrCat("x read ", absl::AsciiStrToUpper(hash)),
       "tokens.txt:3: the hash of client 'x'"},
      {absl::StrCat("x read md5:", hash.substr(7)),
       "tokens.txt:3: the hash of client 'x'"},
      {Line("alice", "read", "t-other"),
       "tokens.txt:3: client name 'alice' already used on line 2"},
      {Line("dup", "read", "t-alice"),
       "tokens.txt:3: client 'dup' has the same token hash as client "
       "'alice'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.bad_line);
    absl::StatusOr<TokenTable> table = TokenTable::Parse(
        absl::StrCat("# header\n", good, c.bad_line, "\n"), "tokens.txt");
    ASSERT_FALSE(table.ok());
    EXPECT_EQ(table.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StartsWith(table.status().message(), c.expected))
        << table.status().message();
    // The token is never echoed (only its hash could be, and only the
    // line's fields are named).
    EXPECT_FALSE(absl::StrContains(table.status().message(), "t-alice"));
  }
}

TEST(TokenTableTest, FindMatchesOnlyTheExactTokenWhereverItsEntryIs) {
  std::string text;
  for (int i = 0; i < 5; ++i) {
    absl::StrAppend(
        &text, Line(absl::StrCat("c", i), "read", absl::StrCat("token-", i)));
  }
  absl::StatusOr<TokenTable> table = TokenTable::Parse(text, "f");
  ASSERT_TRUE(table.ok()) << table.status();
  // First, middle and last entries: the scan compares every entry and
  // returns the one that matched.
  for (int i : {0, 2, 4}) {
    const TokenEntry* e = table->Find(absl::StrCat("token-", i));
    ASSERT_NE(e, nullptr) << i;
    EXPECT_EQ(e->name, absl::StrCat("c", i));
  }
  for (const char* wrong :
       {"", "token-", "token-00", "token-0 ", "Token-0", "token-5", "oken-0"}) {
    EXPECT_EQ(table->Find(wrong), nullptr) << wrong;
  }
}

TEST(AuthorizerTest, ChecksTheHeaderAndTheRole) {
  absl::StatusOr<TokenTable> table = TokenTable::Parse(
      absl::StrCat(Line("bob", "read", "t-bob"), Line("wen", "write", "t-w")),
      "f");
  ASSERT_TRUE(table.ok());
  Authorizer auth(std::move(*table));
  auto check = [&](const std::string* header, Role needed) {
    return auth.Check(header, "Train", needed, nullptr);
  };
  EXPECT_EQ(check(nullptr, Role::kRead).code(),
            absl::StatusCode::kUnauthenticated);
  for (std::string bad :
       {"", "Bearer", "Bearer ", "Basic t-bob", "t-bob", "Bearer t-bobx",
        "Bearer  ", "Token t-bob", "BEARER  t-bob ", "Bearer  t-bob",
        "Bearer t-bob ", "Bearer\tt-bob", "Bearer t-bob\r\n", " Bearer t-bob",
        "Bearer t-b ob", "Bearer =t-bob", "Bearer t-bob=x", "Bearert-bob"}) {
    absl::Status s = check(&bad, Role::kRead);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << bad;
    EXPECT_TRUE(absl::StartsWith(s.message(), "missing or unknown token"));
  }
  // RFC 7235: the scheme is case-insensitive; one space, then the token.
  for (std::string good :
       {"Bearer t-bob", "bearer t-bob", "BEARER t-bob", "bEaReR t-bob"}) {
    EXPECT_TRUE(check(&good, Role::kRead).ok()) << good;
  }
  std::string bob = "Bearer t-bob";
  Caller caller;
  absl::Status denied = auth.Check(&bob, "Train", Role::kAdmin, &caller);
  EXPECT_EQ(denied.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(denied.message(),
            "Train needs the admin role; client 'bob' has read");
  EXPECT_EQ(caller.name, "bob");
  std::string wen = "Bearer t-w";
  EXPECT_TRUE(check(&wen, Role::kWrite).ok());
  EXPECT_TRUE(check(&wen, Role::kRead).ok());
  EXPECT_EQ(check(&wen, Role::kAdmin).code(),
            absl::StatusCode::kPermissionDenied);
}

TEST(TokenHashTest, Sha256OfLongAndEmptyInputs) {
  // FIPS 180-2 test vectors: the empty string, and the 56-byte message
  // that spills into a second block.
  auto hex = [](const Sha256Digest& d) {
    return absl::BytesToHexString(
        absl::string_view(reinterpret_cast<const char*>(d.data()), d.size()));
  };
  EXPECT_EQ(hex(Sha256("")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(
      hex(Sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
      "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(AuthorizerTest, CheckHeaderReadsOnlyTheViewAndAgreesWithCheck) {
  absl::StatusOr<TokenTable> table =
      TokenTable::Parse(Line("bob", "read", "t-bob"), "f");
  ASSERT_TRUE(table.ok());
  Authorizer auth(std::move(*table));
  // A view into a larger buffer (gRPC's metadata is not NUL-terminated):
  // the bytes after it must not count.
  const std::string buffer = "Bearer t-bobXYZ";
  const absl::string_view exact(buffer.data(), buffer.size() - 3);
  const absl::string_view longer(buffer);
  Caller caller;
  EXPECT_TRUE(auth.CheckHeader(exact, "GetStats", Role::kRead, &caller).ok());
  EXPECT_EQ(caller.name, "bob");
  EXPECT_EQ(auth.CheckHeader(longer, "GetStats", Role::kRead, nullptr).code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(
      auth.CheckHeader(absl::nullopt, "GetStats", Role::kRead, nullptr).code(),
      absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(auth.CheckHeader(exact, "Train", Role::kAdmin, nullptr).message(),
            "Train needs the admin role; client 'bob' has read");
}

TEST(AuthorizerTest, ChecksRunningWhileTheFileIsReloadedSeeOneTableOrTheOther) {
  const std::string path =
      absl::StrCat(::testing::TempDir(), "/auth_test_concurrent_tokens.txt");
  WriteTokenFile(
      path, absl::StrCat(Line("a", "read", "t-a"), Line("b", "admin", "t-b")));
  absl::StatusOr<std::unique_ptr<Authorizer>> auth = Authorizer::Create(path);
  ASSERT_TRUE(auth.ok()) << auth.status();
  // The two files differ only in b's role: every check of b must give
  // either the old answer (admin: OK) or the new one (read: denied).
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0};
  std::vector<std::thread> checkers;
  for (int t = 0; t < 3; ++t) {
    checkers.emplace_back([&] {
      const std::string a = "Bearer t-a", b = "Bearer t-b";
      while (!stop.load()) {
        if (!(*auth)->Check(&a, "GetStats", Role::kRead, nullptr).ok()) ++wrong;
        const absl::StatusCode code =
            (*auth)->Check(&b, "Train", Role::kAdmin, nullptr).code();
        if (code != absl::StatusCode::kOk &&
            code != absl::StatusCode::kPermissionDenied) {
          ++wrong;
        }
      }
    });
  }
  for (int i = 0; i < 50; ++i) {
    WriteTokenFile(
        path, absl::StrCat(Line("a", "read", "t-a"),
                           Line("b", i % 2 == 0 ? "read" : "admin", "t-b")));
    ASSERT_TRUE((*auth)->Reload().ok());
  }
  stop = true;
  for (std::thread& t : checkers) t.join();
  EXPECT_EQ(wrong.load(), 0);
  std::remove(path.c_str());
}

TEST(AuthorizerTest, ReloadKeepsTheOldTableWhenTheNewFileIsBad) {
  const std::string path =
      absl::StrCat(::testing::TempDir(), "/auth_test_tokens.txt");
  auto write = [&](const std::string& text) { WriteTokenFile(path, text); };
  write(Line("old", "admin", "t-old"));
  absl::StatusOr<std::unique_ptr<Authorizer>> auth = Authorizer::Create(path);
  ASSERT_TRUE(auth.ok()) << auth.status();
  std::string old_header = "Bearer t-old";
  std::string new_header = "Bearer t-new";
  ASSERT_TRUE((*auth)->Check(&old_header, "X", Role::kAdmin, nullptr).ok());

  write(absl::StrCat(Line("new", "admin", "t-new"), "broken line\n"));
  absl::Status reload = (*auth)->Reload();
  EXPECT_EQ(reload.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(reload.message(), path + ":2:"))
      << reload.message();
  EXPECT_TRUE((*auth)->Check(&old_header, "X", Role::kAdmin, nullptr).ok());
  EXPECT_FALSE((*auth)->Check(&new_header, "X", Role::kRead, nullptr).ok());

  std::remove(path.c_str());
  EXPECT_EQ((*auth)->Reload().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE((*auth)->Check(&old_header, "X", Role::kAdmin, nullptr).ok());

  write(Line("new", "read", "t-new"));
  ASSERT_TRUE((*auth)->Reload().ok());
  EXPECT_TRUE((*auth)->Check(&new_header, "X", Role::kRead, nullptr).ok());
  EXPECT_EQ((*auth)->Check(&old_header, "X", Role::kRead, nullptr).code(),
            absl::StatusCode::kUnauthenticated);
  std::remove(path.c_str());
}

// A header that cannot hold a token is refused on its shape, before the
// token is hashed and looked up: the answer says what shape is expected
// rather than that the token is unknown.
TEST(AuthorizerTest, RefusesAnOversizedOrMalformedHeaderBeforeHashing) {
  const std::string longest(kMaxAuthorizationBytes - 7, 'k');
  absl::StatusOr<TokenTable> table = TokenTable::Parse(
      absl::StrCat(Line("bob", "read", "t-bob"), Line("max", "read", longest),
                   Line("over", "read", longest + "k")),
      "f");
  ASSERT_TRUE(table.ok()) << table.status();
  Authorizer auth(std::move(*table));
  const std::string unknown_message =
      "missing or unknown token (send the metadata 'authorization: Bearer "
      "TOKEN')";
  const std::string shape_message = absl::StrCat(
      "missing or unknown token: the authorization metadata must be 'Bearer "
      "TOKEN' (the scheme in any case, one space, then the token alone: 1 or "
      "more of A-Z a-z 0-9 - . _ ~ + / then any number of '='; at most ",
      kMaxAuthorizationBytes, " bytes in all)");
  auto check = [&](const std::string& header) {
    return auth.CheckHeader(header, "GetStats", Role::kRead, nullptr);
  };
  const std::string mib = absl::StrCat("Bearer ", std::string(1 << 20, 'a'));
  EXPECT_EQ(check(mib).code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(check(mib).message(), shape_message);
  // At the limit a listed token is found; one byte more is refused on its
  // length even though its hash is listed.
  EXPECT_TRUE(check("Bearer " + longest).ok());
  EXPECT_EQ(check("Bearer " + longest + "k").message(), shape_message);
  for (const char* bad : {"Bearer t-bob ", "bearer  t-bob", "Basic t-bob",
                          "Bearer t-bob\n", "Bearer t\xc3\xa9"}) {
    EXPECT_EQ(check(bad).message(), shape_message) << bad;
  }
  EXPECT_EQ(check("Bearer t-unknown").message(), unknown_message);
  EXPECT_EQ(check("Bearer YWJj+/9_.~-==").message(), unknown_message);
}

TEST(AuthorizerTest, TokenSyntaxIsRfc6750B64Token) {
  for (const char* ok :
       {"t", "t-bob", "rbmrec_3q2-7AbC", "a.b~c+d/e", "YWJj=", "YQ==", "0"}) {
    EXPECT_TRUE(ValidTokenSyntax(ok)) << ok;
  }
  for (const char* bad : {"", "=", "a=b", "a b", "a\tb", "a,b", "a:b",
                          "\xc3\xa9", "a\"b", "a\\b"}) {
    EXPECT_FALSE(ValidTokenSyntax(bad)) << bad;
  }
  EXPECT_TRUE(ValidTokenSyntax(std::string(kMaxAuthorizationBytes - 7, 'a')));
  EXPECT_FALSE(ValidTokenSyntax(std::string(kMaxAuthorizationBytes - 6, 'a')));
  absl::StatusOr<std::string> token = NewToken();
  ASSERT_TRUE(token.ok());
  EXPECT_TRUE(ValidTokenSyntax(*token)) << *token;
  EXPECT_EQ(BearerToken(absl::StrCat("bearer ", *token)), *token);
}

// As ssh treats key files: a token file that its group or others may write
// (who could add an admin) is refused, at start and on reload.
TEST(AuthorizerTest, RefusesATokenFileWritableByGroupOrOthers) {
  const std::string path =
      absl::StrCat(::testing::TempDir(), "/auth_test_mode_tokens.txt");
  const std::string text = Line("alice", "admin", "t-alice");
  struct Case {
    mode_t mode;
    std::string writable_by;
  };
  for (const Case& c : {Case{0666, "its group and others"},
                        Case{0620, "its group"}, Case{0602, "others"}}) {
    WriteTokenFile(path, text, c.mode);
    absl::StatusOr<std::unique_ptr<Authorizer>> auth = Authorizer::Create(path);
    ASSERT_FALSE(auth.ok()) << c.mode;
    EXPECT_EQ(auth.status().code(), absl::StatusCode::kFailedPrecondition);
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(c.mode));
    EXPECT_EQ(
        auth.status().message(),
        absl::StrCat("token file ", path, " has mode ", mode, ": writable by ",
                     c.writable_by,
                     ", who could add a client with any role; make it "
                     "writable by its owner only (chmod 600 ",
                     path, ", or chmod go-w ", path, " to keep it readable)"));
  }
  for (mode_t mode : {0600, 0644, 0400, 0640}) {
    WriteTokenFile(path, text, mode);
    EXPECT_TRUE(Authorizer::Create(path).ok()) << mode;
  }

  WriteTokenFile(path, text, 0600);
  absl::StatusOr<std::unique_ptr<Authorizer>> auth = Authorizer::Create(path);
  ASSERT_TRUE(auth.ok()) << auth.status();
  WriteTokenFile(path, Line("mallory", "admin", "t-mallory"), 0666);
  absl::Status reload = (*auth)->Reload();
  EXPECT_EQ(reload.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(reload.message(), "mode 0666")) << reload;
  const std::string alice = "Bearer t-alice", mallory = "Bearer t-mallory";
  EXPECT_TRUE((*auth)->Check(&alice, "Train", Role::kAdmin, nullptr).ok());
  EXPECT_FALSE((*auth)->Check(&mallory, "Train", Role::kRead, nullptr).ok());
  std::remove(path.c_str());
}

TEST(AuthorizerTest, RefusesATokenFileWithoutClients) {
  const std::string path =
      absl::StrCat(::testing::TempDir(), "/auth_test_empty_tokens.txt");
  for (const std::string text : {"", "\n\n", "# no clients yet\n  \n"}) {
    WriteTokenFile(path, text);
    absl::StatusOr<std::unique_ptr<Authorizer>> auth = Authorizer::Create(path);
    ASSERT_FALSE(auth.ok());
    EXPECT_EQ(auth.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(auth.status().message(),
              absl::StrCat("token file ", path,
                           " has no clients: every call would be refused; add "
                           "a line 'NAME ROLE sha256:HEX' (`rbmrec-server "
                           "token new NAME ROLE` prints one)"));
  }
  // On reload the table in use stays.
  WriteTokenFile(path, Line("alice", "read", "t-alice"));
  absl::StatusOr<std::unique_ptr<Authorizer>> auth = Authorizer::Create(path);
  ASSERT_TRUE(auth.ok()) << auth.status();
  WriteTokenFile(path, "# emptied by mistake\n");
  absl::Status reload = (*auth)->Reload();
  EXPECT_EQ(reload.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(reload.message(), "has no clients")) << reload;
  const std::string alice = "Bearer t-alice";
  EXPECT_TRUE((*auth)->Check(&alice, "GetStats", Role::kRead, nullptr).ok());
  EXPECT_EQ((*auth)->table()->entries().size(), 1u);
  std::remove(path.c_str());
}

TEST(NewTokenTest, IsRandomBase64UrlAndItsLineParsesBack) {
  absl::StatusOr<std::string> a = NewToken();
  absl::StatusOr<std::string> b = NewToken();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(*a, *b);
  ASSERT_EQ(a->size(), 7u + 43u) << *a;
  EXPECT_TRUE(absl::StartsWith(*a, "rbmrec_"));
  for (char c : a->substr(7)) {
    EXPECT_TRUE(absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
                c == '-' || c == '_')
        << *a;
  }
  absl::StatusOr<TokenTable> table =
      TokenTable::Parse(Line("client", "write", *a), "f");
  ASSERT_TRUE(table.ok()) << table.status();
  ASSERT_NE(table->Find(*a), nullptr);
  EXPECT_EQ(table->Find(*b), nullptr);
}

TEST(RoleTableTest, CoversExactlyTheMethodsOfTheService) {
  const google::protobuf::ServiceDescriptor* service =
      v1::Rating::descriptor()->file()->FindServiceByName("Rbmrec");
  ASSERT_NE(service, nullptr);
  EXPECT_TRUE(CheckRoleTable(*service).ok()) << CheckRoleTable(*service);

  // A service with one method more and one less than the table.
  google::protobuf::FileDescriptorProto file;
  file.set_name("fake.proto");
  file.set_package("fake");
  file.add_message_type()->set_name("M");
  auto* fake = file.add_service();
  fake->set_name("Rbmrec");
  for (int i = 0; i < service->method_count(); ++i) {
    if (service->method(i)->name() == "DeleteUser") continue;
    auto* m = fake->add_method();
    m->set_name(service->method(i)->name());
    m->set_input_type(".fake.M");
    m->set_output_type(".fake.M");
  }
  auto* extra = fake->add_method();
  extra->set_name("WipeEverything");
  extra->set_input_type(".fake.M");
  extra->set_output_type(".fake.M");
  google::protobuf::DescriptorPool pool;
  const google::protobuf::FileDescriptor* built = pool.BuildFile(file);
  ASSERT_NE(built, nullptr);
  absl::Status s = CheckRoleTable(*built->service(0));
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(
      absl::StrContains(s.message(), "methods without a role: WipeEverything"))
      << s.message();
  EXPECT_TRUE(absl::StrContains(
      s.message(), "roles for methods the service lacks: DeleteUser"))
      << s.message();
}

TEST(ListenPolicyTest, LoopbackAddresses) {
  for (const char* local :
       {"127.0.0.1:50051", "127.1.2.3:1", "localhost:50051", "LOCALHOST:1",
        "[::1]:50051", "ipv4:127.0.0.1:5", "unix:/tmp/rbmrec.sock"}) {
    EXPECT_TRUE(IsLoopbackListen(local)) << local;
  }
  for (const char* open :
       {"0.0.0.0:50051", "[::]:50051", ":50051", "10.0.0.1:50051",
        "example.com:50051", "[::ffff:10.0.0.1]:1", "128.0.0.1:1",
        "localhost.example.com:1", "50051", "[::1:50051"}) {
    EXPECT_FALSE(IsLoopbackListen(open)) << open;
  }
}

TEST(ListenPolicyTest, RefusesANonLoopbackAddressWithoutTlsAndTokens) {
  EXPECT_EQ(RefusalLine("127.0.0.1:1", false, false, false), "");
  EXPECT_EQ(RefusalLine("0.0.0.0:1", true, true, false), "");
  EXPECT_EQ(RefusalLine("0.0.0.0:1", false, false, true), "");
  const std::string both = RefusalLine("0.0.0.0:1", false, false, false);
  EXPECT_TRUE(absl::StartsWith(both, "rbmrec-server: refusing to serve"));
  EXPECT_TRUE(absl::StrContains(both, "--tls-cert"));
  EXPECT_TRUE(absl::StrContains(both, "--auth-tokens"));
  EXPECT_TRUE(absl::StrContains(both, "--insecure"));
  const std::string no_tokens = RefusalLine("[::]:1", true, false, false);
  EXPECT_FALSE(absl::StrContains(no_tokens, "--tls-cert"));
  EXPECT_TRUE(absl::StrContains(no_tokens, "--auth-tokens"));
  EXPECT_EQ(no_tokens.find('\n'), std::string::npos);
}

TEST(ListenPolicyTest, ReflectionAutoFollowsTheAddress) {
  EXPECT_TRUE(ReflectionEnabled("auto", "127.0.0.1:1"));
  EXPECT_FALSE(ReflectionEnabled("auto", "0.0.0.0:1"));
  EXPECT_TRUE(ReflectionEnabled("on", "0.0.0.0:1"));
  EXPECT_FALSE(ReflectionEnabled("off", "127.0.0.1:1"));
}

}  // namespace
}  // namespace rbmrec::server
