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

// One `evaluate` run: the settings, the file, and what was scored so far.
struct EvalRun {
  std::string file;
  int64_t batch = 0;
  v1::Method method = v1::METHOD_UNSPECIFIED;
  ReadResult read;
  EvalMetrics metrics;
  // Pins the version that answered first, so that a model published during
  // the evaluation (e.g. by online updates) does not mix in.
  int64_t version = 0;
  int64_t skipped_users = 0;
  // The first rating off the server's rating scale, and that scale.
  const RawRating* first_off_scale = nullptr;
  std::string off_scale_text;
  size_t step = 0;  // items per request
};

// The flags of `evaluate`; on a bad one the usage error is printed and its
// exit code put in `exit_code`.
bool ReadEvalFlags(Context& ctx, EvalRun& run, ReadOptions& options,
                   int* exit_code) {
  const ParsedArgs& args = ctx.args();
  run.file = args.positional[0];
  absl::StatusOr<ReadOptions> read_options = GetReadOptions(args);
  absl::Status status = read_options.status();
  if (status.ok()) {
    options = *read_options;
    absl::StatusOr<int64_t> batch = GetInt(args, "batch", 1000, 1, 1000000);
    status = batch.status();
    if (batch.ok()) run.batch = *batch;
  }
  if (status.ok() && args.Has("method")) {
    absl::StatusOr<v1::Method> m = ParseMethod(args.Get("method", ""));
    status = m.status();
    if (m.ok()) run.method = *m;
  }
  if (status.ok()) {
    absl::StatusOr<int64_t> model =
        GetInt(args, "model", 0, 1, std::numeric_limits<int64_t>::max());
    status = model.status();
    if (model.ok()) run.version = *model;
  }
  if (!status.ok()) *exit_code = ctx.UsageError(status);
  return status.ok();
}

// Scores the ratings group.rows[begin, end) with `response`'s predictions;
// a rating off the server's scale cannot be compared with a prediction on
// it: skipped and counted, not scored.
void Score(EvalRun& run, const UserGroup& group, size_t begin, size_t end,
           const v1::PredictRatingsResponse& response, bool user_fallback) {
  const absl::StatusOr<RatingScale> scale = RatingScale::Create(
      response.scale().min(), response.scale().max(), response.scale().step());
  for (size_t i = begin; i < end; ++i) {
    const RawRating& row = run.read.rows[group.rows[i]];
    if (scale.ok() && !scale->Index(row.rating).ok()) {
      ++run.metrics.n_skipped;
      ++run.metrics.n_off_scale;
      if (run.first_off_scale == nullptr) {
        run.first_off_scale = &row;
        run.off_scale_text = scale->ToString();
      }
      continue;
    }
    const v1::ItemPrediction& p =
        response.predictions(static_cast<int>(i - begin));
    run.metrics.Add(p.expected_rating(), row.rating,
                    user_fallback || p.fallback());
  }
}

// Predicts and scores one user's ratings, in requests of run.step items
// (lowered to the server's limit when it names one). An error is the failed
// call's status.
absl::Status EvaluateUser(Context& ctx, EvalRun& run, const UserGroup& group,
                          ProgressLine& line) {
  size_t begin = 0;
  while (begin < group.rows.size()) {
    const size_t end = std::min(group.rows.size(), begin + run.step);
    v1::PredictRatingsRequest request;
    request.set_user_id(group.user);
    request.set_method(run.method);
    request.set_model_version(run.version);
    for (size_t i = begin; i < end; ++i) {
      request.add_item_ids(run.read.rows[group.rows[i]].item);
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
        run.metrics.n_skipped +=
            static_cast<int64_t>(group.rows.size() - begin);
        ++run.skipped_users;
        return absl::OkStatus();
      }
    }
    if (!response.ok() && IsLimitExceeded(response.status()) &&
        end - begin > 1) {
      // The server takes fewer items per request (its
      // --max-predict-items): go on with requests it takes.
      const int64_t limit = LimitInMessage(response.status().message());
      run.step = limit >= 1 && static_cast<size_t>(limit) < end - begin
                     ? static_cast<size_t>(limit)
                     : (end - begin) / 2;
      line.Finish();
      ctx.err() << "note: " << TerminalSafe(response.status().message())
                << "; going on with " << run.step
                << " items per request (--batch " << run.step
                << " avoids this retry)\n";
      continue;  // the same items again, in smaller requests
    }
    if (!response.ok()) return response.status();
    if (response->predictions_size() != static_cast<int>(end - begin)) {
      return absl::InternalError(absl::StrCat(
          "rpc PredictRatings: asked for ", end - begin, " items, got ",
          response->predictions_size(), " predictions"));
    }
    if (run.version == 0) run.version = response->model_version();
    Score(run, group, begin, end, *response, user_fallback);
    begin = end;
  }
  return absl::OkStatus();
}

// Why ratings were skipped, one reason per kind.
std::vector<std::string> SkipReasons(const EvalRun& run) {
  const EvalMetrics& m = run.metrics;
  std::vector<std::string> reasons;
  const int64_t skipped_no_ratings = m.n_skipped - m.n_off_scale;
  if (skipped_no_ratings > 0) {
    reasons.push_back(absl::StrCat(
        FormatCount(skipped_no_ratings), " ratings of ",
        FormatCount(run.skipped_users),
        " users with no stored ratings (the server does not predict for a "
        "user without ratings)"));
  }
  if (m.n_off_scale > 0) {
    reasons.push_back(absl::StrCat(
        FormatCount(m.n_off_scale), " ratings off the server's rating scale ",
        run.off_scale_text, " (the first: ", run.file, ":",
        run.first_off_scale->line, ": rating ",
        FormatRating(run.first_off_scale->rating), ")"));
  }
  return reasons;
}

// The --json summary.
std::string EvalJson(const EvalRun& run, double seconds) {
  const EvalMetrics& metrics = run.metrics;
  Json j = Json::object();
  j["file"] = run.file;
  j["rmse"] = JsonNumber(metrics.rmse());
  j["mae"] = JsonNumber(metrics.mae());
  j["n"] = metrics.n;
  j["n_fallback"] = metrics.n_fallback;
  j["n_skipped"] = metrics.n_skipped;
  j["n_skipped_no_ratings"] = metrics.n_skipped - metrics.n_off_scale;
  j["n_skipped_off_scale"] = metrics.n_off_scale;
  j["users"] = metrics.users;
  j["model_version"] = metrics.model_version;
  j["method"] = run.method == v1::MEAN_FIELD ? "MEAN_FIELD" : "EXACT";
  j["lines_skipped"] = run.read.skipped;
  j["seconds"] = JsonNumber(seconds);
  return DumpJson(j);
}

}  // namespace

int RunEvaluate(Context& ctx) {
  EvalRun run;
  ReadOptions options;
  int exit_code = kExitOk;
  if (!ReadEvalFlags(ctx, run, options, &exit_code)) return exit_code;
  absl::StatusOr<ReadResult> read = ReadRatingsFile(run.file, options);
  if (!read.ok()) return ctx.InputError(read.status());
  PrintParseProblems(ctx, *read);
  if (read->rows.empty()) {
    return ctx.InputError(absl::InvalidArgumentError(
        absl::StrCat(NoRowsReason(run.file, *read), "; nothing to evaluate")));
  }
  run.read = *std::move(read);
  const std::vector<UserGroup> groups = GroupByUser(run.read.rows);
  run.metrics.users = static_cast<int64_t>(groups.size());
  run.step = static_cast<size_t>(run.batch);
  const int64_t total = static_cast<int64_t>(run.read.rows.size());
  ProgressLine line(ctx, "evaluate: ");
  for (const UserGroup& group : groups) {
    if (absl::Status s = EvaluateUser(ctx, run, group, line); !s.ok()) {
      line.Finish();
      return ctx.RpcError(s);
    }
    const EvalMetrics& m = run.metrics;
    line.Update(
        absl::StrCat(FormatCount(m.n), "/", FormatCount(total), " ratings"),
        m.n + m.n_skipped == total);
  }
  line.Finish();
  run.metrics.model_version = run.version;
  const std::vector<std::string> reasons = SkipReasons(run);
  if (run.metrics.n == 0) {
    std::string message = absl::StrCat(
        "no rating of ", run.file, " could be evaluated: all ",
        FormatCount(total), " were skipped: ", absl::StrJoin(reasons, "; "));
    if (run.read.skipped > 0) {
      absl::StrAppend(&message, "; and ", FormatCount(run.read.skipped),
                      " malformed lines were skipped (--lenient)");
    }
    return ctx.Fail(kExitRpc, "FAILED_PRECONDITION", TerminalSafe(message));
  }
  for (const std::string& reason : reasons) {
    ctx.err() << "warning: skipped " << TerminalSafe(reason)
              << "; RMSE and MAE exclude them\n";
  }
  if (ctx.json()) {
    ctx.out() << EvalJson(run, line.elapsed_seconds()) << "\n";
  } else {
    ctx.out() << FormatEvalMetrics(run.metrics);
  }
  return kExitOk;
}

}  // namespace rbmrec::client
