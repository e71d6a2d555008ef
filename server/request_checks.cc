#include "server/request_checks.h"

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
std::string IdProblem(const std::string& id, absl::string_view field) {
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

absl::StatusOr<TrainJobRequest> TrainJobFromProto(
    const v1::TrainRequest& request, const TrainOptions& defaults,
    Activation default_policy, int max_threads) {
  TrainOptions o = defaults;
  const v1::TrainOptions& r = request.options();
  auto bad = [](absl::string_view field, absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("options.", field, " ", why));
  };
  // An int option in [lo, cap]: below lo INVALID_ARGUMENT, above the hard
  // cap INVALID_ARGUMENT with reason LIMIT_EXCEEDED.
  auto ranged = [&](absl::string_view field, int64_t v, int64_t lo,
                    int64_t cap) -> absl::Status {
    if (v < lo) return bad(field, absl::StrCat("must be >= ", lo, ", got ", v));
    if (v > cap) {
      return WithReason(bad(field, absl::StrCat("is ", v,
                                                ", over the server's hard "
                                                "limit of ",
                                                cap)),
                        kReasonLimitExceeded);
    }
    return absl::OkStatus();
  };
  absl::Status s;
  if (r.has_hidden() && (s = ranged("hidden", r.hidden(), 1, kMaxHidden)).ok())
    o.hidden = r.hidden();
  if (s.ok() && r.has_epochs() &&
      (s = ranged("epochs", r.epochs(), 1, kMaxEpochs)).ok())
    o.max_epochs = r.epochs();
  if (s.ok() && r.has_batch_size() &&
      (s = ranged("batch_size", r.batch_size(), 1, kMaxBatchSize)).ok())
    o.batch_size = r.batch_size();
  if (s.ok() && r.has_cd_steps() &&
      (s = ranged("cd_steps", r.cd_steps(), 1, kMaxCdSteps)).ok()) {
    o.cd.steps = {{1, r.cd_steps()}};
    o.cd.adaptive = false;
  }
  if (s.ok() && r.has_ensemble() &&
      (s = ranged("ensemble", r.ensemble(), 1, kMaxEnsemble)).ok())
    o.ensemble = r.ensemble();
  if (s.ok() && r.has_factors() &&
      (s = ranged("factors", r.factors(), -1, kMaxHidden)).ok())
    o.factors = r.factors();
  if (s.ok() && r.has_rated_hidden() &&
      (s = ranged("rated_hidden", r.rated_hidden(), -1, kMaxHidden)).ok())
    o.rated_hidden = r.rated_hidden();
  if (s.ok() && r.has_rated_factors() &&
      (s = ranged("rated_factors", r.rated_factors(), 0, kMaxHidden)).ok())
    o.rated_factors = r.rated_factors();
  if (s.ok() && r.has_threads() &&
      (s = ranged("threads", r.threads(), 0, kMaxTrainThreads)).ok())
    o.threads = r.threads();
  if (!s.ok()) return s;
  // A float option sent as a double, in the range [lo, hi] with open ends
  // as flagged: checked as sent, then as the float training uses, which
  // may have rounded onto an open end (0.99999999 is 1.0f, 1e-50 is 0.0f).
  auto float_option = [&](absl::string_view field, double v, double lo,
                          bool lo_open, double hi, bool hi_open,
                          float* out) -> absl::Status {
    auto inside = [&](double x) {
      return (lo_open ? x > lo : x >= lo) && (hi_open ? x < hi : x <= hi);
    };
    if (!inside(v)) {
      return bad(field,
                 absl::StrCat("must be in ", lo_open ? "(" : "[", Shortest(lo),
                              ", ", Shortest(hi), hi_open ? ")" : "]", ", got ",
                              Shortest(v)));
    }
    const float f = static_cast<float>(v);
    if (!inside(f)) {
      const bool at_lo = f <= lo;
      return bad(field,
                 absl::StrCat(Shortest(v), " rounds to ", Shortest(f),
                              " in single precision; must be ",
                              at_lo ? "> " : "< ", Shortest(at_lo ? lo : hi)));
    }
    *out = f;
    return absl::OkStatus();
  };
  if (r.has_learning_rate() &&
      !(s = float_option("learning_rate", r.learning_rate(), 0, true, 100, true,
                         &o.learning_rate))
           .ok()) {
    return s;
  }
  if (r.has_momentum() && !(s = float_option("momentum", r.momentum(), 0, false,
                                             1, true, &o.momentum))
                               .ok()) {
    return s;
  }
  if (r.has_weight_decay() &&
      !(s = float_option("weight_decay", r.weight_decay(), 0, false, 1, true,
                         &o.weight_decay))
           .ok()) {
    return s;
  }
  if (r.has_average() &&
      !(s = float_option("average", r.average(), 0, false, 1, true, &o.average))
           .ok()) {
    return s;
  }
  if (r.has_ordinal()) o.ordinal = r.ordinal();
  if (r.has_seed()) o.seed = r.seed();
  if (r.has_validation_fraction()) {
    if (!(r.validation_fraction() >= 0 && r.validation_fraction() <= 0.5))
      return bad("validation_fraction",
                 absl::StrCat("must be in [0, 0.5], got ",
                              Shortest(r.validation_fraction())));
    o.validation_fraction = r.validation_fraction();
  }
  Activation policy = default_policy;
  switch (request.activation()) {
    case v1::ACTIVATION_POLICY_UNSPECIFIED:
      break;
    case v1::ACTIVATE_ALWAYS:
      policy = Activation::kAlways;
      break;
    case v1::ACTIVATE_IF_BETTER:
      policy = Activation::kIfBetter;
      break;
    case v1::ACTIVATE_NEVER:
      policy = Activation::kNever;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("activation ", static_cast<int>(request.activation()),
                       " is not a known ActivationPolicy (1..3)"));
  }
  int cap = max_threads;
  if (cap == 0)
    cap = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  if (o.threads == 0 || o.threads > cap) o.threads = cap;
  if (absl::Status v = ValidateTrainOptions(o); !v.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid training options: ", v.message()));
  }
  return TrainJobRequest{o, policy};
}

}  // namespace rbmrec::server
