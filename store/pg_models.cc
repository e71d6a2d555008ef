// PostgresStore's model versions and settings: the shared logic of
// store/model_versions.h on PgModelSql.

#include "store/pg_models.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "store/status_macros.h"

namespace rbmrec::store {
namespace internal {

absl::Status AnnounceModels(PgConn& conn, std::string_view origin) {
  return conn
      .Exec("announcing a model activation", "SELECT pg_notify($1, $2)",
            {PgParam::Text(kModelsChannel), PgParam::Text(origin)})
      .status();
}

absl::StatusOr<bool> IsJsonObject(PgConn& conn, std::string_view json) {
  absl::StatusOr<PgResult> r = conn.Exec(
      "checking JSON", "SELECT jsonb_typeof($1::jsonb)", {PgParam::Text(json)});
  if (!r.ok()) {
    if (r.status().code() == absl::StatusCode::kInvalidArgument) return false;
    return r.status();
  }
  return r->rows() == 1 && r->Text(0, 0) == "object";
}

absl::Status PgModelSql::CheckBlobSize(size_t size) {
  if (size < (size_t{1} << 30)) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrFormat(
      "database '%s': a model blob of %d bytes exceeds PostgreSQL's 1 GB "
      "limit",
      conn_.name(), size));
}

absl::StatusOr<int64_t> PgModelSql::InsertModelRow(const ModelInfo& meta,
                                                   std::string_view blob) {
  RBMREC_STORE_ASSIGN_OR_RETURN(
      PgResult r,
      conn_.Exec(
          "storing a model version",
          "INSERT INTO models(created_unix_ms, kind, n_users, n_items, "
          "n_ratings, metrics, size_bytes, model, validation_rmse, epochs, "
          "train_seconds) "
          "VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) "
          "RETURNING version",
          {PgParam::Int(meta.created_unix_ms), PgParam::Text(meta.kind),
           PgParam::Int(meta.n_users), PgParam::Int(meta.n_items),
           PgParam::Int(meta.n_ratings), PgParam::TextOrNull(meta.metrics_json),
           PgParam::Int(static_cast<int64_t>(blob.size())),
           PgParam::Bytes(blob), PgParam::Double(meta.validation_rmse),
           PgParam::Int(meta.epochs), PgParam::Double(meta.train_seconds)}));
  return r.Int(0, 0);
}

absl::StatusOr<std::optional<int64_t>> PgModelSql::LockModel(int64_t version,
                                                             bool exclusive) {
  RBMREC_STORE_ASSIGN_OR_RETURN(
      PgResult r,
      conn_.Exec(
          exclusive ? "deleting a model version" : "activating a model version",
          exclusive ? "SELECT size_bytes FROM models WHERE version = $1 "
                      "FOR UPDATE"
                    : "SELECT size_bytes FROM models WHERE version = $1 "
                      "FOR SHARE",
          {PgParam::Int(version)}));
  if (r.rows() == 0) return std::optional<int64_t>();
  return std::optional<int64_t>(r.Int(0, 0));
}

absl::StatusOr<bool> PgModelSql::SetPinned(int64_t version, bool pinned) {
  RBMREC_STORE_ASSIGN_OR_RETURN(
      PgResult r, conn_.Exec("pinning a model version",
                             "UPDATE models SET pinned = $2 WHERE version = $1",
                             {PgParam::Int(version), PgParam::Bool(pinned)}));
  return r.Affected() != 0;
}

absl::StatusOr<bool> PgModelSql::SetBlob(int64_t version,
                                         std::string_view blob) {
  RBMREC_STORE_ASSIGN_OR_RETURN(
      PgResult r,
      conn_.Exec("rewriting a model version",
                 "UPDATE models SET model = $2, size_bytes = $3 "
                 "WHERE version = $1 RETURNING version",
                 {PgParam::Int(version), PgParam::Bytes(blob),
                  PgParam::Int(static_cast<int64_t>(blob.size()))}));
  return r.rows() != 0;
}

absl::Status PgModelSql::DeleteModelRows(absl::Span<const int64_t> versions) {
  return conn_
      .Exec("deleting model versions",
            "DELETE FROM models WHERE version = ANY($1::bigint[])",
            {PgParam::Text(IntArray(
                std::vector<int64_t>(versions.begin(), versions.end())))})
      .status();
}

absl::Status PgModelSql::WalkModels(RetentionWalk& walk) {
  RBMREC_STORE_ASSIGN_OR_RETURN(
      PgResult r, conn_.Exec("pruning model versions",
                             "SELECT version, kind, size_bytes, pinned "
                             "FROM models ORDER BY version DESC FOR UPDATE"));
  for (int i = 0; i < r.rows(); ++i) {
    walk.Visit(r.Int(i, 0), r.Text(i, 1), r.Int(i, 2), r.Bool(i, 3));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<std::string>> PgModelSql::ReadMeta(
    std::string_view key) {
  RBMREC_STORE_ASSIGN_OR_RETURN(
      PgResult r,
      conn_.Exec("reading a setting", "SELECT value FROM meta WHERE key = $1",
                 {PgParam::Text(key)}));
  if (r.rows() == 0 || r.IsNull(0, 0)) return std::optional<std::string>();
  return std::optional<std::string>(std::string(r.Text(0, 0)));
}

absl::StatusOr<std::optional<std::string>> PgModelSql::ReadMetaForUpdate(
    std::string_view key) {
  // The row is created first, so that there is a row to lock.
  RBMREC_STORE_RETURN_IF_ERROR(
      conn_
          .Exec("activating a model version",
                "INSERT INTO meta(key, value) VALUES($1, '') "
                "ON CONFLICT(key) DO NOTHING",
                {PgParam::Text(key)})
          .status());
  RBMREC_STORE_ASSIGN_OR_RETURN(
      PgResult r, conn_.Exec("activating a model version",
                             "SELECT value FROM meta WHERE key = $1 FOR UPDATE",
                             {PgParam::Text(key)}));
  if (r.rows() == 0 || r.IsNull(0, 0)) return std::optional<std::string>();
  return std::optional<std::string>(std::string(r.Text(0, 0)));
}

absl::Status PgModelSql::WriteMeta(std::string_view key,
                                   std::string_view value) {
  return conn_
      .Exec("writing a setting",
            "INSERT INTO meta(key, value) VALUES($1, $2) "
            "ON CONFLICT(key) DO UPDATE SET value = EXCLUDED.value",
            {PgParam::Text(key), PgParam::Text(value)})
      .status();
}

absl::StatusOr<std::string> PgModelSql::InitMeta(std::string_view key,
                                                 std::string_view value) {
  // One statement: concurrent first starts of replicas agree on one value.
  RBMREC_STORE_ASSIGN_OR_RETURN(
      PgResult r,
      conn_.Exec("recording a setting",
                 "WITH ins AS (INSERT INTO meta(key, value) VALUES($1, $2) "
                 "ON CONFLICT(key) DO NOTHING RETURNING value) "
                 "SELECT value FROM ins UNION ALL "
                 "SELECT value FROM meta WHERE key = $1",
                 {PgParam::Text(key), PgParam::Text(value)}));
  if (r.rows() > 0 && !r.IsNull(0, 0)) return std::string(r.Text(0, 0));
  // Another session inserted it after this statement's snapshot was taken.
  RBMREC_STORE_ASSIGN_OR_RETURN(std::optional<std::string> stored,
                                ReadMeta(key));
  return stored.value_or(std::string(value));
}

absl::StatusOr<ModelSql::Models> PgModelSql::ReadModels() {
  RBMREC_STORE_ASSIGN_OR_RETURN(
      PgResult r,
      conn_.Exec("listing model versions",
                 "SELECT version, created_unix_ms, kind, n_users, n_items, "
                 "n_ratings, metrics, size_bytes, pinned, "
                 "(SELECT value FROM meta WHERE key = $1), "
                 "validation_rmse, epochs, train_seconds "
                 "FROM models ORDER BY version DESC",
                 {PgParam::Text(kActiveModelKey)}));
  Models out;
  out.models.reserve(static_cast<size_t>(r.rows()));
  for (int i = 0; i < r.rows(); ++i) {
    ModelInfo m;
    m.version = r.Int(i, 0);
    m.created_unix_ms = r.Int(i, 1);
    m.kind = std::string(r.Text(i, 2));
    m.n_users = r.Int(i, 3);
    m.n_items = r.Int(i, 4);
    m.n_ratings = r.Int(i, 5);
    if (!r.IsNull(i, 6)) m.metrics_json = std::string(r.Text(i, 6));
    m.size_bytes = r.Int(i, 7);
    m.pinned = r.Bool(i, 8);
    if (i == 0 && !r.IsNull(i, 9)) out.active = std::string(r.Text(i, 9));
    m.validation_rmse = r.Double(i, 10);
    m.epochs = static_cast<int32_t>(r.Int(i, 11));
    m.train_seconds = r.Double(i, 12);
    out.models.push_back(std::move(m));
  }
  return out;
}

absl::StatusOr<std::vector<std::optional<std::string>>> PgModelSql::ReadMetas(
    absl::Span<const std::string_view> keys) {
  std::string sql = "SELECT ";
  std::vector<PgParam> params;
  for (size_t i = 0; i < keys.size(); ++i) {
    absl::StrAppend(&sql, i == 0 ? "" : ", ",
                    "(SELECT value FROM meta WHERE key = $", i + 1, ")");
    params.push_back(PgParam::Text(keys[i]));
  }
  RBMREC_STORE_ASSIGN_OR_RETURN(
      PgResult r, conn_.Exec("reading settings", sql.c_str(), params));
  std::vector<std::optional<std::string>> out(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    const int col = static_cast<int>(i);
    if (r.rows() > 0 && !r.IsNull(0, col)) out[i] = std::string(r.Text(0, col));
  }
  return out;
}

absl::StatusOr<std::optional<std::string>> PgModelSql::ReadBlob(
    int64_t version) {
  RBMREC_STORE_ASSIGN_OR_RETURN(
      PgResult r, conn_.Exec("loading a model version",
                             "SELECT model FROM models WHERE version = $1",
                             {PgParam::Int(version)}, /*binary_result=*/true));
  if (r.rows() == 0) return std::optional<std::string>();
  return std::optional<std::string>(std::string(r.Text(0, 0)));
}

}  // namespace internal

using internal::PgConn;
using internal::PgModelSql;

absl::StatusOr<int64_t> PostgresStore::InsertModel(const ModelInfo& meta,
                                                   std::string_view blob,
                                                   bool activate) {
  RBMREC_STORE_RETURN_IF_ERROR(CheckWritable());
  absl::MutexLock lock(&writer_mu_);
  RBMREC_STORE_ASSIGN_OR_RETURN(PgConn * conn, Writer());
  PgModelSql sql(*conn, origin_);
  return internal::InsertModel(sql, meta, blob, activate);
}

absl::Status PostgresStore::ActivateModel(int64_t version) {
  RBMREC_STORE_RETURN_IF_ERROR(CheckWritable());
  absl::MutexLock lock(&writer_mu_);
  RBMREC_STORE_ASSIGN_OR_RETURN(PgConn * conn, Writer());
  PgModelSql sql(*conn, origin_);
  return internal::ActivateModel(sql, version);
}

absl::Status PostgresStore::PinModel(int64_t version, bool pinned) {
  RBMREC_STORE_RETURN_IF_ERROR(CheckWritable());
  absl::MutexLock lock(&writer_mu_);
  RBMREC_STORE_ASSIGN_OR_RETURN(PgConn * conn, Writer());
  PgModelSql sql(*conn, origin_);
  return internal::PinModel(sql, version, pinned);
}

absl::StatusOr<int64_t> PostgresStore::DeleteModel(int64_t version) {
  RBMREC_STORE_RETURN_IF_ERROR(CheckWritable());
  absl::MutexLock lock(&writer_mu_);
  RBMREC_STORE_ASSIGN_OR_RETURN(PgConn * conn, Writer());
  PgModelSql sql(*conn, origin_);
  return internal::DeleteModel(sql, version);
}

absl::StatusOr<PruneResult> PostgresStore::PruneModels(
    const RetentionPolicy& policy) {
  RBMREC_STORE_RETURN_IF_ERROR(CheckWritable());
  absl::MutexLock lock(&writer_mu_);
  RBMREC_STORE_ASSIGN_OR_RETURN(PgConn * conn, Writer());
  PgModelSql sql(*conn, origin_);
  return internal::PruneModels(sql, policy);
}

absl::Status PostgresStore::ReplaceModelBlob(int64_t version,
                                             std::string_view blob) {
  RBMREC_STORE_RETURN_IF_ERROR(CheckWritable());
  absl::MutexLock lock(&writer_mu_);
  RBMREC_STORE_ASSIGN_OR_RETURN(PgConn * conn, Writer());
  PgModelSql sql(*conn, origin_);
  return internal::ReplaceModelBlob(sql, version, blob);
}

absl::StatusOr<std::string> PostgresStore::InitSetting(std::string_view key,
                                                       std::string_view value) {
  if (options_.read_only) {
    ReaderLease conn(this);
    RBMREC_STORE_RETURN_IF_ERROR(conn.Acquire());
    PgModelSql sql(*conn, origin_);
    return internal::InitSetting(sql, /*read_only=*/true, key, value);
  }
  absl::MutexLock lock(&writer_mu_);
  RBMREC_STORE_ASSIGN_OR_RETURN(PgConn * conn, Writer());
  PgModelSql sql(*conn, origin_);
  return internal::InitSetting(sql, /*read_only=*/false, key, value);
}

absl::StatusOr<std::vector<ModelInfo>> PostgresStore::ListModels() const {
  ReaderLease conn(this);
  RBMREC_STORE_RETURN_IF_ERROR(conn.Acquire());
  PgModelSql sql(*conn, origin_);
  return internal::ListModels(sql);
}

absl::StatusOr<std::string> PostgresStore::LoadModelBlob(
    int64_t version) const {
  ReaderLease conn(this);
  RBMREC_STORE_RETURN_IF_ERROR(conn.Acquire());
  PgModelSql sql(*conn, origin_);
  return internal::LoadModelBlob(sql, version);
}

absl::StatusOr<std::optional<int64_t>> PostgresStore::ActiveModelVersion()
    const {
  ReaderLease conn(this);
  RBMREC_STORE_RETURN_IF_ERROR(conn.Acquire());
  PgModelSql sql(*conn, origin_);
  return internal::ActiveModelVersion(sql);
}

absl::StatusOr<std::vector<int64_t>> PostgresStore::ActivationHistory() const {
  ReaderLease conn(this);
  RBMREC_STORE_RETURN_IF_ERROR(conn.Acquire());
  PgModelSql sql(*conn, origin_);
  return internal::ActivationHistory(sql);
}

}  // namespace rbmrec::store
