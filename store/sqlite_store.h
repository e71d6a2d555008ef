#ifndef RBMREC_STORE_SQLITE_STORE_H_
#define RBMREC_STORE_SQLITE_STORE_H_

// The SQLite implementation of Store (store/store.h): the embedded default.
// Queries in sqlite_store.cc, the model versions' SQL in sqlite_models.cc
// (their logic, shared with PostgreSQL, in model_versions.cc), schema and
// migrations in schema.cc, connections, statements, transactions and error
// mapping in sqlite_db.cc.
//
// Connections. A file database gets a write connection guarded by one mutex
// (every write is serialized on it) and a read connection guarded by another
// for the short reads (GetUserRatings, GetTitles, GetStats, ListModels,
// ActiveModelVersion). The long reads, ReadSnapshot and LoadModelBlob, each
// open a connection of their own for the call, so a point read never waits
// behind a training snapshot or a model blob. In WAL mode a reader sees the
// last committed state and never blocks the writer, nor the writer a reader.
// ":memory:" uses ONE connection for everything (a second connection would
// open a different, empty database), so there all calls serialize on one
// mutex; a read-only store uses one connection for the short reads and fresh
// ones for the long reads.
//
// Indices are the `idx` INTEGER PRIMARY KEY AUTOINCREMENT columns.
//
// Space. Files are auto_vacuum=INCREMENTAL: deleting model versions
// (DeleteModel, PruneModels) gives their pages back to the file system in the
// same call (the file shrinks once the WAL is checkpointed, which those calls
// attempt). Files created by older builds are converted by one VACUUM at
// their first read-write Open (it rewrites the file: it needs free disk space
// and time about proportional to its size). The WAL file is truncated to at
// most 64 MiB after a checkpoint. StoreOptions.max_bytes caps the file size.
//
// Durability. Files use journal_mode=WAL. A write method that returned OK has
// committed: its data survives a crash of the process (kill -9) with either
// synchronous setting, since the commit has been written to the WAL file
// before the call returns. With synchronous_full (the default) the WAL is also
// fsync()ed at every commit, so the write survives power loss / an OS crash
// too; with NORMAL the last commits before a power loss may be lost (the
// database stays consistent). ":memory:" is not durable.
//
// Errors (beyond store.h): PermissionDenied / FailedPrecondition / DataLoss
// name the file path and SQLite's message; Unavailable "... is locked"
// (DATABASE_LOCKED) when another process holds the write lock; an I/O error
// is Unavailable; ResourceExhausted without reason for a value larger than
// SQLite accepts.
//
// Options: all of StoreOptions apply.
//
// One writer. A read-write Store holds an exclusive lock (flock) on the
// file "<path>.lock" beside the database for its lifetime, and writes its
// process id, host and start time into it: a second read-write Open of the
// same database, by this process or another, fails with FailedPrecondition
// (reason DATABASE_IN_USE) naming that process. The lock goes with the
// process (also on kill -9); the file stays and is reused. Other processes
// (the sqlite3 shell, backups, another read-only Store) may read the file
// at any time.

#include <cstdint>
#include <functional>
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
#include "store/store.h"

struct sqlite3_stmt;

namespace rbmrec::store {

namespace internal {
class Connection;
}  // namespace internal

class SqliteStore final : public Store {
 public:
  // Opens (creating if needed, unless options.read_only) the database at
  // `path`, or a private in-memory database when path is ":memory:". Sets
  // journal_mode=WAL (files), busy_timeout, synchronous and foreign_keys,
  // migrates the schema to kSchemaVersion in one transaction, converts an
  // older file to auto_vacuum=INCREMENTAL (one VACUUM, see "Space" above;
  // when the disk has no room for it the store opens anyway and retries at
  // the next Open), applies max_bytes and, with options.check_integrity,
  // runs PRAGMA quick_check. A read-write file database first takes the lock
  // file (see "One writer").
  // REQUIRES: path is not empty; options.busy_timeout_ms >= 0;
  // options.max_bytes >= 0.
  // Errors: InvalidArgument for an empty path, a negative timeout or
  // max_bytes, or read_only with ":memory:"; FailedPrecondition "database
  // schema version N is newer than this build supports (M)"; PermissionDenied /
  // FailedPrecondition / DataLoss when the file cannot be opened (the message
  // names the path and SQLite's message); DataLoss "... is damaged" when
  // quick_check finds a problem; FailedPrecondition (DATABASE_IN_USE) when
  // another Store holds the lock file; PermissionDenied when the directory
  // is not writable; Unavailable when a needed migration or VACUUM waits
  // longer than the busy timeout for another process's lock.
  static absl::StatusOr<std::unique_ptr<SqliteStore>> Open(
      const std::string& path, const StoreOptions& options = {});

  // Closes the connections (checkpointing the WAL into the database file).
  ~SqliteStore() override;

  absl::StatusOr<UpsertResult> UpsertRatings(
      absl::Span<const RatingRow> rows) override;
  absl::StatusOr<int64_t> DeleteRatings(
      std::string_view user, absl::Span<const std::string> items) override;
  absl::StatusOr<int64_t> DeleteUser(std::string_view user) override;
  absl::Status PutItems(absl::Span<const ItemRow> items) override;
  absl::Status SetItemsHidden(absl::Span<const std::string> items,
                              bool hidden) override;
  absl::StatusOr<std::vector<CatalogueRow>> ReadCatalogue() const override;
  absl::StatusOr<std::vector<std::string>> GetTitles(
      absl::Span<const std::string> items) const override;
  absl::StatusOr<std::optional<ItemRow>> GetItem(
      std::string_view item) const override;
  absl::StatusOr<std::vector<UserRating>> GetUserRatings(
      std::string_view user) const override;
  absl::StatusOr<std::vector<std::string>> GetUserViews(
      std::string_view user) const override;
  absl::StatusOr<std::vector<std::string>> ListUsers(std::string_view after,
                                                     int limit) const override;
  absl::StatusOr<Snapshot> ReadSnapshot() const override;
  absl::StatusOr<Stats> GetStats() const override;
  absl::StatusOr<int64_t> InsertModel(const ModelInfo& meta,
                                      std::string_view blob,
                                      bool activate) override;
  absl::Status ActivateModel(int64_t version) override;
  absl::StatusOr<std::vector<ModelInfo>> ListModels() const override;
  absl::StatusOr<std::string> LoadModelBlob(int64_t version) const override;
  absl::StatusOr<std::optional<int64_t>> ActiveModelVersion() const override;
  absl::StatusOr<std::vector<int64_t>> ActivationHistory() const override;
  absl::Status ReplaceModelBlob(int64_t version,
                                std::string_view blob) override;
  absl::StatusOr<std::string> InitSetting(std::string_view key,
                                          std::string_view value) override;
  absl::Status PinModel(int64_t version, bool pinned) override;
  absl::StatusOr<int64_t> DeleteModel(int64_t version) override;
  absl::StatusOr<PruneResult> PruneModels(
      const RetentionPolicy& policy) override;

 private:
  // One connection and the mutex that serializes its use.
  struct Guarded {
    absl::Mutex mu;
    std::unique_ptr<internal::Connection> conn ABSL_GUARDED_BY(mu);
  };

  SqliteStore(std::string path, const StoreOptions& options);

  // Loads the ext_id -> idx caches from the write connection.
  absl::Status LoadCaches() ABSL_EXCLUSIVE_LOCKS_REQUIRED(writer_.mu);

  // Opens a connection of its own for one long read (file databases only).
  absl::StatusOr<std::unique_ptr<internal::Connection>> OpenLongReader() const;

  // Whether this is a ":memory:" database (one connection for everything).
  bool memory() const;

  // FailedPrecondition when the store is read-only.
  absl::Status CheckWritable() const;
  // On the read connection, in one read transaction: runs `list_sql` (with
  // ?1 the idx of `user`) and calls `add` with the statement at each row.
  // NotFound ("unknown user: ...") when the user is unknown.
  absl::Status ReadUserRows(
      std::string_view user, const char* list_sql,
      const std::function<void(sqlite3_stmt*)>& add) const;
  // The row of a stored user, NotFound ("unknown user: ...") otherwise.
  absl::StatusOr<absl::flat_hash_map<std::string, int64_t>::iterator> FindUser(
      std::string_view user) ABSL_EXCLUSIVE_LOCKS_REQUIRED(writer_.mu);

  const std::string path_;
  const StoreOptions options_;
  // The lock file's descriptor (flock held), -1 when none; closed last.
  int lock_fd_ = -1;

  // All writes; also the short reads of ":memory:" and read-only stores, and
  // the long reads of ":memory:".
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

#endif  // RBMREC_STORE_SQLITE_STORE_H_
