#ifndef RBMREC_CLIENT_COMMANDS_H_
#define RBMREC_CLIENT_COMMANDS_H_

// The rbmrec CLI: runs one command line against a server and prints the
// result. main.cc only builds the Environment and calls RunCli.

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "client/security.h"
#include "core/readers.h"

namespace rbmrec::client {

// Exit codes of the CLI.
inline constexpr int kExitOk = 0;
// Usage error (unknown command or flag, bad argument), unreadable input
// file or one without any rating (empty, only a header, or every line
// malformed under --lenient), or unusable TLS/token setting (unreadable CA,
// certificate, key or token file); the message names the argument, flag,
// variable or file line.
inline constexpr int kExitUsage = 1;
// An RPC failed ("error: <CODE>: <message>", then a "hint: " line when there
// is something to do: e.g. for UNAUTHENTICATED, PERMISSION_DENIED or a failed
// TLS handshake, naming the flag to use), or the server answered but the
// outcome is a failure (training FAILED/CANCELLED, health not SERVING, an
// import whose counts do not add up to the rows sent, an evaluation that
// could score no rating). A failed import also prints the rows certainly
// committed and that re-running it is safe.
inline constexpr int kExitRpc = 2;
// `import` succeeded but the server rejected some rows (listed with their
// file lines); not used with --allow-rejected.
inline constexpr int kExitRejected = 3;

// What the CLI needs from the process environment.
struct Environment {
  std::string server_env;  // $RBMREC_SERVER, "" when unset
  // $RBMREC_TLS_CA, $RBMREC_TLS_CERT, ..., $RBMREC_TOKEN (client/security.h;
  // SecurityEnvFromProcess).
  SecuritySettings security_env;
  bool stderr_is_tty = false;  // redraw progress lines with '\r'
  bool unicode = true;         // bars with block characters, else ASCII
  // When true (main only), `train` catches SIGINT to cancel the job.
  bool handle_signals = false;
};

// Runs the command line `args` (without the program name). Normal output goes
// to `out`; progress, warnings and errors to `err`. With --json, `out` gets
// exactly one JSON object (also for errors: {"error": {"code", "message",
// "exit_code"}, plus "reason" when the server sent one and, for a failed
// import, "committed_rows" and "committed_batches" (null when unknown)}).
// --help output goes to `out`. Returns the exit code.
int RunCli(const std::vector<std::string>& args, const Environment& env,
           std::ostream& out, std::ostream& err);

// The file line number of RejectedRow{batch, row} when `rows` were sent in
// batches of `batch_size` (ImportRatings); 0 when out of range.
int64_t SourceLine(const std::vector<RawRating>& rows, int batch_size,
                   int64_t batch, int32_t row);

// Groups ratings by user in order of first appearance; each group holds the
// indices of that user's rows in file order.
struct UserGroup {
  std::string user;
  std::vector<size_t> rows;
};
std::vector<UserGroup> GroupByUser(const std::vector<RawRating>& rows);

}  // namespace rbmrec::client

#endif  // RBMREC_CLIENT_COMMANDS_H_
