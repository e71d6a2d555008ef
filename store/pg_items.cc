// PostgresStore's reads of item metadata: GetTitles, GetItem and
// ReadCatalogue
// (store/postgres_store.h).

#include <optional>
#include <string>
#include <vector>

#include "store/checks.h"
#include "store/pg_db.h"
#include "store/pg_models.h"
#include "store/postgres_store.h"
#include "store/status_macros.h"

namespace rbmrec::store {

using internal::PgParam;
using internal::PgResult;
using internal::TextArray;

absl::StatusOr<std::vector<std::string>> PostgresStore::GetTitles(
    absl::Span<const std::string> items) const {
  std::vector<std::string> titles(items.size());
  if (items.empty()) return titles;
  ReaderLease conn(this);
  RBMREC_STORE_RETURN_IF_ERROR(conn.Acquire());
  std::vector<std::string_view> ids(items.begin(), items.end());
  RBMREC_STORE_ASSIGN_OR_RETURN(
      PgResult r, (*conn).Exec("reading titles",
                               "SELECT t.n, i.title FROM unnest($1::text[]) "
                               "WITH ORDINALITY AS t(x, n) "
                               "JOIN items i ON i.ext_id = t.x",
                               {PgParam::Text(TextArray(ids))}));
  for (int i = 0; i < r.rows(); ++i) {
    const int64_t n = r.Int(i, 0);
    if (n >= 1 && static_cast<size_t>(n) <= titles.size() && !r.IsNull(i, 1)) {
      titles[static_cast<size_t>(n - 1)] = std::string(r.Text(i, 1));
    }
  }
  return titles;
}

absl::StatusOr<std::optional<ItemRow>> PostgresStore::GetItem(
    std::string_view item) const {
  ReaderLease conn(this);
  RBMREC_STORE_RETURN_IF_ERROR(conn.Acquire());
  RBMREC_STORE_ASSIGN_OR_RETURN(
      PgResult r,
      (*conn).Exec("reading an item",
                   "SELECT title, attributes, categories, hidden FROM items "
                   "WHERE ext_id = $1",
                   {PgParam::Text(item)}));
  std::optional<ItemRow> out;
  if (r.rows() == 0) return out;
  out.emplace();
  out->item = std::string(item);
  if (!r.IsNull(0, 0)) out->title = std::string(r.Text(0, 0));
  if (!r.IsNull(0, 1)) out->attributes_json = std::string(r.Text(0, 1));
  if (!r.IsNull(0, 2))
    out->categories = internal::SplitCategories(r.Text(0, 2));
  out->hidden = r.Bool(0, 3);
  return out;
}

absl::StatusOr<std::vector<CatalogueRow>> PostgresStore::ReadCatalogue() const {
  ReaderLease conn(this);
  RBMREC_STORE_RETURN_IF_ERROR(conn.Acquire());
  RBMREC_STORE_ASSIGN_OR_RETURN(
      PgResult r,
      (*conn).Exec("reading the catalogue",
                   "SELECT ext_id, categories, hidden FROM items "
                   "WHERE categories IS NOT NULL OR hidden ORDER BY idx"));
  std::vector<CatalogueRow> out;
  out.reserve(static_cast<size_t>(r.rows()));
  for (int i = 0; i < r.rows(); ++i) {
    CatalogueRow row;
    row.item = std::string(r.Text(i, 0));
    if (!r.IsNull(i, 1)) {
      row.categories = internal::SplitCategories(r.Text(i, 1));
    }
    row.hidden = r.Bool(i, 2);
    out.push_back(std::move(row));
  }
  return out;
}

}  // namespace rbmrec::store
