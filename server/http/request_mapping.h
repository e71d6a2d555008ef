#ifndef RBMREC_SERVER_HTTP_REQUEST_MAPPING_H_
#define RBMREC_SERVER_HTTP_REQUEST_MAPPING_H_

// An HTTP request (path bindings, query parameters, body) to the request
// message of its route, as google/api/http.proto says: path variables set the
// fields they name; the body (route body "*": the whole request; "f": field
// f) is protobuf's canonical JSON mapping (JsonStringToMessage, unknown
// fields refused); the other fields are query parameters, named by their
// proto name or lowerCamelCase JSON name, dotted into nested messages
// ("options.hidden"), repeated fields as repeated parameters
// (?item_ids=1&item_ids=2), converted through the field descriptors
// (integers, floating point incl. NaN/Infinity, true/false, enum names or
// numbers). A path value overrides the same field in the body.
//
// Transport-free, thread-safe and deterministic: the fuzz target calls it.

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"
#include "server/http/routes.h"

namespace rbmrec::server::http {

// Fills `request` (of route.method's input type, cleared by the caller)
// from the path bindings, the query parameters (decoded, in order) and the
// body. InvalidArgument naming the problem: malformed JSON (protobuf's
// message, prefixed "request body: "), an unknown query parameter or one
// for a field set by the path or body, a value that does not convert
// ("query parameter n: 'x' is not an int32"), invalid UTF-8, a body on a
// route that takes none.
absl::Status BuildRequest(const Route& route, const Bindings& bindings,
                          const Bindings& query, absl::string_view body,
                          google::protobuf::Message* request);

}  // namespace rbmrec::server::http

#endif  // RBMREC_SERVER_HTTP_REQUEST_MAPPING_H_
