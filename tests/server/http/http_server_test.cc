// A real HttpServer in process, called over raw sockets: every route shape,
// the JSON mapping, status codes with reason bodies, tokens and roles, the
// body limit, slow clients and the OpenAPI document.

#include <poll.h>

#include <chrono>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/server/http/http_fixture.h"

namespace rbmrec::server::http {
namespace {

using google::protobuf::Struct;

Struct Parse(const std::string& json) {
  Struct s;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &s).ok())
      << json;
  return s;
}

std::string ErrorField(const HttpReply& r, const char* name) {
  Struct s = Parse(r.body);
  const auto& e = s.fields().at("error").struct_value().fields();
  auto it = e.find(name);
  if (it == e.end()) return "";
  return it->second.has_number_value() ? absl::StrCat(it->second.number_value())
                                       : it->second.string_value();
}

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override { http_.Start(); }
  HttpReply Get(const std::string& target) {
    return Call(http_.port(), "GET", target);
  }
  HttpReply Post(const std::string& target, const std::string& body) {
    return Call(http_.port(), "POST", target, body);
  }
  void Seed() {
    HttpReply added = Post("/v1/ratings", SomeRatingsJson());
    ASSERT_EQ(added.status, 200) << added.body;
    HttpReply trained = Post("/v1/train", kTinyTrainJson);
    ASSERT_EQ(trained.status, 200) << trained.body;
    ASSERT_TRUE(absl::StrContains(trained.body, "SUCCEEDED")) << trained.body;
  }
  InProcessHttp http_;
};

TEST_F(HttpServerTest, EveryRouteShape) {
  HttpReply added = Post("/v1/ratings", SomeRatingsJson());
  ASSERT_EQ(added.status, 200) << added.body;
  EXPECT_TRUE(absl::StrContains(added.body, R"("accepted":"200")"))
      << added.body;
  // Train streams server-sent events, one JSON TrainProgress per event.
  HttpReply trained = Post("/v1/train", kTinyTrainJson);
  ASSERT_EQ(trained.status, 200) << trained.body;
  EXPECT_EQ(trained.headers["content-type"], "text/event-stream");
  EXPECT_TRUE(absl::StartsWith(trained.body, "data: {")) << trained.body;
  EXPECT_TRUE(absl::StrContains(trained.body, R"("state":"SUCCEEDED")"))
      << trained.body;

  // A view (Rating.kind VIEW) through the same route, its enum by name.
  HttpReply viewed =
      Post("/v1/ratings",
           R"({"ratings":[{"userId":"u1","itemId":"i14","kind":"VIEW"}]})");
  ASSERT_EQ(viewed.status, 200) << viewed.body;
  EXPECT_TRUE(absl::StrContains(viewed.body, R"("views":"1")")) << viewed.body;

  HttpReply stats = Get("/v1/stats");
  ASSERT_EQ(stats.status, 200) << stats.body;
  EXPECT_TRUE(absl::StrContains(stats.body, R"("users":"20")")) << stats.body;
  EXPECT_TRUE(absl::StrContains(stats.body, R"("views":"1")")) << stats.body;
  EXPECT_TRUE(absl::StrContains(stats.body, R"("activeModelVersion":"1")"));
  HttpReply rec = Get("/v1/users/u1/recommendations?n=2&threshold=4");
  ASSERT_EQ(rec.status, 200) << rec.body;
  Struct r = Parse(rec.body);
  EXPECT_EQ(r.fields().at("recommendations").list_value().values_size(), 2);
  HttpReply similar = Get("/v1/items/i1/similar?n=3&excludeItemIds=i2");
  ASSERT_EQ(similar.status, 200) << similar.body;
  EXPECT_EQ(Parse(similar.body).fields().at("items").list_value().values_size(),
            3);
  EXPECT_FALSE(absl::StrContains(similar.body, R"("itemId":"i1")"));
  EXPECT_FALSE(absl::StrContains(similar.body, R"("itemId":"i2")"));
  HttpReply predict =
      Post("/v1/users/u1:predict", R"({"itemIds":["i1","i2","i3"]})");
  ASSERT_EQ(predict.status, 200) << predict.body;
  EXPECT_EQ(
      Parse(predict.body).fields().at("predictions").list_value().values_size(),
      3);
  HttpReply models = Get("/v1/models");
  ASSERT_EQ(models.status, 200);
  EXPECT_TRUE(absl::StrContains(models.body, R"("version":"1")"));
  EXPECT_EQ(Post("/v1/models/1:pin", R"({"pinned":true})").status, 200);
  HttpReply act = Post("/v1/models/1:activate", "");
  EXPECT_EQ(act.status, 200) << act.body;
  EXPECT_TRUE(absl::StrContains(act.body, R"("active":true)"));
  HttpReply items = Call(http_.port(), "PUT", "/v1/items",
                         R"({"items":[{"itemId":"i1","title":"One"}]})");
  EXPECT_EQ(items.status, 200) << items.body;
  EXPECT_EQ(Post("/v1/items", R"({"items":[]})").status, 200);
  HttpReply generic = Post("/v1/rbmrec.v1.Rbmrec/GetStats", "{}");
  EXPECT_EQ(generic.status, 200) << generic.body;
  HttpReply gone = Call(http_.port(), "DELETE", "/v1/users/u3");
  EXPECT_EQ(gone.status, 200) << gone.body;
  // The active version cannot be deleted: FAILED_PRECONDITION -> 400.
  HttpReply del = Call(http_.port(), "DELETE", "/v1/models/1");
  EXPECT_EQ(del.status, 400) << del.body;
  EXPECT_EQ(ErrorField(del, "status"), "FAILED_PRECONDITION");
}

// GetUserRatings and GetItem: the resource routes, their query parameters
// and errors.
TEST_F(HttpServerTest, UserRatingsAndItemRoutes) {
  Seed();
  HttpReply items = Call(http_.port(), "PUT", "/v1/items",
                         R"({"items":[{"itemId":"i1","title":"One",)"
                         R"("attributes":{"year":"1995"},)"
                         R"("categories":["Drama"]}]})");
  ASSERT_EQ(items.status, 200) << items.body;
  HttpReply page = Get("/v1/users/u1/ratings?offset=2&limit=3");
  ASSERT_EQ(page.status, 200) << page.body;
  Struct p = Parse(page.body);
  EXPECT_EQ(p.fields().at("ratings").list_value().values_size(), 3);
  // u1 rated 5 distinct items (SomeRatingsJson); int64 is a JSON string.
  EXPECT_EQ(p.fields().at("total").string_value(), "5");
  const auto& first =
      p.fields().at("ratings").list_value().values(0).struct_value().fields();
  EXPECT_EQ(first.count("itemId"), 1u) << page.body;
  EXPECT_EQ(first.count("rating"), 1u) << page.body;

  HttpReply item = Get("/v1/items/i1");
  ASSERT_EQ(item.status, 200) << item.body;
  Struct it = Parse(item.body);
  const auto& row = it.fields().at("item").struct_value().fields();
  EXPECT_EQ(row.at("title").string_value(), "One");
  EXPECT_EQ(
      row.at("attributes").struct_value().fields().at("year").string_value(),
      "1995");
  const auto& counts = it.fields().at("ratingCounts").list_value();
  ASSERT_EQ(counts.values_size(), 5);
  int64_t n = 0;
  for (const auto& c : counts.values()) n += std::stoll(c.string_value());
  EXPECT_GT(n, 0);
  EXPECT_EQ(it.fields().at("ratings").string_value(), absl::StrCat(n));
  EXPECT_EQ(it.fields().at("modelVersion").string_value(), "1");

  HttpReply no_item = Get("/v1/items/nope");
  EXPECT_EQ(no_item.status, 404) << no_item.body;
  EXPECT_TRUE(absl::StrContains(ErrorField(no_item, "message"), "item_id"));
  HttpReply no_user = Get("/v1/users/nobody/ratings");
  EXPECT_EQ(no_user.status, 404) << no_user.body;
  HttpReply too_many = Get("/v1/users/u1/ratings?limit=100000000");
  EXPECT_EQ(too_many.status, 429) << too_many.body;
  EXPECT_EQ(ErrorField(too_many, "reason"), "LIMIT_EXCEEDED");
  EXPECT_TRUE(absl::StrContains(ErrorField(too_many, "message"), "limit"));
  HttpReply negative = Get("/v1/users/u1/ratings?offset=-1");
  EXPECT_EQ(negative.status, 400) << negative.body;
}

TEST_F(HttpServerTest, StatusCodesCarryReasonsInJsonBodies) {
  // No model yet: FAILED_PRECONDITION.
  HttpReply early = Post("/v1/users/u1:predict", R"({"itemIds":["i1"]})");
  EXPECT_EQ(early.status, 400) << early.body;
  EXPECT_EQ(ErrorField(early, "code"), "400");
  Seed();
  // (Recommend answers an unknown user from the cold-start fallback.)
  HttpReply unknown = Post("/v1/users/nobody:predict", R"({"itemIds":["i1"]})");
  EXPECT_EQ(unknown.status, 404) << unknown.body;
  EXPECT_EQ(ErrorField(unknown, "status"), "NOT_FOUND");
  EXPECT_EQ(unknown.headers["content-type"], "application/json");
  HttpReply too_many = Get("/v1/users/u1/recommendations?n=100000000");
  EXPECT_EQ(ErrorField(too_many, "reason"), "LIMIT_EXCEEDED") << too_many.body;
  HttpReply bad_json = Post("/v1/users/u1:predict", R"({"itemIds": [)");
  EXPECT_EQ(bad_json.status, 400);
  EXPECT_EQ(ErrorField(bad_json, "reason"), "MALFORMED_MESSAGE");
  EXPECT_TRUE(
      absl::StrContains(ErrorField(bad_json, "message"), "request body"));
  HttpReply bad_param = Get("/v1/users/u1/recommendations?colour=red");
  EXPECT_EQ(bad_param.status, 400);
  EXPECT_TRUE(absl::StrContains(ErrorField(bad_param, "message"), "colour"));
  HttpReply no_route = Get("/v1/nothing/here");
  EXPECT_EQ(no_route.status, 404);
  EXPECT_EQ(ErrorField(no_route, "status"), "NOT_FOUND");
  HttpReply wrong_method = Call(http_.port(), "PATCH", "/v1/stats");
  EXPECT_EQ(wrong_method.status, 405);
  EXPECT_EQ(wrong_method.headers["allow"], "GET");
  EXPECT_EQ(ErrorField(wrong_method, "code"), "405");
  // A second Train while one runs, or with a bad option: before any event.
  HttpReply bad_train = Post("/v1/train", R"({"options":{"hidden":0}})");
  EXPECT_EQ(bad_train.status, 400) << bad_train.body;
  EXPECT_EQ(bad_train.headers["content-type"], "application/json");
}

TEST_F(HttpServerTest, SecurityHeadersOnEveryAnswer) {
  for (const HttpReply& r : {Get("/v1/stats"), Get("/nothing")}) {
    EXPECT_EQ(r.headers.at("x-content-type-options"), "nosniff");
    EXPECT_EQ(r.headers.at("cache-control"), "no-store");
    EXPECT_TRUE(absl::StrContains(r.headers.at("content-security-policy"),
                                  "default-src 'none'"));
  }
}

TEST_F(HttpServerTest, OpenApiDocumentListsTheRoutes) {
  HttpReply doc = Get("/openapi.json");
  ASSERT_EQ(doc.status, 200);
  Struct s = Parse(doc.body);
  const auto& paths = s.fields().at("paths").struct_value().fields();
  for (const char* p :
       {"/v1/users/{user_id}/recommendations", "/v1/users/{user_id}:predict",
        "/v1/models", "/v1/stats", "/v1/ratings", "/v1/train",
        "/v1/models/{version}:activate", "/v1/models/{version}:pin",
        "/v1/models/{version}", "/v1/users/{user_id}", "/v1/items",
        "/v1/users/{user_id}/ratings", "/v1/items/{item_id}",
        "/v1/rbmrec.v1.Rbmrec/PredictRatings",
        "/v1/rbmrec.v1.Rbmrec/GetUserRatings"}) {
    EXPECT_EQ(paths.count(p), 1u) << p;
  }
}

TEST(HttpLimits, BodyOverTheLimitIs413) {
  InProcessHttp http;
  HttpServerOptions o;
  o.max_body_bytes = 1000;
  http.Start(o);
  const std::string big(5000, ' ');
  HttpReply declared = Call(http.port(), "POST", "/v1/ratings", big);
  EXPECT_EQ(declared.status, 413);
  EXPECT_EQ(ErrorField(declared, "reason"), "LIMIT_EXCEEDED");
  EXPECT_EQ(ErrorField(declared, "code"), "413");
  // Chunked: no Content-Length, the cap applies as the body arrives.
  std::string chunked =
      "POST /v1/ratings HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
      "Transfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 5; ++i)
    absl::StrAppend(&chunked, "3e8\r\n", std::string(1000, ' '), "\r\n");
  chunked += "0\r\n\r\n";
  EXPECT_EQ(RawRequest(http.port(), chunked).status, 413);
  EXPECT_EQ(
      Call(http.port(), "POST", "/v1/ratings", R"({"ratings":[]})").status,
      200);
}

TEST(HttpLimits, SlowClientsDoNotBlockOthers) {
  InProcessHttp http;
  HttpServerOptions o;
  o.threads = 1;  // one polling thread for every connection
  o.timeout_seconds = 2;
  http.Start(o);
  // Idle connections, one with half a request line.
  int idle[3];
  for (int& fd : idle) fd = ConnectLoopback(http.port());
  ASSERT_GE(idle[2], 0);
  ASSERT_GT(send(idle[2], "GET /v1/st", 10, MSG_NOSIGNAL), 0);
  const auto start = std::chrono::steady_clock::now();
  HttpReply stats = Call(http.port(), "GET", "/v1/stats");
  EXPECT_EQ(stats.status, 200);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  // The idle connections are closed after the timeout.
  for (int fd : idle) {
    pollfd p{fd, POLLIN, 0};
    ASSERT_EQ(poll(&p, 1, 6000), 1);
    char c;
    EXPECT_EQ(recv(fd, &c, 1, 0), 0);
    close(fd);
  }
}

TEST(HttpLimits, TrainStreamHoldsNoPollingThread) {
  InProcessHttp http;
  HttpServerOptions o;
  o.threads = 1;
  http.Start(o);
  ASSERT_EQ(Call(http.port(), "POST", "/v1/ratings", SomeRatingsJson()).status,
            200);
  const std::string body =
      R"({"options":{"hidden":4,"epochs":100000,"validationFraction":0}})";
  const int fd = ConnectLoopback(http.port());
  ASSERT_GE(fd, 0);
  const std::string request = absl::StrCat(
      "POST /v1/train HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
      "Content-Length: ",
      body.size(), "\r\n\r\n", body);
  ASSERT_EQ(send(fd, request.data(), request.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(request.size()));
  std::string stream;
  char buf[4096];
  while (stream.find("data: ") == std::string::npos) {
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    ASSERT_GT(n, 0);
    stream.append(buf, static_cast<size_t>(n));
  }
  // The job runs and streams; the one polling thread still answers.
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(Call(http.port(), "GET", "/v1/stats").status, 200);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  HttpReply cancel = Call(http.port(), "POST", "/v1/train:cancel", "{}");
  EXPECT_EQ(cancel.status, 200);
  EXPECT_TRUE(absl::StrContains(cancel.body, R"("wasRunning":true)"))
      << cancel.body;
  ssize_t n;
  while ((n = recv(fd, buf, sizeof buf, 0)) > 0) {
    stream.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  EXPECT_TRUE(absl::StrContains(stream, R"("state":"CANCELLED")")) << stream;
}

TEST(HttpAuth, RolesAsOnGrpc) {
  const std::string table =
      absl::StrCat("reader read ", TokenHashText("tok-read"), "\nadmin admin ",
                   TokenHashText("tok-admin"), "\n");
  InProcessHttp http;
  http.StartWithTokens(table);
  HttpReply none = Call(http.port(), "GET", "/v1/stats");
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(none.headers["www-authenticate"], "Bearer");
  EXPECT_EQ(ErrorField(none, "status"), "UNAUTHENTICATED");
  EXPECT_EQ(Call(http.port(), "GET", "/v1/stats", "", "wrong").status, 401);
  EXPECT_EQ(Call(http.port(), "GET", "/v1/stats", "", "tok-read").status, 200);
  EXPECT_EQ(Call(http.port(), "GET", "/openapi.json").status, 401);
  EXPECT_EQ(Call(http.port(), "GET", "/openapi.json", "", "tok-read").status,
            200);
  HttpReply train =
      Call(http.port(), "POST", "/v1/train", kTinyTrainJson, "tok-read");
  EXPECT_EQ(train.status, 403);
  EXPECT_EQ(ErrorField(train, "status"), "PERMISSION_DENIED");
  EXPECT_TRUE(absl::StrContains(ErrorField(train, "message"), "Train"));
  HttpReply generic = Call(http.port(), "POST", "/v1/rbmrec.v1.Rbmrec/Train",
                           kTinyTrainJson, "tok-read");
  EXPECT_EQ(generic.status, 403);
  // A user's stored ratings need the write role; an item's counts read.
  HttpReply ratings =
      Call(http.port(), "GET", "/v1/users/u1/ratings", "", "tok-read");
  EXPECT_EQ(ratings.status, 403) << ratings.body;
  EXPECT_TRUE(absl::StrContains(ErrorField(ratings, "message"),
                                "GetUserRatings needs the write role"));
  EXPECT_EQ(Call(http.port(), "GET", "/v1/items/i1", "", "tok-read").status,
            404);  // allowed; no such item yet
  EXPECT_EQ(
      Call(http.port(), "POST", "/v1/ratings", SomeRatingsJson(), "tok-admin")
          .status,
      200);
  EXPECT_EQ(
      Call(http.port(), "GET", "/v1/users/u1/ratings", "", "tok-admin").status,
      200);
}

}  // namespace
}  // namespace rbmrec::server::http
