#ifndef RBMREC_TESTS_SERVER_HTTP_HTTP_FIXTURE_H_
#define RBMREC_TESTS_SERVER_HTTP_HTTP_FIXTURE_H_

// The in-process HTTP server of the HTTP-level tests (the HTTP equivalent of
// tests/server/grpc_fixture.h): a real RbmrecService over ":memory:" and a
// real HttpServer on a loopback port; Call() over the raw-socket client of
// tests/server/http_client.h.

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/http/http_server.h"
#include "server/security/auth.h"
#include "server/service/service.h"
#include "store/store.h"
#include "tests/server/http_client.h"

namespace rbmrec::server::http {

inline HttpReply Call(int port, const std::string& method,
                      const std::string& target, const std::string& body = "",
                      const std::string& token = "") {
  std::string text = absl::StrCat(method, " ", target,
                                  " HTTP/1.1\r\nHost: localhost\r\n"
                                  "Connection: close\r\n");
  if (!token.empty())
    absl::StrAppend(&text, "Authorization: Bearer ", token, "\r\n");
  if (!body.empty() || method == "POST" || method == "PUT") {
    absl::StrAppend(&text, "Content-Type: application/json\r\nContent-Length: ",
                    body.size(), "\r\n");
  }
  absl::StrAppend(&text, "\r\n", body);
  return RawRequest(port, text);
}

// A service over ":memory:" (no online updater) and an HTTP server on
// 127.0.0.1:0. Not thread-safe; one per test.
struct InProcessHttp {
  std::unique_ptr<RbmrecService> service;
  std::unique_ptr<HttpServer> server;

  void Start(HttpServerOptions options = {}) {
    absl::StatusOr<std::unique_ptr<store::Store>> store =
        store::Store::Open(":memory:", {});
    ASSERT_TRUE(store.ok()) << store.status();
    ServiceOptions so;
    so.online.enabled = false;
    absl::StatusOr<std::unique_ptr<RbmrecService>> created =
        RbmrecService::Create(std::move(*store), so);
    ASSERT_TRUE(created.ok()) << created.status();
    service = std::move(*created);
    options.listen = "127.0.0.1:0";
    absl::StatusOr<std::unique_ptr<HttpServer>> started =
        HttpServer::Start(service.get(), std::move(options));
    ASSERT_TRUE(started.ok()) << started.status();
    server = std::move(*started);
  }
  // Start with client tokens on: `table` in the --auth-tokens format.
  void StartWithTokens(const std::string& table,
                       HttpServerOptions options = {}) {
    absl::StatusOr<TokenTable> parsed = TokenTable::Parse(table, "tokens");
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    options.authorizer = std::make_shared<Authorizer>(std::move(*parsed));
    Start(std::move(options));
  }
  int port() const { return server->port(); }

  void Stop() {
    if (service != nullptr) service->BeginShutdown();
    if (server != nullptr) server->Stop();
    server.reset();
    if (service != nullptr) service->Shutdown();
    service.reset();
  }
  ~InProcessHttp() { Stop(); }
};

// 200 rows of 20 users u0..u19 on 15 items i0..i14 (as grpc_fixture.h's
// AddSomeRatings), as one POST /v1/ratings body.
inline std::string SomeRatingsJson() {
  std::string rows;
  for (int u = 0; u < 20; ++u) {
    for (int i = 0; i < 10; ++i) {
      absl::StrAppend(&rows, rows.empty() ? "" : ",", "{\"userId\":\"u", u,
                      "\",\"itemId\":\"i", (u * 7 + i * 3) % 15,
                      "\",\"rating\":", 1 + (u + i) % 5, "}");
    }
  }
  return absl::StrCat("{\"ratings\":[", rows, "]}");
}

inline constexpr char kTinyTrainJson[] =
    R"({"options":{"hidden":4,"epochs":3},"activation":"ACTIVATE_ALWAYS"})";

}  // namespace rbmrec::server::http

#endif  // RBMREC_TESTS_SERVER_HTTP_HTTP_FIXTURE_H_
