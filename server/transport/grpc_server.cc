#include "server/transport/grpc_server.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <string_view>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/error_reason.h"
#include "google/protobuf/descriptor.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/method_handler.h"
#include "proto/health.pb.h"
#include "proto/rbmrec.grpc.pb.h"
#include "server/log.h"
#include "server/security/auth.h"
#include "server/security/call_guard.h"
#include "server/security/listen_policy.h"
#include "server/transport/arena_allocator.h"
#include "server/transport/blocking_executor.h"
#include "server/transport/bulk_stream.h"
#include "server/transport/recommend_wire.h"
#include "server/transport/reflection_v1.h"
#include "server/transport/status.h"

namespace rbmrec::server {

// Each handler: call the service, copy the response, map the status.
//
// PredictRatings, Recommend and SimilarItems use the callback API: with a
// resident model they never block (model snapshot + in-memory caches; at
// most one short point query on the read connection on a cache miss, and
// SimilarItems' index once per snapshot, about a millisecond), so they run
// inline on gRPC's event threads - no hand-off to a sync-server worker
// thread, which on 2 cores cost more CPU (and tail latency) than the answer
// itself. A request for a stored version that is not loaded
// (reading and decoding it takes milliseconds to seconds) runs on a loader
// thread instead (Offload). Recommend with a resident model runs inline too
// when it ranks by p(rated) (a few dozen items scored), else on a small pool
// of ranking threads, where concurrent calls share the passes over the weights
// (core/scoring.cc). Everything that writes SQLite (fsync) or streams for a
// long time stays on the synchronous thread pool.
//
// RecommendAll streams on the callback API too (server/transport/
// bulk_stream.h): its messages are computed on the bulk threads, several at
// once, and written in order as the stream's flow control allows.
//
// Recommend reads its request bytes itself (recommend_wire.h): its id lists,
// often hundreds of ids, stay views of the bytes instead of becoming parsed
// strings.
using HandlerBase = v1::Rbmrec::WithCallbackMethod_PredictRatings<
    v1::Rbmrec::WithRawCallbackMethod_Recommend<
        v1::Rbmrec::WithCallbackMethod_SimilarItems<
            v1::Rbmrec::WithCallbackMethod_RecommendAll<v1::Rbmrec::Service>>>>;

class GrpcServer::Handler final : public HandlerBase {
 public:
  // AddRatings on raw bytes (see grpc_server.h). gRPC 1.51 generates a raw
  // variant of a method only for the async and callback APIs; the commit of
  // a batch writes SQLite (fsync), which must not run on an event thread, so
  // the method keeps a synchronous handler that reads grpc::ByteBuffer
  // messages. MarkMethodStreamed is the Service hook that replaces a sync
  // method's handler (it marks the method BIDI_STREAMING, which the server
  // treats like CLIENT_STREAMING: no message is read before the handler).
  Handler(RbmrecService* service, GrpcServer* owner, const CallGuard* guard)
      : service_(service), owner_(owner), guard_(guard) {
    MarkMethodStreamed(
        kAddRatingsMethodIndex,
        new grpc::internal::ClientStreamingHandler<Handler, grpc::ByteBuffer,
                                                   grpc::ByteBuffer>(
            [](Handler* handler, grpc::ServerContext* context,
               grpc::ServerReader<grpc::ByteBuffer>* reader,
               grpc::ByteBuffer* response) {
              return handler->AddRatingsRaw(context, reader, response);
            },
            this));
    SetMessageAllocatorFor_PredictRatings(&predict_allocator_);
    SetMessageAllocatorFor_SimilarItems(&similar_allocator_);
  }

  grpc::Status DeleteRatings(grpc::ServerContext* context,
                             const v1::DeleteRatingsRequest* request,
                             v1::DeleteRatingsResponse* response) override {
    if (grpc::Status s = Guard(context, "DeleteRatings"); !s.ok()) return s;
    return Reply(context, service_->DeleteRatings(*request), response);
  }
  grpc::Status DeleteUser(grpc::ServerContext* context,
                          const v1::DeleteUserRequest* request,
                          v1::DeleteUserResponse* response) override {
    if (grpc::Status s = Guard(context, "DeleteUser"); !s.ok()) return s;
    return Reply(context, service_->DeleteUser(*request), response);
  }
  grpc::Status PutItems(grpc::ServerContext* context,
                        const v1::PutItemsRequest* request,
                        v1::PutItemsResponse* response) override {
    if (grpc::Status s = Guard(context, "PutItems"); !s.ok()) return s;
    return Reply(context, service_->PutItems(*request), response);
  }

  grpc::Status Train(grpc::ServerContext* context,
                     const v1::TrainRequest* request,
                     grpc::ServerWriter<v1::TrainProgress>* writer) override {
    if (grpc::Status s = Guard(context, "Train"); !s.ok()) return s;
    // The job keeps running when the client goes away (see the .proto).
    absl::Status s = service_->Train(*request, [&](const v1::TrainProgress& p) {
      // Readiness first, so a client that sees SUCCEEDED sees SERVING.
      if (p.state() == v1::TrainProgress::SUCCEEDED) owner_->RefreshHealth();
      if (context->IsCancelled()) return false;
      return writer->Write(p);
    });
    return ToGrpcStatus(s, context);
  }

  grpc::Status CancelTraining(grpc::ServerContext* context,
                              const v1::CancelTrainingRequest* request,
                              v1::CancelTrainingResponse* response) override {
    if (grpc::Status s = Guard(context, "CancelTraining"); !s.ok()) return s;
    return Reply(context, service_->CancelTraining(*request), response);
  }
  grpc::ServerUnaryReactor* PredictRatings(
      grpc::CallbackServerContext* context,
      const v1::PredictRatingsRequest* request,
      v1::PredictRatingsResponse* response) override {
    if (grpc::Status s = Guard(context, "PredictRatings"); !s.ok()) {
      return FinishNow(context, s);
    }
    if (grpc::Status s =
            GuardAdHoc(context, "PredictRatings", request->user_id(),
                       request->ratings_size());
        !s.ok()) {
      return FinishNow(context, s);
    }
    if (service_->PlacePredict(*request).resident) {
      return FinishNow(
          context,
          Reply(context, service_->PredictRatings(*request), response));
    }
    return Offload(context, [=] {
      return Reply(context, service_->PredictRatings(*request), response);
    });
  }
  grpc::ServerUnaryReactor* Recommend(grpc::CallbackServerContext* context,
                                      const grpc::ByteBuffer* bytes,
                                      grpc::ByteBuffer* response) override {
    if (grpc::Status s = Guard(context, "Recommend"); !s.ok()) {
      return FinishNow(context, s);
    }
    // The call's request: its bytes in one slice, the id lists as views of
    // them; shared by the closures that may answer it on another thread.
    auto call = std::make_shared<RecommendCall>();
    // One slice (the usual case for a request this small) is shared, not
    // copied.
    if (!bytes->TrySingleSlice(&call->bytes).ok() &&
        !bytes->DumpToSingleSlice(&call->bytes).ok()) {
      return FinishNow(context,
                       grpc::Status(grpc::StatusCode::INTERNAL,
                                    "Recommend: cannot read the request"));
    }
    if (absl::Status s = SplitRecommendRequest(
            std::string_view(reinterpret_cast<const char*>(call->bytes.begin()),
                             call->bytes.size()),
            &call->request, &call->ids);
        !s.ok()) {
      return FinishNow(context, ToGrpcStatus(s, context));
    }
    const v1::RecommendRequest& request = call->request;
    if (grpc::Status s = GuardAdHoc(context, "Recommend", request.user_id(),
                                    request.ratings_size());
        !s.ok()) {
      return FinishNow(context, s);
    }
    auto answer = [this, context, call, response] {
      return ReplyBytes(context, service_->Recommend(call->request, call->ids),
                        response);
    };
    const Placement place = service_->PlaceRecommend(request);
    if (place.resident && !place.shares_passes) {
      // The p(rated) rankings score a few dozen items: inline, like
      // PredictRatings.
      return FinishNow(context, answer());
    }
    if (place.resident) {
      // On the ranking threads, so that concurrent calls meet in the shared
      // passes over W (core/scoring.cc); two event threads would let at
      // most two calls score at once.
      grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
      if (rankers_.TrySubmit([=] { reactor->Finish(answer()); })) {
        return reactor;
      }
      reactor->Finish(ToGrpcStatus(
          WithReason(absl::ResourceExhaustedError(absl::StrCat(
                         "more than ", kMaxQueuedRankings,
                         " Recommend calls are waiting; retry later")),
                     kReasonLimitExceeded),
          context));
      return reactor;
    }
    return Offload(context, answer);
  }
  grpc::ServerUnaryReactor* SimilarItems(
      grpc::CallbackServerContext* context,
      const v1::SimilarItemsRequest* request,
      v1::SimilarItemsResponse* response) override {
    if (grpc::Status s = Guard(context, "SimilarItems"); !s.ok()) {
      return FinishNow(context, s);
    }
    if (service_->PlaceSimilar(*request).resident) {
      return FinishNow(
          context, Reply(context, service_->SimilarItems(*request), response));
    }
    return Offload(context, [=] {
      return Reply(context, service_->SimilarItems(*request), response);
    });
  }
  grpc::ServerWriteReactor<v1::RecommendAllResponse>* RecommendAll(
      grpc::CallbackServerContext* context,
      const v1::RecommendAllRequest* request) override {
    if (grpc::Status s = Guard(context, "RecommendAll"); !s.ok()) {
      auto* reactor = new FailedStream<v1::RecommendAllResponse>();
      reactor->Finish(s);
      return reactor;
    }
    return StartBulkStream(service_, context, request, &bulk_,
                           kBulkThreads + 2);
  }
  grpc::Status ListModels(grpc::ServerContext* context,
                          const v1::ListModelsRequest* request,
                          v1::ListModelsResponse* response) override {
    if (grpc::Status s = Guard(context, "ListModels"); !s.ok()) return s;
    return Reply(context, service_->ListModels(*request), response);
  }
  grpc::Status ActivateModel(grpc::ServerContext* context,
                             const v1::ActivateModelRequest* request,
                             v1::ModelInfo* response) override {
    if (grpc::Status s = Guard(context, "ActivateModel"); !s.ok()) return s;
    grpc::Status status =
        Reply(context, service_->ActivateModel(*request), response);
    owner_->RefreshHealth();
    return status;
  }
  grpc::Status DeleteModel(grpc::ServerContext* context,
                           const v1::DeleteModelRequest* request,
                           v1::DeleteModelResponse* response) override {
    if (grpc::Status s = Guard(context, "DeleteModel"); !s.ok()) return s;
    return Reply(context, service_->DeleteModel(*request), response);
  }
  grpc::Status PinModel(grpc::ServerContext* context,
                        const v1::PinModelRequest* request,
                        v1::ModelInfo* response) override {
    if (grpc::Status s = Guard(context, "PinModel"); !s.ok()) return s;
    return Reply(context, service_->PinModel(*request), response);
  }
  grpc::Status PruneModels(grpc::ServerContext* context,
                           const v1::PruneModelsRequest* request,
                           v1::PruneModelsResponse* response) override {
    if (grpc::Status s = Guard(context, "PruneModels"); !s.ok()) return s;
    return Reply(context, service_->PruneModels(*request), response);
  }
  grpc::Status GetStats(grpc::ServerContext* context,
                        const v1::GetStatsRequest* request,
                        v1::GetStatsResponse* response) override {
    if (grpc::Status s = Guard(context, "GetStats"); !s.ok()) return s;
    return Reply(context, service_->GetStats(*request), response);
  }
  // One bounded store read each (a user's ratings, an item's row): on the
  // sync threads, like GetStats.
  grpc::Status GetUserRatings(grpc::ServerContext* context,
                              const v1::GetUserRatingsRequest* request,
                              v1::GetUserRatingsResponse* response) override {
    if (grpc::Status s = Guard(context, "GetUserRatings"); !s.ok()) return s;
    return Reply(context, service_->GetUserRatings(*request), response);
  }
  grpc::Status GetItem(grpc::ServerContext* context,
                       const v1::GetItemRequest* request,
                       v1::GetItemResponse* response) override {
    if (grpc::Status s = Guard(context, "GetItem"); !s.ok()) return s;
    return Reply(context, service_->GetItem(*request), response);
  }

 private:
  // Runs `call` (which loads a stored model version, a blocking read and
  // decode) on the loader threads and finishes the call from there.
  // RESOURCE_EXHAUSTED when kMaxQueuedLoads calls already wait.
  grpc::ServerUnaryReactor* Offload(grpc::CallbackServerContext* context,
                                    std::function<grpc::Status()> call) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    if (!loader_.TrySubmit(
            [reactor, call = std::move(call)] { reactor->Finish(call()); })) {
      reactor->Finish(ToGrpcStatus(
          WithReason(absl::ResourceExhaustedError(absl::StrCat(
                         "more than ", kMaxQueuedLoads,
                         " requests for model versions that are not loaded "
                         "are waiting; retry later")),
                     kReasonLimitExceeded),
          context));
    }
    return reactor;
  }

  // The token check of `method` (a method of rbmrec.v1.Rbmrec) for the
  // role the role table (server/security/auth.h) gives it; OK when tokens are
  // off.
  grpc::Status Guard(grpc::ServerContextBase* context,
                     absl::string_view method) const {
    if (!guard_->enabled()) return grpc::Status::OK;
    // Start() checked that every method of the service has a role; a
    // missing one would need admin.
    return guard_->Check(context, v1::Rbmrec::service_full_name(), method,
                         RequiredRole(method).value_or(Role::kAdmin));
  }

  // The privacy rule of docs/security.md: ad-hoc ratings merged over a
  // named user's stored ones need the write role (a read token could
  // otherwise probe the stored ratings); anonymous ad-hoc requests need
  // only the method's role. OK when tokens are off.
  grpc::Status GuardAdHoc(grpc::ServerContextBase* context,
                          absl::string_view method, const std::string& user_id,
                          int adhoc_ratings) const {
    if (!guard_->enabled() || user_id.empty() || adhoc_ratings == 0) {
      return grpc::Status::OK;
    }
    return guard_->Check(
        context, v1::Rbmrec::service_full_name(), method, Role::kWrite,
        absl::StrCat(method,
                     " with ad-hoc ratings merged over a stored user's "
                     "(user_id and ratings both set; send ratings with an "
                     "empty user_id for an anonymous user, which needs read)"));
  }

  // A stream refused before it starts.
  template <typename T>
  class FailedStream final : public grpc::ServerWriteReactor<T> {
   public:
    void OnDone() override { delete this; }
  };

  static grpc::ServerUnaryReactor* FinishNow(
      grpc::CallbackServerContext* context, const grpc::Status& status) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(status);
    return reactor;
  }

  // The generated method order of rbmrec.proto: AddRatings is the first rpc.
  static constexpr int kAddRatingsMethodIndex = 0;

  grpc::Status AddRatingsRaw(grpc::ServerContext* context,
                             grpc::ServerReader<grpc::ByteBuffer>* reader,
                             grpc::ByteBuffer* response) {
    // Before any message of the stream is read.
    if (grpc::Status s = Guard(context, "AddRatings"); !s.ok()) return s;
    RbmrecService::AddRatingsSession session = service_->StartAddRatings();
    grpc::ByteBuffer raw;
    v1::AddRatingsRequest batch;
    int64_t index = 0;  // of the next message in the stream
    while (reader->Read(&raw)) {
      // Deserialize parses strictly (proto3 strings must be UTF-8) and
      // clears `raw`.
      if (!grpc::SerializationTraits<v1::AddRatingsRequest>::Deserialize(&raw,
                                                                         &batch)
               .ok()) {
        return FailAddRatings(
            context, session,
            WithReason(absl::InvalidArgumentError(absl::StrCat(
                           "AddRatings: batch ", index,
                           " (0-based) of the stream is not a valid "
                           "AddRatingsRequest message (malformed protobuf, or "
                           "invalid UTF-8 in a string field); ",
                           CommittedText(session.response(), index))),
                       kReasonMalformedMessage));
      }
      if (absl::Status s = session.AddBatch(batch); !s.ok()) {
        return FailAddRatings(context, session, s);
      }
      ++index;
    }
    if (context->IsCancelled()) {
      return FailAddRatings(context, session,
                            absl::CancelledError(absl::StrCat(
                                "AddRatings: the client went away; ",
                                CommittedText(session.response(), index))));
    }
    bool own_buffer = false;
    return grpc::SerializationTraits<v1::AddRatingsResponse>::Serialize(
        session.response(), response, &own_buffer);
  }

  // What a failed stream has committed, for the status message.
  static std::string CommittedText(const v1::AddRatingsResponse& committed,
                                   int64_t failed_batch) {
    if (committed.batches() == 0) {
      return "no batch of this stream is committed; re-sending it is safe";
    }
    return absl::StrCat("batches 0..", committed.batches() - 1, " (",
                        committed.accepted(),
                        " accepted rows) are committed, batch ", failed_batch,
                        " and later ones are not; re-sending the whole "
                        "stream is safe (upserts)");
  }

  // Fails an AddRatings call: the committed counts as trailing metadata,
  // then the status (with its reason).
  static grpc::Status FailAddRatings(
      grpc::ServerContext* context,
      const RbmrecService::AddRatingsSession& session,
      const absl::Status& status) {
    const v1::AddRatingsResponse& committed = session.response();
    AddCommittedMetadata(context, committed.batches(), committed.accepted());
    Log(LogLevel::kInfo, "add_ratings_failed",
        {F("code", absl::StatusCodeToString(status.code())),
         F("reason", ReasonOf(status)),
         F("batches_committed", committed.batches()),
         F("rows_committed", committed.accepted()),
         F("error", status.message())});
    return ToGrpcStatus(status, context);
  }

  template <typename T>
  static grpc::Status Reply(grpc::ServerContextBase* context,
                            absl::StatusOr<T> result, T* response) {
    if (!result.ok()) return ToGrpcStatus(result.status(), context);
    *response = std::move(*result);
    return grpc::Status::OK;
  }
  // Reply for a raw method: the answer serialized into `response`.
  template <typename T>
  static grpc::Status ReplyBytes(grpc::ServerContextBase* context,
                                 absl::StatusOr<T> result,
                                 grpc::ByteBuffer* response) {
    if (!result.ok()) return ToGrpcStatus(result.status(), context);
    bool own_buffer = false;
    return grpc::SerializationTraits<T>::Serialize(*result, response,
                                                   &own_buffer);
  }

  // A Recommend call's request (see Recommend).
  struct RecommendCall {
    grpc::Slice bytes;
    v1::RecommendRequest request;  // every field but the id lists
    RecommendIdLists ids;          // views of `bytes`
  };

  static constexpr size_t kMaxQueuedLoads = 64;
  static constexpr size_t kMaxQueuedRankings = 4096;
  static constexpr int kRankingThreads = 8;
  // RecommendAll: one thread per core computes messages of the streams
  // (each stream keeps at most kBulkThreads + 2 messages computed or
  // waiting); kMaxQueuedBulk tasks of all streams may wait.
  static inline const int kBulkThreads =
      static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  static constexpr size_t kMaxQueuedBulk = 1024;

  // Requests parsed into arenas (arena_allocator.h); declared before
  // everything that runs calls, so they outlive them.
  ArenaRequestAllocator<v1::PredictRatingsRequest, v1::PredictRatingsResponse>
      predict_allocator_;
  ArenaRequestAllocator<v1::SimilarItemsRequest, v1::SimilarItemsResponse>
      similar_allocator_;
  RbmrecService* service_;
  GrpcServer* owner_;       // for RefreshHealth after a publish
  const CallGuard* guard_;  // owned by owner_
  // Loads of non-resident model versions (one thread: they are rare, and
  // a second load of the same version then finds it cached). Declared last:
  // destroyed first, after running every accepted task.
  BlockingExecutor loader_{1, kMaxQueuedLoads};
  // Recommend with a resident model: the all-item scoring of concurrent
  // calls shares its passes over the weights when they run at once, which
  // needs more threads than gRPC's event threads (as many as cores).
  BlockingExecutor rankers_{kRankingThreads, kMaxQueuedRankings};
  BlockingExecutor bulk_{kBulkThreads, kMaxQueuedBulk};
};

absl::StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Start(
    RbmrecService* service, const GrpcServerOptions& options) {
  std::unique_ptr<GrpcServer> server(new GrpcServer());
  server->options_ = options;
  if (server->options_.health_poll_ms < 1) server->options_.health_poll_ms = 1;
  // Every method of the service must have a role (server/security/auth.h).
  const google::protobuf::ServiceDescriptor* descriptor =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          v1::Rbmrec::service_full_name());
  if (descriptor == nullptr) {
    return absl::InternalError(
        absl::StrCat("no descriptor for ", v1::Rbmrec::service_full_name()));
  }
  if (absl::Status s = CheckRoleTable(*descriptor); !s.ok()) return s;
  server->guard_ = std::make_unique<CallGuard>(options.authorizer);
  server->handler_ =
      std::make_unique<Handler>(service, server.get(), server->guard_.get());
  // Links health.proto's generated code into the binary, which registers
  // grpc.health.v1 in the generated descriptor pool: reflection resolves the
  // health service (gRPC's built-in health service has no descriptor).
  (void)grpc::health::v1::HealthCheckRequest::descriptor();
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  SetServerReflection(&builder, options.reflection, server->guard_.get());
  builder.AddListeningPort(options.listen,
                           options.credentials != nullptr
                               ? options.credentials
                               : grpc::InsecureServerCredentials(),
                           &server->port_);
  // gRPC sets SO_REUSEPORT by default, which lets a second server bind the
  // same port and the kernel split connections between the two: one server
  // per port.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterService(server->handler_.get());
  const int max_bytes = options.max_message_mb * 1024 * 1024;
  builder.SetMaxReceiveMessageSize(max_bytes);
  builder.SetMaxSendMessageSize(max_bytes);
  if (options.threads > 0) {
    grpc::ResourceQuota quota("rbmrec");
    quota.SetMaxThreads(options.threads);
    builder.SetResourceQuota(quota);
  }
  if (options.interceptors) {
    builder.experimental().SetInterceptorCreators(options.interceptors());
  }
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    const std::string problem = BindProblem(options.listen);
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", options.listen, ": ",
        problem.empty() ? "not a valid HOST:PORT, or not an address of this "
                          "host"
                        : problem));
  }
  // "" (the whole server) is SERVING by default: liveness. The service's
  // readiness is set now and then kept current by the health thread.
  if (grpc::HealthCheckServiceInterface* health =
          server->server_->GetHealthCheckService()) {
    absl::MutexLock lock(&server->health_mu_);
    server->serving_ = !server->options_.serving || server->options_.serving();
    health->SetServingStatus(v1::Rbmrec::service_full_name(), server->serving_);
    if (server->options_.serving) {
      server->health_thread_ =
          std::thread([s = server.get()] { s->HealthLoop(); });
    }
  }
  return server;
}

void GrpcServer::HealthLoop() {
  while (true) {
    {
      absl::MutexLock lock(&health_mu_);
      if (health_mu_.AwaitWithTimeout(
              absl::Condition(&health_stop_),
              absl::Milliseconds(options_.health_poll_ms))) {
        return;
      }
    }
    RefreshHealth();
  }
}

void GrpcServer::RefreshHealth() {
  if (!options_.serving || server_ == nullptr) return;
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  if (health == nullptr) return;
  absl::MutexLock lock(&health_mu_);
  if (health_stop_) return;
  const bool now = options_.serving();
  if (now == serving_) return;
  serving_ = now;
  health->SetServingStatus(v1::Rbmrec::service_full_name(), now);
  Log(LogLevel::kInfo, "health_changed",
      {F("service", v1::Rbmrec::service_full_name()),
       F("status", now ? "SERVING" : "NOT_SERVING")});
}

void GrpcServer::StopHealthLoop() {
  {
    absl::MutexLock lock(&health_mu_);
    health_stop_ = true;
  }
  if (health_thread_.joinable()) health_thread_.join();
}

GrpcServer::~GrpcServer() {
  StopHealthLoop();
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now());
    server_->Wait();
  }
}

void GrpcServer::Shutdown(std::chrono::system_clock::time_point deadline) {
  StopHealthLoop();
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
