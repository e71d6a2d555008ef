// rbmrec: the command-line client of rbmrec-server. See `rbmrec --help`.

#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "client/commands.h"
#include "core/cpu_check.h"
#include "grpc/support/log.h"

namespace {

// False only when the locale is set and is not UTF-8 (e.g. LANG=C).
bool LocaleIsUnicode() {
  for (const char* name : {"LC_ALL", "LC_CTYPE", "LANG"}) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') continue;
    const std::string v = absl::AsciiStrToLower(value);
    return absl::StrContains(v, "utf-8") || absl::StrContains(v, "utf8");
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (!rbmrec::CpuSupported("rbmrec")) return 1;
  // gRPC's own log lines (e.g. "Handshake failed ...") repeat what the
  // failed call's status says, which the CLI prints with a hint; they are
  // shown only when asked for with GRPC_VERBOSITY.
  if (std::getenv("GRPC_VERBOSITY") == nullptr) {
    gpr_set_log_function([](gpr_log_func_args*) {});
  }
  rbmrec::client::Environment env;
  if (const char* server = std::getenv("RBMREC_SERVER")) {
    env.server_env = server;
  }
  env.security_env = rbmrec::client::SecurityEnvFromProcess();
  env.stderr_is_tty = isatty(STDERR_FILENO) == 1;
  env.unicode = LocaleIsUnicode();
  env.handle_signals = true;
  const std::vector<std::string> args(argv + 1, argv + argc);
  const int code = rbmrec::client::RunCli(args, env, std::cout, std::cerr);
  std::cout.flush();
  return code;
}
