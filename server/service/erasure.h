#ifndef RBMREC_SERVER_SERVICE_ERASURE_H_
#define RBMREC_SERVER_SERVICE_ERASURE_H_

// DeleteUser's erasure, the guarantee stated in proto/rbmrec.proto: the
// user's ratings are deleted from the store, then ModelRegistry::EraseUser
// takes the user out of the served model and rewrites every stored version
// that knows the user; the read caches forget the user and the online
// model gets the histogram deltas. The service (server/service/service.h)
// checks the id before and counts erasures (retrain_after_erasures) after.
//
// Thread-safe as its parts are; concurrent erasures of one user: one
// deletes the ratings, the other finds none (and erases from the models).

#include <string>

#include "absl/status/statusor.h"
#include "proto/rbmrec.pb.h"
#include "server/caches/read_caches.h"
#include "server/models/model_registry.h"
#include "server/models/online_updater.h"
#include "store/store.h"

namespace rbmrec::server {

namespace v1 = ::rbmrec::v1;

// Erases `user` (a valid id). Fills deleted_ratings,
// erased_from_served_model and model_versions_rewritten. Errors: NOT_FOUND
// when neither the store nor any model knows the user; the store's; the
// registry's, prefixed with what was done ("the user's ratings were
// deleted, but erasing ... failed: ...; call DeleteUser again"); INTERNAL
// naming the versions that could not be rewritten, after the rest is done.
absl::StatusOr<v1::DeleteUserResponse> EraseUserEverywhere(
    const std::string& user, store::Store* store, ModelRegistry* registry,
    ReadCaches* caches, OnlineUpdater* online);

}  // namespace rbmrec::server

#endif  // RBMREC_SERVER_SERVICE_ERASURE_H_
