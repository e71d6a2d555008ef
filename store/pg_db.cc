#include "store/pg_db.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "core/error_reason.h"

namespace rbmrec::store::internal {
namespace {

absl::string_view AV(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

// libpq's message on one line: newlines and tabs become single spaces, no
// trailing space.
std::string Trim(const char* msg) {
  std::string s;
  for (const char* p = msg != nullptr ? msg : ""; *p != '\0'; ++p) {
    const bool space = *p == '\n' || *p == '\t' || *p == ' ';
    if (space) {
      if (!s.empty() && s.back() != ' ') s += ' ';
    } else {
      s += *p;
    }
  }
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

void IgnoreNotice(void*, const char*) {}

}  // namespace

namespace {

// `uri` with the value of every password parameter (`?password=...`,
// `&password=...`, or `password=...` / `password='...'` in a key-value
// string) replaced by "***".
std::string RedactPasswordParams(std::string uri) {
  constexpr std::string_view kKey = "password=";
  size_t from = 0;
  while (true) {
    const size_t key = uri.find(kKey, from);
    if (key == std::string::npos) return uri;
    const char before = key == 0 ? ' ' : uri[key - 1];
    const size_t value = key + kKey.size();
    if (before != '?' && before != '&' && before != ' ' && before != '\t') {
      from = value;
      continue;
    }
    size_t end = value;
    if (end < uri.size() && uri[end] == '\'') {
      // A quoted key-value value: up to the closing quote (\' escapes).
      ++end;
      while (end < uri.size() && uri[end] != '\'') {
        end += uri[end] == '\\' ? 2 : 1;
      }
      end = std::min(uri.size(), end + 1);
    } else {
      while (end < uri.size() && uri[end] != '&' && uri[end] != ' ' &&
             uri[end] != '\t') {
        ++end;
      }
    }
    uri.replace(value, end - value, "***");
    from = value + 3;
  }
}

}  // namespace

std::string RedactUri(std::string_view uri) {
  // scheme://[user[:password]@]host...: the password is between the first
  // ':' after "//" and the '@' that ends the user info.
  const size_t start = uri.find("//");
  if (start == std::string_view::npos) {
    return RedactPasswordParams(std::string(uri));
  }
  const size_t at = uri.find('@', start + 2);
  const size_t slash = uri.find('/', start + 2);
  const size_t colon = uri.find(':', start + 2);
  if (at == std::string_view::npos ||
      (slash != std::string_view::npos && slash < at) ||
      colon == std::string_view::npos || colon > at) {
    return RedactPasswordParams(std::string(uri));
  }
  return RedactPasswordParams(
      absl::StrCat(AV(uri.substr(0, colon + 1)), "***", AV(uri.substr(at))));
}

PgParam PgParam::Double(double v) { return {absl::StrFormat("%.17g", v)}; }

std::string IntArray(const std::vector<int64_t>& values) {
  std::string s = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) s += ',';
    absl::StrAppend(&s, values[i]);
  }
  s += '}';
  return s;
}

std::string DoubleArray(const std::vector<double>& values) {
  std::string s = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) s += ',';
    absl::StrAppend(&s, absl::StrFormat("%.17g", values[i]));
  }
  s += '}';
  return s;
}

std::string TextArray(const std::vector<std::string_view>& values) {
  std::string s = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) s += ',';
    s += '"';
    for (char c : values[i]) {
      if (c == '"' || c == '\\') s += '\\';
      s += c;
    }
    s += '"';
  }
  s += '}';
  return s;
}

int64_t PgResult::Int(int row, int col) const {
  int64_t v = 0;
  if (!absl::SimpleAtoi(AV(Text(row, col)), &v)) return 0;
  return v;
}

double PgResult::Double(int row, int col) const {
  double v = 0;
  if (!absl::SimpleAtod(AV(Text(row, col)), &v)) return 0;
  return v;
}

int64_t PgResult::Affected() const {
  int64_t v = 0;
  if (!absl::SimpleAtoi(PQcmdTuples(r_.get()), &v)) return 0;
  return v;
}

absl::StatusOr<std::unique_ptr<PgConn>> PgConn::Connect(
    const std::string& uri, const std::string& name,
    const PgSettings& settings) {
  // Keywords after "dbname" (the URI) would override it; those before are
  // defaults the URI may override.
  const char* keys[] = {"connect_timeout", "application_name", "dbname",
                        nullptr};
  const char* values[] = {"10", "rbmrec", uri.c_str(), nullptr};
  PGconn* conn = PQconnectdbParams(keys, values, /*expand_dbname=*/1);
  if (conn == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("database '%s': out of memory connecting", name));
  }
  if (PQstatus(conn) != CONNECTION_OK) {
    const std::string msg = Trim(PQerrorMessage(conn));
    PQfinish(conn);
    const std::string text =
        absl::StrFormat("cannot connect to database '%s': %s", name, msg);
    if (msg.find("authentication failed") != std::string::npos ||
        msg.find("permission denied") != std::string::npos ||
        msg.find("no pg_hba.conf entry") != std::string::npos) {
      return absl::PermissionDeniedError(text);
    }
    if (msg.find("does not exist") != std::string::npos) {
      return absl::FailedPreconditionError(text);
    }
    if (msg.find("invalid") != std::string::npos &&
        (msg.find("URI") != std::string::npos ||
         msg.find("connection option") != std::string::npos)) {
      return absl::InvalidArgumentError(text);
    }
    return absl::UnavailableError(text);
  }
  PQsetNoticeProcessor(conn, &IgnoreNotice, nullptr);
  std::unique_ptr<PgConn> c(new PgConn(conn, name, settings.lock_timeout_ms));
  const std::string setup = absl::StrFormat(
      "SET lock_timeout = %d; SET synchronous_commit = %s; "
      "SET default_transaction_read_only = %s; SET extra_float_digits = 3; "
      "SET client_min_messages = warning",
      settings.lock_timeout_ms, settings.synchronous_commit ? "on" : "off",
      settings.read_only ? "on" : "off");
  absl::Status st = c->Run("configuring the connection", setup.c_str());
  if (!st.ok()) return st;
  return c;
}

PgConn::~PgConn() { PQfinish(conn_); }

absl::Status PgConn::Error(const PGresult* res, std::string_view what) const {
  const char* state =
      res != nullptr ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  const std::string msg =
      Trim(res != nullptr ? PQresultErrorMessage(res) : PQerrorMessage(conn_));
  const std::string sqlstate = state != nullptr ? state : "";
  const std::string text =
      absl::StrFormat("%s: database '%s': %s%s", AV(what), name_, msg,
                      sqlstate.empty() ? "" : " (SQLSTATE " + sqlstate + ")");
  const std::string cls = sqlstate.substr(0, 2);
  if (!ok() || sqlstate.empty() || cls == "08" || sqlstate == "57P01" ||
      sqlstate == "57P02" || sqlstate == "57P03") {
    return absl::UnavailableError(text);
  }
  if (sqlstate == "53100") {
    return WithReason(absl::ResourceExhaustedError("storage full: " + text),
                      kReasonStorageFull);
  }
  if (cls == "53" || cls == "54") return absl::ResourceExhaustedError(text);
  if (sqlstate == "55P03" || sqlstate == "40001" || sqlstate == "40P01") {
    return WithReason(
        absl::UnavailableError(absl::StrFormat(
            "%s: database '%s' is locked by another connection or process "
            "(gave up after busy_timeout_ms=%d): %s",
            AV(what), name_, lock_timeout_ms_, msg)),
        kReasonDatabaseLocked);
  }
  if (cls == "23" || sqlstate == "25006" || sqlstate == "3D000") {
    return absl::FailedPreconditionError(text);
  }
  if (sqlstate == "42501" || cls == "28") {
    return absl::PermissionDeniedError(text);
  }
  if (sqlstate == "XX001" || sqlstate == "XX002") {
    return absl::DataLossError(text);
  }
  if (sqlstate == "57014") return absl::CancelledError(text);
  if (cls == "22") return absl::InvalidArgumentError(text);
  return absl::InternalError(text);
}

absl::StatusOr<PgResult> PgConn::Exec(std::string_view what, const char* sql,
                                      const std::vector<PgParam>& params,
                                      bool binary_result) {
  std::vector<const char*> values(params.size());
  std::vector<int> lengths(params.size());
  std::vector<int> formats(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    values[i] = params[i].null ? nullptr : params[i].value.c_str();
    lengths[i] = static_cast<int>(params[i].value.size());
    formats[i] = params[i].binary ? 1 : 0;
  }
  PGresult* raw = PQexecParams(conn_, sql, static_cast<int>(params.size()),
                               nullptr, values.data(), lengths.data(),
                               formats.data(), binary_result ? 1 : 0);
  PgResult res(raw);
  const ExecStatusType st =
      raw != nullptr ? PQresultStatus(raw) : PGRES_FATAL_ERROR;
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) return Error(raw, what);
  return res;
}

absl::Status PgConn::Run(std::string_view what, const char* sql) {
  PGresult* res = PQexec(conn_, sql);
  const ExecStatusType st =
      res != nullptr ? PQresultStatus(res) : PGRES_FATAL_ERROR;
  absl::Status out = absl::OkStatus();
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) out = Error(res, what);
  PQclear(res);
  return out;
}

PgTxn::~PgTxn() {
  if (open_ && conn_.ok()) (void)conn_.Run("rolling back", "ROLLBACK");
}

absl::Status PgTxn::Begin(const char* begin) {
  absl::Status st = conn_.Run("beginning a transaction", begin);
  open_ = st.ok();
  return st;
}

absl::Status PgTxn::Commit() {
  open_ = false;
  return conn_.Run("committing", "COMMIT");
}

}  // namespace rbmrec::store::internal
