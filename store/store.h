#ifndef RBMREC_STORE_STORE_H_
#define RBMREC_STORE_STORE_H_

// The store: users, items, ratings and trained model versions. This interface
// is backend-neutral (no SQL, no database type); Store::Open picks the
// implementation from the path:
//   SqliteStore    (store/sqlite_store.h) a SQLite file, or ":memory:"; the
//                  embedded default;
//   PostgresStore  (store/postgres_store.h) a PostgreSQL database, for a path
//                  that starts with "postgresql://" or "postgres://" (a libpq
//                  connection URI).
// They are the only code in rbmrec that speaks SQL. Each documents its own
// connections, durability and space management; what follows holds for both.
//
// Indices. Users and items have stable indices in the database (starting at
// 1, increasing), never reused, even after deletion. The API speaks external
// string ids only; the one place where indices appear is Snapshot, whose
// indices are positions in its own `users` / `items` vectors (see Snapshot).
//
// Durability. A write method that returned OK has committed. Every write
// method is all-or-nothing: on error nothing of the call is stored.
//
// Errors. Every method returns absl::Status; codes used throughout:
//   InvalidArgument     a malformed argument (the message names the row and
//                       field), or an option the backend does not support;
//   NotFound            an unknown user / model version where one is needed;
//   FailedPrecondition  the store is read-only, or the schema version of the
//                       database is newer than this build (or, read-only,
//                       older), or the database cannot be opened for a reason
//                       other than permissions (missing directory, ...);
//   PermissionDenied    the database is not writable / readable by us;
//   Unavailable         the database is locked by another connection or
//                       process beyond busy_timeout_ms ("... is locked"),
//                       with reason DATABASE_LOCKED (core/error_reason.h);
//                       or it cannot be reached (an I/O error, a PostgreSQL
//                       server that is down or restarting; no reason);
//   ResourceExhausted   the disk or StoreOptions.max_bytes is full: reason
//                       STORAGE_FULL, message "storage full: ..." (nothing of
//                       the failed write is stored; reads keep working;
//                       writes work again once space is freed, e.g. by
//                       DeleteModel / PruneModels); or a value larger than
//                       the backend accepts (no reason);
//   DataLoss            the database is not a database or is corrupt;
//   Internal            anything else the database reports.
// Messages name the database (a path, or a URI without its password) and
// include the database's own message.
//
// Writers. A SqliteStore assumes it is the only WRITER of its database (it
// caches the ext_id -> idx maps in memory); other processes (shells,
// backups, read-only Stores) may read it at any time. A PostgresStore may
// share its database with other writers (replicas): Shared() is true, and
// the change feed and the leadership lease below work (store/change_feed.h).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "store/change_feed.h"

namespace rbmrec::store {

// The SQLite schema version this build creates and understands (PRAGMA
// user_version). Older files are migrated at Open. (PostgreSQL has its
// own: kPostgresSchemaVersion in store/postgres_store.h.)
inline constexpr int kSchemaVersion = 5;

// Ids (users and items) are at most this many bytes.
inline constexpr size_t kMaxIdBytes = 256;

// How many versions Store::ActivationHistory remembers.
inline constexpr size_t kActivationHistoryLength = 32;

// Options of Store::Open. Each backend documents which it honours; one that
// does not apply to a backend is rejected there with InvalidArgument when set
// to a non-default value, never silently ignored.
struct StoreOptions {
  // How long a write (or Open's migration) waits for a lock held by another
  // connection / process before failing with Unavailable, reason
  // DATABASE_LOCKED. Default 5 s.
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

  // The largest the database file may grow, in bytes (rounded down to whole
  // pages of 4 KiB; the WAL file is not counted). A write that would grow it
  // further fails with ResourceExhausted, reason STORAGE_FULL, like a full
  // disk. A limit below the file's current size keeps the current size.
  // 0 = no limit (the disk's). REQUIRES: >= 0. Default 0.
  int64_t max_bytes = 0;

  // Check the database's structure when it is opened read-write (SQLite:
  // PRAGMA quick_check, a read of every page: about a second per GiB); a
  // damaged file fails Open with DataLoss instead of failing calls later.
  // Default true.
  bool check_integrity = true;
};

// One rating to upsert. `timestamp` is opaque to the store (the service uses
// Unix seconds); 0 means unknown.
//
// With `view` set the row is an interaction without a rating (a view, a
// click): it is stored apart from the ratings, one row per (user, item)
// holding the latest timestamp of its views (so repeating a view changes
// nothing but, possibly, that timestamp), and `rating` is ignored. A view
// of an item the user rated is kept beside the rating (both signals).
struct RatingRow {
  std::string user;
  std::string item;
  double rating = 0.0;
  int64_t timestamp = 0;
  bool view = false;
};

struct UpsertResult {
  // Of the rating rows (RatingRow::view false):
  int64_t inserted = 0;   // rows that created a new (user, item) rating
  int64_t replaced = 0;   // rows that replaced an existing rating, including
                          // one stored earlier in the same batch
  int64_t views = 0;      // view rows (stored, new or repeated)
  int64_t new_users = 0;  // users created by the batch
  int64_t new_items = 0;  // items created by the batch
  // One entry per input row, in input order: the rating the row's (user,
  // item) had just before the row was applied, read inside the batch's
  // transaction; nullopt when it had none. A row that replaces an earlier row
  // of the same batch sees that row's rating. previous[i].has_value() exactly
  // for the rows counted in `replaced`.
  std::vector<std::optional<double>> previous;
};

// Item metadata. An empty title / attributes_json is stored as NULL ("none").
struct ItemRow {
  std::string item;
  std::string title;
  std::string attributes_json;  // a JSON object, or empty
  // At most kMaxItemCategories, each as CheckCategory (store/checks.h)
  // says; repeats are stored once, in first-seen order.
  std::vector<std::string> categories;
  bool hidden = false;  // never recommended (still predicted by id)
};

// Limits of an item's categories (PutItems; the server checks the same).
inline constexpr int kMaxItemCategories = 64;
inline constexpr size_t kMaxCategoryBytes = 128;

// The catalogue of one item: what Recommend's filters need.
struct CatalogueRow {
  std::string item;
  std::vector<std::string> categories;
  bool hidden = false;
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
  // The stored views (RatingRow::view): positions in `users` / `items`,
  // sorted by (user, item), each pair at most once; a pair may also be in
  // `ratings`.
  struct View {
    int32_t user = 0;
    int32_t item = 0;
  };
  std::vector<View> views;
};

struct Stats {
  int64_t users = 0;    // user rows (a user stays until DeleteUser)
  int64_t items = 0;    // item rows
  int64_t ratings = 0;  // rating rows
  int64_t views = 0;    // view rows (one per viewed (user, item))
  std::optional<int64_t> active_model_version;
  int64_t model_versions = 0;  // stored model versions
  // Size of the database on disk: database_file_bytes plus wal_bytes. 0 for
  // ":memory:".
  int64_t database_bytes = 0;
  // The database itself (SQLite: page_count * page_size as of this read,
  // pages still in the WAL included: the size StoreOptions.max_bytes
  // limits), and the current size of its WAL file (not limited; 0 when none,
  // and on PostgreSQL).
  int64_t database_file_bytes = 0;
  int64_t wal_bytes = 0;
  // StoreOptions.max_bytes: the limit on database_file_bytes; 0 when none.
  int64_t database_max_bytes = 0;
};

// The kinds of model version the service stores (ModelInfo.kind): a model
// trained by Train, and one published by the online updater.
inline constexpr std::string_view kModelKindFull = "full";
inline constexpr std::string_view kModelKindOnline = "online";

// One stored model version (its blob is read separately by LoadModelBlob).
struct ModelInfo {
  int64_t version = 0;          // assigned by InsertModel, increasing, >= 1
  int64_t created_unix_ms = 0;  // 0 given to InsertModel means "now"
  std::string kind;  // kModelKindFull, kModelKindOnline, or any other
  int64_t n_users = 0;
  int64_t n_items = 0;
  int64_t n_ratings = 0;
  // The training's metrics (0 when unknown, e.g. for online versions or
  // training without validation): the validation RMSE of the stored model,
  // the epochs trained and the training's wall time.
  double validation_rmse = 0;
  int32_t epochs = 0;
  double train_seconds = 0;
  // Any other facts as a JSON object, or empty (the online updater records
  // the version it started from, {"base_version": N, ...}). Databases of
  // older schemas kept all metrics here; their migration copied
  // validation_rmse, epochs and train_seconds into the fields above.
  std::string metrics_json;
  int64_t size_bytes = 0;  // size of the blob; set by InsertModel
  bool active = false;     // whether this is the active version
  bool pinned = false;     // never removed by PruneModels (see PinModel);
                           // ignored by InsertModel (new versions are not
                           // pinned)
};

// Which model versions PruneModels keeps: the active version, every pinned
// one, the newest `keep_full` versions whose kind is not kModelKindOnline
// (the service stores kModelKindFull) and the newest `keep_online` versions of
// kind kModelKindOnline ("newest" = highest version). A kept version may
// count under several rules (the active one is also one of the newest).
struct RetentionPolicy {
  int keep_full = 3;    // REQUIRES: >= 0
  int keep_online = 2;  // REQUIRES: >= 0
};

struct PruneResult {
  std::vector<int64_t> deleted_versions;  // newest first
  int64_t freed_bytes = 0;  // sum of the deleted versions' size_bytes
};

// Thread-safe: every method may be called concurrently from any thread.
// Writes are serialized by the implementation; reads run in parallel with
// writes where the backend allows (see each implementation).
class Store {
 public:
  // Opens the database named by `path`: a PostgreSQL store when `path` starts
  // with "postgresql://" or "postgres://" (PostgresStore::Open), else a SQLite
  // file or ":memory:" (SqliteStore::Open). Creates the schema (or migrates
  // it to this build's version) in one transaction.
  // Errors: InvalidArgument for an empty path or an invalid / unsupported
  // option; the rest as the backend's Open documents.
  static absl::StatusOr<std::unique_ptr<Store>> Open(
      const std::string& path, const StoreOptions& options = {});

  // Whether `path` names a PostgreSQL database (the URI prefixes above).
  static bool IsPostgresPath(std::string_view path);

  // Closes the connections. REQUIRES: no other thread is using the Store.
  virtual ~Store() = default;

  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // --- Ratings -------------------------------------------------------------

  // Upserts `rows` in ONE transaction: the whole batch is stored, or nothing.
  // A row for an existing (user, item) replaces its rating and timestamp; so
  // does a later row of the same batch (last wins). Unknown users and items
  // are created. View rows (RatingRow::view) are stored as views, in the
  // same transaction. Validates shape only (the caller checks the rating
  // scale): ids non-empty and at most kMaxIdBytes bytes, a rating row's
  // rating finite. Returns the
  // counts and each row's previous rating (UpsertResult::previous), read in
  // the same transaction, so a caller needs no read-before-write.
  // Thread-safe (serialized with the other writes).
  // Errors: InvalidArgument naming the row index and field ("row 17: empty
  // item id") with nothing stored; FailedPrecondition if read-only;
  // Unavailable "... is locked ..." (DATABASE_LOCKED) if another process
  // holds the write lock beyond the busy timeout; ResourceExhausted
  // "storage full: ..." (STORAGE_FULL) when the disk or max_bytes is full;
  // others as listed at the top of this file.
  virtual absl::StatusOr<UpsertResult> UpsertRatings(
      absl::Span<const RatingRow> rows) = 0;

  // Deletes the ratings of `user` for `items` (unknown items and items the
  // user did not rate are skipped) in one transaction and returns how many
  // ratings were deleted. The user row stays, even with no rating left; so
  // do the user's views.
  // Thread-safe. Errors: NotFound if `user` is unknown; FailedPrecondition if
  // read-only; Unavailable when locked.
  virtual absl::StatusOr<int64_t> DeleteRatings(
      std::string_view user, absl::Span<const std::string> items) = 0;

  // Deletes all ratings and views of `user` and the user row in one
  // transaction and returns the number of ratings deleted. The user's idx is
  // never reused; an upsert for the same ext id later creates a new user.
  // Thread-safe. Errors: NotFound if `user` is unknown; FailedPrecondition if
  // read-only; Unavailable when locked.
  virtual absl::StatusOr<int64_t> DeleteUser(std::string_view user) = 0;

  // --- Items ---------------------------------------------------------------

  // Creates or updates items in one transaction (all or nothing): title and
  // attributes are both replaced by the given values (empty = none).
  // Thread-safe. Errors: InvalidArgument "item 3: ..." for an empty or too
  // long id or attributes_json that is neither empty nor a JSON object;
  // FailedPrecondition if read-only; Unavailable when locked.
  virtual absl::Status PutItems(absl::Span<const ItemRow> items) = 0;

  // Sets `hidden` of these items (creating unknown ones without title) in
  // one transaction, leaving their other metadata. Thread-safe. Errors:
  // InvalidArgument "item 3: ..." for an invalid id; FailedPrecondition if
  // read-only; Unavailable when locked.
  virtual absl::Status SetItemsHidden(absl::Span<const std::string> items,
                                      bool hidden) = 0;

  // The items that have categories or are hidden, in idx order, read in
  // one read transaction. Thread-safe (read connection).
  virtual absl::StatusOr<std::vector<CatalogueRow>> ReadCatalogue() const = 0;

  // Returns the titles of `items`, in the same order: "" for an unknown item
  // or one without a title. Thread-safe (read connection).
  virtual absl::StatusOr<std::vector<std::string>> GetTitles(
      absl::Span<const std::string> items) const = 0;

  // The stored row of one item (title, attributes_json, categories,
  // hidden; empty fields are "none"), or nullopt when the store does not
  // know the item. An item known only from ratings has a row with empty
  // fields. One indexed read. Thread-safe (read connection).
  virtual absl::StatusOr<std::optional<ItemRow>> GetItem(
      std::string_view item) const = 0;

  // --- Reads ---------------------------------------------------------------

  // Returns the ratings of `user` (with the timestamps stored by the last
  // upsert of each) sorted by item idx (the order items first appeared).
  // Thread-safe (read connection). Errors: NotFound if unknown.
  virtual absl::StatusOr<std::vector<UserRating>> GetUserRatings(
      std::string_view user) const = 0;

  // Returns the items `user` viewed (RatingRow::view; rated or not) sorted
  // by item idx. Thread-safe (read connection). Errors: NotFound if
  // unknown.
  virtual absl::StatusOr<std::vector<std::string>> GetUserViews(
      std::string_view user) const = 0;

  // Returns up to `limit` user ids greater than `after` ("" = from the
  // first) in increasing byte order: every user row, including users whose
  // ratings were all deleted (a user stays until DeleteUser). Pages through
  // the users in bounded memory. Thread-safe (read connection).
  // REQUIRES: limit >= 1.
  virtual absl::StatusOr<std::vector<std::string>> ListUsers(
      std::string_view after, int limit) const = 0;

  // Reads all users, items, ratings and views in one read transaction: a
  // consistent state that includes each committed write entirely or not at all.
  // Thread-safe; it blocks neither writers nor the other reads (except on
  // SQLite's ":memory:", where everything shares one connection).
  virtual absl::StatusOr<Snapshot> ReadSnapshot() const = 0;

  // Counts rows and model versions and measures the database, consistently
  // (one read transaction). Thread-safe.
  virtual absl::StatusOr<Stats> GetStats() const = 0;

  // --- Model versions ------------------------------------------------------

  // Stores a new model version with `blob` (meta.version, meta.size_bytes and
  // meta.active are ignored; created_unix_ms 0 means now) and, if `activate`,
  // makes it the active version, all in ONE transaction. Returns the version.
  // Thread-safe. Errors: InvalidArgument if metrics_json is neither empty nor
  // a JSON object; ResourceExhausted if the blob is larger than the backend's
  // limit (SQLite 1 GB, PostgreSQL bytea 1 GB), or STORAGE_FULL when the disk
  // or max_bytes has no room for it; FailedPrecondition if read-only;
  // Unavailable when locked.
  virtual absl::StatusOr<int64_t> InsertModel(const ModelInfo& meta,
                                              std::string_view blob,
                                              bool activate) = 0;

  // Makes `version` the active model version. Thread-safe.
  // Errors: NotFound if there is no such version; FailedPrecondition if
  // read-only; Unavailable when locked.
  virtual absl::Status ActivateModel(int64_t version) = 0;

  // Lists all model versions, newest (highest version) first, with `active`
  // set on the active one and `pinned` on pinned ones. Thread-safe.
  virtual absl::StatusOr<std::vector<ModelInfo>> ListModels() const = 0;

  // Returns the blob of `version`. Thread-safe; like ReadSnapshot it does
  // not block the point reads.
  // Errors: NotFound if there is no such version.
  virtual absl::StatusOr<std::string> LoadModelBlob(int64_t version) const = 0;

  // Returns the active version, or nullopt when none was activated yet.
  // Thread-safe.
  virtual absl::StatusOr<std::optional<int64_t>> ActiveModelVersion() const = 0;

  // The versions that were made active (by InsertModel with `activate` or
  // ActivateModel), most recently activated first, each once, at most
  // kActivationHistoryLength of them; versions deleted since are included
  // (callers skip what ListModels no longer has). Databases written before
  // the history existed start with their active version alone. Thread-safe.
  virtual absl::StatusOr<std::vector<int64_t>> ActivationHistory() const = 0;

  // Replaces the blob of an existing `version` (and its size_bytes), in one
  // transaction; the rest of its ModelInfo stays. Used to rewrite stored
  // versions in place (the service's erasure of a user). Thread-safe.
  // Errors: NotFound if there is no such version; ResourceExhausted as
  // InsertModel; FailedPrecondition if read-only; Unavailable when locked.
  virtual absl::Status ReplaceModelBlob(int64_t version,
                                        std::string_view blob) = 0;

  // --- Settings ------------------------------------------------------------

  // A setting of the database that must not change once data exists (the
  // service records its rating scale): returns the value stored under `key`,
  // storing `value` first when there is none (in one transaction). A
  // read-only store stores nothing and returns `value` when the key is
  // unset. Thread-safe. Errors: Unavailable when locked; the database's.
  virtual absl::StatusOr<std::string> InitSetting(std::string_view key,
                                                  std::string_view value) = 0;

  // Pins (`pinned` true) or unpins a version: PruneModels never deletes a
  // pinned version. Idempotent. Thread-safe.
  // Errors: NotFound if there is no such version; FailedPrecondition if
  // read-only; Unavailable when locked.
  virtual absl::Status PinModel(int64_t version, bool pinned) = 0;

  // Deletes `version` (pinned or not: a caller that must respect pins checks
  // ModelInfo.pinned first) and gives its pages back, in one transaction.
  // Returns the freed bytes: the version's size_bytes. Thread-safe.
  // Errors: NotFound if there is no such version; FailedPrecondition if it is
  // the active version, or if read-only; Unavailable when locked.
  virtual absl::StatusOr<int64_t> DeleteModel(int64_t version) = 0;

  // Deletes every version `policy` does not keep (see RetentionPolicy) and
  // gives their pages back, in one transaction. Thread-safe.
  // Errors: InvalidArgument naming the field when keep_full or keep_online is
  // negative; FailedPrecondition if read-only; Unavailable when locked.
  virtual absl::StatusOr<PruneResult> PruneModels(
      const RetentionPolicy& policy) = 0;

  // --- Sharing (several processes writing one database) -------------------
  // True when other processes may write the same database concurrently and
  // Subscribe / TryLead / LeaderAddress work (PostgreSQL). False for SQLite,
  // whose one process is always the only writer (and leader).
  virtual bool Shared() const { return false; }

  // A feed of the changes that OTHER Store objects commit to this database
  // (store/change_feed.h), on a connection of its own. Changes committed
  // before the call are not delivered. Thread-safe.
  // Errors: Unimplemented when !Shared(); Unavailable when the database
  // cannot be reached.
  virtual absl::StatusOr<std::unique_ptr<ChangeFeed>> Subscribe() const;

  // Tries to become the database's one leader and records `address` as the
  // leader's address (LeaderAddress). Returns null (OK) when another
  // process holds the lease. Thread-safe.
  // Errors: Unimplemented when !Shared(); Unavailable when the database
  // cannot be reached.
  virtual absl::StatusOr<std::unique_ptr<LeaderLease>> TryLead(
      std::string_view address);

  // The address recorded by the current leader; "" when no process holds
  // the lease. Thread-safe. Errors: Unimplemented when !Shared(); the
  // database's.
  virtual absl::StatusOr<std::string> LeaderAddress() const;

 protected:
  Store() = default;
};

}  // namespace rbmrec::store

#endif  // RBMREC_STORE_STORE_H_
