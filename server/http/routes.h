#ifndef RBMREC_SERVER_HTTP_ROUTES_H_
#define RBMREC_SERVER_HTTP_ROUTES_H_

// The HTTP routes of a gRPC service, read from its descriptors: the
// `google.api.http` option of each method (proto/google/api/http.proto;
// additional_bindings included) and, for every method, the generic route
// POST /v1/SERVICE/METHOD (e.g. /v1/rbmrec.v1.Rbmrec/GetStats) whose JSON
// body is the whole request. A method added to the .proto with an
// annotation is routed without code changes here.
//
// Path templates: "/" segments separated by "/", each a literal, "*", "**"
// (last), or a variable "{field.path}" ("{f=*}" and "{f=**}" too), then an
// optional ":verb". Other variable sub-templates are refused at Build.
// Matching is on the path as libmicrohttpd hands it over (percent-decoded),
// so a variable's value cannot contain "/".
// BuildRequest (server/http/request_mapping.h) fills a request from a match.
//
// Thread safety: a built Router is immutable; const methods are
// thread-safe.

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"

namespace rbmrec::server::http {

using Bindings = std::vector<std::pair<std::string, std::string>>;

// The field of `type` named `name` (its proto name, or its lowerCamelCase
// JSON name), or null.
const google::protobuf::FieldDescriptor* FieldNamed(
    const google::protobuf::Descriptor* type, absl::string_view name);

class PathTemplate {
 public:
  struct Segment {
    enum Kind { kLiteral, kVariable, kWildcard, kDoubleWildcard };
    Kind kind = kLiteral;
    std::string text;    // the literal, or the variable's field path
    bool multi = false;  // a variable "{f=**}"
  };
  // InvalidArgument naming `text` and the problem.
  static absl::StatusOr<PathTemplate> Parse(absl::string_view text);
  // Whether `path` (no query string) matches; on a match `bindings` gets
  // each variable's field path and value.
  bool Match(absl::string_view path, Bindings* bindings) const;
  const std::string& text() const { return text_; }
  const std::vector<Segment>& segments() const { return segments_; }
  // Literal segments (and the verb): more is more specific.
  int Specificity() const;

 private:
  std::string text_;
  std::vector<Segment> segments_;
  std::string verb_;
};

struct Route {
  std::string http_method;  // "GET", "POST", "PUT", "DELETE", "PATCH", ...
  PathTemplate path;
  // "" (no body), "*" (the whole request) or a top-level field name.
  std::string body;
  const google::protobuf::MethodDescriptor* method = nullptr;
  bool generic = false;  // POST /v1/SERVICE/METHOD
};

class Router {
 public:
  // The routes of every method of `service`. InvalidArgument naming the
  // method for an annotation that does not parse, names an unknown field,
  // or binds a repeated or message field to the path.
  static absl::StatusOr<Router> Build(
      const google::protobuf::ServiceDescriptor& service);

  struct Lookup {
    const Route* route = nullptr;  // null: no route for (method, path)
    Bindings bindings;
    // When route is null: the methods a route of this path takes (empty:
    // no route has this path, 404; else 405 with these in Allow).
    std::vector<std::string> allowed;
  };
  Lookup Find(absl::string_view http_method, absl::string_view path) const;

  const std::vector<Route>& routes() const { return routes_; }

 private:
  std::vector<Route> routes_;  // most specific first
};

}  // namespace rbmrec::server::http

#endif  // RBMREC_SERVER_HTTP_ROUTES_H_
