#include "server/service/bulk.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/service/request_checks.h"
#include "server/service/service.h"

namespace rbmrec::server {

absl::StatusOr<RecommendCheck> CheckRecommendAll(
    const v1::RecommendAllRequest& request, const RequestLimits& limits,
    const RatingScale& scale) {
  const v1::RecommendRequest& t = request.template_();
  if (!t.user_id().empty()) {
    return absl::InvalidArgumentError(
        "template.user_id must be empty: RecommendAll names its users in "
        "user_ids (empty: every stored user)");
  }
  if (!t.ratings().empty()) {
    return absl::InvalidArgumentError(
        "template.ratings must be empty: RecommendAll answers stored users "
        "from their own ratings");
  }
  const int n = request.user_ids_size();
  if (n > limits.max_bulk_users) {
    return OverLimit("the number of user_ids", n, limits.max_bulk_users,
                     "--max-bulk-users");
  }
  for (int i = 0; i < n; ++i) {
    if (std::string why = IdProblem(request.user_ids(i), "user_id");
        !why.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("user_ids[", i, "]: ", why));
    }
  }
  const std::string& after = request.start_after_user();
  if (!after.empty()) {
    if (std::string why = IdProblem(after, "start_after_user"); !why.empty()) {
      return absl::InvalidArgumentError(why);
    }
    if (n > 0 && std::find(request.user_ids().begin(), request.user_ids().end(),
                           after) == request.user_ids().end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("start_after_user '", after,
                       "' is not one of user_ids: resume after a user of "
                       "the list"));
    }
  }
  return CheckRecommend(t, limits, scale);
}

RecommendAllJob::RecommendAllJob(const v1::RecommendAllRequest& request,
                                 int64_t model_version,
                                 const store::Store* store, AnswerFn answer,
                                 int users_per_message)
    : template_(request.template_()),
      listed_(request.user_ids().begin(), request.user_ids().end()),
      model_version_(model_version),
      store_(store),
      answer_(std::move(answer)),
      per_message_(users_per_message),
      after_(request.start_after_user()) {
  if (!listed_.empty() && !after_.empty()) {
    next_ =
        static_cast<size_t>(std::find(listed_.begin(), listed_.end(), after_) -
                            listed_.begin()) +
        1;
  }
}

absl::StatusOr<std::vector<std::string>> RecommendAllJob::NextUsers() {
  std::vector<std::string> users;
  if (done_) return users;
  if (!listed_.empty()) {
    const size_t end =
        std::min(listed_.size(), next_ + static_cast<size_t>(per_message_));
    for (; next_ < end; ++next_) users.push_back(listed_[next_]);
  } else {
    absl::StatusOr<std::vector<std::string>> page =
        store_->ListUsers(after_, per_message_);
    if (!page.ok()) return page.status();
    users = std::move(*page);
    if (!users.empty()) after_ = users.back();
  }
  done_ = users.empty();
  return users;
}

absl::StatusOr<v1::RecommendAllResponse> RecommendAllJob::Answer(
    const std::vector<std::string>& users) const {
  v1::RecommendAllResponse out;
  out.set_model_version(model_version_);
  out.mutable_users()->Reserve(static_cast<int>(users.size()));
  std::vector<v1::RecommendRequest> requests(users.size(), template_);
  for (size_t i = 0; i < users.size(); ++i) requests[i].set_user_id(users[i]);
  std::vector<absl::StatusOr<v1::RecommendResponse>> answers =
      answer_(requests);
  for (size_t i = 0; i < users.size(); ++i) {
    const std::string& user = users[i];
    absl::StatusOr<v1::RecommendResponse>& r = answers[i];
    if (!r.ok()) {
      absl::Status named(r.status().code(),
                         absl::StrCat("RecommendAll: user '", user,
                                      "': ", r.status().message()));
      // Keeps the reason (e.g. DATABASE_LOCKED).
      r.status().ForEachPayload(
          [&](absl::string_view url, const absl::Cord& payload) {
            named.SetPayload(url, payload);
          });
      return named;
    }
    v1::UserRecommendations* u = out.add_users();
    u->set_user_id(user);
    *u->mutable_response() = std::move(*r);
  }
  return out;
}

absl::Status DrainRecommendAll(
    RecommendAllJob& job,
    const std::function<bool(const v1::RecommendAllResponse&)>& write) {
  while (true) {
    absl::StatusOr<std::vector<std::string>> users = job.NextUsers();
    if (!users.ok()) return users.status();
    if (users->empty()) return absl::OkStatus();
    absl::StatusOr<v1::RecommendAllResponse> message = job.Answer(*users);
    if (!message.ok()) return message.status();
    if (!write(*message)) {
      return absl::CancelledError("RecommendAll: the reader went away");
    }
  }
}

// A member of RbmrecService (server/service/service.h), here beside the rest
// of RecommendAll.
absl::StatusOr<std::unique_ptr<RecommendAllJob>>
RbmrecService::StartRecommendAll(const v1::RecommendAllRequest& request) {
  absl::StatusOr<RecommendCheck> checked =
      CheckRecommendAll(request, Limits(), options_.scale);
  if (!checked.ok()) return checked.status();
  absl::StatusOr<Served> served =
      registry_->Get(request.template_().model_version());
  if (!served.ok()) return served.status();
  // The template's errors with this model (rank_by, threshold) up front.
  absl::StatusOr<RankPlan> plan =
      ToRankOptions(request.template_(), *checked, *served->model,
                    served->version, options_.recommend_candidates,
                    [&] { return caches_->DefaultThreshold(served->model); });
  if (!plan.ok()) return plan.status();
  return std::make_unique<RecommendAllJob>(
      request, served->version, store_.get(),
      [this, checked = *checked,
       served = *served](const std::vector<v1::RecommendRequest>& users) {
        return RecommendServedBatch(users, checked, served);
      });
}

}  // namespace rbmrec::server
