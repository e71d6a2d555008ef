// `rbmrec evaluate`: RMSE and MAE of the served model on a held-out rating
// file, predicted user by user in requests the server accepts.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/command_context.h"
#include "core/rating_scale.h"

namespace rbmrec::client {
namespace {

// The N of a LIMIT_EXCEEDED message ("... over the server's limit of N
// (--flag)"); 0 when it names none.
int64_t LimitInMessage(absl::string_view message) {
  constexpr absl::string_view kMarker = "over the server's limit of ";
  const size_t at = message.find(kMarker);
  if (at == absl::string_view::npos) return 0;
  const absl::string_view rest = message.substr(at + kMarker.size());
  size_t digits = 0;
  while (digits < rest.size() && absl::ascii_isdigit(rest[digits])) ++digits;
  int64_t limit = 0;
  if (!absl::SimpleAtoi(rest.substr(0, digits), &limit)) return 0;
  return limit;
}

bool IsLimitExceeded(const absl::Status& status) {
  return status.code() == absl::StatusCode::kResourceExhausted &&
         ErrorReasonOf(status) == "LIMIT_EXCEEDED";
}

}  // namespace

int RunEvaluate(Context& ctx) {
  const ParsedArgs& args = ctx.args();
  const std::string& file = args.positional[0];
  absl::StatusOr<ReadOptions> options = GetReadOptions(args);
  if (!options.ok()) return ctx.UsageError(options.status());
  absl::StatusOr<int64_t> batch = GetInt(args, "batch", 1000, 1, 1000000);
  if (!batch.ok()) return ctx.UsageError(batch.status());
  v1::Method method = v1::METHOD_UNSPECIFIED;
  if (args.Has("method")) {
    absl::StatusOr<v1::Method> m = ParseMethod(args.Get("method", ""));
    if (!m.ok()) return ctx.UsageError(m.status());
    method = *m;
  }
  absl::StatusOr<int64_t> model =
      GetInt(args, "model", 0, 1, std::numeric_limits<int64_t>::max());
  if (!model.ok()) return ctx.UsageError(model.status());

  absl::StatusOr<ReadResult> read = ReadRatingsFile(file, *options);
  if (!read.ok()) return ctx.InputError(read.status());
  PrintParseProblems(ctx, *read);
  if (read->rows.empty()) {
    return ctx.InputError(absl::InvalidArgumentError(
        absl::StrCat(NoRowsReason(file, *read), "; nothing to evaluate")));
  }
  const std::vector<UserGroup> groups = GroupByUser(read->rows);

  EvalMetrics metrics;
  metrics.users = static_cast<int64_t>(groups.size());
  // Pin the version that answered first, so that a model published during
  // the evaluation (e.g. by online updates) does not mix in.
  int64_t version = *model;
  int64_t skipped_users = 0;
  // The first rating off the server's rating scale, and that scale.
  const RawRating* first_off_scale = nullptr;
  std::string off_scale_text;
  ProgressLine line(ctx, "evaluate: ");
  size_t step = static_cast<size_t>(*batch);
  const int64_t total = static_cast<int64_t>(read->rows.size());
  for (const UserGroup& group : groups) {
    size_t begin = 0;
    while (begin < group.rows.size()) {
      const size_t end = std::min(group.rows.size(), begin + step);
      v1::PredictRatingsRequest request;
      request.set_user_id(group.user);
      request.set_method(method);
      request.set_model_version(version);
      for (size_t i = begin; i < end; ++i) {
        request.add_item_ids(read->rows[group.rows[i]].item);
      }
      absl::StatusOr<v1::PredictRatingsResponse> response =
          ctx.client().PredictRatings(request);
      bool user_fallback = false;
      if (!response.ok() &&
          response.status().code() == absl::StatusCode::kNotFound) {
        // A user without stored ratings: predict as an anonymous user with
        // no ratings (the model's prior), counted as fallback.
        request.clear_user_id();
        response = ctx.client().PredictRatings(request);
        user_fallback = true;
        if (!response.ok() &&
            response.status().code() == absl::StatusCode::kInvalidArgument) {
          // The server predicts nothing for an anonymous user without
          // ratings: these ratings cannot be scored; say so below.
          metrics.n_skipped += static_cast<int64_t>(group.rows.size() - begin);
          ++skipped_users;
          break;
        }
      }
      if (!response.ok() && IsLimitExceeded(response.status()) &&
          end - begin > 1) {
        // The server takes fewer items per request (its
        // --max-predict-items): go on with requests it takes.
        const int64_t limit = LimitInMessage(response.status().message());
        step = limit >= 1 && static_cast<size_t>(limit) < end - begin
                   ? static_cast<size_t>(limit)
                   : (end - begin) / 2;
        line.Finish();
        ctx.err() << "note: " << TerminalSafe(response.status().message())
                  << "; going on with " << step
                  << " items per request (--batch " << step
                  << " avoids this retry)\n";
        continue;  // the same items again, in smaller requests
      }
      if (!response.ok()) {
        line.Finish();
        return ctx.RpcError(response.status());
      }
      if (response->predictions_size() != static_cast<int>(end - begin)) {
        line.Finish();
        return ctx.RpcError(absl::InternalError(absl::StrCat(
            "rpc PredictRatings: asked for ", end - begin, " items, got ",
            response->predictions_size(), " predictions")));
      }
      if (version == 0) version = response->model_version();
      // A rating off the server's scale cannot be compared with a
      // prediction on it: skipped and counted, not scored.
      const absl::StatusOr<RatingScale> scale =
          RatingScale::Create(response->scale().min(), response->scale().max(),
                              response->scale().step());
      for (size_t i = begin; i < end; ++i) {
        const RawRating& row = read->rows[group.rows[i]];
        if (scale.ok() && !scale->Index(row.rating).ok()) {
          ++metrics.n_skipped;
          ++metrics.n_off_scale;
          if (first_off_scale == nullptr) {
            first_off_scale = &row;
            off_scale_text = scale->ToString();
          }
          continue;
        }
        const v1::ItemPrediction& p =
            response->predictions(static_cast<int>(i - begin));
        metrics.Add(p.expected_rating(), row.rating,
                    user_fallback || p.fallback());
      }
      begin = end;
    }
    line.Update(absl::StrCat(FormatCount(metrics.n), "/", FormatCount(total),
                             " ratings"),
                metrics.n + metrics.n_skipped == total);
  }
  line.Finish();
  metrics.model_version = version;
  const int64_t skipped_no_ratings = metrics.n_skipped - metrics.n_off_scale;
  std::vector<std::string> reasons;
  if (skipped_no_ratings > 0) {
    reasons.push_back(absl::StrCat(
        FormatCount(skipped_no_ratings), " ratings of ",
        FormatCount(skipped_users),
        " users with no stored ratings (the server does not predict for a "
        "user without ratings)"));
  }
  if (metrics.n_off_scale > 0) {
    reasons.push_back(absl::StrCat(FormatCount(metrics.n_off_scale),
                                   " ratings off the server's rating scale ",
                                   off_scale_text, " (the first: ", file, ":",
                                   first_off_scale->line, ": rating ",
                                   FormatRating(first_off_scale->rating), ")"));
  }
  if (metrics.n == 0) {
    std::string message = absl::StrCat(
        "no rating of ", file, " could be evaluated: all ", FormatCount(total),
        " were skipped: ", absl::StrJoin(reasons, "; "));
    if (read->skipped > 0) {
      absl::StrAppend(&message, "; and ", FormatCount(read->skipped),
                      " malformed lines were skipped (--lenient)");
    }
    return ctx.Fail(kExitRpc, "FAILED_PRECONDITION", TerminalSafe(message));
  }
  for (const std::string& reason : reasons) {
    ctx.err() << "warning: skipped " << TerminalSafe(reason)
              << "; RMSE and MAE exclude them\n";
  }

  if (ctx.json()) {
    Json j = Json::object();
    j["file"] = file;
    j["rmse"] = JsonNumber(metrics.rmse());
    j["mae"] = JsonNumber(metrics.mae());
    j["n"] = metrics.n;
    j["n_fallback"] = metrics.n_fallback;
    j["n_skipped"] = metrics.n_skipped;
    j["n_skipped_no_ratings"] = skipped_no_ratings;
    j["n_skipped_off_scale"] = metrics.n_off_scale;
    j["users"] = metrics.users;
    j["model_version"] = metrics.model_version;
    j["method"] = method == v1::MEAN_FIELD ? "MEAN_FIELD" : "EXACT";
    j["lines_skipped"] = read->skipped;
    j["seconds"] = JsonNumber(line.elapsed_seconds());
    ctx.out() << DumpJson(j) << "\n";
  } else {
    ctx.out() << FormatEvalMetrics(metrics);
  }
  return kExitOk;
}

}  // namespace rbmrec::client
