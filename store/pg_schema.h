#ifndef RBMREC_STORE_PG_SCHEMA_H_
#define RBMREC_STORE_PG_SCHEMA_H_

// The store's PostgreSQL schema and its migrations (the version is the row
// of table schema_version; kPostgresSchemaVersion in postgres_store.h).
// Private to store/.
//
// Schema history:
//   1  users, items, ratings, models (with pinned), meta.
//   2  models.validation_rmse, epochs, train_seconds, filled from the metrics
//      JSON of each row.

#include "absl/status/status.h"
#include "store/pg_db.h"

namespace rbmrec::store::internal {

// Creates the schema, or brings it to kPostgresSchemaVersion, in ONE
// transaction under a transaction-level advisory lock (two processes opening
// the same new database do not race). `read_only`: only checks that the
// database has kPostgresSchemaVersion.
// Errors: FailedPrecondition when the version is newer than this build's
// (or, read_only, not this build's); the database's.
absl::Status MigratePostgres(PgConn& conn, bool read_only);

}  // namespace rbmrec::store::internal

#endif  // RBMREC_STORE_PG_SCHEMA_H_
