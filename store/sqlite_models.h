#ifndef RBMREC_STORE_SQLITE_MODELS_H_
#define RBMREC_STORE_SQLITE_MODELS_H_

// SQLite's SQL for the model-version operations (store/model_versions.h)
// and the meta helpers sqlite_store.cc shares with them. Private to store/.

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "store/model_versions.h"
#include "store/sqlite_db.h"

namespace rbmrec::store::internal {

// Whether `json` is a JSON object (SQLite's JSON1 decides).
absl::StatusOr<bool> IsJsonObject(Connection& conn, std::string_view json);

// The ModelSql of one SQLite connection (write transactions BEGIN
// IMMEDIATE; reads in one read transaction).
class SqliteModelSql final : public ModelSql {
 public:
  explicit SqliteModelSql(Connection& conn) : conn_(conn), txn_(conn) {}

  std::string_view name() const override { return conn_.path(); }
  absl::Status Begin() override { return txn_.Begin(Txn::kWrite); }
  absl::Status Commit() override { return txn_.Commit(); }
  absl::StatusOr<bool> IsJsonObject(std::string_view json) override {
    return internal::IsJsonObject(conn_, json);
  }
  absl::StatusOr<int64_t> InsertModelRow(const ModelInfo& meta,
                                         std::string_view blob) override;
  absl::StatusOr<std::optional<int64_t>> LockModel(int64_t version,
                                                   bool exclusive) override;
  absl::StatusOr<bool> SetPinned(int64_t version, bool pinned) override;
  absl::StatusOr<bool> SetBlob(int64_t version, std::string_view blob) override;
  absl::Status DeleteModelRows(absl::Span<const int64_t> versions) override;
  absl::Status WalkModels(RetentionWalk& walk) override;
  absl::StatusOr<std::optional<std::string>> ReadMeta(
      std::string_view key) override;
  absl::Status WriteMeta(std::string_view key, std::string_view value) override;
  absl::StatusOr<std::string> InitMeta(std::string_view key,
                                       std::string_view value) override;
  void Deleted() override;
  absl::StatusOr<Models> ReadModels() override;
  absl::StatusOr<std::vector<std::optional<std::string>>> ReadMetas(
      absl::Span<const std::string_view> keys) override;
  absl::StatusOr<std::optional<std::string>> ReadBlob(int64_t version) override;

 private:
  Connection& conn_;
  Txn txn_;
};

}  // namespace rbmrec::store::internal

#endif  // RBMREC_STORE_SQLITE_MODELS_H_
