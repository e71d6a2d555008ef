// The SQLite plumbing of the store (store/sqlite_db.h): error mapping,
// statements, transactions, connection setup.

#include "store/sqlite_db.h"

#include <sqlite3.h>

#include <string>

#include "core/error_reason.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/store/store_test_util.h"

namespace rbmrec::store::internal {
namespace {

using ::rbmrec::store::testing_util::RawDb;
using ::rbmrec::store::testing_util::ScratchDir;
using ::testing::HasSubstr;

std::unique_ptr<Connection> OpenOrDie(const std::string& path,
                                      int busy_timeout_ms = 100) {
  auto conn = Connection::Open(
      path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
      busy_timeout_ms);
  if (!conn.ok()) std::abort();
  return std::move(conn).value();
}

TEST(SqliteErrorTest, MapsResultCodesToStatusCodesAndReasons) {
  struct Case {
    int rc;
    absl::StatusCode code;
    std::string reason;
  };
  const Case cases[] = {
      {SQLITE_FULL, absl::StatusCode::kResourceExhausted,
       std::string(kReasonStorageFull)},
      {SQLITE_BUSY, absl::StatusCode::kUnavailable,
       std::string(kReasonDatabaseLocked)},
      {SQLITE_BUSY_SNAPSHOT, absl::StatusCode::kUnavailable,
       std::string(kReasonDatabaseLocked)},
      {SQLITE_LOCKED, absl::StatusCode::kUnavailable,
       std::string(kReasonDatabaseLocked)},
      {SQLITE_IOERR_WRITE, absl::StatusCode::kUnavailable, ""},
      {SQLITE_TOOBIG, absl::StatusCode::kResourceExhausted, ""},
      {SQLITE_NOMEM, absl::StatusCode::kResourceExhausted, ""},
      {SQLITE_CORRUPT, absl::StatusCode::kDataLoss, ""},
      {SQLITE_NOTADB, absl::StatusCode::kDataLoss, ""},
      {SQLITE_READONLY, absl::StatusCode::kPermissionDenied, ""},
      {SQLITE_CANTOPEN, absl::StatusCode::kFailedPrecondition, ""},
      {SQLITE_CONSTRAINT_UNIQUE, absl::StatusCode::kFailedPrecondition, ""},
      {SQLITE_INTERRUPT, absl::StatusCode::kCancelled, ""},
      {SQLITE_ERROR, absl::StatusCode::kInternal, ""},
  };
  for (const Case& c : cases) {
    const absl::Status s = SqliteError(nullptr, c.rc, "/x/y.db", 250, "doing");
    EXPECT_EQ(s.code(), c.code) << c.rc << ": " << s;
    EXPECT_EQ(ReasonOf(s), c.reason) << c.rc << ": " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("/x/y.db")) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("doing")) << s;
  }
  const absl::Status full = SqliteError(nullptr, SQLITE_FULL, "/d.db", 0, "w");
  EXPECT_THAT(std::string(full.message()),
              testing::StartsWith("storage full: "));
  const absl::Status busy =
      SqliteError(nullptr, SQLITE_BUSY, "/d.db", 250, "w");
  EXPECT_THAT(std::string(busy.message()), HasSubstr("busy_timeout_ms=250"));
  EXPECT_THAT(std::string(busy.message()), HasSubstr("locked"));
}

TEST(SqliteDbTest, TxnRollsBackUnlessCommitted) {
  ScratchDir dir;
  const std::string path = dir.File("txn.db");
  std::unique_ptr<Connection> conn = OpenOrDie(path);
  ASSERT_OK(conn->Exec("CREATE TABLE t(x INTEGER)", "create"));
  ASSERT_OK_AND_ASSIGN(sqlite3_stmt * insert,
                       conn->Prepare("INSERT INTO t VALUES(?1)"));
  {
    Txn txn(*conn);
    ASSERT_OK(txn.Begin(Txn::kWrite));
    EXPECT_TRUE(conn->InTransaction());
    Stmt s(*conn, insert);
    s.BindInt(1, 1);
    ASSERT_OK(s.Run());
  }  // not committed
  EXPECT_FALSE(conn->InTransaction());
  ASSERT_OK_AND_ASSIGN(int64_t n, conn->QueryInt("SELECT count(*) FROM t"));
  EXPECT_EQ(n, 0);
  {
    Txn txn(*conn);
    ASSERT_OK(txn.Begin(Txn::kWrite));
    Stmt s(*conn, insert);
    s.BindInt(1, 2);
    ASSERT_OK(s.Run());
    ASSERT_OK(txn.Commit());
  }
  ASSERT_OK_AND_ASSIGN(n, conn->QueryInt("SELECT sum(x) FROM t"));
  EXPECT_EQ(n, 2);
  // The statement is cached and was reset: it can run again.
  ASSERT_OK_AND_ASSIGN(sqlite3_stmt * again,
                       conn->Prepare("INSERT INTO t VALUES(?1)"));
  EXPECT_EQ(again, insert);
}

TEST(SqliteDbTest, StmtReportsBindAndStepErrors) {
  ScratchDir dir;
  std::unique_ptr<Connection> conn = OpenOrDie(dir.File("stmt.db"));
  ASSERT_OK(conn->Exec("CREATE TABLE t(x INTEGER UNIQUE)", "create"));
  ASSERT_OK_AND_ASSIGN(sqlite3_stmt * insert,
                       conn->Prepare("INSERT INTO t VALUES(?1)"));
  {
    Stmt s(*conn, insert);
    s.BindInt(2, 1);  // no such parameter
    const absl::Status st = s.Run();
    EXPECT_FALSE(st.ok());
    EXPECT_THAT(std::string(st.message()), HasSubstr("binding"));
  }
  for (int k = 0; k < 2; ++k) {
    Stmt s(*conn, insert);
    s.BindInt(1, 7);
    const absl::Status st = s.Run();
    if (k == 0) {
      ASSERT_OK(st);
    } else {
      EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
    }
  }
  const absl::StatusOr<sqlite3_stmt*> bad = conn->Prepare("SELEC 1");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("SELEC 1"));
}

TEST(SqliteDbTest, ConfigureWriterOnANewFile) {
  ScratchDir dir;
  const std::string path = dir.File("w.db");
  std::unique_ptr<Connection> conn = OpenOrDie(path);
  ASSERT_OK(ConfigureWriter(*conn, WriterPragmas{}));
  ASSERT_OK(conn->Exec("CREATE TABLE t(x)", "create"));
  ASSERT_OK_AND_ASSIGN(int64_t mode, conn->QueryInt("PRAGMA auto_vacuum"));
  EXPECT_EQ(mode, 2);
  ASSERT_OK_AND_ASSIGN(std::string journal,
                       conn->QueryText("PRAGMA journal_mode"));
  EXPECT_EQ(journal, "wal");
  ASSERT_OK_AND_ASSIGN(int64_t limit,
                       conn->QueryInt("PRAGMA journal_size_limit"));
  EXPECT_EQ(limit, 64 << 20);
  ASSERT_OK_AND_ASSIGN(int64_t fk, conn->QueryInt("PRAGMA foreign_keys"));
  EXPECT_EQ(fk, 1);
}

TEST(SqliteDbTest, SetMaxBytesCapsTheFile) {
  ScratchDir dir;
  std::unique_ptr<Connection> conn = OpenOrDie(dir.File("cap.db"));
  ASSERT_OK(ConfigureWriter(*conn, WriterPragmas{}));
  EXPECT_EQ(SetMaxBytes(*conn, -1).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_OK(conn->Exec("CREATE TABLE t(b BLOB)", "create"));
  ASSERT_OK(SetMaxBytes(*conn, 64 * 4096 + 100));
  ASSERT_OK_AND_ASSIGN(int64_t pages, conn->QueryInt("PRAGMA max_page_count"));
  EXPECT_EQ(pages, 64);
  const absl::Status full =
      conn->Exec("INSERT INTO t VALUES(randomblob(1000000))", "inserting");
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
  EXPECT_EQ(ReasonOf(full), kReasonStorageFull);
  // 0 lifts the limit.
  ASSERT_OK(SetMaxBytes(*conn, 0));
  ASSERT_OK(conn->Exec("INSERT INTO t VALUES(randomblob(1000000))", "again"));
  ASSERT_OK_AND_ASSIGN(int64_t bytes, DatabasePageBytes(*conn));
  EXPECT_GT(bytes, 1000000);
}

TEST(SqliteDbTest, BusyWriterIsDatabaseLocked) {
  ScratchDir dir;
  const std::string path = dir.File("busy.db");
  std::unique_ptr<Connection> conn = OpenOrDie(path, /*busy_timeout_ms=*/50);
  ASSERT_OK(ConfigureWriter(*conn, WriterPragmas{}));
  ASSERT_OK(conn->Exec("CREATE TABLE t(x)", "create"));
  RawDb other(path);
  ASSERT_EQ(other.Exec("BEGIN EXCLUSIVE"), SQLITE_OK);
  Txn txn(*conn);
  const absl::Status locked = txn.Begin(Txn::kWrite);
  EXPECT_EQ(locked.code(), absl::StatusCode::kUnavailable) << locked;
  EXPECT_EQ(ReasonOf(locked), kReasonDatabaseLocked);
  EXPECT_THAT(std::string(locked.message()), HasSubstr(path));
  // A reader still reads (WAL).
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Connection> reader,
                       OpenReader(path, /*read_only_file=*/true, 50));
  ASSERT_OK_AND_ASSIGN(int64_t n, reader->QueryInt("SELECT count(*) FROM t"));
  EXPECT_EQ(n, 0);
  EXPECT_FALSE(reader->Exec("INSERT INTO t VALUES(1)", "write").ok());
  ASSERT_EQ(other.Exec("COMMIT"), SQLITE_OK);
  ASSERT_OK(txn.Begin(Txn::kWrite));
  ASSERT_OK(txn.Commit());
}

}  // namespace
}  // namespace rbmrec::store::internal
