#include "client/commands.h"

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/cli.h"
#include "client/client.h"
#include "client/command_context.h"
#include "client/format.h"
#include "client/security.h"
#include "core/rating_scale.h"

namespace rbmrec::client {

// ---------------------------------------------------------------------------
// predict, recommend

int RunPredict(Context& ctx) {
  absl::StatusOr<v1::PredictRatingsRequest> request =
      BuildPredictRequest(ctx.args());
  if (!request.ok()) return ctx.UsageError(request.status());
  absl::StatusOr<v1::PredictRatingsResponse> response =
      ctx.client().PredictRatings(*request);
  if (!response.ok()) return ctx.RpcError(response.status());
  return ctx.Print(*response, ctx.json() ? std::string()
                                         : FormatPredictions(
                                               *response, request->user_id(),
                                               request->method(), ctx.style()));
}

int RunRecommend(Context& ctx) {
  if (ctx.args().Has("all-users")) return RunRecommendAll(ctx);
  for (const char* bulk_only : {"out", "format", "users", "resume"}) {
    if (ctx.args().Has(bulk_only)) {
      return ctx.UsageError(absl::InvalidArgumentError(
          absl::StrCat("--", bulk_only, " applies only with --all-users")));
    }
  }
  absl::StatusOr<v1::RecommendRequest> request =
      BuildRecommendRequest(ctx.args());
  if (!request.ok()) return ctx.UsageError(request.status());
  absl::StatusOr<v1::RecommendResponse> response =
      ctx.client().Recommend(*request);
  if (!response.ok()) return ctx.RpcError(response.status());
  return ctx.Print(
      *response, ctx.json()
                     ? std::string()
                     : FormatRecommendations(*response, *request, ctx.style()));
}

int RunSimilar(Context& ctx) {
  absl::StatusOr<v1::SimilarItemsRequest> request =
      BuildSimilarRequest(ctx.args());
  if (!request.ok()) return ctx.UsageError(request.status());
  absl::StatusOr<v1::SimilarItemsResponse> response =
      ctx.client().SimilarItems(*request);
  if (!response.ok()) return ctx.RpcError(response.status());
  return ctx.Print(*response, ctx.json()
                                  ? std::string()
                                  : FormatSimilar(*response, ctx.style()));
}

int RunRatings(Context& ctx) {
  absl::StatusOr<v1::GetUserRatingsRequest> request =
      BuildUserRatingsRequest(ctx.args());
  if (!request.ok()) return ctx.UsageError(request.status());
  absl::StatusOr<v1::GetUserRatingsResponse> response =
      ctx.client().GetUserRatings(*request);
  if (!response.ok()) return ctx.RpcError(response.status());
  return ctx.Print(*response,
                   ctx.json()
                       ? std::string()
                       : FormatUserRatings(*response, *request, ctx.style()));
}

int RunItem(Context& ctx) {
  absl::StatusOr<std::string> item =
      IdArgument(ctx.args().positional[0], "ITEM");
  if (!item.ok()) return ctx.UsageError(item.status());
  absl::StatusOr<v1::GetItemResponse> response = ctx.client().GetItem(*item);
  if (!response.ok()) return ctx.RpcError(response.status());
  return ctx.Print(*response, ctx.json() ? std::string()
                                         : FormatItem(*response, ctx.style()));
}

int64_t SourceLine(const std::vector<RawRating>& rows, int batch_size,
                   int64_t batch, int32_t row) {
  if (batch < 0 || row < 0 || row >= batch_size) return 0;
  const int64_t index = batch * batch_size + row;
  if (index >= static_cast<int64_t>(rows.size())) return 0;
  return rows[static_cast<size_t>(index)].line;
}

std::vector<UserGroup> GroupByUser(const std::vector<RawRating>& rows) {
  std::vector<UserGroup> groups;
  absl::flat_hash_map<std::string, size_t> index;
  for (size_t i = 0; i < rows.size(); ++i) {
    auto [it, inserted] = index.try_emplace(rows[i].user, groups.size());
    if (inserted) groups.push_back(UserGroup{rows[i].user, {}});
    groups[it->second].rows.push_back(i);
  }
  return groups;
}

int RunCli(const std::vector<std::string>& args, const Environment& env,
           std::ostream& out, std::ostream& err) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args, env.server_env);
  if (!parsed.ok()) {
    // Parse failed: --json may not be known; look for it by hand.
    ParsedArgs fallback;
    fallback.command = GuessCommand(args);
    fallback.global.json =
        std::find(args.begin(), args.end(), "--json") != args.end();
    Context ctx(fallback, env, out, err);
    return ctx.UsageError(parsed.status());
  }
  if (parsed->help) {
    out << HelpText(*parsed);
    return kExitOk;
  }
  absl::StatusOr<ClientSecurity> security =
      LoadSecurity(parsed->global.security, env.security_env);
  if (!security.ok()) {
    Context ctx(*parsed, env, out, err);
    return ctx.InputError(security.status());
  }
  const std::string warning =
      TokenOverPlaintextWarning(parsed->global.server, *security);
  if (!warning.empty()) err << TerminalSafe(warning) << "\n";
  Context ctx(*parsed, env, out, err, *std::move(security));
  const CommandRunner runner = parsed->command->run;
  if (runner == nullptr) {
    return ctx.UsageError(absl::InvalidArgumentError(
        absl::StrCat("command '", absl::StrJoin(parsed->command->path, " "),
                     "' is not implemented")));
  }
  return runner(ctx);
}

}  // namespace rbmrec::client
