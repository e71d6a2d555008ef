// libFuzzer target: serialized rbmrec.v1 request messages, decoded with
// ParseFromArray and handled by RbmrecService.
//
// Input: byte 0 picks the RPC (SelectRpc in tests/fuzz/fuzz_data.h), the
// rest is the serialized request. Recommend's bytes are also read as the gRPC
// layer reads them (server/transport/recommend_wire.h), see FuzzRecommend. The
// service runs on a ":memory:" store holding the synthetic data set and a tiny
// trained model (hidden 5, 2 epochs); it is rebuilt every kResetEvery inputs so
// that what fuzzed writes accumulate (rows, items, model versions) stays
// bounded.
//
// Train: hidden, epochs, batch_size, cd_steps and ensemble values >= 1 are
// folded into small ones (hidden 1..5, epochs 1..2, batch 1..64, CD 1..3,
// ensemble 1..2) so a job takes milliseconds; values out of the .proto's
// ranges are passed unchanged and must be refused. At most
// kTrainsPerService jobs run per service; after that only requests with an
// out-of-range option are sent. With RBMREC_FUZZ_TRAIN_EXTREMES=1 in the
// environment, values >= 1,000,000 are passed unchanged too (the server must
// refuse them, not run out of memory).
//
// Invariants checked (abort on violation): no crash; AddRatings counts
// accepted + rejected == rows; every OK PredictRatings answer has one
// prediction per requested item, K finite probabilities in [0, 1] summing to
// 1 (1e-5) and an expected rating on the scale; every OK Recommend answer has
// at most n items, ranked 1.., expected ratings on the scale and
// probabilities in [0, 1]; a Train request with an out-of-range option is
// refused; SimilarItems answers at most n items, ranked 1.., with finite
// scores and never a queried item; GetUserRatings at most a page of
// ratings on the scale, no more than the total; GetItem K counts (or none)
// that sum to `ratings`, with a mean on the scale.

#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "absl/status/statusor.h"
#include "google/protobuf/stubs/logging.h"
#include "proto/rbmrec.pb.h"
#include "server/log.h"
#include "server/service/service.h"
#include "server/transport/recommend_wire.h"
#include "store/store.h"
#include "tests/fuzz/fuzz_data.h"

namespace rbmrec::fuzz {
namespace {

namespace v1 = ::rbmrec::v1;
using server::RbmrecService;

constexpr int64_t kResetEvery = 5000;
constexpr int kTrainsPerService = 20;
constexpr double kMin = 1.0;
constexpr double kMax = 5.0;
constexpr int kK = 5;

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz_requests: invariant violated: %s\n", what);
    std::abort();
  }
}

void CheckOk(const absl::Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "fuzz_requests: %s: %s\n", what, s.ToString().c_str());
    std::abort();
  }
}

// Whether ListModels lists `version`.
bool IsStored(RbmrecService* service, int64_t version) {
  absl::StatusOr<v1::ListModelsResponse> r =
      service->ListModels(v1::ListModelsRequest());
  CheckOk(r.status(), "ListModels failed");
  for (const v1::ModelInfo& m : r->models()) {
    if (m.version() == version) return true;
  }
  return false;
}

bool TrainOk(RbmrecService* service, const v1::TrainRequest& request) {
  bool succeeded = false;
  const absl::Status s =
      service->Train(request, [&](const v1::TrainProgress& p) {
        if (p.state() == v1::TrainProgress::SUCCEEDED) succeeded = true;
        return true;
      });
  return s.ok() && succeeded;
}

struct State {
  std::unique_ptr<RbmrecService> service;
  int64_t runs = 0;
  int trains = 0;
  bool extremes = false;

  void Reset() {
    if (service) service->Shutdown();
    service.reset();
    absl::StatusOr<std::unique_ptr<store::Store>> st =
        store::Store::Open(":memory:");
    CheckOk(st.status(), "opening the store");
    server::ServiceOptions o;
    o.train_defaults.hidden = 5;
    o.train_defaults.max_epochs = 2;
    o.train_defaults.threads = 1;
    o.train_defaults.validation_fraction = 0.1;
    o.train_defaults.seed = 7;
    o.max_train_threads = 1;
    o.training.train_nice = 0;
    o.limits.max_batch_rows = 5000;
    o.online.publish_seconds = 3600;
    o.online.min_apply_gap_seconds = 0;  // FlushOnlineForTest returns at once
    absl::StatusOr<std::unique_ptr<RbmrecService>> svc =
        RbmrecService::Create(std::move(*st), o);
    CheckOk(svc.status(), "creating the service");
    service = std::move(*svc);
    v1::AddRatingsRequest batch;
    for (int u = 0; u < kUsers; ++u) {
      for (int i = 0; i < kItems; ++i) {
        if (!Rated(u, i)) continue;
        v1::Rating* r = batch.add_ratings();
        r->set_user_id(U(u));
        r->set_item_id(I(i));
        r->set_rating(PlantedRating(u, i));
      }
    }
    RbmrecService::AddRatingsSession session = service->StartAddRatings();
    CheckOk(session.AddBatch(batch), "adding the synthetic ratings");
    Check(TrainOk(service.get(), v1::TrainRequest()),
          "training the initial model failed");
    service->FlushOnlineForTest();
    trains = 0;
  }
};

State& GetState() {
  static State* state = [] {
    auto* s = new State;
    const char* env = std::getenv("RBMREC_FUZZ_TRAIN_EXTREMES");
    s->extremes = env != nullptr && env[0] == '1';
    s->Reset();
    return s;
  }();
  return *state;
}

// Folds an in-range count into 1..cap; leaves out-of-range values (and, in
// extremes mode, values >= 1,000,000) unchanged.
template <typename T>
T Fold(T v, T cap, bool extremes) {
  if (v < 1) return v;
  if (extremes && v >= 1000000) return v;
  return static_cast<T>(1 + (v - 1) % cap);
}

// True when an option is outside the range the .proto documents.
bool OutOfRange(const v1::TrainOptions& o) {
  return (o.has_hidden() && o.hidden() < 1) ||
         (o.has_epochs() && o.epochs() < 1) ||
         (o.has_batch_size() && o.batch_size() < 1) ||
         (o.has_learning_rate() && !(o.learning_rate() > 0)) ||
         (o.has_momentum() && !(o.momentum() >= 0 && o.momentum() < 1)) ||
         (o.has_weight_decay() && !(o.weight_decay() >= 0)) ||
         (o.has_cd_steps() && o.cd_steps() < 1) ||
         (o.has_threads() && o.threads() < 0) ||
         (o.has_validation_fraction() &&
          !(o.validation_fraction() >= 0 && o.validation_fraction() <= 0.5)) ||
         (o.has_ensemble() && o.ensemble() < 1) ||
         (o.has_average() && !(o.average() >= 0 && o.average() < 1));
}

void FuzzTrain(State& st, v1::TrainRequest request) {
  v1::TrainOptions* o = request.mutable_options();
  if (o->has_hidden()) o->set_hidden(Fold(o->hidden(), 5, st.extremes));
  if (o->has_epochs()) o->set_epochs(Fold(o->epochs(), 2, st.extremes));
  if (o->has_batch_size()) {
    o->set_batch_size(Fold(o->batch_size(), 64, st.extremes));
  }
  if (o->has_cd_steps()) o->set_cd_steps(Fold(o->cd_steps(), 3, st.extremes));
  if (o->has_ensemble()) o->set_ensemble(Fold(o->ensemble(), 2, st.extremes));
  const bool out_of_range = OutOfRange(*o);
  if (!out_of_range) {
    if (st.trains >= kTrainsPerService) return;
    ++st.trains;
  }
  bool terminal = false;
  const absl::Status s =
      st.service->Train(request, [&](const v1::TrainProgress& p) {
        Check(
            std::isfinite(p.train_rmse()) && std::isfinite(p.elapsed_seconds()),
            "Train progress with a non-finite number");
        if (p.state() == v1::TrainProgress::SUCCEEDED ||
            p.state() == v1::TrainProgress::FAILED ||
            p.state() == v1::TrainProgress::CANCELLED) {
          terminal = true;
        }
        return true;
      });
  if (out_of_range) {
    Check(!s.ok(), "Train accepted an option outside the .proto's range");
  }
  if (s.ok()) {
    Check(terminal, "Train returned OK without a terminal message");
    // Train returns once the terminal message is produced; the job's thread
    // then still frees its data set and model. LeakSanitizer's per-input
    // check, racing with that, once reported them as leaked: give the thread
    // time to finish (the next Train joins it).
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  st.service->FlushOnlineForTest();
}

void CheckPredictions(const v1::PredictRatingsRequest& request,
                      const v1::PredictRatingsResponse& resp) {
  Check(resp.predictions_size() == request.item_ids_size(),
        "PredictRatings: not one prediction per requested item");
  for (int i = 0; i < resp.predictions_size(); ++i) {
    const v1::ItemPrediction& p = resp.predictions(i);
    Check(p.item_id() == request.item_ids(i),
          "PredictRatings: predictions not in request order");
    Check(p.probabilities_size() == kK, "PredictRatings: not K probabilities");
    double sum = 0;
    for (double q : p.probabilities()) {
      Check(std::isfinite(q) && q >= 0 && q <= 1 + 1e-6,
            "PredictRatings: probability not finite or outside [0, 1]");
      sum += q;
    }
    Check(std::fabs(sum - 1) <= 1e-5,
          "PredictRatings: probabilities do not sum to 1");
    Check(std::isfinite(p.expected_rating()) &&
              p.expected_rating() >= kMin - 1e-6 &&
              p.expected_rating() <= kMax + 1e-6,
          "PredictRatings: expected rating off the scale");
  }
}

void CheckRecommendations(const v1::RecommendRequest& request,
                          const v1::RecommendResponse& resp) {
  if (request.n() > 0) {
    Check(resp.recommendations_size() <= request.n(),
          "Recommend: more than n recommendations");
  }
  for (int i = 0; i < resp.recommendations_size(); ++i) {
    const v1::Recommendation& r = resp.recommendations(i);
    Check(!r.item_id().empty(), "Recommend: empty item id");
    // Ranks count from the start of the whole list (offset pages).
    Check(r.rank() == request.offset() + i + 1,
          "Recommend: ranks not offset + 1, offset + 2, ...");
    Check(std::isfinite(r.expected_rating()) &&
              r.expected_rating() >= kMin - 1e-6 &&
              r.expected_rating() <= kMax + 1e-6,
          "Recommend: expected rating off the scale");
    Check(std::isfinite(r.probability_at_least()) &&
              r.probability_at_least() >= 0 &&
              r.probability_at_least() <= 1 + 1e-6,
          "Recommend: probability outside [0, 1]");
  }
}

void CheckSimilar(const v1::SimilarItemsRequest& request,
                  const v1::SimilarItemsResponse& resp) {
  if (request.n() > 0) {
    Check(resp.items_size() <= request.n(), "SimilarItems: more than n items");
  }
  for (int i = 0; i < resp.items_size(); ++i) {
    const v1::SimilarItem& item = resp.items(i);
    Check(item.rank() == i + 1, "SimilarItems: ranks not 1, 2, ...");
    Check(std::isfinite(item.score()), "SimilarItems: a score not finite");
    for (const std::string& q : request.item_ids()) {
      Check(item.item_id() != q, "SimilarItems: answered a queried item");
    }
    Check(item.item_id() != request.item_id() || request.item_id().empty(),
          "SimilarItems: answered the queried item");
  }
}

void CheckUserRatings(const v1::GetUserRatingsRequest& request,
                      const v1::GetUserRatingsResponse& resp) {
  Check(resp.ratings_size() <= (request.limit() > 0 ? request.limit() : 100),
        "GetUserRatings: more than a page");
  Check(resp.ratings_size() <= resp.total(),
        "GetUserRatings: more ratings than the total");
  for (const v1::UserRatingEntry& r : resp.ratings()) {
    Check(std::isfinite(r.rating()) && r.rating() >= kMin - 1e-6 &&
              r.rating() <= kMax + 1e-6,
          "GetUserRatings: a rating off the scale");
  }
}

void CheckItem(const v1::GetItemResponse& resp) {
  Check(resp.rating_counts_size() == 0 || resp.rating_counts_size() == 5,
        "GetItem: neither K counts nor none");
  int64_t sum = 0;
  for (const int64_t c : resp.rating_counts()) {
    Check(c >= 0, "GetItem: a negative count");
    sum += c;
  }
  Check(sum == resp.ratings(), "GetItem: counts do not sum to ratings");
  Check(resp.ratings() == 0 ? resp.mean_rating() == 0
                            : resp.mean_rating() >= kMin - 1e-6 &&
                                  resp.mean_rating() <= kMax + 1e-6,
        "GetItem: mean off the scale");
}

template <typename Message>
bool Parse(const uint8_t* data, size_t size, Message* m) {
  return m->ParseFromArray(data, static_cast<int>(size));
}

// Recommend as the gRPC layer reads it (SplitRecommendRequest: the id lists
// as views of the bytes) and, when the bytes parse as a whole, as the
// service's typed entry point: the split never crashes, gives the full
// parse's lists whenever that parse succeeds, and the two calls answer
// alike (status code; the same response when OK).
void FuzzRecommend(RbmrecService* svc, const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  v1::RecommendRequest rest;
  server::RecommendIdLists ids;
  const absl::Status split = server::SplitRecommendRequest(bytes, &rest, &ids);
  v1::RecommendRequest req;
  const bool parsed = Parse(data, size, &req);
  if (parsed) {
    Check(split.ok(), "Recommend: the split refused bytes that parse");
    Check(
        static_cast<int>(ids.candidates.size()) ==
                req.candidate_item_ids_size() &&
            static_cast<int>(ids.exclude.size()) == req.exclude_item_ids_size(),
        "Recommend: the split's lists differ from the full parse's");
    for (size_t i = 0; i < ids.candidates.size(); ++i) {
      Check(ids.candidates[i] == req.candidate_item_ids(static_cast<int>(i)),
            "Recommend: a candidate id differs from the full parse's");
    }
  }
  if (!split.ok()) return;
  absl::StatusOr<v1::RecommendResponse> from_split = svc->Recommend(rest, ids);
  if (from_split.ok()) CheckRecommendations(rest, *from_split);
  if (!parsed) return;
  absl::StatusOr<v1::RecommendResponse> r = svc->Recommend(req);
  if (r.ok()) CheckRecommendations(req, *r);
  Check(r.status().code() == from_split.status().code(),
        "Recommend: the split and the full parse answer differently");
  if (r.ok()) {
    Check(r->SerializeAsString() == from_split->SerializeAsString(),
          "Recommend: the split's response differs from the full parse's");
  }
}

}  // namespace
}  // namespace rbmrec::fuzz

// Protobuf logs every string field with invalid UTF-8 it parses; fuzzed
// inputs have many. Silenced so that the log shows libFuzzer's lines.
void IgnoreProtobufLog(google::protobuf::LogLevel, const char*, int,
                       const std::string&) {}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(&IgnoreProtobufLog);
  // The service logs every training job at info level.
  rbmrec::server::SetLogLevel(rbmrec::server::LogLevel::kWarn);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace f = ::rbmrec::fuzz;
  namespace v1 = ::rbmrec::v1;
  if (size == 0 || size > (1u << 20)) return 0;
  f::State& st = f::GetState();
  if (++st.runs % f::kResetEvery == 0) st.Reset();
  rbmrec::server::RbmrecService* svc = st.service.get();
  const f::Rpc rpc = f::SelectRpc(data[0]);
  ++data;
  --size;
  switch (rpc) {
    case f::Rpc::kAddRatings: {
      v1::AddRatingsRequest req;
      if (!f::Parse(data, size, &req)) return 0;
      rbmrec::server::RbmrecService::AddRatingsSession session =
          svc->StartAddRatings();
      if (session.AddBatch(req).ok()) {
        const v1::AddRatingsResponse& r = session.response();
        f::Check(r.accepted() + r.rejected() == req.ratings_size(),
                 "AddRatings: accepted + rejected != rows");
        f::Check(r.rejected_rows_size() <= r.rejected(),
                 "AddRatings: more rejected rows than rejected");
      }
      svc->FlushOnlineForTest();
      break;
    }
    case f::Rpc::kPredictRatings: {
      v1::PredictRatingsRequest req;
      if (!f::Parse(data, size, &req)) return 0;
      absl::StatusOr<v1::PredictRatingsResponse> r = svc->PredictRatings(req);
      if (r.ok()) f::CheckPredictions(req, *r);
      break;
    }
    case f::Rpc::kRecommend: {
      f::FuzzRecommend(svc, data, size);
      break;
    }
    case f::Rpc::kTrain: {
      v1::TrainRequest req;
      if (!f::Parse(data, size, &req)) return 0;
      f::FuzzTrain(st, std::move(req));
      break;
    }
    case f::Rpc::kPutItems: {
      v1::PutItemsRequest req;
      if (!f::Parse(data, size, &req)) return 0;
      absl::StatusOr<v1::PutItemsResponse> r = svc->PutItems(req);
      if (r.ok()) {
        f::Check(r->stored() == req.items_size() + req.hide_item_ids_size() +
                                    req.unhide_item_ids_size(),
                 "PutItems: stored != items + hide + unhide entries sent");
      }
      break;
    }
    case f::Rpc::kDeleteRatings: {
      v1::DeleteRatingsRequest req;
      if (!f::Parse(data, size, &req)) return 0;
      (void)svc->DeleteRatings(req);
      svc->FlushOnlineForTest();
      break;
    }
    case f::Rpc::kDeleteUser: {
      v1::DeleteUserRequest req;
      if (!f::Parse(data, size, &req)) return 0;
      (void)svc->DeleteUser(req);
      svc->FlushOnlineForTest();
      break;
    }
    case f::Rpc::kActivateModel: {
      v1::ActivateModelRequest req;
      if (!f::Parse(data, size, &req)) return 0;
      absl::StatusOr<v1::ModelInfo> r = svc->ActivateModel(req);
      if (r.ok()) {
        f::Check(r->version() == req.version() || req.version() == 0,
                 "ActivateModel: activated another version");
      }
      break;
    }
    case f::Rpc::kListModels: {
      v1::ListModelsRequest req;
      if (!f::Parse(data, size, &req)) return 0;
      absl::StatusOr<v1::ListModelsResponse> r = svc->ListModels(req);
      f::CheckOk(r.status(), "ListModels failed");
      int active = 0;
      for (const v1::ModelInfo& m : r->models()) active += m.active() ? 1 : 0;
      f::Check(active <= 1, "ListModels: more than one active model");
      break;
    }
    case f::Rpc::kGetStats: {
      v1::GetStatsRequest req;
      if (!f::Parse(data, size, &req)) return 0;
      f::CheckOk(svc->GetStats(req).status(), "GetStats failed");
      break;
    }
    case f::Rpc::kCancelTraining: {
      v1::CancelTrainingRequest req;
      if (!f::Parse(data, size, &req)) return 0;
      (void)svc->CancelTraining(req);
      break;
    }
    case f::Rpc::kDeleteModel: {
      v1::DeleteModelRequest req;
      if (!f::Parse(data, size, &req)) return 0;
      const int64_t active = svc->active_version();
      absl::StatusOr<v1::DeleteModelResponse> r = svc->DeleteModel(req);
      if (r.ok()) {
        f::Check(req.version() != active || active == 0,
                 "DeleteModel: deleted the active version");
        f::Check(!f::IsStored(svc, req.version()),
                 "DeleteModel: the version is still listed");
      }
      break;
    }
    case f::Rpc::kPinModel: {
      v1::PinModelRequest req;
      if (!f::Parse(data, size, &req)) return 0;
      absl::StatusOr<v1::ModelInfo> r = svc->PinModel(req);
      if (r.ok()) {
        f::Check(r->version() == req.version() && r->pinned() == req.pinned(),
                 "PinModel: answered another version or pin state");
      }
      break;
    }
    case f::Rpc::kSimilarItems: {
      v1::SimilarItemsRequest req;
      if (!f::Parse(data, size, &req)) return 0;
      absl::StatusOr<v1::SimilarItemsResponse> r = svc->SimilarItems(req);
      if (r.ok()) f::CheckSimilar(req, *r);
      break;
    }
    case f::Rpc::kGetUserRatings: {
      v1::GetUserRatingsRequest req;
      if (!f::Parse(data, size, &req)) return 0;
      absl::StatusOr<v1::GetUserRatingsResponse> r = svc->GetUserRatings(req);
      if (r.ok()) f::CheckUserRatings(req, *r);
      break;
    }
    case f::Rpc::kGetItem: {
      v1::GetItemRequest req;
      if (!f::Parse(data, size, &req)) return 0;
      absl::StatusOr<v1::GetItemResponse> r = svc->GetItem(req);
      if (r.ok()) f::CheckItem(*r);
      break;
    }
    case f::Rpc::kPruneModels: {
      v1::PruneModelsRequest req;
      if (!f::Parse(data, size, &req)) return 0;
      const int64_t active = svc->active_version();
      if (svc->PruneModels(req).ok() && active > 0) {
        f::Check(f::IsStored(svc, active),
                 "PruneModels: deleted the active version");
      }
      break;
    }
  }
  return 0;
}
