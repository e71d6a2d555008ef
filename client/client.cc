#include "client/client.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/channel_arguments.h"

namespace rbmrec::client {
namespace {

// Payload of a status holding the error reason (as core/error_reason.h).
constexpr absl::string_view kReasonPayloadUrl =
    "type.rbmrec.dev/rbmrec.ErrorReason";
// Payload of a status holding "BATCHES ROWS" of a failed AddRatings.
constexpr absl::string_view kCommittedPayloadUrl =
    "type.rbmrec.dev/rbmrec.CommittedCounts";
// Payload of a status holding the leader's address (as core/error_reason.h).
constexpr absl::string_view kLeaderPayloadUrl = "type.rbmrec.dev/rbmrec.Leader";

void SetDeadline(grpc::ClientContext* context, absl::Duration timeout) {
  if (timeout == absl::InfiniteDuration()) return;
  context->set_deadline(std::chrono::system_clock::now() +
                        absl::ToChronoNanoseconds(timeout));
}

std::shared_ptr<grpc::Channel> MakeChannel(
    const std::string& target, const RbmrecClient::Options& options) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  return CreateSecureChannel(target, options.security, std::move(args));
}

RbmrecClient::Options WithTimeout(absl::Duration timeout) {
  RbmrecClient::Options options;
  options.timeout = timeout;
  return options;
}

}  // namespace

absl::Status FromGrpcStatus(const grpc::Status& status, absl::string_view rpc,
                            const grpc::ClientContext* context) {
  if (status.ok()) return absl::OkStatus();
  absl::Status out(static_cast<absl::StatusCode>(status.error_code()),
                   absl::StrCat("rpc ", rpc, ": ", status.error_message()));
  if (context == nullptr) return out;
  const auto& trailers = context->GetServerTrailingMetadata();
  auto value = [&](const char* key) -> std::optional<std::string> {
    auto it = trailers.find(key);
    if (it == trailers.end()) return std::nullopt;
    return std::string(it->second.data(), it->second.size());
  };
  if (std::optional<std::string> reason = value(kReasonMetadataKey)) {
    out.SetPayload(kReasonPayloadUrl, absl::Cord(*reason));
  }
  if (std::optional<std::string> leader = value(kLeaderMetadataKey)) {
    out.SetPayload(kLeaderPayloadUrl, absl::Cord(*leader));
  }
  std::optional<std::string> batches = value(kCommittedBatchesMetadataKey);
  std::optional<std::string> rows = value(kCommittedRowsMetadataKey);
  int64_t b = 0;
  int64_t r = 0;
  if (batches && rows && absl::SimpleAtoi(*batches, &b) &&
      absl::SimpleAtoi(*rows, &r) && b >= 0 && r >= 0) {
    out.SetPayload(kCommittedPayloadUrl, absl::Cord(absl::StrCat(b, " ", r)));
  }
  return out;
}

std::string ErrorReasonOf(const absl::Status& status) {
  const auto payload = status.GetPayload(kReasonPayloadUrl);
  return payload.has_value() ? std::string(*payload) : std::string();
}

std::string LeaderAddressOf(const absl::Status& status) {
  const auto payload = status.GetPayload(kLeaderPayloadUrl);
  return payload.has_value() ? std::string(*payload) : std::string();
}

std::optional<CommittedCounts> CommittedOf(const absl::Status& status) {
  const auto payload = status.GetPayload(kCommittedPayloadUrl);
  if (!payload.has_value()) return std::nullopt;
  const std::string text(*payload);
  const size_t space = text.find(' ');
  CommittedCounts counts;
  if (space == std::string::npos ||
      !absl::SimpleAtoi(absl::string_view(text).substr(0, space),
                        &counts.batches) ||
      !absl::SimpleAtoi(absl::string_view(text).substr(space + 1),
                        &counts.rows)) {
    return std::nullopt;
  }
  return counts;
}

RbmrecClient::RbmrecClient(const std::string& target, const Options& options)
    : RbmrecClient(MakeChannel(target, options), options) {
  follow_leader_ = true;
}

std::unique_ptr<RbmrecClient> RbmrecClient::LeaderClient(
    const absl::Status& refused) const {
  if (!follow_leader_ || !absl::IsFailedPrecondition(refused) ||
      ErrorReasonOf(refused) != "NOT_LEADER") {
    return nullptr;
  }
  const std::string leader = LeaderAddressOf(refused);
  if (leader.empty()) return nullptr;
  // A plain client: it does not follow again (no loops between replicas
  // that disagree for a moment).
  return std::unique_ptr<RbmrecClient>(
      new RbmrecClient(MakeChannel(leader, options_), options_));
}

RbmrecClient::RbmrecClient(const std::string& target, absl::Duration timeout)
    : RbmrecClient(target, WithTimeout(timeout)) {}

RbmrecClient::RbmrecClient(std::shared_ptr<grpc::Channel> channel,
                           const Options& options)
    : options_(options),
      channel_(std::move(channel)),
      stub_(v1::Rbmrec::NewStub(channel_)),
      health_stub_(grpc::health::v1::Health::NewStub(channel_)) {}

void RbmrecClient::SetUnaryDeadline(grpc::ClientContext* context) const {
  SetDeadline(context, options_.timeout);
  AddToken(options_.security, context);
}

void RbmrecClient::SetStreamDeadline(grpc::ClientContext* context) const {
  SetDeadline(context, options_.stream_timeout);
  AddToken(options_.security, context);
}

absl::StatusOr<v1::AddRatingsResponse> RbmrecClient::AddRatings(
    const BatchSource& next_batch, const ImportProgressCallback& progress) {
  grpc::ClientContext context;
  SetStreamDeadline(&context);
  v1::AddRatingsResponse response;
  std::unique_ptr<grpc::ClientWriter<v1::AddRatingsRequest>> writer =
      stub_->AddRatings(&context, &response);
  const absl::Time start = absl::Now();
  ImportProgress state;
  v1::AddRatingsRequest batch;
  while (true) {
    batch.Clear();
    if (!next_batch(&batch)) break;
    // false: the stream is broken (server failed the call or went away);
    // Finish() below returns the reason.
    if (!writer->Write(batch)) break;
    ++state.batches_sent;
    state.rows_sent += batch.ratings_size();
    state.elapsed_seconds = absl::ToDoubleSeconds(absl::Now() - start);
    if (progress) progress(state);
  }
  if (progress) {
    state.done_sending = true;
    state.elapsed_seconds = absl::ToDoubleSeconds(absl::Now() - start);
    progress(state);
  }
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  if (!status.ok()) return FromGrpcStatus(status, "AddRatings", &context);
  return response;
}

absl::StatusOr<v1::AddRatingsResponse> RbmrecClient::ImportRatings(
    const std::vector<RawRating>& rows, int batch_size,
    const ImportProgressCallback& progress, bool views) {
  if (batch_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch size must be >= 1, got ", batch_size));
  }
  const size_t step = static_cast<size_t>(batch_size);
  size_t next = 0;
  BatchSource source = [&](v1::AddRatingsRequest* batch) {
    if (next >= rows.size()) return false;
    const size_t end = std::min(rows.size(), next + step);
    batch->mutable_ratings()->Reserve(static_cast<int>(end - next));
    for (; next < end; ++next) {
      v1::Rating* r = batch->add_ratings();
      r->set_user_id(rows[next].user);
      r->set_item_id(rows[next].item);
      if (views) {
        r->set_kind(v1::Rating::VIEW);
      } else {
        r->set_rating(rows[next].rating);
      }
      r->set_timestamp(rows[next].timestamp);
    }
    return true;
  };
  const int64_t total = static_cast<int64_t>(rows.size());
  ImportProgressCallback with_total;
  if (progress) {
    with_total = [&](const ImportProgress& p) {
      ImportProgress q = p;
      q.rows_total = total;
      progress(q);
    };
  }
  return AddRatings(source, with_total);
}

absl::StatusOr<v1::DeleteRatingsResponse> RbmrecClient::DeleteRatings(
    const v1::DeleteRatingsRequest& request) {
  grpc::ClientContext context;
  SetUnaryDeadline(&context);
  v1::DeleteRatingsResponse response;
  grpc::Status status = stub_->DeleteRatings(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status, "DeleteRatings", &context);
  return response;
}

absl::StatusOr<v1::DeleteUserResponse> RbmrecClient::DeleteUser(
    const v1::DeleteUserRequest& request) {
  grpc::ClientContext context;
  SetUnaryDeadline(&context);
  v1::DeleteUserResponse response;
  grpc::Status status = stub_->DeleteUser(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status, "DeleteUser", &context);
  return response;
}

absl::StatusOr<v1::PutItemsResponse> RbmrecClient::PutItems(
    const v1::PutItemsRequest& request) {
  grpc::ClientContext context;
  SetUnaryDeadline(&context);
  v1::PutItemsResponse response;
  grpc::Status status = stub_->PutItems(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status, "PutItems", &context);
  return response;
}

absl::StatusOr<v1::TrainProgress> RbmrecClient::Train(
    const v1::TrainRequest& request, const TrainProgressCallback& progress) {
  grpc::ClientContext context;
  SetStreamDeadline(&context);
  std::unique_ptr<grpc::ClientReader<v1::TrainProgress>> reader =
      stub_->Train(&context, request);
  v1::TrainProgress message;
  v1::TrainProgress last;
  bool any = false;
  while (reader->Read(&message)) {
    any = true;
    if (progress) progress(message);
    last = message;
  }
  grpc::Status status = reader->Finish();
  if (!status.ok()) {
    absl::Status refused = FromGrpcStatus(status, "Train", &context);
    if (!any) {
      if (std::unique_ptr<RbmrecClient> leader = LeaderClient(refused)) {
        return leader->Train(request, progress);
      }
    }
    return refused;
  }
  if (!any) {
    return absl::InternalError(
        "rpc Train: the stream ended without a progress message");
  }
  return last;
}

absl::StatusOr<v1::CancelTrainingResponse> RbmrecClient::CancelTraining() {
  grpc::ClientContext context;
  SetUnaryDeadline(&context);
  v1::CancelTrainingResponse response;
  grpc::Status status =
      stub_->CancelTraining(&context, v1::CancelTrainingRequest(), &response);
  if (!status.ok()) {
    absl::Status refused = FromGrpcStatus(status, "CancelTraining", &context);
    if (std::unique_ptr<RbmrecClient> leader = LeaderClient(refused)) {
      return leader->CancelTraining();
    }
    return refused;
  }
  return response;
}

absl::StatusOr<v1::PredictRatingsResponse> RbmrecClient::PredictRatings(
    const v1::PredictRatingsRequest& request) {
  grpc::ClientContext context;
  SetUnaryDeadline(&context);
  v1::PredictRatingsResponse response;
  grpc::Status status = stub_->PredictRatings(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status, "PredictRatings", &context);
  return response;
}

absl::Status RbmrecClient::RecommendAll(
    const v1::RecommendAllRequest& request,
    const std::function<bool(const v1::RecommendAllResponse&)>& message) {
  grpc::ClientContext context;
  SetStreamDeadline(&context);
  std::unique_ptr<grpc::ClientReader<v1::RecommendAllResponse>> reader =
      stub_->RecommendAll(&context, request);
  v1::RecommendAllResponse m;
  bool stopped = false;
  while (reader->Read(&m)) {
    if (!message(m)) {
      stopped = true;
      context.TryCancel();
      break;
    }
  }
  grpc::Status status = reader->Finish();
  if (stopped)
    return absl::CancelledError("RecommendAll: stopped by the caller");
  if (!status.ok()) return FromGrpcStatus(status, "RecommendAll", &context);
  return absl::OkStatus();
}

absl::StatusOr<v1::RecommendResponse> RbmrecClient::Recommend(
    const v1::RecommendRequest& request) {
  grpc::ClientContext context;
  SetUnaryDeadline(&context);
  v1::RecommendResponse response;
  grpc::Status status = stub_->Recommend(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status, "Recommend", &context);
  return response;
}

absl::StatusOr<v1::SimilarItemsResponse> RbmrecClient::SimilarItems(
    const v1::SimilarItemsRequest& request) {
  grpc::ClientContext context;
  SetUnaryDeadline(&context);
  v1::SimilarItemsResponse response;
  grpc::Status status = stub_->SimilarItems(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status, "SimilarItems", &context);
  return response;
}

absl::StatusOr<v1::GetUserRatingsResponse> RbmrecClient::GetUserRatings(
    const v1::GetUserRatingsRequest& request) {
  grpc::ClientContext context;
  SetUnaryDeadline(&context);
  v1::GetUserRatingsResponse response;
  grpc::Status status = stub_->GetUserRatings(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status, "GetUserRatings", &context);
  return response;
}

absl::StatusOr<v1::GetItemResponse> RbmrecClient::GetItem(
    const std::string& item_id) {
  grpc::ClientContext context;
  SetUnaryDeadline(&context);
  v1::GetItemRequest request;
  request.set_item_id(item_id);
  v1::GetItemResponse response;
  grpc::Status status = stub_->GetItem(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status, "GetItem", &context);
  return response;
}

absl::StatusOr<v1::ListModelsResponse> RbmrecClient::ListModels(
    const v1::ListModelsRequest& request) {
  grpc::ClientContext context;
  SetUnaryDeadline(&context);
  v1::ListModelsResponse response;
  grpc::Status status = stub_->ListModels(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status, "ListModels", &context);
  return response;
}

absl::StatusOr<v1::ModelInfo> RbmrecClient::ActivateModel(int64_t version) {
  grpc::ClientContext context;
  SetUnaryDeadline(&context);
  v1::ActivateModelRequest request;
  request.set_version(version);
  v1::ModelInfo response;
  grpc::Status status = stub_->ActivateModel(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status, "ActivateModel", &context);
  return response;
}

absl::StatusOr<v1::DeleteModelResponse> RbmrecClient::DeleteModel(
    const v1::DeleteModelRequest& request) {
  grpc::ClientContext context;
  SetUnaryDeadline(&context);
  v1::DeleteModelResponse response;
  grpc::Status status = stub_->DeleteModel(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status, "DeleteModel", &context);
  return response;
}

absl::StatusOr<v1::ModelInfo> RbmrecClient::PinModel(int64_t version,
                                                     bool pinned) {
  grpc::ClientContext context;
  SetUnaryDeadline(&context);
  v1::PinModelRequest request;
  request.set_version(version);
  request.set_pinned(pinned);
  v1::ModelInfo response;
  grpc::Status status = stub_->PinModel(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status, "PinModel", &context);
  return response;
}

absl::StatusOr<v1::PruneModelsResponse> RbmrecClient::PruneModels(
    const v1::PruneModelsRequest& request) {
  grpc::ClientContext context;
  SetUnaryDeadline(&context);
  v1::PruneModelsResponse response;
  grpc::Status status = stub_->PruneModels(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status, "PruneModels", &context);
  return response;
}

absl::StatusOr<v1::GetStatsResponse> RbmrecClient::GetStats() {
  grpc::ClientContext context;
  SetUnaryDeadline(&context);
  v1::GetStatsResponse response;
  grpc::Status status =
      stub_->GetStats(&context, v1::GetStatsRequest(), &response);
  if (!status.ok()) return FromGrpcStatus(status, "GetStats", &context);
  return response;
}

absl::StatusOr<grpc::health::v1::HealthCheckResponse> RbmrecClient::Health(
    const std::string& service) {
  grpc::ClientContext context;
  // Health never needs a token: none is sent.
  SetDeadline(&context, options_.timeout);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status status = health_stub_->Check(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status, "Health.Check", &context);
  return response;
}

}  // namespace rbmrec::client
