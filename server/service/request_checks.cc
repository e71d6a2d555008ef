#include "server/service/request_checks.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/error_reason.h"
#include "core/utf8.h"

namespace rbmrec::server {
namespace {

constexpr size_t kMaxIdBytes = store::kMaxIdBytes;

// Shortest decimal text that reads back as `v` (std::to_chars: "0.99999999",
// "1", "1e-50").
template <typename T>
std::string Shortest(T v) {
  char buf[64];
  const std::to_chars_result r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

}  // namespace

std::string Truncated(const std::string& id) {
  return id.size() <= kMaxIdBytes ? id : id.substr(0, kMaxIdBytes);
}

// Empty when the id is valid, else why not ("user_id is empty").
std::string IdProblem(std::string_view id, absl::string_view field) {
  if (id.empty()) return absl::StrCat(field, " is empty");
  if (id.size() > kMaxIdBytes) {
    return absl::StrCat(field, " is ", id.size(), " bytes long (limit ",
                        kMaxIdBytes, ")");
  }
  if (const TextFlaw flaw = FirstTextFlaw(id, TextRules::kId); flaw.found()) {
    return absl::StrCat(field, " contains ", DescribeTextFlaw(flaw));
  }
  return "";
}

std::string CategoryProblem(const std::string& category,
                            absl::string_view field) {
  if (category.empty()) return absl::StrCat(field, " is empty");
  if (category.size() > store::kMaxCategoryBytes) {
    return absl::StrCat(field, " is ", category.size(), " bytes long (limit ",
                        store::kMaxCategoryBytes, ")");
  }
  if (const TextFlaw flaw = FirstTextFlaw(category, TextRules::kId);
      flaw.found()) {
    return absl::StrCat(field, " contains ", DescribeTextFlaw(flaw));
  }
  return "";
}

std::string TextProblem(absl::string_view text, absl::string_view field) {
  const TextFlaw flaw = FirstTextFlaw(
      std::string_view(text.data(), text.size()), TextRules::kTitle);
  if (!flaw.found()) return "";
  return absl::StrCat(field, " contains ", DescribeTextFlaw(flaw));
}

absl::Status CheckItem(const v1::Item& item, int index) {
  const std::string at = absl::StrCat("items[", index, "]: ");
  auto invalid = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(at, why));
  };
  auto too_long = [&](absl::string_view field, size_t bytes, size_t limit) {
    return WithReason(invalid(absl::StrCat(field, " is ", bytes,
                                           " bytes long (limit ", limit, ")")),
                      kReasonLimitExceeded);
  };
  if (std::string why = IdProblem(item.item_id(), "item_id"); !why.empty()) {
    return invalid(why);
  }
  if (item.title().size() > kMaxTitleBytes) {
    return too_long("title", item.title().size(), kMaxTitleBytes);
  }
  if (std::string why = TextProblem(item.title(), "title"); !why.empty()) {
    return invalid(why);
  }
  if (item.attributes_size() > kMaxItemAttributes) {
    return WithReason(
        invalid(absl::StrCat("attributes has ", item.attributes_size(),
                             " entries (limit ", kMaxItemAttributes, ")")),
        kReasonLimitExceeded);
  }
  for (const auto& [key, value] : item.attributes()) {
    // The key is checked before it is echoed in a message about its value.
    if (key.size() > kMaxAttributeKeyBytes) {
      return too_long("an attributes key", key.size(), kMaxAttributeKeyBytes);
    }
    if (std::string why = TextProblem(key, "an attributes key"); !why.empty()) {
      return invalid(why);
    }
    const std::string field = absl::StrCat("attributes['", key, "']");
    if (value.size() > kMaxAttributeValueBytes) {
      return too_long(field, value.size(), kMaxAttributeValueBytes);
    }
    if (std::string why = TextProblem(value, field); !why.empty()) {
      return invalid(why);
    }
  }
  if (item.categories_size() > store::kMaxItemCategories) {
    return WithReason(invalid(absl::StrCat(
                          "categories has ", item.categories_size(),
                          " entries (limit ", store::kMaxItemCategories, ")")),
                      kReasonLimitExceeded);
  }
  for (int c = 0; c < item.categories_size(); ++c) {
    const std::string field = absl::StrCat("categories[", c, "]");
    if (std::string why = CategoryProblem(item.categories(c), field);
        !why.empty()) {
      return item.categories(c).size() > store::kMaxCategoryBytes
                 ? WithReason(invalid(why), kReasonLimitExceeded)
                 : invalid(why);
    }
  }
  return absl::OkStatus();
}

// Empty when `rating` is on `scale`, else why not.
std::string RatingProblem(double rating, const RatingScale& scale, int* index) {
  if (std::isnan(rating)) return "rating is NaN";
  if (std::isinf(rating)) return "rating is infinite";
  absl::StatusOr<int> k = scale.Index(rating);
  if (!k.ok()) return std::string(k.status().message());
  if (index != nullptr) *index = *k;
  return "";
}

absl::Status OverLimit(absl::string_view what, int64_t value, int64_t limit,
                       absl::string_view flag) {
  return WithReason(absl::ResourceExhaustedError(absl::StrCat(
                        what, " is ", value, ", over the server's limit of ",
                        limit, " (", flag, ")")),
                    kReasonLimitExceeded);
}

absl::StatusOr<PredictMethod> ToMethod(v1::Method m) {
  switch (m) {
    case v1::METHOD_UNSPECIFIED:
    case v1::EXACT:
      return PredictMethod::kExact;
    case v1::MEAN_FIELD:
      return PredictMethod::kMeanField;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("method ", static_cast<int>(m),
                       " is not a known Method (EXACT = 1, MEAN_FIELD = 2)"));
  }
}

v1::ModelInfo ToProto(const store::ModelInfo& m) {
  v1::ModelInfo out;
  out.set_version(m.version);
  out.set_created_unix_ms(m.created_unix_ms);
  out.set_kind(m.kind);
  out.set_n_users(m.n_users);
  out.set_n_items(m.n_items);
  out.set_n_ratings(m.n_ratings);
  out.set_validation_rmse(m.validation_rmse);
  out.set_epochs(m.epochs);
  out.set_active(m.active);
  out.set_size_bytes(m.size_bytes);
  out.set_pinned(m.pinned);
  return out;
}

namespace {

absl::Status BadOption(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("options.", field, " ", why));
}

// An int option in [lo, cap]: below lo INVALID_ARGUMENT, above the hard cap
// INVALID_ARGUMENT with reason LIMIT_EXCEEDED.
absl::Status Ranged(absl::string_view field, int64_t v, int64_t lo,
                    int64_t cap) {
  if (v < lo) {
    return BadOption(field, absl::StrCat("must be >= ", lo, ", got ", v));
  }
  if (v > cap) {
    return WithReason(
        BadOption(
            field,
            absl::StrCat("is ", v, ", over the server's hard limit of ", cap)),
        kReasonLimitExceeded);
  }
  return absl::OkStatus();
}

// A float option sent as a double, in the range [lo, hi] with open ends as
// flagged: checked as sent, then as the float training uses, which may have
// rounded onto an open end (0.99999999 is 1.0f, 1e-50 is 0.0f).
absl::Status FloatOption(absl::string_view field, double v, double lo,
                         bool lo_open, double hi, bool hi_open, float* out) {
  auto inside = [&](double x) {
    return (lo_open ? x > lo : x >= lo) && (hi_open ? x < hi : x <= hi);
  };
  if (!inside(v)) {
    return BadOption(
        field,
        absl::StrCat("must be in ", lo_open ? "(" : "[", Shortest(lo), ", ",
                     Shortest(hi), hi_open ? ")" : "]", ", got ", Shortest(v)));
  }
  const float f = static_cast<float>(v);
  if (!inside(f)) {
    const bool at_lo = f <= lo;
    return BadOption(
        field, absl::StrCat(Shortest(v), " rounds to ", Shortest(f),
                            " in single precision; must be ",
                            at_lo ? "> " : "< ", Shortest(at_lo ? lo : hi)));
  }
  *out = f;
  return absl::OkStatus();
}

// The integer options of `r` that are set, into `o`.
absl::Status ApplyIntOptions(const v1::TrainOptions& r, TrainOptions* o) {
  struct IntOption {
    bool set;
    const char* field;
    int64_t value, lo, cap;
    int* out;
  };
  int cd_steps = 0;
  const IntOption options[] = {
      {r.has_hidden(), "hidden", r.hidden(), 1, kMaxHidden, &o->hidden},
      {r.has_epochs(), "epochs", r.epochs(), 1, kMaxEpochs, &o->max_epochs},
      {r.has_batch_size(), "batch_size", r.batch_size(), 1, kMaxBatchSize,
       &o->batch_size},
      {r.has_cd_steps(), "cd_steps", r.cd_steps(), 1, kMaxCdSteps, &cd_steps},
      {r.has_ensemble(), "ensemble", r.ensemble(), 1, kMaxEnsemble,
       &o->ensemble},
      {r.has_factors(), "factors", r.factors(), -1, kMaxHidden, &o->factors},
      {r.has_rated_hidden(), "rated_hidden", r.rated_hidden(), -1, kMaxHidden,
       &o->rated_hidden},
      {r.has_rated_factors(), "rated_factors", r.rated_factors(), 0, kMaxHidden,
       &o->rated_factors},
      {r.has_mf_factors(), "mf_factors", r.mf_factors(), 0, kMaxMfFactors,
       &o->mf_factors},
      {r.has_threads(), "threads", r.threads(), 0, kMaxTrainThreads,
       &o->threads},
  };
  for (const IntOption& opt : options) {
    if (!opt.set) continue;
    if (absl::Status s = Ranged(opt.field, opt.value, opt.lo, opt.cap);
        !s.ok()) {
      return s;
    }
    *opt.out = static_cast<int>(opt.value);
  }
  if (r.has_cd_steps()) {
    o->cd.steps = {{1, cd_steps}};
    o->cd.adaptive = false;
  }
  return absl::OkStatus();
}

// The floating-point and other options of `r` that are set, into `o`.
absl::Status ApplyRealOptions(const v1::TrainOptions& r, TrainOptions* o) {
  struct RealOption {
    bool set;
    const char* field;
    double value, lo;
    bool lo_open;
    double hi;
    float* out;
  };
  const RealOption options[] = {
      {r.has_learning_rate(), "learning_rate", r.learning_rate(), 0, true, 100,
       &o->learning_rate},
      {r.has_momentum(), "momentum", r.momentum(), 0, false, 1, &o->momentum},
      {r.has_weight_decay(), "weight_decay", r.weight_decay(), 0, false, 1,
       &o->weight_decay},
      {r.has_average(), "average", r.average(), 0, false, 1, &o->average},
      {r.has_item_lambda(), "item_lambda", r.item_lambda(), 0, false, 1e9,
       &o->item_lambda},
  };
  for (const RealOption& opt : options) {
    if (!opt.set) continue;
    if (absl::Status s = FloatOption(opt.field, opt.value, opt.lo, opt.lo_open,
                                     opt.hi, /*hi_open=*/true, opt.out);
        !s.ok()) {
      return s;
    }
  }
  if (r.has_item_regression()) {
    if (r.item_regression() < -1 || r.item_regression() > 1) {
      return BadOption("item_regression",
                       absl::StrCat("must be -1 (the size rule), 0 (off) or "
                                    "1 (on), got ",
                                    r.item_regression()));
    }
    o->item_regression = r.item_regression();
  }
  if (r.has_ordinal()) o->ordinal = r.ordinal();
  if (r.has_conditional()) o->conditional = r.conditional();
  if (r.has_seed()) o->seed = r.seed();
  if (r.has_validation_fraction()) {
    if (!(r.validation_fraction() >= 0 && r.validation_fraction() <= 0.5)) {
      return BadOption("validation_fraction",
                       absl::StrCat("must be in [0, 0.5], got ",
                                    Shortest(r.validation_fraction())));
    }
    o->validation_fraction = r.validation_fraction();
  }
  return absl::OkStatus();
}

absl::StatusOr<Activation> PolicyFromProto(v1::ActivationPolicy activation,
                                           Activation default_policy) {
  switch (activation) {
    case v1::ACTIVATION_POLICY_UNSPECIFIED:
      return default_policy;
    case v1::ACTIVATE_ALWAYS:
      return Activation::kAlways;
    case v1::ACTIVATE_IF_BETTER:
      return Activation::kIfBetter;
    case v1::ACTIVATE_NEVER:
      return Activation::kNever;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("activation ", static_cast<int>(activation),
                       " is not a known ActivationPolicy (1..3)"));
  }
}

}  // namespace

absl::StatusOr<TrainJobRequest> TrainJobFromProto(
    const v1::TrainRequest& request, const TrainOptions& defaults,
    Activation default_policy, int max_threads) {
  TrainOptions o = defaults;
  if (absl::Status s = ApplyIntOptions(request.options(), &o); !s.ok()) {
    return s;
  }
  if (absl::Status s = ApplyRealOptions(request.options(), &o); !s.ok()) {
    return s;
  }
  absl::StatusOr<Activation> policy =
      PolicyFromProto(request.activation(), default_policy);
  if (!policy.ok()) return policy.status();
  int cap = max_threads;
  if (cap == 0) {
    cap = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }
  if (o.threads == 0 || o.threads > cap) o.threads = cap;
  if (absl::Status v = ValidateTrainOptions(o); !v.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid training options: ", v.message()));
  }
  return TrainJobRequest{o, *policy};
}

}  // namespace rbmrec::server
