#include "server/security/token_command.h"

#include <iostream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/string_view.h"
#include "server/security/auth.h"

namespace rbmrec::server {
namespace {

constexpr char kTokenUsage[] =
    "usage: rbmrec-server token new NAME ROLE   (ROLE: read, write or admin)\n"
    "       rbmrec-server token hash            (reads the token on stdin)\n";

}  // namespace

int TokenCommand(int argc, char** argv) {
  const std::string sub = argc >= 3 ? argv[2] : "";
  if (sub == "new" && argc == 5) {
    const std::string name = argv[3];
    Role role;
    if (!ValidClientName(name)) {
      std::cerr << "rbmrec-server token new: NAME must be 1-64 characters of "
                   "A-Z a-z 0-9 . _ @ -, got '"
                << name << "'\n";
      return 1;
    }
    if (!ParseRole(argv[4], &role)) {
      std::cerr << "rbmrec-server token new: ROLE must be read, write or "
                   "admin, got '"
                << argv[4] << "'\n";
      return 1;
    }
    absl::StatusOr<std::string> token = NewToken();
    if (!token.ok()) {
      std::cerr << "rbmrec-server token new: " << token.status().message()
                << "\n";
      return 1;
    }
    std::cout << *token << "\n"
              << name << " " << RoleName(role) << " " << TokenHashText(*token)
              << "\n";
    std::cerr << "Line 1 is the token: give it to the client '" << name
              << "' (rbmrec --token-file, or RBMREC_TOKEN); it is shown only "
                 "this once.\nLine 2 goes into the server's --auth-tokens "
                 "file; send the server SIGHUP to load it.\n";
    return 0;
  }
  if (sub == "hash" && argc == 3) {
    std::string token;
    std::getline(std::cin, token);
    absl::string_view trimmed = absl::StripAsciiWhitespace(token);
    if (trimmed.empty()) {
      std::cerr << "rbmrec-server token hash: no token on stdin\n";
      return 1;
    }
    // A token the server would refuse in the authorization header must not
    // get a token-file line that looks usable.
    if (!ValidTokenSyntax(trimmed)) {
      std::cerr << "rbmrec-server token hash: not a token a client can send "
                   "(1 or more of A-Z a-z 0-9 - . _ ~ + / then any number of "
                   "'='; 'rbmrec-server token new' makes one)\n";
      return 1;
    }
    std::cout << TokenHashText(trimmed) << "\n";
    return 0;
  }
  std::cerr << kTokenUsage;
  return 1;
}

}  // namespace rbmrec::server
