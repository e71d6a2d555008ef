#ifndef RBMREC_TESTS_STORE_STORE_TEST_UTIL_H_
#define RBMREC_TESTS_STORE_STORE_TEST_UTIL_H_

// Helpers shared by the store tests: status assertions, a scratch directory,
// a raw SQLite connection for poking at a file behind the Store's back, and
// the backends the backend-neutral tests run on (StoreBackends).

#include <libpq-fe.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "store/store.h"

namespace rbmrec::store::testing_util {

#define ASSERT_OK(expr)                         \
  do {                                          \
    const absl::Status assert_ok_ = (expr);     \
    ASSERT_TRUE(assert_ok_.ok()) << assert_ok_; \
  } while (0)

#define ASSERT_OK_AND_ASSIGN(lhs, expr) \
  ASSERT_OK_AND_ASSIGN_IMPL(STORE_TEST_CONCAT(so_, __LINE__), lhs, expr)
#define STORE_TEST_CONCAT_INNER(a, b) a##b
#define STORE_TEST_CONCAT(a, b) STORE_TEST_CONCAT_INNER(a, b)
#define ASSERT_OK_AND_ASSIGN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  ASSERT_TRUE(tmp.ok()) << tmp.status();          \
  lhs = std::move(tmp).value()

// A fresh directory under testing::TempDir(), removed at destruction.
class ScratchDir {
 public:
  ScratchDir() {
    std::string templ = testing::TempDir();
    if (templ.empty() || templ.back() != '/') templ += '/';
    templ += "rbmrec_store_XXXXXX";
    char* dir = mkdtemp(templ.data());
    if (dir == nullptr) std::abort();
    path_ = dir;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A raw sqlite3 connection for poking at a file behind the Store's back.
class RawDb {
 public:
  explicit RawDb(const std::string& path) {
    if (sqlite3_open(path.c_str(), &db_) != SQLITE_OK) std::abort();
  }
  ~RawDb() { sqlite3_close(db_); }
  int Exec(const std::string& sql) {
    return sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr);
  }
  int64_t QueryInt(const std::string& sql) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr) != SQLITE_OK) {
      return -1;
    }
    int64_t v = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int64(s, 0) : -1;
    sqlite3_finalize(s);
    return v;
  }
  std::string QueryText(const std::string& sql) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr) != SQLITE_OK) {
      return "<error>";
    }
    std::string v;
    if (sqlite3_step(s) == SQLITE_ROW) {
      v = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
    }
    sqlite3_finalize(s);
    return v;
  }

 private:
  sqlite3* db_ = nullptr;
};

inline RatingRow R(std::string user, std::string item, double rating,
                   int64_t ts = 0) {
  return RatingRow{std::move(user), std::move(item), rating, ts};
}

// A view (RatingRow::view) of `item` by `user` at `ts`.
inline RatingRow View(std::string user, std::string item, int64_t ts = 0) {
  RatingRow r{std::move(user), std::move(item), 0.0, ts};
  r.view = true;
  return r;
}

// Snapshot rows as "user/item=rating" strings, for easy comparison.
inline std::vector<std::string> Flatten(const Snapshot& s) {
  std::vector<std::string> out;
  for (const Snapshot::Row& r : s.ratings) {
    out.push_back(absl::StrCat(s.users[static_cast<size_t>(r.user)], "/",
                               s.items[static_cast<size_t>(r.item)], "=",
                               r.rating));
  }
  return out;
}

// One way of opening a Store; the backend-neutral tests are parameterised
// over these. `open(dir, options)` opens a fresh, empty store whose files (if
// any) live under `dir`. A new backend (or configuration) is one more entry
// in StoreBackends().
struct StoreBackend {
  std::string name;  // a gtest parameter name
  bool persistent;   // data survives closing and reopening at `dir`
  std::function<absl::StatusOr<std::unique_ptr<Store>>(
      const std::string& dir, const StoreOptions& options)>
      open;
  // Why the backend cannot run here (the tests are then SKIPPED with it);
  // empty when it can. Null: always available.
  std::function<std::string()> unavailable;
};

// gtest prints a parameter by its name (not its bytes).
inline void PrintTo(const StoreBackend& backend, std::ostream* os) {
  *os << backend.name;
}

// The PostgreSQL server the PostgreSQL tests use: RBMREC_TEST_PG, a libpq URI
// of an existing database on it (tests/store/pg_test.sh starts a server and
// sets it). Each test gets a database of its own, created through that URI.
inline std::string TestPgUri() {
  const char* uri = std::getenv("RBMREC_TEST_PG");
  return uri != nullptr ? uri : "";
}

// `uri` with its database name replaced by `db`.
inline std::string WithDatabase(const std::string& uri, const std::string& db) {
  const size_t q = uri.find('?');
  const std::string base = uri.substr(0, q);
  const std::string query = q == std::string::npos ? "" : uri.substr(q);
  const size_t scheme = base.find("://");
  const size_t slash = base.find('/', scheme + 3);
  return (slash == std::string::npos ? base : base.substr(0, slash)) + "/" +
         db + query;
}

// The URI of a PostgreSQL database for `dir` (a test's scratch directory),
// created on first use: the same dir gives the same database, so a test can
// close and reopen its store.
inline absl::StatusOr<std::string> TestPgDatabase(const std::string& dir) {
  const std::string db = absl::StrCat(
      "rbmrec_t", absl::Hex(std::hash<std::string>()(dir)), "_", getpid());
  const std::string admin = TestPgUri();
  PGconn* conn = PQconnectdb(admin.c_str());
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string msg = PQerrorMessage(conn);
    PQfinish(conn);
    return absl::UnavailableError("RBMREC_TEST_PG: " + msg);
  }
  const char* const params[] = {db.c_str()};
  PGresult* r = PQexecParams(conn, "SELECT 1 FROM pg_database WHERE datname=$1",
                             1, nullptr, params, nullptr, nullptr, 0);
  const bool exists = PQntuples(r) > 0;
  PQclear(r);
  if (!exists) {
    r = PQexec(conn, ("CREATE DATABASE \"" + db + "\"").c_str());
    const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    std::string msg = PQerrorMessage(conn);
    PQclear(r);
    if (!ok) {
      PQfinish(conn);
      return absl::InternalError("CREATE DATABASE: " + msg);
    }
  }
  PQfinish(conn);
  return WithDatabase(admin, db);
}

inline std::vector<StoreBackend> StoreBackends() {
  return {
      {"SqliteFile", true,
       [](const std::string& dir, const StoreOptions& options) {
         return Store::Open(dir + "/test.db", options);
       },
       nullptr},
      {"SqliteMemory", false,
       [](const std::string&, const StoreOptions& options) {
         return Store::Open(":memory:", options);
       },
       nullptr},
      {"Postgres", true,
       [](const std::string& dir, const StoreOptions& options)
           -> absl::StatusOr<std::unique_ptr<Store>> {
         absl::StatusOr<std::string> uri = TestPgDatabase(dir);
         if (!uri.ok()) return uri.status();
         return Store::Open(*uri, options);
       },
       [] {
         return TestPgUri().empty()
                    ? std::string(
                          "RBMREC_TEST_PG is not set: the PostgreSQL store "
                          "tests run under tests/store/pg_test.sh (ctest "
                          "store.postgres)")
                    : std::string();
       }},
  };
}

}  // namespace rbmrec::store::testing_util

#endif  // RBMREC_TESTS_STORE_STORE_TEST_UTIL_H_
