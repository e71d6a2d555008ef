// libFuzzer target: HTTP requests to request messages, the part of the
// HTTP/JSON listener (server/http/) that reads untrusted bytes after
// libmicrohttpd: routing (routes.h) and the mapping of path, query and
// JSON body onto the request (request_mapping.h), for every route of
// rbmrec.v1.Rbmrec.
//
// Input: "METHOD TARGET\n" then the body. TARGET is split at the first '?';
// the query at '&' and the first '=' of each pair, then percent-decoded
// (as libmicrohttpd hands them over).
//
// Invariants checked (abort on violation): no crash; a request that maps
// prints as JSON, and that JSON parses back to an equal message; every
// error is non-OK with a message and its JSON error body parses.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_split.h"
#include "google/protobuf/message.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/field_comparator.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "proto/rbmrec.pb.h"
#include "server/http/http_status.h"
#include "server/http/request_mapping.h"
#include "server/http/routes.h"

namespace {

namespace pb = ::google::protobuf;
using rbmrec::server::http::Bindings;
using rbmrec::server::http::Router;

[[noreturn]] void Fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_http: %s: %s\n", what, detail.c_str());
  std::abort();
}

int Hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string Decode(absl::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && Hex(s[i + 1]) >= 0 &&
               Hex(s[i + 2]) >= 0) {
      out += static_cast<char>(Hex(s[i + 1]) * 16 + Hex(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

const Router& TheRouter() {
  static const Router* router = [] {
    const pb::ServiceDescriptor* service =
        rbmrec::v1::RecommendRequest::descriptor()->file()->FindServiceByName(
            "Rbmrec");
    absl::StatusOr<Router> built = Router::Build(*service);
    if (!built.ok()) Fail("Router::Build", built.status().ToString());
    return new Router(std::move(*built));
  }();
  return *router;
}

void CheckError(const absl::Status& s) {
  if (s.ok() || s.message().empty()) Fail("error without message", "");
  pb::Struct body;
  if (!pb::util::JsonStringToMessage(rbmrec::server::http::ErrorJson(s), &body)
           .ok()) {
    Fail("error body is not JSON", std::string(s.message()));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t eol = input.find('\n');
  if (eol == absl::string_view::npos) return 0;
  const absl::string_view line = input.substr(0, eol);
  const absl::string_view body = input.substr(eol + 1);
  const size_t space = line.find(' ');
  if (space == absl::string_view::npos) return 0;
  const absl::string_view method = line.substr(0, space);
  const absl::string_view target = line.substr(space + 1);
  const size_t q = target.find('?');
  const std::string path = Decode(target.substr(0, q));
  Bindings query;
  if (q != absl::string_view::npos) {
    for (absl::string_view pair :
         absl::StrSplit(target.substr(q + 1), '&', absl::SkipEmpty())) {
      const size_t eq = pair.find('=');
      query.emplace_back(Decode(pair.substr(0, eq)),
                         eq == absl::string_view::npos
                             ? std::string()
                             : Decode(pair.substr(eq + 1)));
    }
  }
  Router::Lookup found = TheRouter().Find(method, path);
  if (found.route == nullptr) return 0;
  std::unique_ptr<pb::Message> request(
      pb::MessageFactory::generated_factory()
          ->GetPrototype(found.route->method->input_type())
          ->New());
  absl::Status s = rbmrec::server::http::BuildRequest(
      *found.route, found.bindings, query, body, request.get());
  if (!s.ok()) {
    CheckError(s);
    return 0;
  }
  std::string json;
  if (!pb::util::MessageToJsonString(*request, &json).ok()) {
    // Only invalid UTF-8 in a bytes-free string field could fail, which the
    // mapping refuses.
    Fail("mapped request does not print", request->ShortDebugString());
  }
  std::unique_ptr<pb::Message> again(request->New());
  pb::util::DefaultFieldComparator comparator;
  comparator.set_treat_nan_as_equal(true);  // ?threshold=nan prints "NaN"
  pb::util::MessageDifferencer differencer;
  differencer.set_field_comparator(&comparator);
  differencer.set_message_field_comparison(
      pb::util::MessageDifferencer::EQUIVALENT);
  if (!pb::util::JsonStringToMessage(json, again.get()).ok() ||
      !differencer.Compare(*request, *again)) {
    Fail("JSON round trip differs", json);
  }
  return 0;
}
