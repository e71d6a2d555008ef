#ifndef RBMREC_BENCH_SIMILAR_EVAL_H_
#define RBMREC_BENCH_SIMILAR_EVAL_H_

// rbmrec-eval --similar: the similar-items protocol of
// /work/shared/tools/peer-similar.py, over any way of listing similar items.
//
//   hit@10: for each test user with a test item rated >= 4 (user and item
//     both in training), up to 5 of the training items they rated >= 4 are
//     queries, chosen without replacement by a seeded RNG (core/rng.h, seed
//     7; not numpy's RandomState(7) stream, so the queries differ from the
//     script's, the protocol does not); the query's 10 most similar items,
//     skipping every item the user rated in training, are a hit when one of
//     them is such a test item. The 10 are the exact top 10 after the
//     exclusion (the script takes its top 80 and filters them, which leaves
//     fewer than 10 for a user who rated more than 70 of them).
//   genre agreement: over every training item, the share of its plain top
//     10 (the item itself excluded) that shares at least one genre with it
//     (movies.dat "MovieID::Title::Genre1|Genre2", latin-1; an item without
//     genres agrees with nothing).

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "bench/json_numbers.h"
#include "core/fit.h"
#include "core/similar.h"

namespace rbmrec::bench {

// One genre bit per genre name (at most 64 names), per model item: 0 for
// an item movies.dat does not list. IO or parse errors as Status.
absl::StatusOr<std::vector<uint64_t>> ReadGenres(const std::string& path,
                                                 const IdMap& items);

// A way of listing similar items: the n best for `query`, never returning
// the query nor an `excluded` item.
using SimilarFn = std::function<absl::StatusOr<std::vector<SimilarItem>>(
    int32_t query, absl::Span<const int32_t> excluded, int n)>;

struct SimilarFigures {
  double hit = 0;       // hit@10
  int64_t queries = 0;  // hit@10 queries
  double genre = 0;     // genre agreement
  // Per hit@10 query: wall time, and the thread's CPU time (the query's
  // own cost, whatever else the machine runs).
  double p50_ms = 0, p99_ms = 0, max_ms = 0;
  double cpu_p50_ms = 0, cpu_p99_ms = 0;
};

// The queries of the protocol, drawn once, evaluated for every measure.
class SimilarProtocol {
 public:
  // train_by_user: the training ratings (rows the model's users); test
  // with model indices (-1 unknown); liked: a rating value >= this is a
  // liked (training) or relevant (test) rating.
  SimilarProtocol(const Model& model, const SparseRatings& train_by_user,
                  const std::vector<TestRating>& test,
                  std::vector<uint64_t> genres, double liked, uint64_t seed);

  int64_t num_queries() const { return static_cast<int64_t>(query_.size()); }
  // Both figures for one way of listing (single-threaded, so the per-query
  // times are the function's alone).
  absl::StatusOr<SimilarFigures> Run(const SimilarFn& fn) const;

 private:
  const SparseRatings& train_;
  int32_t num_items_;
  std::vector<uint64_t> genres_;
  std::vector<int32_t> query_, query_user_;     // one per hit@10 query
  std::vector<std::vector<int32_t>> relevant_;  // per user, sorted
};

// The anchors: item-item cosine over the binary rated matrix (counts of
// co-rating users over the square root of both items' counts) and
// popularity (training ratings). The returned functions keep what they
// need (the cosine an m x m float matrix).
SimilarFn BinaryCosineLister(const SparseRatings& train_by_user);
SimilarFn PopularityLister(const SparseRatings& train_by_user);
// The model's measure through SimilarItems (core/similar.h).
SimilarFn ModelLister(const ItemSimilarity& index);

// Everything rbmrec-eval --similar prints: the model's measures (named in
// the output; the first is core/similar.h's default) and the two anchors,
// as text lines and as the JSON "similar" object {movies, queries, seed,
// protocol, measures: {NAME: {hit10, queries, genre_agreement, build_ms,
// query_ms: {p50, p99, max}, query_cpu_ms: {p50, p99}}}}.
struct SimilarReport {
  std::string text;
  Json json;
};
absl::StatusOr<SimilarReport> EvaluateSimilar(
    const Model& model, const SparseRatings& train_by_user,
    const std::vector<TestRating>& test, const std::string& movies,
    double liked, float popularity_weight);

}  // namespace rbmrec::bench

#endif  // RBMREC_BENCH_SIMILAR_EVAL_H_
