#include "server/transport/reflection_v1.h"

#include <algorithm>
#include <deque>
#include <memory>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
#include "grpcpp/impl/server_builder_option.h"
#include "grpcpp/impl/server_builder_plugin.h"
#include "grpcpp/impl/server_initializer.h"
#include "grpcpp/support/method_handler.h"

namespace rbmrec::server {
namespace {

namespace pb = ::google::protobuf;
using ::grpc::reflection::v1::ServerReflectionRequest;
using ::grpc::reflection::v1::ServerReflectionResponse;

void SetError(grpc::StatusCode code, const std::string& message,
              ServerReflectionResponse* response) {
  response->mutable_error_response()->set_error_code(static_cast<int>(code));
  response->mutable_error_response()->set_error_message(message);
}

// `file` and its transitive dependencies that are not in `sent`, `file`
// first; adds them to `sent`.
void AddFileAndDeps(const pb::FileDescriptor* file,
                    absl::flat_hash_set<std::string>* sent,
                    ServerReflectionResponse* response) {
  auto* out = response->mutable_file_descriptor_response();
  std::deque<const pb::FileDescriptor*> queue = {file};
  while (!queue.empty()) {
    const pb::FileDescriptor* f = queue.front();
    queue.pop_front();
    if (!sent->insert(f->name()).second) continue;
    pb::FileDescriptorProto proto;
    f->CopyTo(&proto);
    proto.SerializeToString(out->add_file_descriptor_proto());
    for (int i = 0; i < f->dependency_count(); ++i) {
      queue.push_back(f->dependency(i));
    }
  }
}

constexpr char kV1Service[] = "grpc.reflection.v1.ServerReflection";
constexpr char kV1alphaService[] = "grpc.reflection.v1alpha.ServerReflection";
constexpr char kV1alphaMethod[] =
    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";

// grpc.reflection.v1alpha.ServerReflection: routes its one method to a
// ReflectionV1Service (the messages are the same on the wire).
class ReflectionV1alphaService final : public grpc::Service {
 public:
  explicit ReflectionV1alphaService(const CallGuard* guard)
      : impl_(kV1alphaService, guard) {
    AddMethod(new grpc::internal::RpcServiceMethod(
        kV1alphaMethod, grpc::internal::RpcMethod::BIDI_STREAMING,
        new grpc::internal::BidiStreamingHandler<ReflectionV1Service,
                                                 ServerReflectionRequest,
                                                 ServerReflectionResponse>(
            [](ReflectionV1Service* service, grpc::ServerContext* context,
               grpc::ServerReaderWriter<ServerReflectionResponse,
                                        ServerReflectionRequest>* stream) {
              return service->ServerReflectionInfo(context, stream);
            },
            &impl_)));
  }
  void SetServiceList(const std::vector<std::string>* services) {
    impl_.SetServiceList(services);
  }

 private:
  ReflectionV1Service impl_;
};

// Registers both reflection services on the server being built and hands
// them the server's service list.
class ReflectionPlugin final : public grpc::ServerBuilderPlugin {
 public:
  explicit ReflectionPlugin(const CallGuard* guard)
      : v1_(std::make_shared<ReflectionV1Service>(kV1Service, guard)),
        v1alpha_(std::make_shared<ReflectionV1alphaService>(guard)) {}
  std::string name() override { return "rbmrec_reflection"; }
  void InitServer(grpc::ServerInitializer* si) override {
    si->RegisterService(v1_);
    si->RegisterService(v1alpha_);
  }
  void Finish(grpc::ServerInitializer* si) override {
    v1_->SetServiceList(si->GetServiceList());
    v1alpha_->SetServiceList(si->GetServiceList());
  }
  void ChangeArguments(const std::string&, void*) override {}
  bool has_sync_methods() const override { return true; }
  bool has_async_methods() const override { return false; }

 private:
  std::shared_ptr<ReflectionV1Service> v1_;
  std::shared_ptr<ReflectionV1alphaService> v1alpha_;
};

// The name of gRPC's v1alpha plugin. libgrpc++_reflection registers it for
// every ServerBuilder of the process from a static initializer.
constexpr char kV1alphaPluginName[] = "proto_server_reflection";

// Sets one builder's reflection plugins: both versions, or none.
class ReflectionOption final : public grpc::ServerBuilderOption {
 public:
  ReflectionOption(bool enabled, const CallGuard* guard)
      : enabled_(enabled), guard_(guard) {}
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>*
                         plugins) override {
    plugins->erase(
        std::remove_if(plugins->begin(), plugins->end(),
                       [](const std::unique_ptr<grpc::ServerBuilderPlugin>& p) {
                         return p->name() == kV1alphaPluginName;
                       }),
        plugins->end());
    if (!enabled_) return;
    plugins->push_back(std::make_unique<ReflectionPlugin>(guard_));
  }

 private:
  const bool enabled_;
  const CallGuard* const guard_;
};

}  // namespace

grpc::Status ReflectionV1Service::ServerReflectionInfo(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<ServerReflectionResponse, ServerReflectionRequest>*
        stream) {
  if (guard_ != nullptr) {
    grpc::Status s = guard_->Check(context, service_name_,
                                   "ServerReflectionInfo", kReflectionRole);
    if (!s.ok()) return s;
  }
  const pb::DescriptorPool* pool = pb::DescriptorPool::generated_pool();
  absl::flat_hash_set<std::string> sent;  // files sent on this stream
  ServerReflectionRequest request;
  while (stream->Read(&request)) {
    ServerReflectionResponse response;
    response.set_valid_host(request.host());
    *response.mutable_original_request() = request;
    switch (request.message_request_case()) {
      case ServerReflectionRequest::kFileByFilename: {
        const pb::FileDescriptor* file =
            pool->FindFileByName(request.file_by_filename());
        if (file == nullptr) {
          SetError(grpc::StatusCode::NOT_FOUND,
                   absl::StrCat("file not found: ", request.file_by_filename()),
                   &response);
        } else {
          AddFileAndDeps(file, &sent, &response);
        }
        break;
      }
      case ServerReflectionRequest::kFileContainingSymbol: {
        const pb::FileDescriptor* file =
            pool->FindFileContainingSymbol(request.file_containing_symbol());
        if (file == nullptr) {
          SetError(grpc::StatusCode::NOT_FOUND,
                   absl::StrCat("symbol not found: ",
                                request.file_containing_symbol()),
                   &response);
        } else {
          AddFileAndDeps(file, &sent, &response);
        }
        break;
      }
      case ServerReflectionRequest::kFileContainingExtension: {
        const auto& ext = request.file_containing_extension();
        const pb::Descriptor* type =
            pool->FindMessageTypeByName(ext.containing_type());
        const pb::FieldDescriptor* field =
            type == nullptr
                ? nullptr
                : pool->FindExtensionByNumber(type, ext.extension_number());
        if (field == nullptr) {
          SetError(grpc::StatusCode::NOT_FOUND,
                   absl::StrCat("extension not found: ", ext.containing_type(),
                                " #", ext.extension_number()),
                   &response);
        } else {
          AddFileAndDeps(field->file(), &sent, &response);
        }
        break;
      }
      case ServerReflectionRequest::kAllExtensionNumbersOfType: {
        const pb::Descriptor* type = pool->FindMessageTypeByName(
            request.all_extension_numbers_of_type());
        if (type == nullptr) {
          SetError(grpc::StatusCode::NOT_FOUND,
                   absl::StrCat("type not found: ",
                                request.all_extension_numbers_of_type()),
                   &response);
        } else {
          std::vector<const pb::FieldDescriptor*> extensions;
          pool->FindAllExtensions(type, &extensions);
          auto* out = response.mutable_all_extension_numbers_response();
          out->set_base_type_name(type->full_name());
          for (const pb::FieldDescriptor* e : extensions) {
            out->add_extension_number(e->number());
          }
        }
        break;
      }
      case ServerReflectionRequest::kListServices: {
        auto* out = response.mutable_list_services_response();
        if (services_ != nullptr) {
          for (const std::string& name : *services_) {
            out->add_service()->set_name(name);
          }
        }
        break;
      }
      default:
        SetError(grpc::StatusCode::UNIMPLEMENTED,
                 "the request sets none of the message_request fields",
                 &response);
        break;
    }
    if (!stream->Write(response)) break;
  }
  return grpc::Status::OK;
}

void SetServerReflection(grpc::ServerBuilder* builder, bool enabled,
                         const CallGuard* guard) {
  builder->SetOption(std::make_unique<ReflectionOption>(enabled, guard));
}

}  // namespace rbmrec::server
