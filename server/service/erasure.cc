#include "server/service/erasure.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/metrics/metrics.h"

namespace rbmrec::server {

absl::StatusOr<v1::DeleteUserResponse> EraseUserEverywhere(
    const std::string& user, store::Store* store, ModelRegistry* registry,
    ReadCaches* caches, OnlineUpdater* online) {
  // The ratings as stored just before the deletion: the contributions to
  // take out of the models (and the online histogram deltas).
  std::vector<store::UserRating> old;
  bool in_store = true;
  {
    absl::StatusOr<std::vector<store::UserRating>> r =
        store->GetUserRatings(user);
    NoteStoreStatus(r.status());
    if (absl::IsNotFound(r.status())) {
      in_store = false;
    } else if (!r.ok()) {
      return r.status();
    } else {
      old = std::move(*r);
    }
  }
  v1::DeleteUserResponse resp;
  if (in_store) {
    absl::StatusOr<int64_t> deleted = store->DeleteUser(user);
    NoteStoreStatus(deleted.status());
    caches->InvalidateUsers({user});
    if (absl::IsNotFound(deleted.status())) {
      in_store = false;  // deleted by a concurrent call
    } else if (!deleted.ok()) {
      return deleted.status();
    } else {
      resp.set_deleted_ratings(*deleted);
    }
  }
  // A user the store no longer has may still be in the models (a repeated
  // call after a failed erasure): erase from them anyway.
  std::vector<std::pair<std::string, double>> ratings;
  ratings.reserve(old.size());
  for (const store::UserRating& u : old) ratings.emplace_back(u.item, u.rating);
  absl::StatusOr<ModelRegistry::Erasure> erased =
      registry->EraseUser(user, ratings);
  caches->InvalidateUsers({user});
  if (!erased.ok()) {
    return absl::Status(
        erased.status().code(),
        absl::StrCat(in_store ? "the user's ratings were deleted, but " : "",
                     "erasing user_id '", user,
                     "' from the stored model "
                     "versions failed: ",
                     erased.status().message(), "; call DeleteUser again"));
  }
  if (!in_store && !erased->served && erased->versions_rewritten == 0 &&
      erased->failures.empty()) {
    return absl::NotFoundError(absl::StrCat("user_id '", user, "' not found"));
  }
  if (!erased->failures.empty()) {
    return absl::InternalError(absl::StrCat(
        in_store ? "the user's ratings were deleted and " : "", "user_id '",
        user, "' was erased from the served model and ",
        erased->versions_rewritten, " stored version(s), but not from: ",
        absl::StrJoin(erased->failures, "; "),
        "; delete those versions (DeleteModel) or call DeleteUser again"));
  }
  // Histogram deltas for the online model (the per-user state is gone
  // already, so no item-input change and no user update).
  if (online->Active() && !old.empty()) {
    std::vector<OnlineEvent> events(1);
    events[0].user = user;
    events[0].update = false;
    for (const store::UserRating& u : old) {
      events[0].deltas.push_back(HistDelta{u.item, u.rating, -1});
    }
    online->Enqueue(std::move(events));
  }
  resp.set_erased_from_served_model(erased->served);
  resp.set_model_versions_rewritten(erased->versions_rewritten);
  return resp;
}

}  // namespace rbmrec::server
