#include "store/postgres_store.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "store/checks.h"
#include "store/pg_db.h"
#include "store/pg_models.h"
#include "store/pg_schema.h"
#include "store/pg_views.h"
#include "store/status_macros.h"

namespace rbmrec::store {

using internal::DoubleArray;
using internal::IntArray;
using internal::kActiveModelKey;
using internal::kModelsChannel;
using internal::PgConn;
using internal::PgParam;
using internal::PgResult;
using internal::PgTxn;
using internal::TextArray;

namespace {

absl::string_view AV(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

// The change feed's channels (store/change_feed.h): rating / item changes
// (payloads of EncodeChanges) and model activations (payload: the origin).
constexpr const char* kChangesChannel = "rbmrec_changes";
// The leadership lease (pg_try_advisory_lock key) and where the leader
// records its address (table meta).
constexpr int64_t kLeaderLockKey = 0x7262'6d72'6563'0002;  // "rbmrec" 2
constexpr const char* kLeaderKey = "leader_address";

using IdMap = absl::flat_hash_map<std::string_view, int64_t>;

// Resolves distinct ext ids of `table` ("users" or "items") to indices
// inside the caller's transaction, creating the missing rows (indices in
// the order of `ids`) and adding how many were created to `*created`. With
// `lock`, the rows are locked FOR KEY SHARE until the commit. Another
// writer may create or delete the same ids concurrently: an id deleted
// between the INSERT and the SELECT is created again (up to three rounds).
absl::StatusOr<IdMap> ResolveIds(PgConn& conn, const char* table,
                                 const std::vector<std::string_view>& ids,
                                 bool lock, int64_t* created) {
  IdMap out;
  if (ids.empty()) return out;
  const std::string insert = absl::StrCat(
      "INSERT INTO ", table,
      "(ext_id) SELECT t.x FROM unnest($1::text[]) WITH ORDINALITY AS t(x, n) "
      "WHERE NOT EXISTS (SELECT 1 FROM ",
      table,
      " e WHERE e.ext_id = t.x) ORDER BY t.n "
      "ON CONFLICT(ext_id) DO NOTHING RETURNING idx");
  const std::string select = absl::StrCat(
      "SELECT t.n, e.idx FROM unnest($1::text[]) WITH ORDINALITY AS t(x, n) "
      "JOIN ",
      table, " e ON e.ext_id = t.x", lock ? " FOR KEY SHARE OF e" : "");
  std::vector<std::string_view> missing = ids;
  for (int round = 0; round < 3 && !missing.empty(); ++round) {
    const PgParam param = PgParam::Text(TextArray(missing));
    RBMREC_STORE_ASSIGN_OR_RETURN(
        PgResult ins, conn.Exec("storing ratings", insert.c_str(), {param}));
    *created += ins.rows();
    RBMREC_STORE_ASSIGN_OR_RETURN(
        PgResult sel, conn.Exec("storing ratings", select.c_str(), {param}));
    std::vector<bool> found(missing.size(), false);
    for (int i = 0; i < sel.rows(); ++i) {
      const int64_t n = sel.Int(i, 0);
      if (n < 1 || static_cast<size_t>(n) > missing.size()) continue;
      found[static_cast<size_t>(n - 1)] = true;
      out.emplace(missing[static_cast<size_t>(n - 1)], sel.Int(i, 1));
    }
    std::vector<std::string_view> still;
    for (size_t i = 0; i < missing.size(); ++i) {
      if (!found[i]) still.push_back(missing[i]);
    }
    missing = std::move(still);
  }
  if (!missing.empty()) {
    return absl::UnavailableError(absl::StrFormat(
        "database '%s': %s '%s' was deleted concurrently three times; retry",
        conn.name(), table, AV(missing[0])));
  }
  return out;
}

// Publishes `changes` on the changes channel, inside the caller's
// transaction (delivered when, and only if, it commits).
absl::Status AnnounceChanges(PgConn& conn, std::string_view origin,
                             const std::vector<ChangeRecord>& changes) {
  if (changes.empty()) return absl::OkStatus();
  const std::vector<std::string> payloads = EncodeChanges(origin, changes);
  const std::vector<std::string_view> views(payloads.begin(), payloads.end());
  return conn
      .Exec("announcing changes",
            "SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p",
            {PgParam::Text(kChangesChannel), PgParam::Text(TextArray(views))})
      .status();
}

// The kDelete records of a "SELECT item ext_id, rating" over deleted
// ratings, then kUserDeleted when the user row went too.
std::vector<ChangeRecord> DeletedRatings(const PgResult& r,
                                         std::string_view user,
                                         bool user_deleted) {
  std::vector<ChangeRecord> out;
  for (int i = 0; i < r.rows(); ++i) {
    if (r.IsNull(i, 0)) continue;
    out.push_back(
        ChangeRecord::Make(ChangeRecord::Kind::kDelete, std::string(user),
                           std::string(r.Text(i, 0)), r.Double(i, 1)));
  }
  if (user_deleted) {
    out.push_back(ChangeRecord::Make(ChangeRecord::Kind::kUserDeleted,
                                     std::string(user), ""));
  }
  return out;
}

// A random id for this process's Store (the origin of its changes).
std::string NewOrigin() {
  std::random_device rd;
  return absl::StrFormat("%08x%08x-%d", rd(), rd(), static_cast<int>(getpid()));
}

// The change feed: a connection that LISTENs on both channels.
class PgChangeFeed final : public ChangeFeed {
 public:
  PgChangeFeed(std::unique_ptr<PgConn> conn, std::string origin)
      : conn_(std::move(conn)), origin_(std::move(origin)) {}

  absl::StatusOr<ChangeBatch> Wait(int timeout_ms) override {
    ChangeBatch batch;
    PGconn* raw = conn_->raw();
    RBMREC_STORE_RETURN_IF_ERROR(Consume(raw));
    Drain(raw, batch);
    if (batch.records.empty() && !batch.models_changed &&
        !batch.unknown_changes) {
      pollfd fd{PQsocket(raw), POLLIN, 0};
      if (fd.fd < 0) return Broken();
      const int n = poll(&fd, 1, std::max(0, timeout_ms));
      if (n < 0 && errno != EINTR) return Broken();
      if (n > 0) {
        RBMREC_STORE_RETURN_IF_ERROR(Consume(raw));
        Drain(raw, batch);
      }
    }
    return batch;
  }

 private:
  absl::Status Broken() const {
    return absl::UnavailableError(
        absl::StrFormat("database '%s': the change feed's connection broke: %s",
                        conn_->name(), PQerrorMessage(conn_->raw())));
  }
  absl::Status Consume(PGconn* raw) const {
    if (PQconsumeInput(raw) == 0 || PQstatus(raw) != CONNECTION_OK) {
      return Broken();
    }
    return absl::OkStatus();
  }
  void Drain(PGconn* raw, ChangeBatch& batch) const {
    while (PGnotify* n = PQnotifies(raw)) {
      const std::string_view channel(n->relname);
      const std::string_view payload(n->extra);
      if (channel == kModelsChannel) {
        if (payload != origin_) batch.models_changed = true;
      } else {
        absl::StatusOr<DecodedChanges> d = DecodeChanges(payload);
        if (!d.ok()) {
          batch.unknown_changes = true;
        } else if (d->origin != origin_) {
          for (ChangeRecord& r : d->records) {
            batch.records.push_back(std::move(r));
          }
        }
      }
      PQfreemem(n);
    }
  }

  const std::unique_ptr<PgConn> conn_;
  const std::string origin_;
};

// The lease: held by the session of `conn` (pg_try_advisory_lock).
class PgLeaderLease final : public LeaderLease {
 public:
  explicit PgLeaderLease(std::unique_ptr<PgConn> conn)
      : conn_(std::move(conn)) {}
  absl::Status Check() override {
    // The session lock lives as long as the session: a round trip on its
    // connection proves both.
    absl::Status st = conn_->Run("checking the leadership lease", "SELECT 1");
    if (!st.ok() || !conn_->ok()) {
      return absl::UnavailableError(
          absl::StrCat("leadership lost: ", st.message()));
    }
    return absl::OkStatus();
  }

 private:
  const std::unique_ptr<PgConn> conn_;
};

}  // namespace

PostgresStore::PostgresStore(std::string uri, const StoreOptions& options)
    : uri_(std::move(uri)),
      name_(internal::RedactUri(uri_)),
      options_(options),
      origin_(NewOrigin()) {}

PostgresStore::~PostgresStore() = default;

absl::StatusOr<std::unique_ptr<PgConn>> PostgresStore::OpenConnection() const {
  internal::PgSettings settings;
  settings.lock_timeout_ms = options_.busy_timeout_ms;
  settings.synchronous_commit = options_.synchronous_full;
  settings.read_only = options_.read_only;
  return PgConn::Connect(uri_, name_, settings);
}

absl::StatusOr<std::unique_ptr<PostgresStore>> PostgresStore::Open(
    const std::string& uri, const StoreOptions& options) {
  if (!IsPostgresPath(uri)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("'%s' is not a PostgreSQL URI (postgresql://...)",
                        internal::RedactUri(uri)));
  }
  if (options.busy_timeout_ms < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "busy_timeout_ms must be >= 0, got %d", options.busy_timeout_ms));
  }
  if (options.max_bytes != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "max_bytes (%d) is not supported on PostgreSQL: limit the space on "
        "the database server instead",
        options.max_bytes));
  }
  std::unique_ptr<PostgresStore> store(new PostgresStore(uri, options));
  RBMREC_STORE_ASSIGN_OR_RETURN(std::unique_ptr<PgConn> first,
                                store->OpenConnection());
  RBMREC_STORE_RETURN_IF_ERROR(
      internal::MigratePostgres(*first, options.read_only));
  if (options.read_only) {
    store->ReleaseReader(std::move(first));
  } else {
    absl::MutexLock lock(&store->writer_mu_);
    store->writer_ = std::move(first);
  }
  return store;
}

absl::Status PostgresStore::CheckWritable() const {
  if (options_.read_only) {
    return absl::FailedPreconditionError(
        absl::StrFormat("database '%s' was opened read-only", name_));
  }
  return absl::OkStatus();
}

absl::StatusOr<PgConn*> PostgresStore::Writer() {
  if (writer_ != nullptr && writer_->ok()) return writer_.get();
  writer_.reset();
  RBMREC_STORE_ASSIGN_OR_RETURN(std::unique_ptr<PgConn> conn, OpenConnection());
  writer_ = std::move(conn);
  return writer_.get();
}

absl::StatusOr<std::unique_ptr<PgConn>> PostgresStore::AcquireReader() const {
  {
    absl::MutexLock lock(&pool_mu_);
    while (!idle_readers_.empty()) {
      std::unique_ptr<PgConn> c = std::move(idle_readers_.back());
      idle_readers_.pop_back();
      if (c->ok()) return c;
    }
  }
  return OpenConnection();
}

void PostgresStore::ReleaseReader(std::unique_ptr<PgConn> conn) const {
  // A connection left inside a transaction (an error mid-read) or broken is
  // closed rather than reused.
  if (!conn->ok() || PQtransactionStatus(conn->raw()) != PQTRANS_IDLE) return;
  absl::MutexLock lock(&pool_mu_);
  if (idle_readers_.size() < static_cast<size_t>(kMaxIdleReaders)) {
    idle_readers_.push_back(std::move(conn));
  }
}

// ---------------------------------------------------------------- Ratings

namespace {

// The distinct user and item ids of `rows`, in order of first appearance
// (new ones get their indices in that order).
void DistinctIds(absl::Span<const RatingRow> rows,
                 std::vector<std::string_view>* users,
                 std::vector<std::string_view>* items) {
  absl::flat_hash_set<absl::string_view> seen_u;
  absl::flat_hash_set<absl::string_view> seen_i;
  for (const RatingRow& r : rows) {
    if (seen_u.insert(r.user).second) users->push_back(r.user);
    if (seen_i.insert(r.item).second) items->push_back(r.item);
  }
}

// The change feed's records of an upsert: one per row, with its previous
// rating (a kView record for a view row).
std::vector<ChangeRecord> UpsertChanges(
    absl::Span<const RatingRow> rows,
    const std::vector<std::optional<double>>& previous) {
  std::vector<ChangeRecord> changes;
  changes.reserve(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    changes.push_back(rows[i].view
                          ? ChangeRecord::Make(ChangeRecord::Kind::kView,
                                               rows[i].user, rows[i].item)
                          : ChangeRecord::Make(ChangeRecord::Kind::kUpsert,
                                               rows[i].user, rows[i].item,
                                               rows[i].rating, previous[i]));
  }
  return changes;
}

}  // namespace

absl::StatusOr<UpsertResult> PostgresStore::UpsertRatings(
    absl::Span<const RatingRow> rows) {
  RBMREC_STORE_RETURN_IF_ERROR(CheckWritable());
  RBMREC_STORE_RETURN_IF_ERROR(internal::CheckRatingRows(rows));
  UpsertResult result;
  if (rows.empty()) return result;

  std::vector<std::string_view> users;
  std::vector<std::string_view> items;
  DistinctIds(rows, &users, &items);

  absl::MutexLock lock(&writer_mu_);
  RBMREC_STORE_ASSIGN_OR_RETURN(PgConn * conn_ptr, Writer());
  PgConn& conn = *conn_ptr;
  PgTxn txn(conn);
  RBMREC_STORE_RETURN_IF_ERROR(txn.Begin());
  // Users are locked (KEY SHARE) until the commit, so a concurrent
  // DeleteUser of one of them waits for this batch and then deletes its
  // ratings too; items are never deleted.
  RBMREC_STORE_ASSIGN_OR_RETURN(
      IdMap user_idx,
      ResolveIds(conn, "users", users, /*lock=*/true, &result.new_users));
  RBMREC_STORE_ASSIGN_OR_RETURN(
      IdMap item_idx,
      ResolveIds(conn, "items", items, /*lock=*/false, &result.new_items));

  // Each distinct (user, item) once: its last row is written; earlier rows
  // of the same pair see the row before them as their previous rating.
  struct Keyed {
    int64_t user, item;
    size_t row;
  };
  std::vector<Keyed> keyed;
  keyed.reserve(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].view) continue;
    keyed.push_back({user_idx.find(rows[i].user)->second,
                     item_idx.find(rows[i].item)->second, i});
  }
  RBMREC_STORE_ASSIGN_OR_RETURN(
      result.views, internal::PgUpsertViews(conn, rows, user_idx, item_idx));
  // Sorted pairs also make concurrent writers take row locks in one order.
  std::stable_sort(
      keyed.begin(), keyed.end(), [](const Keyed& a, const Keyed& b) {
        return a.user != b.user ? a.user < b.user : a.item < b.item;
      });
  // Each distinct pair is written once (its last row). PostgreSQL's ON
  // CONFLICT cannot touch a row twice in one statement, and the earlier rows
  // of a pair only need their previous rating, which is the row before.
  std::vector<int64_t> w_u, w_i, w_ts;
  std::vector<double> w_r;
  for (size_t n = 0; n < keyed.size(); ++n) {
    const Keyed& k = keyed[n];
    const bool last_of_pair = n + 1 == keyed.size() ||
                              keyed[n + 1].user != k.user ||
                              keyed[n + 1].item != k.item;
    if (last_of_pair) {
      w_u.push_back(k.user);
      w_i.push_back(k.item);
      w_r.push_back(rows[k.row].rating);
      w_ts.push_back(rows[k.row].timestamp);
    }
  }
  // One statement upserts every pair and returns the rating each replaced
  // pair had: the scalar subquery reads the statement's snapshot, taken
  // before its own writes. A pair that another writer changed after that
  // snapshot was waited for (the row lock of ON CONFLICT DO UPDATE): its
  // previous rating is then read again below, under that lock. xmax <> 0
  // marks the rows that ON CONFLICT updated; only those are looked up.
  RBMREC_STORE_ASSIGN_OR_RETURN(
      PgResult w,
      conn.Exec(
          "storing ratings",
          "WITH up AS ("
          "INSERT INTO ratings AS r(user_idx, item_idx, rating, ts) "
          "SELECT * FROM unnest($1::bigint[], $2::bigint[], "
          "$3::float8[], $4::bigint[]) "
          "ON CONFLICT(user_idx, item_idx) DO UPDATE "
          "SET rating = EXCLUDED.rating, ts = EXCLUDED.ts "
          "RETURNING r.user_idx, r.item_idx, r.xmax <> 0 AS replaced) "
          "SELECT u.user_idx, u.item_idx, (SELECT o.rating FROM ratings o "
          "WHERE o.user_idx = u.user_idx AND o.item_idx = u.item_idx) "
          "FROM up u WHERE u.replaced",
          {PgParam::Text(IntArray(w_u)), PgParam::Text(IntArray(w_i)),
           PgParam::Text(DoubleArray(w_r)), PgParam::Text(IntArray(w_ts))}));
  absl::flat_hash_map<std::pair<int64_t, int64_t>, double> stored;
  for (int i = 0; i < w.rows(); ++i) {
    // No row in the snapshot: the pair did not exist, it was inserted
    // (xmax can be set on a new row too, e.g. by a row lock).
    if (w.IsNull(i, 2)) continue;
    stored.emplace(std::make_pair(w.Int(i, 0), w.Int(i, 1)), w.Double(i, 2));
  }
  result.previous.resize(rows.size());
  for (size_t n = 0; n < keyed.size(); ++n) {
    const Keyed& k = keyed[n];
    if (n > 0 && keyed[n - 1].user == k.user && keyed[n - 1].item == k.item) {
      result.previous[k.row] = rows[keyed[n - 1].row].rating;
    } else {
      auto it = stored.find(std::make_pair(k.user, k.item));
      if (it != stored.end()) result.previous[k.row] = it->second;
    }
    if (result.previous[k.row].has_value()) {
      ++result.replaced;
    } else {
      ++result.inserted;
    }
  }
  RBMREC_STORE_RETURN_IF_ERROR(
      AnnounceChanges(conn, origin_, UpsertChanges(rows, result.previous)));
  RBMREC_STORE_RETURN_IF_ERROR(txn.Commit());
  return result;
}

absl::StatusOr<int64_t> PostgresStore::DeleteRatings(
    std::string_view user, absl::Span<const std::string> items) {
  RBMREC_STORE_RETURN_IF_ERROR(CheckWritable());
  absl::MutexLock lock(&writer_mu_);
  RBMREC_STORE_ASSIGN_OR_RETURN(PgConn * conn, Writer());
  PgTxn txn(*conn);
  RBMREC_STORE_RETURN_IF_ERROR(txn.Begin());
  RBMREC_STORE_ASSIGN_OR_RETURN(
      PgResult u,
      conn->Exec("deleting ratings", "SELECT idx FROM users WHERE ext_id = $1",
                 {PgParam::Text(user)}));
  if (u.rows() == 0) {
    return absl::NotFoundError(absl::StrCat("unknown user: ", AV(user)));
  }
  if (items.empty()) return 0;
  std::vector<std::string_view> ids(items.begin(), items.end());
  RBMREC_STORE_ASSIGN_OR_RETURN(
      PgResult r,
      conn->Exec("deleting ratings",
                 "WITH d AS (DELETE FROM ratings WHERE user_idx = $1 AND "
                 "item_idx IN (SELECT idx FROM items WHERE ext_id = "
                 "ANY($2::text[])) RETURNING item_idx, rating) "
                 "SELECT i.ext_id, d.rating FROM d "
                 "JOIN items i ON i.idx = d.item_idx",
                 {PgParam::Int(u.Int(0, 0)), PgParam::Text(TextArray(ids))}));
  RBMREC_STORE_RETURN_IF_ERROR(AnnounceChanges(
      *conn, origin_, DeletedRatings(r, user, /*user_deleted=*/false)));
  RBMREC_STORE_RETURN_IF_ERROR(txn.Commit());
  return r.rows();
}

absl::StatusOr<int64_t> PostgresStore::DeleteUser(std::string_view user) {
  RBMREC_STORE_RETURN_IF_ERROR(CheckWritable());
  absl::MutexLock lock(&writer_mu_);
  RBMREC_STORE_ASSIGN_OR_RETURN(PgConn * conn, Writer());
  PgTxn txn(*conn);
  RBMREC_STORE_RETURN_IF_ERROR(txn.Begin());
  // The user row first: its row lock makes a concurrent UpsertRatings of
  // this user (which locks it KEY SHARE) wait, or this wait for it.
  RBMREC_STORE_ASSIGN_OR_RETURN(
      PgResult u,
      conn->Exec("deleting a user",
                 "DELETE FROM users WHERE ext_id = $1 RETURNING idx",
                 {PgParam::Text(user)}));
  if (u.rows() == 0) {
    return absl::NotFoundError(absl::StrCat("unknown user: ", AV(user)));
  }
  RBMREC_STORE_RETURN_IF_ERROR(
      conn->Exec("deleting a user", "DELETE FROM views WHERE user_idx = $1",
                 {PgParam::Int(u.Int(0, 0))})
          .status());
  // LEFT JOIN: a rating whose item row is missing is deleted too.
  RBMREC_STORE_ASSIGN_OR_RETURN(
      PgResult r,
      conn->Exec("deleting a user",
                 "WITH d AS (DELETE FROM ratings WHERE user_idx = $1 "
                 "RETURNING item_idx, rating) "
                 "SELECT i.ext_id, d.rating FROM d "
                 "LEFT JOIN items i ON i.idx = d.item_idx",
                 {PgParam::Int(u.Int(0, 0))}));
  RBMREC_STORE_RETURN_IF_ERROR(AnnounceChanges(
      *conn, origin_, DeletedRatings(r, user, /*user_deleted=*/true)));
  RBMREC_STORE_RETURN_IF_ERROR(txn.Commit());
  return r.rows();
}

// ------------------------------------------------------------------ Items

absl::Status PostgresStore::PutItems(absl::Span<const ItemRow> items) {
  RBMREC_STORE_RETURN_IF_ERROR(CheckWritable());
  RBMREC_STORE_RETURN_IF_ERROR(internal::CheckItemRows(items));
  if (items.empty()) return absl::OkStatus();
  absl::MutexLock lock(&writer_mu_);
  RBMREC_STORE_ASSIGN_OR_RETURN(PgConn * conn, Writer());
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].attributes_json.empty()) continue;
    RBMREC_STORE_ASSIGN_OR_RETURN(
        bool ok, internal::IsJsonObject(*conn, items[i].attributes_json));
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrFormat("item %d: attributes_json is not a JSON object", i));
    }
  }
  PgTxn txn(*conn);
  RBMREC_STORE_RETURN_IF_ERROR(txn.Begin());
  std::vector<ChangeRecord> changes;
  for (const ItemRow& item : items) {
    const std::vector<PgParam> params = {
        PgParam::Text(item.item), PgParam::TextOrNull(item.title),
        PgParam::TextOrNull(item.attributes_json),
        PgParam::TextOrNull(internal::JoinCategories(item.categories)),
        PgParam::Bool(item.hidden)};
    // UPDATE first: an INSERT ... ON CONFLICT would draw (and waste) an
    // index for every existing item.
    RBMREC_STORE_ASSIGN_OR_RETURN(
        PgResult r, conn->Exec("storing items",
                               "UPDATE items SET title = $2, attributes = $3, "
                               "categories = $4, hidden = $5 "
                               "WHERE ext_id = $1",
                               params));
    if (r.Affected() == 0) {
      RBMREC_STORE_RETURN_IF_ERROR(
          conn->Exec("storing items",
                     "INSERT INTO items(ext_id, title, attributes, "
                     "categories, hidden) VALUES($1, $2, $3, $4, $5) "
                     "ON CONFLICT(ext_id) DO UPDATE "
                     "SET title = EXCLUDED.title, "
                     "attributes = EXCLUDED.attributes, "
                     "categories = EXCLUDED.categories, "
                     "hidden = EXCLUDED.hidden",
                     params)
              .status());
    }
    changes.push_back(
        ChangeRecord::Make(ChangeRecord::Kind::kItem, "", item.item));
  }
  RBMREC_STORE_RETURN_IF_ERROR(AnnounceChanges(*conn, origin_, changes));
  return txn.Commit();
}

absl::Status PostgresStore::SetItemsHidden(absl::Span<const std::string> items,
                                           bool hidden) {
  RBMREC_STORE_RETURN_IF_ERROR(CheckWritable());
  RBMREC_STORE_RETURN_IF_ERROR(internal::CheckItemIds(items));
  if (items.empty()) return absl::OkStatus();
  absl::MutexLock lock(&writer_mu_);
  RBMREC_STORE_ASSIGN_OR_RETURN(PgConn * conn, Writer());
  PgTxn txn(*conn);
  RBMREC_STORE_RETURN_IF_ERROR(txn.Begin());
  std::vector<ChangeRecord> changes;
  for (const std::string& item : items) {
    const std::vector<PgParam> params = {PgParam::Text(item),
                                         PgParam::Bool(hidden)};
    RBMREC_STORE_ASSIGN_OR_RETURN(
        PgResult r,
        conn->Exec("hiding items",
                   "UPDATE items SET hidden = $2 WHERE ext_id = $1", params));
    if (r.Affected() == 0) {
      RBMREC_STORE_RETURN_IF_ERROR(
          conn->Exec("hiding items",
                     "INSERT INTO items(ext_id, hidden) VALUES($1, $2) "
                     "ON CONFLICT(ext_id) DO UPDATE SET hidden = $2",
                     params)
              .status());
    }
    changes.push_back(ChangeRecord::Make(ChangeRecord::Kind::kItem, "", item));
  }
  RBMREC_STORE_RETURN_IF_ERROR(AnnounceChanges(*conn, origin_, changes));
  return txn.Commit();
}

// ------------------------------------------------------------------ Reads

absl::StatusOr<PgResult> PostgresStore::ReadQuery(
    std::string_view what, const char* sql,
    const std::vector<PgParam>& params) const {
  ReaderLease conn(this);
  RBMREC_STORE_RETURN_IF_ERROR(conn.Acquire());
  return (*conn).Exec(what, sql, params);
}

absl::StatusOr<std::vector<std::string>> PostgresStore::ListUsers(
    std::string_view after, int limit) const {
  // COLLATE "C": byte order, as on SQLite, whatever the database's locale.
  RBMREC_STORE_ASSIGN_OR_RETURN(
      PgResult r,
      ReadQuery("listing users",
                "SELECT ext_id FROM users WHERE ext_id COLLATE \"C\" > $1 "
                "ORDER BY ext_id COLLATE \"C\" LIMIT $2",
                {PgParam::Text(after), PgParam::Int(limit)}));
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(r.rows()));
  for (int i = 0; i < r.rows(); ++i) out.emplace_back(r.Text(i, 0));
  return out;
}

absl::StatusOr<std::vector<UserRating>> PostgresStore::GetUserRatings(
    std::string_view user) const {
  // One statement (one snapshot): no row = unknown user; a row with NULL
  // item = a user without ratings.
  RBMREC_STORE_ASSIGN_OR_RETURN(
      PgResult r, ReadQuery("reading a user's ratings",
                            "SELECT i.ext_id, r.rating, r.ts FROM users u "
                            "LEFT JOIN ratings r ON r.user_idx = u.idx "
                            "LEFT JOIN items i ON i.idx = r.item_idx "
                            "WHERE u.ext_id = $1 ORDER BY r.item_idx",
                            {PgParam::Text(user)}));
  if (r.rows() == 0) {
    return absl::NotFoundError(absl::StrCat("unknown user: ", AV(user)));
  }
  std::vector<UserRating> out;
  for (int i = 0; i < r.rows(); ++i) {
    if (r.IsNull(i, 0)) continue;
    out.push_back(
        UserRating{std::string(r.Text(i, 0)), r.Double(i, 1), r.Int(i, 2)});
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> PostgresStore::GetUserViews(
    std::string_view user) const {
  // As GetUserRatings: no row = unknown user; NULL item = no views.
  RBMREC_STORE_ASSIGN_OR_RETURN(
      PgResult r, ReadQuery("reading a user's views",
                            "SELECT i.ext_id FROM users u "
                            "LEFT JOIN views v ON v.user_idx = u.idx "
                            "LEFT JOIN items i ON i.idx = v.item_idx "
                            "WHERE u.ext_id = $1 ORDER BY v.item_idx",
                            {PgParam::Text(user)}));
  if (r.rows() == 0) {
    return absl::NotFoundError(absl::StrCat("unknown user: ", AV(user)));
  }
  std::vector<std::string> out;
  for (int i = 0; i < r.rows(); ++i) {
    if (!r.IsNull(i, 0)) out.emplace_back(r.Text(i, 0));
  }
  return out;
}

absl::StatusOr<Snapshot> PostgresStore::ReadSnapshot() const {
  ReaderLease lease(this);
  RBMREC_STORE_RETURN_IF_ERROR(lease.Acquire());
  PgConn& conn = *lease;
  PgTxn txn(conn);
  RBMREC_STORE_RETURN_IF_ERROR(
      txn.Begin("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"));
  internal::SnapshotBuilder snap(name_);
  for (const bool users : {true, false}) {
    RBMREC_STORE_ASSIGN_OR_RETURN(
        PgResult r,
        conn.Exec("reading a snapshot", internal::SnapshotNamesSql(users)));
    for (int n = 0; n < r.rows(); ++n) {
      RBMREC_STORE_RETURN_IF_ERROR(
          snap.AddName(users, r.Int(n, 0), r.Text(n, 1)));
    }
  }
  // The ratings through a cursor, kSnapshotChunk rows per round trip, so the
  // text of at most one chunk is held besides the snapshot.
  constexpr int kSnapshotChunk = 100000;
  RBMREC_STORE_ASSIGN_OR_RETURN(
      PgResult count,
      conn.Exec("reading a snapshot", "SELECT count(*) FROM ratings"));
  snap.ReserveRatings(count.Int(0, 0));
  RBMREC_STORE_RETURN_IF_ERROR(
      conn.Run("reading a snapshot",
               "DECLARE snapshot_ratings NO SCROLL CURSOR FOR "
               "SELECT user_idx, item_idx, rating FROM ratings "
               "ORDER BY user_idx, item_idx"));
  const std::string fetch =
      absl::StrFormat("FETCH FORWARD %d FROM snapshot_ratings", kSnapshotChunk);
  while (true) {
    RBMREC_STORE_ASSIGN_OR_RETURN(
        PgResult r, conn.Exec("reading a snapshot", fetch.c_str()));
    for (int n = 0; n < r.rows(); ++n) {
      RBMREC_STORE_RETURN_IF_ERROR(
          snap.AddRating(r.Int(n, 0), r.Int(n, 1), r.Double(n, 2)));
    }
    if (r.rows() < kSnapshotChunk) break;
  }
  RBMREC_STORE_RETURN_IF_ERROR(internal::PgReadSnapshotViews(conn, &snap));
  RBMREC_STORE_RETURN_IF_ERROR(txn.Commit());
  return snap.Take();
}

absl::StatusOr<Stats> PostgresStore::GetStats() const {
  RBMREC_STORE_ASSIGN_OR_RETURN(
      PgResult r, ReadQuery("reading statistics",
                            "SELECT (SELECT count(*) FROM users), "
                            "(SELECT count(*) FROM items), "
                            "(SELECT count(*) FROM ratings), "
                            "(SELECT count(*) FROM models), "
                            "pg_database_size(current_database()), "
                            "(SELECT value FROM meta WHERE key = $1), "
                            "(SELECT count(*) FROM views)",
                            {PgParam::Text(kActiveModelKey)}));
  Stats stats;
  stats.users = r.Int(0, 0);
  stats.items = r.Int(0, 1);
  stats.ratings = r.Int(0, 2);
  stats.model_versions = r.Int(0, 3);
  stats.database_bytes = r.Int(0, 4);
  stats.database_file_bytes = stats.database_bytes;
  if (!r.IsNull(0, 5)) stats.active_model_version = r.Int(0, 5);
  stats.views = r.Int(0, 6);
  return stats;
}

// ----------------------------------------------------------------- Sharing

absl::StatusOr<std::unique_ptr<ChangeFeed>> PostgresStore::Subscribe() const {
  RBMREC_STORE_ASSIGN_OR_RETURN(std::unique_ptr<PgConn> conn, OpenConnection());
  RBMREC_STORE_RETURN_IF_ERROR(conn->Run(
      "subscribing to changes",
      absl::StrCat("LISTEN ", kChangesChannel, "; LISTEN ", kModelsChannel)
          .c_str()));
  return std::unique_ptr<ChangeFeed>(
      new PgChangeFeed(std::move(conn), origin_));
}

absl::StatusOr<std::unique_ptr<LeaderLease>> PostgresStore::TryLead(
    std::string_view address) {
  RBMREC_STORE_RETURN_IF_ERROR(CheckWritable());
  RBMREC_STORE_ASSIGN_OR_RETURN(std::unique_ptr<PgConn> conn, OpenConnection());
  RBMREC_STORE_ASSIGN_OR_RETURN(PgResult r,
                                conn->Exec("taking the leadership lease",
                                           "SELECT pg_try_advisory_lock($1)",
                                           {PgParam::Int(kLeaderLockKey)}));
  if (r.rows() != 1 || !r.Bool(0, 0)) return std::unique_ptr<LeaderLease>();
  RBMREC_STORE_RETURN_IF_ERROR(
      conn->Exec("recording the leader's address",
                 "INSERT INTO meta(key, value) VALUES($1, $2) "
                 "ON CONFLICT(key) DO UPDATE SET value = EXCLUDED.value",
                 {PgParam::Text(kLeaderKey), PgParam::Text(address)})
          .status());
  return std::unique_ptr<LeaderLease>(new PgLeaderLease(std::move(conn)));
}

absl::StatusOr<std::string> PostgresStore::LeaderAddress() const {
  // The recorded address counts only while some session holds the lock
  // (a bigint advisory key shows as classid = high, objid = low 32 bits).
  RBMREC_STORE_ASSIGN_OR_RETURN(
      PgResult r,
      ReadQuery("reading the leader's address",
                "SELECT value FROM meta WHERE key = $1 AND EXISTS ("
                "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND "
                "granted AND database = (SELECT oid FROM pg_database "
                "WHERE datname = current_database()) AND "
                "classid::bigint = $2 AND objid::bigint = $3 AND "
                "objsubid = 1)",
                {PgParam::Text(kLeaderKey), PgParam::Int(kLeaderLockKey >> 32),
                 PgParam::Int(kLeaderLockKey & 0xffffffff)}));
  if (r.rows() == 0 || r.IsNull(0, 0)) return std::string();
  return std::string(r.Text(0, 0));
}

}  // namespace rbmrec::store
