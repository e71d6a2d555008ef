#include "client/client.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace rbmrec::client {
namespace {

void SetDeadline(grpc::ClientContext* context, absl::Duration timeout) {
  if (timeout == absl::InfiniteDuration()) return;
  context->set_deadline(std::chrono::system_clock::now() +
                        absl::ToChronoNanoseconds(timeout));
}

std::shared_ptr<grpc::Channel> MakeChannel(
    const std::string& target, const RbmrecClient::Options& options) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(),
                                   args);
}

RbmrecClient::Options WithTimeout(absl::Duration timeout) {
  RbmrecClient::Options options;
  options.timeout = timeout;
  return options;
}

}  // namespace

absl::Status FromGrpcStatus(const grpc::Status& status, absl::string_view rpc) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat("rpc ", rpc, ": ", status.error_message()));
}

RbmrecClient::RbmrecClient(const std::string& target, const Options& options)
    : RbmrecClient(MakeChannel(target, options), options) {}

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
}

void RbmrecClient::SetStreamDeadline(grpc::ClientContext* context) const {
  SetDeadline(context, options_.stream_timeout);
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
  if (!status.ok()) return FromGrpcStatus(status, "AddRatings");
  return response;
}

absl::StatusOr<v1::AddRatingsResponse> RbmrecClient::ImportRatings(
    const std::vector<RawRating>& rows, int batch_size,
    const ImportProgressCallback& progress) {
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
      r->set_rating(rows[next].rating);
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
  if (!status.ok()) return FromGrpcStatus(status, "DeleteRatings");
  return response;
}

absl::StatusOr<v1::DeleteUserResponse> RbmrecClient::DeleteUser(
    const v1::DeleteUserRequest& request) {
  grpc::ClientContext context;
  SetUnaryDeadline(&context);
  v1::DeleteUserResponse response;
  grpc::Status status = stub_->DeleteUser(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status, "DeleteUser");
  return response;
}

absl::StatusOr<v1::PutItemsResponse> RbmrecClient::PutItems(
    const v1::PutItemsRequest& request) {
  grpc::ClientContext context;
  SetUnaryDeadline(&context);
  v1::PutItemsResponse response;
  grpc::Status status = stub_->PutItems(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status, "PutItems");
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
  if (!status.ok()) return FromGrpcStatus(status, "Train");
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
  if (!status.ok()) return FromGrpcStatus(status, "CancelTraining");
  return response;
}

absl::StatusOr<v1::PredictRatingsResponse> RbmrecClient::PredictRatings(
    const v1::PredictRatingsRequest& request) {
  grpc::ClientContext context;
  SetUnaryDeadline(&context);
  v1::PredictRatingsResponse response;
  grpc::Status status = stub_->PredictRatings(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status, "PredictRatings");
  return response;
}

absl::StatusOr<v1::RecommendResponse> RbmrecClient::Recommend(
    const v1::RecommendRequest& request) {
  grpc::ClientContext context;
  SetUnaryDeadline(&context);
  v1::RecommendResponse response;
  grpc::Status status = stub_->Recommend(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status, "Recommend");
  return response;
}

absl::StatusOr<v1::ListModelsResponse> RbmrecClient::ListModels() {
  grpc::ClientContext context;
  SetUnaryDeadline(&context);
  v1::ListModelsResponse response;
  grpc::Status status =
      stub_->ListModels(&context, v1::ListModelsRequest(), &response);
  if (!status.ok()) return FromGrpcStatus(status, "ListModels");
  return response;
}

absl::StatusOr<v1::ModelInfo> RbmrecClient::ActivateModel(int64_t version) {
  grpc::ClientContext context;
  SetUnaryDeadline(&context);
  v1::ActivateModelRequest request;
  request.set_version(version);
  v1::ModelInfo response;
  grpc::Status status = stub_->ActivateModel(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status, "ActivateModel");
  return response;
}

absl::StatusOr<v1::GetStatsResponse> RbmrecClient::GetStats() {
  grpc::ClientContext context;
  SetUnaryDeadline(&context);
  v1::GetStatsResponse response;
  grpc::Status status =
      stub_->GetStats(&context, v1::GetStatsRequest(), &response);
  if (!status.ok()) return FromGrpcStatus(status, "GetStats");
  return response;
}

absl::StatusOr<grpc::health::v1::HealthCheckResponse> RbmrecClient::Health(
    const std::string& service) {
  grpc::ClientContext context;
  SetUnaryDeadline(&context);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status status = health_stub_->Check(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status, "Health.Check");
  return response;
}

}  // namespace rbmrec::client
