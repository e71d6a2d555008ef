#include "server/http/request_mapping.h"

#include <cmath>
#include <cstdint>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/error_reason.h"
#include "core/utf8.h"
#include "google/protobuf/util/json_util.h"

namespace rbmrec::server::http {

namespace pb = ::google::protobuf;

namespace {

absl::Status Bad(absl::string_view what, absl::string_view name,
                 absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(what, " ", name, ": ", why));
}

// Finds the field at `path` from `message`, creating the parent messages.
// Null when a part is unknown, or a non-last part is not a singular
// message field.
const pb::FieldDescriptor* ResolvePath(absl::string_view path,
                                       pb::Message** message) {
  const pb::FieldDescriptor* field = nullptr;
  bool first = true;
  for (absl::string_view part : absl::StrSplit(path, '.')) {
    if (!first) {
      if (field->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE ||
          field->is_repeated()) {
        return nullptr;
      }
      *message = (*message)->GetReflection()->MutableMessage(*message, field);
    }
    first = false;
    const pb::Descriptor* type = (*message)->GetDescriptor();
    field = FieldNamed(type, part);
    if (field == nullptr) return nullptr;
  }
  return field;
}

template <typename T>
bool ParseInt(absl::string_view text, T* out) {
  return absl::SimpleAtoi(text, out);
}

// Sets (or, repeated, adds) `field` of `message` from `text`.
absl::Status SetScalar(pb::Message* message, const pb::FieldDescriptor* field,
                       absl::string_view text, absl::string_view what,
                       absl::string_view name) {
  const pb::Reflection* r = message->GetReflection();
  const bool rep = field->is_repeated();
  auto fail = [&](absl::string_view type) {
    return Bad(what, name, absl::StrCat("'", text, "' is not ", type));
  };
  switch (field->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_INT32: {
      int32_t v;
      if (!ParseInt(text, &v)) return fail("an int32");
      rep ? r->AddInt32(message, field, v) : r->SetInt32(message, field, v);
      break;
    }
    case pb::FieldDescriptor::CPPTYPE_INT64: {
      int64_t v;
      if (!ParseInt(text, &v)) return fail("an int64");
      rep ? r->AddInt64(message, field, v) : r->SetInt64(message, field, v);
      break;
    }
    case pb::FieldDescriptor::CPPTYPE_UINT32: {
      uint32_t v;
      if (!ParseInt(text, &v)) return fail("a uint32");
      rep ? r->AddUInt32(message, field, v) : r->SetUInt32(message, field, v);
      break;
    }
    case pb::FieldDescriptor::CPPTYPE_UINT64: {
      uint64_t v;
      if (!ParseInt(text, &v)) return fail("a uint64");
      rep ? r->AddUInt64(message, field, v) : r->SetUInt64(message, field, v);
      break;
    }
    case pb::FieldDescriptor::CPPTYPE_DOUBLE:
    case pb::FieldDescriptor::CPPTYPE_FLOAT: {
      double v;
      if (!absl::SimpleAtod(text, &v)) return fail("a number");
      if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_DOUBLE) {
        rep ? r->AddDouble(message, field, v) : r->SetDouble(message, field, v);
      } else {
        const auto f = static_cast<float>(v);
        rep ? r->AddFloat(message, field, f) : r->SetFloat(message, field, f);
      }
      break;
    }
    case pb::FieldDescriptor::CPPTYPE_BOOL: {
      bool v;
      if (text == "true" || text == "1") {
        v = true;
      } else if (text == "false" || text == "0") {
        v = false;
      } else {
        return fail("true or false");
      }
      rep ? r->AddBool(message, field, v) : r->SetBool(message, field, v);
      break;
    }
    case pb::FieldDescriptor::CPPTYPE_ENUM: {
      const pb::EnumValueDescriptor* value =
          field->enum_type()->FindValueByName(std::string(text));
      int32_t number;
      if (value == nullptr && ParseInt(text, &number)) {
        value = field->enum_type()->FindValueByNumber(number);
      }
      if (value == nullptr) {
        return fail(absl::StrCat("a value of ", field->enum_type()->name()));
      }
      rep ? r->AddEnum(message, field, value)
          : r->SetEnum(message, field, value);
      break;
    }
    case pb::FieldDescriptor::CPPTYPE_STRING: {
      if (field->type() == pb::FieldDescriptor::TYPE_STRING &&
          !IsValidUtf8(std::string_view(text.data(), text.size()))) {
        return Bad(what, name, "not valid UTF-8");
      }
      rep ? r->AddString(message, field, std::string(text))
          : r->SetString(message, field, std::string(text));
      break;
    }
    case pb::FieldDescriptor::CPPTYPE_MESSAGE:
      return Bad(what, name,
                 absl::StrCat("is a message field (",
                              field->message_type()->full_name(),
                              "): send it in a JSON body"));
  }
  return absl::OkStatus();
}

// The field at dotted `path` (proto or JSON names) of `type`, or null.
const pb::FieldDescriptor* LeafField(const pb::Descriptor* type,
                                     absl::string_view path) {
  const pb::FieldDescriptor* field = nullptr;
  for (absl::string_view part : absl::StrSplit(path, '.')) {
    if (type == nullptr) return nullptr;
    field = FieldNamed(type, part);
    if (field == nullptr) return nullptr;
    type = field->message_type();
  }
  return field;
}

// Whether the query parameter `name` names a field the body or the path
// already sets.
bool Covered(const Route& route, const Bindings& bindings,
             absl::string_view name) {
  if (route.body == "*") return true;
  const pb::Descriptor* type = route.method->input_type();
  if (!route.body.empty() && LeafField(type, name.substr(0, name.find('.'))) ==
                                 type->FindFieldByName(route.body)) {
    return true;
  }
  const pb::FieldDescriptor* leaf = LeafField(type, name);
  for (const auto& binding : bindings) {
    if (LeafField(type, binding.first) == leaf) return true;
  }
  return false;
}

absl::Status ParseBody(const Route& route, absl::string_view body,
                       pb::Message* request) {
  if (absl::StripAsciiWhitespace(body).empty()) return absl::OkStatus();
  if (route.body.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        route.http_method, " ", route.path.text(),
        " takes no request body (its fields are query parameters)"));
  }
  pb::Message* target = request;
  if (route.body != "*") {
    const pb::FieldDescriptor* field =
        request->GetDescriptor()->FindFieldByName(route.body);
    target = request->GetReflection()->MutableMessage(request, field);
  }
  pb::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto status = pb::util::JsonStringToMessage(
      pb::StringPiece(body.data(), body.size()), target, options);
  if (!status.ok()) {
    const auto message = status.message();
    return WithReason(absl::InvalidArgumentError(absl::StrCat(
                          "request body: not a valid JSON ",
                          target->GetTypeName(), " (protobuf's JSON mapping): ",
                          absl::string_view(message.data(), message.size()))),
                      kReasonMalformedMessage);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status BuildRequest(const Route& route, const Bindings& bindings,
                          const Bindings& query, absl::string_view body,
                          pb::Message* request) {
  if (absl::Status s = ParseBody(route, body, request); !s.ok()) return s;
  for (const auto& [path, value] : bindings) {
    pb::Message* target = request;
    const pb::FieldDescriptor* field = ResolvePath(path, &target);
    if (field == nullptr) {
      return Bad("path variable", path, "no such field");  // Build checked
    }
    if (absl::Status s = SetScalar(target, field, value, "path variable", path);
        !s.ok()) {
      return s;
    }
  }
  for (const auto& [name, value] : query) {
    pb::Message* target = request;
    const pb::FieldDescriptor* field = ResolvePath(name, &target);
    if (field == nullptr) {
      return Bad("unknown query parameter", absl::StrCat("'", name, "'"),
                 absl::StrCat("not a field of ",
                              request->GetDescriptor()->full_name()));
    }
    if (Covered(route, bindings, name)) {
      return Bad("query parameter", absl::StrCat("'", name, "'"),
                 route.body == "*"
                     ? "this route takes every field in the JSON body"
                     : "the field is set by the path or the body");
    }
    if (absl::Status s =
            SetScalar(target, field, value, "query parameter", name);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace rbmrec::server::http
