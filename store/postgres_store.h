#ifndef RBMREC_STORE_POSTGRES_STORE_H_
#define RBMREC_STORE_POSTGRES_STORE_H_

// The PostgreSQL implementation of Store (store/store.h), through libpq's C
// API. Queries in postgres_store.cc, the model versions' SQL in pg_models.cc
// (their logic, shared with SQLite, in model_versions.cc), schema and
// migrations in pg_schema.cc, connections and error mapping in pg_db.cc.
// Store::Open picks it for a path that starts with "postgresql://" or
// "postgres://": a libpq connection URI, e.g.
//   postgresql://rbmrec@db.example.com/rbmrec
//   postgresql:///rbmrec?host=/run/postgresql        (a Unix socket)
// Put the password in ~/.pgpass or PGPASSWORD rather than in the URI: the
// server logs the --db value. The database must exist; the tables are created
// at the first read-write Open.
//
// Schema. Tables users, items, ratings, models, meta (as in SQLite) and
// schema_version (one row: the version, kPostgresSchemaVersion). Open creates
// or migrates them in one transaction, under a transaction-level advisory
// lock, so two processes opening the same new database do not race. Indices
// are identity columns (sequences): increasing and never reused. Model blobs
// are bytea with STORAGE EXTERNAL (out of line, not compressed: model weights
// do not compress, and reading the other columns never touches the blob).
// ratings has no FOREIGN KEY constraints (PostgreSQL checks each with a query
// per row, which made imports about twice as slow); the store writes only
// indices it has read or created in the same transaction.
//
// UpsertRatings runs in one transaction: the batch's users and items are
// resolved to indices in SQL (missing ones created with one INSERT ...
// SELECT FROM unnest each, indices in order of first appearance; users are
// locked FOR KEY SHARE until the commit), then one INSERT ... ON CONFLICT DO
// UPDATE writes every distinct (user, item) pair of the batch (its last
// row) and returns the rating each replaced pair had. A batch costs a fixed
// number of round trips, whatever its size. No id is cached in memory, so
// several processes may write the same database (below).
//
// Sharing (several rbmrec-server replicas on one database). Shared() is
// true. Concurrent writers are safe: ids are resolved inside each write's
// transaction; a DeleteUser deletes the user row first, so an upsert of the
// same user either commits before it (and its ratings are deleted too) or
// creates the user anew after it; rows are written in (user, item) order,
// so two batches never deadlock on ratings (new ids created concurrently by
// two batches in different orders can; PostgreSQL then fails one of them
// with Unavailable DATABASE_LOCKED and nothing of it is stored). Every
// write announces its changes inside its transaction (NOTIFY on channel
// rbmrec_changes, payloads of store/change_feed.h; model activations on
// rbmrec_models), delivered when it commits; Subscribe() LISTENs on its own
// connection. TryLead() takes a session-level advisory lock on its own
// connection and records the address in meta (key leader_address); the
// lock goes when the connection does (the process died, the lease was
// destroyed, or the network dropped and the server noticed: PostgreSQL's
// tcp_keepalives_* settings bound that time).
//
// Connections. One writer connection guarded by a mutex (every write is
// serialized on it, as in SQLite) and a small pool of reader connections
// (up to kMaxIdleReaders kept open, more opened on demand) for the reads, so
// a long read (ReadSnapshot, LoadModelBlob) never blocks a point read or a
// write. ReadSnapshot runs in one REPEATABLE READ READ ONLY transaction and
// reads the ratings through a cursor, 100,000 rows per round trip; every
// other read is a single statement (a consistent snapshot in itself).
//
// Reconnect. A connection that broke (the server restarted, the network
// dropped) makes the call that saw it fail with Unavailable; the next call
// opens a new connection, so the store recovers without a restart once the
// database is back.
//
// Durability. A write that returned OK has been committed by the server: it
// survives a crash of rbmrec and, with synchronous_full (synchronous_commit
// on, the default), of the database server too. With synchronous_full false
// (synchronous_commit off) a crash of the database server may lose the last
// commits (the database stays consistent).
//
// Options (StoreOptions):
//   busy_timeout_ms   honoured as lock_timeout: a write that waits longer for
//                     a row or table lock held by another session fails with
//                     Unavailable, reason DATABASE_LOCKED;
//   synchronous_full  honoured as synchronous_commit (see Durability);
//   read_only         honoured: the connections use
//                     default_transaction_read_only, no schema is created or
//                     migrated (the database must already have
//                     kPostgresSchemaVersion), every write method returns
//                     FailedPrecondition;
//   max_bytes         not supported (the server manages its own space; use
//                     quotas / tablespaces there): a non-zero value makes
//                     Open fail with InvalidArgument;
//   check_integrity   accepted, no check at Open: PostgreSQL verifies pages
//                     as it reads them (data checksums when the cluster has
//                     them) and reports damage as DataLoss (XX001/XX002).
//
// Errors (SQLSTATE classes, beyond store.h): connection failures (class 08,
// 57P01..57P03 server shutting down / starting) -> Unavailable; 53100
// disk_full -> ResourceExhausted STORAGE_FULL, other class 53 and 54 ->
// ResourceExhausted; 55P03 lock_not_available, 40001 serialization failure,
// 40P01 deadlock -> Unavailable DATABASE_LOCKED; class 23 (constraints) ->
// FailedPrecondition (as SQLite's CONSTRAINT); 42501 / class 28 ->
// PermissionDenied; 25006 (read-only transaction) and 3D000 (no such
// database) -> FailedPrecondition; XX001 / XX002 -> DataLoss; 57014 ->
// Cancelled; anything else -> Internal. Messages name the URI without its
// password.
//
// Stats.database_bytes is pg_database_size(current_database()).
//

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
#include "store/store.h"

namespace rbmrec::store {

// The PostgreSQL schema version this build creates and understands (the row
// of table schema_version).
inline constexpr int kPostgresSchemaVersion = 4;

namespace internal {
class PgConn;
class PgResult;
struct PgParam;
}  // namespace internal

class PostgresStore final : public Store {
 public:
  // Reader connections kept open between calls.
  static constexpr int kMaxIdleReaders = 4;

  // Connects to the database at `uri` (a libpq connection URI), configures
  // the connection (lock_timeout, synchronous_commit, read-only) and creates
  // or migrates the schema (read-write only).
  // Errors: InvalidArgument for a uri that is not a PostgreSQL URI, a
  // negative busy_timeout_ms, or max_bytes != 0; Unavailable when the server
  // cannot be reached; PermissionDenied when authentication fails;
  // FailedPrecondition when the database does not exist, its schema version
  // is newer than this build's (or, read-only, not this build's).
  static absl::StatusOr<std::unique_ptr<PostgresStore>> Open(
      const std::string& uri, const StoreOptions& options = {});

  ~PostgresStore() override;

  // The connection URI given to Open.
  const std::string& uri() const { return uri_; }

  // A new connection to the same database, configured like the store's own.
  absl::StatusOr<std::unique_ptr<internal::PgConn>> OpenConnection() const;

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

  bool Shared() const override { return true; }
  absl::StatusOr<std::unique_ptr<ChangeFeed>> Subscribe() const override;
  absl::StatusOr<std::unique_ptr<LeaderLease>> TryLead(
      std::string_view address) override;
  absl::StatusOr<std::string> LeaderAddress() const override;

 private:
  class ReaderLease;
  // One statement on a leased reader connection (`what` names it in errors).
  absl::StatusOr<internal::PgResult> ReadQuery(
      std::string_view what, const char* sql,
      const std::vector<internal::PgParam>& params) const;

  PostgresStore(std::string uri, const StoreOptions& options);

  // The writer connection, (re)connected if it is missing or broken.
  absl::StatusOr<internal::PgConn*> Writer()
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(writer_mu_);
  // A reader connection from the pool (or a new one).
  absl::StatusOr<std::unique_ptr<internal::PgConn>> AcquireReader() const;
  void ReleaseReader(std::unique_ptr<internal::PgConn> conn) const;

  // FailedPrecondition when the store is read-only.
  absl::Status CheckWritable() const;

  const std::string uri_;
  const std::string name_;  // uri_ without its password, for messages
  const StoreOptions options_;

  absl::Mutex writer_mu_;
  std::unique_ptr<internal::PgConn> writer_ ABSL_GUARDED_BY(writer_mu_);
  // Identifies this Store's changes in the change feed.
  const std::string origin_;

  mutable absl::Mutex pool_mu_;
  mutable std::vector<std::unique_ptr<internal::PgConn>> idle_readers_
      ABSL_GUARDED_BY(pool_mu_);
};

}  // namespace rbmrec::store

#endif  // RBMREC_STORE_POSTGRES_STORE_H_
