#ifndef RBMREC_CORE_CD_TRAINER_H_
#define RBMREC_CORE_CD_TRAINER_H_

// CdTrainer, the contrastive-divergence engine behind TrainRbmSplit
// (core/trainer.h), internal to core/. One class whose members live in
// files by what they do:
//   core/cd_trainer.cc     construction (initial weights), one epoch over
//                          the seeded order of users, W = A B (factored),
//                          and the mini-batch's index (IndexBatch);
//   core/cd_chains.cc      the Gibbs chains: positive phase and CD-T
//                          negative phase, plain (BatchChains) and
//                          factored (FactoredChains);
//   core/cd_update.cc      the parameter update of a mini-batch (momentum,
//                          weight decay, ordinal sharing);
//   core/cd_validation.cc  the validation RMSE, exact (ExactValidation's
//                          exponential products) or mean-field, of the
//                          parameters or their running average.
// The epoch driver (early stopping, averaging, CD schedule) is
// TrainRbmSplit in core/trainer.cc. Every result is the same bits at any
// thread count.

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/ratings.h"
#include "core/rbm.h"
#include "core/rng.h"
#include "core/thread_pool.h"
#include "core/train_options.h"

namespace rbmrec {
namespace internal {

// The mini-batch loops of the factored trainer (the chains, the update) are
// split into this many cost-balanced pieces per thread, claimed as the
// threads finish (ThreadPool::ParallelFor): the per-piece costs are
// estimates, and a 2-thread profile of rbmrec-cd-bench with one static
// chunk per thread had the threads waiting for each other ~10% of the time.
constexpr int kPiecesPerThread = 4;

// ExactValidation goes over the validation cases in chunks, so that their
// hidden inputs' exponentials (and inputs, when not kept) take at most this
// many bytes each, not cases x F floats (a U-RBM's 60,000 users x 200
// units: 48 MB), and are freed after the pass. Every item's K rows are
// exponentiated once per chunk; one chunk up to ~10,000 cases of 200 units.
constexpr int64_t kExpChunkBytes = int64_t{8} << 20;

inline VisibleSet RowOf(const SparseRatings& s, int32_t u) {
  VisibleSet v;
  v.items = s.col.data() + s.offsets[u];
  v.ks = s.k.data() + s.offsets[u];
  v.n = s.RowSize(u);
  return v;
}

// Scratch buffers owned by one worker: the Gibbs chain's, a hidden input
// (validation), one item's K gradient rows of `width` floats (Update) and a
// C-vector (the factored chains' B h).
struct Scratch : GibbsScratch {
  Eigen::VectorXf x, z;
  RowMatrixXf ew;  // ExactValidation: exp of an item's K rows of W
  // ExactValidation per row k: exp(b_k - max b), the product's mantissa,
  // its exponent and the log of the row's term.
  std::vector<double> eb, em, el;
  std::vector<int64_t> ee;
  std::vector<float> grad;
  std::vector<const float*> rows;  // a case's rows of A (factored chains)
  std::vector<float> gd;           // ConditionalStep: an item's D gradient
  // The chains' expected reconstructions, and uniforms (BatchChains).
  std::vector<double> means;
  std::vector<float> uniforms;
  // CandidateValidationRmse: a block of the candidate average's rows, its
  // A B product, and one item's K rows and biases as a one-item RbmParams.
  RowMatrixXf block, wt;
  RbmParams one;
  Scratch(int F, int K, int width, int C)
      : GibbsScratch(F, K),
        x(F),
        z(std::max(C, 1)),
        eb(static_cast<size_t>(K)),
        em(static_cast<size_t>(K)),
        el(static_cast<size_t>(K)),
        ee(static_cast<size_t>(K)),
        grad(static_cast<size_t>(width) * K),
        gd(static_cast<size_t>(F)) {}
};

class CdTrainer {
 public:
  // A pool of `pool_threads` workers, of which the first `threads` are
  // used until SetThreads says otherwise. With o.conditional the RBM is
  // conditional (D, zero at the start), each case's set r being its
  // training items plus its row of `extra` (rows and cols as train's;
  // nullptr: none), which must outlive the trainer. `valid_by_item`, when
  // not null, is valid.Transpose() (outliving the trainer too), read
  // instead of a copy of the trainer's own.
  CdTrainer(const SparseRatings& train, const SparseRatings& valid, int K,
            const TrainOptions& o, int threads, int pool_threads,
            const SparseRatings* extra = nullptr,
            const SparseRatings* valid_by_item = nullptr);

  // The trained parameters. Factored with parameter averaging
  // (TrainOptions::average > 0) W is left empty: only the average is
  // served and validated, and Average builds it from A and B block by
  // block, so no full-size W is held beside the average and the best copy.
  RbmParams& params() { return p_; }
  // The running average of the parameters (TrainOptions::average) after an
  // epoch: *avg = a * *avg + (1 - a) * params, or params itself when
  // `first`. Factored without W, each block of FactorRows() rows of A B is
  // made in a thread's scratch and averaged in (AveragedRows): the same
  // bits as averaging the full W, at any thread count.
  void Average(float a, bool first, RbmParams* avg);

  // Whether CandidateValidationRmse can validate the next average before it
  // is made: factored with averaging (no W kept), exact validation, and
  // validation ratings. TrainRbmSplit then keeps no best copy while the
  // average is the best (only when an epoch's average is worse).
  bool ValidatesCandidates() const {
    return !keep_w_ && o_.predict == PredictMethod::kExact && valid_.nnz() > 0;
  }
  // The validation RMSE that AveragedValidationRmse(avg, a, false) would
  // return after Average(a, false, &avg), computed without changing avg:
  // the candidate average's rows are made block by block as Average makes
  // them (AveragedRows, the same bits) in a thread's scratch and validated
  // there. Updates the averaged hidden inputs (x_avg_) as that call does,
  // so Average(a, false, &avg) must follow before the next epoch.
  // REQUIRES: ValidatesCandidates(), an Average(a, true, &avg) before.
  double CandidateValidationRmse(const RbmParams& avg, float a);
  // The bytes of one chunk of ExactValidation (kExpChunkBytes unless set;
  // tests set less). Results do not depend on it.
  void SetExpChunkBytes(int64_t bytes) { exp_chunk_bytes_ = bytes; }
  // Threads used from the next parallel loop on (at most the pool's size).
  // Results do not depend on it.
  void SetThreads(int threads) { pool_.SetWidth(threads); }

  // One epoch of CD-T over all users in a seeded order; returns the
  // reconstruction RMSE of the training ratings.
  double Epoch(int epoch, int cd_steps, float lr);

  // W = A B (factored), over the pool in blocks of FactorRows() rows of A:
  // each block is the same product whichever thread computes it and however
  // many there are, so W's bits do not depend on the thread count. (Alone
  // at the end of each epoch it was ~5% of a 2-thread epoch of
  // rbmrec-cd-bench, one thread computing while the other waited.)
  void MultiplyFactors();

  // RMSE of predicted expectations on the validation ratings.
  double ValidationRmse(const RbmParams& p);

  // ValidationRmse(avg) for the running average of the parameters
  // (TrainOptions::average) after this epoch's avg = a * avg + (1 - a) *
  // params (avg = params after the first epoch, `first`). The hidden input
  // is affine in the parameters, so the average's is the same running
  // average of the raw parameters' inputs; factored, those cost ~C per
  // rating plus a C x F product per case (c + (A^T v) B) instead of F per
  // rating, and the average's inputs are kept (x_avg_) instead of summed
  // from avg's rows every epoch: about half of the validation pass's work.
  // The same model and RMSE up to rounding. Unfactored: ValidationRmse.
  double AveragedValidationRmse(const RbmParams& avg, float a, bool first);

  // The RMSE of `p`'s predictions on the validation ratings, with
  // input(u, x) writing case u's hidden input into x[0..F).
  template <typename Input>
  double ValidationPass(const RbmParams& p, const Input& input);

  // The expected rating index of a validation rating of the item with rows
  // row0.. and user u under `p`: from PredictExact's probabilities
  // (SlowMean), or (ExpMean, for users and rows within the exponentials'
  // limits) without a log or an exp per row: p_k is proportional to
  // exp(b_k) prod_j (1 + ex_j ew_kj), i.e. sc->eb[k] = exp(b_k - b_top)
  // times SoftplusProductFromExp's mantissa m_k and 2^(e_k - max e). When
  // a term could underflow (log of it below -700) or the user is saturated
  // (a factor exp(hi . w_k) more, SplitSaturated), the terms are
  // exp(l_k - max l) m_k with l_k = b_k + (e_k - max e) log 2 (+ hi . w_k).
  double SlowMean(const RbmParams& p, int32_t item, const float* x,
                  float* probs) const;

  double ExpMean(const RbmParams& p, int64_t row0, int32_t u, uint8_t mode,
                 double b_top, Scratch* sc) const;

  // ValidationPass with exact predictions (PredictExact's arithmetic), item
  // by item: every validation rating of item i needs its K rows' softplus
  // sums against its user's hidden input, sum_j log(1 + exp(x_j + w_j)).
  // With exp(x) per user and exp(w) per row computed once, each of those
  // is SoftplusSumFromExp's product instead of F exponentials: first each
  // user's input and its exponentials (xv_, ex_), then each item's K rows'
  // exponentials in the thread's scratch and its ratings. A user with
  // inputs beyond kExpSoftplusLimit (a heavy user's often are) keeps the
  // product through SplitSaturated for rows within kSaturatedRowLimit: its
  // saturated units' exponentials are 0 and the sum of their row entries
  // (hi_ . w) is added. A user with a non-finite input, or a row beyond
  // the limits, takes SoftplusSum instead (ExpMean, SlowMean). The squared
  // errors are summed per item, then in item order: the same bits at any
  // thread count. With `inputs` (rows the cases) the hidden inputs are
  // read from it instead of written by `input` into xv_.
  template <typename Input>
  double ExactValidation(const RbmParams& p, const Input& input,
                         const RowMatrixXf* inputs = nullptr);

 private:
  // The rows of a block of the factored average and of its candidate:
  // FactorRows() rows (fewer in the last block), a whole number of items
  // and of Eigen's 24-row kernels, so the same blocks whichever thread
  // makes them.
  Eigen::Index FactorRows() const;
  // dst[0 .. n F) = a * avg's rows [r0, r0 + n) + (1 - a) * the same rows
  // of A B (made in *wt). dst may be avg's own rows (Average) or a scratch
  // block (CandidateValidationRmse): one function, so the same bits.
  void AveragedRows(const RbmParams& avg, float a, Eigen::Index r0,
                    Eigen::Index n, RowMatrixXf* wt, float* dst) const;
  // AveragedValidationRmse's running average of the hidden inputs x_avg_.
  void AverageInputs(float a, bool first);
  // The cases of one of ExactValidation's chunks (exp_chunk_bytes_).
  int32_t ExpChunk() const;
  // A validation pass's start: every case kExpSlow, every item's cursor
  // (valid_cursor_) at its first validation rating.
  void BeginExactPass();
  // ExactValidation's per-chunk part, for cases [u0, u1): each case's hidden
  // input (from `input` into xv_, or read from `inputs`), its exponentials
  // (ex_ row u - u0, ex_mode_) and the saturated cases' rows (hi_).
  template <typename Input>
  void HiddenExponentials(const Input& input, const RowMatrixXf* inputs,
                          int32_t u0, int32_t u1);
  // Case u's hidden input in the current chunk.
  const float* InputRow(const RowMatrixXf* inputs, int32_t u) const {
    return inputs != nullptr ? inputs->row(u).data()
                             : xv_.row(u - ex_base_).data();
  }
  // Whether `item` has validation ratings of cases below u1 not yet done.
  bool ItemInChunk(int32_t item, int32_t u1) const {
    const int64_t r = valid_cursor_[static_cast<size_t>(item)];
    return r < valid_by_item_.offsets[item + 1] &&
           valid_by_item_.col[static_cast<size_t>(r)] < u1;
  }
  // ExactValidation's squared errors of the validation ratings of `item`
  // (a row of valid_by_item_) by cases below u1 from its cursor on, added
  // to *err in rating order (so a pass in chunks sums the same terms in the
  // same order as one pass), the cursor moved past them. The item's K
  // rows are p's rows of `item_in_p` (the item itself, or 0 in a one-item
  // RbmParams).
  void ItemError(const RbmParams& p, int32_t item_in_p, int32_t item,
                 const RowMatrixXf* inputs, int32_t u1, Scratch* s,
                 double* err);

  // The batch's index, shared by both chains and both updates: each batch
  // user's first batch-local rating position (local_start_), the batch's
  // items in increasing id order (batch_items_) and its ratings by item
  // (entries_[entry_start_[t] ..) for batch item t, in batch order), the
  // items' costs for the item-parallel loops and the users' random streams.
  void IndexBatch(int epoch, const int32_t* users, size_t nb);

  // IndexBatch's per-user part (all the chains need): local_start_, the
  // random streams and room for the uniforms.
  void IndexUsers(int epoch, const int32_t* users, size_t nb);

  // IndexBatch's per-item part (REQUIRES IndexUsers of the same batch):
  // batch_items_, entries_, entry_start_, entry_of_ and item_cost_.
  void IndexItems(const int32_t* users, size_t nb);

  // The uniforms of batch user s: F for the hidden sample, then one per
  // rating (at local_start_[s] past the hidden ones).
  float* HiddenUniforms(size_t s) {
    return uniforms_.data() + s * static_cast<size_t>(p_.F);
  }
  float* VisibleUniforms(size_t nb, size_t s) {
    return uniforms_.data() + nb * static_cast<size_t>(p_.F) + local_start_[s];
  }
  // Draws batch user s's uniforms for one step from the user's stream and
  // the binary hidden sample hs_ row s from probabilities hp.
  void SampleHidden(size_t nb, size_t s, const float* hp);

  // The CD-T chains of batch users users[0..nb), with exactly CdChain's
  // arithmetic and random draws for every user (so the same bits), into
  // h0_ row s, ht_ row s, vt_ at the user's ratings and sq_err_[s]; but the
  // reconstruction runs item by item: every batch rating of item i is done
  // while item i's K rows of W are in L1, instead of once per rating
  // scattered over W. Per step:
  //   1. per user (parallel): the step's uniforms from the user's own
  //      stream (F for the hidden sample, then one per rating, in rating
  //      order: CdChain's order) and the binary hidden sample hs_;
  //   2. per item (parallel): the logits of each batch rating of the item,
  //      their softmaxes and the visible samples with the ratings' uniforms
  //      (SoftmaxSampleRows: the same bits as one softmax and one
  //      SampleCategorical per rating), and at step 1 the squared error of
  //      the reconstruction's expectation;
  //   3. per user (parallel): ht = sigmoid(c + sum of the sampled rows),
  //      summed in rating order as HiddenInput does.
  void BatchChains(int epoch, const int32_t* users, size_t nb, int cd_steps);

  // BatchChains' step 2 for batch items [b, e) on thread t: the logits of
  // each of their batch ratings, the visible samples (vt_entry_) and, at
  // step 0, the squared errors of the expectations (d2_).
  void ReconstructItems(size_t nb, int step, int t, int64_t b, int64_t e);
  // BatchChains' step 3 for batch users [b, e): their samples into vt_,
  // ht = sigmoid(c + the sampled rows), at step 0 sq_err_, and unless
  // `last` the next hidden sample.
  void RehideUsers(const int32_t* users, size_t nb, int step, bool last,
                   int64_t b, int64_t e);

  // The factored RBM's CD-T chains (TrainOptions::factors, the paper's
  // Eq. 12): W = A B with A (m*K) x C and B C x F, so that
  //   hidden input  c + W^T v = c + B^T (A^T v): C adds per rating, then
  //                 one C x F product per user;
  //   logits        b_i^k + W_i^k . h = b_i^k + A_i^k . (B h): K*C per
  //                 rating after one C x F product per user.
  // Per batch user s (parallel over users; each user's arithmetic and
  // random draws are its own, so the thread count never changes a bit): a0_
  // row s = the sum of A's rows of the user's ratings, h0_ = sigmoid(c + a0
  // B), the hidden sample, then per step the reconstruction (logits, then
  // SoftmaxSampleRows: the visible sample into vt_ and at step 1 the
  // expectations for the squared error), at_ = the sum of A's rows of the
  // sample and ht_ = sigmoid(c + at B); last g0_ = B h0 and gt_ = B hT, the
  // C-vectors that Update adds to A's gradient rows.
  void FactoredChains(int epoch, const int32_t* users, size_t nb, int cd_steps);

  // The step of one batch item under ordinal sharing (TrainOptions::ordinal):
  // the item's rows are W^k = U^0 + ... + U^k (and b^k likewise), and the
  // momentum and weight-decay step is taken on U (kernels::OrdinalRows; the
  // biases take no decay). g holds the item's gradient rows whose bits are
  // set in `touched` (gb the bias gradients). All K rows of the item move: a
  // rating k also pulls the levels above it.
  void OrdinalStep(RowMatrixXf& w, int32_t item, const float* g,
                   const float* gb, const uint64_t* touched, float scale,
                   float decay);

  // Phase B: the update, item by item in parallel (an item's K rows are
  // its own). For batch item i, each of its batch ratings (user s, rating
  // k, sample vt) adds h0[s] to the gradient of row (i, k) and subtracts
  // hT[s] from row (i, vt), in batch order with the positive term first:
  // the order the terms had when they were summed over the whole batch, so
  // the sums are the same bits whatever the thread count. Every row that got
  // a term then takes the momentum + weight-decay step, with its visible
  // bias; rows without a term in this batch keep their weights and velocity
  // (sparse momentum), so the cost follows the batch's ratings, not m*K.
  // Last, the hidden biases. With TrainOptions::ordinal the step is
  // OrdinalStep's instead. The factored RBM steps A's rows the same way
  // with g0_ / gt_ (B h0, B hT: the gradient of W times B^T) in place of
  // h0 / hT, then B with A^T times the gradient of W: the sum over the
  // batch of a0 h0^T - at hT^T, scaled by lr / (the batch's ratings) rather
  // than lr / nb, as every rating adds to it (with lr / nb it moved W so
  // fast that training stalled at the biases' RMSE or diverged on ML-1M).
  void Update(size_t nb, float lr);

  // The conditional RBM's step of D (after Update): for every item in the
  // r of some batch user, the gradient sum over those users, in batch
  // order, of h0 - hT, then W's momentum and weight-decay step (sparse
  // momentum: rows outside the batch's r keep their velocity). Items in
  // parallel, so the same bits at any thread count. Its cost: ~4 F per
  // entry of the batch's r sets, plus their sort.
  void ConditionalStep(const int32_t* users, size_t nb, float lr);

  // Case u's visible set with its extra items (r = both).
  VisibleSet UserSet(int32_t u) const {
    VisibleSet v = RowOf(train_, u);
    if (extra_ != nullptr) {
      v.extra = extra_->col.data() + extra_->offsets[u];
      v.n_extra = extra_->RowSize(u);
    }
    return v;
  }

  // Update's step of B (factored) and of the hidden biases, which no
  // item's step reads or writes: factored, it is the update loop's last
  // piece of work, so it runs beside the items' steps (its cost: ~nb * F /
  // 4 entries' worth).
  void GlobalStep(size_t nb, float lr);
  // Update's step of batch item x (of a thread's range ending at e): its
  // gradient rows summed in g (and gb, the biases') in batch order, then
  // the momentum + weight-decay step of every row with a term, or
  // OrdinalStep.
  void UpdateItem(int64_t x, int64_t e, size_t nb, float lr, float* g,
                  float* gb);

  const SparseRatings& train_;
  const SparseRatings& valid_;
  const TrainOptions& o_;
  const SparseRatings* const extra_;  // the cases' extra items in r, or null
  // TrainOptions::factors: C > 0 trains W = A B (a_ is A, bm_ is B; vel_w_
  // is then A's velocity, and p_.W is set to A B after every epoch).
  const int C_;
  // Whether p_.W is kept (see params()): unfactored, or without averaging.
  const bool keep_w_;
  ThreadPool pool_;
  RbmParams p_;
  RowMatrixXf vel_w_, h0_, ht_, hs_;
  RowMatrixXf a_, bm_, vel_bm_, db_, a0_, at_, g0_, gt_;
  std::vector<float> zeros_;  // C zeros (SumRows' start)
  RowMatrixXf x_avg_;  // AveragedValidationRmse: the average's hidden inputs
  // ExactValidation: the validation ratings by item (the caller's, or
  // own_valid_by_item_), the items' costs, and per case its hidden input,
  // exp of it and whether that is in range.
  SparseRatings own_valid_by_item_;
  const SparseRatings& valid_by_item_;
  std::vector<int64_t> item_cost_valid_;
  // ex_mode_[u]: kExpPlain (ex_ row is exp(x)), kExpSaturated (ex_ and
  // hi_ row hi_slot_[u] from SplitSaturated) or kExpSlow (SoftplusSum).
  enum : uint8_t { kExpSlow, kExpPlain, kExpSaturated };
  // ex_ and xv_ hold the chunk's cases from ex_base_ on; valid_cursor_[i]
  // is item i's next validation rating in the pass.
  RowMatrixXf xv_, ex_, hi_;
  int32_t ex_base_ = 0;
  int64_t exp_chunk_bytes_ = kExpChunkBytes;
  std::vector<uint8_t> ex_mode_;
  std::vector<int32_t> hi_slot_;
  std::vector<int64_t> valid_cursor_;
  std::vector<int64_t> work_cost_;  // cumulative costs of a parallel loop
  Eigen::VectorXf vel_b_, vel_c_, gc_;
  // ConditionalStep: D's velocity, the batch's h0 - hT, its (item, batch
  // position) pairs of r sorted, and the start of each item's run in them.
  RowMatrixXf vel_d_, dh_;
  std::vector<uint64_t> cond_pairs_;
  std::vector<int64_t> cond_start_;
  std::vector<Scratch> scratch_;
  std::vector<uint8_t> vt_;  // the batch's visible samples (at local_start_)
  std::vector<double> sq_err_;
  // BatchChains' state: the batch's items (by id) and each
  // item's slot in that list (-1 outside a batch); the batch's ratings by
  // item (entries_[entry_start_[t] ..) for batch item t, in batch order);
  // each batch user's first batch-local rating position; the users' random
  // streams, the step's uniforms and the squared reconstruction errors.
  struct Entry {
    int32_t s;  // batch position of the user
    uint8_t k;  // the rating (train_.k[r], here so Update need not load it)
    int64_t l;  // batch-local position of the rating (vt_, uniforms)
  };
  std::vector<int32_t> batch_items_, item_slot_;
  std::vector<int32_t> item_count_;  // IndexItems' counts (zero between)
  std::vector<int64_t> entry_start_, entry_fill_, local_start_;
  std::vector<Entry> entries_;
  std::vector<Rng> rngs_;
  std::vector<float> uniforms_;
  // Step 2 writes its samples and squared errors by entry (vt_entry_, d2_:
  // each thread's items are one contiguous range, so the threads never
  // write the same cache line); step 3 copies the samples to the
  // user-major vt_ through entry_of_ (batch-local rating -> entry).
  std::vector<double> d2_;
  std::vector<uint8_t> vt_entry_;
  std::vector<int64_t> entry_of_;
  std::vector<int64_t> item_cost_;  // cumulative cost of the batch's items
};

}  // namespace internal
}  // namespace rbmrec

#endif  // RBMREC_CORE_CD_TRAINER_H_
