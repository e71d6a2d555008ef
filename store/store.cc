#include "store/store.h"

#include <utility>

#include "store/postgres_store.h"
#include "store/sqlite_store.h"

namespace rbmrec::store {

bool Store::IsPostgresPath(std::string_view path) {
  return path.rfind("postgresql://", 0) == 0 ||
         path.rfind("postgres://", 0) == 0;
}

absl::StatusOr<std::unique_ptr<Store>> Store::Open(
    const std::string& path, const StoreOptions& options) {
  if (IsPostgresPath(path)) {
    absl::StatusOr<std::unique_ptr<PostgresStore>> pg =
        PostgresStore::Open(path, options);
    if (!pg.ok()) return std::move(pg).status();
    return std::unique_ptr<Store>(std::move(pg).value());
  }
  absl::StatusOr<std::unique_ptr<SqliteStore>> sqlite =
      SqliteStore::Open(path, options);
  if (!sqlite.ok()) return std::move(sqlite).status();
  return std::unique_ptr<Store>(std::move(sqlite).value());
}

namespace {
absl::Status NotShared() {
  return absl::UnimplementedError(
      "this database is not shared between processes (SQLite): no change "
      "feed or leadership");
}
}  // namespace

absl::StatusOr<std::unique_ptr<ChangeFeed>> Store::Subscribe() const {
  return NotShared();
}

absl::StatusOr<std::unique_ptr<LeaderLease>> Store::TryLead(
    std::string_view /*address*/) {
  return NotShared();
}

absl::StatusOr<std::string> Store::LeaderAddress() const { return NotShared(); }

}  // namespace rbmrec::store
