// The commands about stored state: `models` and its subcommands (list,
// activate, delete, pin, unpin, prune), `stats`, `health`, and the erasures
// `delete-user` and `delete-ratings`.

#include <cstdint>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "client/command_context.h"

namespace rbmrec::client {

int RunModels(Context& ctx) {
  v1::ListModelsRequest request;
  request.set_verify(ctx.args().Has("verify"));
  absl::StatusOr<v1::ListModelsResponse> response =
      ctx.client().ListModels(request);
  if (!response.ok()) return ctx.RpcError(response.status());
  return ctx.Print(*response,
                   ctx.json() ? std::string() : FormatModels(*response));
}

namespace {

// The VERSION argument of the `models` subcommands: an integer >= 1.
absl::StatusOr<int64_t> VersionArgument(const Context& ctx) {
  absl::StatusOr<int64_t> version =
      ParseInt(ctx.args().positional[0], "VERSION");
  if (version.ok() && *version < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("VERSION: must be >= 1, got ", ctx.args().positional[0]));
  }
  return version;
}

}  // namespace

int RunModelsActivate(Context& ctx) {
  absl::StatusOr<int64_t> version = VersionArgument(ctx);
  if (!version.ok()) return ctx.UsageError(version.status());
  absl::StatusOr<v1::ModelInfo> info = ctx.client().ActivateModel(*version);
  if (!info.ok()) return ctx.RpcError(info.status());
  return ctx.Print(
      *info, ctx.json() ? std::string()
                        : absl::StrCat("activated ", FormatModelInfo(*info)));
}

int RunModelsDelete(Context& ctx) {
  absl::StatusOr<int64_t> version = VersionArgument(ctx);
  if (!version.ok()) return ctx.UsageError(version.status());
  v1::DeleteModelRequest request;
  request.set_version(*version);
  request.set_force(ctx.args().Has("force"));
  absl::StatusOr<v1::DeleteModelResponse> response =
      ctx.client().DeleteModel(request);
  if (!response.ok()) return ctx.RpcError(response.status());
  return ctx.Print(*response,
                   absl::StrCat("deleted model v", *version, " (freed ",
                                FormatBytes(response->freed_bytes()), ")\n"));
}

namespace {

int RunModelsPin(Context& ctx, bool pinned) {
  absl::StatusOr<int64_t> version = VersionArgument(ctx);
  if (!version.ok()) return ctx.UsageError(version.status());
  absl::StatusOr<v1::ModelInfo> info = ctx.client().PinModel(*version, pinned);
  if (!info.ok()) return ctx.RpcError(info.status());
  return ctx.Print(*info, absl::StrCat(pinned ? "pinned " : "unpinned ",
                                       FormatModelInfo(*info)));
}

}  // namespace

int RunModelsPinTrue(Context& ctx) { return RunModelsPin(ctx, true); }
int RunModelsPinFalse(Context& ctx) { return RunModelsPin(ctx, false); }

int RunModelsPrune(Context& ctx) {
  v1::PruneModelsRequest request;
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  if (ctx.args().Has("keep-full")) {
    absl::StatusOr<int64_t> n = GetInt(ctx.args(), "keep-full", 0, 0, kMax);
    if (!n.ok()) return ctx.UsageError(n.status());
    request.set_keep_full(static_cast<int32_t>(*n));
  }
  if (ctx.args().Has("keep-online")) {
    absl::StatusOr<int64_t> n = GetInt(ctx.args(), "keep-online", 0, 0, kMax);
    if (!n.ok()) return ctx.UsageError(n.status());
    request.set_keep_online(static_cast<int32_t>(*n));
  }
  absl::StatusOr<v1::PruneModelsResponse> response =
      ctx.client().PruneModels(request);
  if (!response.ok()) return ctx.RpcError(response.status());
  std::string text;
  if (response->deleted_versions().empty()) {
    text = "nothing to prune: every stored version is kept\n";
  } else {
    std::vector<std::string> versions;
    for (int64_t v : response->deleted_versions()) {
      versions.push_back(absl::StrCat("v", v));
    }
    text =
        absl::StrCat("deleted ", response->deleted_versions_size(),
                     " model versions (", absl::StrJoin(versions, ", "),
                     "), freed ", FormatBytes(response->freed_bytes()), "\n");
  }
  return ctx.Print(*response, text);
}

int RunStats(Context& ctx) {
  absl::StatusOr<v1::GetStatsResponse> response = ctx.client().GetStats();
  if (!response.ok()) return ctx.RpcError(response.status());
  return ctx.Print(*response,
                   ctx.json() ? std::string() : FormatStats(*response));
}

int RunHealth(Context& ctx) {
  const std::string service =
      ctx.args().positional.empty() ? "" : ctx.args().positional[0];
  absl::StatusOr<grpc::health::v1::HealthCheckResponse> response =
      ctx.client().Health(service);
  if (!response.ok()) return ctx.RpcError(response.status());
  const std::string status =
      grpc::health::v1::HealthCheckResponse::ServingStatus_Name(
          response->status());
  ctx.Print(*response, absl::StrCat(status, "\n"));
  if (response->status() != grpc::health::v1::HealthCheckResponse::SERVING) {
    ctx.err() << "error: the server reports " << status << "\n";
    return kExitRpc;
  }
  return kExitOk;
}

namespace {

// A deletion answered NOT_FOUND: the user has no stored ratings.
int UserNotFound(Context& ctx, const std::string& user) {
  return ctx.Fail(kExitRpc, "NOT_FOUND",
                  absl::StrCat("user '", TerminalSafe(user),
                               "' not found (no stored ratings); nothing was "
                               "deleted"));
}

}  // namespace

int RunDeleteUser(Context& ctx) {
  v1::DeleteUserRequest request;
  absl::StatusOr<std::string> user =
      IdArgument(ctx.args().positional[0], "USER");
  if (!user.ok()) return ctx.UsageError(user.status());
  request.set_user_id(*user);
  absl::StatusOr<v1::DeleteUserResponse> response =
      ctx.client().DeleteUser(request);
  if (!response.ok() &&
      response.status().code() == absl::StatusCode::kNotFound) {
    return UserNotFound(ctx, request.user_id());
  }
  if (!response.ok()) return ctx.RpcError(response.status());
  return ctx.Print(*response, FormatDeleteUser(request.user_id(), *response));
}

int RunDeleteRatings(Context& ctx) {
  v1::DeleteRatingsRequest request;
  absl::StatusOr<std::string> user =
      IdArgument(ctx.args().positional[0], "USER");
  if (!user.ok()) return ctx.UsageError(user.status());
  request.set_user_id(*user);
  for (size_t i = 1; i < ctx.args().positional.size(); ++i) {
    absl::StatusOr<std::string> item =
        IdArgument(ctx.args().positional[i], "ITEM");
    if (!item.ok()) return ctx.UsageError(item.status());
    request.add_item_ids(*item);
  }
  absl::StatusOr<v1::DeleteRatingsResponse> response =
      ctx.client().DeleteRatings(request);
  if (!response.ok() &&
      response.status().code() == absl::StatusCode::kNotFound) {
    return UserNotFound(ctx, request.user_id());
  }
  if (!response.ok()) return ctx.RpcError(response.status());
  return ctx.Print(
      *response,
      absl::StrCat("deleted ", FormatCount(response->deleted()),
                   " ratings of user ", TerminalSafe(request.user_id()), "\n"));
}

}  // namespace rbmrec::client
