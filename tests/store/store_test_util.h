#ifndef RBMREC_TESTS_STORE_STORE_TEST_UTIL_H_
#define RBMREC_TESTS_STORE_STORE_TEST_UTIL_H_

// Helpers shared by the store tests: status assertions, a scratch directory,
// a raw SQLite connection for poking at a file behind the Store's back, and
// the backends the backend-neutral tests run on (StoreBackends).

#include <sqlite3.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
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
};

inline std::vector<StoreBackend> StoreBackends() {
  return {
      {"SqliteFile", true,
       [](const std::string& dir, const StoreOptions& options) {
         return Store::Open(dir + "/test.db", options);
       }},
      {"SqliteMemory", false,
       [](const std::string&, const StoreOptions& options) {
         return Store::Open(":memory:", options);
       }},
  };
}

}  // namespace rbmrec::store::testing_util

#endif  // RBMREC_TESTS_STORE_STORE_TEST_UTIL_H_
