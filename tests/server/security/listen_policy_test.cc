// server/security/listen_policy.h: loopback addresses, the refusal line, and
// BindProblem with a port in use (a listener of the test's own, on
// 127.0.0.1 only).

#include "server/security/listen_policy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace rbmrec::server {
namespace {

TEST(ListenPolicyTest, Loopback) {
  for (const char* local :
       {"127.0.0.1:50051", "127.9.8.7:1", "localhost:1", "LOCALHOST:1",
        "[::1]:50051", "unix:/tmp/rbmrec.sock", "unix-abstract:rbmrec"}) {
    EXPECT_TRUE(IsLoopbackListen(local)) << local;
  }
  for (const char* open :
       {"0.0.0.0:50051", "[::]:50051", ":50051", "10.0.0.1:1", "example.com:1",
        "128.0.0.1:1", "no-port", "[::1:1"}) {
    EXPECT_FALSE(IsLoopbackListen(open)) << open;
  }
}

TEST(ListenPolicyTest, RefusalLineNamesWhatIsMissing) {
  EXPECT_EQ(RefusalLine("[::1]:1", false, false, false), "");
  EXPECT_EQ(RefusalLine("0.0.0.0:1", true, true, false), "");
  EXPECT_EQ(RefusalLine("0.0.0.0:1", false, true, true), "");
  const std::string line = RefusalLine("0.0.0.0:1", true, false, false);
  EXPECT_TRUE(absl::StartsWith(line, "rbmrec-server: refusing to serve"))
      << line;
  EXPECT_TRUE(absl::StrContains(line, "0.0.0.0:1")) << line;
  EXPECT_TRUE(absl::StrContains(line, "--insecure")) << line;
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
}

TEST(ListenPolicyTest, BindProblemWithAPortInUse) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;  // any free port
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string listen_at =
      absl::StrCat("127.0.0.1:", ntohs(addr.sin_port));
  const std::string problem = BindProblem(listen_at);
  EXPECT_TRUE(absl::StartsWith(problem, "address already in use")) << problem;
  EXPECT_TRUE(absl::StrContains(problem, listen_at)) << problem;
  close(fd);
  // Free again (SO_REUSEADDR, as gRPC binds).
  EXPECT_EQ(BindProblem(listen_at), "");
}

TEST(ListenPolicyTest, BindProblemLeavesOtherAddressesToTheCaller) {
  EXPECT_EQ(BindProblem("unix:/tmp/whatever.sock"), "");
  EXPECT_EQ(BindProblem("no-port"), "");
  EXPECT_EQ(BindProblem("[::1:5"), "");
}

TEST(ListenPolicyTest, Reflection) {
  EXPECT_TRUE(ReflectionEnabled("true", "0.0.0.0:1"));
  EXPECT_FALSE(ReflectionEnabled("false", "127.0.0.1:1"));
  EXPECT_TRUE(ReflectionEnabled("auto", "[::1]:1"));
  EXPECT_FALSE(ReflectionEnabled("auto", "[::]:1"));
}

}  // namespace
}  // namespace rbmrec::server
