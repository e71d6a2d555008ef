#include "client/cli.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/readers.h"

namespace rbmrec::client {
namespace {

FlagSpec Bool(std::string name, std::string help) {
  return FlagSpec{std::move(name), 0, FlagKind::kBool, "", std::move(help)};
}

FlagSpec Value(std::string name, std::string value_name, std::string help,
               char short_name = 0) {
  return FlagSpec{std::move(name), short_name, FlagKind::kValue,
                  std::move(value_name), std::move(help)};
}

FlagSpec Repeated(std::string name, std::string value_name, std::string help) {
  return FlagSpec{std::move(name), 0, FlagKind::kRepeated,
                  std::move(value_name), std::move(help)};
}

FlagSpec FormatFlag() {
  return Value("format", "FORMAT",
               "auto|ml100k|dat|mlcsv|csv|tsv|space (default auto: detected "
               "from the file name and first lines)");
}

FlagSpec MethodFlag() {
  return Value("method", "METHOD",
               "exact|meanfield: exact conditional (default) or the faster "
               "mean-field approximation");
}

FlagSpec ModelFlag() {
  return Value("model", "VERSION",
               "answer with this model version (default: the active one)");
}

FlagSpec RateFlag() {
  return Repeated("rate", "ITEM=RATING",
                  "an extra rating for this request only (repeatable); merged "
                  "over the user's stored ratings, or the ratings of the "
                  "anonymous user '-'");
}

std::vector<CommandSpec> MakeCommands() {
  std::vector<CommandSpec> c;
  c.push_back(CommandSpec{
      {"import"},
      "FILE",
      1,
      1,
      "load ratings from a file (MovieLens, CSV, TSV)",
      "Reads ratings from FILE and streams them to the server in batches. "
      "Each batch is committed atomically; a later rating of the same "
      "(user, item) replaces an earlier one. Malformed file lines fail the "
      "import before anything is sent (or, with --lenient, are skipped); so "
      "does a file without any rating (empty, or only a header); "
      "rows the server rejects are listed with their file line numbers and "
      "make the command exit 3 (unless --allow-rejected). If the import "
      "fails part way, the rows certainly stored are printed; re-running the "
      "same import is always safe (ratings are upserted).",
      {FormatFlag(),
       Value("batch", "N",
             "rows per batch, each one transaction (default 10000, the "
             "server's default --max-batch); lower it when a batch is over "
             "the server's --max-message-mb (the error says how far)"),
       Bool("lenient", "skip malformed lines instead of failing"),
       Bool("allow-rejected",
            "exit 0 even when the server rejected rows (default: exit 3)")}});
  c.push_back(CommandSpec{
      {"items", "import"},
      "FILE",
      1,
      1,
      "load item titles (u.item, movies.dat/.csv)",
      "Reads item ids, titles and genres from FILE (format detected from the "
      "content) and stores them on the server, so answers show titles. "
      "Genres are stored as the attribute \"genres\".",
      {Value("batch", "N", "items per request (default 5000)")}});
  c.push_back(CommandSpec{
      {"train"},
      "",
      0,
      0,
      "train a new model on all stored ratings",
      "Starts a training job on the server and shows its progress: one table "
      "row per epoch. When it succeeds the new model version is stored and, "
      "per --activate, becomes active (the output says whether it did). "
      "Ctrl-C asks the server to cancel the job (a "
      "second Ctrl-C quits at once, leaving the job running). Options not "
      "given take the server's defaults.",
      {Value("hidden", "N", "number of hidden units"),
       Value("epochs", "N", "maximum number of epochs"),
       Value("batch-size", "N", "users per mini-batch"),
       Value("learning-rate", "X", "learning rate (alias --lr)"),
       Value("lr", "X", "alias of --learning-rate"),
       Value("momentum", "X", "momentum, in [0, 1)"),
       Value("weight-decay", "X", "L2 weight decay"),
       Value("cd-steps", "N", "Gibbs steps per CD update"),
       Value("seed", "N", "random seed"),
       Value("threads", "N", "worker threads"),
       Value("validation-fraction", "X",
             "fraction of ratings held out for validation, 0 disables"),
       Value("ensemble", "N", "number of RBMs averaged"),
       Value("ordinal", "true|false",
             "ordinal sharing between rating values (default: the "
             "server's, true)"),
       Value("average", "X",
             "parameter averaging over epochs, in [0, 1), 0 = off"),
       Value("factors", "N",
             "factored training through N factors (-1 = size rule, 0 = "
             "unfactored)"),
       Value("activate", "always|if-better|never",
             "whether the new model becomes active: always, only if its "
             "validation RMSE is not worse than the active model's "
             "(if-better), or never (activate later with 'models "
             "activate'); default: the server's --activate")}});
  c.push_back(CommandSpec{
      {"predict"},
      "USER ITEM...",
      2,
      -1,
      "a user's predicted rating distributions",
      "Prints, for each ITEM, the probability of each rating value as a bar "
      "chart, and the expected rating. USER '-' is an anonymous user "
      "described only by --rate.",
      {MethodFlag(), RateFlag(), ModelFlag()}});
  c.push_back(CommandSpec{
      {"recommend"},
      "USER",
      1,
      1,
      "the top N items a user has not rated",
      "Ranks the items the user has not rated. By default (the server's "
      "choice) by how likely the user is to rate an item and rate it at "
      "least the threshold (--by rated-prob, models with the rated RBM), "
      "else by expected rating. USER '-' is an anonymous user described "
      "only by --rate.",
      {Value("n", "N", "number of items (default 10)", 'n'),
       Value("by", "expected|prob|rated|rated-prob",
             "rank by expected rating, P(rating >= threshold), P(rated) or "
             "P(rated) x P(rating >= threshold) (default: the server's, "
             "rated-prob when the model has it)"),
       Value("threshold", "X",
             "the rating threshold of --by prob (default 4) and rated-prob "
             "(default: the server's, the first value at or above the mean "
             "rating); without --by, the server's default ranking with this "
             "threshold"),
       MethodFlag(), RateFlag(), ModelFlag()}});
  c.push_back(CommandSpec{
      {"evaluate"},
      "FILE",
      1,
      1,
      "RMSE/MAE of the served model on a test file",
      "Reads held-out ratings from FILE (not stored), predicts each with the "
      "served model and prints RMSE, MAE, the number of ratings n and how "
      "many used a fallback (n_fallback: item unknown to the model). Ratings "
      "of users the server cannot predict for (no stored ratings) and "
      "ratings off the server's rating scale are excluded and counted as "
      "n_skipped, with a warning giving the count of each. When no rating "
      "can be evaluated the command fails (exit 2) saying why.",
      {FormatFlag(), Bool("lenient", "skip malformed lines instead of failing"),
       MethodFlag(), ModelFlag(),
       Value("batch", "N",
             "items per request (default 1000; lowered to the server's "
             "--max-predict-items when that is smaller)")}});
  c.push_back(CommandSpec{{"models"},
                          "",
                          0,
                          0,
                          "list the stored model versions",
                          "Lists the stored model versions, newest first; "
                          "'*' marks the active one, 'pinned' the versions "
                          "retention never removes, 'CORRUPT' the ones whose "
                          "stored file is damaged (as far as the server has "
                          "found; --verify checks every one).",
                          {Bool("verify",
                                "read every stored version and check its "
                                "checksum (about 1 s per GB)")}});
  c.push_back(CommandSpec{{"models", "activate"},
                          "VERSION",
                          1,
                          1,
                          "make a stored model version the active one",
                          "Makes VERSION the model that answers requests "
                          "(e.g. to roll back).",
                          {}});
  c.push_back(CommandSpec{
      {"models", "delete"},
      "VERSION",
      1,
      1,
      "delete a stored model version",
      "Deletes VERSION and gives its space back. The active version cannot "
      "be deleted; a pinned one only with --force.",
      {Bool("force", "delete the version even when it is pinned")}});
  c.push_back(CommandSpec{{"models", "pin"},
                          "VERSION",
                          1,
                          1,
                          "keep a model version through retention",
                          "Pins VERSION: the retention policy (and 'models "
                          "prune') never removes it.",
                          {}});
  c.push_back(CommandSpec{{"models", "unpin"},
                          "VERSION",
                          1,
                          1,
                          "let retention remove a model version again",
                          "Unpins VERSION.",
                          {}});
  c.push_back(CommandSpec{
      {"models", "prune"},
      "",
      0,
      0,
      "apply the retention policy now",
      "Deletes the stored versions the retention policy does not keep: it "
      "keeps the active version, every pinned one, the newest --keep-full "
      "\"full\" and the newest --keep-online \"online\" versions (default: "
      "the server's --keep-full-models / --keep-online-models).",
      {Value("keep-full", "N", "full (trained) versions to keep, >= 0"),
       Value("keep-online", "N", "online versions to keep, >= 0")}});
  c.push_back(CommandSpec{{"stats"},
                          "",
                          0,
                          0,
                          "counts of users, items, ratings; server state",
                          "Shows the numbers of stored users, items and "
                          "ratings, the active model, the training state, "
                          "the stored model versions and the database size: "
                          "the database file (against the server's "
                          "--db-max-mb, which limits the file only) and its "
                          "write-ahead log apart.",
                          {}});
  c.push_back(CommandSpec{{"health"},
                          "[SERVICE]",
                          0,
                          1,
                          "check that the server is serving",
                          "Calls the standard grpc.health.v1 Check for "
                          "SERVICE (default: the whole server). Exits 0 when "
                          "SERVING, 2 otherwise.",
                          {}});
  c.push_back(CommandSpec{{"delete-user"},
                          "USER",
                          1,
                          1,
                          "delete every rating of a user",
                          "Deletes every stored rating of USER.",
                          {}});
  c.push_back(CommandSpec{{"delete-ratings"},
                          "USER ITEM...",
                          2,
                          -1,
                          "delete some ratings of a user",
                          "Deletes USER's ratings of the given items; items "
                          "the user has not rated are ignored. A USER with "
                          "no stored ratings is NOT_FOUND (exit 2).",
                          {}});
  return c;
}

std::vector<FlagSpec> MakeGlobalFlags() {
  return {
      Value("server", "HOST:PORT",
            absl::StrCat("the server (default $RBMREC_SERVER, else ",
                         kDefaultServer,
                         "); a gRPC target URI spreads the calls over "
                         "several servers round-robin: dns:///HOST:PORT "
                         "(every address of HOST) or ipv4:A:P,B:P")),
      Bool("json", "print exactly one JSON object on stdout"),
      Value("timeout", "SECONDS",
            absl::StrCat("deadline of each request (default ",
                         kDefaultTimeoutSeconds,
                         "; import and train streams have none)")),
      Value("tls-ca", "FILE",
            "use TLS, verifying the server's certificate against this PEM CA "
            "(default $RBMREC_TLS_CA; without it: no TLS)"),
      Value("tls-cert", "FILE",
            "client certificate (PEM) for a server that requires one (mTLS; "
            "default $RBMREC_TLS_CERT); needs --tls-key"),
      Value("tls-key", "FILE",
            "private key (PEM) of --tls-cert (default $RBMREC_TLS_KEY)"),
      Value("tls-server-name", "NAME",
            "the name expected in the server's certificate (default "
            "$RBMREC_TLS_SERVER_NAME, else the host of --server)"),
      Value("token-file", "FILE",
            "send the token on the first line of FILE with every request "
            "(default: $RBMREC_TOKEN, the token itself, else "
            "$RBMREC_TOKEN_FILE); health needs none. A flag given as '' "
            "ignores its variable"),
      FlagSpec{"help", 'h', FlagKind::kBool, "", "show help and exit"},
  };
}

std::string Joined(const std::vector<std::string>& words) {
  return absl::StrJoin(words, " ");
}

bool StartsWith(const std::vector<std::string>& path,
                const std::vector<std::string>& prefix) {
  return path.size() >= prefix.size() &&
         std::equal(prefix.begin(), prefix.end(), path.begin());
}

const CommandSpec* FindExact(const std::vector<std::string>& words) {
  for (const auto& c : Commands()) {
    if (c.path == words) return &c;
  }
  return nullptr;
}

bool IsStrictPrefixOfSome(const std::vector<std::string>& words) {
  for (const auto& c : Commands()) {
    if (c.path.size() > words.size() && StartsWith(c.path, words)) return true;
  }
  return false;
}

const FlagSpec* FindFlag(const std::vector<FlagSpec>& flags,
                         absl::string_view name, bool is_short) {
  for (const auto& f : flags) {
    if (is_short ? (name.size() == 1 && f.short_name == name[0])
                 : f.name == name) {
      return &f;
    }
  }
  return nullptr;
}

std::string FlagSynopsis(const FlagSpec& f) {
  std::string s;
  if (f.short_name != 0)
    absl::StrAppend(&s, "-", std::string(1, f.short_name), ", ");
  absl::StrAppend(&s, "--", f.name);
  if (f.kind != FlagKind::kBool) absl::StrAppend(&s, " ", f.value_name);
  return s;
}

// Wraps `text` at `width` columns, every line indented by `indent`.
std::string Wrap(absl::string_view text, size_t width, size_t indent) {
  std::string out;
  std::string line;
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (!line.empty() && line.size() + 1 + word.size() > width - indent) {
      absl::StrAppend(&out, std::string(indent, ' '), line, "\n");
      line.clear();
    }
    if (!line.empty()) line += ' ';
    absl::StrAppend(&line, word);
  }
  if (!line.empty())
    absl::StrAppend(&out, std::string(indent, ' '), line, "\n");
  return out;
}

// "  LEFT  TEXT" lines: LEFT padded to `left_width`, TEXT wrapped at 79
// columns with a hanging indent.
std::string TwoColumns(
    const std::vector<std::pair<std::string, std::string>>& lines) {
  size_t left_width = 0;
  for (const auto& [left, text] : lines) {
    left_width = std::max(left_width, left.size());
  }
  const size_t indent = left_width + 4;
  const size_t width = std::max<size_t>(79, indent + 30);
  std::string out;
  for (const auto& [left, text] : lines) {
    const std::string wrapped = Wrap(text, width, indent);
    absl::StrAppend(&out, "  ", left,
                    std::string(left_width - left.size(), ' '), "  ",
                    absl::string_view(wrapped).substr(indent));
  }
  return out;
}

std::string FlagLines(const std::vector<FlagSpec>& flags) {
  std::vector<std::pair<std::string, std::string>> lines;
  for (const auto& f : flags) lines.emplace_back(FlagSynopsis(f), f.help);
  return TwoColumns(lines);
}

std::string Synopsis(const CommandSpec& c) {
  std::string s = absl::StrCat("rbmrec ", Joined(c.path));
  if (!c.args.empty()) absl::StrAppend(&s, " ", c.args);
  if (!c.flags.empty()) absl::StrAppend(&s, " [FLAGS]");
  return s;
}

}  // namespace

const std::vector<CommandSpec>& Commands() {
  static const std::vector<CommandSpec>* const kCommands =
      new std::vector<CommandSpec>(MakeCommands());
  return *kCommands;
}

const std::vector<FlagSpec>& GlobalFlags() {
  static const std::vector<FlagSpec>* const kFlags =
      new std::vector<FlagSpec>(MakeGlobalFlags());
  return *kFlags;
}

bool ParsedArgs::Has(absl::string_view name) const {
  return flags.find(std::string(name)) != flags.end();
}

std::string ParsedArgs::Get(absl::string_view name,
                            absl::string_view fallback) const {
  auto it = flags.find(std::string(name));
  if (it == flags.end() || it->second.empty()) return std::string(fallback);
  return it->second.back();
}

std::vector<std::string> ParsedArgs::GetAll(absl::string_view name) const {
  auto it = flags.find(std::string(name));
  return it == flags.end() ? std::vector<std::string>{} : it->second;
}

namespace {

// The spec of flag `name` (long name) among the global flags and every
// command's flags; null when unknown. Flag names mean the same everywhere.
const FlagSpec* AnyFlag(absl::string_view name, bool is_short) {
  if (const FlagSpec* f = FindFlag(GlobalFlags(), name, is_short)) return f;
  for (const auto& c : Commands()) {
    if (const FlagSpec* f = FindFlag(c.flags, name, is_short)) return f;
  }
  return nullptr;
}

// A flag argument's name without dashes and "=value", and whether it is a
// short one ("-n"); false when `arg` is not a flag.
bool SplitFlag(absl::string_view arg, absl::string_view* name, bool* is_short) {
  if (arg.size() < 2 || arg[0] != '-') return false;
  *is_short = arg[1] != '-';
  absl::string_view body = arg.substr(*is_short ? 1 : 2);
  *name = body.substr(0, body.find('='));
  return true;
}

// One CLI11 app per command word path ({"models"}, {"models", "delete"}),
// with the storage of its flags' values.
struct AppNode {
  CLI::App* app = nullptr;
  const CommandSpec* command = nullptr;  // null for a pure group ("items")
  std::vector<std::string> positional;
  // Per flag long name: the values given (bool flags: counted separately).
  std::map<std::string, std::vector<std::string>> values;
  std::map<std::string, int64_t> counts;  // bool flags
};

// Adds `flags` to `app`, storing their values in `node`. Every value flag
// takes exactly one value per occurrence and may occur any number of times
// (ParseArgs reports a repeated single-value flag itself).
void AddFlags(const std::vector<FlagSpec>& flags, AppNode* node) {
  for (const FlagSpec& f : flags) {
    std::string names = absl::StrCat("--", f.name);
    if (f.short_name != 0) {
      names = absl::StrCat("-", std::string(1, f.short_name), ",", names);
    }
    if (f.kind == FlagKind::kBool) {
      node->app->add_flag(names, node->counts[f.name], f.help);
    } else {
      node->app->add_option(names, node->values[f.name], f.help)
          ->expected(1)
          ->allow_extra_args(false)
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    }
  }
}

}  // namespace

absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<std::string>& args,
                                     absl::string_view server_env) {
  ParsedArgs out;
  // Arguments after "--" are positional (handled here, not by CLI11).
  std::vector<std::string> before;
  std::vector<std::string> after;
  bool dashdash = false;
  for (const std::string& arg : args) {
    if (dashdash) {
      after.push_back(arg);
    } else if (arg == "--") {
      dashdash = true;
    } else {
      before.push_back(arg);
    }
  }
  // "help" as the first command word; "-n=7" as "-n 7" and "--name=" as
  // "--name ''"; "--lenient=x" is an error (CLI11 would read x as a
  // boolean).
  std::vector<std::string> prepared;
  bool seen_word = false;
  for (size_t i = 0; i < before.size(); ++i) {
    const std::string& arg = before[i];
    absl::string_view name;
    bool is_short = false;
    if (!SplitFlag(arg, &name, &is_short)) {
      if (!seen_word && arg == "help" && !out.help) {
        out.help = true;
        continue;
      }
      seen_word = true;
      prepared.push_back(arg);
      continue;
    }
    const FlagSpec* spec = AnyFlag(name, is_short);
    const size_t eq = arg.find('=');
    if (spec != nullptr && spec->kind == FlagKind::kBool &&
        eq != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(arg.substr(0, eq), " takes no value"));
    }
    if (eq != std::string::npos) {  // "--name=value" as "--name value"
      prepared.push_back(arg.substr(0, eq));
      prepared.push_back(arg.substr(eq + 1));
      continue;
    }
    prepared.push_back(arg);
    // The value of a value flag is not a command word.
    if (spec != nullptr && spec->kind != FlagKind::kBool &&
        eq == std::string::npos && i + 1 < before.size()) {
      prepared.push_back(before[++i]);
    }
  }

  // The CLI11 app tree: the root holds the global flags; each command word
  // path is a subcommand; unknown arguments fall through to the root and
  // are reported below. At most one subcommand per level, so a later word
  // that names a command elsewhere is a positional argument.
  CLI::App root("rbmrec");
  root.set_help_flag();
  root.allow_extras(true);
  root.require_subcommand(0, 1);
  std::map<std::vector<std::string>, AppNode> nodes;
  AppNode& top = nodes[{}];
  top.app = &root;
  AddFlags(GlobalFlags(), &top);
  for (const CommandSpec& c : Commands()) {
    for (size_t depth = 1; depth <= c.path.size(); ++depth) {
      const std::vector<std::string> path(c.path.begin(),
                                          c.path.begin() + depth);
      AppNode& node = nodes[path];
      if (node.app == nullptr) {
        const std::vector<std::string> parent(path.begin(), path.end() - 1);
        node.app = nodes[parent].app->add_subcommand(path.back());
        node.app->set_help_flag();
        node.app->allow_extras(true);
        node.app->fallthrough(true);
        node.app->require_subcommand(0, 1);
      }
      if (depth == c.path.size()) {
        node.command = &c;
        node.app->add_option("args", node.positional)->expected(0, -1);
        AddFlags(c.flags, &node);
      }
    }
  }

  std::vector<std::string> reversed(prepared.rbegin(), prepared.rend());
  try {
    root.parse(reversed);
  } catch (const CLI::ArgumentMismatch& e) {
    // "--batch: 1 required TEXT missing": a value flag without its value.
    const std::string what = e.what();
    const std::string flag = what.substr(0, what.find(':'));
    absl::string_view name;
    bool is_short = false;
    const FlagSpec* spec =
        SplitFlag(flag, &name, &is_short) ? AnyFlag(name, is_short) : nullptr;
    if (spec != nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, " needs a value (", spec->value_name, ")"));
    }
    return absl::InvalidArgumentError(what);
  } catch (const CLI::ParseError& e) {
    return absl::InvalidArgumentError(e.what());
  }

  // The command: the chain of parsed subcommands.
  std::vector<std::string> words;
  const CLI::App* app = &root;
  while (true) {
    const std::vector<CLI::App*> subs = app->get_subcommands();
    if (subs.empty()) break;
    app = subs.front();
    words.push_back(app->get_name());
  }
  const AppNode& node = nodes.at(words);
  out.command = node.command;
  if (out.command == nullptr && !words.empty()) out.group = words;
  out.positional = node.positional;
  for (const std::string& arg : after) out.positional.push_back(arg);

  // Arguments nobody took: unknown flags or command words, reported in
  // command-line order.
  const std::vector<std::string> extras = root.remaining(true);
  if (!extras.empty()) {
    const std::string& arg = extras.front();
    absl::string_view name;
    bool is_short = false;
    if (SplitFlag(arg, &name, &is_short)) {
      const std::string shown = absl::StrCat(is_short ? "-" : "--", name);
      const bool before_command =
          words.empty() ||
          std::find(prepared.begin(), prepared.end(), arg) <
              std::find(prepared.begin(), prepared.end(), words.front());
      if (out.command != nullptr && !before_command) {
        return absl::InvalidArgumentError(
            absl::StrCat("unknown flag ", shown, " for 'rbmrec ",
                         Joined(out.command->path), "'"));
      }
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown flag ", shown,
          before_command ? " (command flags go after the command)" : ""));
    }
    if (words.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown command '", arg, "'"));
    }
    return absl::InvalidArgumentError(
        absl::StrCat("unknown command '", Joined(words), " ", arg, "'"));
  }

  // Flag values of the global flags and of every app on the command's path.
  for (size_t depth = 0; depth <= words.size(); ++depth) {
    const AppNode& n = nodes.at(
        std::vector<std::string>(words.begin(), words.begin() + depth));
    for (const auto& [name, values] : n.values) {
      if (values.empty()) continue;
      const FlagSpec* spec = AnyFlag(name, false);
      if (spec != nullptr && spec->kind == FlagKind::kValue &&
          values.size() > 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", name, " given more than once"));
      }
      std::vector<std::string>& dest = out.flags[name];
      dest.insert(dest.end(), values.begin(), values.end());
    }
    for (const auto& [name, count] : n.counts) {
      for (int64_t i = 0; i < count; ++i) out.flags[name].push_back("true");
    }
  }

  if (out.Has("help")) out.help = true;

  // Global flags.
  out.global.json = out.Has("json");
  out.global.server =
      out.Get("server", server_env.empty() ? kDefaultServer : server_env);
  if (out.global.server.empty()) {
    return absl::InvalidArgumentError("--server: must not be empty");
  }
  if (out.Has("timeout")) {
    absl::StatusOr<double> timeout =
        ParseDouble(out.Get("timeout", ""), "--timeout");
    if (!timeout.ok()) return timeout.status();
    if (!(*timeout > 0) || !std::isfinite(*timeout)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--timeout: must be a positive number of seconds, got '",
                       out.Get("timeout", ""), "'"));
    }
    out.global.timeout_seconds = *timeout;
  }
  SecuritySettings& security = out.global.security;
  const std::pair<const char*, std::optional<std::string>*> security_flags[] = {
      {"tls-ca", &security.tls_ca},
      {"tls-cert", &security.tls_cert},
      {"tls-key", &security.tls_key},
      {"tls-server-name", &security.tls_server_name},
      {"token-file", &security.token_file}};
  for (const auto& [name, value] : security_flags) {
    if (out.Has(name)) *value = out.Get(name, "");
  }
  if (out.help) return out;

  if (out.command == nullptr) {
    if (!out.group.empty()) {
      std::vector<std::string> subs;
      for (const auto& c : Commands()) {
        if (c.path.size() > out.group.size() && StartsWith(c.path, out.group)) {
          subs.push_back(c.path[out.group.size()]);
        }
      }
      return absl::InvalidArgumentError(
          absl::StrCat("'", Joined(out.group),
                       "' needs a subcommand: ", absl::StrJoin(subs, ", ")));
    }
    return absl::InvalidArgumentError("missing command");
  }
  const CommandSpec& c = *out.command;
  const int n = static_cast<int>(out.positional.size());
  if (n < c.min_args) {
    // Name the first missing argument from the synopsis.
    std::vector<std::string> names = absl::StrSplit(c.args, ' ');
    const size_t idx = std::min(static_cast<size_t>(n), names.size() - 1);
    return absl::InvalidArgumentError(absl::StrCat(
        "'rbmrec ", Joined(c.path), "': missing argument ", names[idx]));
  }
  if (c.max_args >= 0 && n > c.max_args) {
    return absl::InvalidArgumentError(
        absl::StrCat("'rbmrec ", Joined(c.path), "': unexpected argument '",
                     out.positional[static_cast<size_t>(c.max_args)], "'"));
  }
  return out;
}

const CommandSpec* GuessCommand(const std::vector<std::string>& args) {
  std::vector<std::string> words;
  const CommandSpec* found = nullptr;
  for (const std::string& arg : args) {
    if (!arg.empty() && arg[0] == '-') continue;
    if (words.empty() && arg == "help") continue;
    words.push_back(arg);
    const CommandSpec* c = FindExact(words);
    if (c != nullptr) {
      found = c;
    } else if (!IsStrictPrefixOfSome(words)) {
      break;
    }
  }
  return found;
}

std::string TopUsage() {
  std::string out =
      "rbmrec: client of the rbmrec collaborative-filtering server.\n\n"
      "Usage: rbmrec [--server HOST:PORT] [--json] [--timeout SECONDS] "
      "COMMAND [ARGS] [FLAGS]\n\nCommands:\n";
  std::vector<std::pair<std::string, std::string>> lines;
  for (const auto& c : Commands()) {
    std::string left = Joined(c.path);
    if (!c.args.empty()) absl::StrAppend(&left, " ", c.args);
    lines.emplace_back(left, c.summary);
  }
  out += TwoColumns(lines);
  absl::StrAppend(&out, "\nGlobal flags:\n", FlagLines(GlobalFlags()),
                  "\nRun 'rbmrec COMMAND --help' for a command's flags.\n"
                  "Exit codes: 0 ok, 1 usage error or unreadable input, 2 "
                  "RPC error or failed\noutcome, 3 rows rejected by the "
                  "server (import, unless --allow-rejected).\n");
  return out;
}

std::string CommandUsage(const CommandSpec& c) {
  std::string out = absl::StrCat("Usage: ", Synopsis(c), "\n\n");
  absl::StrAppend(&out, Wrap(c.description, 79, 0));
  if (!c.flags.empty()) {
    absl::StrAppend(&out, "\nFlags:\n", FlagLines(c.flags));
  }
  // A command that is also a group ("models") lists its subcommands.
  bool has_subcommands = false;
  for (const auto& sub : Commands()) {
    if (sub.path.size() > c.path.size() && StartsWith(sub.path, c.path)) {
      if (!has_subcommands) out += "\nSubcommands:\n";
      has_subcommands = true;
      absl::StrAppend(&out, "  ", Synopsis(sub), "\n      ", sub.summary, "\n");
    }
  }
  absl::StrAppend(&out, "\nGlobal flags:\n", FlagLines(GlobalFlags()));
  return out;
}

std::string GroupUsage(const std::vector<std::string>& group) {
  std::string out = absl::StrCat("Usage:\n");
  for (const auto& c : Commands()) {
    if (StartsWith(c.path, group)) {
      absl::StrAppend(&out, "  ", Synopsis(c), "\n      ", c.summary, "\n");
    }
  }
  absl::StrAppend(&out, "\nRun 'rbmrec ", Joined(group),
                  " SUBCOMMAND --help' for details.\n");
  return out;
}

std::string HelpText(const ParsedArgs& parsed) {
  if (parsed.command != nullptr) return CommandUsage(*parsed.command);
  if (!parsed.group.empty()) return GroupUsage(parsed.group);
  return TopUsage();
}

// ---------------------------------------------------------------------------
// Typed access

absl::StatusOr<int64_t> ParseInt(absl::string_view text,
                                 absl::string_view what) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(text, &v)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": expected an integer, got '", text, "'"));
  }
  return v;
}

absl::StatusOr<double> ParseDouble(absl::string_view text,
                                   absl::string_view what) {
  double v = 0;
  if (!absl::SimpleAtod(text, &v) || !std::isfinite(v)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": expected a number, got '", text, "'"));
  }
  return v;
}

namespace {
// "--batch", or "-n" for one-letter names.
std::string FlagDisplayName(absl::string_view name) {
  return absl::StrCat(name.size() == 1 ? "-" : "--", name);
}
}  // namespace

absl::StatusOr<int64_t> GetInt(const ParsedArgs& args, absl::string_view name,
                               int64_t fallback, int64_t min, int64_t max) {
  if (!args.Has(name)) return fallback;
  const std::string what = FlagDisplayName(name);
  absl::StatusOr<int64_t> v = ParseInt(args.Get(name, ""), what);
  if (!v.ok()) return v.status();
  if (*v < min || *v > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": must be in [", min, ", ", max, "], got ", *v));
  }
  return v;
}

absl::StatusOr<double> GetDouble(const ParsedArgs& args, absl::string_view name,
                                 double fallback, double min, double max) {
  if (!args.Has(name)) return fallback;
  const std::string what = FlagDisplayName(name);
  absl::StatusOr<double> v = ParseDouble(args.Get(name, ""), what);
  if (!v.ok()) return v.status();
  if (*v < min || *v > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": must be in [", min, ", ", max, "], got ", *v));
  }
  return v;
}

absl::StatusOr<v1::Method> ParseMethod(absl::string_view name) {
  const std::string n = absl::AsciiStrToLower(name);
  if (n == "exact") return v1::EXACT;
  if (n == "meanfield" || n == "mean-field" || n == "mean_field") {
    return v1::MEAN_FIELD;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--method: expected exact or meanfield, got '", name, "'"));
}

absl::StatusOr<v1::RankBy> ParseRankBy(absl::string_view name) {
  const std::string n = absl::AsciiStrToLower(name);
  if (n == "expected") return v1::EXPECTED_RATING;
  if (n == "prob" || n == "probability") return v1::PROBABILITY_AT_LEAST;
  if (n == "rated") return v1::PROBABILITY_RATED;
  if (n == "rated-prob" || n == "rated_prob") {
    return v1::PROBABILITY_RATED_AT_LEAST;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--by: expected 'expected', 'prob', 'rated' or 'rated-prob', got '", name,
      "'"));
}

absl::StatusOr<v1::ActivationPolicy> ParseActivation(absl::string_view name) {
  const std::string n = absl::AsciiStrToLower(name);
  if (n == "always") return v1::ACTIVATE_ALWAYS;
  if (n == "if-better" || n == "if_better") return v1::ACTIVATE_IF_BETTER;
  if (n == "never") return v1::ACTIVATE_NEVER;
  return absl::InvalidArgumentError(absl::StrCat(
      "--activate: expected always, if-better or never, got '", name, "'"));
}

absl::StatusOr<v1::ItemRating> ParseItemRating(absl::string_view text) {
  const size_t eq = text.rfind('=');
  if (eq == absl::string_view::npos || eq == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rate: expected ITEM=RATING, got '", text, "'"));
  }
  absl::StatusOr<std::string> item = IdArgument(text.substr(0, eq), "--rate");
  if (!item.ok()) return item.status();
  // A plain decimal number, as in a rating file (not "0x4", "inf", "nan").
  const absl::string_view value = text.substr(eq + 1);
  const std::string_view trimmed =
      TrimBlanks(std::string_view(value.data(), value.size()));
  double rating = 0;
  if (!ParsePlainDecimal(trimmed, &rating) || !std::isfinite(rating)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rate ", *item, ": expected a number, got '", value, "'"));
  }
  v1::ItemRating out;
  out.set_item_id(*std::move(item));
  out.set_rating(rating);
  return out;
}

absl::StatusOr<std::string> IdArgument(absl::string_view arg,
                                       absl::string_view what) {
  const std::string_view id =
      TrimBlanks(std::string_view(arg.data(), arg.size()));
  if (id.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what,
                     ": the id is empty (spaces and tabs around ids are "
                     "dropped, as in rating files)"));
  }
  return std::string(id);
}

absl::StatusOr<std::string> UserArgument(absl::string_view arg) {
  absl::StatusOr<std::string> user = IdArgument(arg, "USER");
  if (user.ok() && *user == "-") return std::string();
  return user;
}

namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

// Sets an optional int32 TrainOptions field from flag `name` when given.
template <typename Setter>
absl::Status MaybeInt32(const ParsedArgs& args, absl::string_view name,
                        Setter set) {
  if (!args.Has(name)) return absl::OkStatus();
  absl::StatusOr<int64_t> v = GetInt(args, name, 0, -kInt32Max, kInt32Max);
  if (!v.ok()) return v.status();
  set(static_cast<int32_t>(*v));
  return absl::OkStatus();
}

template <typename Setter>
absl::Status MaybeDouble(const ParsedArgs& args, absl::string_view name,
                         Setter set) {
  if (!args.Has(name)) return absl::OkStatus();
  absl::StatusOr<double> v =
      GetDouble(args, name, 0, -std::numeric_limits<double>::max(),
                std::numeric_limits<double>::max());
  if (!v.ok()) return v.status();
  set(*v);
  return absl::OkStatus();
}

// --NAME true|false (also 1|0).
template <typename Setter>
absl::Status MaybeBool(const ParsedArgs& args, absl::string_view name,
                       Setter set) {
  if (!args.Has(name)) return absl::OkStatus();
  const std::string text = args.Get(name, "");
  if (text == "true" || text == "1") {
    set(true);
  } else if (text == "false" || text == "0") {
    set(false);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, ": expected true or false, got '", text, "'"));
  }
  return absl::OkStatus();
}

absl::Status AddRatingsAndModel(
    const ParsedArgs& args,
    google::protobuf::RepeatedPtrField<v1::ItemRating>* ratings,
    int64_t* model_version, v1::Method* method) {
  for (const std::string& r : args.GetAll("rate")) {
    absl::StatusOr<v1::ItemRating> rating = ParseItemRating(r);
    if (!rating.ok()) return rating.status();
    *ratings->Add() = *rating;
  }
  absl::StatusOr<int64_t> model =
      GetInt(args, "model", 0, 1, std::numeric_limits<int64_t>::max());
  if (!model.ok()) return model.status();
  *model_version = *model;
  if (args.Has("method")) {
    absl::StatusOr<v1::Method> m = ParseMethod(args.Get("method", ""));
    if (!m.ok()) return m.status();
    *method = *m;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::TrainRequest> BuildTrainRequest(const ParsedArgs& args) {
  v1::TrainRequest request;
  v1::TrainOptions* o = request.mutable_options();
  const absl::Status statuses[] = {
      MaybeInt32(args, "hidden", [o](int32_t v) { o->set_hidden(v); }),
      MaybeInt32(args, "epochs", [o](int32_t v) { o->set_epochs(v); }),
      MaybeInt32(args, "batch-size", [o](int32_t v) { o->set_batch_size(v); }),
      MaybeDouble(args, "learning-rate",
                  [o](double v) { o->set_learning_rate(v); }),
      MaybeDouble(args, "lr", [o](double v) { o->set_learning_rate(v); }),
      MaybeDouble(args, "momentum", [o](double v) { o->set_momentum(v); }),
      MaybeDouble(args, "weight-decay",
                  [o](double v) { o->set_weight_decay(v); }),
      MaybeInt32(args, "cd-steps", [o](int32_t v) { o->set_cd_steps(v); }),
      MaybeInt32(args, "threads", [o](int32_t v) { o->set_threads(v); }),
      MaybeDouble(args, "validation-fraction",
                  [o](double v) { o->set_validation_fraction(v); }),
      MaybeInt32(args, "ensemble", [o](int32_t v) { o->set_ensemble(v); }),
      MaybeInt32(args, "factors", [o](int32_t v) { o->set_factors(v); }),
      MaybeDouble(args, "average", [o](double v) { o->set_average(v); }),
      MaybeBool(args, "ordinal", [o](bool v) { o->set_ordinal(v); }),
  };
  for (const absl::Status& s : statuses) {
    if (!s.ok()) return s;
  }
  if (args.Has("learning-rate") && args.Has("lr")) {
    return absl::InvalidArgumentError(
        "--lr is an alias of --learning-rate; give only one");
  }
  if (args.Has("activate")) {
    absl::StatusOr<v1::ActivationPolicy> policy =
        ParseActivation(args.Get("activate", ""));
    if (!policy.ok()) return policy.status();
    request.set_activation(*policy);
  }
  if (args.Has("seed")) {
    uint64_t seed = 0;
    const std::string text = args.Get("seed", "");
    if (!absl::SimpleAtoi(text, &seed)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--seed: expected a non-negative integer, got '", text, "'"));
    }
    o->set_seed(seed);
  }
  return request;
}

absl::StatusOr<v1::PredictRatingsRequest> BuildPredictRequest(
    const ParsedArgs& args) {
  v1::PredictRatingsRequest request;
  if (args.positional.empty()) {
    return absl::InvalidArgumentError("'rbmrec predict': missing USER");
  }
  absl::StatusOr<std::string> user = UserArgument(args.positional[0]);
  if (!user.ok()) return user.status();
  request.set_user_id(*std::move(user));
  for (size_t i = 1; i < args.positional.size(); ++i) {
    absl::StatusOr<std::string> item = IdArgument(args.positional[i], "ITEM");
    if (!item.ok()) return item.status();
    request.add_item_ids(*std::move(item));
  }
  int64_t model = 0;
  v1::Method method = v1::METHOD_UNSPECIFIED;
  if (absl::Status s =
          AddRatingsAndModel(args, request.mutable_ratings(), &model, &method);
      !s.ok()) {
    return s;
  }
  request.set_model_version(model);
  request.set_method(method);
  return request;
}

absl::StatusOr<v1::RecommendRequest> BuildRecommendRequest(
    const ParsedArgs& args) {
  v1::RecommendRequest request;
  if (args.positional.empty()) {
    return absl::InvalidArgumentError("'rbmrec recommend': missing USER");
  }
  absl::StatusOr<std::string> user = UserArgument(args.positional[0]);
  if (!user.ok()) return user.status();
  request.set_user_id(*std::move(user));
  absl::StatusOr<int64_t> n = GetInt(args, "n", 10, 1, kInt32Max);
  if (!n.ok()) return n.status();
  request.set_n(static_cast<int32_t>(*n));

  v1::RankBy by = v1::RANK_BY_UNSPECIFIED;  // the server's default
  if (args.Has("by")) {
    absl::StatusOr<v1::RankBy> parsed = ParseRankBy(args.Get("by", ""));
    if (!parsed.ok()) return parsed.status();
    if ((*parsed == v1::EXPECTED_RATING || *parsed == v1::PROBABILITY_RATED) &&
        args.Has("threshold")) {
      return absl::InvalidArgumentError(
          "--threshold applies only with --by prob or rated-prob");
    }
    by = *parsed;
  }
  request.set_rank_by(by);
  if (by == v1::PROBABILITY_AT_LEAST || args.Has("threshold")) {
    absl::StatusOr<double> threshold =
        GetDouble(args, "threshold", 4.0, -std::numeric_limits<double>::max(),
                  std::numeric_limits<double>::max());
    if (!threshold.ok()) return threshold.status();
    request.set_threshold(*threshold);
  }
  int64_t model = 0;
  v1::Method method = v1::METHOD_UNSPECIFIED;
  if (absl::Status s =
          AddRatingsAndModel(args, request.mutable_ratings(), &model, &method);
      !s.ok()) {
    return s;
  }
  request.set_model_version(model);
  request.set_method(method);
  return request;
}

}  // namespace rbmrec::client
