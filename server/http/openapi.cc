#include "server/http/openapi.h"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace rbmrec::server::http {

namespace pb = ::google::protobuf;

namespace {

using Fields = pb::Map<std::string, pb::Value>;

Fields& Obj(pb::Value& v) {
  return *v.mutable_struct_value()->mutable_fields();
}

pb::Value Str(absl::string_view s) {
  pb::Value v;
  v.set_string_value(std::string(s));
  return v;
}

pb::Value RefTo(absl::string_view schema) {
  pb::Value v;
  Obj(v)["$ref"] = Str(absl::StrCat("#/components/schemas/", schema));
  return v;
}

pb::Value Ref(const pb::Descriptor* type) { return RefTo(type->full_name()); }

pb::Value TypeSchema(absl::string_view type, absl::string_view format = "") {
  pb::Value v;
  Obj(v)["type"] = Str(type);
  if (!format.empty()) Obj(v)["format"] = Str(format);
  return v;
}

// The schema of one value of `field` (not the repeated/map wrapper).
pb::Value ValueSchema(const pb::FieldDescriptor* field) {
  switch (field->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_INT32:
      return TypeSchema("integer", "int32");
    case pb::FieldDescriptor::CPPTYPE_UINT32:
      return TypeSchema("integer", "int64");
    case pb::FieldDescriptor::CPPTYPE_INT64:
      return TypeSchema("string", "int64");
    case pb::FieldDescriptor::CPPTYPE_UINT64:
      return TypeSchema("string", "uint64");
    case pb::FieldDescriptor::CPPTYPE_DOUBLE:
      return TypeSchema("number", "double");
    case pb::FieldDescriptor::CPPTYPE_FLOAT:
      return TypeSchema("number", "float");
    case pb::FieldDescriptor::CPPTYPE_BOOL:
      return TypeSchema("boolean");
    case pb::FieldDescriptor::CPPTYPE_STRING:
      return field->type() == pb::FieldDescriptor::TYPE_BYTES
                 ? TypeSchema("string", "byte")
                 : TypeSchema("string");
    case pb::FieldDescriptor::CPPTYPE_ENUM: {
      pb::Value v = TypeSchema("string");
      pb::ListValue* names = Obj(v)["enum"].mutable_list_value();
      for (int i = 0; i < field->enum_type()->value_count(); ++i) {
        names->add_values()->set_string_value(
            field->enum_type()->value(i)->name());
      }
      return v;
    }
    case pb::FieldDescriptor::CPPTYPE_MESSAGE:
      return Ref(field->message_type());
  }
  return TypeSchema("string");
}

pb::Value FieldSchema(const pb::FieldDescriptor* field) {
  if (field->is_map()) {
    pb::Value v = TypeSchema("object");
    Obj(v)["additionalProperties"] =
        ValueSchema(field->message_type()->map_value());
    return v;
  }
  if (field->is_repeated()) {
    pb::Value v = TypeSchema("array");
    Obj(v)["items"] = ValueSchema(field);
    return v;
  }
  return ValueSchema(field);
}

void AddSchema(const pb::Descriptor* type, Fields& schemas) {
  if (schemas.count(type->full_name()) > 0) return;
  pb::Value& schema = schemas[type->full_name()];
  Obj(schema)["type"] = Str("object");
  Fields& properties = Obj(Obj(schema)["properties"]);
  std::vector<const pb::Descriptor*> nested;
  for (int i = 0; i < type->field_count(); ++i) {
    const pb::FieldDescriptor* f = type->field(i);
    properties[f->json_name()] = FieldSchema(f);
    if (f->message_type() != nullptr && !f->is_map()) {
      nested.push_back(f->message_type());
    }
  }
  for (const pb::Descriptor* n : nested) AddSchema(n, schemas);
}

void AddParameter(pb::ListValue* list, const std::string& name, const char* in,
                  pb::Value schema) {
  pb::Value& p = *list->add_values();
  Obj(p)["name"] = Str(name);
  Obj(p)["in"] = Str(in);
  if (std::string(in) == "path") Obj(p)["required"].set_bool_value(true);
  Obj(p)["schema"] = std::move(schema);
}

// Query parameters: the scalar (and repeated scalar) fields of `type` not
// set by the path or body, dotted into singular messages.
void AddQuery(const pb::Descriptor* type, const std::string& prefix,
              const std::set<std::string>& taken, int depth,
              pb::ListValue* list) {
  for (int i = 0; i < type->field_count(); ++i) {
    const pb::FieldDescriptor* f = type->field(i);
    const std::string name = prefix + f->name();
    if (taken.count(name) > 0 || f->is_map()) continue;
    if (f->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE) {
      AddParameter(list, name, "query", FieldSchema(f));
    } else if (!f->is_repeated() && depth < 3) {
      AddQuery(f->message_type(), name + ".", taken, depth + 1, list);
    }
  }
}

pb::Value Operation(const Route& route, int index) {
  const pb::MethodDescriptor* m = route.method;
  pb::Value op;
  Obj(op)["operationId"] =
      Str(route.generic ? absl::StrCat(m->name(), "_generic")
          : index == 0  ? std::string(m->name())
                        : absl::StrCat(m->name(), "_", index));
  Obj(op)["summary"] = Str(m->full_name());
  pb::ListValue* params = Obj(op)["parameters"].mutable_list_value();
  std::set<std::string> taken;
  for (const PathTemplate::Segment& s : route.path.segments()) {
    if (s.kind != PathTemplate::Segment::kVariable) continue;
    taken.insert(s.text);
    AddParameter(params, s.text, "path", TypeSchema("string"));
  }
  if (route.body.empty()) {
    AddQuery(m->input_type(), "", taken, 0, params);
  } else if (route.body != "*") {
    taken.insert(route.body);
    AddQuery(m->input_type(), "", taken, 0, params);
  }
  if (!route.body.empty()) {
    pb::Value& body = Obj(op)["requestBody"];
    Obj(body)["required"].set_bool_value(false);
    const pb::FieldDescriptor* field =
        route.body == "*" ? nullptr
                          : m->input_type()->FindFieldByName(route.body);
    Obj(Obj(Obj(body)["content"])["application/json"])["schema"] =
        field != nullptr ? FieldSchema(field) : Ref(m->input_type());
  }
  Fields& responses = Obj(Obj(op)["responses"]);
  pb::Value& ok = responses["200"];
  Obj(ok)["description"] =
      Str(m->server_streaming()
              ? "server-sent events, one JSON message per `data:` line"
              : "the response message");
  Obj(Obj(Obj(
      ok)["content"])[m->server_streaming() ? "text/event-stream"
                                            : "application/json"])["schema"] =
      Ref(m->output_type());
  pb::Value& error = responses["default"];
  Obj(error)["description"] = Str("an error (docs/http.md)");
  Obj(Obj(Obj(error)["content"])["application/json"])["schema"] =
      RefTo("Error");
  return op;
}

pb::Value ErrorSchema() {
  pb::Value inner = TypeSchema("object");
  Fields& p = Obj(Obj(inner)["properties"]);
  p["code"] = TypeSchema("integer", "int32");
  p["status"] = TypeSchema("string");
  p["message"] = TypeSchema("string");
  p["reason"] = TypeSchema("string");
  p["leader"] = TypeSchema("string");
  pb::Value outer = TypeSchema("object");
  Obj(Obj(outer)["properties"])["error"] = std::move(inner);
  return outer;
}

// "/v1/x/{f=**}:verb" -> "/v1/x/{f}:verb".
std::string OpenApiPath(const PathTemplate& t) {
  std::string out;
  bool skip = false;
  for (char c : t.text()) {
    if (c == '=') skip = true;
    if (c == '}') skip = false;
    if (!skip) out += c;
  }
  return out;
}

}  // namespace

std::string OpenApiJson(const pb::ServiceDescriptor& service,
                        const Router& router) {
  pb::Value doc;
  Fields& d = Obj(doc);
  d["openapi"] = Str("3.0.3");
  Fields& info = Obj(d["info"]);
  info["title"] = Str(service.full_name());
  info["version"] = Str("v1");
  info["description"] =
      Str("rbmrec's HTTP/JSON API: protobuf's JSON mapping of "
          "proto/rbmrec.proto, routes from its google.api.http options");
  Fields& components = Obj(d["components"]);
  Fields& bearer = Obj(Obj(components["securitySchemes"])["bearer"]);
  bearer["type"] = Str("http");
  bearer["scheme"] = Str("bearer");
  pb::Value requirement;
  Obj(requirement)["bearer"].mutable_list_value();
  *d["security"].mutable_list_value()->add_values() = requirement;
  Fields& schemas = Obj(components["schemas"]);
  schemas["Error"] = ErrorSchema();
  Fields& paths = Obj(d["paths"]);
  std::map<const pb::MethodDescriptor*, int> seen;
  for (const Route& r : router.routes()) {
    AddSchema(r.method->input_type(), schemas);
    AddSchema(r.method->output_type(), schemas);
    const int index = r.generic ? 0 : seen[r.method]++;
    Obj(paths[OpenApiPath(r.path)])[absl::AsciiStrToLower(r.http_method)] =
        Operation(r, index);
  }
  std::string out;
  pb::util::JsonPrintOptions options;
  options.add_whitespace = true;
  (void)pb::util::MessageToJsonString(doc.struct_value(), &out, options);
  return out;
}

}  // namespace rbmrec::server::http
