#ifndef RBMREC_CORE_RECOMMEND_H_
#define RBMREC_CORE_RECOMMEND_H_

// Recommend's ranking, in core so that the server and the evaluation tools
// rank the same way.

#include <cstdint>
#include <vector>

#include "core/model.h"
#include "core/scoring.h"

namespace rbmrec {

// Recommend's ranking.
struct RankOptions {
  PredictMethod method = PredictMethod::kExact;
  int n = 10;           // items wanted, >= 1
  int candidates = 30;  // stage-2 candidates: max(candidates, 3n)
  int k0 = -1;          // >= 0: rank by p(rating index >= k0), else by the
                        // expected rating
};
struct Ranked {
  int32_t item = 0;     // model index
  float score = 0;      // the ranking score (expectation or probability)
  double expected = 0;  // expected rating of the requested method
};

// The best opt.n items with training data (Model::Trained) that are not in
// `excluded`, best first (ties by item id). Two stages: (1) every item gets
// a mean-field score (ScoreAllMeanField, core/scoring.h), or with candidates ==
// 0 and the exact method the exact rule over all items (PredictAll); (2) the
// best max(candidates, 3n) (n when stage 1 already used the requested method)
// are scored again with the requested method, which gives the order and
// the numbers. Distributions that are not finite are skipped.
// Thread-safe as long as each thread passes its own scratch.
std::vector<Ranked> RankItems(const Model& model, int32_t user,
                              const VisibleSet& v,
                              const std::vector<int32_t>& excluded,
                              const RankOptions& opt, ScoringScratch* scratch);

}  // namespace rbmrec

#endif  // RBMREC_CORE_RECOMMEND_H_
