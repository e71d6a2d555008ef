#include "core/rating_scale.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace rbmrec {
namespace {

// Debian's Abseil is built with its own absl::string_view (not an alias of
// std::string_view); convert explicitly at Abseil calls.
absl::string_view AV(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

// Largest K a scale may have: indices are stored in a uint8_t.
constexpr int kMaxK = 255;

// Shortest decimal text that reads back as `v` ("1", "0.5", "4.000001",
// "100000", "nan", "inf"): the fewest of 15, 16 or 17 significant digits
// that round-trip.
std::string FormatDouble(double v) {
  char buf[32];
  for (int digits = 15; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof(buf), "%.*g", digits, v);
    double back = 0;
    if (!std::isfinite(v) || (absl::SimpleAtod(buf, &back) && back == v)) {
      break;
    }
  }
  return buf;
}

std::string ScaleText(double min, double max, double step) {
  return absl::StrCat(FormatDouble(min), ":", FormatDouble(max), ":",
                      FormatDouble(step));
}

}  // namespace

absl::StatusOr<RatingScale> RatingScale::Create(double min, double max,
                                                double step) {
  const std::string text = ScaleText(min, max, step);
  if (!std::isfinite(min) || !std::isfinite(max) || !std::isfinite(step)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rating scale ", text, ": values must be finite"));
  }
  if (!(min < max)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rating scale ", text, ": min must be less than max"));
  }
  if (!(step > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rating scale ", text, ": step must be positive"));
  }
  const double steps = (max - min) / step;
  if (!std::isfinite(steps) || steps > kMaxK) {
    return absl::InvalidArgumentError(
        absl::StrCat("rating scale ", text, ": more than ", kMaxK, " values"));
  }
  const double rounded = std::round(steps);
  if (std::fabs(steps - rounded) > 1e-6) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rating scale ", text, ": (max - min) / step = ", FormatDouble(steps),
        " is not an integer"));
  }
  const int k = static_cast<int>(rounded) + 1;
  if (k < 2 || k > kMaxK) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rating scale ", text, ": has ", k, " values, need 2 to ", kMaxK));
  }
  RatingScale scale;
  scale.min_ = min;
  scale.max_ = max;
  scale.step_ = step;
  scale.k_ = k;
  return scale;
}

absl::StatusOr<RatingScale> RatingScale::Parse(std::string_view spec) {
  const std::vector<absl::string_view> parts = absl::StrSplit(AV(spec), ':');
  if (parts.size() != 2 && parts.size() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid rating scale '", AV(spec),
                     "': expected MIN:MAX or MIN:MAX:STEP"));
  }
  double values[3] = {0, 0, 1.0};
  for (size_t i = 0; i < parts.size(); ++i) {
    const absl::string_view part = absl::StripAsciiWhitespace(parts[i]);
    if (!absl::SimpleAtod(part, &values[i])) {
      return absl::InvalidArgumentError(absl::StrCat("invalid rating scale '",
                                                     AV(spec), "': '", part,
                                                     "' is not a number"));
    }
  }
  return Create(values[0], values[1], values[2]);
}

absl::StatusOr<RatingScale> RatingScale::Infer(
    const std::vector<double>& ratings) {
  if (ratings.empty()) {
    return absl::InvalidArgumentError(
        "cannot infer a rating scale from no ratings");
  }
  double lo = ratings[0];
  double hi = ratings[0];
  bool fractional = false;
  for (const double r : ratings) {
    if (!std::isfinite(r)) {
      return absl::InvalidArgumentError(
          absl::StrCat("rating ", FormatDouble(r), " is not finite"));
    }
    const double twice = 2 * r;
    if (std::fabs(twice - std::round(twice)) > 1e-9) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rating ", FormatDouble(r),
          " is not a multiple of 0.5; give the rating scale explicitly"));
    }
    if (std::fabs(r - std::round(r)) > 1e-9) fractional = true;
    if (r < lo) lo = r;
    if (r > hi) hi = r;
  }
  // Snap to exact multiples of 0.5 so the scale prints cleanly.
  lo = std::round(2 * lo) / 2;
  hi = std::round(2 * hi) / 2;
  if (lo == hi) {
    return absl::InvalidArgumentError(
        absl::StrCat("every rating is ", FormatDouble(lo),
                     "; a rating scale needs at least 2 values"));
  }
  return Create(lo, hi, fractional ? 0.5 : 1.0);
}

absl::StatusOr<int> RatingScale::Index(double rating) const {
  if (!std::isfinite(rating)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rating ", FormatDouble(rating), " is not finite"));
  }
  const double tolerance = 1e-6 * step_;
  if (rating < min_ - tolerance || rating > max_ + tolerance) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rating ", FormatDouble(rating), " is off the scale ", ToString()));
  }
  const double pos = std::round((rating - min_) / step_);
  int k = static_cast<int>(pos);
  if (k < 0) k = 0;
  if (k > k_ - 1) k = k_ - 1;
  if (std::fabs(rating - Value(k)) > tolerance) {
    return absl::InvalidArgumentError(
        absl::StrCat("rating ", FormatDouble(rating),
                     " is not on a step of the scale ", ToString()));
  }
  return k;
}

double RatingScale::StoredValue(int k) const {
  const double exact = Value(k);
  // Far inside Index()'s tolerance of 1e-6 * step, so the decimal found
  // indexes back to k.
  const double window = 1e-9 * step_;
  char buf[32];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof(buf), "%.*g", digits, exact);
    const double decimal = std::strtod(buf, nullptr);
    if (std::fabs(decimal - exact) <= window) return decimal;
  }
  return exact;
}

std::string RatingScale::ToString() const {
  return ScaleText(min_, max_, step_);
}

}  // namespace rbmrec
