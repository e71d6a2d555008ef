// The dashboard's compiled-in files (server/http/static_files.h): content
// types, the security headers, ETags, 404 for anything not in the table
// (no directory traversal), and the same through a real HttpServer, where
// the files need no token but the API still does.

#include <regex>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/http/static_files.h"
#include "tests/server/http/http_fixture.h"

namespace rbmrec::server::http {
namespace {

std::string Header(const StaticAnswer& a, const std::string& name) {
  for (const auto& [key, value] : a.headers) {
    if (key == name) return value;
  }
  return "";
}

TEST(DashboardStatic, ContentTypes) {
  EXPECT_EQ(ContentTypeOf("/ui/index.html"), "text/html; charset=utf-8");
  EXPECT_EQ(ContentTypeOf("/ui/app.js"), "text/javascript; charset=utf-8");
  EXPECT_EQ(ContentTypeOf("/ui/style.CSS"), "text/css; charset=utf-8");
  EXPECT_EQ(ContentTypeOf("/ui/favicon.svg"), "image/svg+xml");
  EXPECT_EQ(ContentTypeOf("/ui/x.png"), "image/png");
  EXPECT_EQ(ContentTypeOf("/ui/README"), "application/octet-stream");
  EXPECT_EQ(ContentTypeOf("/ui.d/README"), "application/octet-stream");
  EXPECT_EQ(ContentTypeOf("/ui/x.exe"), "application/octet-stream");
}

TEST(DashboardStatic, TheTableHoldsTheDashboard) {
  ASSERT_GE(kDashboardFileCount, 5u);
  std::set<std::string> paths;
  for (size_t i = 0; i < kDashboardFileCount; ++i) {
    const EmbeddedFile& f = kDashboardFiles[i];
    EXPECT_TRUE(absl::StartsWith(f.path, "/ui/")) << f.path;
    EXPECT_FALSE(f.bytes.empty()) << f.path;
    EXPECT_EQ(f.etag.size(), 18u) << f.path;  // 16 hex digits, quoted
    EXPECT_TRUE(absl::StartsWith(f.etag, "\"")) << f.etag;
    paths.insert(std::string(f.path));
  }
  EXPECT_EQ(paths.size(), kDashboardFileCount);
  for (const char* p : {"/ui/index.html", "/ui/app.js", "/ui/api.js",
                        "/ui/chart.js", "/ui/style.css", "/ui/favicon.svg"}) {
    EXPECT_TRUE(paths.count(p)) << p;
  }
  // Every module a file imports and every /ui/ file index.html names is
  // compiled in (a file added to the folder but misspelled in an import
  // would fail in the browser only).
  const std::regex ref(R"re((?:from '\./|"/ui/)([a-z_]+\.[a-z]+))re");
  for (size_t i = 0; i < kDashboardFileCount; ++i) {
    const std::string text(kDashboardFiles[i].bytes);
    for (std::sregex_iterator it(text.begin(), text.end(), ref), end; it != end;
         ++it) {
      EXPECT_TRUE(paths.count(absl::StrCat("/ui/", (*it)[1].str())))
          << kDashboardFiles[i].path << " refers to " << (*it)[1].str();
    }
  }
}

TEST(DashboardStatic, NoInlineScriptOrStyle) {
  // What the CSP (no 'unsafe-inline') would block: inline <script> and
  // <style>, style="..." and on...= handler attributes.
  const std::regex inline_code(
      R"re(<script(?![^>]*\bsrc=)[^>]*>|<style|\sstyle=|\son[a-z]+=)re",
      std::regex::icase);
  for (size_t i = 0; i < kDashboardFileCount; ++i) {
    if (!absl::EndsWith(kDashboardFiles[i].path, ".html")) continue;
    const std::string text(kDashboardFiles[i].bytes);
    EXPECT_FALSE(std::regex_search(text, inline_code))
        << kDashboardFiles[i].path;
  }
}

TEST(DashboardStatic, IndexAndHeaders) {
  const StaticAnswer a = AnswerStatic("GET", "/", "");
  ASSERT_EQ(a.status, 200);
  EXPECT_EQ(a.content_type, "text/html; charset=utf-8");
  EXPECT_TRUE(absl::StrContains(a.body, "<script type=\"module\""));
  const std::string csp = Header(a, "Content-Security-Policy");
  EXPECT_TRUE(absl::StrContains(csp, "default-src 'self'")) << csp;
  EXPECT_TRUE(absl::StrContains(csp, "script-src 'self'")) << csp;
  EXPECT_TRUE(absl::StrContains(csp, "frame-ancestors 'none'")) << csp;
  EXPECT_FALSE(absl::StrContains(csp, "unsafe")) << csp;
  EXPECT_EQ(Header(a, "X-Content-Type-Options"), "nosniff");
  EXPECT_EQ(Header(a, "Referrer-Policy"), "no-referrer");
  EXPECT_EQ(Header(a, "X-Frame-Options"), "DENY");
  EXPECT_EQ(Header(a, "Cache-Control"), "no-cache");
  EXPECT_EQ(Header(a, "ETag"), FindStaticFile("/ui/index.html")->etag);
  EXPECT_EQ(AnswerStatic("HEAD", "/ui/index.html", "").status, 200);
  const StaticAnswer js = AnswerStatic("GET", "/ui/app.js", "");
  EXPECT_EQ(js.status, 200);
  EXPECT_EQ(js.content_type, "text/javascript; charset=utf-8");
  EXPECT_EQ(AnswerStatic("GET", "/ui/style.css", "").content_type,
            "text/css; charset=utf-8");
}

TEST(DashboardStatic, EtagRevalidation) {
  const std::string tag(FindStaticFile("/ui/app.js")->etag);
  EXPECT_EQ(AnswerStatic("GET", "/ui/app.js", tag).status, 304);
  EXPECT_TRUE(AnswerStatic("GET", "/ui/app.js", tag).body.empty());
  EXPECT_EQ(AnswerStatic("GET", "/ui/app.js", "W/" + tag).status, 304);
  EXPECT_EQ(AnswerStatic("GET", "/ui/app.js", "\"x\", " + tag).status, 304);
  EXPECT_EQ(AnswerStatic("GET", "/ui/app.js", "*").status, 304);
  EXPECT_EQ(AnswerStatic("GET", "/ui/app.js", "\"other\"").status, 200);
}

TEST(DashboardStatic, UnknownPathsAndTraversal) {
  for (const char* path :
       {"/ui", "/ui/", "/ui/nope.js", "/ui/../openapi.json",
        "/ui/../../etc/passwd", "/ui/%2e%2e/index.html", "/ui/./app.js",
        "/ui//app.js", "/ui/app.js/", "/ui/APP.JS", "/ui/app.js%00",
        "/ui/dashboard/app.js", "/ui/index.html?x"}) {
    EXPECT_TRUE(IsStaticPath(path)) << path;
    const StaticAnswer a = AnswerStatic("GET", path, "");
    EXPECT_EQ(a.status, 404) << path;
    EXPECT_FALSE(Header(a, "Content-Security-Policy").empty()) << path;
  }
  EXPECT_FALSE(IsStaticPath("/uix/app.js"));
  EXPECT_FALSE(IsStaticPath("/v1/stats"));
  EXPECT_FALSE(IsStaticPath("/index.html"));
  const StaticAnswer post = AnswerStatic("POST", "/", "");
  EXPECT_EQ(post.status, 405);
  EXPECT_EQ(Header(post, "Allow"), "GET, HEAD");
}

// Through the listener with tokens on: the files need none, the API does.
TEST(DashboardStatic, ServedByTheHttpListener) {
  InProcessHttp http;
  http.StartWithTokens(
      absl::StrCat("reader read ", TokenHashText("tok-read"), "\n"));
  HttpReply index = Call(http.port(), "GET", "/");
  ASSERT_EQ(index.status, 200) << index.body;
  EXPECT_EQ(index.headers["content-type"], "text/html; charset=utf-8");
  EXPECT_TRUE(absl::StrContains(index.headers["content-security-policy"],
                                "script-src 'self'"));
  EXPECT_EQ(index.headers["x-frame-options"], "DENY");
  EXPECT_EQ(index.headers["x-content-type-options"], "nosniff");
  EXPECT_EQ(index.headers["referrer-policy"], "no-referrer");
  EXPECT_FALSE(index.headers["etag"].empty());
  EXPECT_EQ(index.body, std::string(FindStaticFile("/")->bytes));
  HttpReply js = Call(http.port(), "GET", "/ui/app.js");
  EXPECT_EQ(js.status, 200);
  EXPECT_EQ(js.headers["content-type"], "text/javascript; charset=utf-8");
  EXPECT_EQ(Call(http.port(), "GET", "/ui/missing.js").status, 404);
  EXPECT_EQ(Call(http.port(), "GET", "/ui/../v1/stats").status, 404);
  EXPECT_EQ(Call(http.port(), "GET", "/ui/%2e%2e/v1/stats").status, 404);
  EXPECT_EQ(Call(http.port(), "DELETE", "/").status, 405);
  // The API keeps its own headers and its token check.
  HttpReply stats = Call(http.port(), "GET", "/v1/stats");
  EXPECT_EQ(stats.status, 401);
  EXPECT_EQ(stats.headers["content-security-policy"],
            "default-src 'none'; frame-ancestors 'none'");
  EXPECT_EQ(Call(http.port(), "GET", "/v1/stats", "", "tok-read").status, 200);
  EXPECT_EQ(Call(http.port(), "GET", "/nope").status, 404);
}

}  // namespace
}  // namespace rbmrec::server::http
