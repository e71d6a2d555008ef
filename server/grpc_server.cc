#include "server/grpc_server.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "proto/rbmrec.grpc.pb.h"
#include "server/log.h"
#include "server/status.h"

namespace rbmrec::server {

// Each handler: call the service, copy the response, map the status.
//
// PredictRatings and Recommend use the callback API: they never block (model
// snapshot + in-memory caches; at most one short read-connection query on a
// cache miss), so they run inline on gRPC's event threads - no hand-off to a
// sync-server worker thread, which on 2 cores cost more CPU than the
// prediction itself. Everything that writes SQLite (fsync) or streams for a
// long time stays on the synchronous thread pool.
using HandlerBase = v1::Rbmrec::WithCallbackMethod_PredictRatings<
    v1::Rbmrec::WithCallbackMethod_Recommend<v1::Rbmrec::Service>>;

class GrpcServer::Handler final : public HandlerBase {
 public:
  explicit Handler(RbmrecService* service) : service_(service) {}

  grpc::Status AddRatings(grpc::ServerContext* context,
                          grpc::ServerReader<v1::AddRatingsRequest>* reader,
                          v1::AddRatingsResponse* response) override {
    RbmrecService::AddRatingsSession session = service_->StartAddRatings();
    v1::AddRatingsRequest batch;
    while (reader->Read(&batch)) {
      absl::Status s = session.AddBatch(batch);
      if (!s.ok()) return ToGrpcStatus(s);
    }
    if (context->IsCancelled()) {
      Log(LogLevel::kInfo, "add_ratings_client_gone",
          {F("batches_committed", session.response().batches())});
      return ToGrpcStatus(
          absl::CancelledError("the client went away; committed batches stay"));
    }
    *response = session.response();
    return grpc::Status::OK;
  }

  grpc::Status DeleteRatings(grpc::ServerContext*,
                             const v1::DeleteRatingsRequest* request,
                             v1::DeleteRatingsResponse* response) override {
    return Reply(service_->DeleteRatings(*request), response);
  }
  grpc::Status DeleteUser(grpc::ServerContext*,
                          const v1::DeleteUserRequest* request,
                          v1::DeleteUserResponse* response) override {
    return Reply(service_->DeleteUser(*request), response);
  }
  grpc::Status PutItems(grpc::ServerContext*,
                        const v1::PutItemsRequest* request,
                        v1::PutItemsResponse* response) override {
    return Reply(service_->PutItems(*request), response);
  }

  grpc::Status Train(grpc::ServerContext* context,
                     const v1::TrainRequest* request,
                     grpc::ServerWriter<v1::TrainProgress>* writer) override {
    // The job keeps running when the client goes away (see the .proto).
    absl::Status s = service_->Train(*request, [&](const v1::TrainProgress& p) {
      if (context->IsCancelled()) return false;
      return writer->Write(p);
    });
    return ToGrpcStatus(s);
  }

  grpc::Status CancelTraining(grpc::ServerContext*,
                              const v1::CancelTrainingRequest* request,
                              v1::CancelTrainingResponse* response) override {
    return Reply(service_->CancelTraining(*request), response);
  }
  grpc::ServerUnaryReactor* PredictRatings(
      grpc::CallbackServerContext* context,
      const v1::PredictRatingsRequest* request,
      v1::PredictRatingsResponse* response) override {
    return FinishNow(context,
                     Reply(service_->PredictRatings(*request), response));
  }
  grpc::ServerUnaryReactor* Recommend(
      grpc::CallbackServerContext* context, const v1::RecommendRequest* request,
      v1::RecommendResponse* response) override {
    return FinishNow(context, Reply(service_->Recommend(*request), response));
  }
  grpc::Status ListModels(grpc::ServerContext*,
                          const v1::ListModelsRequest* request,
                          v1::ListModelsResponse* response) override {
    return Reply(service_->ListModels(*request), response);
  }
  grpc::Status ActivateModel(grpc::ServerContext*,
                             const v1::ActivateModelRequest* request,
                             v1::ModelInfo* response) override {
    return Reply(service_->ActivateModel(*request), response);
  }
  grpc::Status GetStats(grpc::ServerContext*,
                        const v1::GetStatsRequest* request,
                        v1::GetStatsResponse* response) override {
    return Reply(service_->GetStats(*request), response);
  }

 private:
  static grpc::ServerUnaryReactor* FinishNow(
      grpc::CallbackServerContext* context, const grpc::Status& status) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(status);
    return reactor;
  }

  template <typename T>
  static grpc::Status Reply(absl::StatusOr<T> result, T* response) {
    if (!result.ok()) return ToGrpcStatus(result.status());
    *response = std::move(*result);
    return grpc::Status::OK;
  }

  RbmrecService* service_;
};

absl::StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Start(
    RbmrecService* service, const GrpcServerOptions& options) {
  std::unique_ptr<GrpcServer> server(new GrpcServer());
  server->handler_ = std::make_unique<Handler>(service);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, grpc::InsecureServerCredentials(),
                           &server->port_);
  builder.RegisterService(server->handler_.get());
  const int max_bytes = options.max_message_mb * 1024 * 1024;
  builder.SetMaxReceiveMessageSize(max_bytes);
  builder.SetMaxSendMessageSize(max_bytes);
  if (options.threads > 0) {
    grpc::ResourceQuota quota("rbmrec");
    quota.SetMaxThreads(options.threads);
    builder.SetResourceQuota(quota);
  }
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options.listen,
                     " (address in use, or not a valid host:port?)"));
  }
  // "" (the whole server) is SERVING by default; name our service too.
  if (grpc::HealthCheckServiceInterface* health =
          server->server_->GetHealthCheckService()) {
    health->SetServingStatus(v1::Rbmrec::service_full_name(), true);
  }
  return server;
}

GrpcServer::~GrpcServer() {
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now());
    server_->Wait();
  }
}

void GrpcServer::Shutdown(std::chrono::system_clock::time_point deadline) {
  if (server_ == nullptr) return;
  if (grpc::HealthCheckServiceInterface* health =
          server_->GetHealthCheckService()) {
    health->Shutdown();
  }
  server_->Shutdown(deadline);
  server_->Wait();
  server_.reset();
}

}  // namespace rbmrec::server
