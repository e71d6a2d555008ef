#ifndef RBMREC_CORE_MODEL_H_
#define RBMREC_CORE_MODEL_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/id_map.h"
#include "core/item_regression.h"
#include "core/low_rank.h"
#include "core/mf.h"
#include "core/rating_scale.h"
#include "core/ratings.h"
#include "core/rbm.h"
#include "core/train_options.h"

namespace rbmrec {

// A user's ratings in model item indices. Items unknown to the model must be
// left out by the caller.
struct UserRatings {
  std::vector<int32_t> items;
  std::vector<uint8_t> ks;
  VisibleSet view() const {
    return VisibleSet{items.data(), ks.data(),
                      static_cast<int64_t>(items.size())};
  }
};

// Summary of the training run that produced a model (stored in the file).
struct TrainingSummary {
  int32_t epochs_run = 0;
  int32_t best_epoch = 0;
  double valid_rmse = 0;  // of the served prediction, on the validation part
  int64_t train_ratings = 0;
  double train_seconds = 0;
  int64_t rating_epochs = 0;  // sum over all RBMs of ratings x epochs run
  // The rated RBM (core/rated_rbm.h): epochs run, the best epoch's
  // validation NDCG (-1 without validation data) and its wall time
  // (included in train_seconds).
  int32_t rated_epochs = 0;
  double rated_valid_ndcg = 0;
  double rated_seconds = 0;
  // The item regression's fit (core/item_regression.h; included in
  // train_seconds).
  double item_regression_seconds = 0;
  // The matrix factorisation's training and blend fit (core/mf.h; included
  // in train_seconds; 0 when the model has none).
  double mf_seconds = 0;
};

struct OnlineOptions;  // core/online.h

// Everything a trained model consists of: what FitModel produces, what the
// model file stores (core/model_file.h) and what the online functions
// (core/online.h) edit. A plain value type with no invariants of its own;
// Model checks nothing either, so builders keep the shapes consistent:
// members and item_rbm over the same K, item_hist num_items*K, item_x and
// item_in_irbm one row/entry per item when item_rbm.F > 0.
struct ModelParams {
  RatingScale scale;
  IdMap users;  // users seen in training (for offline evaluation)
  IdMap items;  // item id <-> index of the RBM's visible units
  TrainOptions options;
  TrainingSummary summary;
  std::vector<RbmParams> members;   // user-based RBMs (U-RBM), averaged
  std::vector<uint32_t> item_hist;  // m*K counts of training ratings

  // Item-based RBM (I-RBM): the visible units are the training users (the
  // `users` indices) and each item is one training case over the users who
  // rated it. For a training user u and an item q the served distribution is
  //   p = user_weight * p_U(v_q | V_u) + (1 - user_weight) * p_I(v_u | V_q),
  // V_q being q's ratings at training time, kept as the I-RBM hidden input
  // item_x.row(q). Users the I-RBM does not know (new users folded in) and
  // items without I-RBM data get p_U alone. F = 0 when not trained.
  // The weight depends on how much each RBM knows (Model::UserWeight):
  //   w = clamp(user_weight + user_weight_per_log_user * log(1 + n_u)
  //             + user_weight_per_log_item * log(1 + n_q), 0, 1),
  // n_u the user's ratings given, n_q the item's training ratings
  // (item_hist); all three fitted on validation data (slopes 0: one global
  // weight, as in model files before format version 3).
  RbmParams item_rbm;
  RowMatrixXf item_x;                 // num_items x item_rbm.F
  std::vector<uint8_t> item_in_irbm;  // 1 where item_x's row is valid
  float user_weight = 1.0f;
  float user_weight_per_log_user = 0.0f;
  float user_weight_per_log_item = 0.0f;

  // The "which items does a user rate" RBM (core/rated_rbm.h): K = 1, one
  // visible unit per item (num_items == items.size()); F = 0 when not
  // trained. Used by Recommend's p(rated) rankings (core/recommend.h).
  RbmParams rated_rbm;

  // The item regression (core/item_regression.h) over its columns: the
  // first item_regression->items items, or the items item_of names; null
  // when not fitted. Shared and never edited in place: copies of the
  // parameters share it (it is columns^2 floats), and an edit (erasure)
  // makes a new one.
  std::shared_ptr<const ItemRegression> item_regression;

  // The matrix factorisation blended into the served distribution
  // (core/mf.h); empty when not trained. For an item it serves, the
  // distribution above (U/I mix) is tilted (TiltToMean) to the mean
  // mf.intercept + mf.rbm_weight * E + mf.mf_weight * p_u . q_i, E its own
  // mean and p_u the user's factor folded in from their ratings.
  MfParams mf;
};

// A trained model ready to serve: built from ModelParams and immutable
// afterwards (only the online functions of core/online.h, which keep its
// derived state in step, edit a Model, and only one that is not published
// yet). All const methods are thread-safe.
//
// Prediction for (user V, item q):
//   * q known to the model and trained on (item_count(q) > 0): the RBM's
//     distribution p(v_q | V) by the exact rule or mean field, averaged over
//     the ensemble members. V may be empty (a user with no ratings).
//   * Fallback (q unknown or never rated in training), documented: the
//     user's own rating histogram when V is non-empty (its expectation is
//     the user's mean), else the global training histogram (global mean).
//   * Evaluation tools (rbmrec-eval) also use the item's histogram (item
//     mean) for a user with no training ratings, as the benchmark protocol
//     says; see ItemHistogram().
class Model {
 public:
  // Buffers of MixItemRbm and PredictWith, owned by one thread and passed
  // explicitly. Not thread-safe.
  struct Scratch {
    RowMatrixXf logits;
    std::vector<float> x, h, probs, fallback;
    ExpInput exp_in;
  };

  // Whether a model keeps exp(W) tables (member_exp, item_rbm_exp).
  enum class ExpTables {
    kBySizeRule,  // as ExpTableWanted decides: what serving builds
    kNone,        // never: a model read once (e.g. for a validation pass)
  };

  Model() = default;
  // Takes the parameters and derives the serving state (item_hT; the exp
  // tables as `tables` says). Predictions are the same either way up to
  // rounding: without a table the exact rule takes SoftplusSum.
  explicit Model(ModelParams params, ExpTables tables = ExpTables::kBySizeRule);

  const ModelParams& params() const { return p_; }
  // The parameters, moved out (e.g. to edit and build a new Model).
  ModelParams TakeParams() && { return std::move(p_); }

  const RatingScale& scale() const { return p_.scale; }
  const IdMap& users() const { return p_.users; }
  const IdMap& items() const { return p_.items; }
  const TrainOptions& options() const { return p_.options; }
  const TrainingSummary& summary() const { return p_.summary; }
  const std::vector<RbmParams>& members() const { return p_.members; }
  const std::vector<uint32_t>& item_hist() const { return p_.item_hist; }
  const RbmParams& item_rbm() const { return p_.item_rbm; }
  const RowMatrixXf& item_x() const { return p_.item_x; }
  const std::vector<uint8_t>& item_in_irbm() const { return p_.item_in_irbm; }
  // The U/I mixing weight w (ModelParams) for a user who gave n_user
  // ratings and item i. REQUIRES 0 <= i < num_items().
  float UserWeight(int64_t n_user, int32_t i) const {
    const float w =
        item_weight_[static_cast<size_t>(i)] +
        p_.user_weight_per_log_user * std::log1p(static_cast<float>(n_user));
    return std::clamp(w, 0.0f, 1.0f);
  }
  const RbmParams& rated_rbm() const { return p_.rated_rbm; }
  // The rated RBM's W in half precision (num_items x F, row-major), what
  // serving multiplies by (SharedMatVecHalf: half the bytes of the floats);
  // nullptr in builds without F16C (x86-64-v3) or without the rated RBM.
  // Always in step with rated_rbm().W.
  const uint16_t* rated_w_half() const {
    return rated_w_half_.empty() ? nullptr : rated_w_half_.data();
  }
  // The rated RBM's W as U V^T (core/low_rank.h) when it has low rank (the
  // rated trainer factors it), what serving's p(rated) logits multiply by
  // then instead of rated_w_half(); empty otherwise. Always in step with
  // rated_rbm().W; when non-empty, rated_w_half() is nullptr.
  const LowRankRows& rated_low_rank() const { return rated_low_rank_; }
  // exp(W) of user-based member e and of the I-RBM (ExpWeights in
  // core/rbm.h), what exact predictions read instead of an exp per weight;
  // empty for an RBM whose table ExpTableWanted refuses (its exact
  // predictions then take SoftplusSum). Always in step with the weights.
  const ExpWeights& member_exp(size_t e) const { return member_exp_[e]; }
  const ExpWeights& item_rbm_exp() const { return item_rbm_exp_; }
  // The size rule of those tables: a table of `bytes` (its W's) is kept
  // when it takes at most 64 MiB or 16 bytes a training rating (the sum of
  // item_hist), whichever is more, and never more than 512 MiB. A table
  // doubles its W, and the I-RBM's W grows with the users: at 10 M ratings
  // of 60,000 users it is 240 MB more in the served model, 24 bytes a
  // rating (docs/scaling.md); ML-1M's tables (15 and 24 MB) are kept. Pure.
  static bool ExpTableWanted(int64_t bytes, int64_t ratings);
  // SetExpInput of item i's I-RBM input item_x.row(i), kept per item (the
  // I-RBM scores the same item for every user), its saturated units
  // included. Always in step with item_x.
  // REQUIRES 0 <= i < item_x().rows().
  ExpInputView ItemExpInput(int32_t i) const {
    const std::vector<int32_t>& hi = item_hi_[static_cast<size_t>(i)];
    return {item_ex_.row(i).data(), hi.data(), static_cast<int32_t>(hi.size()),
            item_hi_sum_[static_cast<size_t>(i)]};
  }

  // True when the model has the item regression (items added online after
  // its fit, and items outside its columns, score 0 in it).
  bool HasItemRegression() const {
    return p_.item_regression != nullptr && !p_.item_regression->empty() &&
           p_.item_regression->ItemOf(p_.item_regression->items - 1) <
               num_items();
  }
  // REQUIRES HasItemRegression().
  const ItemRegression& item_regression() const { return *p_.item_regression; }
  // True when the model blends the matrix factorisation in (ModelParams::mf).
  bool HasMf() const { return !p_.mf.empty(); }
  // The user's factorisation factor (FoldInUser) and its flag, 1 when it
  // used a rating (mf.factors + 1 floats into out): MemberInputs' part at
  // MfInputOffset(). REQUIRES HasMf().
  void MfInput(const VisibleSet& v, float* out) const;
  // Offset of the user's factorisation factor in MemberInputs' output.
  size_t MfInputOffset() const {
    size_t total = 0;
    for (const RbmParams& p : p_.members) total += static_cast<size_t>(p.F);
    return total;
  }
  // The factorisation's blend for item i (REQUIRES HasMf(), 0 <= i <
  // num_items()): tilts the K probabilities in `probs` (the RBMs' served
  // distribution) to the blended mean, given the user's factor `mf_x`
  // (MemberInputs' part at MfInputOffset()). Items it does not serve
  // (MfParams::Serves), and every item for a user whose factor used no
  // rating, are left as they are.
  void BlendMf(int32_t i, const float* mf_x, float* probs) const;
  // True when the model has the rated RBM (p(rated) rankings available).
  bool HasRatedRbm() const {
    return p_.rated_rbm.F > 0 && p_.rated_rbm.num_items == num_items();
  }
  // sigmoid(item_x) transposed: item_hT(j, i) = sigmoid(item_x(i, j)), the
  // I-RBM's mean-field hidden probabilities of item i in column i (F x
  // num_items, so all-item scoring runs over items in SIMD lanes). Always in
  // step with item_x.
  const RowMatrixXf& item_hT() const { return item_hT_; }

  // True when the I-RBM part applies to model user u and item i.
  bool UsesItemRbm(int32_t user, int32_t item) const {
    return ItemRbmServes(user) && item >= 0 &&
           item < static_cast<int32_t>(p_.item_in_irbm.size()) &&
           p_.item_in_irbm[static_cast<size_t>(item)] != 0;
  }
  // True when the I-RBM part applies to model user u for some items.
  bool ItemRbmServes(int32_t user) const {
    return p_.item_rbm.F > 0 && user >= 0 && user < p_.item_rbm.num_items &&
           (p_.user_weight < 1.0f || p_.user_weight_per_log_user != 0.0f ||
            p_.user_weight_per_log_item != 0.0f);
  }
  // The I-RBM's mean-field logits of every item for model user u:
  // logits(i, k) = b_I[u, k] + sum_j W_I[u, k, j] * sigmoid(item_x(i, j))
  // (num_items() x K, row-major), items in SIMD lanes over item_hT.
  // REQUIRES ItemRbmServes(user).
  void ItemRbmMeanFieldLogits(int32_t user, RowMatrixXf* logits) const;

  int K() const { return p_.scale.K(); }
  int32_t num_items() const { return p_.items.size(); }
  // Training ratings of item i. REQUIRES 0 <= i < num_items().
  uint32_t ItemCount(int32_t i) const;
  // True when item i has parameters trained on data.
  bool Trained(int32_t i) const {
    return i >= 0 && i < num_items() && ItemCount(i) > 0;
  }

  // Distributions for `query` items (model indices, or -1 for unknown) given
  // the user's ratings; out has query.size()*K entries, each row summing to
  // 1. fallback[q] (if non-null, size query.size()) tells which rows are the
  // fallback. Never produces NaN.
  // `user` is the user's index in `users` (the I-RBM's visible unit), or -1
  // for a user the model was not trained on (U-RBM fold-in alone).
  void Predict(int32_t user, const VisibleSet& v,
               absl::Span<const int32_t> query, PredictMethod method,
               float* out, std::vector<bool>* fallback) const;
  // HiddenInput(member, v) of every member, one after the other (the sum of
  // the members' F floats), then, when HasMf(), the user's factorisation
  // factor (FoldInUser, mf.factors floats) and 1 when it used a rating (0:
  // the start alone, not blended): the part of Predict that depends on the
  // user's ratings alone, for callers that keep it per user.
  // `mf_part` (optional): the factorisation's part (MfInputSize() floats)
  // copied from it instead of folded in again (~30 passes over the
  // ratings). REQUIRES it is that part of MemberInputs(v) of a model with
  // the same MfFingerprint() (e.g. the snapshot before an online update)
  // and the same ratings (items and values of v).
  void MemberInputs(const VisibleSet& v, std::vector<float>* x,
                    const float* mf_part = nullptr) const;
  // The floats of the factorisation's part of MemberInputs (factors + 1;
  // 0 without one).
  size_t MfInputSize() const {
    return HasMf() ? static_cast<size_t>(p_.mf.factors) + 1 : 0;
  }
  // Equal for two models whose factorisations fold the same ratings (model
  // indices and values) in to the same factor: a hash of the item factors,
  // their trained flags, the fold-in's settings and the rating scale,
  // computed when the model is built (copies keep it; online updates do not
  // change the factorisation). 0 without a factorisation.
  uint64_t MfFingerprint() const { return mf_fingerprint_; }
  // Predict with member_x = MemberInputs(v) computed beforehand and the
  // buffers in `scratch`: bit for bit Predict's result, without allocations
  // once the scratch has grown.
  void PredictWith(int32_t user, const VisibleSet& v, const float* member_x,
                   absl::Span<const int32_t> query, PredictMethod method,
                   float* out, std::vector<bool>* fallback,
                   Scratch* scratch) const;
  // Same with user = -1.
  void Predict(const VisibleSet& v, absl::Span<const int32_t> query,
               PredictMethod method, float* out,
               std::vector<bool>* fallback) const {
    Predict(-1, v, query, method, out, fallback);
  }

  // Mixes the I-RBM part into `out` (num_items() x K distributions of the
  // user-based part): row i becomes w*row + (1-w)*p_I, w =
  // UserWeight(n_user, i), for every item where UsesItemRbm(user, i). Used by
  // the all-item scorers (core/scoring.h); n_user = the user's ratings given.
  void MixItemRbm(int32_t user, int64_t n_user, PredictMethod method,
                  RowMatrixXf* out, Scratch* scratch) const;

  // Expected rating of a distribution of K probabilities.
  double Expectation(const float* probs) const;

  // The fallback distribution for a user with ratings v (K entries).
  void FallbackDistribution(const VisibleSet& v, float* out) const;
  // The item's training histogram, normalised (K entries).
  // REQUIRES Trained(i).
  void ItemHistogram(int32_t i, float* out) const;

 private:
  // The online functions edit a Model that is not published yet and keep
  // item_hT_, item_weight_, the rated RBM's serving form and the exp
  // tables in step with
  // what they change.
  friend int AddItems(Model* model, const std::vector<std::string>& item_ids,
                      uint64_t seed);
  friend void OnlineUserUpdate(Model* model, const VisibleSet& v,
                               const OnlineOptions& options, uint64_t user_key);
  friend void AdjustHistogram(Model* model, int32_t item, int k, int delta);
  friend void AdjustItemInput(Model* model, int32_t user, int32_t item, int k,
                              int delta);
  friend bool EraseUser(Model* model, std::string_view user_id,
                        const VisibleSet& ratings);
  friend void CopyItemState(const Model& src, const std::vector<int32_t>& items,
                            Model* dst);

  // item_hT_ = sigmoid(item_x)^T, and every row of item_ex_.
  void RefreshItemHidden();
  // ItemExpInput's tables for items [from, to) (every item when item_x's
  // shape changed).
  void RefreshItemExp(int32_t from, int32_t to);
  // item_weight_ resized to num_items(), entries [from, to) recomputed.
  void RefreshItemWeights(int32_t from, int32_t to);
  // rated_low_rank_ (when built) or else rated_w_half_ from rated_rbm.W,
  // rows [from, to) and any rows W gained.
  void RefreshRatedForm(int32_t from, int32_t to);
  // member_exp_[e] (e >= 0) or item_rbm_exp_ (e = -1) from that RBM's W,
  // rows [from, to) (all rows when the shape changed or the table was
  // empty; none, the table emptied, when ExpTableWanted refuses it for the
  // training ratings item_hist counts now).
  void RefreshExp(int e, int64_t from, int64_t to);

  ModelParams p_;
  RowMatrixXf item_hT_;
  // The item's part of UserWeight: user_weight + user_weight_per_log_item *
  // log(1 + ItemCount(i)), one per item.
  std::vector<float> item_weight_;
  std::vector<uint16_t> rated_w_half_;  // see rated_w_half()
  LowRankRows rated_low_rank_;          // see rated_low_rank()
  // False: no exp tables at all (ExpTables::kNone).
  bool exp_tables_ = true;
  uint64_t mf_fingerprint_ = 0;
  std::vector<ExpWeights> member_exp_;  // see member_exp()
  ExpWeights item_rbm_exp_;             // see item_rbm_exp()
  // ItemExpInput(i): item_ex_.row(i), item_hi_[i] and item_hi_sum_[i].
  RowMatrixXf item_ex_;
  std::vector<std::vector<int32_t>> item_hi_;
  std::vector<double> item_hi_sum_;
};

// Builds the item histogram from training ratings (rows users, cols items).
std::vector<uint32_t> ItemHistogramCounts(const SparseRatings& by_user, int K);

// The items with training data (Model::Trained), most training ratings
// first, ties by item id: the most-popular list (the cold-start fallback's
// ranking, and rbmrec-eval's popularity anchor).
std::vector<int32_t> MostRatedItems(const Model& model);

}  // namespace rbmrec

#endif  // RBMREC_CORE_MODEL_H_
