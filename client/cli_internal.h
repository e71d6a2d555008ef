#ifndef RBMREC_CLIENT_CLI_INTERNAL_H_
#define RBMREC_CLIENT_CLI_INTERNAL_H_

// Helpers shared by the parts of client/cli.h: cli.cc (the parser and the
// CLI11 app tree built from the command table), cli_table.cc (the command
// table) and cli_formatter.cc (CLI11's --help of that app tree).

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_join.h"
#include "client/cli.h"

namespace rbmrec::client {

// "items import".
inline std::string Joined(const std::vector<std::string>& words) {
  return absl::StrJoin(words, " ");
}

// Whether the command words `path` begin with `prefix`.
inline bool StartsWith(const std::vector<std::string>& path,
                       const std::vector<std::string>& prefix) {
  return path.size() >= prefix.size() &&
         std::equal(prefix.begin(), prefix.end(), path.begin());
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

// The CLI11 app tree of the command table, by command words ({} is `root`).
using AppTree = std::map<std::vector<std::string>, AppNode>;

// Builds the app tree in `root` (cli.cc): the program's description, footer
// and global flags on the root, a subcommand per command word with the
// command's description and flags, and the --help formatter of
// MakeHelpFormatter on every app.
void BuildAppTree(CLI::App& root, AppTree& nodes);

// The CLI::Formatter of every app in the tree (cli_formatter.cc).
std::shared_ptr<CLI::Formatter> MakeHelpFormatter();

}  // namespace rbmrec::client

#endif  // RBMREC_CLIENT_CLI_INTERNAL_H_
