#ifndef RBMREC_SERVER_HTTP_OPENAPI_H_
#define RBMREC_SERVER_HTTP_OPENAPI_H_

// The OpenAPI 3.0 document of the HTTP routes (GET /openapi.json), generated
// from the same descriptors as the router: one operation per route (path
// variables as path parameters, the fields neither in the path nor in the
// body as query parameters, the body's schema), a schema per message in
// protobuf's JSON mapping (lowerCamelCase names; 64-bit integers as
// strings; enums as names), the error body (http_status.h) and bearer
// tokens. The generated descriptor pool keeps no comments, so there are no
// descriptions from the .proto. Printed by protobuf's JSON printer from a
// google.protobuf.Struct. Thread-safe (pure).

#include <string>

#include "google/protobuf/descriptor.h"
#include "server/http/routes.h"

namespace rbmrec::server::http {

std::string OpenApiJson(const google::protobuf::ServiceDescriptor& service,
                        const Router& router);

}  // namespace rbmrec::server::http

#endif  // RBMREC_SERVER_HTTP_OPENAPI_H_
