#include "store/model_versions.h"

#include <chrono>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "store/status_macros.h"

namespace rbmrec::store::internal {
namespace {

absl::Status NoSuchVersion(int64_t version) {
  return absl::NotFoundError(absl::StrFormat("no model version %d", version));
}

// Sets meta.active_model_version and records it in the activation history
// (its row read for update first, so concurrent activations serialize).
// REQUIRES: inside the write transaction.
absl::Status WriteActiveVersion(ModelSql& sql, int64_t version) {
  RBMREC_STORE_ASSIGN_OR_RETURN(std::optional<std::string> history,
                                sql.ReadMetaForUpdate(kActivationHistoryKey));
  RBMREC_STORE_RETURN_IF_ERROR(sql.WriteMeta(
      kActivationHistoryKey, PushActivation(history.value_or(""), version)));
  RBMREC_STORE_RETURN_IF_ERROR(
      sql.WriteMeta(kActiveModelKey, absl::StrCat(version)));
  return sql.Activated();
}

}  // namespace

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

absl::StatusOr<std::optional<int64_t>> ParseActiveVersion(
    const std::optional<std::string>& text, std::string_view name) {
  if (!text.has_value()) return std::optional<int64_t>();
  int64_t version = 0;
  if (!absl::SimpleAtoi(*text, &version)) {
    return absl::DataLossError(
        absl::StrFormat("database '%s': malformed meta.%s: '%s'", name,
                        kActiveModelKey, *text));
  }
  return std::optional<int64_t>(version);
}

absl::StatusOr<int64_t> InsertModel(ModelSql& sql, const ModelInfo& meta,
                                    std::string_view blob, bool activate) {
  RBMREC_STORE_RETURN_IF_ERROR(sql.CheckBlobSize(blob.size()));
  if (!meta.metrics_json.empty()) {
    RBMREC_STORE_ASSIGN_OR_RETURN(bool ok, sql.IsJsonObject(meta.metrics_json));
    if (!ok) {
      return absl::InvalidArgumentError("metrics_json is not a JSON object");
    }
  }
  ModelInfo row = meta;
  if (row.created_unix_ms == 0) row.created_unix_ms = NowUnixMs();
  RBMREC_STORE_RETURN_IF_ERROR(sql.Begin());
  RBMREC_STORE_ASSIGN_OR_RETURN(const int64_t version,
                                sql.InsertModelRow(row, blob));
  if (activate) {
    RBMREC_STORE_RETURN_IF_ERROR(WriteActiveVersion(sql, version));
  }
  RBMREC_STORE_RETURN_IF_ERROR(sql.Commit());
  return version;
}

absl::Status ActivateModel(ModelSql& sql, int64_t version) {
  RBMREC_STORE_RETURN_IF_ERROR(sql.Begin());
  RBMREC_STORE_ASSIGN_OR_RETURN(std::optional<int64_t> found,
                                sql.LockModel(version, /*exclusive=*/false));
  if (!found.has_value()) return NoSuchVersion(version);
  RBMREC_STORE_RETURN_IF_ERROR(WriteActiveVersion(sql, version));
  return sql.Commit();
}

absl::Status PinModel(ModelSql& sql, int64_t version, bool pinned) {
  RBMREC_STORE_RETURN_IF_ERROR(sql.Begin());
  RBMREC_STORE_ASSIGN_OR_RETURN(bool found, sql.SetPinned(version, pinned));
  if (!found) return NoSuchVersion(version);
  return sql.Commit();
}

absl::StatusOr<int64_t> DeleteModel(ModelSql& sql, int64_t version) {
  RBMREC_STORE_RETURN_IF_ERROR(sql.Begin());
  RBMREC_STORE_ASSIGN_OR_RETURN(std::optional<int64_t> size_bytes,
                                sql.LockModel(version, /*exclusive=*/true));
  if (!size_bytes.has_value()) return NoSuchVersion(version);
  RBMREC_STORE_ASSIGN_OR_RETURN(std::optional<std::string> active_text,
                                sql.ReadMeta(kActiveModelKey));
  RBMREC_STORE_ASSIGN_OR_RETURN(std::optional<int64_t> active,
                                ParseActiveVersion(active_text, sql.name()));
  if (active == version) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "model version %d is the active version; activate another version "
        "before deleting it",
        version));
  }
  const int64_t versions[] = {version};
  RBMREC_STORE_RETURN_IF_ERROR(sql.DeleteModelRows(versions));
  RBMREC_STORE_RETURN_IF_ERROR(sql.Commit());
  sql.Deleted();
  return *size_bytes;
}

absl::StatusOr<PruneResult> PruneModels(ModelSql& sql,
                                        const RetentionPolicy& policy) {
  RBMREC_STORE_RETURN_IF_ERROR(CheckRetentionPolicy(policy));
  RBMREC_STORE_RETURN_IF_ERROR(sql.Begin());
  RBMREC_STORE_ASSIGN_OR_RETURN(std::optional<std::string> active_text,
                                sql.ReadMeta(kActiveModelKey));
  RBMREC_STORE_ASSIGN_OR_RETURN(std::optional<int64_t> active,
                                ParseActiveVersion(active_text, sql.name()));
  RetentionWalk walk(policy, active);
  RBMREC_STORE_RETURN_IF_ERROR(sql.WalkModels(walk));
  PruneResult result = walk.result();
  if (!result.deleted_versions.empty()) {
    RBMREC_STORE_RETURN_IF_ERROR(sql.DeleteModelRows(result.deleted_versions));
  }
  RBMREC_STORE_RETURN_IF_ERROR(sql.Commit());
  if (!result.deleted_versions.empty()) sql.Deleted();
  return result;
}

absl::Status ReplaceModelBlob(ModelSql& sql, int64_t version,
                              std::string_view blob) {
  RBMREC_STORE_RETURN_IF_ERROR(sql.CheckBlobSize(blob.size()));
  RBMREC_STORE_RETURN_IF_ERROR(sql.Begin());
  RBMREC_STORE_ASSIGN_OR_RETURN(bool found, sql.SetBlob(version, blob));
  if (!found) return NoSuchVersion(version);
  return sql.Commit();
}

absl::StatusOr<std::string> InitSetting(ModelSql& sql, bool read_only,
                                        std::string_view key,
                                        std::string_view value) {
  const std::string meta_key = std::string(kSettingPrefix) + std::string(key);
  if (!read_only) return sql.InitMeta(meta_key, value);
  RBMREC_STORE_ASSIGN_OR_RETURN(std::optional<std::string> stored,
                                sql.ReadMeta(meta_key));
  return stored.value_or(std::string(value));
}

absl::StatusOr<std::vector<ModelInfo>> ListModels(ModelSql& sql) {
  RBMREC_STORE_ASSIGN_OR_RETURN(ModelSql::Models read, sql.ReadModels());
  RBMREC_STORE_ASSIGN_OR_RETURN(std::optional<int64_t> active,
                                ParseActiveVersion(read.active, sql.name()));
  for (ModelInfo& m : read.models) {
    m.active = active.has_value() && *active == m.version;
  }
  return std::move(read.models);
}

absl::StatusOr<std::string> LoadModelBlob(ModelSql& sql, int64_t version) {
  RBMREC_STORE_ASSIGN_OR_RETURN(std::optional<std::string> blob,
                                sql.ReadBlob(version));
  if (!blob.has_value()) return NoSuchVersion(version);
  return std::move(*blob);
}

absl::StatusOr<std::optional<int64_t>> ActiveModelVersion(ModelSql& sql) {
  RBMREC_STORE_ASSIGN_OR_RETURN(std::optional<std::string> text,
                                sql.ReadMeta(kActiveModelKey));
  return ParseActiveVersion(text, sql.name());
}

absl::StatusOr<std::vector<int64_t>> ActivationHistory(ModelSql& sql) {
  const std::string_view keys[] = {kActivationHistoryKey, kActiveModelKey};
  RBMREC_STORE_ASSIGN_OR_RETURN(std::vector<std::optional<std::string>> values,
                                sql.ReadMetas(keys));
  RBMREC_STORE_ASSIGN_OR_RETURN(std::optional<int64_t> active,
                                ParseActiveVersion(values[1], sql.name()));
  std::vector<int64_t> out = ParseActivationHistory(values[0].value_or(""));
  if (out.empty() && active.has_value()) out.push_back(*active);
  return out;
}

}  // namespace rbmrec::store::internal
