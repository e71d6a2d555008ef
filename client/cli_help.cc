// The usage texts of the rbmrec CLI (client/cli.h), generated from the
// command table: the top-level command list, a command's synopsis, flags and
// subcommands, and a command group's commands.

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/cli.h"
#include "client/cli_internal.h"

namespace rbmrec::client {
namespace {

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

}  // namespace rbmrec::client
