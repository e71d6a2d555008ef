#include "store/sqlite_store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <system_error>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/error_reason.h"
#include "store/checks.h"
#include "store/schema.h"
#include "store/sqlite_db.h"
#include "store/sqlite_models.h"
#include "store/status_macros.h"

namespace rbmrec::store {

using internal::AbslView;
using internal::CacheUndo;
using internal::CheckId;
using internal::ColumnText;
using internal::Connection;
using internal::Stmt;
using internal::Txn;

namespace {

constexpr std::string_view kMemoryPath = ":memory:";

absl::Status ReadOnlyError(std::string_view path) {
  return absl::FailedPreconditionError(
      absl::StrFormat("database '%s' was opened read-only", path));
}

// An id's idx, and whether the current batch created it.
struct IdxOf {
  int64_t idx = 0;
  bool created = false;
};

// Returns the idx of `id` from `cache`, inserting a row with `insert`
// ("INSERT INTO <table>(ext_id) VALUES(?1)") when new.
absl::StatusOr<IdxOf> GetOrCreate(Connection& conn, sqlite3_stmt* insert,
                                  std::string_view id, CacheUndo::Map& cache,
                                  CacheUndo& undo, int64_t& created) {
  auto it = cache.find(AbslView(id));
  if (it != cache.end()) return IdxOf{it->second, false};
  Stmt s(conn, insert);
  s.BindText(1, id);
  RBMREC_STORE_RETURN_IF_ERROR(s.Run());
  const int64_t idx = sqlite3_last_insert_rowid(conn.db());
  undo.Add(id, idx);
  ++created;
  return IdxOf{idx, true};
}

// Stores a view of `item` by `user` at `ts` with `upsert` (UpsertStatements:
// one row per pair, the latest timestamp) and counts it in `*views`.
absl::Status UpsertView(Connection& conn, sqlite3_stmt* upsert, int64_t user,
                        int64_t item, int64_t ts, int64_t* views) {
  Stmt s(conn, upsert);
  s.BindInt(1, user);
  s.BindInt(2, item);
  s.BindInt(3, ts);
  ++*views;
  return s.Run();
}

// A model version as PruneModels / DeleteModel see it.
struct StoredVersion {
  int64_t version = 0;
  std::string kind;
  int64_t size_bytes = 0;
  bool pinned = false;
};

// The directory part of `path` ("." when it has none).
std::string DirectoryOf(const std::string& path) {
  const std::filesystem::path parent =
      std::filesystem::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

// Takes the exclusive lock file "<path>.lock" (see "One writer" in the
// header) and returns its descriptor.
absl::StatusOr<int> LockDatabase(const std::string& path) {
  const std::string lock_path = absl::StrCat(path, ".lock");
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    const std::string dir = DirectoryOf(path);
    if (err == EACCES || err == EPERM || err == EROFS) {
      return absl::PermissionDeniedError(absl::StrFormat(
          "database '%s': cannot create its lock file '%s': %s (the "
          "directory '%s' must be writable: the database's -wal and -shm "
          "files live there too)",
          path, lock_path, std::strerror(err), dir));
    }
    if (err == ENOENT || err == ENOTDIR) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "database '%s': the directory '%s' %s", path, dir,
          err == ENOENT ? "does not exist" : "is not a directory"));
    }
    return absl::UnavailableError(
        absl::StrFormat("database '%s': cannot open its lock file '%s': %s",
                        path, lock_path, std::strerror(err)));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    std::string holder(512, '\0');
    const ssize_t n = ::pread(fd, holder.data(), holder.size(), 0);
    holder.resize(n > 0 ? static_cast<size_t>(n) : 0);
    ::close(fd);
    if (err != EWOULDBLOCK) {
      return absl::UnavailableError(
          absl::StrFormat("database '%s': cannot lock '%s': %s", path,
                          lock_path, std::strerror(err)));
    }
    absl::StripAsciiWhitespace(&holder);
    absl::StrReplaceAll({{"\n", ", "}}, &holder);
    absl::Status st = absl::FailedPreconditionError(absl::StrFormat(
        "database '%s' is in use by another process (%s; lock file '%s'): a "
        "SQLite database has one writer; stop that process, or use another "
        "database",
        path, holder.empty() ? "unknown process" : holder, lock_path));
    return WithReason(std::move(st), kReasonDatabaseInUse);
  }
  char host[256] = {0};
  if (::gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  const std::string who = absl::StrFormat(
      "pid %d on host %s, since %s\n", static_cast<int>(::getpid()), host,
      absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone()));
  // Best effort: the lock itself is what counts.
  if (::ftruncate(fd, 0) == 0) {
    (void)!::pwrite(fd, who.data(), who.size(), 0);
  }
  return fd;
}

// PRAGMA quick_check: OK, or DataLoss with its first findings.
absl::Status QuickCheck(Connection& conn) {
  RBMREC_STORE_ASSIGN_OR_RETURN(sqlite3_stmt * stmt,
                                conn.Prepare("PRAGMA quick_check(5)"));
  Stmt s(conn, stmt);
  std::vector<std::string> findings;
  while (true) {
    RBMREC_STORE_ASSIGN_OR_RETURN(bool row, s.Next());
    if (!row) break;
    if (s.Text(0) != "ok") findings.emplace_back(s.Text(0));
  }
  if (findings.empty()) return absl::OkStatus();
  return absl::DataLossError(absl::StrFormat(
      "database '%s' is damaged (PRAGMA quick_check: %s); restore it from a "
      "backup",
      conn.path(), absl::StrJoin(findings, "; ")));
}

}  // namespace

SqliteStore::SqliteStore(std::string path, const StoreOptions& options)
    : path_(std::move(path)), options_(options) {}

SqliteStore::~SqliteStore() {
  // The connections close (and checkpoint) before the lock is given up.
  {
    absl::MutexLock lock(&reader_storage_.mu);
    reader_storage_.conn.reset();
  }
  {
    absl::MutexLock lock(&writer_.mu);
    writer_.conn.reset();
  }
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

absl::StatusOr<std::unique_ptr<SqliteStore>> SqliteStore::Open(
    const std::string& path, const StoreOptions& options) {
  if (path.empty()) {
    return absl::InvalidArgumentError("empty database path");
  }
  if (options.busy_timeout_ms < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "busy_timeout_ms must be >= 0, got %d", options.busy_timeout_ms));
  }
  if (options.max_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("max_bytes must be >= 0, got %d", options.max_bytes));
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
  std::unique_ptr<SqliteStore> store(new SqliteStore(path, options));
  if (!memory && !options.read_only) {
    RBMREC_STORE_ASSIGN_OR_RETURN(store->lock_fd_, LockDatabase(path));
  }
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
    if (options.read_only) {
      RBMREC_STORE_RETURN_IF_ERROR(
          conn.Exec("PRAGMA query_only=ON", "configuring the connection"));
    } else {
      if (sqlite3_db_readonly(conn.db(), "main") == 1) {
        return absl::PermissionDeniedError(absl::StrFormat(
            "database '%s' is not writable (SQLite could only open it "
            "read-only)",
            path));
      }
      internal::WriterPragmas pragmas;
      pragmas.wal = !memory;
      pragmas.synchronous_full = options.synchronous_full;
      RBMREC_STORE_RETURN_IF_ERROR(internal::ConfigureWriter(conn, pragmas));
    }
    if (!memory && !options.read_only && options.check_integrity) {
      RBMREC_STORE_RETURN_IF_ERROR(QuickCheck(conn));
    }
    RBMREC_STORE_RETURN_IF_ERROR(internal::Migrate(conn, options.read_only));
    if (!options.read_only) {
      absl::StatusOr<bool> vacuumed = internal::EnsureIncrementalVacuum(conn);
      // No room for the one-time rewrite: open anyway (freed pages are still
      // reused, only not given back), retry at the next Open.
      if (!vacuumed.ok() && ReasonOf(vacuumed.status()) != kReasonStorageFull) {
        return vacuumed.status();
      }
      RBMREC_STORE_RETURN_IF_ERROR(
          internal::SetMaxBytes(conn, options.max_bytes));
      RBMREC_STORE_RETURN_IF_ERROR(store->LoadCaches());
    }
  }
  if (memory || options.read_only) {
    store->reader_ = &store->writer_;
  } else {
    absl::MutexLock lock(&store->reader_storage_.mu);
    RBMREC_STORE_ASSIGN_OR_RETURN(
        store->reader_storage_.conn,
        internal::OpenReader(path, /*read_only_file=*/false,
                             options.busy_timeout_ms));
    store->reader_ = &store->reader_storage_;
  }
  return store;
}

absl::StatusOr<std::unique_ptr<Connection>> SqliteStore::OpenLongReader()
    const {
  return internal::OpenReader(path_, options_.read_only,
                              options_.busy_timeout_ms);
}

bool SqliteStore::memory() const { return path_ == kMemoryPath; }

absl::Status SqliteStore::LoadCaches() {
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

absl::Status SqliteStore::CheckWritable() const {
  if (options_.read_only) return ReadOnlyError(path_);
  return absl::OkStatus();
}

namespace {

// The (cached) statements of UpsertRatings.
struct UpsertStatements {
  sqlite3_stmt* insert_user;
  sqlite3_stmt* insert_item;
  sqlite3_stmt* select_rating;
  sqlite3_stmt* insert_rating;
  sqlite3_stmt* update_rating;
  sqlite3_stmt* upsert_view;

  static absl::StatusOr<UpsertStatements> Prepare(Connection& conn) {
    UpsertStatements s{};
    const std::pair<sqlite3_stmt**, const char*> sql[] = {
        {&s.insert_user, "INSERT INTO users(ext_id) VALUES(?1)"},
        {&s.insert_item, "INSERT INTO items(ext_id) VALUES(?1)"},
        {&s.select_rating,
         "SELECT rating FROM ratings WHERE user_idx=?1 AND item_idx=?2"},
        {&s.insert_rating,
         "INSERT INTO ratings(user_idx, item_idx, rating, ts) "
         "VALUES(?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING"},
        {&s.update_rating,
         "UPDATE ratings SET rating=?3, ts=?4 "
         "WHERE user_idx=?1 AND item_idx=?2"},
        {&s.upsert_view,
         "INSERT INTO views(user_idx, item_idx, ts) VALUES(?1, ?2, ?3) "
         "ON CONFLICT(user_idx, item_idx) DO UPDATE SET ts=max(ts, "
         "excluded.ts)"},
    };
    for (const auto& [out, text] : sql) {
      RBMREC_STORE_ASSIGN_OR_RETURN(*out, conn.Prepare(text));
    }
    return s;
  }
};

}  // namespace

absl::StatusOr<UpsertResult> SqliteStore::UpsertRatings(
    absl::Span<const RatingRow> rows) {
  RBMREC_STORE_RETURN_IF_ERROR(CheckWritable());
  RBMREC_STORE_RETURN_IF_ERROR(internal::CheckRatingRows(rows));
  if (rows.empty()) return UpsertResult();
  UpsertResult result;
  absl::MutexLock lock(&writer_.mu);
  Connection& conn = *writer_.conn;
  RBMREC_STORE_ASSIGN_OR_RETURN(const UpsertStatements st,
                                UpsertStatements::Prepare(conn));
  // Declared before the transaction: on failure the transaction rolls back
  // first, then the caches forget the ids it had added.
  CacheUndo user_undo(&user_idx_);
  CacheUndo item_undo(&item_idx_);
  Txn txn(conn);
  RBMREC_STORE_RETURN_IF_ERROR(txn.Begin(Txn::kWrite));
  // Ids (and views) first, in row order (new users and items get their
  // indices in order of appearance); then the ratings in (user, item) order,
  // which
  // walks the ratings B-tree mostly forward. The sort is stable, so rows of
  // the same (user, item) keep their order and the later one still wins.
  struct Keyed {
    int64_t user, item;
    size_t row;
  };
  std::vector<Keyed> keyed;
  keyed.reserve(rows.size());
  // Indices are never reused and grow (AUTOINCREMENT): an id created by
  // this batch has an index >= the first one it created.
  int64_t first_new_user = std::numeric_limits<int64_t>::max();
  int64_t first_new_item = std::numeric_limits<int64_t>::max();
  for (size_t i = 0; i < rows.size(); ++i) {
    RBMREC_STORE_ASSIGN_OR_RETURN(
        const IdxOf user, GetOrCreate(conn, st.insert_user, rows[i].user,
                                      user_idx_, user_undo, result.new_users));
    RBMREC_STORE_ASSIGN_OR_RETURN(
        const IdxOf item, GetOrCreate(conn, st.insert_item, rows[i].item,
                                      item_idx_, item_undo, result.new_items));
    if (user.created) first_new_user = std::min(first_new_user, user.idx);
    if (item.created) first_new_item = std::min(first_new_item, item.idx);
    if (rows[i].view) {
      RBMREC_STORE_RETURN_IF_ERROR(UpsertView(conn, st.upsert_view, user.idx,
                                              item.idx, rows[i].timestamp,
                                              &result.views));
      continue;
    }
    keyed.push_back({user.idx, item.idx, i});
  }
  std::stable_sort(
      keyed.begin(), keyed.end(), [](const Keyed& a, const Keyed& b) {
        return a.user != b.user ? a.user < b.user : a.item < b.item;
      });
  result.previous.resize(rows.size());
  // Writes `row`'s rating with `stmt` (insert or update) and returns whether
  // a row changed.
  const auto write = [&](sqlite3_stmt* stmt, const Keyed& k,
                         const RatingRow& row) -> absl::StatusOr<bool> {
    Stmt s(conn, stmt);
    s.BindInt(1, k.user);
    s.BindInt(2, k.item);
    s.BindDouble(3, row.rating);
    s.BindInt(4, row.timestamp);
    RBMREC_STORE_RETURN_IF_ERROR(s.Run());
    return sqlite3_changes(conn.db()) > 0;
  };
  const auto read =
      [&](const Keyed& k) -> absl::StatusOr<std::optional<double>> {
    Stmt s(conn, st.select_rating);
    s.BindInt(1, k.user);
    s.BindInt(2, k.item);
    RBMREC_STORE_ASSIGN_OR_RETURN(bool row, s.Next());
    if (!row) return std::optional<double>();
    return std::optional<double>(s.Double(0));
  };
  // For a pair whose ids both existed before the batch, the stored rating
  // is read first when the row before replaced one (a re-import: read +
  // update per row), else an insert is tried first (new ratings of known
  // users: one write; on conflict read + update).
  bool expect_stored = false;
  for (size_t n = 0; n < keyed.size(); ++n) {
    const Keyed& k = keyed[n];
    const RatingRow& row = rows[k.row];
    // The rating before this row: that of the previous row of the same pair
    // in this batch, else the stored one (none for a new id).
    std::optional<double> previous;
    if (n > 0 && keyed[n - 1].user == k.user && keyed[n - 1].item == k.item) {
      previous = rows[keyed[n - 1].row].rating;
    } else if (expect_stored && k.user < first_new_user &&
               k.item < first_new_item) {
      RBMREC_STORE_ASSIGN_OR_RETURN(previous, read(k));
    }
    if (!previous.has_value()) {
      RBMREC_STORE_ASSIGN_OR_RETURN(bool inserted,
                                    write(st.insert_rating, k, row));
      if (inserted) {
        ++result.inserted;
        expect_stored = false;
        continue;
      }
      // A stored rating (for a new id only if the file was changed behind
      // the Store's back): read it, then replace it.
      RBMREC_STORE_ASSIGN_OR_RETURN(previous, read(k));
    }
    expect_stored = true;
    RBMREC_STORE_ASSIGN_OR_RETURN(bool updated,
                                  write(st.update_rating, k, row));
    if (!updated || !previous.has_value()) {
      return absl::InternalError(absl::StrFormat(
          "database '%s': row %d: the rating of (%s, %s) neither inserted nor "
          "updated",
          path_, k.row, row.user, row.item));
    }
    result.previous[k.row] = previous;
    ++result.replaced;
  }
  RBMREC_STORE_RETURN_IF_ERROR(txn.Commit());
  user_undo.Commit();
  item_undo.Commit();
  return result;
}

absl::StatusOr<absl::flat_hash_map<std::string, int64_t>::iterator>
SqliteStore::FindUser(std::string_view user) {
  auto u = user_idx_.find(AbslView(user));
  if (u == user_idx_.end()) {
    return absl::NotFoundError(absl::StrCat("unknown user: ", AbslView(user)));
  }
  return u;
}

absl::StatusOr<int64_t> SqliteStore::DeleteRatings(
    std::string_view user, absl::Span<const std::string> items) {
  RBMREC_STORE_RETURN_IF_ERROR(CheckWritable());
  absl::MutexLock lock(&writer_.mu);
  RBMREC_STORE_ASSIGN_OR_RETURN(auto u, FindUser(user));
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

absl::StatusOr<int64_t> SqliteStore::DeleteUser(std::string_view user) {
  RBMREC_STORE_RETURN_IF_ERROR(CheckWritable());
  absl::MutexLock lock(&writer_.mu);
  RBMREC_STORE_ASSIGN_OR_RETURN(auto u, FindUser(user));
  Connection& conn = *writer_.conn;
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * del_ratings,
      conn.Prepare("DELETE FROM ratings WHERE user_idx=?1"));
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * del_views,
      conn.Prepare("DELETE FROM views WHERE user_idx=?1"));
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
  for (sqlite3_stmt* del : {del_views, del_user}) {
    Stmt s(conn, del);
    s.BindInt(1, u->second);
    RBMREC_STORE_RETURN_IF_ERROR(s.Run());
  }
  RBMREC_STORE_RETURN_IF_ERROR(txn.Commit());
  user_idx_.erase(u);
  return deleted;
}

absl::StatusOr<std::vector<std::string>> SqliteStore::ListUsers(
    std::string_view after, int limit) const {
  absl::MutexLock lock(&reader_->mu);
  Connection& conn = *reader_->conn;
  // ext_id's UNIQUE index (BINARY collation: byte order) walks the page.
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * stmt,
      conn.Prepare("SELECT ext_id FROM users WHERE ext_id > ?1 "
                   "ORDER BY ext_id LIMIT ?2"));
  Txn txn(conn);
  RBMREC_STORE_RETURN_IF_ERROR(txn.Begin(Txn::kRead));
  std::vector<std::string> out;
  {
    Stmt s(conn, stmt);
    s.BindText(1, after);
    s.BindInt(2, limit);
    while (true) {
      RBMREC_STORE_ASSIGN_OR_RETURN(bool row, s.Next());
      if (!row) break;
      out.emplace_back(ColumnText(stmt, 0));
    }
  }
  RBMREC_STORE_RETURN_IF_ERROR(txn.Commit());
  return out;
}

absl::Status SqliteStore::ReadUserRows(
    std::string_view user, const char* list_sql,
    const std::function<void(sqlite3_stmt*)>& add) const {
  absl::MutexLock lock(&reader_->mu);
  Connection& conn = *reader_->conn;
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * find_user,
      conn.Prepare("SELECT idx FROM users WHERE ext_id=?1"));
  RBMREC_STORE_ASSIGN_OR_RETURN(sqlite3_stmt * list, conn.Prepare(list_sql));
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
  {
    Stmt s(conn, list);
    s.BindInt(1, user_idx);
    while (true) {
      RBMREC_STORE_ASSIGN_OR_RETURN(bool row, s.Next());
      if (!row) break;
      add(list);
    }
  }
  return txn.Commit();
}

absl::StatusOr<std::vector<UserRating>> SqliteStore::GetUserRatings(
    std::string_view user) const {
  std::vector<UserRating> out;
  RBMREC_STORE_RETURN_IF_ERROR(
      ReadUserRows(user,
                   "SELECT i.ext_id, r.rating, r.ts FROM ratings r "
                   "JOIN items i ON i.idx = r.item_idx "
                   "WHERE r.user_idx=?1 ORDER BY r.item_idx",
                   [&out](sqlite3_stmt* list) {
                     out.push_back(UserRating{std::string(ColumnText(list, 0)),
                                              sqlite3_column_double(list, 1),
                                              sqlite3_column_int64(list, 2)});
                   }));
  return out;
}

absl::StatusOr<std::vector<std::string>> SqliteStore::GetUserViews(
    std::string_view user) const {
  std::vector<std::string> out;
  RBMREC_STORE_RETURN_IF_ERROR(ReadUserRows(
      user,
      "SELECT i.ext_id FROM views v JOIN items i ON i.idx = v.item_idx "
      "WHERE v.user_idx=?1 ORDER BY v.item_idx",
      [&out](sqlite3_stmt* list) { out.emplace_back(ColumnText(list, 0)); }));
  return out;
}

namespace {

// ReadSnapshot's work, on `conn`.
absl::StatusOr<Snapshot> ReadSnapshotOn(Connection& conn) {
  RBMREC_STORE_ASSIGN_OR_RETURN(sqlite3_stmt * count,
                                conn.Prepare("SELECT count(*) FROM ratings"));
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * ratings,
      conn.Prepare("SELECT user_idx, item_idx, rating FROM ratings "
                   "ORDER BY user_idx, item_idx"));
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * views, conn.Prepare("SELECT user_idx, item_idx FROM views "
                                         "ORDER BY user_idx, item_idx"));
  Txn txn(conn);
  RBMREC_STORE_RETURN_IF_ERROR(txn.Begin(Txn::kRead));
  internal::SnapshotBuilder snap(conn.path());
  for (const bool users : {true, false}) {
    RBMREC_STORE_ASSIGN_OR_RETURN(
        sqlite3_stmt * names, conn.Prepare(internal::SnapshotNamesSql(users)));
    Stmt s(conn, names);
    while (true) {
      RBMREC_STORE_ASSIGN_OR_RETURN(bool row, s.Next());
      if (!row) break;
      RBMREC_STORE_RETURN_IF_ERROR(snap.AddName(users, s.Int(0), s.Text(1)));
    }
  }
  {
    Stmt s(conn, count);
    RBMREC_STORE_ASSIGN_OR_RETURN(bool row, s.Next());
    if (row) snap.ReserveRatings(s.Int(0));
  }
  {
    // Foreign keys guarantee both indices exist; AddRating checks anyway
    // rather than index out of bounds on a file edited by hand.
    Stmt s(conn, ratings);
    while (true) {
      RBMREC_STORE_ASSIGN_OR_RETURN(bool row, s.Next());
      if (!row) break;
      RBMREC_STORE_RETURN_IF_ERROR(snap.AddRating(
          s.Int(0), s.Int(1), sqlite3_column_double(ratings, 2)));
    }
  }
  {
    Stmt s(conn, views);
    while (true) {
      RBMREC_STORE_ASSIGN_OR_RETURN(bool row, s.Next());
      if (!row) break;
      RBMREC_STORE_RETURN_IF_ERROR(snap.AddView(s.Int(0), s.Int(1)));
    }
  }
  RBMREC_STORE_RETURN_IF_ERROR(txn.Commit());
  return snap.Take();
}

}  // namespace

absl::StatusOr<Snapshot> SqliteStore::ReadSnapshot() const {
  if (memory()) {
    absl::MutexLock lock(&writer_.mu);
    return ReadSnapshotOn(*writer_.conn);
  }
  RBMREC_STORE_ASSIGN_OR_RETURN(std::unique_ptr<Connection> conn,
                                OpenLongReader());
  return ReadSnapshotOn(*conn);
}

absl::StatusOr<Stats> SqliteStore::GetStats() const {
  absl::MutexLock lock(&reader_->mu);
  Connection& conn = *reader_->conn;
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * stmt,
      conn.Prepare("SELECT (SELECT count(*) FROM users), "
                   "(SELECT count(*) FROM items), "
                   "(SELECT count(*) FROM ratings), "
                   "(SELECT count(*) FROM models), "
                   "(SELECT page_count FROM pragma_page_count()), "
                   "(SELECT page_size FROM pragma_page_size()), "
                   "(SELECT count(*) FROM views)"));
  Txn txn(conn);
  RBMREC_STORE_RETURN_IF_ERROR(txn.Begin(Txn::kRead));
  Stats stats;
  {
    Stmt s(conn, stmt);
    RBMREC_STORE_ASSIGN_OR_RETURN(bool row, s.Next());
    if (!row) return absl::InternalError("no row from count query");
    stats.users = s.Int(0);
    stats.items = s.Int(1);
    stats.ratings = s.Int(2);
    stats.model_versions = s.Int(3);
    stats.views = s.Int(6);
    if (!memory()) stats.database_file_bytes = s.Int(4) * s.Int(5);
  }
  {
    internal::SqliteModelSql sql(conn);
    RBMREC_STORE_ASSIGN_OR_RETURN(stats.active_model_version,
                                  internal::ActiveModelVersion(sql));
  }
  RBMREC_STORE_RETURN_IF_ERROR(txn.Commit());
  if (!memory()) {
    std::error_code ec;
    const std::uintmax_t wal = std::filesystem::file_size(path_ + "-wal", ec);
    if (!ec) stats.wal_bytes = static_cast<int64_t>(wal);
  }
  stats.database_bytes = stats.database_file_bytes + stats.wal_bytes;
  stats.database_max_bytes = options_.max_bytes;
  return stats;
}

}  // namespace rbmrec::store
