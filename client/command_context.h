#ifndef RBMREC_CLIENT_COMMAND_CONTEXT_H_
#define RBMREC_CLIENT_COMMAND_CONTEXT_H_

// What every command runner of the rbmrec CLI shares: the Context (parsed
// arguments, output streams, the lazily connected client, and the error
// printers that fix the exit codes of commands.h), the progress line, the
// helpers for rating files used by both `import` and `evaluate`, and the
// runners themselves (one per command, in commands_*.cc).

#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/cli.h"
#include "client/client.h"
#include "client/commands.h"
#include "client/format.h"
#include "client/security.h"
#include "core/readers.h"

namespace rbmrec::client {

// What to do about a failure with the server's error `reason`; "" when
// there is nothing specific to say. (LIMIT_EXCEEDED is explained by the
// command, which knows the flag to change.)
std::string ReasonHint(absl::string_view reason);

// Extra fields of a JSON error object.
struct ErrorDetails {
  std::string reason;   // the server's error reason; "" when none
  bool import = false;  // add committed_rows / committed_batches
  std::optional<CommittedCounts> committed;
};

// Everything a command needs.
class Context {
 public:
  Context(const ParsedArgs& args, const Environment& env, std::ostream& out,
          std::ostream& err, ClientSecurity security = {})
      : args_(args),
        env_(env),
        out_(out),
        err_(err),
        security_(std::move(security)) {}

  const ParsedArgs& args() const { return args_; }
  const Environment& env() const { return env_; }
  bool json() const { return args_.global.json; }
  std::ostream& out() { return out_; }
  std::ostream& err() { return err_; }
  TextStyle style() const {
    TextStyle s;
    s.unicode = env_.unicode;
    return s;
  }

  RbmrecClient& client() {
    if (client_ == nullptr) {
      RbmrecClient::Options options;
      options.timeout = absl::Seconds(args_.global.timeout_seconds);
      options.security = security_;
      client_ = std::make_unique<RbmrecClient>(args_.global.server, options);
    }
    return *client_;
  }

  // Prints an error (text on err; with --json also the error object on out)
  // and returns `exit_code`. `message` is printed as is in text: callers
  // pass server- or file-provided text through TerminalSafe.
  int Fail(int exit_code, absl::string_view code, absl::string_view message,
           const ErrorDetails& details = {}) {
    if (code.empty()) {
      err_ << "error: " << message << "\n";
    } else {
      err_ << "error: " << code << ": " << message << "\n";
    }
    if (json()) {
      Json error = Json::object();
      error["code"] = code.empty() ? "INVALID_ARGUMENT" : std::string(code);
      error["message"] = std::string(message);
      error["exit_code"] = exit_code;
      if (!details.reason.empty()) error["reason"] = details.reason;
      if (details.import) {
        const bool known = details.committed.has_value();
        error["committed_rows"] =
            known ? Json(details.committed->rows) : Json(nullptr);
        error["committed_batches"] =
            known ? Json(details.committed->batches) : Json(nullptr);
      }
      out_ << DumpJson(Json{{"error", std::move(error)}}) << "\n";
    }
    return exit_code;
  }
  // A bad argument or flag value: exit 1 with a pointer to the help.
  int UsageError(const absl::Status& status) {
    std::string message = TerminalSafe(status.message());
    const std::string help =
        args_.command != nullptr
            ? absl::StrCat("rbmrec ", absl::StrJoin(args_.command->path, " "),
                           " --help")
            : "rbmrec --help";
    if (!json()) message += absl::StrCat("\n(run '", help, "' for usage)");
    return Fail(kExitUsage, "", message);
  }
  // An unreadable or malformed input file: exit 1.
  int InputError(const absl::Status& status) {
    return Fail(kExitUsage, absl::StatusCodeToString(status.code()),
                TerminalSafe(status.message()));
  }
  // A failed RPC: exit 2, "error: <CODE>: <message>", then a hint for the
  // server's error reason or for the connection's TLS/token settings (if
  // any).
  int RpcError(const absl::Status& status, ErrorDetails details = {}) {
    details.reason = ErrorReasonOf(status);
    const int code = Fail(kExitRpc, absl::StatusCodeToString(status.code()),
                          TerminalSafe(status.message()), details);
    for (const std::string& hint :
         {ReasonHint(details.reason), SecurityHint(status, security_)}) {
      if (!hint.empty()) err_ << "hint: " << TerminalSafe(hint) << "\n";
    }
    return code;
  }
  // Prints a proto as the JSON output, or `text` otherwise; returns 0.
  int Print(const google::protobuf::Message& message, absl::string_view text) {
    if (json()) {
      out_ << ProtoToJson(message) << "\n";
    } else {
      out_ << text;
    }
    return kExitOk;
  }

 private:
  const ParsedArgs& args_;
  const Environment& env_;
  std::ostream& out_;
  std::ostream& err_;
  const ClientSecurity security_;
  std::unique_ptr<RbmrecClient> client_;
};

// Redraws a progress line on a terminal (at most every 100 ms), or prints
// one line every few seconds otherwise (not with --json).
class ProgressLine {
 public:
  ProgressLine(Context& ctx, std::string prefix)
      : ctx_(ctx), prefix_(std::move(prefix)), start_(absl::Now()) {}

  void Update(const std::string& text, bool force) {
    const absl::Time now = absl::Now();
    if (ctx_.env().stderr_is_tty) {
      if (!force && now - last_ < absl::Milliseconds(100)) return;
      ctx_.err() << "\r" << prefix_ << text << "\033[K";
      ctx_.err().flush();
      drawn_ = true;
    } else {
      if (ctx_.json()) return;
      if (!force && now - last_ < absl::Seconds(5)) return;
      ctx_.err() << prefix_ << text << "\n";
    }
    last_ = now;
  }
  // Ends a redrawn line with a newline.
  void Finish() {
    if (drawn_) ctx_.err() << "\n";
    drawn_ = false;
  }
  double elapsed_seconds() const {
    return absl::ToDoubleSeconds(absl::Now() - start_);
  }

 private:
  Context& ctx_;
  std::string prefix_;
  absl::Time start_;
  absl::Time last_ = absl::InfinitePast();
  bool drawn_ = false;
};

// ---------------------------------------------------------------------------
// Rating files (import, evaluate)

// --format and --lenient.
absl::StatusOr<ReadOptions> GetReadOptions(const ParsedArgs& args);
// The malformed lines skipped under --lenient, on stderr.
void PrintParseProblems(Context& ctx, const ReadResult& read);
// Why a rating file gave no rating to send, e.g. "no ratings in r.csv: it
// holds only a header (line 1)"; "" when it gave some.
std::string NoRowsReason(const std::string& file, const ReadResult& read);

// ---------------------------------------------------------------------------
// The runners of the command table (cli_table.cc): each returns the exit
// code.

int RunImport(Context& ctx);       // commands_import.cc
int RunItemsImport(Context& ctx);  // commands_import.cc
int RunItemsHide(Context& ctx);    // commands_import.cc
int RunItemsUnhide(Context& ctx);  // commands_import.cc
int RunTrain(Context& ctx);        // commands_train.cc
int RunPredict(Context& ctx);      // commands.cc
int RunRecommend(Context& ctx);    // commands.cc
int RunSimilar(Context& ctx);      // commands.cc
int RunRatings(Context& ctx);      // commands.cc (a user's stored ratings)
int RunItem(Context& ctx);         // commands.cc (an item and its histogram)
// recommend --all-users (commands_bulk.cc; RunRecommend dispatches).
int RunRecommendAll(Context& ctx);
int RunEvaluate(Context& ctx);  // commands_evaluate.cc
int RunModels(Context& ctx);    // commands_models.cc
int RunModelsActivate(Context& ctx);
int RunModelsDelete(Context& ctx);
int RunModelsPinTrue(Context& ctx);
int RunModelsPinFalse(Context& ctx);
int RunModelsPrune(Context& ctx);
int RunStats(Context& ctx);  // commands_models.cc (server state)
int RunHealth(Context& ctx);
int RunDeleteUser(Context& ctx);
int RunDeleteRatings(Context& ctx);

}  // namespace rbmrec::client

#endif  // RBMREC_CLIENT_COMMAND_CONTEXT_H_
