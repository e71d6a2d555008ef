#ifndef RBMREC_STORE_MODEL_VERSIONS_H_
#define RBMREC_STORE_MODEL_VERSIONS_H_

// The model-version operations of Store (store.h: InsertModel ... PruneModels,
// ActivationHistory, InitSetting), written once for both backends: argument
// checks, NotFound / FailedPrecondition decisions and their messages, the
// activation history's bookkeeping and the retention decisions. Each backend
// supplies the SQL as a ModelSql on one of its connections; the functions
// below run on it. Private to store/.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "store/checks.h"
#include "store/store.h"

namespace rbmrec::store::internal {

// Keys of table meta.
inline constexpr std::string_view kActiveModelKey = "active_model_version";
inline constexpr std::string_view kActivationHistoryKey = "activation_history";
// Settings (InitSetting) live in meta under this prefix.
inline constexpr std::string_view kSettingPrefix = "setting.";

int64_t NowUnixMs();

// The SQL primitives of the model-version operations, on ONE connection for
// one call (the caller holds whatever lock guards the connection). Methods
// marked "in the transaction" run inside Begin() ... Commit(); destroying the
// ModelSql without Commit() rolls an open transaction back.
class ModelSql {
 public:
  virtual ~ModelSql() = default;

  // The database's name for messages (a path, or a URI without password).
  virtual std::string_view name() const = 0;

  // Opens / commits a write transaction.
  virtual absl::Status Begin() = 0;
  virtual absl::Status Commit() = 0;

  // Whether `json` is a JSON object. Outside a transaction.
  virtual absl::StatusOr<bool> IsJsonObject(std::string_view json) = 0;
  // ResourceExhausted when a blob of `size` bytes is more than the backend
  // stores (checked before anything is written; OK when the database itself
  // reports it).
  virtual absl::Status CheckBlobSize(size_t /*size*/) {
    return absl::OkStatus();
  }

  // In the transaction: inserts a models row (meta.created_unix_ms already
  // set, size_bytes = blob.size(), not pinned) and returns its version.
  virtual absl::StatusOr<int64_t> InsertModelRow(const ModelInfo& meta,
                                                 std::string_view blob) = 0;
  // In the transaction: the size_bytes of `version`, nullopt when there is
  // no such version; the row is locked until the commit (`exclusive`: for
  // update, else for share) where the backend locks rows.
  virtual absl::StatusOr<std::optional<int64_t>> LockModel(int64_t version,
                                                           bool exclusive) = 0;
  // In the transaction: sets pinned / replaces the blob (and size_bytes) of
  // `version`; false when there is no such version.
  virtual absl::StatusOr<bool> SetPinned(int64_t version, bool pinned) = 0;
  virtual absl::StatusOr<bool> SetBlob(int64_t version,
                                       std::string_view blob) = 0;
  // In the transaction: deletes the rows of `versions` (not empty) and gives
  // their space back where the backend can.
  virtual absl::Status DeleteModelRows(absl::Span<const int64_t> versions) = 0;
  // In the transaction: feeds every version to `walk`, newest first, locking
  // the rows until the commit where the backend locks rows.
  virtual absl::Status WalkModels(RetentionWalk& walk) = 0;

  // meta.<key>, nullopt when unset (or NULL). In the transaction or alone.
  virtual absl::StatusOr<std::optional<std::string>> ReadMeta(
      std::string_view key) = 0;
  // In the transaction: as ReadMeta, and the row stays locked until the
  // commit, so concurrent read-modify-writes of it serialize.
  virtual absl::StatusOr<std::optional<std::string>> ReadMetaForUpdate(
      std::string_view key) {
    return ReadMeta(key);
  }
  // In the transaction: sets meta.<key>.
  virtual absl::Status WriteMeta(std::string_view key,
                                 std::string_view value) = 0;
  // Stores `value` under meta.<key> unless the key is set, atomically, and
  // returns the stored value. Opens its own transaction if it needs one.
  virtual absl::StatusOr<std::string> InitMeta(std::string_view key,
                                               std::string_view value) = 0;
  // In the transaction, after the active version changed (announcements).
  virtual absl::Status Activated() { return absl::OkStatus(); }
  // After a commit that deleted versions: best-effort space management.
  virtual void Deleted() {}

  // Reads, each one consistent read (one statement or one read
  // transaction):
  // every version but the blobs, newest first (active not set), and the
  // stored meta.active_model_version;
  struct Models {
    std::vector<ModelInfo> models;
    std::optional<std::string> active;
  };
  virtual absl::StatusOr<Models> ReadModels() = 0;
  // the values of meta.<keys[i]> (nullopt when unset);
  virtual absl::StatusOr<std::vector<std::optional<std::string>>> ReadMetas(
      absl::Span<const std::string_view> keys) = 0;
  // the blob of `version`, nullopt when there is no such version.
  virtual absl::StatusOr<std::optional<std::string>> ReadBlob(
      int64_t version) = 0;
};

// The stored active version (meta.active_model_version as text): nullopt
// when unset; DataLoss naming `name` when it is not a number.
absl::StatusOr<std::optional<int64_t>> ParseActiveVersion(
    const std::optional<std::string>& text, std::string_view name);

// Writes: the Store methods of the same names, on `sql` (the caller checked
// that the store is writable and holds the writer's lock).
absl::StatusOr<int64_t> InsertModel(ModelSql& sql, const ModelInfo& meta,
                                    std::string_view blob, bool activate);
absl::Status ActivateModel(ModelSql& sql, int64_t version);
absl::Status PinModel(ModelSql& sql, int64_t version, bool pinned);
absl::StatusOr<int64_t> DeleteModel(ModelSql& sql, int64_t version);
absl::StatusOr<PruneResult> PruneModels(ModelSql& sql,
                                        const RetentionPolicy& policy);
absl::Status ReplaceModelBlob(ModelSql& sql, int64_t version,
                              std::string_view blob);
// InitSetting: `read_only` reads only (the value stored, else `value`).
absl::StatusOr<std::string> InitSetting(ModelSql& sql, bool read_only,
                                        std::string_view key,
                                        std::string_view value);

// Reads: the Store methods of the same names.
absl::StatusOr<std::vector<ModelInfo>> ListModels(ModelSql& sql);
absl::StatusOr<std::string> LoadModelBlob(ModelSql& sql, int64_t version);
absl::StatusOr<std::optional<int64_t>> ActiveModelVersion(ModelSql& sql);
absl::StatusOr<std::vector<int64_t>> ActivationHistory(ModelSql& sql);

}  // namespace rbmrec::store::internal

#endif  // RBMREC_STORE_MODEL_VERSIONS_H_
