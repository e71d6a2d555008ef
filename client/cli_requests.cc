// Typed access to the flags of a parsed rbmrec command line, the parsers of
// flag values (numbers, methods, rankings, ITEM=RATING, ids), and the
// requests built from a `train`, `predict` or `recommend` command line
// (client/cli.h).

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/cli.h"
#include "core/readers.h"

namespace rbmrec::client {

// ---------------------------------------------------------------------------
// Typed access

absl::StatusOr<int64_t> ParseInt(absl::string_view text,
                                 absl::string_view what) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(text, &v)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": expected an integer, got '", text, "'"));
  }
  return v;
}

absl::StatusOr<double> ParseDouble(absl::string_view text,
                                   absl::string_view what) {
  double v = 0;
  if (!absl::SimpleAtod(text, &v) || !std::isfinite(v)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": expected a number, got '", text, "'"));
  }
  return v;
}

namespace {
// "--batch", or "-n" for one-letter names.
std::string FlagDisplayName(absl::string_view name) {
  return absl::StrCat(name.size() == 1 ? "-" : "--", name);
}
}  // namespace

absl::StatusOr<int64_t> GetInt(const ParsedArgs& args, absl::string_view name,
                               int64_t fallback, int64_t min, int64_t max) {
  if (!args.Has(name)) return fallback;
  const std::string what = FlagDisplayName(name);
  absl::StatusOr<int64_t> v = ParseInt(args.Get(name, ""), what);
  if (!v.ok()) return v.status();
  if (*v < min || *v > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": must be in [", min, ", ", max, "], got ", *v));
  }
  return v;
}

absl::StatusOr<double> GetDouble(const ParsedArgs& args, absl::string_view name,
                                 double fallback, double min, double max) {
  if (!args.Has(name)) return fallback;
  const std::string what = FlagDisplayName(name);
  absl::StatusOr<double> v = ParseDouble(args.Get(name, ""), what);
  if (!v.ok()) return v.status();
  if (*v < min || *v > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": must be in [", min, ", ", max, "], got ", *v));
  }
  return v;
}

absl::StatusOr<v1::Method> ParseMethod(absl::string_view name) {
  const std::string n = absl::AsciiStrToLower(name);
  if (n == "exact") return v1::EXACT;
  if (n == "meanfield" || n == "mean-field" || n == "mean_field") {
    return v1::MEAN_FIELD;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--method: expected exact or meanfield, got '", name, "'"));
}

absl::StatusOr<v1::RankBy> ParseRankBy(absl::string_view name) {
  const std::string n = absl::AsciiStrToLower(name);
  if (n == "expected") return v1::EXPECTED_RATING;
  if (n == "prob" || n == "probability") return v1::PROBABILITY_AT_LEAST;
  if (n == "rated") return v1::PROBABILITY_RATED;
  if (n == "rated-prob" || n == "rated_prob") {
    return v1::PROBABILITY_RATED_AT_LEAST;
  }
  if (n == "regression-prob" || n == "regression_prob") {
    return v1::ITEM_REGRESSION_AT_LEAST;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--by: expected 'expected', 'prob', 'rated', 'rated-prob' or "
      "'regression-prob', got '",
      name, "'"));
}

absl::StatusOr<v1::ActivationPolicy> ParseActivation(absl::string_view name) {
  const std::string n = absl::AsciiStrToLower(name);
  if (n == "always") return v1::ACTIVATE_ALWAYS;
  if (n == "if-better" || n == "if_better") return v1::ACTIVATE_IF_BETTER;
  if (n == "never") return v1::ACTIVATE_NEVER;
  return absl::InvalidArgumentError(absl::StrCat(
      "--activate: expected always, if-better or never, got '", name, "'"));
}

absl::StatusOr<v1::ItemRating> ParseItemRating(absl::string_view text) {
  const size_t eq = text.rfind('=');
  if (eq == absl::string_view::npos || eq == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rate: expected ITEM=RATING, got '", text, "'"));
  }
  absl::StatusOr<std::string> item = IdArgument(text.substr(0, eq), "--rate");
  if (!item.ok()) return item.status();
  // A plain decimal number, as in a rating file (not "0x4", "inf", "nan").
  const absl::string_view value = text.substr(eq + 1);
  const std::string_view trimmed =
      TrimBlanks(std::string_view(value.data(), value.size()));
  double rating = 0;
  if (!ParsePlainDecimal(trimmed, &rating) || !std::isfinite(rating)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rate ", *item, ": expected a number, got '", value, "'"));
  }
  v1::ItemRating out;
  out.set_item_id(*std::move(item));
  out.set_rating(rating);
  return out;
}

absl::StatusOr<std::string> IdArgument(absl::string_view arg,
                                       absl::string_view what) {
  const std::string_view id =
      TrimBlanks(std::string_view(arg.data(), arg.size()));
  if (id.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what,
                     ": the id is empty (spaces and tabs around ids are "
                     "dropped, as in rating files)"));
  }
  return std::string(id);
}

absl::StatusOr<std::string> UserArgument(absl::string_view arg) {
  absl::StatusOr<std::string> user = IdArgument(arg, "USER");
  if (user.ok() && *user == "-") return std::string();
  return user;
}

namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

// Sets an optional int32 TrainOptions field from flag `name` when given.
template <typename Setter>
absl::Status MaybeInt32(const ParsedArgs& args, absl::string_view name,
                        Setter set) {
  if (!args.Has(name)) return absl::OkStatus();
  absl::StatusOr<int64_t> v = GetInt(args, name, 0, -kInt32Max, kInt32Max);
  if (!v.ok()) return v.status();
  set(static_cast<int32_t>(*v));
  return absl::OkStatus();
}

template <typename Setter>
absl::Status MaybeDouble(const ParsedArgs& args, absl::string_view name,
                         Setter set) {
  if (!args.Has(name)) return absl::OkStatus();
  absl::StatusOr<double> v =
      GetDouble(args, name, 0, -std::numeric_limits<double>::max(),
                std::numeric_limits<double>::max());
  if (!v.ok()) return v.status();
  set(*v);
  return absl::OkStatus();
}

// --NAME true|false (also 1|0).
template <typename Setter>
absl::Status MaybeBool(const ParsedArgs& args, absl::string_view name,
                       Setter set) {
  if (!args.Has(name)) return absl::OkStatus();
  const std::string text = args.Get(name, "");
  if (text == "true" || text == "1") {
    set(true);
  } else if (text == "false" || text == "0") {
    set(false);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, ": expected true or false, got '", text, "'"));
  }
  return absl::OkStatus();
}

// The USER argument (the first positional) of predict and recommend.
template <typename Request>
absl::Status SetUser(const ParsedArgs& args, absl::string_view command,
                     Request* request) {
  if (args.positional.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'rbmrec ", command, "': missing USER"));
  }
  absl::StatusOr<std::string> user = UserArgument(args.positional[0]);
  if (!user.ok()) return user.status();
  request->set_user_id(*std::move(user));
  return absl::OkStatus();
}

// --rate, --model and --method of predict and recommend.
template <typename Request>
absl::Status SetRatingsAndModel(const ParsedArgs& args, Request* request) {
  for (const std::string& r : args.GetAll("rate")) {
    absl::StatusOr<v1::ItemRating> rating = ParseItemRating(r);
    if (!rating.ok()) return rating.status();
    *request->add_ratings() = *rating;
  }
  absl::StatusOr<int64_t> model =
      GetInt(args, "model", 0, 1, std::numeric_limits<int64_t>::max());
  if (!model.ok()) return model.status();
  request->set_model_version(*model);
  v1::Method method = v1::METHOD_UNSPECIFIED;
  if (args.Has("method")) {
    absl::StatusOr<v1::Method> m = ParseMethod(args.Get("method", ""));
    if (!m.ok()) return m.status();
    method = *m;
  }
  request->set_method(method);
  return absl::OkStatus();
}

// The entries of a list: split on commas and whitespace, empties dropped.
std::vector<std::string> SplitList(absl::string_view list) {
  std::vector<std::string> out;
  for (absl::string_view part :
       absl::StrSplit(list, absl::ByAnyChar(", \t\r\n"), absl::SkipEmpty())) {
    out.emplace_back(part);
  }
  return out;
}

// --category (repeatable, any-of) and --all-categories A,B (all-of) of
// recommend and similar.
template <typename Request>
void SetCategories(const ParsedArgs& args, Request* request) {
  for (const std::string& c : args.GetAll("category")) {
    request->add_categories(c);
  }
  const std::string all = args.Get("all-categories", "");
  for (absl::string_view c : absl::StrSplit(all, ',', absl::SkipWhitespace())) {
    request->add_required_categories(
        std::string(absl::StripAsciiWhitespace(c)));
  }
}

// Recommend's filters and page: --category (repeatable, any-of),
// --all-categories A,B (all-of), --exclude ID,.., --candidates FILE_OR_LIST
// (a readable file of ids, else a list), --offset N.
absl::Status SetRecommendFilters(const ParsedArgs& args,
                                 v1::RecommendRequest* request) {
  SetCategories(args, request);
  for (const std::string& id : SplitList(args.Get("exclude", ""))) {
    request->add_exclude_item_ids(id);
  }
  if (args.Has("candidates")) {
    const std::string value = args.Get("candidates", "");
    std::ifstream file(value);
    std::string text = value;
    if (file) {
      std::stringstream buffer;
      buffer << file.rdbuf();
      text = buffer.str();
    }
    const std::vector<std::string> ids = SplitList(text);
    if (ids.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--candidates '", value, "' names no item ids"));
    }
    for (const std::string& id : ids) request->add_candidate_item_ids(id);
  }
  absl::StatusOr<int64_t> offset = GetInt(args, "offset", 0, 0, kInt32Max);
  if (!offset.ok()) return offset.status();
  request->set_offset(static_cast<int32_t>(*offset));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::TrainRequest> BuildTrainRequest(const ParsedArgs& args) {
  v1::TrainRequest request;
  v1::TrainOptions* o = request.mutable_options();
  const absl::Status statuses[] = {
      MaybeInt32(args, "hidden", [o](int32_t v) { o->set_hidden(v); }),
      MaybeInt32(args, "epochs", [o](int32_t v) { o->set_epochs(v); }),
      MaybeInt32(args, "batch-size", [o](int32_t v) { o->set_batch_size(v); }),
      MaybeDouble(args, "learning-rate",
                  [o](double v) { o->set_learning_rate(v); }),
      MaybeDouble(args, "lr", [o](double v) { o->set_learning_rate(v); }),
      MaybeDouble(args, "momentum", [o](double v) { o->set_momentum(v); }),
      MaybeDouble(args, "weight-decay",
                  [o](double v) { o->set_weight_decay(v); }),
      MaybeInt32(args, "cd-steps", [o](int32_t v) { o->set_cd_steps(v); }),
      MaybeInt32(args, "threads", [o](int32_t v) { o->set_threads(v); }),
      MaybeDouble(args, "validation-fraction",
                  [o](double v) { o->set_validation_fraction(v); }),
      MaybeInt32(args, "ensemble", [o](int32_t v) { o->set_ensemble(v); }),
      MaybeInt32(args, "factors", [o](int32_t v) { o->set_factors(v); }),
      MaybeDouble(args, "average", [o](double v) { o->set_average(v); }),
      MaybeBool(args, "ordinal", [o](bool v) { o->set_ordinal(v); }),
      MaybeInt32(args, "item-regression",
                 [o](int32_t v) { o->set_item_regression(v); }),
      MaybeInt32(args, "mf-factors", [o](int32_t v) { o->set_mf_factors(v); }),
  };
  for (const absl::Status& s : statuses) {
    if (!s.ok()) return s;
  }
  if (args.Has("conditional")) o->set_conditional(true);
  if (args.Has("learning-rate") && args.Has("lr")) {
    return absl::InvalidArgumentError(
        "--lr is an alias of --learning-rate; give only one");
  }
  if (args.Has("activate")) {
    absl::StatusOr<v1::ActivationPolicy> policy =
        ParseActivation(args.Get("activate", ""));
    if (!policy.ok()) return policy.status();
    request.set_activation(*policy);
  }
  if (args.Has("seed")) {
    uint64_t seed = 0;
    const std::string text = args.Get("seed", "");
    if (!absl::SimpleAtoi(text, &seed)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--seed: expected a non-negative integer, got '", text, "'"));
    }
    o->set_seed(seed);
  }
  return request;
}

absl::StatusOr<v1::PredictRatingsRequest> BuildPredictRequest(
    const ParsedArgs& args) {
  v1::PredictRatingsRequest request;
  if (absl::Status s = SetUser(args, "predict", &request); !s.ok()) return s;
  for (size_t i = 1; i < args.positional.size(); ++i) {
    absl::StatusOr<std::string> item = IdArgument(args.positional[i], "ITEM");
    if (!item.ok()) return item.status();
    request.add_item_ids(*std::move(item));
  }
  if (absl::Status s = SetRatingsAndModel(args, &request); !s.ok()) return s;
  return request;
}

absl::StatusOr<v1::SimilarItemsRequest> BuildSimilarRequest(
    const ParsedArgs& args) {
  v1::SimilarItemsRequest request;
  for (const std::string& arg : args.positional) {
    absl::StatusOr<std::string> item = IdArgument(arg, "ITEM");
    if (!item.ok()) return item.status();
    request.add_item_ids(*std::move(item));
  }
  for (const std::string& id : SplitList(args.Get("exclude", ""))) {
    request.add_exclude_item_ids(id);
  }
  SetCategories(args, &request);
  if (args.Has("user")) {
    absl::StatusOr<std::string> user =
        IdArgument(args.Get("user", ""), "--user");
    if (!user.ok()) return user.status();
    request.set_user_id(*std::move(user));
  }
  absl::StatusOr<int64_t> n = GetInt(args, "n", 10, 1, kInt32Max);
  if (!n.ok()) return n.status();
  request.set_n(static_cast<int32_t>(*n));
  absl::StatusOr<int64_t> model =
      GetInt(args, "model", 0, 1, std::numeric_limits<int64_t>::max());
  if (!model.ok()) return model.status();
  request.set_model_version(*model);
  return request;
}

absl::StatusOr<v1::GetUserRatingsRequest> BuildUserRatingsRequest(
    const ParsedArgs& args) {
  v1::GetUserRatingsRequest request;
  absl::StatusOr<std::string> user =
      IdArgument(args.positional.empty() ? "" : args.positional[0], "USER");
  if (!user.ok()) return user.status();
  request.set_user_id(*std::move(user));
  absl::StatusOr<int64_t> offset =
      GetInt(args, "offset", 0, 0, std::numeric_limits<int64_t>::max());
  if (!offset.ok()) return offset.status();
  request.set_offset(*offset);
  absl::StatusOr<int64_t> limit = GetInt(args, "limit", 0, 1, kInt32Max);
  if (!limit.ok()) return limit.status();
  request.set_limit(static_cast<int32_t>(*limit));
  return request;
}

absl::StatusOr<v1::RecommendRequest> BuildRecommendRequest(
    const ParsedArgs& args) {
  v1::RecommendRequest request;
  if (args.Has("all-users")) {
    // The template of RecommendAll: no user, no ad-hoc ratings.
    if (!args.positional.empty()) {
      return absl::InvalidArgumentError(
          "'rbmrec recommend --all-users' takes no USER (use --users FILE "
          "for a list)");
    }
    if (args.Has("rate")) {
      return absl::InvalidArgumentError(
          "--rate does not apply with --all-users (users are answered from "
          "their stored ratings)");
    }
  } else if (absl::Status s = SetUser(args, "recommend", &request); !s.ok()) {
    return s;
  }
  absl::StatusOr<int64_t> n = GetInt(args, "n", 10, 1, kInt32Max);
  if (!n.ok()) return n.status();
  request.set_n(static_cast<int32_t>(*n));

  v1::RankBy by = v1::RANK_BY_UNSPECIFIED;  // the server's default
  if (args.Has("by")) {
    absl::StatusOr<v1::RankBy> parsed = ParseRankBy(args.Get("by", ""));
    if (!parsed.ok()) return parsed.status();
    if ((*parsed == v1::EXPECTED_RATING || *parsed == v1::PROBABILITY_RATED) &&
        args.Has("threshold")) {
      return absl::InvalidArgumentError(
          "--threshold applies only with --by prob, rated-prob or "
          "regression-prob");
    }
    by = *parsed;
  }
  request.set_rank_by(by);
  if (by == v1::PROBABILITY_AT_LEAST || args.Has("threshold")) {
    absl::StatusOr<double> threshold =
        GetDouble(args, "threshold", 4.0, -std::numeric_limits<double>::max(),
                  std::numeric_limits<double>::max());
    if (!threshold.ok()) return threshold.status();
    request.set_threshold(*threshold);
  }
  if (absl::Status s = SetRecommendFilters(args, &request); !s.ok()) return s;
  if (absl::Status s = SetRatingsAndModel(args, &request); !s.ok()) return s;
  return request;
}

}  // namespace rbmrec::client
