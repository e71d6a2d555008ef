#ifndef RBMREC_STORE_PG_VIEWS_H_
#define RBMREC_STORE_PG_VIEWS_H_

// PostgresStore's views (RatingRow::view, store/store.h): the parts of
// UpsertRatings and ReadSnapshot that write and read the `views` table.
// Internal to the store.

#include <cstdint>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "store/checks.h"
#include "store/pg_db.h"
#include "store/store.h"

namespace rbmrec::store::internal {

// Inside the caller's write transaction on `conn`: stores the view rows of
// `rows` (one row per (user, item), keeping the latest timestamp) in one
// statement and returns how many rows were views. `users` / `items` map
// every id of `rows` to its idx.
absl::StatusOr<int64_t> PgUpsertViews(
    PgConn& conn, absl::Span<const RatingRow> rows,
    const absl::flat_hash_map<std::string_view, int64_t>& users,
    const absl::flat_hash_map<std::string_view, int64_t>& items);

// Inside the caller's read transaction on `conn`: adds every stored view to
// `snap`, in (user, item) order.
absl::Status PgReadSnapshotViews(PgConn& conn, SnapshotBuilder* snap);

}  // namespace rbmrec::store::internal

#endif  // RBMREC_STORE_PG_VIEWS_H_
