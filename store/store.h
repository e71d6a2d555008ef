#ifndef RBMREC_STORE_STORE_H_
#define RBMREC_STORE_STORE_H_

// The SQLite store: users, items, ratings and trained model versions. This is
// the only code in rbmrec that speaks SQL.
//
// Connections. A file database gets two SQLite connections: a write
// connection guarded by one mutex (every write is serialized on it) and a
// read connection guarded by another, so a long read (ReadSnapshot) runs
// beside writes: in WAL mode a reader sees the last committed state and never
// blocks the writer, nor the writer the reader. ":memory:" uses ONE connection
// for both (a second connection would open a different, empty database), so
// there reads and writes serialize on the same mutex.
//
// Indices. Users and items have stable indices in the database (the `idx`
// INTEGER PRIMARY KEY AUTOINCREMENT columns, starting at 1), never reused,
// even after deletion. The API speaks external string ids only; the one place
// where indices appear is Snapshot, whose indices are positions in its own
// `users` / `items` vectors (see Snapshot).
//
// Durability. Files use journal_mode=WAL. A write method that returned OK has
// committed: its data survives a crash of the process (kill -9) with either
// synchronous setting, since the commit has been written to the WAL file
// before the call returns. With synchronous_full (the default) the WAL is also
// fsync()ed at every commit, so the write survives power loss / an OS crash
// too; with NORMAL the last commits before a power loss may be lost (the
// database stays consistent). Every write method is all-or-nothing: on error
// nothing of the call is stored. ":memory:" is not durable.
//
// Errors. Every method returns absl::Status; codes used throughout:
//   InvalidArgument     a malformed argument (the message names the row and
//                       field);
//   NotFound            an unknown user / model version where one is needed;
//   FailedPrecondition  the store is read-only, or the schema version of the
//                       file is newer than this build (or, read-only, older),
//                       or the path cannot be opened for a reason other than
//                       permissions (missing directory, a path component that
//                       is a regular file, ...);
//   PermissionDenied    the file or its directory is not writable / readable;
//   Unavailable         the database is locked by another connection or
//                       process beyond busy_timeout_ms ("... is locked"), or
//                       an I/O error;
//   ResourceExhausted   disk full, or a value larger than SQLite accepts;
//   DataLoss            the file is not a database or is corrupt;
//   Internal            anything else SQLite reports.
// Messages name the database path and include SQLite's own message.
//
// The Store assumes it is the only WRITER of its database file: it caches
// the ext_id -> idx maps of users and items in memory. Other processes (the
// sqlite3 shell, backups, another read-only Store) may read the file at any
// time.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"

namespace rbmrec::store {

// The schema version this build creates and understands (PRAGMA user_version).
inline constexpr int kSchemaVersion = 1;

// Ids (users and items) are at most this many bytes.
inline constexpr size_t kMaxIdBytes = 256;

struct StoreOptions {
  // How long a write (or Open's migration) waits for a lock held by another
  // connection / process before failing with Unavailable. Default 5 s.
  int busy_timeout_ms = 5000;

  // true: PRAGMA synchronous=FULL, the WAL is fsync()ed at every commit, so a
  // committed write survives power loss. false: synchronous=NORMAL, faster
  // commits that still survive a crash of the process but may lose the last
  // commits on power loss. Default true.
  bool synchronous_full = true;

  // Open the existing database read-only: no file is created, no migration
  // runs (the file must already have kSchemaVersion) and every write method
  // returns FailedPrecondition. Not allowed with ":memory:". Default false.
  bool read_only = false;
};

// One rating to upsert. `timestamp` is opaque to the store (the service uses
// Unix seconds); 0 means unknown.
struct RatingRow {
  std::string user;
  std::string item;
  double rating = 0.0;
  int64_t timestamp = 0;
};

struct UpsertResult {
  int64_t inserted = 0;   // rows that created a new (user, item) rating
  int64_t replaced = 0;   // rows that replaced an existing rating, including
                          // one stored earlier in the same batch
  int64_t new_users = 0;  // users created by the batch
  int64_t new_items = 0;  // items created by the batch
  // One entry per input row, in input order: the (user, item)'s rating
  // before that row was applied (a rating stored by an earlier row of the
  // same batch counts), nullopt when it had none.
  std::vector<std::optional<double>> previous;
};

// Item metadata. An empty title / attributes_json is stored as NULL ("none").
struct ItemRow {
  std::string item;
  std::string title;
  std::string attributes_json;  // a JSON object, or empty
};

struct UserRating {
  std::string item;
  double rating = 0.0;
  int64_t timestamp = 0;
};

// A consistent copy of all users, items and ratings, for training.
struct Snapshot {
  // External ids of every existing user / item row (including users without
  // ratings and items known only from PutItems), in idx order. Positions in
  // these vectors equal idx-1 as long as nothing was ever deleted.
  std::vector<std::string> users;
  std::vector<std::string> items;
  struct Row {
    int32_t user = 0;  // position in `users`
    int32_t item = 0;  // position in `items`
    double rating = 0.0;
  };
  // Sorted by (user, item); each pair at most once.
  std::vector<Row> ratings;
};

struct Stats {
  int64_t users = 0;    // user rows (a user stays until DeleteUser)
  int64_t items = 0;    // item rows
  int64_t ratings = 0;  // rating rows
  std::optional<int64_t> active_model_version;
  int64_t model_versions = 0;  // stored model versions
  int64_t database_bytes = 0;  // pages in use x page size; 0 for ":memory:"
};

// Which model versions PruneModels keeps: the active one, every pinned one,
// the newest keep_full of kind "full" and the newest keep_online of kind
// "online" (other kinds are kept as well).
struct RetentionPolicy {
  int keep_full = 3;
  int keep_online = 2;
};

struct PruneResult {
  std::vector<int64_t> deleted;  // versions deleted, newest first
  int64_t freed_bytes = 0;       // sum of their size_bytes
};

// One stored model version (its blob is read separately by LoadModelBlob).
struct ModelInfo {
  int64_t version = 0;          // assigned by InsertModel, increasing, >= 1
  int64_t created_unix_ms = 0;  // 0 given to InsertModel means "now"
  std::string kind;             // e.g. "rbm"
  int64_t n_users = 0;
  int64_t n_items = 0;
  int64_t n_ratings = 0;
  std::string metrics_json;  // a JSON object, or empty
  int64_t size_bytes = 0;    // size of the blob; set by InsertModel
  bool active = false;       // whether this is the active version
  bool pinned = false;       // never removed by PruneModels(RetentionPolicy)
};

namespace internal {
class Connection;
}  // namespace internal

// Thread-safe: every method may be called concurrently from any thread.
// Writes are serialized by an internal mutex; reads run in parallel with
// writes on a separate connection (file databases), see the top of this file.
class Store {
 public:
  // Opens (creating if needed, unless options.read_only) the database at
  // `path`, or a private in-memory database when path is ":memory:". Sets
  // journal_mode=WAL (files), busy_timeout, synchronous and foreign_keys, and
  // migrates the schema to kSchemaVersion in one transaction.
  // REQUIRES: path is not empty; options.busy_timeout_ms >= 0.
  // Errors: InvalidArgument for an empty path, a negative timeout or
  // read_only with ":memory:"; FailedPrecondition "database schema version N
  // is newer than this build supports (M)"; PermissionDenied /
  // FailedPrecondition / DataLoss when the file cannot be opened (the message
  // names the path and SQLite's message); Unavailable when a needed migration
  // waits longer than the busy timeout for another process's lock.
  static absl::StatusOr<std::unique_ptr<Store>> Open(
      const std::string& path, const StoreOptions& options = {});

  // Closes the connections (checkpointing the WAL into the database file).
  // REQUIRES: no other thread is using the Store.
  ~Store();

  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // --- Ratings -------------------------------------------------------------

  // Upserts `rows` in ONE transaction: the whole batch is stored, or nothing.
  // A row for an existing (user, item) replaces its rating and timestamp; so
  // does a later row of the same batch (last wins). Unknown users and items
  // are created. Validates shape only (the caller checks the rating scale):
  // ids non-empty and at most kMaxIdBytes bytes, rating finite.
  // Thread-safe (serialized with the other writes).
  // Errors: InvalidArgument naming the row index and field ("row 17: empty
  // item id") with nothing stored; FailedPrecondition if read-only;
  // Unavailable "... is locked ..." if another process holds the write lock
  // beyond the busy timeout; others as listed at the top of this file.
  absl::StatusOr<UpsertResult> UpsertRatings(absl::Span<const RatingRow> rows);

  // Deletes the ratings of `user` for `items` (unknown items and items the
  // user did not rate are skipped) in one transaction and returns how many
  // ratings were deleted. The user row stays, even with no rating left.
  // Thread-safe. Errors: NotFound if `user` is unknown; FailedPrecondition if
  // read-only; Unavailable when locked.
  absl::StatusOr<int64_t> DeleteRatings(std::string_view user,
                                        absl::Span<const std::string> items);

  // Deletes all ratings of `user` and the user row in one transaction and
  // returns the number of ratings deleted. The user's idx is never reused; an
  // upsert for the same ext id later creates a new user.
  // Thread-safe. Errors: NotFound if `user` is unknown; FailedPrecondition if
  // read-only; Unavailable when locked.
  absl::StatusOr<int64_t> DeleteUser(std::string_view user);

  // --- Items ---------------------------------------------------------------

  // Creates or updates items in one transaction (all or nothing): title and
  // attributes are both replaced by the given values (empty = none).
  // Thread-safe. Errors: InvalidArgument "item 3: ..." for an empty or too
  // long id or attributes_json that is neither empty nor a JSON object;
  // FailedPrecondition if read-only; Unavailable when locked.
  absl::Status PutItems(absl::Span<const ItemRow> items);

  // Returns the titles of `items`, in the same order: "" for an unknown item
  // or one without a title. Thread-safe (read connection).
  absl::StatusOr<std::vector<std::string>> GetTitles(
      absl::Span<const std::string> items) const;

  // --- Reads ---------------------------------------------------------------

  // Returns the ratings of `user` sorted by item idx (the order items first
  // appeared). Thread-safe (read connection). Errors: NotFound if unknown.
  absl::StatusOr<std::vector<UserRating>> GetUserRatings(
      std::string_view user) const;

  // Reads all users, items and ratings in one read transaction: a consistent
  // state that includes each committed write entirely or not at all.
  // Thread-safe; on a file database it does not block writers.
  absl::StatusOr<Snapshot> ReadSnapshot() const;

  // Counts rows, consistently (one statement). Thread-safe.
  absl::StatusOr<Stats> GetStats() const;

  // --- Model versions ------------------------------------------------------

  // Stores a new model version with `blob` (meta.version, meta.size_bytes and
  // meta.active are ignored; created_unix_ms 0 means now) and, if `activate`,
  // makes it the active version, all in ONE transaction. Returns the version.
  // Thread-safe. Errors: InvalidArgument if metrics_json is neither empty nor
  // a JSON object; ResourceExhausted if the blob is larger than SQLite's limit
  // (1 GB); FailedPrecondition if read-only; Unavailable when locked.
  absl::StatusOr<int64_t> InsertModel(const ModelInfo& meta,
                                      std::string_view blob, bool activate);

  // Makes `version` the active model version. Thread-safe.
  // Errors: NotFound if there is no such version; FailedPrecondition if
  // read-only; Unavailable when locked.
  absl::Status ActivateModel(int64_t version);

  // Lists all model versions, newest (highest version) first, with `active`
  // set on the active one. Thread-safe.
  absl::StatusOr<std::vector<ModelInfo>> ListModels() const;

  // Returns the blob of `version`. Thread-safe.
  // Errors: NotFound if there is no such version.
  absl::StatusOr<std::string> LoadModelBlob(int64_t version) const;

  // Returns the active version, or nullopt when none was activated yet.
  // Thread-safe.
  absl::StatusOr<std::optional<int64_t>> ActiveModelVersion() const;

  // Deletes all model versions but the `keep_last` newest, never the active
  // one (which is kept in addition to them). Thread-safe.
  // REQUIRES: keep_last >= 0 (else InvalidArgument).
  // Errors: FailedPrecondition if read-only; Unavailable when locked.
  absl::Status PruneModels(int keep_last);

  // Pins (or unpins) `version`. Thread-safe. Errors: NotFound if there is no
  // such version; FailedPrecondition if read-only; Unavailable when locked.
  absl::Status PinModel(int64_t version, bool pinned);

  // Deletes `version` (pinned or not) and returns its size_bytes. Thread-safe.
  // Errors: NotFound if there is no such version; FailedPrecondition for the
  // active version or a read-only store; Unavailable when locked.
  absl::StatusOr<int64_t> DeleteModel(int64_t version);

  // Deletes every version `policy` does not keep, in one transaction.
  // Thread-safe. REQUIRES keep_full >= 0 and keep_online >= 0 (else
  // InvalidArgument). Errors: FailedPrecondition if read-only; Unavailable
  // when locked.
  absl::StatusOr<PruneResult> PruneModels(const RetentionPolicy& policy);

 private:
  // One connection and the mutex that serializes its use.
  struct Guarded {
    absl::Mutex mu;
    std::unique_ptr<internal::Connection> conn ABSL_GUARDED_BY(mu);
  };

  Store(std::string path, const StoreOptions& options);

  // Loads the ext_id -> idx caches from the write connection.
  absl::Status LoadCaches() ABSL_EXCLUSIVE_LOCKS_REQUIRED(writer_.mu);

  // FailedPrecondition when the store is read-only.
  absl::Status CheckWritable() const;

  const std::string path_;
  const StoreOptions options_;

  // All writes (and, for ":memory:" or read-only stores, all reads).
  mutable Guarded writer_;
  // Reads of a file database; unused (conn null) for ":memory:"/read-only.
  mutable Guarded reader_storage_;
  // &reader_storage_ or &writer_; set once in Open.
  Guarded* reader_ = nullptr;

  // ext_id -> idx of every user / item row; updated inside write
  // transactions and restored if the transaction fails.
  absl::flat_hash_map<std::string, int64_t> user_idx_
      ABSL_GUARDED_BY(writer_.mu);
  absl::flat_hash_map<std::string, int64_t> item_idx_
      ABSL_GUARDED_BY(writer_.mu);
};

}  // namespace rbmrec::store

#endif  // RBMREC_STORE_STORE_H_
