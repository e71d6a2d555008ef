// `rbmrec recommend --all-users --out FILE`: RecommendAll into a CSV or
// JSON-lines file (client/bulk_file.h), one write of whole lines per
// message, synced to disk at most once a second and at the end (a sync per
// message would stall the stream); --resume continues after the last user
// the file holds completely (a torn tail is dropped, bulk_file.h).

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/bulk_file.h"
#include "client/command_context.h"

namespace rbmrec::client {
namespace {

absl::Status ErrnoError(const std::string& what, const std::string& path) {
  return absl::UnavailableError(
      absl::StrCat("cannot ", what, " ", path, ": ", std::strerror(errno)));
}

// Writes all of `text` (retrying short writes).
absl::Status WriteAll(int fd, const std::string& text,
                      const std::string& path) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError("write", path);
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

// Syncs `fd` to disk (regular files; other files, e.g. /dev/null, need not).
absl::Status Sync(int fd, const std::string& path) {
  if (::fdatasync(fd) != 0 && errno != EINVAL) return ErrnoError("sync", path);
  return absl::OkStatus();
}

// The ids of --users FILE: one per line; blank lines and lines starting
// with '#' are skipped, surrounding spaces trimmed.
absl::Status ReadUsers(const std::string& path, v1::RecommendAllRequest* r) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view id = absl::StripAsciiWhitespace(line);
    if (id.empty() || id[0] == '#') continue;
    r->add_user_ids(std::string(id));
  }
  if (r->user_ids().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--users ", path, " names no user"));
  }
  return absl::OkStatus();
}

// --resume: trims `path` to its complete users and sets start_after_user.
// Returns whether the CSV header is already there.
absl::StatusOr<bool> PrepareResume(const std::string& path, BulkFormat format,
                                   v1::RecommendAllRequest* request) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;  // nothing to resume: a fresh file
  std::stringstream bytes;
  bytes << in.rdbuf();
  absl::StatusOr<ResumePoint> point = FindResumePoint(bytes.str(), format);
  if (!point.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--resume: ", path, ": ", point.status().message()));
  }
  if (::truncate(path.c_str(), static_cast<off_t>(point->keep_bytes)) != 0) {
    return ErrnoError("truncate", path);
  }
  request->set_start_after_user(point->last_user);
  return point->has_header;
}

}  // namespace

int RunRecommendAll(Context& ctx) {
  const ParsedArgs& args = ctx.args();
  const std::string path = args.Get("out", "");
  if (path.empty()) {
    return ctx.UsageError(absl::InvalidArgumentError(
        "--all-users writes a file: give --out FILE"));
  }
  absl::StatusOr<BulkFormat> format =
      ParseBulkFormat(args.Get("format", ""), path);
  if (!format.ok()) return ctx.UsageError(format.status());
  absl::StatusOr<v1::RecommendRequest> one = BuildRecommendRequest(args);
  if (!one.ok()) return ctx.UsageError(one.status());
  v1::RecommendAllRequest request;
  *request.mutable_template_() = *std::move(one);
  if (args.Has("users")) {
    if (absl::Status s = ReadUsers(args.Get("users", ""), &request); !s.ok()) {
      return ctx.InputError(s);
    }
  }
  bool has_header = false;
  if (args.Has("resume")) {
    absl::StatusOr<bool> header = PrepareResume(path, *format, &request);
    if (!header.ok()) return ctx.InputError(header.status());
    has_header = *header;
  }
  const int flags = O_WRONLY | O_CREAT | O_CLOEXEC |
                    (args.Has("resume") ? O_APPEND : O_TRUNC);
  const int fd = ::open(path.c_str(), flags, 0644);
  if (fd < 0) return ctx.InputError(ErrnoError("open", path));
  absl::Status written;
  if (*format == BulkFormat::kCsv && !has_header) {
    written = WriteAll(fd, BulkCsvHeader(), path);
  }
  absl::Time synced = absl::Now();
  int64_t users = 0, fallbacks = 0, version = 0;
  ProgressLine progress(ctx, "recommend --all-users: ");
  absl::Status rpc;
  if (written.ok()) {
    rpc = ctx.client().RecommendAll(
        request, [&](const v1::RecommendAllResponse& message) {
          written = WriteAll(fd, FormatBulkMessage(message, *format), path);
          if (written.ok() && absl::Now() - synced > absl::Seconds(1)) {
            written = Sync(fd, path);
            synced = absl::Now();
          }
          if (!written.ok()) return false;
          version = message.model_version();
          for (const v1::UserRecommendations& u : message.users()) {
            fallbacks += u.response().fallback() != v1::FALLBACK_NONE;
          }
          users += message.users_size();
          progress.Update(absl::StrCat(users, " users"), false);
          return true;
        });
  }
  progress.Finish();
  if (absl::Status s = Sync(fd, path); written.ok()) written = s;
  ::close(fd);
  if (!written.ok()) return ctx.InputError(written);
  if (!rpc.ok()) {
    ctx.err() << "the file holds every user up to the last one written; "
                 "add --resume to continue\n";
    return ctx.RpcError(rpc);
  }
  const double seconds = progress.elapsed_seconds();
  if (ctx.json()) {
    Json out = Json::object();
    out["file"] = path;
    out["users"] = users;
    out["fallback_users"] = fallbacks;
    out["model_version"] = version;
    out["resumed_after"] = request.start_after_user();
    out["seconds"] = JsonNumber(seconds);
    ctx.out() << DumpJson(out) << "\n";
    return kExitOk;
  }
  ctx.out() << absl::StrFormat(
      "%d users (%d cold-start fallbacks) from model v%d to %s in %.1f s "
      "(%.0f users/s)%s\n",
      users, fallbacks, version, TerminalSafe(path), seconds,
      seconds > 0 ? static_cast<double>(users) / seconds : 0.0,
      request.start_after_user().empty()
          ? ""
          : absl::StrCat(", resumed after user ",
                         TerminalSafe(request.start_after_user())));
  return kExitOk;
}

}  // namespace rbmrec::client
