#ifndef RBMREC_SERVER_MODELS_MODEL_REGISTRY_H_
#define RBMREC_SERVER_MODELS_MODEL_REGISTRY_H_

// ModelRegistry: the served model snapshot and the stored model versions.
//
// Serving. The served snapshot is an immutable std::shared_ptr<const Model>
// with its version and the online-sequence number it includes (Served);
// Current() reads it with std::atomic_load of a shared_ptr (no registry
// lock), so readers never wait for training, publishing or a store call.
//
// Publishing (a full model, an online snapshot, an in-memory online
// replacement, ActivateModel, DeleteModel, PinModel, PruneModels) is
// serialized by the registry's one mutex, held across the
// store writes of one operation (never across decoding or serializing a
// model). After every publish the retention policy is applied
// (Store::PruneModels): the active version, pinned ones, the newest
// keep_full "full" and the newest keep_online "online" versions stay.
//
// Non-active versions. Get(version) for a version other than the served one
// answers from a byte-bounded LRU cache (VersionCache, its own mutex); on a
// miss the CALLING thread reads and decodes the blob with no registry lock
// held, then offers it to the cache. Two concurrent misses of the same
// version may both decode it (the later insert replaces the earlier); a
// version larger than the whole budget is served but not cached.
//
// Start. LoadAtStart() loads the store's active version; when it cannot be
// read or decoded, another version is served instead and marked active in
// the store: the most recently active one that loads (Store::
// ActivationHistory), else the newest one that loads; load_error() says
// what happened and which rule chose (also when no version loads).
//
// Activation policy kIfBetter compares validation RMSEs; when the new
// model or the active one has none (trained with validation_fraction 0),
// there is nothing to compare and the new model is NOT activated (the
// reason says so and how to activate it), unless no model is active.
//
// Corrupt versions. A version whose blob failed to decode (Get, Activate,
// LoadAtStart) or to Verify is remembered with the reason until it
// verifies again: CorruptReason().
//
// Thread-safe: every public method may be called from any thread. Mutexes:
// the registry's publish mutex and the VersionCache's own.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/model.h"
#include "store/store.h"

namespace rbmrec::server {

// One served model. `online_seq` is the first online-update sequence number
// NOT contained in `model` (see OnlineUpdater): updates numbered below it are
// already part of it.
struct Served {
  std::shared_ptr<const Model> model;
  int64_t version = 0;
  uint64_t online_seq = 0;
};

enum class Activation { kAlways, kIfBetter, kNever };

struct RegistryOptions {
  // Default activation policy of published full models (--activate).
  Activation activation = Activation::kIfBetter;
  // kIfBetter: the new model is activated unless its validation RMSE is
  // worse than the active one's by more than this (rating units;
  // --activate-tolerance).
  double activate_tolerance = 0.005;
  // Retention (see the top of this file; --keep-full-models,
  // --keep-online-models). REQUIRES >= 0.
  int keep_full = 3;
  int keep_online = 2;
  // Budget of the cache of loaded non-active versions (estimated bytes;
  // --version-cache-mb).
  size_t version_cache_bytes = size_t{256} << 20;
};

// A byte-bounded LRU of loaded model versions. Thread-safe (one mutex).
class VersionCache {
 public:
  explicit VersionCache(size_t max_bytes) : max_bytes_(max_bytes) {}
  // The cached model of `version`, or null.
  std::shared_ptr<const Model> Find(int64_t version);
  // Inserts (evicting least recently used entries to stay under budget); a
  // model larger than the whole budget is not kept.
  void Put(int64_t version, std::shared_ptr<const Model> model);
  void Erase(int64_t version);
  void Clear();
  size_t bytes() const;
  size_t size() const;
  // Estimated resident size of a model.
  static size_t ModelBytes(const Model& model);

 private:
  struct Entry {
    int64_t version;
    std::shared_ptr<const Model> model;
    size_t bytes;
  };
  mutable absl::Mutex mu_;
  std::list<Entry> lru_ ABSL_GUARDED_BY(mu_);  // most recent first
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  const size_t max_bytes_;
};

class ModelRegistry {
 public:
  // `store` must outlive the registry.
  ModelRegistry(store::Store* store, const RegistryOptions& options);
  ModelRegistry(const ModelRegistry&) = delete;
  ModelRegistry& operator=(const ModelRegistry&) = delete;

  // Loads the active version with fallback (top of this file). Never fails:
  // problems end up in load_error() and the log. Call once, before serving.
  void LoadAtStart();

  Served Current() const;
  // True when a model is served.
  bool Serving() const;
  // Why the stored active version did not load at start (and what was done
  // instead); "" when it loaded. Cleared by every publish or activation.
  std::string load_error() const;

  // version 0 or the served version: Current(). Another version: from the
  // cache or loaded on the calling thread (no lock held). Errors:
  // InvalidArgument for version < 0; FailedPrecondition when version is 0
  // and no model is served; NotFound for an unknown version; DataLoss when
  // its blob does not decode.
  absl::StatusOr<Served> Get(int64_t version);
  // True when Get(version) answers from memory without reading the store
  // (version 0, the served version, a cached one, or a negative version,
  // which Get refuses at once). Thread-safe; never blocks on the store.
  bool Resident(int64_t version);

  // Outcome of PublishFull.
  struct Published {
    int64_t version = 0;
    bool activated = false;
    std::string why_not;  // when !activated: the reason
  };
  // Stores `model` (kind "full", serialized as `blob`) and activates it per
  // `policy` (kIfBetter compares model->summary().valid_rmse, 0 = none, with
  // the served model's; an online snapshot carries the RMSE of the full
  // model it grew from), then applies retention. Not activated: the model
  // goes to the version cache. `online_seq` as in Served.
  // Errors: the store's, nothing published.
  // `erasures_from`: the ErasureSeq() read before the model's training data
  // was: users erased since are erased from `model` (and `blob` rebuilt)
  // before it is stored, so a training that overlapped an erasure does not
  // bring the user back.
  absl::StatusOr<Published> PublishFull(std::shared_ptr<const Model> model,
                                        const store::ModelInfo& meta,
                                        const std::string& blob,
                                        Activation policy, uint64_t online_seq,
                                        uint64_t erasures_from = kNoErasures);
  static constexpr uint64_t kNoErasures = ~uint64_t{0};

  // Erasure of one user (the service's erasure guarantee,
  // server/service/service.h): EraseUser (core/online.h) applied to the served
  // model (a copy, swapped in with ReplaceInMemory: same version and
  // online_seq) and to every stored version that knows the user (decoded,
  // erased, re-serialized and written back with Store::ReplaceModelBlob);
  // cached versions are dropped. `ratings` are the user's ratings (item id,
  // rating) as stored just before their deletion: the contributions to the item
  // inputs that are subtracted (exact where a version's item inputs were built
  // from those ratings). Serialized with other erasures and with PublishFull.
  struct Erasure {
    bool served = false;                // the served model knew the user
    int versions_rewritten = 0;         // stored versions rewritten
    std::vector<std::string> failures;  // versions that could not be
  };
  // rewrite_stored false: the served model only (and the cache dropped),
  // for a replica told of an erasure that another replica made (which
  // rewrote the shared store's versions).
  absl::StatusOr<Erasure> EraseUser(
      const std::string& user,
      const std::vector<std::pair<std::string, double>>& ratings,
      bool rewrite_stored = true);
  // The number of erasures so far (PublishFull's erasures_from).
  uint64_t ErasureSeq() const;

  // Serves `next` (same version) instead of `base` if `base` is still the
  // served model; returns false (and changes nothing) otherwise.
  bool ReplaceInMemory(const std::shared_ptr<const Model>& base,
                       std::shared_ptr<const Model> next, uint64_t online_seq);

  // Stores `model` (serialized `blob`) as a new active "online" version if
  // it is still the served model, then applies retention. Returns the new
  // version. Errors: Aborted when another model was published meanwhile
  // (nothing stored); the store's.
  absl::StatusOr<int64_t> PublishOnline(
      const std::shared_ptr<const Model>& model, const store::ModelInfo& meta,
      const std::string& blob);

  // Loads and serves `version` and marks it active in the store. The blob is
  // read and decoded before the publish lock is taken. Errors:
  // InvalidArgument (version <= 0), NotFound, DataLoss when corrupt (the
  // served model is unchanged), the store's.
  absl::StatusOr<store::ModelInfo> Activate(int64_t version,
                                            uint64_t online_seq);

  // Replicas (several processes on one database): serves the store's active
  // version when it differs from the served one, i.e. another process
  // published or activated it. Nothing is written to the store. The blob is
  // read and decoded with no lock held; then, under the publish lock, the
  // store's active version is read again and the model is served only if it
  // is still the active one (so a late Follow never rolls back a newer
  // publish). `online_seq` as in Served. Returns the version served after
  // the call (0: none). Errors: the store's; DataLoss when the active blob
  // does not decode (the served model is unchanged).
  absl::StatusOr<int64_t> Follow(uint64_t online_seq);

  // Deletes a stored version. Errors: InvalidArgument (version <= 0),
  // NotFound, FailedPrecondition for the active version or (without force)
  // a pinned one.
  absl::StatusOr<int64_t> Delete(int64_t version, bool force);
  // Pins / unpins; returns the version's info. Errors: InvalidArgument,
  // NotFound.
  absl::StatusOr<store::ModelInfo> Pin(int64_t version, bool pinned);
  // Applies `policy` (or the registry's own when null). Errors:
  // InvalidArgument for negative counts; the store's.
  absl::StatusOr<store::PruneResult> Prune(
      const store::RetentionPolicy* policy);

  // Reads the blob of `version` and checks its frame and checksum
  // (VerifyModelBytes) without decoding it; records the outcome for
  // CorruptReason. Errors: NotFound; DataLoss when corrupt; the store's.
  absl::Status Verify(int64_t version) const;
  // Why `version` is known to be corrupt; "" when it is not known to be.
  std::string CorruptReason(int64_t version) const;

  const RegistryOptions& options() const { return options_; }
  size_t cached_bytes() const { return cache_.bytes(); }

 private:
  absl::StatusOr<std::shared_ptr<const Model>> LoadVersion(
      int64_t version) const;
  absl::StatusOr<store::ModelInfo> Info(int64_t version) const;
  // Serves `s` and clears load_error. REQUIRES publish_mu_ held.
  void SetServed(Served s);
  // Retention after a publish; failures are logged.
  void RetainLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(publish_mu_);
  absl::StatusOr<store::PruneResult> PruneLocked(
      const store::RetentionPolicy& policy)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(publish_mu_);

  store::Store* const store_;
  const RegistryOptions options_;

  // What readers see, replaced as a whole: read with std::atomic_load (no
  // lock, never waits for a publish), written with std::atomic_store while
  // publish_mu_ is held.
  struct State {
    Served served;
    std::string load_error;
  };
  std::shared_ptr<const State> Load() const;
  void Put(State next) ABSL_EXCLUSIVE_LOCKS_REQUIRED(publish_mu_);
  std::shared_ptr<const State> state_;

  // Serializes publishing and version management (store writes).
  absl::Mutex publish_mu_;

  VersionCache cache_;

  void NoteCorrupt(int64_t version, std::string why) const;

  // Erasures, for PublishFull of models trained while they happened: the
  // last kErasureLog entries, entry i having sequence number erasure_base_
  // + i.
  struct ErasedUser {
    std::string user;
    std::vector<std::pair<std::string, double>> ratings;
  };
  static constexpr size_t kErasureLog = 65536;
  // Held across a whole erasure and across PublishFull; taken before
  // publish_mu_.
  mutable absl::Mutex erasure_mu_ ABSL_ACQUIRED_BEFORE(publish_mu_);
  std::deque<ErasedUser> erasures_ ABSL_GUARDED_BY(erasure_mu_);
  uint64_t erasure_base_ ABSL_GUARDED_BY(erasure_mu_) = 0;
  mutable absl::Mutex corrupt_mu_;
  mutable absl::flat_hash_map<int64_t, std::string> corrupt_
      ABSL_GUARDED_BY(corrupt_mu_);
};

}  // namespace rbmrec::server

#endif  // RBMREC_SERVER_MODELS_MODEL_REGISTRY_H_
