#include "server/security/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "google/protobuf/descriptor.h"

namespace rbmrec::server {
namespace {

constexpr absl::string_view kHashPrefix = "sha256:";
// The scheme of the `authorization` value, with its one space, as matched
// (case-insensitively).
constexpr absl::string_view kBearerScheme = "bearer ";
constexpr size_t kMaxTokenFileBytes = 1 << 20;

// The role table: every method of rbmrec.v1.Rbmrec (checked against the
// service descriptor by CheckRoleTable at start). GetUserRatings hands out
// a named user's stored ratings: write, as ad-hoc ratings merged over a
// stored user's (read-role privacy, docs/security.md).
struct MethodRole {
  absl::string_view method;
  Role role;
};
constexpr MethodRole kMethodRoles[] = {
    {"PredictRatings", Role::kRead}, {"Recommend", Role::kRead},
    {"GetStats", Role::kRead},       {"ListModels", Role::kRead},
    {"SimilarItems", Role::kRead},   {"RecommendAll", Role::kRead},
    {"AddRatings", Role::kWrite},    {"DeleteRatings", Role::kWrite},
    {"DeleteUser", Role::kWrite},    {"PutItems", Role::kWrite},
    {"Train", Role::kAdmin},         {"CancelTraining", Role::kAdmin},
    {"ActivateModel", Role::kAdmin}, {"DeleteModel", Role::kAdmin},
    {"PinModel", Role::kAdmin},      {"PruneModels", Role::kAdmin},
    {"GetItem", Role::kRead},        {"GetUserRatings", Role::kWrite},
};

bool ParseDigest(absl::string_view text, Sha256Digest* out) {
  if (!absl::ConsumePrefix(&text, kHashPrefix)) return false;
  if (text.size() != 2 * out->size()) return false;
  for (size_t i = 0; i < out->size(); ++i) {
    int byte = 0;
    for (char c : text.substr(2 * i, 2)) {
      int v;
      if (c >= '0' && c <= '9') {
        v = c - '0';
      } else if (c >= 'a' && c <= 'f') {
        v = c - 'a' + 10;
      } else {
        return false;  // upper case included: one spelling per hash
      }
      byte = byte * 16 + v;
    }
    (*out)[i] = static_cast<unsigned char>(byte);
  }
  return true;
}

}  // namespace

absl::string_view RoleName(Role role) {
  switch (role) {
    case Role::kRead:
      return "read";
    case Role::kWrite:
      return "write";
    case Role::kAdmin:
      return "admin";
  }
  return "unknown";
}

bool ParseRole(absl::string_view text, Role* out) {
  for (Role r : {Role::kRead, Role::kWrite, Role::kAdmin}) {
    if (text == RoleName(r)) {
      *out = r;
      return true;
    }
  }
  return false;
}

Sha256Digest Sha256(absl::string_view data) {
  // Fetched once, kept for the life of the process (thread-safe: a function
  // static, and an EVP_MD is read-only once fetched).
  static EVP_MD* const kSha256 = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  Sha256Digest digest;
  unsigned int size = 0;
  if (kSha256 == nullptr ||
      EVP_Digest(data.data(), data.size(), digest.data(), &size, kSha256,
                 nullptr) != 1 ||
      size != digest.size()) {
    SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(),
           digest.data());
  }
  return digest;
}

bool ValidTokenSyntax(absl::string_view token) {
  if (token.empty() ||
      token.size() > kMaxAuthorizationBytes - kBearerScheme.size()) {
    return false;
  }
  size_t i = 0;
  for (; i < token.size(); ++i) {
    const char c = token[i];
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' &&
        c != '.' && c != '_' && c != '~' && c != '+' && c != '/') {
      break;
    }
  }
  if (i == 0) return false;  // at least one character before any '='
  for (; i < token.size(); ++i) {
    if (token[i] != '=') return false;
  }
  return true;
}

absl::string_view BearerToken(absl::string_view authorization) {
  if (authorization.size() > kMaxAuthorizationBytes ||
      authorization.size() <= kBearerScheme.size() ||
      !absl::EqualsIgnoreCase(authorization.substr(0, kBearerScheme.size()),
                              kBearerScheme)) {
    return {};
  }
  const absl::string_view token = authorization.substr(kBearerScheme.size());
  return ValidTokenSyntax(token) ? token : absl::string_view();
}

std::string TokenHashText(absl::string_view token) {
  const Sha256Digest digest = Sha256(token);
  return absl::StrCat(
      kHashPrefix,
      absl::BytesToHexString(absl::string_view(
          reinterpret_cast<const char*>(digest.data()), digest.size())));
}

bool ValidClientName(absl::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' &&
        c != '_' && c != '@' && c != '-') {
      return false;
    }
  }
  return true;
}

absl::StatusOr<std::string> NewToken() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) {
    return absl::InternalError(
        "the random generator (OpenSSL RAND_bytes) failed; no token made");
  }
  std::string encoded;
  absl::WebSafeBase64Escape(
      absl::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)),
      &encoded);
  OPENSSL_cleanse(bytes, sizeof(bytes));
  return absl::StrCat("rbmrec_", encoded);
}

absl::StatusOr<TokenTable> TokenTable::Parse(absl::string_view text,
                                             absl::string_view file_name) {
  TokenTable table;
  absl::flat_hash_map<std::string, int> names;  // name -> line
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    auto error = [&](absl::string_view what) {
      return absl::InvalidArgumentError(
          absl::StrCat(file_name, ":", line_number, ": ", what));
    };
    line = absl::StripAsciiWhitespace(line);  // also a trailing '\r'
    if (line.empty() || line.front() == '#') continue;
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (fields.size() != 3) {
      return error(absl::StrCat(
          "expected 3 fields 'NAME ROLE sha256:HEX', got ", fields.size()));
    }
    TokenEntry entry;
    if (!ValidClientName(fields[0])) {
      return error(
          "NAME must be 1-64 characters of A-Z a-z 0-9 . _ @ - (the first "
          "field)");
    }
    entry.name = std::string(fields[0]);
    if (!ParseRole(fields[1], &entry.role)) {
      return error(absl::StrCat("ROLE of client '", entry.name,
                                "' must be read, write or admin"));
    }
    if (!ParseDigest(fields[2], &entry.digest)) {
      return error(absl::StrCat(
          "the hash of client '", entry.name,
          "' must be 'sha256:' and 64 lowercase hex digits (the output of "
          "`rbmrec-server token hash`), never the token itself"));
    }
    if (auto [it, inserted] = names.emplace(entry.name, line_number);
        !inserted) {
      return error(absl::StrCat("client name '", entry.name,
                                "' already used on line ", it->second));
    }
    for (const TokenEntry& other : table.entries_) {
      if (other.digest == entry.digest) {
        return error(absl::StrCat("client '", entry.name,
                                  "' has the same token hash as client '",
                                  other.name, "'; give each its own token"));
      }
    }
    table.entries_.push_back(std::move(entry));
  }
  return table;
}

absl::StatusOr<TokenTable> TokenTable::Load(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    const int err = errno;
    std::string message =
        absl::StrCat("cannot read token file ", path, ": ", std::strerror(err));
    if (err == ENOENT) return absl::NotFoundError(message);
    if (err == EACCES) return absl::PermissionDeniedError(message);
    return absl::InvalidArgumentError(message);
  }
  // The mode of the file opened (not of the path, which may change after).
  struct stat st;
  if (fstat(fileno(f), &st) != 0) {
    const int err = errno;
    std::fclose(f);
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot read token file ", path, ": ", std::strerror(err)));
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    std::fclose(f);
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o",
                  static_cast<unsigned>(st.st_mode & 07777));
    const bool group = (st.st_mode & S_IWGRP) != 0;
    const bool others = (st.st_mode & S_IWOTH) != 0;
    return absl::FailedPreconditionError(absl::StrCat(
        "token file ", path, " has mode ", mode, ": writable by ",
        group && others ? "its group and others"
        : group         ? "its group"
                        : "others",
        ", who could add a client with any role; make it writable by its "
        "owner only (chmod 600 ",
        path, ", or chmod go-w ", path, " to keep it readable)"));
  }
  std::string text;
  char buffer[4096];
  size_t n;
  bool too_big = false;
  while ((n = std::fread(buffer, 1, sizeof(buffer), f)) > 0) {
    text.append(buffer, n);
    if (text.size() > kMaxTokenFileBytes) {
      too_big = true;
      break;
    }
  }
  const bool read_error = std::ferror(f) != 0;
  std::fclose(f);
  if (read_error) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read token file ", path, ": read error"));
  }
  if (too_big) {
    return absl::InvalidArgumentError(absl::StrCat(
        "token file ", path, " is larger than ", kMaxTokenFileBytes, " bytes"));
  }
  absl::StatusOr<TokenTable> table = Parse(text, path);
  if (table.ok() && table->entries().empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "token file ", path,
        " has no clients: every call would be refused; add a line 'NAME ROLE "
        "sha256:HEX' (`rbmrec-server token new NAME ROLE` prints one)"));
  }
  return table;
}

const TokenEntry* TokenTable::Find(absl::string_view token) const {
  const Sha256Digest digest = Sha256(token);
  const TokenEntry* found = nullptr;
  for (const TokenEntry& entry : entries_) {
    // No early exit: every entry is compared.
    const bool equal =
        CRYPTO_memcmp(entry.digest.data(), digest.data(), digest.size()) == 0;
    if (equal) found = &entry;
  }
  return found;
}

absl::optional<Role> RequiredRole(absl::string_view method) {
  for (const MethodRole& m : kMethodRoles) {
    if (m.method == method) return m.role;
  }
  return absl::nullopt;
}

absl::Status CheckRoleTable(
    const google::protobuf::ServiceDescriptor& service) {
  std::vector<std::string> missing;
  absl::flat_hash_set<std::string> methods;
  for (int i = 0; i < service.method_count(); ++i) {
    const std::string& name = service.method(i)->name();
    methods.insert(name);
    if (!RequiredRole(name).has_value()) missing.push_back(name);
  }
  std::vector<std::string> stale;
  for (const MethodRole& m : kMethodRoles) {
    if (!methods.contains(m.method)) stale.emplace_back(m.method);
  }
  if (missing.empty() && stale.empty()) return absl::OkStatus();
  std::string message =
      absl::StrCat("the role table (server/security/auth.cc) does not match ",
                   service.full_name(), ":");
  if (!missing.empty()) {
    absl::StrAppend(&message,
                    " methods without a role: ", absl::StrJoin(missing, ", "),
                    ";");
  }
  if (!stale.empty()) {
    absl::StrAppend(&message, " roles for methods the service lacks: ",
                    absl::StrJoin(stale, ", "), ";");
  }
  return absl::InternalError(message);
}

absl::StatusOr<std::unique_ptr<Authorizer>> Authorizer::Create(
    std::string path) {
  absl::StatusOr<TokenTable> table = TokenTable::Load(path);
  if (!table.ok()) return table.status();
  return std::unique_ptr<Authorizer>(
      new Authorizer(std::move(path), std::move(*table)));
}

Authorizer::Authorizer(TokenTable table) : Authorizer("", std::move(table)) {}

Authorizer::Authorizer(std::string path, TokenTable table)
    : path_(std::move(path)),
      table_(std::make_shared<const TokenTable>(std::move(table))) {}

absl::Status Authorizer::Reload() {
  if (path_.empty()) {
    return absl::FailedPreconditionError("this token table has no file");
  }
  absl::StatusOr<TokenTable> table = TokenTable::Load(path_);
  if (!table.ok()) return table.status();
  auto snapshot = std::make_shared<const TokenTable>(std::move(*table));
  absl::MutexLock lock(&mu_);
  table_.swap(snapshot);
  return absl::OkStatus();
}

std::shared_ptr<const TokenTable> Authorizer::table() const {
  absl::ReaderMutexLock lock(&mu_);
  return table_;
}

absl::Status Authorizer::Check(const std::string* authorization,
                               absl::string_view method, Role needed,
                               Caller* caller) const {
  return CheckHeader(authorization == nullptr
                         ? absl::nullopt
                         : absl::optional<absl::string_view>(*authorization),
                     method, needed, caller);
}

absl::Status Authorizer::CheckHeader(
    absl::optional<absl::string_view> authorization, absl::string_view method,
    Role needed, Caller* caller) const {
  static constexpr absl::string_view kUnauthenticated =
      "missing or unknown token (send the metadata 'authorization: Bearer "
      "TOKEN')";
  if (!authorization.has_value()) {
    return absl::UnauthenticatedError(kUnauthenticated);
  }
  // The shape first, so that a header that cannot hold a token (too long,
  // another scheme, extra spaces) is refused before any hashing.
  const absl::string_view token = BearerToken(*authorization);
  if (token.empty()) {
    static const std::string* const kMalformed = new std::string(absl::StrCat(
        "missing or unknown token: the authorization metadata must be "
        "'Bearer TOKEN' (the scheme in any case, one space, then the token "
        "alone: ",
        kTokenSyntax, "; at most ", kMaxAuthorizationBytes, " bytes in all)"));
    return absl::UnauthenticatedError(*kMalformed);
  }
  // Under the reader lock rather than on a copy of the shared_ptr: two
  // atomic updates of a count shared by every event thread fewer per call.
  // Reload only takes the lock to swap the pointer.
  absl::ReaderMutexLock lock(&mu_);
  const TokenEntry* entry = table_->Find(token);
  if (entry == nullptr) return absl::UnauthenticatedError(kUnauthenticated);
  if (caller != nullptr) {
    caller->name = entry->name;
    caller->role = entry->role;
  }
  if (entry->role < needed) {
    return absl::PermissionDeniedError(
        absl::StrCat(method, " needs the ", RoleName(needed), " role; client '",
                     entry->name, "' has ", RoleName(entry->role)));
  }
  return absl::OkStatus();
}

}  // namespace rbmrec::server
