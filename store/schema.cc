#include "store/schema.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "store/checks.h"
#include "store/status_macros.h"
#include "store/store.h"

namespace rbmrec::store::internal {
namespace {

// The steps (Migration, store/checks.h) up to kSchemaVersion. Applied in
// order, each exactly once, inside one transaction at Open. To change the
// schema, append a step and bump kSchemaVersion; never edit a step that has
// shipped.
constexpr Migration kMigrations[] = {
    {1, R"sql(
CREATE TABLE users(
  idx INTEGER PRIMARY KEY AUTOINCREMENT,
  ext_id TEXT UNIQUE NOT NULL
);
CREATE TABLE items(
  idx INTEGER PRIMARY KEY AUTOINCREMENT,
  ext_id TEXT UNIQUE NOT NULL,
  title TEXT,
  attributes TEXT  -- a JSON object, or NULL
);
CREATE TABLE ratings(
  user_idx INTEGER NOT NULL REFERENCES users(idx),
  item_idx INTEGER NOT NULL REFERENCES items(idx),
  rating REAL NOT NULL,
  ts INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY(user_idx, item_idx)
) WITHOUT ROWID;
-- The blob comes last so that reading the other columns does not walk its
-- overflow pages.
CREATE TABLE models(
  version INTEGER PRIMARY KEY AUTOINCREMENT,
  created_unix_ms INTEGER NOT NULL,
  kind TEXT NOT NULL,
  n_users INTEGER NOT NULL,
  n_items INTEGER NOT NULL,
  n_ratings INTEGER NOT NULL,
  metrics TEXT,  -- a JSON object, or NULL
  size_bytes INTEGER NOT NULL,
  model BLOB NOT NULL
);
CREATE TABLE meta(
  key TEXT PRIMARY KEY,
  value TEXT
);
)sql"},
    // ALTER TABLE ADD COLUMN would put `pinned` after the blob; the table is
    // rebuilt instead. The AUTOINCREMENT counter of `models` (which may be
    // above every stored version after deletions) moves to the new table.
    {2, R"sql(
CREATE TABLE models_v2(
  version INTEGER PRIMARY KEY AUTOINCREMENT,
  created_unix_ms INTEGER NOT NULL,
  kind TEXT NOT NULL,
  n_users INTEGER NOT NULL,
  n_items INTEGER NOT NULL,
  n_ratings INTEGER NOT NULL,
  metrics TEXT,  -- a JSON object, or NULL
  size_bytes INTEGER NOT NULL,
  pinned INTEGER NOT NULL DEFAULT 0,  -- 1: never removed by retention
  model BLOB NOT NULL
);
INSERT INTO models_v2(version, created_unix_ms, kind, n_users, n_items,
                      n_ratings, metrics, size_bytes, pinned, model)
  SELECT version, created_unix_ms, kind, n_users, n_items, n_ratings, metrics,
         size_bytes, 0, model
  FROM models ORDER BY version;
DELETE FROM sqlite_sequence WHERE name = 'models_v2';
INSERT INTO sqlite_sequence(name, seq)
  SELECT 'models_v2', seq FROM sqlite_sequence WHERE name = 'models';
DROP TABLE models;
ALTER TABLE models_v2 RENAME TO models;
)sql"},
    // The training's metrics become columns (before the blob: the table is
    // rebuilt as in step 2), read from each row's metrics JSON (0 where a
    // value is missing or not a number; the JSON stays as it was).
    {3, R"sql(
CREATE TABLE models_v3(
  version INTEGER PRIMARY KEY AUTOINCREMENT,
  created_unix_ms INTEGER NOT NULL,
  kind TEXT NOT NULL,
  n_users INTEGER NOT NULL,
  n_items INTEGER NOT NULL,
  n_ratings INTEGER NOT NULL,
  metrics TEXT,  -- a JSON object of other facts, or NULL
  size_bytes INTEGER NOT NULL,
  pinned INTEGER NOT NULL DEFAULT 0,  -- 1: never removed by retention
  validation_rmse REAL NOT NULL DEFAULT 0,
  epochs INTEGER NOT NULL DEFAULT 0,
  train_seconds REAL NOT NULL DEFAULT 0,
  model BLOB NOT NULL
);
INSERT INTO models_v3(version, created_unix_ms, kind, n_users, n_items,
                      n_ratings, metrics, size_bytes, pinned, validation_rmse,
                      epochs, train_seconds, model)
  SELECT version, created_unix_ms, kind, n_users, n_items, n_ratings, metrics,
         size_bytes, pinned,
         CASE WHEN json_valid(metrics) AND json_type(metrics,
                   '$.validation_rmse') IN ('integer', 'real')
              THEN json_extract(metrics, '$.validation_rmse') ELSE 0 END,
         CASE WHEN json_valid(metrics) AND json_type(metrics, '$.epochs')
                   IN ('integer', 'real')
              THEN CAST(json_extract(metrics, '$.epochs') AS INTEGER) ELSE 0
         END,
         CASE WHEN json_valid(metrics) AND json_type(metrics,
                   '$.train_seconds') IN ('integer', 'real')
              THEN json_extract(metrics, '$.train_seconds') ELSE 0 END,
         model
  FROM models ORDER BY version;
DELETE FROM sqlite_sequence WHERE name = 'models_v3';
INSERT INTO sqlite_sequence(name, seq)
  SELECT 'models_v3', seq FROM sqlite_sequence WHERE name = 'models';
DROP TABLE models;
ALTER TABLE models_v3 RENAME TO models;
)sql"},
    // The item catalogue: categories (joined by '\n', JoinCategories in
    // store/checks.h; NULL: none) and availability.
    {4, R"sql(
ALTER TABLE items ADD COLUMN categories TEXT;
ALTER TABLE items ADD COLUMN hidden INTEGER NOT NULL DEFAULT 0;
)sql"},
    // Interactions without a rating (views): one row per (user, item), with
    // the latest timestamp of its views.
    {5, R"sql(
CREATE TABLE views(
  user_idx INTEGER NOT NULL REFERENCES users(idx),
  item_idx INTEGER NOT NULL REFERENCES items(idx),
  ts INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY(user_idx, item_idx)
) WITHOUT ROWID;
)sql"},
};
static_assert(sizeof(kMigrations) / sizeof(kMigrations[0]) == kSchemaVersion,
              "one migration step per schema version");

absl::Status CheckNotNewer(int64_t version) {
  if (version > kSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "database schema version %d is newer than this build supports (%d)",
        version, kSchemaVersion));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Migrate(Connection& conn, bool read_only) {
  RBMREC_STORE_ASSIGN_OR_RETURN(int64_t version,
                                conn.QueryInt("PRAGMA user_version"));
  RBMREC_STORE_RETURN_IF_ERROR(CheckNotNewer(version));
  if (version == kSchemaVersion) return absl::OkStatus();
  if (read_only) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "database '%s' has schema version %d, older than this build's (%d); "
        "open it read-write once to migrate it",
        conn.path(), version, kSchemaVersion));
  }
  Txn txn(conn);
  RBMREC_STORE_RETURN_IF_ERROR(txn.Begin(Txn::kWrite));
  // Another process may have migrated between the check and the lock.
  RBMREC_STORE_ASSIGN_OR_RETURN(version, conn.QueryInt("PRAGMA user_version"));
  RBMREC_STORE_RETURN_IF_ERROR(CheckNotNewer(version));
  for (const Migration& m : kMigrations) {
    if (m.version <= version) continue;
    RBMREC_STORE_RETURN_IF_ERROR(conn.Exec(
        m.sql, absl::StrFormat("migrating to schema version %d", m.version)));
  }
  const std::string set_version =
      absl::StrFormat("PRAGMA user_version = %d", kSchemaVersion);
  RBMREC_STORE_RETURN_IF_ERROR(
      conn.Exec(set_version.c_str(), "setting schema version"));
  return txn.Commit();
}

absl::StatusOr<bool> EnsureIncrementalVacuum(Connection& conn) {
  constexpr int64_t kIncremental = 2;
  RBMREC_STORE_ASSIGN_OR_RETURN(int64_t mode,
                                conn.QueryInt("PRAGMA auto_vacuum"));
  if (mode == kIncremental) return false;
  RBMREC_STORE_RETURN_IF_ERROR(conn.Exec("PRAGMA auto_vacuum=INCREMENTAL",
                                         "enabling incremental vacuum"));
  RBMREC_STORE_RETURN_IF_ERROR(
      conn.Exec("VACUUM", "rewriting the database for incremental vacuum"));
  // Copies the rewritten pages into the file and truncates the WAL; waits
  // for readers of other processes at most the busy timeout. A checkpoint
  // that cannot finish now is completed by a later one: not an error.
  (void)conn.Exec("PRAGMA wal_checkpoint(TRUNCATE)", "checkpointing");
  return true;
}

}  // namespace rbmrec::store::internal
