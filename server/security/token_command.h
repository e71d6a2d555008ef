#ifndef RBMREC_SERVER_SECURITY_TOKEN_COMMAND_H_
#define RBMREC_SERVER_SECURITY_TOKEN_COMMAND_H_

// `rbmrec-server token new NAME ROLE` (prints a new client token and its
// --auth-tokens line) and `rbmrec-server token hash` (the line of a token
// read on stdin).

namespace rbmrec::server {

// Runs `rbmrec-server token ...` (argv[1] == "token"): the exit status,
// 0 on success, 1 with a message on stderr otherwise. Not thread-safe
// (stdin/stdout); call from main.
int TokenCommand(int argc, char** argv);

}  // namespace rbmrec::server

#endif  // RBMREC_SERVER_SECURITY_TOKEN_COMMAND_H_
