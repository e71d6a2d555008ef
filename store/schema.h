#ifndef RBMREC_STORE_SCHEMA_H_
#define RBMREC_STORE_SCHEMA_H_

// The store's SQLite schema and its migrations. Private to store/.
//
// Schema history (PRAGMA user_version):
//   1  users, items, ratings (with ts), models, meta.
//   2  models.pinned (before the blob column, so reading a model's info never
//      walks its blob's overflow pages); the models table is rebuilt, and
//      AUTOINCREMENT's counter carried over so versions are never reused.
//   3  models.validation_rmse, epochs, train_seconds (before the blob; the
//      table rebuilt as in 2), filled from the metrics JSON of each row.
// Independent of the version, a read-write Open makes the file
// auto_vacuum=INCREMENTAL (EnsureIncrementalVacuum).

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "store/sqlite_db.h"

namespace rbmrec::store::internal {

// Brings the schema of the database on `conn` to kSchemaVersion (store.h),
// all steps in ONE write transaction (a crash leaves the old version).
// `read_only`: a connection that may not write; then the file must already
// have kSchemaVersion.
// Errors: FailedPrecondition "database schema version N is newer than this
// build supports (M)", or (read_only) for an older version; Unavailable
// (DATABASE_LOCKED) when another process holds the write lock beyond the busy
// timeout; others from SqliteError.
absl::Status Migrate(Connection& conn, bool read_only);

// Makes the database auto_vacuum=INCREMENTAL, so that deleting model
// versions can give their pages back to the file system. New databases get
// the mode at creation (ConfigureWriter); an existing one created without it
// is converted by one VACUUM (it rewrites the whole file: it needs free disk
// space about the size of the database, and the time to copy it), followed by
// a WAL checkpoint. Returns whether a VACUUM ran.
// REQUIRES: no transaction open on `conn`; `conn` may write.
// Errors: as SqliteError (STORAGE_FULL when the disk has no room for the
// copy; the database is then unchanged).
absl::StatusOr<bool> EnsureIncrementalVacuum(Connection& conn);

}  // namespace rbmrec::store::internal

#endif  // RBMREC_STORE_SCHEMA_H_
