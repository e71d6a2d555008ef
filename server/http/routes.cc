#include "server/http/routes.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/utf8.h"
#include "google/protobuf/util/json_util.h"
#include "proto/google/api/annotations.pb.h"

namespace rbmrec::server::http {

namespace pb = ::google::protobuf;

namespace {

absl::Status TemplateError(absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("path template '", text, "': ", why));
}

bool ValidFieldPath(absl::string_view path) {
  if (path.empty()) return false;
  for (absl::string_view part : absl::StrSplit(path, '.')) {
    if (part.empty() || absl::ascii_isdigit(part[0])) return false;
    for (char c : part) {
      if (!absl::ascii_isalnum(c) && c != '_') return false;
    }
  }
  return true;
}

}  // namespace

const pb::FieldDescriptor* FieldNamed(const pb::Descriptor* type,
                                      absl::string_view name) {
  if (const pb::FieldDescriptor* f = type->FindFieldByName(std::string(name))) {
    return f;
  }
  for (int i = 0; i < type->field_count(); ++i) {
    if (type->field(i)->json_name() == name) return type->field(i);
  }
  return nullptr;
}

absl::StatusOr<PathTemplate> PathTemplate::Parse(absl::string_view text) {
  PathTemplate t;
  t.text_ = std::string(text);
  absl::string_view rest = text;
  if (!absl::ConsumePrefix(&rest, "/")) {
    return TemplateError(text, "does not start with '/'");
  }
  // The verb: after the last ':' outside braces.
  const size_t close = rest.rfind('}');
  const size_t colon = rest.rfind(':');
  if (colon != absl::string_view::npos &&
      (close == absl::string_view::npos || colon > close)) {
    t.verb_ = std::string(rest.substr(colon + 1));
    rest = rest.substr(0, colon);
    if (t.verb_.empty()) return TemplateError(text, "empty verb");
  }
  for (absl::string_view part : absl::StrSplit(rest, '/')) {
    Segment s;
    if (part.empty()) return TemplateError(text, "empty segment");
    if (part == "*") {
      s.kind = Segment::kWildcard;
    } else if (part == "**") {
      s.kind = Segment::kDoubleWildcard;
    } else if (absl::ConsumePrefix(&part, "{")) {
      if (!absl::ConsumeSuffix(&part, "}")) {
        return TemplateError(text, "unbalanced '{'");
      }
      s.kind = Segment::kVariable;
      const size_t eq = part.find('=');
      if (eq != absl::string_view::npos) {
        const absl::string_view sub = part.substr(eq + 1);
        if (sub == "**") {
          s.multi = true;
        } else if (sub != "*") {
          return TemplateError(text, "only {f}, {f=*} and {f=**} are served");
        }
        part = part.substr(0, eq);
      }
      if (!ValidFieldPath(part)) return TemplateError(text, "bad field path");
      s.text = std::string(part);
    } else {
      if (part.find_first_of("{}*") != absl::string_view::npos) {
        return TemplateError(text, "bad literal segment");
      }
      s.text = std::string(part);
    }
    t.segments_.push_back(std::move(s));
  }
  for (size_t i = 0; i + 1 < t.segments_.size(); ++i) {
    if (t.segments_[i].kind == Segment::kDoubleWildcard ||
        t.segments_[i].multi) {
      return TemplateError(text, "'**' must be the last segment");
    }
  }
  return t;
}

int PathTemplate::Specificity() const {
  int n = verb_.empty() ? 0 : 1;
  for (const Segment& s : segments_) n += s.kind == Segment::kLiteral ? 2 : 0;
  return n;
}

bool PathTemplate::Match(absl::string_view path, Bindings* bindings) const {
  if (!absl::ConsumePrefix(&path, "/")) return false;
  if (!verb_.empty()) {
    if (!absl::ConsumeSuffix(&path, absl::StrCat(":", verb_))) return false;
  }
  std::vector<absl::string_view> parts = absl::StrSplit(path, '/');
  Bindings found;
  size_t i = 0;
  for (const Segment& s : segments_) {
    const bool rest = s.kind == Segment::kDoubleWildcard || s.multi;
    if (rest) {
      if (s.kind == Segment::kVariable) {
        if (i >= parts.size()) return false;
        std::vector<absl::string_view> tail(parts.begin() + i, parts.end());
        found.emplace_back(s.text, absl::StrJoin(tail, "/"));
      }
      i = parts.size();
      break;
    }
    if (i >= parts.size() || parts[i].empty()) return false;
    if (s.kind == Segment::kLiteral && parts[i] != s.text) return false;
    if (s.kind == Segment::kVariable) {
      found.emplace_back(s.text, std::string(parts[i]));
    }
    ++i;
  }
  if (i != parts.size()) return false;
  if (bindings != nullptr) *bindings = std::move(found);
  return true;
}

namespace {

// The field at `path` ("a.b") of `type`, or null.
const pb::FieldDescriptor* FindFieldPath(const pb::Descriptor* type,
                                         absl::string_view path,
                                         bool json_names) {
  const pb::FieldDescriptor* field = nullptr;
  for (absl::string_view part : absl::StrSplit(path, '.')) {
    if (type == nullptr) return nullptr;
    field = json_names ? FieldNamed(type, part)
                       : type->FindFieldByName(std::string(part));
    if (field == nullptr) return nullptr;
    type = field->message_type();
  }
  return field;
}

absl::Status AddRoute(const pb::MethodDescriptor& method,
                      const google::api::HttpRule& rule,
                      std::vector<Route>* routes) {
  Route r;
  r.method = &method;
  r.body = rule.body();
  std::string path;
  switch (rule.pattern_case()) {
    case google::api::HttpRule::kGet:
      r.http_method = "GET", path = rule.get();
      break;
    case google::api::HttpRule::kPut:
      r.http_method = "PUT", path = rule.put();
      break;
    case google::api::HttpRule::kPost:
      r.http_method = "POST", path = rule.post();
      break;
    case google::api::HttpRule::kDelete:
      r.http_method = "DELETE", path = rule.delete_();
      break;
    case google::api::HttpRule::kPatch:
      r.http_method = "PATCH", path = rule.patch();
      break;
    case google::api::HttpRule::kCustom:
      r.http_method = rule.custom().kind(), path = rule.custom().path();
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(method.full_name(), ": google.api.http has no path"));
  }
  absl::StatusOr<PathTemplate> t = PathTemplate::Parse(path);
  if (!t.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(method.full_name(), ": ", t.status().message()));
  }
  r.path = std::move(*t);
  for (const PathTemplate::Segment& s : r.path.segments()) {
    if (s.kind != PathTemplate::Segment::kVariable) continue;
    const pb::FieldDescriptor* f =
        FindFieldPath(method.input_type(), s.text, false);
    if (f == nullptr || f->is_repeated() ||
        f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
      return absl::InvalidArgumentError(
          absl::StrCat(method.full_name(), ": path variable {", s.text,
                       "} is not a singular scalar field of ",
                       method.input_type()->full_name()));
    }
  }
  if (!r.body.empty() && r.body != "*" &&
      method.input_type()->FindFieldByName(r.body) == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        method.full_name(), ": body field '", r.body, "' does not exist"));
  }
  routes->push_back(std::move(r));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Router> Router::Build(const pb::ServiceDescriptor& service) {
  Router router;
  for (int i = 0; i < service.method_count(); ++i) {
    const pb::MethodDescriptor& method = *service.method(i);
    if (method.options().HasExtension(google::api::http)) {
      const google::api::HttpRule& rule =
          method.options().GetExtension(google::api::http);
      if (absl::Status s = AddRoute(method, rule, &router.routes_); !s.ok()) {
        return s;
      }
      for (const google::api::HttpRule& extra : rule.additional_bindings()) {
        if (absl::Status s = AddRoute(method, extra, &router.routes_);
            !s.ok()) {
          return s;
        }
      }
    }
    google::api::HttpRule generic;
    generic.set_post(
        absl::StrCat("/v1/", service.full_name(), "/", method.name()));
    generic.set_body("*");
    if (absl::Status s = AddRoute(method, generic, &router.routes_); !s.ok()) {
      return s;
    }
    router.routes_.back().generic = true;
  }
  std::stable_sort(router.routes_.begin(), router.routes_.end(),
                   [](const Route& a, const Route& b) {
                     return a.path.Specificity() > b.path.Specificity();
                   });
  return router;
}

Router::Lookup Router::Find(absl::string_view http_method,
                            absl::string_view path) const {
  Lookup out;
  for (const Route& r : routes_) {
    Bindings bindings;
    if (!r.path.Match(path, &bindings)) continue;
    if (r.http_method == http_method) {
      out.route = &r;
      out.bindings = std::move(bindings);
      out.allowed.clear();
      return out;
    }
    if (std::find(out.allowed.begin(), out.allowed.end(), r.http_method) ==
        out.allowed.end()) {
      out.allowed.push_back(r.http_method);
    }
  }
  return out;
}

}  // namespace rbmrec::server::http
