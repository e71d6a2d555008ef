#ifndef RBMREC_SERVER_HTTP_STATIC_FILES_H_
#define RBMREC_SERVER_HTTP_STATIC_FILES_H_

// The dashboard's files (server/http/dashboard/), compiled into the binary:
// cmake/embed_files.cmake writes their bytes into a generated source at
// build time, so the server reads nothing from disk and the page loads
// nothing from the network. The HTTP listener (http_server.cc) hands every
// request whose path IsStaticPath() to AnswerStatic() before routing.
//
// Paths: "/" is index.html; "/ui/NAME" is the file NAME of the dashboard
// folder. Lookup is by exact name in the compiled table, so no path (with
// "..", "//", "%2e" or anything else) reaches a file that is not in it:
// anything else under "/ui/" is 404.
//
// Answers carry the content type of the file's extension, an ETag (a hash
// of the bytes; If-None-Match with it answers 304 without a body),
// Cache-Control: no-cache (the browser revalidates, so a new binary's
// files are never stale) and the headers of StaticHeaders().
//
// Thread safety: the table is immutable; every function is thread-safe.

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace rbmrec::server::http {

struct EmbeddedFile {
  absl::string_view path;   // "/ui/app.js"
  absl::string_view bytes;  // the file's contents
  absl::string_view etag;   // "\"0123456789abcdef\"", quoted as HTTP wants
};

// Generated (cmake/embed_files.cmake): the dashboard's files, in the order
// CMake lists them.
extern const EmbeddedFile kDashboardFiles[];
extern const size_t kDashboardFileCount;

using HeaderList = std::vector<std::pair<std::string, std::string>>;

// Whether `path` (no query string) is the dashboard's: "/" or under "/ui/"
// (also "/ui" itself, which answers 404).
bool IsStaticPath(absl::string_view path);

// The Content-Type of a file name by its extension (html, js, css, svg,
// png, ico, json, txt); application/octet-stream for others.
absl::string_view ContentTypeOf(absl::string_view name);

// The file served at `path`, or null (null also for "/ui/" paths not in
// the table).
const EmbeddedFile* FindStaticFile(absl::string_view path);

// The security headers of every dashboard answer: a Content-Security-Policy
// that allows scripts, styles, images and fetch from this origin only (no
// inline script or style, no framing, no plugins, no <base>), and
// X-Content-Type-Options: nosniff, Referrer-Policy: no-referrer,
// X-Frame-Options: DENY.
const HeaderList& StaticHeaders();

struct StaticAnswer {
  int status = 404;        // 200, 304, 404 or 405
  absl::string_view body;  // the file (200) or a short text (404, 405)
  std::string content_type;
  HeaderList headers;  // StaticHeaders() and, by status, ETag,
                       // Cache-Control, Allow
};

// The answer to `method` on `path` (IsStaticPath(path) true), given the
// request's If-None-Match header (empty when absent; a list of tags or
// "*"). GET and HEAD only (405 with Allow otherwise); the body of a HEAD
// answer is the file's (the HTTP layer does not send it).
StaticAnswer AnswerStatic(absl::string_view method, absl::string_view path,
                          absl::string_view if_none_match);

}  // namespace rbmrec::server::http

#endif  // RBMREC_SERVER_HTTP_STATIC_FILES_H_
