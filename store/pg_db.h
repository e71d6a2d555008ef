#ifndef RBMREC_STORE_PG_DB_H_
#define RBMREC_STORE_PG_DB_H_

// PostgreSQL plumbing for PostgresStore, over libpq's C API: connections,
// parameterised statements, results, transactions and the mapping of
// SQLSTATEs to absl::Status (see postgres_store.h, "Errors"). Knows nothing
// of the schema. Private to store/.
//
// Thread safety: none of these types is thread-safe; PostgresStore uses each
// connection from one thread at a time.

#include <libpq-fe.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace rbmrec::store::internal {

// `uri` with the password (if any: in the user info, or as a `password`
// parameter of the query or of a key-value string) replaced by "***", for
// messages.
std::string RedactUri(std::string_view uri);

// Settings applied to every new connection.
struct PgSettings {
  int lock_timeout_ms = 5000;      // lock_timeout (0 = wait forever)
  bool synchronous_commit = true;  // synchronous_commit on / off
  bool read_only = false;          // default_transaction_read_only
};

// One statement parameter, sent as text (or binary for bytea); null = SQL
// NULL.
struct PgParam {
  std::string value;
  bool null = false;
  bool binary = false;

  static PgParam Text(std::string_view s) { return {std::string(s)}; }
  // Empty -> NULL.
  static PgParam TextOrNull(std::string_view s) {
    return {std::string(s), s.empty()};
  }
  static PgParam Int(int64_t v) { return {std::to_string(v)}; }
  static PgParam Bool(bool v) { return {v ? "t" : "f"}; }
  static PgParam Double(double v);
  static PgParam Bytes(std::string_view s) {
    return {std::string(s), false, true};
  }
};

// Array literals for unnest($n::T[]): "{1,2,3}" and {"a","b\"c"}.
std::string IntArray(const std::vector<int64_t>& values);
std::string TextArray(const std::vector<std::string_view>& values);
std::string DoubleArray(const std::vector<double>& values);

// A query result (owns the PGresult).
class PgResult {
 public:
  explicit PgResult(PGresult* r) : r_(r, &PQclear) {}
  int rows() const { return PQntuples(r_.get()); }
  bool IsNull(int row, int col) const {
    return PQgetisnull(r_.get(), row, col) != 0;
  }
  std::string_view Text(int row, int col) const {
    return std::string_view(
        PQgetvalue(r_.get(), row, col),
        static_cast<size_t>(PQgetlength(r_.get(), row, col)));
  }
  // 0 for NULL or a malformed value (the schema rules both out).
  int64_t Int(int row, int col) const;
  double Double(int row, int col) const;
  bool Bool(int row, int col) const { return Text(row, col) == "t"; }
  // Rows affected by an INSERT / UPDATE / DELETE.
  int64_t Affected() const;

 private:
  std::unique_ptr<PGresult, void (*)(PGresult*)> r_;
};

class PgConn {
 public:
  // Connects to `uri` (messages name `name`) and applies `settings`.
  // Errors: Unavailable when the server cannot be reached; PermissionDenied
  // for failed authentication; FailedPrecondition for a database that does
  // not exist; InvalidArgument for a malformed URI.
  static absl::StatusOr<std::unique_ptr<PgConn>> Connect(
      const std::string& uri, const std::string& name,
      const PgSettings& settings);

  ~PgConn();
  PgConn(const PgConn&) = delete;
  PgConn& operator=(const PgConn&) = delete;

  // Whether the connection is usable (not broken).
  bool ok() const { return PQstatus(conn_) == CONNECTION_OK; }
  PGconn* raw() const { return conn_; }
  const std::string& name() const { return name_; }

  // Runs one statement with `params` ($1, $2, ...); rows in text format, or
  // binary when `binary_result`. Errors name `what`.
  absl::StatusOr<PgResult> Exec(std::string_view what, const char* sql,
                                const std::vector<PgParam>& params = {},
                                bool binary_result = false);
  // Runs `sql` (one or more statements, no parameters, rows discarded).
  absl::Status Run(std::string_view what, const char* sql);

 private:
  PgConn(PGconn* conn, std::string name, int lock_timeout_ms)
      : conn_(conn),
        name_(std::move(name)),
        lock_timeout_ms_(lock_timeout_ms) {}
  // The status of a failed command (res may be null).
  absl::Status Error(const PGresult* res, std::string_view what) const;

  PGconn* const conn_;
  const std::string name_;
  const int lock_timeout_ms_;
};

// A transaction on a PgConn: rolled back at destruction unless committed
// (and the connection is still usable).
class PgTxn {
 public:
  explicit PgTxn(PgConn& conn) : conn_(conn) {}
  ~PgTxn();
  PgTxn(const PgTxn&) = delete;
  PgTxn& operator=(const PgTxn&) = delete;
  // `begin`: "BEGIN" or e.g. "BEGIN ISOLATION LEVEL REPEATABLE READ".
  absl::Status Begin(const char* begin = "BEGIN");
  absl::Status Commit();

 private:
  PgConn& conn_;
  bool open_ = false;
};

}  // namespace rbmrec::store::internal

#endif  // RBMREC_STORE_PG_DB_H_
