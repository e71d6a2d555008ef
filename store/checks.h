#ifndef RBMREC_STORE_CHECKS_H_
#define RBMREC_STORE_CHECKS_H_

// What the store backends share that is not SQL: the checks of a write's
// arguments (so SQLite and PostgreSQL reject the same input with the same
// message) and which model versions PruneModels removes. Plain functions of
// their arguments; thread-compatible.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "store/store.h"

namespace rbmrec::store::internal {

// An id is non-empty, at most kMaxIdBytes long, and well-formed UTF-8 of
// ordinary code points (core/utf8.h's TextRules::kId: no control
// character, line or paragraph separator, or bidirectional formatting
// character or mark), the rules the server's IdProblem applies to every
// RPC. Errors read "<what> <index>: ...", e.g. "row 17: empty item id",
// "row 2: user id contains the line separator U+2028 at byte 1". Checked
// where ids are created (UpsertRatings, PutItems), not where they are
// looked up or deleted: the store still finds and deletes an id stored
// before a rule existed.
absl::Status CheckId(std::string_view id, const char* what, size_t index,
                     const char* field);

// An item's categories: at most kMaxItemCategories, each non-empty, at most
// kMaxCategoryBytes, and passing TextRules::kId as ids do. Errors read
// "item 3: category 2 is empty".
absl::Status CheckCategories(const std::vector<std::string>& categories,
                             size_t index);
// PutItems' rows: each id as CheckId says ("item 3: ...") and its
// categories as CheckCategories says.
absl::Status CheckItemRows(absl::Span<const ItemRow> items);
// SetItemsHidden's ids, as CheckId says ("item 3: empty item id").
absl::Status CheckItemIds(absl::Span<const std::string> items);
// The stored form of categories: repeats dropped, joined by '\n' (which no
// valid category contains); "" when none. And back.
std::string JoinCategories(const std::vector<std::string>& categories);
std::vector<std::string> SplitCategories(std::string_view stored);

// UpsertRatings' rows: both ids as CheckId says, the rating finite. The
// first bad row's error names it ("row 3: rating is not a finite number").
absl::Status CheckRatingRows(absl::Span<const RatingRow> rows);

// The activation history as stored (meta.activation_history: versions,
// most recent first, comma-separated) after `version` was activated: it
// moves to the front, repeats are dropped, and at most
// kActivationHistoryLength stay. `stored` that does not parse counts as
// empty.
std::string PushActivation(std::string_view stored, int64_t version);
// The versions of a stored history (unparsable entries skipped).
std::vector<int64_t> ParseActivationHistory(std::string_view stored);

// keep_full and keep_online >= 0.
absl::Status CheckRetentionPolicy(const RetentionPolicy& policy);

// PruneModels' decision, fed the stored versions newest first (highest
// version first): a version stays when it is one of the newest keep_full of
// the non-online kinds or keep_online of kModelKindOnline, pinned, or the
// active one; the others are added to result().
class RetentionWalk {
 public:
  RetentionWalk(const RetentionPolicy& policy, std::optional<int64_t> active)
      : policy_(policy), active_(active) {}

  // REQUIRES: versions in decreasing order.
  void Visit(int64_t version, std::string_view kind, int64_t size_bytes,
             bool pinned);

  const PruneResult& result() const { return result_; }

 private:
  RetentionPolicy policy_;
  std::optional<int64_t> active_;
  int full_kept_ = 0;
  int online_kept_ = 0;
  PruneResult result_;
};

// One step of a backend's schema migrations (store/schema.cc,
// store/pg_schema.cc): `sql` takes the schema from version - 1 to `version`.
// Applied in order, each once, in one transaction at Open; never edit a step
// that has shipped: append one and bump the backend's schema version.
struct Migration {
  int version;
  const char* sql;
};

// ReadSnapshot's bookkeeping: the user and item rows (each table in idx
// order, as SnapshotNamesSql reads them), then the ratings, in the order of
// Snapshot::ratings.
class SnapshotBuilder {
 public:
  // `name`: the database, for messages.
  explicit SnapshotBuilder(std::string_view name) : name_(name) {}

  // A user row (`user`) or an item row. OutOfRange when idx does not fit
  // a snapshot.
  absl::Status AddName(bool user, int64_t idx, std::string_view id);
  void ReserveRatings(int64_t n);
  // DataLoss when either index names no row added.
  absl::Status AddRating(int64_t user_idx, int64_t item_idx, double rating);
  // A stored view; DataLoss as AddRating.
  absl::Status AddView(int64_t user_idx, int64_t item_idx);

  Snapshot Take() { return std::move(snap_); }

 private:
  // The positions of (user_idx, item_idx); DataLoss naming `what` when
  // either is missing.
  absl::Status Positions(int64_t user_idx, int64_t item_idx, const char* what,
                         int32_t* u, int32_t* i) const;

  const std::string name_;
  Snapshot snap_;
  // idx -> position in snap_.users / items, -1 for gaps.
  std::vector<int32_t> user_pos_;
  std::vector<int32_t> item_pos_;
};

// The query of SnapshotBuilder::AddName's rows: (idx, ext_id) of users
// (`user`) or items, in idx order.
const char* SnapshotNamesSql(bool user);

}  // namespace rbmrec::store::internal

#endif  // RBMREC_STORE_CHECKS_H_
