#ifndef RBMREC_TESTS_CORE_SYNTHETIC_H_
#define RBMREC_TESTS_CORE_SYNTHETIC_H_

// A synthetic rating data set with planted structure: users and items each
// belong to one of `groups` taste groups; a user rates items of their own
// group high and others low, with noise. Deterministic for a seed.

#include <string>
#include <utility>
#include <vector>

#include "core/fit.h"
#include "core/rng.h"

namespace rbmrec::testing_data {

struct Split {
  Dataset train;
  std::vector<TestRating> test;
};

inline Split PlantedRatings(int users, int items, int groups, double density,
                            uint64_t seed) {
  Split s;
  Rng rng(seed);
  for (int u = 0; u < users; ++u)
    s.train.users.GetOrAdd("u" + std::to_string(u));
  for (int i = 0; i < items; ++i)
    s.train.items.GetOrAdd("i" + std::to_string(i));
  for (int u = 0; u < users; ++u) {
    for (int i = 0; i < items; ++i) {
      if (rng.UniformDouble() >= density) continue;
      const bool same = (u % groups) == (i % groups);
      // Item quality shifts every rating a little (so item means matter too).
      int r = same ? 4 : 1;
      r += static_cast<int>(rng.Below(2)) +
           (i % 3 == 0 ? 0 : -static_cast<int>(rng.Below(2)));
      r = std::max(0, std::min(4, r));
      if (rng.UniformDouble() < 0.2) {
        s.test.push_back({u, i, static_cast<double>(r + 1)});
      } else {
        s.train.ratings.push_back({u, i, static_cast<uint8_t>(r)});
      }
    }
  }
  return s;
}

// Small, quick training options for the synthetic sets: F = 16, up to 40
// epochs, batches of 10, seed 7.
inline TrainOptions SmallTrainOptions() {
  TrainOptions o;
  o.hidden = 16;
  o.max_epochs = 40;
  o.batch_size = 10;
  o.seed = 7;
  return o;
}

}  // namespace rbmrec::testing_data

namespace rbmrec {

// `model` with another U/I mixing weight (ModelParams::user_weight and its
// slopes).
inline Model WithUserWeight(Model model, float weight, float per_log_user = 0,
                            float per_log_item = 0) {
  ModelParams params = std::move(model).TakeParams();
  params.user_weight = weight;
  params.user_weight_per_log_user = per_log_user;
  params.user_weight_per_log_item = per_log_item;
  return Model(std::move(params));
}

}  // namespace rbmrec

#endif  // RBMREC_TESTS_CORE_SYNTHETIC_H_
