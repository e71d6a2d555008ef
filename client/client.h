#ifndef RBMREC_CLIENT_CLIENT_H_
#define RBMREC_CLIENT_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/security.h"
#include "core/readers.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "proto/health.grpc.pb.h"
#include "proto/rbmrec.grpc.pb.h"

namespace rbmrec::client {

namespace v1 = ::rbmrec::v1;

// Trailing metadata keys of a failed call (proto/rbmrec.proto).
inline constexpr char kReasonMetadataKey[] = "rbmrec-error-reason";
inline constexpr char kCommittedBatchesMetadataKey[] =
    "rbmrec-committed-batches";
inline constexpr char kCommittedRowsMetadataKey[] = "rbmrec-committed-rows";
// The leader's address sent by a follower replica (reason NOT_LEADER).
inline constexpr char kLeaderMetadataKey[] = "rbmrec-leader";

// Converts a gRPC status to an absl::Status with the same code; the message
// becomes "rpc <rpc>: <message>". OK stays OK. When `context` (the finished
// call's) is given, its trailing metadata is kept as payloads of the status:
// the error reason (read it with ErrorReasonOf) and an AddRatings call's
// committed counts (read them with CommittedOf). Malformed counts are
// dropped.
absl::Status FromGrpcStatus(const grpc::Status& status, absl::string_view rpc,
                            const grpc::ClientContext* context = nullptr);

// The machine-readable reason of a failed call (its trailing metadata
// `rbmrec-error-reason`, e.g. "LIMIT_EXCEEDED", "STORAGE_FULL"), kept by
// FromGrpcStatus; "" when the server sent none. Stored under the same
// payload URL as core/error_reason.h uses.
std::string ErrorReasonOf(const absl::Status& status);

// What a failed AddRatings stream had committed: its first `batches`
// batches, holding `rows` accepted rows.
struct CommittedCounts {
  int64_t batches = 0;
  int64_t rows = 0;
};
// The committed counts carried by a status from AddRatings, or nullopt when
// the server did not send them (e.g. the connection was lost, or a server
// that predates them): then nothing is known to be committed.
std::optional<CommittedCounts> CommittedOf(const absl::Status& status);

// The leader's address (HOST:PORT) sent with a NOT_LEADER refusal by a
// follower replica, kept by FromGrpcStatus; "" when none.
std::string LeaderAddressOf(const absl::Status& status);

// Progress of a streaming import, reported after every batch written.
struct ImportProgress {
  int64_t batches_sent = 0;
  int64_t rows_sent = 0;
  int64_t rows_total = 0;  // 0 when unknown
  double elapsed_seconds = 0;
  // True in the last report: every batch is written and the client waits for
  // the server to commit the batches still in flight and answer.
  bool done_sending = false;
};
using ImportProgressCallback = std::function<void(const ImportProgress&)>;

// Fills the next batch; returns false (leaving `batch` unused) when there are
// no more batches.
using BatchSource = std::function<bool(v1::AddRatingsRequest* batch)>;

// Called with every message of a Train stream, in order.
using TrainProgressCallback = std::function<void(const v1::TrainProgress&)>;

// A small synchronous client for the rbmrec.v1.Rbmrec service and the
// standard health service. Every method returns the server's response or the
// call's status converted by FromGrpcStatus (same code, message prefixed with
// "rpc <Name>: ").
//
// Thread-safe: methods may be called concurrently from several threads (e.g.
// CancelTraining while another thread is blocked in Train).
class RbmrecClient {
 public:
  struct Options {
    // Deadline of each unary RPC. Must be > 0.
    absl::Duration timeout = absl::Seconds(30);
    // Deadline of the streaming RPCs (AddRatings, Train), which legitimately
    // run for long. Infinite by default; they still fail fast (UNAVAILABLE)
    // when the server cannot be reached.
    absl::Duration stream_timeout = absl::InfiniteDuration();
    // Largest response accepted, in bytes.
    int max_receive_message_bytes = 64 << 20;
    // TLS (when security.tls) and the token sent with every call except
    // Health (when security.token is not empty); see client/security.h.
    ClientSecurity security;
  };

  // Connects (lazily, on the first call) to `target` ("host:port", or any
  // gRPC target such as "unix:/path"), with TLS when options.security.tls.
  RbmrecClient(const std::string& target, const Options& options);
  RbmrecClient(const std::string& target, absl::Duration timeout);
  // Uses an existing channel (for tests: an in-process server's channel);
  // options.security.token is still sent, the channel's credentials are the
  // caller's.
  RbmrecClient(std::shared_ptr<grpc::Channel> channel, const Options& options);

  RbmrecClient(const RbmrecClient&) = delete;
  RbmrecClient& operator=(const RbmrecClient&) = delete;

  // Streams batches from `next_batch` until it returns false, then returns
  // the server's summary. `progress` (may be empty) is called after every
  // batch written, and once more with done_sending = true after the last. If
  // the server fails the call part way, writing stops and the server's status
  // is returned, with its reason and committed counts (ReasonOf,
  // CommittedOf); the batches it committed stay.
  absl::StatusOr<v1::AddRatingsResponse> AddRatings(
      const BatchSource& next_batch, const ImportProgressCallback& progress);

  // Streams `rows` in batches of `batch_size` rows (the last one may be
  // smaller): batch b holds rows[b * batch_size, (b + 1) * batch_size), so
  // RejectedRow{batch, row} is rows[batch * batch_size + row]. Each row's
  // timestamp is sent in Rating.timestamp. With `views` every row is sent
  // as a view (Rating.kind VIEW, its rating unset).
  // REQUIRES: batch_size >= 1.
  absl::StatusOr<v1::AddRatingsResponse> ImportRatings(
      const std::vector<RawRating>& rows, int batch_size,
      const ImportProgressCallback& progress, bool views = false);

  absl::StatusOr<v1::DeleteRatingsResponse> DeleteRatings(
      const v1::DeleteRatingsRequest& request);
  absl::StatusOr<v1::DeleteUserResponse> DeleteUser(
      const v1::DeleteUserRequest& request);
  absl::StatusOr<v1::PutItemsResponse> PutItems(
      const v1::PutItemsRequest& request);

  // Runs a training job, calling `progress` (may be empty) with every
  // message of the stream. Returns the last message (normally in a terminal
  // state: SUCCEEDED, CANCELLED or FAILED; a job failing is not an RPC
  // error). An RPC error (e.g. FAILED_PRECONDITION: a job is already
  // running) is returned as a status; so is a stream that ends without any
  // message (INTERNAL).
  // Replicas: Train and CancelTraining sent to a follower are refused with
  // NOT_LEADER and the leader's address; this client then sends the call
  // once more, to that address (same options and credentials), when it was
  // created from a target (not from a channel).
  absl::StatusOr<v1::TrainProgress> Train(
      const v1::TrainRequest& request, const TrainProgressCallback& progress);
  absl::StatusOr<v1::CancelTrainingResponse> CancelTraining();

  absl::StatusOr<v1::PredictRatingsResponse> PredictRatings(
      const v1::PredictRatingsRequest& request);
  absl::StatusOr<v1::RecommendResponse> Recommend(
      const v1::RecommendRequest& request);
  absl::StatusOr<v1::SimilarItemsResponse> SimilarItems(
      const v1::SimilarItemsRequest& request);
  // A page of a user's stored ratings (write role) and one item's row and
  // ratings histogram (read role).
  absl::StatusOr<v1::GetUserRatingsResponse> GetUserRatings(
      const v1::GetUserRatingsRequest& request);
  absl::StatusOr<v1::GetItemResponse> GetItem(const std::string& item_id);

  // RecommendAll: calls `message` with every message of the stream, in
  // order; `message` returning false cancels the call (CANCELLED). The
  // stream's deadline is the stream timeout. Errors: the RPC's.
  absl::Status RecommendAll(
      const v1::RecommendAllRequest& request,
      const std::function<bool(const v1::RecommendAllResponse&)>& message);

  absl::StatusOr<v1::ListModelsResponse> ListModels(
      const v1::ListModelsRequest& request = {});
  absl::StatusOr<v1::ModelInfo> ActivateModel(int64_t version);
  absl::StatusOr<v1::DeleteModelResponse> DeleteModel(
      const v1::DeleteModelRequest& request);
  // Pins (pinned = true) or unpins a version.
  absl::StatusOr<v1::ModelInfo> PinModel(int64_t version, bool pinned);
  absl::StatusOr<v1::PruneModelsResponse> PruneModels(
      const v1::PruneModelsRequest& request);
  absl::StatusOr<v1::GetStatsResponse> GetStats();

  // grpc.health.v1.Health/Check for `service` ("" = the whole server).
  absl::StatusOr<grpc::health::v1::HealthCheckResponse> Health(
      const std::string& service);

 private:
  // Set the deadline of a call from options_ (nothing when infinite) and add
  // the token's metadata.
  void SetUnaryDeadline(grpc::ClientContext* context) const;
  void SetStreamDeadline(grpc::ClientContext* context) const;

  // Where to resend a call refused with NOT_LEADER (see Train), or null.
  std::unique_ptr<RbmrecClient> LeaderClient(const absl::Status& refused) const;

  Options options_;
  bool follow_leader_ = false;  // created from a target
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Rbmrec::Stub> stub_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_stub_;
};

}  // namespace rbmrec::client

#endif  // RBMREC_CLIENT_CLIENT_H_
