#ifndef RBMREC_STORE_SQLITE_DB_H_
#define RBMREC_STORE_SQLITE_DB_H_

// SQLite plumbing for the store: connections (open, pragmas, close), cached
// prepared statements, transactions and the mapping of SQLite result codes
// to absl::Status. Knows nothing of the schema; store.cc and schema.cc hold
// the SQL. Private to store/ (the public API is store/store.h).
//
// Thread safety: none of these types is thread-safe. The Store serializes
// all use of a Connection (and of its Stmts and Txns) with a mutex, or uses
// a connection from one thread only.

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rbmrec::store::internal {

// Debian's Abseil is built with its own absl::string_view, distinct from
// std::string_view; this bridges the two (for StrCat and map lookups).
inline absl::string_view AbslView(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

// The status for SQLite result `rc` (extended codes) of an operation `what`
// on the database at `path`; `db` (may be null) supplies SQLite's message and
// the OS errno. Codes:
//   SQLITE_BUSY / SQLITE_LOCKED -> Unavailable, reason DATABASE_LOCKED,
//     "<what>: database '<path>' is locked by another connection or process
//     (gave up after busy_timeout_ms=N): <sqlite message>";
//   SQLITE_FULL, or an I/O error with errno ENOSPC / EDQUOT ->
//     ResourceExhausted, reason STORAGE_FULL, "storage full: <what>: database
//     '<path>': <sqlite message>";
//   SQLITE_TOOBIG / SQLITE_NOMEM -> ResourceExhausted (no reason);
//   SQLITE_IOERR / SQLITE_PROTOCOL -> Unavailable;
//   SQLITE_PERM / READONLY / AUTH, CANTOPEN with EACCES / EPERM / EROFS ->
//     PermissionDenied; other CANTOPEN and CONSTRAINT -> FailedPrecondition;
//   SQLITE_CORRUPT / NOTADB -> DataLoss; SQLITE_INTERRUPT -> Cancelled;
//   anything else -> Internal.
absl::Status SqliteError(sqlite3* db, int rc, std::string_view path,
                         int busy_timeout_ms, std::string_view what);

// Column `col` of the current row of `stmt` as text; empty for NULL. Valid
// until the statement is stepped, reset or finalized.
std::string_view ColumnText(sqlite3_stmt* stmt, int col);

// One SQLite connection and its cache of prepared statements. Closing it
// (the destructor) finalizes the statements; the last connection to a WAL
// database checkpoints it and removes the WAL file.
class Connection {
 public:
  // Opens `path` with SQLite open `flags` (SQLITE_OPEN_*), turns on extended
  // result codes and sets the busy timeout. Errors: see SqliteError, with
  // what = "cannot open database file".
  static absl::StatusOr<std::unique_ptr<Connection>> Open(
      const std::string& path, int flags, int busy_timeout_ms);

  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  sqlite3* db() const { return db_; }
  const std::string& path() const { return path_; }

  // Returns the prepared statement for `sql` (one statement), prepared on
  // first use and cached for the life of the connection. Use it through a
  // Stmt, which resets it after use.
  absl::StatusOr<sqlite3_stmt*> Prepare(std::string_view sql);

  // Runs `sql` (one or more statements, no parameters, rows discarded);
  // errors name `what`.
  absl::Status Exec(const char* sql, std::string_view what);

  // Runs a statement that returns at most one value (e.g. a PRAGMA): its
  // first column of the first row as text ("" when no row), or as an integer
  // (0 when no row).
  absl::StatusOr<std::string> QueryText(const char* sql);
  absl::StatusOr<int64_t> QueryInt(const char* sql);

  // Whether a transaction is open on this connection.
  bool InTransaction() const { return sqlite3_get_autocommit(db_) == 0; }

  // The status for result `rc` of operation `what` on this connection.
  absl::Status Error(int rc, std::string_view what) const;

 private:
  Connection(sqlite3* db, std::string path, int busy_timeout_ms)
      : db_(db), path_(std::move(path)), busy_timeout_ms_(busy_timeout_ms) {}

  sqlite3* const db_;
  const std::string path_;
  const int busy_timeout_ms_;
  absl::flat_hash_map<std::string, sqlite3_stmt*> stmts_;
};

// Binds, steps and (on destruction) resets one cached statement. Text and
// blobs are bound without copying: they must outlive the Stmt's steps. The
// first bind error is reported by the next Next/Run.
class Stmt {
 public:
  Stmt(Connection& conn, sqlite3_stmt* stmt) : conn_(conn), stmt_(stmt) {}
  ~Stmt() { sqlite3_reset(stmt_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  sqlite3_stmt* get() const { return stmt_; }

  // Parameters are numbered from 1.
  void BindText(int i, std::string_view v);
  void BindTextOrNull(int i, std::string_view v);  // NULL for ""
  void BindBlob(int i, std::string_view v);
  void BindInt(int i, int64_t v) { Check(sqlite3_bind_int64(stmt_, i, v)); }
  void BindDouble(int i, double v) { Check(sqlite3_bind_double(stmt_, i, v)); }

  // Steps once: true when a row is available, false when done.
  absl::StatusOr<bool> Next();
  // Steps a statement that returns no rows (Internal if it returns one).
  absl::Status Run();

  // Columns of the current row, numbered from 0.
  int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }
  double Double(int col) const { return sqlite3_column_double(stmt_, col); }
  std::string_view Text(int col) const { return ColumnText(stmt_, col); }
  bool IsNull(int col) const {
    return sqlite3_column_type(stmt_, col) == SQLITE_NULL;
  }

 private:
  void Check(int rc) {
    if (rc != SQLITE_OK && bind_rc_ == SQLITE_OK) bind_rc_ = rc;
  }

  Connection& conn_;
  sqlite3_stmt* const stmt_;
  int bind_rc_ = SQLITE_OK;
};

// A transaction, rolled back on destruction unless committed. kWrite uses
// BEGIN IMMEDIATE, which takes the write lock up front (waiting up to the
// busy timeout), so a write never fails half-way for lock reasons; kRead
// (BEGIN) starts a read transaction at the first statement, which then sees
// one committed state until Commit.
class Txn {
 public:
  enum Kind { kRead, kWrite };

  explicit Txn(Connection& conn) : conn_(conn) {}
  ~Txn();
  Txn(const Txn&) = delete;
  Txn& operator=(const Txn&) = delete;

  absl::Status Begin(Kind kind);
  absl::Status Commit();

 private:
  Connection& conn_;
  bool active_ = false;
};

// --- Connection setup ---------------------------------------------------

// Opens a connection that only reads (PRAGMA query_only=ON) the existing
// database at `path`: SQLITE_OPEN_READONLY when `read_only_file`, else
// read-write (a read-write handle on a WAL file can always map its -shm).
// Never creates the file. Errors: see Connection::Open.
absl::StatusOr<std::unique_ptr<Connection>> OpenReader(const std::string& path,
                                                       bool read_only_file,
                                                       int busy_timeout_ms);

// The pragmas of the write connection.
struct WriterPragmas {
  // journal_mode=WAL (FailedPrecondition if SQLite refuses). False for
  // ":memory:".
  bool wal = true;
  // synchronous=FULL, else NORMAL.
  bool synchronous_full = true;
  // journal_size_limit: the WAL file is truncated to at most this many bytes
  // when it is reset after a checkpoint (it otherwise keeps its largest
  // size, e.g. that of the biggest model blob ever written).
  int64_t wal_size_limit_bytes = 64 << 20;
};

// Configures a freshly opened write connection: auto_vacuum=INCREMENTAL when
// the database has no table yet (an existing one keeps its mode until
// VACUUM, see schema.h), then the WriterPragmas and foreign_keys=ON.
absl::Status ConfigureWriter(Connection& conn, const WriterPragmas& pragmas);

// Caps the database file at `max_bytes` (PRAGMA max_page_count, rounded down
// to whole pages, at least one page): a write that would grow it further
// fails with SQLITE_FULL (STORAGE_FULL). 0 = no limit beyond SQLite's. A
// limit below the current size keeps the current size as the limit.
// REQUIRES: max_bytes >= 0.
absl::Status SetMaxBytes(Connection& conn, int64_t max_bytes);

// Gives the free pages at the end of an auto_vacuum=INCREMENTAL database back
// (PRAGMA incremental_vacuum). A no-op in other modes. May run inside a write
// transaction.
absl::Status IncrementalVacuum(Connection& conn);

// A PASSIVE WAL checkpoint: copies committed frames into the database file
// without waiting for readers, and truncates the file when the whole WAL was
// copied. A no-op outside WAL mode.
absl::Status CheckpointPassive(Connection& conn);

// page_count * page_size of the database (logical size, as of the open
// transaction or the last commit).
absl::StatusOr<int64_t> DatabasePageBytes(Connection& conn);

// Remembers the ids added to the ext_id -> idx caches during a write
// transaction and removes them again unless Commit()ted. The string_views
// point into the caller's arguments, which outlive the call.
class CacheUndo {
 public:
  using Map = absl::flat_hash_map<std::string, int64_t>;
  explicit CacheUndo(Map* map) : map_(map) {}
  ~CacheUndo() {
    if (committed_) return;
    for (std::string_view id : added_) map_->erase(AbslView(id));
  }
  CacheUndo(const CacheUndo&) = delete;
  CacheUndo& operator=(const CacheUndo&) = delete;

  void Add(std::string_view id, int64_t idx) {
    map_->emplace(std::string(id), idx);
    added_.push_back(id);
  }
  void Commit() { committed_ = true; }

 private:
  Map* const map_;
  std::vector<std::string_view> added_;
  bool committed_ = false;
};

}  // namespace rbmrec::store::internal

#endif  // RBMREC_STORE_SQLITE_DB_H_
