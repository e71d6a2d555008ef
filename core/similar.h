#ifndef RBMREC_CORE_SIMILAR_H_
#define RBMREC_CORE_SIMILAR_H_

// Similar items ("more like this"): the n items most similar to one item or
// to a small set of query items, from a trained model.
//
// The measure (SimilarityMeasure) scores every item j for the query set Q
// with one matrix-vector product over per-item vectors prepared once per
// model (ItemSimilarity: O(m * F) floats, a query O(m * F)); the n best of
// the allowed items are then chosen exactly (a partial sort over every
// allowed item, never a top k that is filtered afterwards), best first,
// ties by item index.
//
// The default, kRatedCosine, uses the ranking model, the rated RBM
// (core/rated_rbm.h): item i's vector is its row W_i of the rated RBM's
// weights (F floats), the direction in which rating i moves a user's
// hidden units, normalised to unit length u_i; the score is the mean cosine
// to the query items plus a popularity term,
//   score_j = u_j . (sum_{q in Q} u_q) / |Q| + b * log(1 + n_j),
// n_j the item's training ratings and b = popularity_weight (0.22 by
// default; without it, rare items whose few ratings gave them similar
// weights crowd the list, and the item-item cosine of co-rating counts,
// c_qj / sqrt(n_q n_j) with c_qj growing with n_j, has such a term built
// in). On ML-1M (rbmrec-eval --similar, docs/eval.md) it beats that
// item-item cosine on both hit@10 and genre agreement; the plain cosine
// (b = 0) has a high genre agreement and a poor hit@10, and a larger b
// trades the first for the second (0.22: both above the item-item cosine's
// for training seeds 1 to 4; 0.2 and 0.25 each miss one of the two for one
// seed).
//
// kRatedConditional is "users who rated these also rated": the rated
// RBM's logit of p(rated j) for a user who rated just the query items,
// minus `lift` times the logit for a user who rated nothing (lift 0: the
// plain conditional, close to popularity; 1: how much the query items raise
// j's logit).

#include <atomic>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/item_filter.h"
#include "core/model.h"

namespace rbmrec {

// How items are compared (see the top of this file).
enum class SimilarityMeasure {
  // Cosine of the rated RBM's W rows plus popularity_weight * log(1 + n_j).
  kRatedCosine,
  // The rated RBM's logit of p(rated j | rated the query items) minus lift
  // times its logit with nothing rated.
  kRatedConditional,
};

struct SimilarityOptions {
  SimilarityMeasure measure = SimilarityMeasure::kRatedCosine;
  // kRatedCosine: the weight b of log(1 + n_j), finite and >= 0.
  float popularity_weight = 0.22f;
  // kRatedCosine: subtract the mean W row over the trained items before
  // normalising (off by default: on ML-1M it trades genre agreement for
  // hit@10 about as a larger popularity_weight does).
  bool center = false;
  // kRatedConditional's weight of the prior logit, in [0, 1].
  float lift = 0.85f;
};

// One similar item: model index and its score (the measure's; higher is
// more similar).
struct SimilarItem {
  int32_t item = 0;
  float score = 0;
};

// What a query asks for, beside the query items.
struct SimilarRequest {
  int n = 10;  // items wanted, >= 1
  // Items never returned (e.g. the user's rated items); any order,
  // duplicates allowed, indices outside [0, num_items) ignored.
  absl::Span<const int32_t> excluded;
  // Optional filter: empty = every item may be returned; else num_items
  // entries, and only items with allowed[i] != 0 may be.
  absl::Span<const uint8_t> allowed;
  // Optional filter too (both apply when both are set): null = every item;
  // else only the items it allows (indices past its num_items() are not).
  const ItemFilter* filter = nullptr;
};

// Buffers of one query, owned by one thread and passed explicitly; they grow
// to the model's size and are reused. Not thread-safe.
struct SimilarScratch {
  std::vector<float> query, scores;
  std::vector<uint8_t> skip;
  std::vector<std::pair<float, int32_t>> cand;
};

// The per-item vectors of one model. Immutable after construction; all
// const methods are thread-safe (each thread passes its own scratch). Holds
// no reference to the model: rebuild it when the model changes.
class ItemSimilarity {
 public:
  ItemSimilarity() = default;

  // From a trained model. InvalidArgument for options out of range;
  // FailedPrecondition when the model has no rated RBM (Model::HasRatedRbm;
  // models trained with the default options have one) or no items.
  static absl::StatusOr<ItemSimilarity> Build(const Model& model,
                                              const SimilarityOptions& options);
  // The cosine measure over any item vectors (rows; m x D) and training
  // counts (m entries): items with count 0 or a zero vector (after
  // centring) have no vector and are never returned nor usable as queries.
  // InvalidArgument for mismatched sizes or a negative or non-finite
  // popularity_weight.
  static absl::StatusOr<ItemSimilarity> FromVectors(
      const RowMatrixXf& vectors, absl::Span<const uint32_t> counts,
      bool center, float popularity_weight);

  int32_t num_items() const { return static_cast<int32_t>(unit_.rows()); }
  int dims() const { return static_cast<int>(unit_.cols()); }
  // True when item i has a vector. REQUIRES 0 <= i < num_items().
  bool HasVector(int32_t i) const { return valid_[static_cast<size_t>(i)]; }

  // The score of every item for the query items (num_items() entries in
  // `scores`; items without a vector get NaN). InvalidArgument for an empty
  // query or an index outside [0, num_items); FailedPrecondition when no
  // query item has a vector (query items without one are otherwise left
  // out of the mean). REQUIRES scratch not null.
  absl::Status Score(absl::Span<const int32_t> query,
                     std::vector<float>* scores, SimilarScratch* scratch) const;

  // Score in two steps, for scoring several queries in one pass over the
  // item vectors (NeighbourLists): QueryVector writes the query's vector
  // (dims() floats; errors as Score), ScoreVectors the scores of B such
  // vectors (out[b]: num_items() floats). Each out[b] is exactly what Score
  // gives for that query alone, whatever B (kernels::MatVecRows).
  absl::Status QueryVector(absl::Span<const int32_t> query, float* h) const;
  void ScoreVectors(const float* const* h, float* const* out, int B) const;

 private:
  // kRatedConditional: unit_ holds the rated RBM's W (m x F), bias_
  // b_j - lift * (the logit of j with nothing rated), hidden_bias_ c.
  static absl::StatusOr<ItemSimilarity> Conditional(const Model& model,
                                                    float lift);

  RowMatrixXf unit_;               // m x D, unit rows (zero where !valid_)
  std::vector<float> popularity_;  // b log(1 + n_j); 0 for the conditional
  std::vector<uint8_t> valid_;     // item has a vector
  bool conditional_ = false;
  std::vector<float> bias_;      // per item, kRatedConditional
  Eigen::VectorXf hidden_bias_;  // F, kRatedConditional
};

// The request.n items most similar to the query items (model indices), best
// first, ties by item index; fewer when fewer items qualify. Never returns a
// query item, an excluded or disallowed item, or an item without a vector.
// A query item given twice counts twice (in the mean cosine, or as a user's
// rating in the conditional).
// Errors as ItemSimilarity::Score, and InvalidArgument for n < 1 or an
// `allowed` of the wrong size. Thread-safe with one scratch per thread.
absl::StatusOr<std::vector<SimilarItem>> SimilarItems(
    const ItemSimilarity& index, absl::Span<const int32_t> query,
    const SimilarRequest& request, SimilarScratch* scratch);

// Every item's nearest neighbours, precomputed once per index: for each item
// q with a vector, the `length` best other items for the query {q}, best
// first (ties by index), with the scores Score({q}) gives them, bit for bit.
// A single-item query is then answered from q's list when the filters leave
// n of its items (or the list holds every item with a score): the result is
// exactly SimilarItems' (every item off the list ranks below all of the
// list's). Otherwise the caller scores every item. Memory: num_items() x
// length x 8 bytes (3 MB at ML-1M with length 100); building costs one
// Score per item (in passes of 8 over the vectors). Immutable after Build;
// thread-safe.
class NeighbourLists {
 public:
  static constexpr int kDefaultLength = 100;

  // The lists of `index` (length >= 1). `stop` (optional) is read between
  // passes: when it becomes true, Build gives up and returns nullopt.
  static std::optional<NeighbourLists> Build(
      const ItemSimilarity& index, int length,
      const std::atomic<bool>* stop = nullptr);

  int32_t num_items() const { return static_cast<int32_t>(count_.size()); }
  int length() const { return length_; }
  // The bytes the lists hold.
  size_t bytes() const {
    return entries_.size() * sizeof(SimilarItem) +
           count_.size() * sizeof(int32_t);
  }

  // SimilarItems(index, {q}, request) from q's list: true with *out set when
  // the list decides the answer; false when the caller must score every
  // item (q outside the lists or without a vector, n < 1, an `allowed` of
  // the wrong size, or filters that leave fewer than n of a partial list).
  bool Answer(int32_t q, const SimilarRequest& request, SimilarScratch* scratch,
              std::vector<SimilarItem>* out) const;

 private:
  int length_ = 0;
  std::vector<int32_t> count_;        // per item: entries in its list
  std::vector<SimilarItem> entries_;  // item q's at q * length_
};

// SimilarItems, answered from `lists` (built from `index`; may be null)
// where NeighbourLists::Answer can; the same result either way.
absl::StatusOr<std::vector<SimilarItem>> SimilarItems(
    const ItemSimilarity& index, const NeighbourLists* lists,
    absl::Span<const int32_t> query, const SimilarRequest& request,
    SimilarScratch* scratch);

// The exact top n of any item scores under a request's filters: the
// request.n best items i with finite scores[i], not in request.excluded and
// allowed, best first, ties by index (the selection SimilarItems makes;
// also for baselines such as rbmrec-eval's). InvalidArgument for n < 1 or an
// `allowed` of the wrong size. REQUIRES scratch not null.
absl::StatusOr<std::vector<SimilarItem>> TopScoredItems(
    absl::Span<const float> scores, const SimilarRequest& request,
    SimilarScratch* scratch);

}  // namespace rbmrec

#endif  // RBMREC_CORE_SIMILAR_H_
