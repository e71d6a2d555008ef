#include "server/http/static_files.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace rbmrec::server::http {

namespace {

constexpr absl::string_view kIndexPath = "/ui/index.html";

// Whether the If-None-Match list `header` names `etag` (or is "*").
bool EtagMatches(absl::string_view header, absl::string_view etag) {
  for (absl::string_view tag : absl::StrSplit(header, ',')) {
    tag = absl::StripAsciiWhitespace(tag);
    absl::ConsumePrefix(&tag, "W/");  // weak comparison, as RFC 9110 asks
    if (tag == "*" || tag == etag) return true;
  }
  return false;
}

}  // namespace

bool IsStaticPath(absl::string_view path) {
  return path == "/" || path == "/ui" || absl::StartsWith(path, "/ui/");
}

absl::string_view ContentTypeOf(absl::string_view name) {
  const size_t dot = name.rfind('.');
  const size_t slash = name.rfind('/');
  if (dot == absl::string_view::npos ||
      (slash != absl::string_view::npos && dot < slash)) {
    return "application/octet-stream";
  }
  const std::string ext = absl::AsciiStrToLower(name.substr(dot + 1));
  if (ext == "html") return "text/html; charset=utf-8";
  if (ext == "js" || ext == "mjs") return "text/javascript; charset=utf-8";
  if (ext == "css") return "text/css; charset=utf-8";
  if (ext == "svg") return "image/svg+xml";
  if (ext == "png") return "image/png";
  if (ext == "ico") return "image/x-icon";
  if (ext == "json") return "application/json";
  if (ext == "txt") return "text/plain; charset=utf-8";
  return "application/octet-stream";
}

const EmbeddedFile* FindStaticFile(absl::string_view path) {
  if (path == "/") path = kIndexPath;
  for (size_t i = 0; i < kDashboardFileCount; ++i) {
    if (kDashboardFiles[i].path == path) return &kDashboardFiles[i];
  }
  return nullptr;
}

const HeaderList& StaticHeaders() {
  static const HeaderList* const headers = new HeaderList{
      {"Content-Security-Policy",
       "default-src 'self'; script-src 'self'; style-src 'self'; "
       "img-src 'self'; connect-src 'self'; object-src 'none'; "
       "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"},
      {"X-Content-Type-Options", "nosniff"},
      {"Referrer-Policy", "no-referrer"},
      {"X-Frame-Options", "DENY"},
  };
  return *headers;
}

StaticAnswer AnswerStatic(absl::string_view method, absl::string_view path,
                          absl::string_view if_none_match) {
  StaticAnswer a;
  a.headers = StaticHeaders();
  a.content_type = "text/plain; charset=utf-8";
  if (method != "GET" && method != "HEAD") {
    a.status = 405;
    a.body = "the dashboard's files take GET and HEAD only\n";
    a.headers.emplace_back("Allow", "GET, HEAD");
    return a;
  }
  const EmbeddedFile* file = FindStaticFile(path);
  if (file == nullptr) {
    a.status = 404;
    a.body = "no such file in the dashboard\n";
    a.headers.emplace_back("Cache-Control", "no-store");
    return a;
  }
  a.headers.emplace_back("ETag", std::string(file->etag));
  a.headers.emplace_back("Cache-Control", "no-cache");
  if (!if_none_match.empty() && EtagMatches(if_none_match, file->etag)) {
    a.status = 304;
    a.body = {};
    return a;
  }
  a.status = 200;
  a.body = file->bytes;
  a.content_type = std::string(ContentTypeOf(file->path));
  return a;
}

}  // namespace rbmrec::server::http
