#include "store/store.h"

#include <sqlite3.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <limits>
#include <system_error>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace rbmrec::store {

// Local helpers for StatusOr plumbing (Abseil 20220623 has none).
#define RBMREC_STORE_RETURN_IF_ERROR(expr)           \
  do {                                               \
    absl::Status rbmrec_status_ = (expr);            \
    if (!rbmrec_status_.ok()) return rbmrec_status_; \
  } while (0)

#define RBMREC_STORE_CONCAT_INNER(a, b) a##b
#define RBMREC_STORE_CONCAT(a, b) RBMREC_STORE_CONCAT_INNER(a, b)
#define RBMREC_STORE_ASSIGN_OR_RETURN(lhs, expr) \
  RBMREC_STORE_ASSIGN_OR_RETURN_IMPL(            \
      RBMREC_STORE_CONCAT(rbmrec_statusor_, __LINE__), lhs, expr)
#define RBMREC_STORE_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                       \
  if (!tmp.ok()) return std::move(tmp).status();           \
  lhs = std::move(tmp).value()

namespace {

constexpr std::string_view kMemoryPath = ":memory:";
constexpr std::string_view kActiveModelKey = "active_model_version";

// One schema migration: `sql` takes the schema from version - 1 to `version`.
struct Migration {
  int version;
  const char* sql;
};

// Applied in order, each exactly once, inside one transaction at Open. To
// change the schema, append a step and bump kSchemaVersion; never edit a step
// that has shipped.
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
};
static_assert(sizeof(kMigrations) / sizeof(kMigrations[0]) == kSchemaVersion,
              "one migration step per schema version");

// Debian's Abseil is built with its own absl::string_view, distinct from
// std::string_view; this bridges the two (for StrCat and map lookups).
absl::string_view AbslView(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

bool IsPermissionErrno(int e) {
  return e == EACCES || e == EPERM || e == EROFS;
}

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

// Builds the status for SQLite result `rc` on `db` (may be null).
absl::Status SqliteError(sqlite3* db, int rc, std::string_view path,
                         int busy_timeout_ms, std::string_view what) {
  const char* msg = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  const int primary = rc & 0xff;
  if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) {
    return absl::UnavailableError(absl::StrFormat(
        "%s: database '%s' is locked by another connection or process "
        "(gave up after busy_timeout_ms=%d): %s",
        what, path, busy_timeout_ms, msg));
  }
  const int sys_errno = db != nullptr ? sqlite3_system_errno(db) : 0;
  std::string text = absl::StrFormat("%s: database '%s': %s", what, path, msg);
  if ((primary == SQLITE_CANTOPEN || primary == SQLITE_IOERR) &&
      sys_errno != 0) {
    absl::StrAppend(&text, " (", std::generic_category().message(sys_errno),
                    ")");
  }
  return absl::Status(CodeFor(rc, sys_errno), text);
}

std::string_view ColumnText(sqlite3_stmt* s, int col) {
  const unsigned char* p = sqlite3_column_text(s, col);
  const int n = sqlite3_column_bytes(s, col);
  if (p == nullptr) return {};
  return std::string_view(reinterpret_cast<const char*>(p),
                          static_cast<size_t>(n));
}

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

absl::Status ReadOnlyError(std::string_view path) {
  return absl::FailedPreconditionError(
      absl::StrFormat("database '%s' was opened read-only", path));
}

// Shape check shared by ratings and items; errors read "<what> <index>: ...",
// e.g. "row 17: empty item id".
absl::Status CheckId(std::string_view id, const char* what, size_t index,
                     const char* field) {
  if (id.empty()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s %d: empty %s id", what, index, field));
  }
  if (id.size() > kMaxIdBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s %d: %s id is %d bytes long, the limit is %d", what,
                        index, field, id.size(), kMaxIdBytes));
  }
  return absl::OkStatus();
}

}  // namespace

namespace internal {

// One SQLite connection and its cache of prepared statements. Not
// thread-safe: the Store serializes all use of a Connection with a mutex.
class Connection {
 public:
  // Opens `path` with SQLite open `flags` and sets the busy timeout.
  static absl::StatusOr<std::unique_ptr<Connection>> Open(
      const std::string& path, int flags, int busy_timeout_ms) {
    sqlite3* db = nullptr;
    const int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
    if (rc != SQLITE_OK) {
      absl::Status s = SqliteError(db, rc, path, busy_timeout_ms,
                                   "cannot open database file");
      sqlite3_close_v2(db);
      return s;
    }
    sqlite3_extended_result_codes(db, 1);
    sqlite3_busy_timeout(db, busy_timeout_ms);
    return std::unique_ptr<Connection>(
        new Connection(db, path, busy_timeout_ms));
  }

  ~Connection() {
    for (auto& [sql, stmt] : stmts_) sqlite3_finalize(stmt);
    sqlite3_close_v2(db_);
  }

  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  sqlite3* db() const { return db_; }
  const std::string& path() const { return path_; }

  // Returns the prepared statement for `sql`, prepared on first use and
  // cached for the life of the connection. Callers must reset it after use
  // (see Stmt).
  absl::StatusOr<sqlite3_stmt*> Prepare(std::string_view sql) {
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

  // Runs `sql` (one or more statements, no parameters, results discarded).
  absl::Status Exec(const char* sql, std::string_view what) {
    const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) return Error(rc, what);
    return absl::OkStatus();
  }

  // Runs a statement that returns one text value (e.g. a PRAGMA).
  absl::StatusOr<std::string> QueryText(const char* sql) {
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_prepare_v2(db_, sql, -1, &stmt, nullptr);
    if (rc != SQLITE_OK) return Error(rc, sql);
    std::string value;
    rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW) {
      value = std::string(ColumnText(stmt, 0));
      rc = sqlite3_step(stmt);
    }
    absl::Status status = rc == SQLITE_DONE ? absl::OkStatus() : Error(rc, sql);
    sqlite3_finalize(stmt);
    if (!status.ok()) return status;
    return value;
  }

  absl::Status Error(int rc, std::string_view what) const {
    return SqliteError(db_, rc, path_, busy_timeout_ms_, what);
  }

 private:
  Connection(sqlite3* db, std::string path, int busy_timeout_ms)
      : db_(db), path_(std::move(path)), busy_timeout_ms_(busy_timeout_ms) {}

  sqlite3* const db_;
  const std::string path_;
  const int busy_timeout_ms_;
  absl::flat_hash_map<std::string, sqlite3_stmt*> stmts_;
};

}  // namespace internal

namespace {

using internal::Connection;

// Binds, steps and resets (on destruction) one cached statement. Text and
// blobs are bound without copying: they must outlive the Stmt's steps. The
// first bind error is reported by the next Step/Run.
class Stmt {
 public:
  Stmt(Connection& conn, sqlite3_stmt* stmt) : conn_(conn), stmt_(stmt) {}
  ~Stmt() { sqlite3_reset(stmt_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  sqlite3_stmt* get() const { return stmt_; }

  void BindText(int i, std::string_view v) {
    Check(sqlite3_bind_text64(stmt_, i, v.data() != nullptr ? v.data() : "",
                              v.size(), SQLITE_STATIC, SQLITE_UTF8));
  }
  // Binds NULL for an empty string.
  void BindTextOrNull(int i, std::string_view v) {
    if (v.empty()) {
      Check(sqlite3_bind_null(stmt_, i));
    } else {
      BindText(i, v);
    }
  }
  void BindBlob(int i, std::string_view v) {
    Check(sqlite3_bind_blob64(stmt_, i, v.data() != nullptr ? v.data() : "",
                              v.size(), SQLITE_STATIC));
  }
  void BindInt(int i, int64_t v) { Check(sqlite3_bind_int64(stmt_, i, v)); }
  void BindDouble(int i, double v) { Check(sqlite3_bind_double(stmt_, i, v)); }

  // Steps once: true when a row is available, false when done.
  absl::StatusOr<bool> Next() {
    if (bind_rc_ != SQLITE_OK) return conn_.Error(bind_rc_, "binding");
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return conn_.Error(rc, sqlite3_sql(stmt_));
  }

  // Steps a statement that returns no rows.
  absl::Status Run() {
    absl::StatusOr<bool> row = Next();
    if (!row.ok()) return row.status();
    if (*row) {
      return absl::InternalError(
          absl::StrCat("unexpected row from: ", sqlite3_sql(stmt_)));
    }
    return absl::OkStatus();
  }

 private:
  void Check(int rc) {
    if (rc != SQLITE_OK && bind_rc_ == SQLITE_OK) bind_rc_ = rc;
  }

  Connection& conn_;
  sqlite3_stmt* const stmt_;
  int bind_rc_ = SQLITE_OK;
};

// A transaction; rolled back on destruction unless committed. Writes use
// BEGIN IMMEDIATE, which takes the write lock up front (waiting up to the
// busy timeout), so a write never fails half-way for lock reasons.
class Txn {
 public:
  enum Kind { kRead, kWrite };

  explicit Txn(Connection& conn) : conn_(conn) {}
  ~Txn() {
    if (active_ && sqlite3_get_autocommit(conn_.db()) == 0) {
      sqlite3_exec(conn_.db(), "ROLLBACK", nullptr, nullptr, nullptr);
    }
  }
  Txn(const Txn&) = delete;
  Txn& operator=(const Txn&) = delete;

  absl::Status Begin(Kind kind) {
    RBMREC_STORE_ASSIGN_OR_RETURN(
        sqlite3_stmt * begin,
        conn_.Prepare(kind == kWrite ? "BEGIN IMMEDIATE" : "BEGIN"));
    Stmt s(conn_, begin);
    RBMREC_STORE_RETURN_IF_ERROR(s.Run());
    active_ = true;
    return absl::OkStatus();
  }

  absl::Status Commit() {
    RBMREC_STORE_ASSIGN_OR_RETURN(sqlite3_stmt * commit,
                                  conn_.Prepare("COMMIT"));
    Stmt s(conn_, commit);
    RBMREC_STORE_RETURN_IF_ERROR(s.Run());
    active_ = false;
    return absl::OkStatus();
  }

 private:
  Connection& conn_;
  bool active_ = false;
};

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

// Returns the idx of `id` from `cache`, inserting a row with `insert`
// ("INSERT INTO <table>(ext_id) VALUES(?1)") when new.
absl::StatusOr<int64_t> GetOrCreate(Connection& conn, sqlite3_stmt* insert,
                                    std::string_view id, CacheUndo::Map& cache,
                                    CacheUndo& undo, int64_t& created) {
  auto it = cache.find(AbslView(id));
  if (it != cache.end()) return it->second;
  Stmt s(conn, insert);
  s.BindText(1, id);
  RBMREC_STORE_RETURN_IF_ERROR(s.Run());
  const int64_t idx = sqlite3_last_insert_rowid(conn.db());
  undo.Add(id, idx);
  ++created;
  return idx;
}

// Whether `json` is a JSON object (SQLite's JSON1 decides).
absl::StatusOr<bool> IsJsonObject(Connection& conn, std::string_view json) {
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * stmt,
      conn.Prepare("SELECT CASE WHEN json_valid(?1) THEN json_type(?1) END"));
  Stmt s(conn, stmt);
  s.BindText(1, json);
  RBMREC_STORE_ASSIGN_OR_RETURN(bool row, s.Next());
  return row && ColumnText(stmt, 0) == "object";
}

absl::StatusOr<int> ReadUserVersion(Connection& conn) {
  RBMREC_STORE_ASSIGN_OR_RETURN(std::string text,
                                conn.QueryText("PRAGMA user_version"));
  int version = 0;
  if (!absl::SimpleAtoi(text, &version)) {
    return absl::InternalError(
        absl::StrCat("unexpected PRAGMA user_version result: ", text));
  }
  return version;
}

absl::Status CheckNotNewer(int version) {
  if (version > kSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "database schema version %d is newer than this build supports (%d)",
        version, kSchemaVersion));
  }
  return absl::OkStatus();
}

// Brings the schema to kSchemaVersion (all steps in one transaction).
absl::Status Migrate(Connection& conn, bool read_only) {
  RBMREC_STORE_ASSIGN_OR_RETURN(int version, ReadUserVersion(conn));
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
  RBMREC_STORE_ASSIGN_OR_RETURN(version, ReadUserVersion(conn));
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

// Reads meta.active_model_version (nullopt when unset).
absl::StatusOr<std::optional<int64_t>> ReadActiveVersion(Connection& conn) {
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * stmt, conn.Prepare("SELECT value FROM meta WHERE key=?1"));
  Stmt s(conn, stmt);
  s.BindText(1, kActiveModelKey);
  RBMREC_STORE_ASSIGN_OR_RETURN(bool row, s.Next());
  if (!row || sqlite3_column_type(stmt, 0) == SQLITE_NULL) {
    return std::optional<int64_t>();
  }
  int64_t version = 0;
  if (!absl::SimpleAtoi(AbslView(ColumnText(stmt, 0)), &version)) {
    return absl::DataLossError(
        absl::StrFormat("database '%s': malformed meta.%s: '%s'", conn.path(),
                        kActiveModelKey, ColumnText(stmt, 0)));
  }
  return std::optional<int64_t>(version);
}

// Pinned versions are meta rows "pinned_model:<version>".
constexpr std::string_view kPinnedPrefix = "pinned_model:";

absl::StatusOr<std::vector<int64_t>> ReadPinned(Connection& conn) {
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * stmt,
      conn.Prepare("SELECT substr(key, 14) FROM meta WHERE key GLOB "
                   "'pinned_model:*'"));
  Stmt s(conn, stmt);
  std::vector<int64_t> out;
  while (true) {
    RBMREC_STORE_ASSIGN_OR_RETURN(bool row, s.Next());
    if (!row) break;
    int64_t v = 0;
    if (absl::SimpleAtoi(AbslView(ColumnText(stmt, 0)), &v)) out.push_back(v);
  }
  return out;
}

absl::Status WriteActiveVersion(Connection& conn, int64_t version) {
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * stmt,
      conn.Prepare("INSERT INTO meta(key, value) VALUES(?1, ?2) "
                   "ON CONFLICT(key) DO UPDATE SET value=excluded.value"));
  Stmt s(conn, stmt);
  s.BindText(1, kActiveModelKey);
  const std::string text = absl::StrCat(version);
  s.BindText(2, text);
  return s.Run();
}

// Reads "SELECT idx, ext_id FROM <table> ORDER BY idx" into `names` and
// `pos` (idx -> position in names, -1 for gaps).
absl::Status ReadNames(Connection& conn, const char* sql,
                       std::vector<std::string>& names,
                       std::vector<int32_t>& pos) {
  RBMREC_STORE_ASSIGN_OR_RETURN(sqlite3_stmt * stmt, conn.Prepare(sql));
  Stmt s(conn, stmt);
  while (true) {
    RBMREC_STORE_ASSIGN_OR_RETURN(bool row, s.Next());
    if (!row) break;
    const int64_t idx = sqlite3_column_int64(stmt, 0);
    if (idx < 0 || idx >= std::numeric_limits<int32_t>::max() ||
        names.size() >=
            static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
      return absl::OutOfRangeError(absl::StrFormat(
          "database '%s': index %d does not fit a snapshot", conn.path(), idx));
    }
    if (pos.size() <= static_cast<size_t>(idx)) {
      pos.resize(static_cast<size_t>(idx) + 1, -1);
    }
    pos[static_cast<size_t>(idx)] = static_cast<int32_t>(names.size());
    names.emplace_back(ColumnText(stmt, 1));
  }
  return absl::OkStatus();
}

}  // namespace

Store::Store(std::string path, const StoreOptions& options)
    : path_(std::move(path)), options_(options) {}

Store::~Store() = default;

absl::StatusOr<std::unique_ptr<Store>> Store::Open(
    const std::string& path, const StoreOptions& options) {
  if (path.empty()) {
    return absl::InvalidArgumentError("empty database path");
  }
  if (options.busy_timeout_ms < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "busy_timeout_ms must be >= 0, got %d", options.busy_timeout_ms));
  }
  const bool memory = path == kMemoryPath;
  if (memory && options.read_only) {
    return absl::InvalidArgumentError(
        "read_only makes no sense for an in-memory database");
  }
  // Before SQLite initialises (once per process): no global memory
  // statistics, whose mutex every sqlite3_malloc would take (5% of an
  // import's server CPU in perf). A later call cannot change it; ignored.
  static const int memstatus_off = sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
  (void)memstatus_off;
  std::unique_ptr<Store> store(new Store(path, options));
  const int base = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE;
  {
    absl::MutexLock lock(&store->writer_.mu);
    RBMREC_STORE_ASSIGN_OR_RETURN(
        store->writer_.conn,
        Connection::Open(path,
                         base | (options.read_only ? SQLITE_OPEN_READONLY
                                                   : SQLITE_OPEN_READWRITE |
                                                         SQLITE_OPEN_CREATE),
                         options.busy_timeout_ms));
    Connection& conn = *store->writer_.conn;
    if (!options.read_only && sqlite3_db_readonly(conn.db(), "main") == 1) {
      return absl::PermissionDeniedError(absl::StrFormat(
          "database '%s' is not writable (SQLite could only open it "
          "read-only)",
          path));
    }
    if (!memory && !options.read_only) {
      RBMREC_STORE_ASSIGN_OR_RETURN(std::string mode,
                                    conn.QueryText("PRAGMA journal_mode=WAL"));
      if (mode != "wal") {
        return absl::FailedPreconditionError(absl::StrFormat(
            "database '%s': cannot enable WAL journal mode (got '%s')", path,
            mode));
      }
    }
    RBMREC_STORE_RETURN_IF_ERROR(conn.Exec(options.synchronous_full
                                               ? "PRAGMA synchronous=FULL"
                                               : "PRAGMA synchronous=NORMAL",
                                           "setting synchronous"));
    RBMREC_STORE_RETURN_IF_ERROR(
        conn.Exec("PRAGMA foreign_keys=ON", "enabling foreign keys"));
    RBMREC_STORE_RETURN_IF_ERROR(Migrate(conn, options.read_only));
    if (!options.read_only) {
      RBMREC_STORE_RETURN_IF_ERROR(store->LoadCaches());
    }
  }
  if (memory || options.read_only) {
    store->reader_ = &store->writer_;
  } else {
    absl::MutexLock lock(&store->reader_storage_.mu);
    RBMREC_STORE_ASSIGN_OR_RETURN(
        store->reader_storage_.conn,
        Connection::Open(path, base | SQLITE_OPEN_READWRITE,
                         options.busy_timeout_ms));
    RBMREC_STORE_RETURN_IF_ERROR(store->reader_storage_.conn->Exec(
        "PRAGMA query_only=ON", "configuring the read connection"));
    store->reader_ = &store->reader_storage_;
  }
  return store;
}

absl::Status Store::LoadCaches() {
  Connection& conn = *writer_.conn;
  struct Table {
    const char* sql;
    CacheUndo::Map* cache;
  };
  for (const Table& t : {Table{"SELECT idx, ext_id FROM users", &user_idx_},
                         Table{"SELECT idx, ext_id FROM items", &item_idx_}}) {
    t.cache->clear();
    RBMREC_STORE_ASSIGN_OR_RETURN(sqlite3_stmt * stmt, conn.Prepare(t.sql));
    Stmt s(conn, stmt);
    while (true) {
      RBMREC_STORE_ASSIGN_OR_RETURN(bool row, s.Next());
      if (!row) break;
      t.cache->emplace(std::string(ColumnText(stmt, 1)),
                       sqlite3_column_int64(stmt, 0));
    }
  }
  return absl::OkStatus();
}

absl::Status Store::CheckWritable() const {
  if (options_.read_only) return ReadOnlyError(path_);
  return absl::OkStatus();
}

absl::StatusOr<UpsertResult> Store::UpsertRatings(
    absl::Span<const RatingRow> rows) {
  RBMREC_STORE_RETURN_IF_ERROR(CheckWritable());
  for (size_t i = 0; i < rows.size(); ++i) {
    const RatingRow& r = rows[i];
    RBMREC_STORE_RETURN_IF_ERROR(CheckId(r.user, "row", i, "user"));
    RBMREC_STORE_RETURN_IF_ERROR(CheckId(r.item, "row", i, "item"));
    if (!std::isfinite(r.rating)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "row %d: rating is not a finite number (%g)", i, r.rating));
    }
  }
  UpsertResult result;
  result.previous.resize(rows.size());
  if (rows.empty()) return result;

  absl::MutexLock lock(&writer_.mu);
  Connection& conn = *writer_.conn;
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * insert_user,
      conn.Prepare("INSERT INTO users(ext_id) VALUES(?1)"));
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * insert_item,
      conn.Prepare("INSERT INTO items(ext_id) VALUES(?1)"));
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * insert_rating,
      conn.Prepare("INSERT INTO ratings(user_idx, item_idx, rating, ts) "
                   "VALUES(?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING"));
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * update_rating,
      conn.Prepare("UPDATE ratings SET rating=?3, ts=?4 "
                   "WHERE user_idx=?1 AND item_idx=?2"));
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * select_rating,
      conn.Prepare("SELECT rating FROM ratings "
                   "WHERE user_idx=?1 AND item_idx=?2"));

  // Declared before the transaction: on failure the transaction rolls back
  // first, then the caches forget the ids it had added.
  CacheUndo user_undo(&user_idx_);
  CacheUndo item_undo(&item_idx_);
  Txn txn(conn);
  RBMREC_STORE_RETURN_IF_ERROR(txn.Begin(Txn::kWrite));
  // Ids first, in row order (new users and items get their indices in
  // order of appearance); then the ratings in (user, item) order, which
  // walks the ratings B-tree mostly forward. The sort is stable, so rows of
  // the same (user, item) keep their order and the later one still wins.
  struct Keyed {
    int64_t user, item;
    const RatingRow* row;
  };
  std::vector<Keyed> keyed;
  keyed.reserve(rows.size());
  for (const RatingRow& r : rows) {
    RBMREC_STORE_ASSIGN_OR_RETURN(
        const int64_t user, GetOrCreate(conn, insert_user, r.user, user_idx_,
                                        user_undo, result.new_users));
    RBMREC_STORE_ASSIGN_OR_RETURN(
        const int64_t item, GetOrCreate(conn, insert_item, r.item, item_idx_,
                                        item_undo, result.new_items));
    keyed.push_back({user, item, &r});
  }
  std::stable_sort(
      keyed.begin(), keyed.end(), [](const Keyed& a, const Keyed& b) {
        return a.user != b.user ? a.user < b.user : a.item < b.item;
      });
  for (const Keyed& k : keyed) {
    // Insert first (one B-tree operation for the common case), update only
    // on conflict, which is how replacements are counted.
    for (sqlite3_stmt* stmt : {insert_rating, update_rating}) {
      if (stmt == update_rating) {
        Stmt sel(conn, select_rating);
        sel.BindInt(1, k.user);
        sel.BindInt(2, k.item);
        RBMREC_STORE_ASSIGN_OR_RETURN(bool row, sel.Next());
        if (row) {
          result.previous[static_cast<size_t>(k.row - rows.data())] =
              sqlite3_column_double(select_rating, 0);
        }
      }
      Stmt s(conn, stmt);
      s.BindInt(1, k.user);
      s.BindInt(2, k.item);
      s.BindDouble(3, k.row->rating);
      s.BindInt(4, k.row->timestamp);
      RBMREC_STORE_RETURN_IF_ERROR(s.Run());
      if (sqlite3_changes(conn.db()) > 0) {
        ++(stmt == insert_rating ? result.inserted : result.replaced);
        break;
      }
    }
  }
  RBMREC_STORE_RETURN_IF_ERROR(txn.Commit());
  user_undo.Commit();
  item_undo.Commit();
  return result;
}

absl::StatusOr<int64_t> Store::DeleteRatings(
    std::string_view user, absl::Span<const std::string> items) {
  RBMREC_STORE_RETURN_IF_ERROR(CheckWritable());
  absl::MutexLock lock(&writer_.mu);
  auto u = user_idx_.find(AbslView(user));
  if (u == user_idx_.end()) {
    return absl::NotFoundError(absl::StrCat("unknown user: ", AbslView(user)));
  }
  Connection& conn = *writer_.conn;
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * del,
      conn.Prepare("DELETE FROM ratings WHERE user_idx=?1 AND item_idx=?2"));
  Txn txn(conn);
  RBMREC_STORE_RETURN_IF_ERROR(txn.Begin(Txn::kWrite));
  int64_t deleted = 0;
  for (const std::string& item : items) {
    auto it = item_idx_.find(item);
    if (it == item_idx_.end()) continue;
    Stmt s(conn, del);
    s.BindInt(1, u->second);
    s.BindInt(2, it->second);
    RBMREC_STORE_RETURN_IF_ERROR(s.Run());
    deleted += sqlite3_changes(conn.db());
  }
  RBMREC_STORE_RETURN_IF_ERROR(txn.Commit());
  return deleted;
}

absl::StatusOr<int64_t> Store::DeleteUser(std::string_view user) {
  RBMREC_STORE_RETURN_IF_ERROR(CheckWritable());
  absl::MutexLock lock(&writer_.mu);
  auto u = user_idx_.find(AbslView(user));
  if (u == user_idx_.end()) {
    return absl::NotFoundError(absl::StrCat("unknown user: ", AbslView(user)));
  }
  Connection& conn = *writer_.conn;
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * del_ratings,
      conn.Prepare("DELETE FROM ratings WHERE user_idx=?1"));
  RBMREC_STORE_ASSIGN_OR_RETURN(sqlite3_stmt * del_user,
                                conn.Prepare("DELETE FROM users WHERE idx=?1"));
  Txn txn(conn);
  RBMREC_STORE_RETURN_IF_ERROR(txn.Begin(Txn::kWrite));
  int64_t deleted = 0;
  {
    Stmt s(conn, del_ratings);
    s.BindInt(1, u->second);
    RBMREC_STORE_RETURN_IF_ERROR(s.Run());
    deleted = sqlite3_changes(conn.db());
  }
  {
    Stmt s(conn, del_user);
    s.BindInt(1, u->second);
    RBMREC_STORE_RETURN_IF_ERROR(s.Run());
  }
  RBMREC_STORE_RETURN_IF_ERROR(txn.Commit());
  user_idx_.erase(u);
  return deleted;
}

absl::Status Store::PutItems(absl::Span<const ItemRow> items) {
  RBMREC_STORE_RETURN_IF_ERROR(CheckWritable());
  for (size_t i = 0; i < items.size(); ++i) {
    RBMREC_STORE_RETURN_IF_ERROR(CheckId(items[i].item, "item", i, "item"));
  }
  if (items.empty()) return absl::OkStatus();

  absl::MutexLock lock(&writer_.mu);
  Connection& conn = *writer_.conn;
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].attributes_json.empty()) continue;
    RBMREC_STORE_ASSIGN_OR_RETURN(bool ok,
                                  IsJsonObject(conn, items[i].attributes_json));
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrFormat("item %d: attributes_json is not a JSON object", i));
    }
  }
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * insert,
      conn.Prepare(
          "INSERT INTO items(ext_id, title, attributes) VALUES(?1, ?2, ?3)"));
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * update,
      conn.Prepare("UPDATE items SET title=?2, attributes=?3 WHERE idx=?1"));
  CacheUndo undo(&item_idx_);
  Txn txn(conn);
  RBMREC_STORE_RETURN_IF_ERROR(txn.Begin(Txn::kWrite));
  for (const ItemRow& item : items) {
    auto it = item_idx_.find(item.item);
    const bool known = it != item_idx_.end();
    Stmt s(conn, known ? update : insert);
    if (known) {
      s.BindInt(1, it->second);
    } else {
      s.BindText(1, item.item);
    }
    s.BindTextOrNull(2, item.title);
    s.BindTextOrNull(3, item.attributes_json);
    RBMREC_STORE_RETURN_IF_ERROR(s.Run());
    if (!known) undo.Add(item.item, sqlite3_last_insert_rowid(conn.db()));
  }
  RBMREC_STORE_RETURN_IF_ERROR(txn.Commit());
  undo.Commit();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> Store::GetTitles(
    absl::Span<const std::string> items) const {
  absl::MutexLock lock(&reader_->mu);
  Connection& conn = *reader_->conn;
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * stmt,
      conn.Prepare("SELECT title FROM items WHERE ext_id=?1"));
  Txn txn(conn);
  RBMREC_STORE_RETURN_IF_ERROR(txn.Begin(Txn::kRead));
  std::vector<std::string> titles;
  titles.reserve(items.size());
  for (const std::string& item : items) {
    Stmt s(conn, stmt);
    s.BindText(1, item);
    RBMREC_STORE_ASSIGN_OR_RETURN(bool row, s.Next());
    titles.emplace_back(row ? ColumnText(stmt, 0) : std::string_view());
  }
  RBMREC_STORE_RETURN_IF_ERROR(txn.Commit());
  return titles;
}

absl::StatusOr<std::vector<UserRating>> Store::GetUserRatings(
    std::string_view user) const {
  absl::MutexLock lock(&reader_->mu);
  Connection& conn = *reader_->conn;
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * find_user,
      conn.Prepare("SELECT idx FROM users WHERE ext_id=?1"));
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * list,
      conn.Prepare("SELECT i.ext_id, r.rating, r.ts FROM ratings r "
                   "JOIN items i ON i.idx = r.item_idx "
                   "WHERE r.user_idx=?1 ORDER BY r.item_idx"));
  Txn txn(conn);
  RBMREC_STORE_RETURN_IF_ERROR(txn.Begin(Txn::kRead));
  int64_t user_idx = 0;
  {
    Stmt s(conn, find_user);
    s.BindText(1, user);
    RBMREC_STORE_ASSIGN_OR_RETURN(bool row, s.Next());
    if (!row)
      return absl::NotFoundError(
          absl::StrCat("unknown user: ", AbslView(user)));
    user_idx = sqlite3_column_int64(find_user, 0);
  }
  std::vector<UserRating> out;
  {
    Stmt s(conn, list);
    s.BindInt(1, user_idx);
    while (true) {
      RBMREC_STORE_ASSIGN_OR_RETURN(bool row, s.Next());
      if (!row) break;
      out.push_back(UserRating{std::string(ColumnText(list, 0)),
                               sqlite3_column_double(list, 1),
                               sqlite3_column_int64(list, 2)});
    }
  }
  RBMREC_STORE_RETURN_IF_ERROR(txn.Commit());
  return out;
}

absl::StatusOr<Snapshot> Store::ReadSnapshot() const {
  absl::MutexLock lock(&reader_->mu);
  Connection& conn = *reader_->conn;
  RBMREC_STORE_ASSIGN_OR_RETURN(sqlite3_stmt * count,
                                conn.Prepare("SELECT count(*) FROM ratings"));
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * ratings,
      conn.Prepare("SELECT user_idx, item_idx, rating FROM ratings "
                   "ORDER BY user_idx, item_idx"));
  Txn txn(conn);
  RBMREC_STORE_RETURN_IF_ERROR(txn.Begin(Txn::kRead));
  Snapshot snap;
  std::vector<int32_t> user_pos;
  std::vector<int32_t> item_pos;
  RBMREC_STORE_RETURN_IF_ERROR(
      ReadNames(conn, "SELECT idx, ext_id FROM users ORDER BY idx", snap.users,
                user_pos));
  RBMREC_STORE_RETURN_IF_ERROR(
      ReadNames(conn, "SELECT idx, ext_id FROM items ORDER BY idx", snap.items,
                item_pos));
  {
    Stmt s(conn, count);
    RBMREC_STORE_ASSIGN_OR_RETURN(bool row, s.Next());
    if (row) {
      snap.ratings.reserve(static_cast<size_t>(
          std::max<int64_t>(0, sqlite3_column_int64(count, 0))));
    }
  }
  {
    Stmt s(conn, ratings);
    while (true) {
      RBMREC_STORE_ASSIGN_OR_RETURN(bool row, s.Next());
      if (!row) break;
      const int64_t u = sqlite3_column_int64(ratings, 0);
      const int64_t i = sqlite3_column_int64(ratings, 1);
      // Foreign keys guarantee both exist; check anyway rather than index
      // out of bounds on a file edited by hand.
      if (u < 0 || static_cast<size_t>(u) >= user_pos.size() ||
          user_pos[static_cast<size_t>(u)] < 0 || i < 0 ||
          static_cast<size_t>(i) >= item_pos.size() ||
          item_pos[static_cast<size_t>(i)] < 0) {
        return absl::DataLossError(absl::StrFormat(
            "database '%s': rating (%d, %d) refers to a missing user or item",
            path_, u, i));
      }
      snap.ratings.push_back(Snapshot::Row{user_pos[static_cast<size_t>(u)],
                                           item_pos[static_cast<size_t>(i)],
                                           sqlite3_column_double(ratings, 2)});
    }
  }
  RBMREC_STORE_RETURN_IF_ERROR(txn.Commit());
  return snap;
}

absl::StatusOr<Stats> Store::GetStats() const {
  absl::MutexLock lock(&reader_->mu);
  Connection& conn = *reader_->conn;
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * stmt,
      conn.Prepare("SELECT (SELECT count(*) FROM users), "
                   "(SELECT count(*) FROM items), "
                   "(SELECT count(*) FROM ratings), "
                   "(SELECT count(*) FROM models), "
                   "(SELECT page_count FROM pragma_page_count()) * "
                   "(SELECT page_size FROM pragma_page_size())"));
  Txn txn(conn);
  RBMREC_STORE_RETURN_IF_ERROR(txn.Begin(Txn::kRead));
  Stats stats;
  {
    Stmt s(conn, stmt);
    RBMREC_STORE_ASSIGN_OR_RETURN(bool row, s.Next());
    if (!row) return absl::InternalError("no row from count query");
    stats.users = sqlite3_column_int64(stmt, 0);
    stats.items = sqlite3_column_int64(stmt, 1);
    stats.ratings = sqlite3_column_int64(stmt, 2);
    stats.model_versions = sqlite3_column_int64(stmt, 3);
    stats.database_bytes =
        path_ == ":memory:" ? 0 : sqlite3_column_int64(stmt, 4);
  }
  RBMREC_STORE_ASSIGN_OR_RETURN(stats.active_model_version,
                                ReadActiveVersion(conn));
  RBMREC_STORE_RETURN_IF_ERROR(txn.Commit());
  return stats;
}

absl::StatusOr<int64_t> Store::InsertModel(const ModelInfo& meta,
                                           std::string_view blob,
                                           bool activate) {
  RBMREC_STORE_RETURN_IF_ERROR(CheckWritable());
  absl::MutexLock lock(&writer_.mu);
  Connection& conn = *writer_.conn;
  if (!meta.metrics_json.empty()) {
    RBMREC_STORE_ASSIGN_OR_RETURN(bool ok,
                                  IsJsonObject(conn, meta.metrics_json));
    if (!ok) {
      return absl::InvalidArgumentError("metrics_json is not a JSON object");
    }
  }
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * insert,
      conn.Prepare("INSERT INTO models(created_unix_ms, kind, n_users, "
                   "n_items, n_ratings, metrics, size_bytes, model) "
                   "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"));
  Txn txn(conn);
  RBMREC_STORE_RETURN_IF_ERROR(txn.Begin(Txn::kWrite));
  {
    Stmt s(conn, insert);
    s.BindInt(1,
              meta.created_unix_ms != 0 ? meta.created_unix_ms : NowUnixMs());
    s.BindText(2, meta.kind);
    s.BindInt(3, meta.n_users);
    s.BindInt(4, meta.n_items);
    s.BindInt(5, meta.n_ratings);
    s.BindTextOrNull(6, meta.metrics_json);
    s.BindInt(7, static_cast<int64_t>(blob.size()));
    s.BindBlob(8, blob);
    RBMREC_STORE_RETURN_IF_ERROR(s.Run());
  }
  const int64_t version = sqlite3_last_insert_rowid(conn.db());
  if (activate) {
    RBMREC_STORE_RETURN_IF_ERROR(WriteActiveVersion(conn, version));
  }
  RBMREC_STORE_RETURN_IF_ERROR(txn.Commit());
  return version;
}

absl::Status Store::ActivateModel(int64_t version) {
  RBMREC_STORE_RETURN_IF_ERROR(CheckWritable());
  absl::MutexLock lock(&writer_.mu);
  Connection& conn = *writer_.conn;
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * exists,
      conn.Prepare("SELECT 1 FROM models WHERE version=?1"));
  Txn txn(conn);
  RBMREC_STORE_RETURN_IF_ERROR(txn.Begin(Txn::kWrite));
  {
    Stmt s(conn, exists);
    s.BindInt(1, version);
    RBMREC_STORE_ASSIGN_OR_RETURN(bool row, s.Next());
    if (!row) {
      return absl::NotFoundError(
          absl::StrFormat("no model version %d", version));
    }
  }
  RBMREC_STORE_RETURN_IF_ERROR(WriteActiveVersion(conn, version));
  return txn.Commit();
}

absl::StatusOr<std::vector<ModelInfo>> Store::ListModels() const {
  absl::MutexLock lock(&reader_->mu);
  Connection& conn = *reader_->conn;
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * stmt,
      conn.Prepare("SELECT version, created_unix_ms, kind, n_users, n_items, "
                   "n_ratings, metrics, size_bytes FROM models "
                   "ORDER BY version DESC"));
  Txn txn(conn);
  RBMREC_STORE_RETURN_IF_ERROR(txn.Begin(Txn::kRead));
  RBMREC_STORE_ASSIGN_OR_RETURN(std::optional<int64_t> active,
                                ReadActiveVersion(conn));
  std::vector<ModelInfo> out;
  {
    Stmt s(conn, stmt);
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
      m.active = active.has_value() && *active == m.version;
      out.push_back(std::move(m));
    }
  }
  RBMREC_STORE_ASSIGN_OR_RETURN(std::vector<int64_t> pinned, ReadPinned(conn));
  for (ModelInfo& m : out) {
    m.pinned =
        std::find(pinned.begin(), pinned.end(), m.version) != pinned.end();
  }
  RBMREC_STORE_RETURN_IF_ERROR(txn.Commit());
  return out;
}

absl::StatusOr<std::string> Store::LoadModelBlob(int64_t version) const {
  absl::MutexLock lock(&reader_->mu);
  Connection& conn = *reader_->conn;
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * stmt,
      conn.Prepare("SELECT model FROM models WHERE version=?1"));
  Stmt s(conn, stmt);
  s.BindInt(1, version);
  RBMREC_STORE_ASSIGN_OR_RETURN(bool row, s.Next());
  if (!row) {
    return absl::NotFoundError(absl::StrFormat("no model version %d", version));
  }
  const void* data = sqlite3_column_blob(stmt, 0);
  const int n = sqlite3_column_bytes(stmt, 0);
  if (data == nullptr || n <= 0) return std::string();
  return std::string(static_cast<const char*>(data), static_cast<size_t>(n));
}

absl::StatusOr<std::optional<int64_t>> Store::ActiveModelVersion() const {
  absl::MutexLock lock(&reader_->mu);
  return ReadActiveVersion(*reader_->conn);
}

absl::Status Store::PruneModels(int keep_last) {
  RBMREC_STORE_RETURN_IF_ERROR(CheckWritable());
  if (keep_last < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("keep_last must be >= 0, got %d", keep_last));
  }
  absl::MutexLock lock(&writer_.mu);
  Connection& conn = *writer_.conn;
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * stmt,
      conn.Prepare("DELETE FROM models WHERE version NOT IN "
                   "(SELECT version FROM models ORDER BY version DESC "
                   "LIMIT ?1) AND version IS NOT "
                   "(SELECT CAST(value AS INTEGER) FROM meta WHERE key=?2)"));
  Txn txn(conn);
  RBMREC_STORE_RETURN_IF_ERROR(txn.Begin(Txn::kWrite));
  {
    Stmt s(conn, stmt);
    s.BindInt(1, keep_last);
    s.BindText(2, kActiveModelKey);
    RBMREC_STORE_RETURN_IF_ERROR(s.Run());
  }
  return txn.Commit();
}

namespace {
// Size of `version`, NotFound when it does not exist.
absl::StatusOr<int64_t> ModelSize(Connection& conn, int64_t version) {
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * stmt,
      conn.Prepare("SELECT size_bytes FROM models WHERE version=?1"));
  Stmt s(conn, stmt);
  s.BindInt(1, version);
  RBMREC_STORE_ASSIGN_OR_RETURN(bool row, s.Next());
  if (!row) {
    return absl::NotFoundError(absl::StrFormat("no model version %d", version));
  }
  return sqlite3_column_int64(stmt, 0);
}

absl::Status DeleteVersion(Connection& conn, int64_t version) {
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * del, conn.Prepare("DELETE FROM models WHERE version=?1"));
  {
    Stmt s(conn, del);
    s.BindInt(1, version);
    RBMREC_STORE_RETURN_IF_ERROR(s.Run());
  }
  RBMREC_STORE_ASSIGN_OR_RETURN(sqlite3_stmt * unpin,
                                conn.Prepare("DELETE FROM meta WHERE key=?1"));
  Stmt s(conn, unpin);
  const std::string key = absl::StrCat(AbslView(kPinnedPrefix), version);
  s.BindText(1, key);
  return s.Run();
}
}  // namespace

absl::Status Store::PinModel(int64_t version, bool pinned) {
  RBMREC_STORE_RETURN_IF_ERROR(CheckWritable());
  absl::MutexLock lock(&writer_.mu);
  Connection& conn = *writer_.conn;
  Txn txn(conn);
  RBMREC_STORE_RETURN_IF_ERROR(txn.Begin(Txn::kWrite));
  RBMREC_STORE_RETURN_IF_ERROR(ModelSize(conn, version).status());
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * stmt,
      conn.Prepare(pinned ? "INSERT OR REPLACE INTO meta(key, value) "
                            "VALUES(?1, '1')"
                          : "DELETE FROM meta WHERE key=?1"));
  {
    Stmt s(conn, stmt);
    const std::string key = absl::StrCat(AbslView(kPinnedPrefix), version);
    s.BindText(1, key);
    RBMREC_STORE_RETURN_IF_ERROR(s.Run());
  }
  return txn.Commit();
}

absl::StatusOr<int64_t> Store::DeleteModel(int64_t version) {
  RBMREC_STORE_RETURN_IF_ERROR(CheckWritable());
  absl::MutexLock lock(&writer_.mu);
  Connection& conn = *writer_.conn;
  Txn txn(conn);
  RBMREC_STORE_RETURN_IF_ERROR(txn.Begin(Txn::kWrite));
  RBMREC_STORE_ASSIGN_OR_RETURN(const int64_t size, ModelSize(conn, version));
  RBMREC_STORE_ASSIGN_OR_RETURN(std::optional<int64_t> active,
                                ReadActiveVersion(conn));
  if (active.has_value() && *active == version) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "model version %d is the active version and cannot be deleted",
        version));
  }
  RBMREC_STORE_RETURN_IF_ERROR(DeleteVersion(conn, version));
  RBMREC_STORE_RETURN_IF_ERROR(txn.Commit());
  return size;
}

absl::StatusOr<PruneResult> Store::PruneModels(const RetentionPolicy& policy) {
  RBMREC_STORE_RETURN_IF_ERROR(CheckWritable());
  if (policy.keep_full < 0 || policy.keep_online < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("keep_full and keep_online must be >= 0, got %d, %d",
                        policy.keep_full, policy.keep_online));
  }
  absl::MutexLock lock(&writer_.mu);
  Connection& conn = *writer_.conn;
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * list,
      conn.Prepare("SELECT version, kind, size_bytes FROM models "
                   "ORDER BY version DESC"));
  Txn txn(conn);
  RBMREC_STORE_RETURN_IF_ERROR(txn.Begin(Txn::kWrite));
  RBMREC_STORE_ASSIGN_OR_RETURN(std::optional<int64_t> active,
                                ReadActiveVersion(conn));
  RBMREC_STORE_ASSIGN_OR_RETURN(std::vector<int64_t> pinned, ReadPinned(conn));
  PruneResult result;
  {
    int full = 0;
    int online = 0;
    Stmt s(conn, list);
    while (true) {
      RBMREC_STORE_ASSIGN_OR_RETURN(bool row, s.Next());
      if (!row) break;
      const int64_t version = sqlite3_column_int64(list, 0);
      const std::string_view kind = ColumnText(list, 1);
      bool keep =
          (active.has_value() && *active == version) ||
          std::find(pinned.begin(), pinned.end(), version) != pinned.end();
      if (kind == "full") {
        keep = keep || full < policy.keep_full;
        ++full;
      } else if (kind == "online") {
        keep = keep || online < policy.keep_online;
        ++online;
      } else {
        keep = true;
      }
      if (!keep) {
        result.deleted.push_back(version);
        result.freed_bytes += sqlite3_column_int64(list, 2);
      }
    }
  }
  for (const int64_t v : result.deleted) {
    RBMREC_STORE_RETURN_IF_ERROR(DeleteVersion(conn, v));
  }
  RBMREC_STORE_RETURN_IF_ERROR(txn.Commit());
  return result;
}

#undef RBMREC_STORE_RETURN_IF_ERROR
#undef RBMREC_STORE_ASSIGN_OR_RETURN
#undef RBMREC_STORE_ASSIGN_OR_RETURN_IMPL
#undef RBMREC_STORE_CONCAT
#undef RBMREC_STORE_CONCAT_INNER

}  // namespace rbmrec::store
