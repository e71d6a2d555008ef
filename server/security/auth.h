#ifndef RBMREC_SERVER_SECURITY_AUTH_H_
#define RBMREC_SERVER_SECURITY_AUTH_H_

// Client tokens and roles, free of any transport.
//
// Token file (--auth-tokens): UTF-8 text, one client per line,
//   NAME ROLE sha256:<64 lowercase hex digits>
// fields separated by spaces or tabs; blank lines and lines whose first
// non-blank character is '#' are ignored. NAME is [A-Za-z0-9._@-]{1,64} and
// unique; ROLE is read, write or admin; the hash is SHA-256 of the token's
// bytes (the token itself is never stored). Two clients may not share a
// hash.
//
// Roles are ordered: read < write < admin; a client may call every method
// whose required role is at most its own (RequiredRole).
//
// A presented token is looked up by hashing it with SHA-256 and comparing
// the digest with every entry's digest using CRYPTO_memcmp (constant time
// per comparison), without stopping at a match: the time taken depends on
// the number of clients, not on how many leading bytes of the token or of
// its digest agree with a stored one.
// (A map keyed by the digest would also leak nothing useful about a token -
// an attacker cannot choose a digest's bytes - but the linear scan needs no
// such argument, and token files hold few clients.)
//
// The token file must not be writable by its group or others (mode & 022,
// as ssh treats key files: whoever can write it can add an admin): such a
// file is refused at start and on reload, naming the file, its mode and
// the fix (chmod 600). A file with no client line is refused too (every
// call would be refused). On reload, a refused file leaves the current
// table in use.
//
// The `authorization` metadata must be exactly "Bearer " and the token:
// the scheme is matched case-insensitively (RFC 7235: "bearer", "BEARER"),
// then exactly one space, then the token with nothing after it (no
// trailing space), the whole value at most kMaxAuthorizationBytes. The
// token has RFC 6750's b64token syntax: one or more of A-Z a-z 0-9 - . _ ~
// + /, then any number of '='. Tokens from `rbmrec-server token new`
// ("rbmrec_" and 43 base64url characters) have it. The shape is checked
// before the token is hashed, so an oversized or malformed value costs no
// hashing.

#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/optional.h"

namespace google::protobuf {
class ServiceDescriptor;
}  // namespace google::protobuf

namespace rbmrec::server {

enum class Role { kRead = 1, kWrite = 2, kAdmin = 3 };

// "read", "write", "admin".
absl::string_view RoleName(Role role);
// Parses a role name (exact, lower case); false when unknown.
bool ParseRole(absl::string_view text, Role* out);

using Sha256Digest = std::array<unsigned char, 32>;

// SHA-256 of `data`'s bytes. Uses an EVP_MD fetched once per process
// (OpenSSL 3's one-shot SHA256() fetches the algorithm from the provider
// store on every call, under a global lock: ~2.5x the time for a token).
Sha256Digest Sha256(absl::string_view data);
// The token-file form of a token's hash: "sha256:" + 64 lowercase hex.
std::string TokenHashText(absl::string_view token);

// Longest `authorization` value read: "Bearer " and a token of up to 505
// bytes (tokens from `token new` are 50).
inline constexpr size_t kMaxAuthorizationBytes = 512;
// The token syntax, for messages.
inline constexpr absl::string_view kTokenSyntax =
    "1 or more of A-Z a-z 0-9 - . _ ~ + / then any number of '='";

// Whether `token` has the syntax above (kTokenSyntax) and fits in an
// `authorization` value of kMaxAuthorizationBytes.
bool ValidTokenSyntax(absl::string_view token);
// The token of an `authorization` value "Bearer TOKEN" (scheme in any
// case, one space, ValidTokenSyntax(TOKEN), at most kMaxAuthorizationBytes
// in all), or empty when the value is not of that shape.
absl::string_view BearerToken(absl::string_view authorization);

// Whether `name` is a valid client name: [A-Za-z0-9._@-]{1,64}.
bool ValidClientName(absl::string_view name);

// A fresh token: "rbmrec_" + 43 characters, the unpadded base64url of 32
// bytes from OpenSSL's CSPRNG (RAND_bytes, seeded by the OS). Internal error
// when the generator fails.
absl::StatusOr<std::string> NewToken();

struct TokenEntry {
  std::string name;
  Role role = Role::kRead;
  Sha256Digest digest{};
};

// An immutable set of clients. Thread-safe (const).
class TokenTable {
 public:
  // Parses token-file text. InvalidArgument naming "FILE:LINE: ..." (FILE
  // is `file_name`) for the first bad line: wrong field count, bad name,
  // unknown role, malformed hash, duplicate name or duplicate hash.
  static absl::StatusOr<TokenTable> Parse(absl::string_view text,
                                          absl::string_view file_name);
  // Reads and parses the file at `path` (at most 1 MiB). NotFound /
  // PermissionDenied / InvalidArgument naming the file; FailedPrecondition
  // when the file is writable by its group or others ("token file F has
  // mode 0666: writable by its group and others, ...; make it writable by
  // its owner only (chmod 600 F, ...)") or holds no client ("token file F
  // has no clients: every call would be refused; ...").
  static absl::StatusOr<TokenTable> Load(const std::string& path);

  // The client whose token is `token`, or null (see the file comment on
  // timing). The pointer lives as long as this table.
  const TokenEntry* Find(absl::string_view token) const;

  const std::vector<TokenEntry>& entries() const { return entries_; }

 private:
  std::vector<TokenEntry> entries_;
};

// The role each method of rbmrec.v1.Rbmrec needs, by its short name
// ("Train"); nullopt for a name not in the table.
absl::optional<Role> RequiredRole(absl::string_view method);

// The role reflection (grpc.reflection.v1 / v1alpha) needs when tokens are
// on: read. grpc.health.v1 needs none.
inline constexpr Role kReflectionRole = Role::kRead;

// OK when every method of `service` has a role in the table and every name
// in the table is a method of `service`; otherwise Internal naming the
// methods (so a new RPC cannot be served without a role).
absl::Status CheckRoleTable(const google::protobuf::ServiceDescriptor& service);

// Who called: the outcome of a successful Authorizer::Check.
struct Caller {
  std::string name;
  Role role = Role::kRead;
};

// The token file loaded by the server, reloadable. Thread-safe: Check may
// run on any number of threads while Reload runs; each Check sees either
// the old or the new table, never a mix.
class Authorizer {
 public:
  // Loads `path` (TokenTable::Load errors).
  static absl::StatusOr<std::unique_ptr<Authorizer>> Create(std::string path);
  // For tests: a fixed table; Reload fails.
  explicit Authorizer(TokenTable table);

  // Re-reads the file. On error the current table stays in use and the
  // error is returned.
  absl::Status Reload() ABSL_LOCKS_EXCLUDED(mu_);

  // Decides one call of `method` (a display name, e.g. "Train") that needs
  // `needed`, presented with the value of its `authorization` header
  // (`authorization` null: no such header). Expects "Bearer <token>" as
  // BearerToken reads it, checked before any hashing. UNAUTHENTICATED
  // "missing or unknown token (send ...)" when there is no header or the
  // token is unknown, "missing or unknown token: the authorization metadata
  // must be 'Bearer TOKEN' (...)" when the value is not of that shape;
  // PERMISSION_DENIED "METHOD needs the ROLE role; client 'NAME' has ROLE"
  // when the client's role is too low. `caller` (may be null) is set
  // whenever the token is known.
  absl::Status Check(const std::string* authorization, absl::string_view method,
                     Role needed, Caller* caller) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // The same with the header's value as a view (nullopt: no such header),
  // so that a caller holding gRPC's metadata need not copy it.
  absl::Status CheckHeader(absl::optional<absl::string_view> authorization,
                           absl::string_view method, Role needed,
                           Caller* caller) const ABSL_LOCKS_EXCLUDED(mu_);

  // The current table (a snapshot).
  std::shared_ptr<const TokenTable> table() const ABSL_LOCKS_EXCLUDED(mu_);
  const std::string& path() const { return path_; }

 private:
  Authorizer(std::string path, TokenTable table);

  const std::string path_;  // empty: fixed table
  mutable absl::Mutex mu_;
  std::shared_ptr<const TokenTable> table_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rbmrec::server

#endif  // RBMREC_SERVER_SECURITY_AUTH_H_
