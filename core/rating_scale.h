#ifndef RBMREC_CORE_RATING_SCALE_H_
#define RBMREC_CORE_RATING_SCALE_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace rbmrec {

// A discrete rating scale: the K values min, min+step, ..., max.
// 1..5 in steps of 1 gives K=5; 0.5..5 in steps of 0.5 gives K=10.
// Value type; thread-safe for concurrent const use.
class RatingScale {
 public:
  // Default scale: 1..5, step 1.
  RatingScale() = default;

  // REQUIRES nothing; returns InvalidArgument unless min < max, step > 0,
  // (max-min)/step is an integer (to 1e-6) and 2 <= K <= 255.
  static absl::StatusOr<RatingScale> Create(double min, double max,
                                            double step);
  // Parses "MIN:MAX:STEP" (e.g. "1:5:1", "0.5:5:0.5") or "MIN:MAX" (step 1).
  static absl::StatusOr<RatingScale> Parse(std::string_view spec);
  // Smallest scale covering the observed ratings: min and max of the values,
  // step 0.5 if any value is not an integer, else 1. Fails on an empty list,
  // a non-finite value, or a value that is not a multiple of 0.5, and when
  // every value is the same (a scale needs K >= 2).
  static absl::StatusOr<RatingScale> Infer(const std::vector<double>& ratings);

  int K() const { return k_; }
  double min() const { return min_; }
  double max() const { return max_; }
  double step() const { return step_; }
  // REQUIRES: 0 <= k < K().
  double Value(int k) const { return min_ + step_ * k; }
  // The index k of `rating`; InvalidArgument naming the value (in its
  // shortest round-trip form: "rating 4.000001 is off the scale 1:5:1")
  // when it is NaN/inf, off the scale, or not on a step (tolerance 1e-6 *
  // step).
  absl::StatusOr<int> Index(double rating) const;
  // The value a rating of index k is stored as: the shortest decimal number
  // within 1e-9 * step of Value(k), so that 1:5:1's k = 3 is exactly 4 and
  // 0.1:1:0.1's k = 2 is 0.3 (Value(2) is 0.30000000000000004). Index() of
  // it is k. REQUIRES: 0 <= k < K().
  double StoredValue(int k) const;
  // "1:5:1" form, parseable by Parse().
  std::string ToString() const;

  bool operator==(const RatingScale& o) const {
    return min_ == o.min_ && max_ == o.max_ && step_ == o.step_;
  }
  bool operator!=(const RatingScale& o) const { return !(*this == o); }

 private:
  double min_ = 1.0;
  double max_ = 5.0;
  double step_ = 1.0;
  int k_ = 5;
};

}  // namespace rbmrec

#endif  // RBMREC_CORE_RATING_SCALE_H_
