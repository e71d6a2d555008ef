// SqliteStore's model versions and settings: the shared logic of
// store/model_versions.h on SqliteModelSql.

#include "store/sqlite_models.h"

#include <sqlite3.h>

#include <memory>
#include <utility>

#include "store/sqlite_store.h"
#include "store/status_macros.h"

namespace rbmrec::store {
namespace internal {

absl::StatusOr<bool> IsJsonObject(Connection& conn, std::string_view json) {
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * stmt,
      conn.Prepare("SELECT CASE WHEN json_valid(?1) THEN json_type(?1) END"));
  Stmt s(conn, stmt);
  s.BindText(1, json);
  RBMREC_STORE_ASSIGN_OR_RETURN(bool row, s.Next());
  return row && s.Text(0) == "object";
}

absl::StatusOr<int64_t> SqliteModelSql::InsertModelRow(const ModelInfo& meta,
                                                       std::string_view blob) {
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * insert,
      conn_.Prepare("INSERT INTO models(created_unix_ms, kind, n_users, "
                    "n_items, n_ratings, metrics, size_bytes, model, "
                    "validation_rmse, epochs, train_seconds) "
                    "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"));
  Stmt s(conn_, insert);
  s.BindInt(1, meta.created_unix_ms);
  s.BindText(2, meta.kind);
  s.BindInt(3, meta.n_users);
  s.BindInt(4, meta.n_items);
  s.BindInt(5, meta.n_ratings);
  s.BindTextOrNull(6, meta.metrics_json);
  s.BindInt(7, static_cast<int64_t>(blob.size()));
  s.BindBlob(8, blob);
  s.BindDouble(9, meta.validation_rmse);
  s.BindInt(10, meta.epochs);
  s.BindDouble(11, meta.train_seconds);
  RBMREC_STORE_RETURN_IF_ERROR(s.Run());
  return sqlite3_last_insert_rowid(conn_.db());
}

absl::StatusOr<std::optional<int64_t>> SqliteModelSql::LockModel(
    int64_t version, bool /*exclusive: the write transaction locks all*/) {
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * find,
      conn_.Prepare("SELECT size_bytes FROM models WHERE version=?1"));
  Stmt s(conn_, find);
  s.BindInt(1, version);
  RBMREC_STORE_ASSIGN_OR_RETURN(bool row, s.Next());
  if (!row) return std::optional<int64_t>();
  return std::optional<int64_t>(s.Int(0));
}

absl::StatusOr<bool> SqliteModelSql::SetPinned(int64_t version, bool pinned) {
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * update,
      conn_.Prepare("UPDATE models SET pinned=?2 WHERE version=?1"));
  Stmt s(conn_, update);
  s.BindInt(1, version);
  s.BindInt(2, pinned ? 1 : 0);
  RBMREC_STORE_RETURN_IF_ERROR(s.Run());
  return sqlite3_changes(conn_.db()) != 0;
}

absl::StatusOr<bool> SqliteModelSql::SetBlob(int64_t version,
                                             std::string_view blob) {
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * update,
      conn_.Prepare("UPDATE models SET model=?2, size_bytes=?3 "
                    "WHERE version=?1"));
  Stmt s(conn_, update);
  s.BindInt(1, version);
  s.BindBlob(2, blob);
  s.BindInt(3, static_cast<int64_t>(blob.size()));
  RBMREC_STORE_RETURN_IF_ERROR(s.Run());
  return sqlite3_changes(conn_.db()) != 0;
}

absl::Status SqliteModelSql::DeleteModelRows(
    absl::Span<const int64_t> versions) {
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * del, conn_.Prepare("DELETE FROM models WHERE version=?1"));
  for (int64_t v : versions) {
    Stmt s(conn_, del);
    s.BindInt(1, v);
    RBMREC_STORE_RETURN_IF_ERROR(s.Run());
  }
  return IncrementalVacuum(conn_);
}

absl::Status SqliteModelSql::WalkModels(RetentionWalk& walk) {
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * list,
      conn_.Prepare("SELECT version, kind, size_bytes, pinned FROM models "
                    "ORDER BY version DESC"));
  Stmt s(conn_, list);
  while (true) {
    RBMREC_STORE_ASSIGN_OR_RETURN(bool row, s.Next());
    if (!row) return absl::OkStatus();
    walk.Visit(s.Int(0), s.Text(1), s.Int(2), s.Int(3) != 0);
  }
}

absl::StatusOr<std::optional<std::string>> SqliteModelSql::ReadMeta(
    std::string_view key) {
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * stmt,
      conn_.Prepare("SELECT value FROM meta WHERE key=?1"));
  Stmt s(conn_, stmt);
  s.BindText(1, key);
  RBMREC_STORE_ASSIGN_OR_RETURN(bool row, s.Next());
  if (!row || s.IsNull(0)) return std::optional<std::string>();
  return std::optional<std::string>(std::string(s.Text(0)));
}

absl::Status SqliteModelSql::WriteMeta(std::string_view key,
                                       std::string_view value) {
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * stmt,
      conn_.Prepare("INSERT INTO meta(key, value) VALUES(?1, ?2) "
                    "ON CONFLICT(key) DO UPDATE SET value=excluded.value"));
  Stmt s(conn_, stmt);
  s.BindText(1, key);
  s.BindText(2, value);
  return s.Run();
}

absl::StatusOr<std::string> SqliteModelSql::InitMeta(std::string_view key,
                                                     std::string_view value) {
  RBMREC_STORE_RETURN_IF_ERROR(txn_.Begin(Txn::kWrite));
  RBMREC_STORE_ASSIGN_OR_RETURN(std::optional<std::string> stored,
                                ReadMeta(key));
  if (!stored.has_value()) {
    RBMREC_STORE_RETURN_IF_ERROR(WriteMeta(key, value));
    stored = std::string(value);
  }
  RBMREC_STORE_RETURN_IF_ERROR(txn_.Commit());
  return *stored;
}

void SqliteModelSql::Deleted() {
  // Best effort: the file shrinks once the WAL is checkpointed; a later
  // (automatic) checkpoint completes what cannot be done now.
  (void)CheckpointPassive(conn_);
}

absl::StatusOr<ModelSql::Models> SqliteModelSql::ReadModels() {
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * stmt,
      conn_.Prepare("SELECT version, created_unix_ms, kind, n_users, n_items, "
                    "n_ratings, metrics, size_bytes, pinned, "
                    "validation_rmse, epochs, train_seconds FROM models "
                    "ORDER BY version DESC"));
  RBMREC_STORE_RETURN_IF_ERROR(txn_.Begin(Txn::kRead));
  Models out;
  RBMREC_STORE_ASSIGN_OR_RETURN(out.active, ReadMeta(kActiveModelKey));
  {
    Stmt s(conn_, stmt);
    while (true) {
      RBMREC_STORE_ASSIGN_OR_RETURN(bool row, s.Next());
      if (!row) break;
      ModelInfo m;
      m.version = sqlite3_column_int64(stmt, 0);
      m.created_unix_ms = sqlite3_column_int64(stmt, 1);
      m.kind = std::string(ColumnText(stmt, 2));
      m.n_users = sqlite3_column_int64(stmt, 3);
      m.n_items = sqlite3_column_int64(stmt, 4);
      m.n_ratings = sqlite3_column_int64(stmt, 5);
      m.metrics_json = std::string(ColumnText(stmt, 6));
      m.size_bytes = sqlite3_column_int64(stmt, 7);
      m.pinned = sqlite3_column_int64(stmt, 8) != 0;
      m.validation_rmse = sqlite3_column_double(stmt, 9);
      m.epochs = sqlite3_column_int(stmt, 10);
      m.train_seconds = sqlite3_column_double(stmt, 11);
      out.models.push_back(std::move(m));
    }
  }
  RBMREC_STORE_RETURN_IF_ERROR(txn_.Commit());
  return out;
}

absl::StatusOr<std::vector<std::optional<std::string>>>
SqliteModelSql::ReadMetas(absl::Span<const std::string_view> keys) {
  RBMREC_STORE_RETURN_IF_ERROR(txn_.Begin(Txn::kRead));
  std::vector<std::optional<std::string>> out;
  for (std::string_view key : keys) {
    RBMREC_STORE_ASSIGN_OR_RETURN(std::optional<std::string> value,
                                  ReadMeta(key));
    out.push_back(std::move(value));
  }
  RBMREC_STORE_RETURN_IF_ERROR(txn_.Commit());
  return out;
}

absl::StatusOr<std::optional<std::string>> SqliteModelSql::ReadBlob(
    int64_t version) {
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * stmt,
      conn_.Prepare("SELECT model FROM models WHERE version=?1"));
  Stmt s(conn_, stmt);
  s.BindInt(1, version);
  RBMREC_STORE_ASSIGN_OR_RETURN(bool row, s.Next());
  if (!row) return std::optional<std::string>();
  const void* data = sqlite3_column_blob(stmt, 0);
  const int n = sqlite3_column_bytes(stmt, 0);
  if (data == nullptr || n <= 0) return std::optional<std::string>("");
  return std::optional<std::string>(
      std::string(static_cast<const char*>(data), static_cast<size_t>(n)));
}

}  // namespace internal

using internal::SqliteModelSql;

absl::StatusOr<int64_t> SqliteStore::InsertModel(const ModelInfo& meta,
                                                 std::string_view blob,
                                                 bool activate) {
  RBMREC_STORE_RETURN_IF_ERROR(CheckWritable());
  absl::MutexLock lock(&writer_.mu);
  SqliteModelSql sql(*writer_.conn);
  return internal::InsertModel(sql, meta, blob, activate);
}

absl::Status SqliteStore::ActivateModel(int64_t version) {
  RBMREC_STORE_RETURN_IF_ERROR(CheckWritable());
  absl::MutexLock lock(&writer_.mu);
  SqliteModelSql sql(*writer_.conn);
  return internal::ActivateModel(sql, version);
}

absl::Status SqliteStore::PinModel(int64_t version, bool pinned) {
  RBMREC_STORE_RETURN_IF_ERROR(CheckWritable());
  absl::MutexLock lock(&writer_.mu);
  SqliteModelSql sql(*writer_.conn);
  return internal::PinModel(sql, version, pinned);
}

absl::StatusOr<int64_t> SqliteStore::DeleteModel(int64_t version) {
  RBMREC_STORE_RETURN_IF_ERROR(CheckWritable());
  absl::MutexLock lock(&writer_.mu);
  SqliteModelSql sql(*writer_.conn);
  return internal::DeleteModel(sql, version);
}

absl::StatusOr<PruneResult> SqliteStore::PruneModels(
    const RetentionPolicy& policy) {
  RBMREC_STORE_RETURN_IF_ERROR(CheckWritable());
  absl::MutexLock lock(&writer_.mu);
  SqliteModelSql sql(*writer_.conn);
  return internal::PruneModels(sql, policy);
}

absl::Status SqliteStore::ReplaceModelBlob(int64_t version,
                                           std::string_view blob) {
  RBMREC_STORE_RETURN_IF_ERROR(CheckWritable());
  absl::MutexLock lock(&writer_.mu);
  SqliteModelSql sql(*writer_.conn);
  return internal::ReplaceModelBlob(sql, version, blob);
}

absl::StatusOr<std::string> SqliteStore::InitSetting(std::string_view key,
                                                     std::string_view value) {
  Guarded& g = options_.read_only ? *reader_ : writer_;
  absl::MutexLock lock(&g.mu);
  SqliteModelSql sql(*g.conn);
  return internal::InitSetting(sql, options_.read_only, key, value);
}

absl::StatusOr<std::vector<ModelInfo>> SqliteStore::ListModels() const {
  absl::MutexLock lock(&reader_->mu);
  SqliteModelSql sql(*reader_->conn);
  return internal::ListModels(sql);
}

absl::StatusOr<std::string> SqliteStore::LoadModelBlob(int64_t version) const {
  if (memory()) {
    absl::MutexLock lock(&writer_.mu);
    SqliteModelSql sql(*writer_.conn);
    return internal::LoadModelBlob(sql, version);
  }
  RBMREC_STORE_ASSIGN_OR_RETURN(std::unique_ptr<internal::Connection> conn,
                                OpenLongReader());
  SqliteModelSql sql(*conn);
  return internal::LoadModelBlob(sql, version);
}

absl::StatusOr<std::optional<int64_t>> SqliteStore::ActiveModelVersion() const {
  absl::MutexLock lock(&reader_->mu);
  SqliteModelSql sql(*reader_->conn);
  return internal::ActiveModelVersion(sql);
}

absl::StatusOr<std::vector<int64_t>> SqliteStore::ActivationHistory() const {
  absl::MutexLock lock(&reader_->mu);
  SqliteModelSql sql(*reader_->conn);
  return internal::ActivationHistory(sql);
}

}  // namespace rbmrec::store
