// EvaluateTopN (core/fit.h): the offline top-N evaluation of Recommend's
// rankings and of the most-popular list against the test ratings.

#include <algorithm>
#include <cmath>
#include <thread>
#include <vector>

#include "core/fit.h"
#include "core/item_regression.h"
#include "core/metrics.h"
#include "core/recommend.h"
#include "core/thread_pool.h"

namespace rbmrec {

namespace {

// Relevant test items per model user, sorted (rel), and the relevant test
// items unknown to the model per user (they cannot be ranked but still
// count in recall); returns the users with at least one relevant item.
std::vector<int32_t> RelevantItems(const Model& model,
                                   const std::vector<TestRating>& test,
                                   double relevant,
                                   std::vector<std::vector<int32_t>>* rel_out,
                                   std::vector<int64_t>* unknown_rel_out) {
  std::vector<std::vector<int32_t>>& rel = *rel_out;
  std::vector<int64_t>& unknown_rel = *unknown_rel_out;
  rel.assign(static_cast<size_t>(model.users().size()), {});
  unknown_rel.assign(rel.size(), 0);
  for (const TestRating& t : test) {
    if (t.user < 0 || t.rating < relevant - 1e-9) continue;
    if (t.item >= 0) {
      rel[static_cast<size_t>(t.user)].push_back(t.item);
    } else {
      ++unknown_rel[static_cast<size_t>(t.user)];
    }
  }
  std::vector<int32_t> users;
  for (size_t u = 0; u < rel.size(); ++u) {
    if (!rel[u].empty() || unknown_rel[u] > 0) {
      std::sort(rel[u].begin(), rel[u].end());
      users.push_back(static_cast<int32_t>(u));
    }
  }
  return users;
}

// Where one of EvaluateTopN's lists comes from.
enum class TopNSource {
  kRecommend,          // Recommend's ranking by `by`
  kPopularity,         // the most-popular list
  kRegression,         // the item regression's scores alone
  kRegressionAtLeast,  // max(score, 0) x p(rating >= t)
};

// One of EvaluateTopN's rankings.
struct TopNWay {
  const char* name;
  RankBy by;
  TopNSource source;
};

// The rankings: Recommend's for every RankBy the model supports, the item
// regression's score alone when the model has it (and the users have
// ratings), then the most-popular list.
std::vector<TopNWay> TopNWays(const Model& model, bool cold_start) {
  std::vector<TopNWay> ways = {
      {"expected_rating", RankBy::kExpected, TopNSource::kRecommend},
      {"p_at_least", RankBy::kAtLeast, TopNSource::kRecommend}};
  if (model.HasRatedRbm()) {
    ways.push_back({"p_rated", RankBy::kRated, TopNSource::kRecommend});
    ways.push_back(
        {"p_rated_at_least", RankBy::kRatedAtLeast, TopNSource::kRecommend});
  }
  if (model.HasItemRegression()) {
    if (!cold_start) {
      ways.push_back(
          {"item_regression", RankBy::kExpected, TopNSource::kRegression});
    }
    ways.push_back({"item_regression_at_least", RankBy::kRegressionAtLeast,
                    TopNSource::kRecommend});
  }
  ways.push_back({"popularity", RankBy::kExpected, TopNSource::kPopularity});
  return ways;
}

// The top n of the item regression's scores alone over the trained items
// not in `excluded_mask`, best first, ties by item id (as Recommend's).
void RegressionList(const Model& model, const VisibleSet& v,
                    const std::vector<uint8_t>& excluded_mask, int n,
                    std::vector<int32_t>* list) {
  const int32_t m = model.num_items();
  std::vector<float> e(static_cast<size_t>(m), 0.0f);
  ItemRegressionScores(model.item_regression(), v.items, v.n, e.data());
  std::vector<std::pair<float, int32_t>> order;
  order.reserve(static_cast<size_t>(m));
  for (int32_t i = 0; i < m; ++i) {
    if (!excluded_mask[static_cast<size_t>(i)] && model.Trained(i)) {
      order.emplace_back(e[static_cast<size_t>(i)], i);
    }
  }
  const size_t top = std::min(order.size(), static_cast<size_t>(n));
  std::partial_sort(
      order.begin(), order.begin() + static_cast<std::ptrdiff_t>(top),
      order.end(), [&](const auto& a, const auto& b) {
        if (a.first != b.first) return a.first > b.first;
        return model.items().Name(a.second) < model.items().Name(b.second);
      });
  for (size_t r = 0; r < top; ++r) list->push_back(order[r].second);
}

// Per user x and way: the top-n scores and hit ranks of the way's list
// (entries x * ways.size() + way), users in parallel.
void RankTopN(const Model& model, const SparseRatings& train_by_user,
              const std::vector<int32_t>& users,
              const std::vector<std::vector<int32_t>>& rel,
              const std::vector<int64_t>& unknown_rel,
              const std::vector<int32_t>& popular,
              const std::vector<TopNWay>& ways, int k0, int n, int threads,
              bool cold_start, std::vector<TopNScores>* per_user_out,
              std::vector<std::vector<int32_t>>* hit_ranks_out) {
  const int kWays = static_cast<int>(ways.size());
  std::vector<TopNScores>& per_user = *per_user_out;
  std::vector<std::vector<int32_t>>& hit_ranks = *hit_ranks_out;
  per_user.resize(users.size() * kWays);
  hit_ranks.resize(per_user.size());
  ThreadPool pool(threads > 0
                      ? threads
                      : static_cast<int>(std::thread::hardware_concurrency()));
  std::vector<ScoringScratch> scratch(static_cast<size_t>(pool.size()));
  pool.ParallelFor(
      static_cast<int64_t>(users.size()),
      [&](int thread, int64_t b, int64_t e) {
        ScoringScratch* sc = &scratch[static_cast<size_t>(thread)];
        std::vector<int32_t> list;
        std::vector<uint8_t> rated(static_cast<size_t>(model.num_items()), 0);
        for (int64_t x = b; x < e; ++x) {
          const int32_t u = users[static_cast<size_t>(x)];
          std::vector<int32_t> relevant_items = rel[static_cast<size_t>(u)];
          // Unknown relevant items: ids no list can contain.
          for (int64_t j = 0; j < unknown_rel[static_cast<size_t>(u)]; ++j) {
            relevant_items.push_back(-1 - static_cast<int32_t>(j));
          }
          std::sort(relevant_items.begin(), relevant_items.end());
          VisibleSet v;
          if (!cold_start && u < train_by_user.rows) {
            v.items = train_by_user.col.data() + train_by_user.offsets[u];
            v.ks = train_by_user.k.data() + train_by_user.offsets[u];
            v.n = train_by_user.RowSize(u);
          }
          const std::vector<int32_t> excluded(v.items, v.items + v.n);
          for (int way = 0; way < kWays; ++way) {
            list.clear();
            const TopNSource source = ways[static_cast<size_t>(way)].source;
            if (source == TopNSource::kRecommend) {
              RankOptions ro;
              ro.method = PredictMethod::kExact;
              ro.n = n;
              ro.by = ways[static_cast<size_t>(way)].by;
              ro.k0 = k0;
              for (const Ranked& r :
                   RankItems(model, cold_start ? -1 : u, v, excluded, ro, sc)) {
                list.push_back(r.item);
              }
            } else if (source == TopNSource::kPopularity) {
              for (int32_t i : excluded) rated[static_cast<size_t>(i)] = 1;
              for (int32_t i : popular) {
                if (static_cast<int>(list.size()) >= n) break;
                if (!rated[static_cast<size_t>(i)]) list.push_back(i);
              }
              for (int32_t i : excluded) rated[static_cast<size_t>(i)] = 0;
            } else {
              for (int32_t i : excluded) rated[static_cast<size_t>(i)] = 1;
              RegressionList(model, v, rated, n, &list);
              for (int32_t i : excluded) rated[static_cast<size_t>(i)] = 0;
            }
            per_user[static_cast<size_t>(x) * kWays + way] =
                ScoreTopN(list, relevant_items, n);
            hit_ranks[static_cast<size_t>(x) * kWays + way] =
                HitRanks(list, relevant_items, n);
          }
        }
      });
}

// The per-user scores averaged over the users, per way, and the curves at
// every cut-off.
std::vector<TopNResult> AverageTopN(
    const std::vector<int32_t>& users,
    const std::vector<std::vector<int32_t>>& rel,
    const std::vector<int64_t>& unknown_rel, const std::vector<TopNWay>& ways,
    int n, const std::vector<TopNScores>& per_user,
    const std::vector<std::vector<int32_t>>& hit_ranks) {
  const int kWays = static_cast<int>(ways.size());
  std::vector<TopNResult> out(static_cast<size_t>(kWays));
  for (int way = 0; way < kWays; ++way) {
    out[static_cast<size_t>(way)].name = ways[static_cast<size_t>(way)].name;
  }
  for (TopNResult& r : out) r.at.resize(static_cast<size_t>(n));
  for (size_t x = 0; x < users.size(); ++x) {
    const size_t u = static_cast<size_t>(users[x]);
    const int64_t num_relevant =
        static_cast<int64_t>(rel[u].size()) + unknown_rel[u];
    for (int way = 0; way < kWays; ++way) {
      const TopNScores& s = per_user[x * kWays + static_cast<size_t>(way)];
      out[static_cast<size_t>(way)].mean.precision += s.precision;
      out[static_cast<size_t>(way)].mean.recall += s.recall;
      out[static_cast<size_t>(way)].mean.ndcg += s.ndcg;
      AddTopNCurve(hit_ranks[x * kWays + static_cast<size_t>(way)],
                   num_relevant, &out[static_cast<size_t>(way)].at);
      if (!rel[u].empty()) {  // the known-items protocol at n
        std::vector<TopNScores> known(static_cast<size_t>(n));
        AddTopNCurve(hit_ranks[x * kWays + static_cast<size_t>(way)],
                     static_cast<int64_t>(rel[u].size()), &known);
        TopNResult& r = out[static_cast<size_t>(way)];
        r.known.precision += known.back().precision;
        r.known.recall += known.back().recall;
        r.known.ndcg += known.back().ndcg;
        ++r.known_users;
      }
    }
  }
  for (TopNResult& r : out) {
    const double d = std::max<double>(1, static_cast<double>(users.size()));
    r.mean.precision /= d;
    r.mean.recall /= d;
    r.mean.ndcg /= d;
    for (TopNScores& s : r.at) {
      s.precision /= d;
      s.recall /= d;
      s.ndcg /= d;
    }
    const double dk = std::max<double>(1, static_cast<double>(r.known_users));
    r.known.precision /= dk;
    r.known.recall /= dk;
    r.known.ndcg /= dk;
  }
  return out;
}

}  // namespace

std::vector<TopNResult> EvaluateTopN(const Model& model,
                                     const SparseRatings& train_by_user,
                                     const std::vector<TestRating>& test,
                                     double relevant, int n, int threads,
                                     int64_t* n_users, bool cold_start) {
  std::vector<std::vector<int32_t>> rel;
  std::vector<int64_t> unknown_rel;
  const std::vector<int32_t> users =
      RelevantItems(model, test, relevant, &rel, &unknown_rel);
  *n_users = static_cast<int64_t>(users.size());
  const std::vector<int32_t> popular = MostRatedItems(model);
  const int k0 = std::clamp(
      static_cast<int>(std::ceil(
          (relevant - model.scale().min()) / model.scale().step() - 1e-6)),
      0, model.K() - 1);
  const std::vector<TopNWay> ways = TopNWays(model, cold_start);
  std::vector<TopNScores> per_user;
  std::vector<std::vector<int32_t>> hit_ranks;
  RankTopN(model, train_by_user, users, rel, unknown_rel, popular, ways, k0, n,
           threads, cold_start, &per_user, &hit_ranks);
  return AverageTopN(users, rel, unknown_rel, ways, n, per_user, hit_ranks);
}

}  // namespace rbmrec
