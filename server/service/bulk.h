#ifndef RBMREC_SERVER_SERVICE_BULK_H_
#define RBMREC_SERVER_SERVICE_BULK_H_

// RecommendAll (proto/rbmrec.proto): the checks of a request and the job of
// one stream. A job walks the stream's users in order, a message's worth at
// a time (NextUsers), and answers a message's users (Answer) with the
// service's Recommend on one model snapshot, so that each answer equals a
// Recommend of the template with the user's id and the snapshot's version
// (bit for bit: the service ranks a message's users in batches whose
// all-item passes over W are shared, RbmrecService::RecommendServedBatch).
// Memory is bounded by the caller: a job holds the request's user_ids (or
// one page of stored users), never answers it has handed out.
//
// The transport (server/transport/grpc_server.cc) computes several messages
// at once on its bulk threads and writes them in order; DrainRecommendAll
// is the same sequentially (tests).
//
// RbmrecService::StartRecommendAll (server/service/service.h) builds the
// job; it is defined in bulk.cc, beside the rest of RecommendAll.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/rating_scale.h"
#include "proto/rbmrec.pb.h"
#include "server/service/request_plan.h"
#include "store/store.h"

namespace rbmrec::server {

// Users per message of a RecommendAll stream.
inline constexpr int kBulkUsersPerMessage = 32;

// Every check of a RecommendAll request that needs no model: the
// template's user_id and ratings empty (INVALID_ARGUMENT), at most
// limits.max_bulk_users user_ids (RESOURCE_EXHAUSTED + LIMIT_EXCEEDED
// naming --max-bulk-users), each a valid id ("user_ids[3]: ..."),
// start_after_user valid and, with user_ids, one of them; then
// CheckRecommend of the template. Returns the template's check. Pure.
absl::StatusOr<RecommendCheck> CheckRecommendAll(
    const v1::RecommendAllRequest& request, const RequestLimits& limits,
    const RatingScale& scale);

// One stream's users and answers. NextUsers is not thread-safe (one caller
// at a time, in stream order); Answer is thread-safe and may run on several
// threads at once.
class RecommendAllJob {
 public:
  // Recommend of each request (one per user: user_id set, the template's
  // other fields) on the pinned snapshot, one answer or error per request,
  // in order (the service answers them in batches that share their passes
  // over the model). Must be thread-safe.
  using AnswerFn =
      std::function<std::vector<absl::StatusOr<v1::RecommendResponse>>(
          const std::vector<v1::RecommendRequest>&)>;

  // REQUIRES: CheckRecommendAll(request) is OK; `store` outlives the job;
  // users_per_message >= 1.
  RecommendAllJob(const v1::RecommendAllRequest& request, int64_t model_version,
                  const store::Store* store, AnswerFn answer,
                  int users_per_message = kBulkUsersPerMessage);

  // The version every message answers from.
  int64_t model_version() const { return model_version_; }

  // The users of the next message, in stream order: the request's user_ids
  // after start_after_user, or the stored users with greater ids (a page of
  // Store::ListUsers). Empty when there are no more. Errors: the store's.
  absl::StatusOr<std::vector<std::string>> NextUsers();

  // The message answering `users` (one UserRecommendations each, in order).
  // Errors: the first failing user's (e.g. the store's), naming the user.
  absl::StatusOr<v1::RecommendAllResponse> Answer(
      const std::vector<std::string>& users) const;

 private:
  const v1::RecommendRequest template_;
  const std::vector<std::string> listed_;  // empty: every stored user
  const int64_t model_version_;
  const store::Store* const store_;
  const AnswerFn answer_;
  const int per_message_;
  size_t next_ = 0;    // listed_: the next position
  std::string after_;  // stored users: the last one handed out
  bool done_ = false;
};

// Runs a whole stream on the calling thread: each message to `write`
// (false: the reader went away; stop and return CANCELLED). Errors: the
// job's.
absl::Status DrainRecommendAll(
    RecommendAllJob& job,
    const std::function<bool(const v1::RecommendAllResponse&)>& write);

}  // namespace rbmrec::server

#endif  // RBMREC_SERVER_SERVICE_BULK_H_
