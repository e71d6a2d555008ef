#include "server/http/dispatch.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/service/bulk.h"

namespace rbmrec::server::http {

namespace {

using Entry = Dispatcher::Entry;

template <typename Req, typename Resp>
Entry Unary(RbmrecService* service,
            absl::StatusOr<Resp> (RbmrecService::*call)(const Req&)) {
  Entry e;
  e.input = Req::descriptor();
  e.output = Resp::descriptor();
  e.unary = [service, call](const google::protobuf::Message& request)
      -> absl::StatusOr<std::unique_ptr<google::protobuf::Message>> {
    // The HTTP layer makes requests from e.input's generated prototype.
    absl::StatusOr<Resp> r = (service->*call)(static_cast<const Req&>(request));
    if (!r.ok()) return r.status();
    return std::make_unique<Resp>(std::move(*r));
  };
  return e;
}

// AddRatings over HTTP: one request message is one batch of one stream.
Entry AddRatingsOneBatch(RbmrecService* service) {
  Entry e;
  e.input = v1::AddRatingsRequest::descriptor();
  e.output = v1::AddRatingsResponse::descriptor();
  e.unary = [service](const google::protobuf::Message& request)
      -> absl::StatusOr<std::unique_ptr<google::protobuf::Message>> {
    RbmrecService::AddRatingsSession session = service->StartAddRatings();
    if (absl::Status s = session.AddBatch(
            static_cast<const v1::AddRatingsRequest&>(request));
        !s.ok()) {
      return s;
    }
    return std::make_unique<v1::AddRatingsResponse>(session.response());
  };
  return e;
}

Entry TrainStream(RbmrecService* service) {
  Entry e;
  e.input = v1::TrainRequest::descriptor();
  e.output = v1::TrainProgress::descriptor();
  e.streaming = [service](const google::protobuf::Message& request,
                          const Dispatcher::Writer& write) {
    return service->Train(
        static_cast<const v1::TrainRequest&>(request),
        [&write](const v1::TrainProgress& p) { return write(p); });
  };
  return e;
}

// RecommendAll over HTTP: the job's messages computed one after another on
// the stream's thread (gRPC computes several at once on its bulk threads;
// the answers are the same). The writer blocks while the reader is behind
// (event_stream.h), so memory stays bounded.
Entry RecommendAllStream(RbmrecService* service) {
  Entry e;
  e.input = v1::RecommendAllRequest::descriptor();
  e.output = v1::RecommendAllResponse::descriptor();
  e.streaming = [service](const google::protobuf::Message& request,
                          const Dispatcher::Writer& write) {
    absl::StatusOr<std::unique_ptr<RecommendAllJob>> job =
        service->StartRecommendAll(
            static_cast<const v1::RecommendAllRequest&>(request));
    if (!job.ok()) return job.status();
    return DrainRecommendAll(
        **job,
        [&write](const v1::RecommendAllResponse& m) { return write(m); });
  };
  return e;
}

}  // namespace

Dispatcher::Dispatcher(RbmrecService* s) {
  // The adapter list: one line per rpc of rbmrec.v1.Rbmrec.
  entries_ = {
      {"AddRatings", AddRatingsOneBatch(s)},
      {"DeleteRatings", Unary(s, &RbmrecService::DeleteRatings)},
      {"DeleteUser", Unary(s, &RbmrecService::DeleteUser)},
      {"PutItems", Unary(s, &RbmrecService::PutItems)},
      {"Train", TrainStream(s)},
      {"CancelTraining", Unary(s, &RbmrecService::CancelTraining)},
      {"PredictRatings", Unary(s, &RbmrecService::PredictRatings)},
      {"Recommend", Unary(s, &RbmrecService::Recommend)},
      {"RecommendAll", RecommendAllStream(s)},
      {"SimilarItems", Unary(s, &RbmrecService::SimilarItems)},
      {"ListModels", Unary(s, &RbmrecService::ListModels)},
      {"ActivateModel", Unary(s, &RbmrecService::ActivateModel)},
      {"DeleteModel", Unary(s, &RbmrecService::DeleteModel)},
      {"PinModel", Unary(s, &RbmrecService::PinModel)},
      {"PruneModels", Unary(s, &RbmrecService::PruneModels)},
      {"GetStats", Unary(s, &RbmrecService::GetStats)},
      {"GetUserRatings", Unary(s, &RbmrecService::GetUserRatings)},
      {"GetItem", Unary(s, &RbmrecService::GetItem)},
  };
}

const Dispatcher::Entry* Dispatcher::Find(absl::string_view method) const {
  auto it = entries_.find(method);
  return it == entries_.end() ? nullptr : &it->second;
}

absl::Status Dispatcher::Check(
    const google::protobuf::ServiceDescriptor& service) const {
  for (const auto& [name, entry] : entries_) {
    const google::protobuf::MethodDescriptor* m =
        service.FindMethodByName(name);
    if (m == nullptr || m->input_type() != entry.input ||
        m->output_type() != entry.output ||
        m->server_streaming() != static_cast<bool>(entry.streaming)) {
      return absl::InternalError(
          absl::StrCat("HTTP adapter ", name, " does not match an rpc of ",
                       service.full_name(), " (server/http/dispatch.cc)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace rbmrec::server::http
