// SqliteStore's item metadata: PutItems, SetItemsHidden, GetTitles, GetItem
// and ReadCatalogue (store/sqlite_store.h).

#include <sqlite3.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "store/checks.h"
#include "store/sqlite_db.h"
#include "store/sqlite_models.h"
#include "store/sqlite_store.h"
#include "store/status_macros.h"

namespace rbmrec::store {

using internal::CacheUndo;
using internal::ColumnText;
using internal::Connection;
using internal::Stmt;
using internal::Txn;

absl::Status SqliteStore::PutItems(absl::Span<const ItemRow> items) {
  RBMREC_STORE_RETURN_IF_ERROR(CheckWritable());
  RBMREC_STORE_RETURN_IF_ERROR(internal::CheckItemRows(items));
  if (items.empty()) return absl::OkStatus();

  absl::MutexLock lock(&writer_.mu);
  Connection& conn = *writer_.conn;
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].attributes_json.empty()) continue;
    RBMREC_STORE_ASSIGN_OR_RETURN(
        bool ok, internal::IsJsonObject(conn, items[i].attributes_json));
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrFormat("item %d: attributes_json is not a JSON object", i));
    }
  }
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * insert,
      conn.Prepare("INSERT INTO items(ext_id, title, attributes, categories, "
                   "hidden) VALUES(?1, ?2, ?3, ?4, ?5)"));
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * update,
      conn.Prepare("UPDATE items SET title=?2, attributes=?3, categories=?4, "
                   "hidden=?5 WHERE idx=?1"));
  CacheUndo undo(&item_idx_);
  Txn txn(conn);
  RBMREC_STORE_RETURN_IF_ERROR(txn.Begin(Txn::kWrite));
  for (const ItemRow& item : items) {
    auto it = item_idx_.find(item.item);
    const bool known = it != item_idx_.end();
    Stmt s(conn, known ? update : insert);
    if (known) {
      s.BindInt(1, it->second);
    } else {
      s.BindText(1, item.item);
    }
    s.BindTextOrNull(2, item.title);
    s.BindTextOrNull(3, item.attributes_json);
    const std::string categories = internal::JoinCategories(item.categories);
    s.BindTextOrNull(4, categories);
    s.BindInt(5, item.hidden ? 1 : 0);
    RBMREC_STORE_RETURN_IF_ERROR(s.Run());
    if (!known) undo.Add(item.item, sqlite3_last_insert_rowid(conn.db()));
  }
  RBMREC_STORE_RETURN_IF_ERROR(txn.Commit());
  undo.Commit();
  return absl::OkStatus();
}

absl::Status SqliteStore::SetItemsHidden(absl::Span<const std::string> items,
                                         bool hidden) {
  RBMREC_STORE_RETURN_IF_ERROR(CheckWritable());
  RBMREC_STORE_RETURN_IF_ERROR(internal::CheckItemIds(items));
  if (items.empty()) return absl::OkStatus();
  absl::MutexLock lock(&writer_.mu);
  Connection& conn = *writer_.conn;
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * insert,
      conn.Prepare("INSERT INTO items(ext_id, hidden) VALUES(?1, ?2)"));
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * update,
      conn.Prepare("UPDATE items SET hidden=?2 WHERE idx=?1"));
  CacheUndo undo(&item_idx_);
  Txn txn(conn);
  RBMREC_STORE_RETURN_IF_ERROR(txn.Begin(Txn::kWrite));
  for (const std::string& item : items) {
    auto it = item_idx_.find(item);
    const bool known = it != item_idx_.end();
    Stmt s(conn, known ? update : insert);
    if (known) {
      s.BindInt(1, it->second);
    } else {
      s.BindText(1, item);
    }
    s.BindInt(2, hidden ? 1 : 0);
    RBMREC_STORE_RETURN_IF_ERROR(s.Run());
    if (!known) undo.Add(item, sqlite3_last_insert_rowid(conn.db()));
  }
  RBMREC_STORE_RETURN_IF_ERROR(txn.Commit());
  undo.Commit();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> SqliteStore::GetTitles(
    absl::Span<const std::string> items) const {
  absl::MutexLock lock(&reader_->mu);
  Connection& conn = *reader_->conn;
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * stmt,
      conn.Prepare("SELECT title FROM items WHERE ext_id=?1"));
  Txn txn(conn);
  RBMREC_STORE_RETURN_IF_ERROR(txn.Begin(Txn::kRead));
  std::vector<std::string> titles;
  titles.reserve(items.size());
  for (const std::string& item : items) {
    Stmt s(conn, stmt);
    s.BindText(1, item);
    RBMREC_STORE_ASSIGN_OR_RETURN(bool row, s.Next());
    titles.emplace_back(row ? ColumnText(stmt, 0) : std::string_view());
  }
  RBMREC_STORE_RETURN_IF_ERROR(txn.Commit());
  return titles;
}

absl::StatusOr<std::optional<ItemRow>> SqliteStore::GetItem(
    std::string_view item) const {
  absl::MutexLock lock(&reader_->mu);
  Connection& conn = *reader_->conn;
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * stmt,
      conn.Prepare("SELECT title, attributes, categories, hidden FROM items "
                   "WHERE ext_id=?1"));
  Txn txn(conn);
  RBMREC_STORE_RETURN_IF_ERROR(txn.Begin(Txn::kRead));
  std::optional<ItemRow> out;
  {
    Stmt s(conn, stmt);
    s.BindText(1, item);
    RBMREC_STORE_ASSIGN_OR_RETURN(bool row, s.Next());
    if (row) {
      out.emplace();
      out->item = std::string(item);
      out->title = std::string(ColumnText(stmt, 0));
      out->attributes_json = std::string(ColumnText(stmt, 1));
      out->categories = internal::SplitCategories(ColumnText(stmt, 2));
      out->hidden = sqlite3_column_int64(stmt, 3) != 0;
    }
  }
  RBMREC_STORE_RETURN_IF_ERROR(txn.Commit());
  return out;
}

absl::StatusOr<std::vector<CatalogueRow>> SqliteStore::ReadCatalogue() const {
  absl::MutexLock lock(&reader_->mu);
  Connection& conn = *reader_->conn;
  RBMREC_STORE_ASSIGN_OR_RETURN(
      sqlite3_stmt * stmt,
      conn.Prepare("SELECT ext_id, categories, hidden FROM items "
                   "WHERE categories IS NOT NULL OR hidden <> 0 ORDER BY idx"));
  Txn txn(conn);
  RBMREC_STORE_RETURN_IF_ERROR(txn.Begin(Txn::kRead));
  std::vector<CatalogueRow> out;
  Stmt s(conn, stmt);
  for (;;) {
    RBMREC_STORE_ASSIGN_OR_RETURN(bool row, s.Next());
    if (!row) break;
    CatalogueRow r;
    r.item = std::string(ColumnText(stmt, 0));
    r.categories = internal::SplitCategories(ColumnText(stmt, 1));
    r.hidden = sqlite3_column_int64(stmt, 2) != 0;
    out.push_back(std::move(r));
  }
  RBMREC_STORE_RETURN_IF_ERROR(txn.Commit());
  return out;
}

}  // namespace rbmrec::store
