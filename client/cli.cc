// The parser of the rbmrec command line (client/cli.h): a CLI11 app tree
// built from the command table (cli_table.cc), whose results are checked and
// turned into ParsedArgs here.

#include "client/cli.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/cli_internal.h"

namespace rbmrec::client {
namespace {

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

}  // namespace

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

// Adds `flags` to `app`, storing their values in `node`. Every value flag
// takes exactly one value per occurrence and may occur any number of times
// (ParseArgs reports a repeated single-value flag itself). The table's
// "help" is CLI11's own help flag, which every subcommand inherits.
void AddFlags(const std::vector<FlagSpec>& flags, AppNode* node) {
  for (const FlagSpec& f : flags) {
    std::string names = absl::StrCat("--", f.name);
    if (f.short_name != 0) {
      names = absl::StrCat("-", std::string(1, f.short_name), ",", names);
    }
    if (f.name == "help") {
      node->app->set_help_flag(names, f.help);
    } else if (f.kind == FlagKind::kBool) {
      node->app->add_flag(names, node->counts[f.name], f.help);
    } else {
      node->app->add_option(names, node->values[f.name], f.help)
          ->type_name(f.value_name)
          ->expected(1)
          ->allow_extra_args(false)
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    }
  }
}

// The arguments as CLI11 is given them: those before "--" (the ones after
// it are positional, in `after`); "help" as the first command word sets
// `help`; "-n=7" becomes "-n 7" and "--name=" "--name ''"; "--lenient=x" is
// an error (CLI11 would read x as a boolean).
absl::Status PrepareArgs(const std::vector<std::string>& args, bool* help,
                         std::vector<std::string>* prepared,
                         std::vector<std::string>* after) {
  std::vector<std::string> before;
  bool dashdash = false;
  for (const std::string& arg : args) {
    if (dashdash) {
      after->push_back(arg);
    } else if (arg == "--") {
      dashdash = true;
    } else {
      before.push_back(arg);
    }
  }
  bool seen_word = false;
  for (size_t i = 0; i < before.size(); ++i) {
    const std::string& arg = before[i];
    absl::string_view name;
    bool is_short = false;
    if (!SplitFlag(arg, &name, &is_short)) {
      if (!seen_word && arg == "help" && !*help) {
        *help = true;
        continue;
      }
      seen_word = true;
      prepared->push_back(arg);
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
      prepared->push_back(arg.substr(0, eq));
      prepared->push_back(arg.substr(eq + 1));
      continue;
    }
    prepared->push_back(arg);
    // The value of a value flag is not a command word.
    if (spec != nullptr && spec->kind != FlagKind::kBool &&
        i + 1 < before.size()) {
      prepared->push_back(before[++i]);
    }
  }
  return absl::OkStatus();
}

// Runs CLI11 (its exceptions stay here) and returns the words of the command
// it found; a help flag sets `help`.
absl::StatusOr<std::vector<std::string>> RunCli11(
    CLI::App& root, const std::vector<std::string>& prepared, bool* help) {
  std::vector<std::string> reversed(prepared.rbegin(), prepared.rend());
  try {
    root.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    *help = true;  // after the values were stored; extras are checked later
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
  return words;
}

// Arguments nobody took: unknown flags or command words, reported in
// command-line order.
absl::Status CheckExtras(const CLI::App& root,
                         const std::vector<std::string>& prepared,
                         const std::vector<std::string>& words,
                         const CommandSpec* command) {
  const std::vector<std::string> extras = root.remaining(true);
  if (extras.empty()) return absl::OkStatus();
  const std::string& arg = extras.front();
  absl::string_view name;
  bool is_short = false;
  if (SplitFlag(arg, &name, &is_short)) {
    const std::string shown = absl::StrCat(is_short ? "-" : "--", name);
    const bool before_command =
        words.empty() ||
        std::find(prepared.begin(), prepared.end(), arg) <
            std::find(prepared.begin(), prepared.end(), words.front());
    if (command != nullptr && !before_command) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown flag ", shown, " for 'rbmrec ", Joined(command->path), "'"));
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

// Flag values of the global flags and of every app on the command's path,
// into `out->flags`.
absl::Status CollectFlags(const AppTree& nodes,
                          const std::vector<std::string>& words,
                          ParsedArgs* out) {
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
      std::vector<std::string>& dest = out->flags[name];
      dest.insert(dest.end(), values.begin(), values.end());
    }
    for (const auto& [name, count] : n.counts) {
      for (int64_t i = 0; i < count; ++i) out->flags[name].push_back("true");
    }
  }
  return absl::OkStatus();
}

// out->global from the flags (and $RBMREC_SERVER).
absl::Status ApplyGlobalFlags(absl::string_view server_env, ParsedArgs* out) {
  out->global.json = out->Has("json");
  out->global.server =
      out->Get("server", server_env.empty() ? kDefaultServer : server_env);
  if (out->global.server.empty()) {
    return absl::InvalidArgumentError("--server: must not be empty");
  }
  if (out->Has("timeout")) {
    const std::string text = out->Get("timeout", "");
    absl::StatusOr<double> timeout = ParseDouble(text, "--timeout");
    if (!timeout.ok()) return timeout.status();
    if (!(*timeout > 0) || !std::isfinite(*timeout)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--timeout: must be a positive number of seconds, got '", text, "'"));
    }
    out->global.timeout_seconds = *timeout;
  }
  SecuritySettings& security = out->global.security;
  const std::pair<const char*, std::optional<std::string>*> security_flags[] = {
      {"tls-ca", &security.tls_ca},
      {"tls-cert", &security.tls_cert},
      {"tls-key", &security.tls_key},
      {"tls-server-name", &security.tls_server_name},
      {"token-file", &security.token_file}};
  for (const auto& [name, value] : security_flags) {
    if (out->Has(name)) *value = out->Get(name, "");
  }
  return absl::OkStatus();
}

// A command (not a group alone) with as many arguments as it takes.
absl::Status CheckCommandArgs(const ParsedArgs& out) {
  if (out.command == nullptr) {
    if (out.group.empty()) return absl::InvalidArgumentError("missing command");
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
  return absl::OkStatus();
}

}  // namespace

// The CLI11 app tree: the root holds the global flags; each command word
// path is a subcommand; unknown arguments fall through to the root and are
// reported by CheckExtras. At most one subcommand per level, so a later word
// that names a command elsewhere is a positional argument (the catch-all
// "args", left out of --help, whose usage line names the table's arguments).
void BuildAppTree(CLI::App& root, AppTree& nodes) {
  root.name("rbmrec");
  root.description(std::string(ProgramDescription()));
  root.formatter(MakeHelpFormatter());  // inherited by every subcommand
  root.set_help_flag();
  root.allow_extras(true);
  root.require_subcommand(0, 1);
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
        node.app->group("Commands");
        node.app->allow_extras(true);
        node.app->fallthrough(true);
        node.app->require_subcommand(0, 1);
      }
      if (depth == c.path.size()) {
        node.command = &c;
        node.app->description(c.description);
        node.app->add_option("args", node.positional)
            ->expected(0, -1)
            ->group("");
        AddFlags(c.flags, &node);
      }
    }
  }
  root.footer(std::string(ProgramFooter()));  // not inherited: set last
}

absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<std::string>& args,
                                     absl::string_view server_env) {
  ParsedArgs out;
  std::vector<std::string> prepared;
  std::vector<std::string> after;
  if (absl::Status s = PrepareArgs(args, &out.help, &prepared, &after);
      !s.ok()) {
    return s;
  }
  CLI::App root;
  AppTree nodes;
  BuildAppTree(root, nodes);
  absl::StatusOr<std::vector<std::string>> words =
      RunCli11(root, prepared, &out.help);
  if (!words.ok()) return words.status();
  const AppNode& node = nodes.at(*words);
  out.command = node.command;
  if (out.command == nullptr && !words->empty()) out.group = *words;
  out.positional = node.positional;
  out.positional.insert(out.positional.end(), after.begin(), after.end());

  for (absl::Status s : {CheckExtras(root, prepared, *words, out.command),
                         CollectFlags(nodes, *words, &out)}) {
    if (!s.ok()) return s;
  }
  if (absl::Status s = ApplyGlobalFlags(server_env, &out); !s.ok()) return s;
  if (out.help) return out;
  if (absl::Status s = CheckCommandArgs(out); !s.ok()) return s;
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

}  // namespace rbmrec::client
