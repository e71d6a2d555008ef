#ifndef RBMREC_STORE_PG_MODELS_H_
#define RBMREC_STORE_PG_MODELS_H_

// PostgreSQL's SQL for the model-version operations (store/model_versions.h)
// and what postgres_store.cc shares with them. Private to store/.

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "store/model_versions.h"
#include "store/pg_db.h"
#include "store/postgres_store.h"

namespace rbmrec::store {

// A reader connection borrowed from the pool, given back at destruction.
class PostgresStore::ReaderLease {
 public:
  explicit ReaderLease(const PostgresStore* store) : store_(store) {}
  ~ReaderLease() {
    if (conn_ != nullptr) store_->ReleaseReader(std::move(conn_));
  }
  absl::Status Acquire() {
    absl::StatusOr<std::unique_ptr<internal::PgConn>> c =
        store_->AcquireReader();
    if (!c.ok()) return c.status();
    conn_ = std::move(c).value();
    return absl::OkStatus();
  }
  internal::PgConn& operator*() { return *conn_; }

 private:
  const PostgresStore* const store_;
  std::unique_ptr<internal::PgConn> conn_;
};

namespace internal {

// The change feed's channel of model activations (payload: the origin).
inline constexpr const char* kModelsChannel = "rbmrec_models";

// Publishes a model activation, inside the caller's transaction.
absl::Status AnnounceModels(PgConn& conn, std::string_view origin);

// Whether `json` is a JSON object (PostgreSQL's jsonb parser decides). Runs
// outside any transaction: a parse error ends only this statement.
absl::StatusOr<bool> IsJsonObject(PgConn& conn, std::string_view json);

// The ModelSql of one PostgreSQL connection: rows read for update / share
// where ModelSql asks for locks; activations announced on kModelsChannel
// with `origin`; reads are single statements.
class PgModelSql final : public ModelSql {
 public:
  PgModelSql(PgConn& conn, std::string_view origin)
      : conn_(conn), txn_(conn), origin_(origin) {}

  std::string_view name() const override { return conn_.name(); }
  absl::Status Begin() override { return txn_.Begin(); }
  absl::Status Commit() override { return txn_.Commit(); }
  absl::StatusOr<bool> IsJsonObject(std::string_view json) override {
    return internal::IsJsonObject(conn_, json);
  }
  absl::Status CheckBlobSize(size_t size) override;
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
  absl::StatusOr<std::optional<std::string>> ReadMetaForUpdate(
      std::string_view key) override;
  absl::Status WriteMeta(std::string_view key, std::string_view value) override;
  absl::StatusOr<std::string> InitMeta(std::string_view key,
                                       std::string_view value) override;
  absl::Status Activated() override { return AnnounceModels(conn_, origin_); }
  absl::StatusOr<Models> ReadModels() override;
  absl::StatusOr<std::vector<std::optional<std::string>>> ReadMetas(
      absl::Span<const std::string_view> keys) override;
  absl::StatusOr<std::optional<std::string>> ReadBlob(int64_t version) override;

 private:
  PgConn& conn_;
  PgTxn txn_;
  const std::string_view origin_;
};

}  // namespace internal
}  // namespace rbmrec::store

#endif  // RBMREC_STORE_PG_MODELS_H_
