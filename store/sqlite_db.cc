#include "store/sqlite_db.h"

#include <algorithm>
#include <cerrno>
#include <system_error>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/error_reason.h"
#include "store/status_macros.h"

namespace rbmrec::store::internal {
namespace {

bool IsPermissionErrno(int e) {
  return e == EACCES || e == EPERM || e == EROFS;
}

bool IsNoSpaceErrno(int e) { return e == ENOSPC || e == EDQUOT; }

absl::StatusCode CodeFor(int rc, int sys_errno) {
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_IOERR:
    case SQLITE_PROTOCOL:
      return absl::StatusCode::kUnavailable;
    case SQLITE_PERM:
    case SQLITE_READONLY:
    case SQLITE_AUTH:
      return absl::StatusCode::kPermissionDenied;
    case SQLITE_CANTOPEN:
      return IsPermissionErrno(sys_errno)
                 ? absl::StatusCode::kPermissionDenied
                 : absl::StatusCode::kFailedPrecondition;
    case SQLITE_FULL:
    case SQLITE_TOOBIG:
    case SQLITE_NOMEM:
      return absl::StatusCode::kResourceExhausted;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return absl::StatusCode::kDataLoss;
    case SQLITE_CONSTRAINT:
      return absl::StatusCode::kFailedPrecondition;
    case SQLITE_INTERRUPT:
      return absl::StatusCode::kCancelled;
    default:
      return absl::StatusCode::kInternal;
  }
}

}  // namespace

absl::Status SqliteError(sqlite3* db, int rc, std::string_view path,
                         int busy_timeout_ms, std::string_view what) {
  const char* msg = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  const int primary = rc & 0xff;
  if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) {
    return WithReason(
        absl::UnavailableError(absl::StrFormat(
            "%s: database '%s' is locked by another connection or process "
            "(gave up after busy_timeout_ms=%d): %s",
            what, path, busy_timeout_ms, msg)),
        kReasonDatabaseLocked);
  }
  const int sys_errno = db != nullptr ? sqlite3_system_errno(db) : 0;
  if (primary == SQLITE_FULL ||
      (primary == SQLITE_IOERR && IsNoSpaceErrno(sys_errno))) {
    std::string text = absl::StrFormat(
        "storage full: %s: database '%s' (or its disk) is full: %s", what, path,
        msg);
    if (sys_errno != 0 && IsNoSpaceErrno(sys_errno)) {
      absl::StrAppend(&text, " (", std::generic_category().message(sys_errno),
                      ")");
    }
    return WithReason(absl::ResourceExhaustedError(text), kReasonStorageFull);
  }
  std::string text = absl::StrFormat("%s: database '%s': %s", what, path, msg);
  if ((primary == SQLITE_CANTOPEN || primary == SQLITE_IOERR) &&
      sys_errno != 0) {
    absl::StrAppend(&text, " (", std::generic_category().message(sys_errno),
                    ")");
  }
  return absl::Status(CodeFor(rc, sys_errno), text);
}

std::string_view ColumnText(sqlite3_stmt* stmt, int col) {
  const unsigned char* p = sqlite3_column_text(stmt, col);
  const int n = sqlite3_column_bytes(stmt, col);
  if (p == nullptr) return {};
  return std::string_view(reinterpret_cast<const char*>(p),
                          static_cast<size_t>(n));
}

// --- Connection -------------------------------------------------------------

absl::StatusOr<std::unique_ptr<Connection>> Connection::Open(
    const std::string& path, int flags, int busy_timeout_ms) {
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
  if (rc != SQLITE_OK) {
    absl::Status s =
        SqliteError(db, rc, path, busy_timeout_ms, "cannot open database file");
    sqlite3_close_v2(db);
    return s;
  }
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, busy_timeout_ms);
  return std::unique_ptr<Connection>(new Connection(db, path, busy_timeout_ms));
}

Connection::~Connection() {
  for (auto& [sql, stmt] : stmts_) sqlite3_finalize(stmt);
  sqlite3_close_v2(db_);
}

absl::StatusOr<sqlite3_stmt*> Connection::Prepare(std::string_view sql) {
  auto it = stmts_.find(AbslView(sql));
  if (it != stmts_.end()) return it->second;
  sqlite3_stmt* stmt = nullptr;
  const int rc =
      sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()),
                         SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
  if (rc != SQLITE_OK) {
    return Error(rc, absl::StrCat("preparing \"", AbslView(sql), "\""));
  }
  stmts_.emplace(std::string(sql), stmt);
  return stmt;
}

absl::Status Connection::Exec(const char* sql, std::string_view what) {
  const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return Error(rc, what);
  return absl::OkStatus();
}

absl::StatusOr<std::string> Connection::QueryText(const char* sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql, -1, &stmt, nullptr);
  if (rc != SQLITE_OK) return Error(rc, sql);
  std::string value;
  rc = sqlite3_step(stmt);
  if (rc == SQLITE_ROW) {
    value = std::string(ColumnText(stmt, 0));
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    }
  }
  absl::Status status = rc == SQLITE_DONE ? absl::OkStatus() : Error(rc, sql);
  sqlite3_finalize(stmt);
  if (!status.ok()) return status;
  return value;
}

absl::StatusOr<int64_t> Connection::QueryInt(const char* sql) {
  RBMREC_STORE_ASSIGN_OR_RETURN(std::string text, QueryText(sql));
  if (text.empty()) return 0;
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value)) {
    return absl::InternalError(absl::StrFormat(
        "database '%s': '%s' returned '%s', not an integer", path_, sql, text));
  }
  return value;
}

absl::Status Connection::Error(int rc, std::string_view what) const {
  return SqliteError(db_, rc, path_, busy_timeout_ms_, what);
}

// --- Stmt -------------------------------------------------------------------

void Stmt::BindText(int i, std::string_view v) {
  Check(sqlite3_bind_text64(stmt_, i, v.data() != nullptr ? v.data() : "",
                            v.size(), SQLITE_STATIC, SQLITE_UTF8));
}

void Stmt::BindTextOrNull(int i, std::string_view v) {
  if (v.empty()) {
    Check(sqlite3_bind_null(stmt_, i));
  } else {
    BindText(i, v);
  }
}

void Stmt::BindBlob(int i, std::string_view v) {
  Check(sqlite3_bind_blob64(stmt_, i, v.data() != nullptr ? v.data() : "",
                            v.size(), SQLITE_STATIC));
}

absl::StatusOr<bool> Stmt::Next() {
  if (bind_rc_ != SQLITE_OK) return conn_.Error(bind_rc_, "binding");
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return conn_.Error(rc, sqlite3_sql(stmt_));
}

absl::Status Stmt::Run() {
  RBMREC_STORE_ASSIGN_OR_RETURN(bool row, Next());
  if (row) {
    return absl::InternalError(
        absl::StrCat("unexpected row from: ", sqlite3_sql(stmt_)));
  }
  return absl::OkStatus();
}

// --- Txn --------------------------------------------------------------------

Txn::~Txn() {
  if (active_ && conn_.InTransaction()) {
    sqlite3_exec(conn_.db(), "ROLLBACK", nullptr, nullptr, nullptr);
  }
}

absl::Status Txn::Begin(Kind kind) {
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * begin,
      conn_.Prepare(kind == kWrite ? "BEGIN IMMEDIATE" : "BEGIN"));
  Stmt s(conn_, begin);
  RBMREC_STORE_RETURN_IF_ERROR(s.Run());
  active_ = true;
  return absl::OkStatus();
}

absl::Status Txn::Commit() {
  RBMREC_STORE_ASSIGN_OR_RETURN(sqlite3_stmt * commit, conn_.Prepare("COMMIT"));
  Stmt s(conn_, commit);
  RBMREC_STORE_RETURN_IF_ERROR(s.Run());
  active_ = false;
  return absl::OkStatus();
}

// --- Connection setup -------------------------------------------------------

absl::StatusOr<std::unique_ptr<Connection>> OpenReader(const std::string& path,
                                                       bool read_only_file,
                                                       int busy_timeout_ms) {
  const int flags =
      SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE |
      (read_only_file ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE);
  RBMREC_STORE_ASSIGN_OR_RETURN(std::unique_ptr<Connection> conn,
                                Connection::Open(path, flags, busy_timeout_ms));
  RBMREC_STORE_RETURN_IF_ERROR(
      conn->Exec("PRAGMA query_only=ON", "configuring a read connection"));
  return conn;
}

absl::Status ConfigureWriter(Connection& conn, const WriterPragmas& pragmas) {
  // auto_vacuum can only be chosen before the first table exists (and before
  // the WAL switch writes the first page); it is a no-op afterwards.
  RBMREC_STORE_ASSIGN_OR_RETURN(
      int64_t tables, conn.QueryInt("SELECT count(*) FROM sqlite_schema"));
  if (tables == 0) {
    RBMREC_STORE_RETURN_IF_ERROR(conn.Exec("PRAGMA auto_vacuum=INCREMENTAL",
                                           "enabling incremental vacuum"));
  }
  if (pragmas.wal) {
    RBMREC_STORE_ASSIGN_OR_RETURN(std::string mode,
                                  conn.QueryText("PRAGMA journal_mode=WAL"));
    if (mode != "wal") {
      return absl::FailedPreconditionError(absl::StrFormat(
          "database '%s': cannot enable WAL journal mode (got '%s')",
          conn.path(), mode));
    }
    const std::string limit = absl::StrCat("PRAGMA journal_size_limit=",
                                           pragmas.wal_size_limit_bytes);
    RBMREC_STORE_RETURN_IF_ERROR(
        conn.Exec(limit.c_str(), "setting journal_size_limit"));
  }
  RBMREC_STORE_RETURN_IF_ERROR(conn.Exec(pragmas.synchronous_full
                                             ? "PRAGMA synchronous=FULL"
                                             : "PRAGMA synchronous=NORMAL",
                                         "setting synchronous"));
  return conn.Exec("PRAGMA foreign_keys=ON", "enabling foreign keys");
}

absl::Status SetMaxBytes(Connection& conn, int64_t max_bytes) {
  if (max_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("max_bytes must be >= 0, got %d", max_bytes));
  }
  // SQLite's own limit (max_page_count's default) stands for "none".
  int64_t pages = 4294967294;
  if (max_bytes > 0) {
    RBMREC_STORE_ASSIGN_OR_RETURN(int64_t page_size,
                                  conn.QueryInt("PRAGMA page_size"));
    if (page_size <= 0) page_size = 4096;
    pages = std::max<int64_t>(1, max_bytes / page_size);
  }
  const std::string sql = absl::StrCat("PRAGMA max_page_count=", pages);
  return conn.QueryText(sql.c_str()).status();
}

absl::Status IncrementalVacuum(Connection& conn) {
  return conn.Exec("PRAGMA incremental_vacuum", "giving free pages back");
}

absl::Status CheckpointPassive(Connection& conn) {
  return conn.Exec("PRAGMA wal_checkpoint(PASSIVE)", "checkpointing the WAL");
}

absl::StatusOr<int64_t> DatabasePageBytes(Connection& conn) {
  RBMREC_STORE_ASSIGN_OR_RETURN(int64_t pages,
                                conn.QueryInt("PRAGMA page_count"));
  RBMREC_STORE_ASSIGN_OR_RETURN(int64_t page_size,
                                conn.QueryInt("PRAGMA page_size"));
  return pages * page_size;
}

}  // namespace rbmrec::store::internal
