#ifndef RBMREC_STORE_CHANGE_FEED_H_
#define RBMREC_STORE_CHANGE_FEED_H_

// The change feed of a database shared by several processes (several
// rbmrec-server replicas on one PostgreSQL database): what one Store
// committed, as the others learn it (Store::Subscribe), and the leadership
// lease (Store::TryLead).
//
// A Store that shares its database publishes, inside the transaction of each
// write (so a change is announced exactly when it commits, and never when it
// does not), one ChangeRecord per changed rating, per stored view, per
// deleted user and per
// item whose metadata changed, plus a "models" signal when the active model
// version changed. The records travel as text payloads (EncodeChanges /
// DecodeChanges, at most kMaxPayloadBytes each); this file holds that
// codec, which is pure and has no database in it.
//
// Thread-compatible (plain values and functions).

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace rbmrec::store {

struct ChangeRecord {
  enum class Kind : char {
    kUpsert = 'U',       // user, item, rating (new), previous (or none)
    kDelete = 'D',       // user, item, rating (the deleted one)
    kUserDeleted = 'X',  // user (its ratings come as kDelete records)
    kItem = 'I',         // item (title / attributes changed)
    kView = 'V',         // user, item (a view stored; no rating)
  };
  Kind kind = Kind::kUpsert;
  std::string user;
  std::string item;
  double rating = 0.0;
  std::optional<double> previous;  // kUpsert only

  static ChangeRecord Make(Kind kind, std::string user, std::string item,
                           double rating = 0.0,
                           std::optional<double> previous = std::nullopt) {
    ChangeRecord r;
    r.kind = kind;
    r.user = std::move(user);
    r.item = std::move(item);
    r.rating = rating;
    r.previous = previous;
    return r;
  }

  bool operator==(const ChangeRecord& o) const {
    return kind == o.kind && user == o.user && item == o.item &&
           rating == o.rating && previous == o.previous;
  }
};

// What a subscriber received in one wait.
struct ChangeBatch {
  std::vector<ChangeRecord> records;  // in commit order
  // The active model version changed (ActivateModel or InsertModel with
  // activate) in another process.
  bool models_changed = false;
  // Something changed that could not be decoded (a payload from a newer
  // build): treat every cached user and item as changed.
  bool unknown_changes = false;
};

// Receives the changes committed by the OTHER Store objects on the same
// database (a Store's own changes are not delivered to its own feeds).
// Not thread-safe: one thread waits on a feed.
class ChangeFeed {
 public:
  virtual ~ChangeFeed() = default;
  // Waits up to `timeout_ms` for changes and returns what arrived (empty on
  // timeout). Errors: Unavailable when the feed's connection broke:
  // changes may have been missed, so the caller treats everything as
  // changed and subscribes again.
  virtual absl::StatusOr<ChangeBatch> Wait(int timeout_ms) = 0;
};

// Leadership: at most one holder per database at a time (a database lock
// held by the holder's session, released when the lease is destroyed or the
// holder's process or connection dies).
// Not thread-safe: one thread owns a lease.
class LeaderLease {
 public:
  virtual ~LeaderLease() = default;
  // OK while the lease is still held. Errors: Unavailable when it was lost
  // (the connection that holds it broke); the lease never comes back, the
  // caller tries to lead again.
  virtual absl::Status Check() = 0;
};

// Largest payload EncodeChanges produces (PostgreSQL's NOTIFY takes fewer
// than 8000 bytes).
inline constexpr size_t kMaxPayloadBytes = 7900;

// Encodes `records` (from the process `origin`) as payloads of at most
// `max_bytes` bytes each, records in order; one record is never split. A
// record too large for one payload alone (ids up to kMaxIdBytes make this
// impossible at the default) is encoded in a payload of its own.
// REQUIRES max_bytes >= 64.
std::vector<std::string> EncodeChanges(std::string_view origin,
                                       const std::vector<ChangeRecord>& records,
                                       size_t max_bytes = kMaxPayloadBytes);

// One decoded payload.
struct DecodedChanges {
  std::string origin;
  std::vector<ChangeRecord> records;
};
// Errors: InvalidArgument naming the byte offset for a malformed payload.
absl::StatusOr<DecodedChanges> DecodeChanges(std::string_view payload);

}  // namespace rbmrec::store

#endif  // RBMREC_STORE_CHANGE_FEED_H_
