#include "store/pg_views.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "store/status_macros.h"

namespace rbmrec::store::internal {

absl::StatusOr<int64_t> PgUpsertViews(
    PgConn& conn, absl::Span<const RatingRow> rows,
    const absl::flat_hash_map<std::string_view, int64_t>& users,
    const absl::flat_hash_map<std::string_view, int64_t>& items) {
  // (user, item) -> the latest timestamp: ON CONFLICT cannot touch a row
  // twice in one statement, so each pair goes in once.
  absl::flat_hash_map<std::pair<int64_t, int64_t>, int64_t> latest;
  int64_t views = 0;
  for (const RatingRow& r : rows) {
    if (!r.view) continue;
    ++views;
    const auto key =
        std::make_pair(users.find(r.user)->second, items.find(r.item)->second);
    auto [it, fresh] = latest.emplace(key, r.timestamp);
    if (!fresh) it->second = std::max(it->second, r.timestamp);
  }
  if (latest.empty()) return views;
  std::vector<std::pair<std::pair<int64_t, int64_t>, int64_t>> sorted(
      latest.begin(), latest.end());
  // Sorted pairs make concurrent writers take row locks in one order.
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> u, i, ts;
  for (const auto& [pair, t] : sorted) {
    u.push_back(pair.first);
    i.push_back(pair.second);
    ts.push_back(t);
  }
  RBMREC_STORE_RETURN_IF_ERROR(
      conn.Exec("storing views",
                "INSERT INTO views AS v(user_idx, item_idx, ts) "
                "SELECT * FROM unnest($1::bigint[], $2::bigint[], "
                "$3::bigint[]) "
                "ON CONFLICT(user_idx, item_idx) DO UPDATE "
                "SET ts = GREATEST(v.ts, EXCLUDED.ts)",
                {PgParam::Text(IntArray(u)), PgParam::Text(IntArray(i)),
                 PgParam::Text(IntArray(ts))})
          .status());
  return views;
}

absl::Status PgReadSnapshotViews(PgConn& conn, SnapshotBuilder* snap) {
  RBMREC_STORE_ASSIGN_OR_RETURN(
      PgResult r, conn.Exec("reading a snapshot",
                            "SELECT user_idx, item_idx FROM views "
                            "ORDER BY user_idx, item_idx"));
  for (int n = 0; n < r.rows(); ++n) {
    RBMREC_STORE_RETURN_IF_ERROR(snap->AddView(r.Int(n, 0), r.Int(n, 1)));
  }
  return absl::OkStatus();
}

}  // namespace rbmrec::store::internal
