#ifndef RBMREC_CLIENT_CLI_INTERNAL_H_
#define RBMREC_CLIENT_CLI_INTERNAL_H_

// Helpers shared by the parts of client/cli.h: cli.cc (the parser),
// cli_table.cc (the command table) and cli_help.cc (the usage texts).

#include <algorithm>
#include <string>
#include <vector>

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

}  // namespace rbmrec::client

#endif  // RBMREC_CLIENT_CLI_INTERNAL_H_
