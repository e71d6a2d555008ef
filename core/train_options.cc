// The training options' schedule parsing (CdSchedule), their size rules
// (ResolveTrainOptions, RatedHiddenUnits) and range checks
// (ValidateTrainOptions); declared in core/train_options.h.

#include "core/train_options.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/item_regression.h"

namespace rbmrec {

absl::StatusOr<CdSchedule> CdSchedule::Parse(std::string_view spec_in) {
  const absl::string_view spec(spec_in.data(), spec_in.size());
  CdSchedule s;
  if (spec == "auto") {
    s.adaptive = true;
    return s;
  }
  s.adaptive = false;
  s.steps.clear();
  for (absl::string_view part : absl::StrSplit(spec, ',')) {
    std::pair<absl::string_view, absl::string_view> te =
        absl::StrSplit(part, absl::MaxSplits('@', 1));
    int t = 0, e = 1;
    if (!absl::SimpleAtoi(te.first, &t) || t < 1 || t > 1000) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cd-steps: '", part, "' is not a step count in 1..1000"));
    }
    if (!te.second.empty() && (!absl::SimpleAtoi(te.second, &e) || e < 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("cd-steps: '", part, "' has a bad epoch after '@'"));
    }
    if (s.steps.empty() && e != 1) {
      return absl::InvalidArgumentError(
          "cd-steps: the first entry applies from epoch 1 (no '@')");
    }
    if (!s.steps.empty() && e <= s.steps.back().first) {
      return absl::InvalidArgumentError(
          "cd-steps: epochs after '@' must increase");
    }
    s.steps.emplace_back(e, t);
  }
  if (s.steps.empty()) return absl::InvalidArgumentError("cd-steps: empty");
  return s;
}

std::string CdSchedule::ToString() const {
  if (adaptive) return "auto";
  std::string out;
  for (const auto& [e, t] : steps) {
    if (!out.empty()) absl::StrAppend(&out, ",");
    absl::StrAppend(&out, t);
    if (e > 1) absl::StrAppend(&out, "@", e);
  }
  return out;
}

int CdSchedule::StepsAt(int epoch) const {
  int t = 1;
  for (const auto& [e, steps_t] : steps) {
    if (e <= epoch) t = steps_t;
  }
  return t;
}

TrainOptions ResolveTrainOptions(const TrainOptions& options, int64_t ratings) {
  TrainOptions o = options;
  // base * sqrt(ratings / at), rounded to a multiple of `step`, within
  // [base, most].
  auto rule = [&](double base, double at, double step, double most) {
    const double x =
        base *
        std::sqrt(static_cast<double>(std::max<int64_t>(0, ratings)) / at);
    return static_cast<int>(
        std::clamp(std::round(x / step) * step, base, most));
  };
  if (o.hidden == 0) o.hidden = rule(100, 200000, 10, 200);
  if (o.factors < 0) o.factors = ratings >= 500000 ? 32 : 0;
  if (o.batch_size == 0) o.batch_size = rule(20, 100000, 1, 200);
  if (o.learning_rate == 0) {
    o.learning_rate = static_cast<float>(
        0.05 * std::sqrt(static_cast<double>(o.batch_size) / 20.0));
  }
  return o;
}

absl::Status ValidateTrainOptions(const TrainOptions& o) {
  auto bad = [](absl::string_view field, absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
  };
  auto shortest = [](float v) {
    char text[32];
    const std::to_chars_result end = std::to_chars(text, text + 32, v);
    return std::string(text, end.ptr);
  };
  // A float field in [lo, hi] with open ends as flagged ("must be in [0, 1),
  // got 1.5"). The value is shown in its shortest form and, on an open end,
  // with a note that a value given just inside that end rounds to it in
  // single precision (0.99999999 is 1.0f).
  auto float_field = [&](absl::string_view field, float v, float lo,
                         bool lo_open, float hi, bool hi_open,
                         absl::string_view note = "") -> absl::Status {
    if ((lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi)) {
      return absl::OkStatus();
    }
    std::string why = absl::StrCat(
        "must be in ", lo_open ? "(" : "[", shortest(lo), ", ", shortest(hi),
        hi_open ? ")" : "]", note, ", got ", shortest(v));
    if ((lo_open && v == lo) || (hi_open && v == hi)) {
      absl::StrAppend(&why, " (a value that close to ", shortest(v),
                      " rounds to it in single precision)");
    }
    return bad(field, why);
  };
  if (o.hidden < 0 || o.hidden > 10000)
    return bad("hidden", "must be 1..10000 (0 = size rule)");
  if (o.max_epochs < 1 || o.max_epochs > 100000)
    return bad("epochs", "must be 1..100000");
  if (o.batch_size < 0) return bad("batch", "must be >= 1 (0 = size rule)");
  if (o.factors < -1 || o.factors > 10000)
    return bad("factors", "must be -1 (size rule), 0 (unfactored) or 1..10000");
  for (absl::Status s : {
           float_field("lr", o.learning_rate, 0, false, 100, true,
                       " (0 = size rule)"),
           float_field("lr-decay", o.lr_decay, 0, true, 1, false),
           float_field("momentum", o.momentum, 0, false, 1, true),
           float_field("weight-decay", o.weight_decay, 0, false, 1, true),
           float_field("init-std", o.init_std, 0, true, 10, true),
       }) {
    if (!s.ok()) return s;
  }
  if (!(o.validation_fraction >= 0 && o.validation_fraction <= 0.5))
    return bad("validation", "must be in [0, 0.5]");
  if (o.patience < 1) return bad("patience", "must be >= 1");
  if (!(o.min_improvement >= 0 && o.min_improvement < 0.1))
    return bad("min-improvement", "must be in [0, 0.1)");
  if (absl::Status s = float_field("average", o.average, 0, false, 1, true);
      !s.ok()) {
    return s;
  }
  if (o.threads < 0 || o.threads > 256) return bad("threads", "must be 0..256");
  if (o.ensemble < 1 || o.ensemble > 64)
    return bad("ensemble", "must be 1..64");
  if (o.rated_hidden < -1 || o.rated_hidden > 10000)
    return bad("rated-hidden", "must be -1 (auto), 0 (off) or 1..10000");
  if (o.rated_max_epochs < 1 || o.rated_max_epochs > 100000)
    return bad("rated-epochs", "must be 1..100000");
  if (absl::Status s =
          float_field("rated-lr", o.rated_learning_rate, 0, true, 10, false);
      !s.ok()) {
    return s;
  }
  if (o.rated_factors < 0 || o.rated_factors > 10000)
    return bad("rated-factors", "must be 0 (unfactored) or 1..10000");
  if (o.item_regression < -1 || o.item_regression > 1)
    return bad("item-regression", "must be -1 (auto), 0 (off) or 1 (on)");
  if (absl::Status s =
          float_field("item-lambda", o.item_lambda, 0, false, 1e9f, false);
      !s.ok()) {
    return s;
  }
  if (o.mf_factors < 0 || o.mf_factors > kMaxMfFactors)
    return bad("mf-factors",
               absl::StrCat("must be 0 (off) or 1..", kMaxMfFactors));
  if (o.mf_epochs < 1 || o.mf_epochs > kMaxMfEpochs)
    return bad("mf-epochs", absl::StrCat("must be 1..", kMaxMfEpochs));
  if (absl::Status s =
          float_field("mf-lambda", o.mf_lambda, 0, false, 100, false);
      !s.ok()) {
    return s;
  }
  return absl::OkStatus();
}

int64_t ItemRegressionColumnsFor(const TrainOptions& options, int rated_f,
                                 int64_t items, int64_t ratings) {
  if (rated_f <= 0 || options.item_regression == 0 || items <= 0) return 0;
  return options.item_regression == 1 ? items
                                      : ItemRegressionColumns(items, ratings);
}

int RatedHiddenUnits(const TrainOptions& options, int64_t users,
                     int64_t items) {
  if (options.rated_hidden >= 0) return options.rated_hidden;
  if (users <= 0 || items <= 0) return 0;
  const double f = 3.3 * std::sqrt(static_cast<double>(items));
  const int tens = static_cast<int>(std::lround(f / 10.0)) * 10;
  return std::clamp(tens, 50, 300);
}

}  // namespace rbmrec
