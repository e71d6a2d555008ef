#ifndef RBMREC_BENCH_JSON_NUMBERS_H_
#define RBMREC_BENCH_JSON_NUMBERS_H_

// The numbers of the bench tools' JSON output (rbmrec-eval, rbmrec-loadgen),
// written with nlohmann-json, rounded as that output has always given them.

#include <cmath>
#include <cstdlib>

#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace rbmrec::bench {

// JSON output: nlohmann-json with keys in insertion order.
using Json = nlohmann::ordered_json;

// `x` rounded to `digits` decimals (NaN and infinities stay as they are and
// are written as null).
inline double Fixed(double x, int digits) {
  const double scale = std::pow(10.0, digits);
  return std::isfinite(x) ? std::round(x * scale) / scale : x;
}

// `x` with the 6 significant digits of printf's %g (hyper-parameters stored
// as float read 0.05, not 0.05000000074505806).
inline double General(double x) {
  return std::isfinite(x)
             ? std::strtod(absl::StrFormat("%g", x).c_str(), nullptr)
             : x;
}

}  // namespace rbmrec::bench

#endif  // RBMREC_BENCH_JSON_NUMBERS_H_
