#ifndef RBMREC_CLIENT_CLI_H_
#define RBMREC_CLIENT_CLI_H_

// Command-line parsing of the rbmrec CLI: the table of subcommands and their
// flags, the parser, usage texts, and the conversion of parsed arguments to
// requests. No I/O and no network, so everything here is unit-testable.
//
// Syntax: rbmrec [GLOBAL FLAGS] COMMAND [SUBCOMMAND] [ARGS] [FLAGS]
// Flags may appear anywhere after the program name, as "--name VALUE",
// "--name=VALUE" or "-n VALUE" (short forms). "--" ends the flags: later
// arguments are positional even when they start with '-'. A negative number
// ("-5") is an argument, not a flag. Once a command is named, later words
// are its arguments even when they name a command.
//
// The table below (Commands(), GlobalFlags(); cli_table.cc) is the single
// description of the command line, each command declared once with its
// runner: ParseArgs builds a CLI11 app tree from it, a CLI11 subcommand per
// command word with the command's options (cli.cc; CLI11's exceptions stay
// inside ParseArgs); --help is CLI11's own help of that tree, through a
// CLI::Formatter that takes synopses and summaries from the table
// (cli_formatter.cc); and RunCli calls the parsed command's runner. Flag
// spellings shared with rbmrec-server and the bench tools:
// --server, --json, --timeout, --hidden, --epochs, --batch-size,
// --learning-rate (alias --lr), --seed, --threads.

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/security.h"
#include "proto/rbmrec.pb.h"

namespace rbmrec::client {

namespace v1 = ::rbmrec::v1;

// The default server when neither --server nor RBMREC_SERVER is set.
inline constexpr absl::string_view kDefaultServer = "127.0.0.1:50051";
// The default --timeout, in seconds.
inline constexpr double kDefaultTimeoutSeconds = 30;

enum class FlagKind {
  kBool,      // "--lenient"; takes no value
  kValue,     // "--batch 5000"; given at most once
  kRepeated,  // "--rate 50=5 --rate 172=4"; any number of times
};

struct FlagSpec {
  std::string name;     // long name without "--", e.g. "batch"
  char short_name = 0;  // e.g. 'n' for "-n"; 0 when none
  FlagKind kind = FlagKind::kValue;
  std::string value_name;  // shown in usage, e.g. "N"
  std::string help;        // one line; mention the default
};

class Context;  // client/command_context.h
// Runs a parsed command (client/command_context.h); returns the exit code.
using CommandRunner = int (*)(Context& ctx);

struct CommandSpec {
  // The words naming the command: {"import"}, {"items", "import"}.
  std::vector<std::string> path;
  // Positional arguments as shown in usage, e.g. "USER ITEM...".
  std::string args;
  int min_args = 0;
  int max_args = 0;         // -1: no limit
  std::string summary;      // one line for the command list
  std::string description;  // a paragraph for the command's --help
  std::vector<FlagSpec> flags;
  // Command lines shown at the end of the command's --help, each with what
  // it does: {"rbmrec recommend 1 -n 10", "the top 10 items ..."}.
  std::vector<std::pair<std::string, std::string>> examples;
  CommandRunner run = nullptr;
};

// Every subcommand, in the order of the top-level usage text.
const std::vector<CommandSpec>& Commands();
// The flags accepted by every command (--server, --json, --timeout, the TLS
// and token flags of client/security.h, --help).
const std::vector<FlagSpec>& GlobalFlags();
// The program's description, first in `rbmrec --help`, and the closing
// lines of it (where a command's options are, the exit codes).
absl::string_view ProgramDescription();
absl::string_view ProgramFooter();

// Values of the global flags, after defaults.
struct GlobalOptions {
  std::string server;  // --server, else $RBMREC_SERVER, else kDefaultServer
  bool json = false;
  double timeout_seconds = kDefaultTimeoutSeconds;  // > 0
  // --tls-ca, --tls-cert, --tls-key, --tls-server-name, --token-file as
  // given (nullopt when absent; "" when given empty); resolved over the
  // environment by LoadSecurity. `token` is never set from a flag.
  SecuritySettings security;
};

// A parsed command line.
struct ParsedArgs {
  // The command; null when none was named (only valid with help).
  const CommandSpec* command = nullptr;
  // The command words given when they name a command group but no command
  // of it ("items" alone); used for that group's help.
  std::vector<std::string> group;
  bool help = false;  // --help / -h / "help" was given
  GlobalOptions global;
  std::vector<std::string> positional;
  // Flag values by long name, in command-line order (bool flags: "true").
  std::map<std::string, std::vector<std::string>> flags;

  bool Has(absl::string_view name) const;
  // The last value of flag `name`, or `fallback` when absent.
  std::string Get(absl::string_view name, absl::string_view fallback) const;
  // All values of a repeated flag.
  std::vector<std::string> GetAll(absl::string_view name) const;
};

// Parses the arguments after the program name. `server_env` is the value of
// $RBMREC_SERVER ("" when unset). Returns InvalidArgument with a message
// naming the offending argument on an unknown command or flag, a missing or
// extra argument, a missing flag value, a repeated single-value flag, or a
// bad global flag value. With --help, argument counts are not checked.
absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<std::string>& args,
                                     absl::string_view server_env);

// The command named by the leading words of `args` (skipping flags), or
// null; used to point at the right --help after a parse error.
const CommandSpec* GuessCommand(const std::vector<std::string>& args);

// The --help text (CLI11's) of the command or group named by `words`, or
// of the program when `words` is empty: its description, usage line (the
// table's arguments), options, commands (each with all its words, a group's
// commands too) and, below a command, the global options; lines of at most
// 79 columns but for the usage line. Unknown words: the program's help.
std::string CommandHelp(const std::vector<std::string>& words);
// The help text for `parsed` (command, group or top level).
std::string HelpText(const ParsedArgs& parsed);

// ---------------------------------------------------------------------------
// Typed access to flag values. Errors are InvalidArgument naming the flag,
// e.g. "--batch: expected an integer, got 'x'".

absl::StatusOr<int64_t> GetInt(const ParsedArgs& args, absl::string_view name,
                               int64_t fallback, int64_t min, int64_t max);
absl::StatusOr<double> GetDouble(const ParsedArgs& args, absl::string_view name,
                                 double fallback, double min, double max);
// Parses an integer/double argument; `what` names it in the error.
absl::StatusOr<int64_t> ParseInt(absl::string_view text,
                                 absl::string_view what);
absl::StatusOr<double> ParseDouble(absl::string_view text,
                                   absl::string_view what);

// "exact" -> EXACT, "meanfield" / "mean-field" / "mean_field" -> MEAN_FIELD.
absl::StatusOr<v1::Method> ParseMethod(absl::string_view name);
// "expected" -> EXPECTED_RATING, "prob" / "probability" ->
// PROBABILITY_AT_LEAST.
absl::StatusOr<v1::RankBy> ParseRankBy(absl::string_view name);
// "always" -> ACTIVATE_ALWAYS, "if-better" -> ACTIVATE_IF_BETTER, "never" ->
// ACTIVATE_NEVER (--activate of `train`).
absl::StatusOr<v1::ActivationPolicy> ParseActivation(absl::string_view name);
// "ITEM=RATING" (split at the last '='), e.g. "50=4.5". ITEM is trimmed like
// IdArgument; RATING must be a plain decimal number (ParsePlainDecimal in
// core/readers.h: not "0x4", "inf" or "nan").
absl::StatusOr<v1::ItemRating> ParseItemRating(absl::string_view text);

// An id given on the command line (USER, ITEM, the ITEM of --rate), for
// every command: without the spaces and tabs around it, the rule `import`
// applies to every field of a rating file (TrimBlanks in core/readers.h), so
// " u " names the user a file stored as "u". InvalidArgument naming `what`
// when nothing is left.
absl::StatusOr<std::string> IdArgument(absl::string_view arg,
                                       absl::string_view what);
// The USER argument of predict/recommend: IdArgument, and "-" means the
// anonymous user ("").
absl::StatusOr<std::string> UserArgument(absl::string_view arg);

// Requests built from a parsed `train`, `predict` or `recommend` command
// line. Only flags that were given are set (TrainOptions fields stay absent
// otherwise, so the server's defaults apply).
absl::StatusOr<v1::TrainRequest> BuildTrainRequest(const ParsedArgs& args);
absl::StatusOr<v1::PredictRatingsRequest> BuildPredictRequest(
    const ParsedArgs& args);
absl::StatusOr<v1::SimilarItemsRequest> BuildSimilarRequest(
    const ParsedArgs& args);
absl::StatusOr<v1::RecommendRequest> BuildRecommendRequest(
    const ParsedArgs& args);
// `ratings USER [--offset N] [--limit N]`: offset >= 0 (default 0), limit
// >= 1 (default 0 = the server's page of 100).
absl::StatusOr<v1::GetUserRatingsRequest> BuildUserRatingsRequest(
    const ParsedArgs& args);

}  // namespace rbmrec::client

#endif  // RBMREC_CLIENT_CLI_H_
