// CdTrainer's construction (initial weights and biases, buffers), one
// epoch (the seeded order of users, mini-batch by mini-batch: the chains,
// then the update), W = A B for the factored RBM, and the index of a
// mini-batch's ratings by item that the chains and the update share.

#include "core/cd_trainer.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "core/kernels.h"
#include "core/trainer.h"

namespace rbmrec {
namespace internal {

CdTrainer::CdTrainer(const SparseRatings& train, const SparseRatings& valid,
                     int K, const TrainOptions& o, int threads,
                     int pool_threads, const SparseRatings* extra,
                     const SparseRatings* valid_by_item)
    : train_(train),
      valid_(valid),
      o_(o),
      extra_(extra),
      C_(o.factors > 0 && o.factors < o.hidden ? o.factors : 0),
      keep_w_(C_ == 0 || !(o.average > 0)),
      pool_(std::max(threads, pool_threads)),
      valid_by_item_(valid_by_item != nullptr ? *valid_by_item
                                              : own_valid_by_item_) {
  pool_.SetWidth(threads);
  if (keep_w_) {
    p_.Resize(train.cols, K, o.hidden);
  } else {
    p_.Resize(0, K, o.hidden);  // W stays empty
    p_.num_items = train.cols;
    p_.b.setZero(static_cast<Eigen::Index>(train.cols) * K);
  }
  Rng rng(StreamSeed(o.seed, 0x1417));
  if (C_ > 0) {
    // W = A B with the entries of A and B ~ N(0, s^2), s^2 = init_std /
    // sqrt(C): the entries of W then have W's own init_std.
    const double sd = std::sqrt(o.init_std / std::sqrt(double{1.0} * C_));
    a_.resize(static_cast<Eigen::Index>(p_.num_items) * K, C_);
    bm_.resize(C_, p_.F);
    for (RowMatrixXf* m : {&a_, &bm_}) {
      for (Eigen::Index r = 0; r < m->rows(); ++r) {
        for (Eigen::Index j = 0; j < m->cols(); ++j) {
          (*m)(r, j) = static_cast<float>(rng.Normal() * sd);
        }
      }
    }
    vel_w_.setZero(a_.rows(), C_);  // A's velocity
    vel_bm_.setZero(C_, p_.F);
    zeros_.assign(static_cast<size_t>(C_), 0.0f);
    MultiplyFactors();
  } else {
    for (Eigen::Index r = 0; r < p_.W.rows(); ++r) {
      for (Eigen::Index j = 0; j < p_.W.cols(); ++j) {
        p_.W(r, j) = static_cast<float>(rng.Normal() * o.init_std);
      }
    }
    vel_w_.setZero(p_.W.rows(), p_.W.cols());
  }
  InitVisibleBiases(train, &p_);
  vel_b_.setZero(p_.b.size());
  vel_c_.setZero(p_.F);
  if (o.conditional) {
    p_.D.setZero(train.cols, p_.F);
    vel_d_.setZero(train.cols, p_.F);
  }
  for (int t = 0; t < pool_.size(); ++t) {
    scratch_.emplace_back(p_.F, K, C_ > 0 ? C_ : p_.F, C_);
  }
  item_slot_.assign(static_cast<size_t>(train.cols), -1);
  item_count_.assign(static_cast<size_t>(train.cols), 0);
  if (o.predict == PredictMethod::kExact && valid.nnz() > 0) {
    if (valid_by_item == nullptr) own_valid_by_item_ = valid.Transpose();
    item_cost_valid_.assign(static_cast<size_t>(valid_by_item_.rows) + 1, 0);
    for (int32_t i = 0; i < valid_by_item_.rows; ++i) {
      item_cost_valid_[static_cast<size_t>(i) + 1] =
          item_cost_valid_[static_cast<size_t>(i)] + 1 +
          valid_by_item_.RowSize(i);
    }
  }
}

double CdTrainer::Epoch(int epoch, int cd_steps, float lr) {
  std::vector<int32_t> order;
  order.reserve(static_cast<size_t>(train_.rows));
  for (int32_t u = 0; u < train_.rows; ++u) {
    if (train_.RowSize(u) > 0) order.push_back(u);
  }
  Rng shuffle(StreamSeed(o_.seed, 0x5f1e, static_cast<uint64_t>(epoch)));
  for (size_t i = order.size(); i > 1; --i) {
    std::swap(order[i - 1], order[shuffle.Below(i)]);
  }
  const int F = p_.F;
  const size_t B = static_cast<size_t>(o_.batch_size);
  h0_.setZero(static_cast<Eigen::Index>(B), F);
  ht_.setZero(static_cast<Eigen::Index>(B), F);
  hs_.setZero(static_cast<Eigen::Index>(B), F);
  if (C_ > 0) {
    for (RowMatrixXf* m : {&a0_, &at_, &g0_, &gt_}) {
      m->setZero(static_cast<Eigen::Index>(B), C_);
    }
  }
  sq_err_.assign(B, 0.0);
  double sse = 0;
  for (size_t start = 0; start < order.size(); start += B) {
    const size_t nb = std::min(B, order.size() - start);
    const int32_t* users = order.data() + start;
    // Phase A: the batch's Gibbs chains (BatchChains, FactoredChains).
    if (C_ > 0) {
      FactoredChains(epoch, users, nb, cd_steps);
    } else {
      BatchChains(epoch, users, nb, cd_steps);
    }
    for (size_t s = 0; s < nb; ++s) sse += sq_err_[s];
    Update(nb, lr);
    if (p_.conditional()) ConditionalStep(users, nb, lr);
  }
  if (C_ > 0) MultiplyFactors();
  return std::sqrt(sse /
                   static_cast<double>(std::max<int64_t>(1, train_.nnz())));
}

Eigen::Index CdTrainer::FactorRows() const {
  constexpr Eigen::Index kRows = 480;  // a multiple of Eigen's 24
  const Eigen::Index K = p_.K;
  return kRows % K == 0 ? kRows : 24 * K * std::max<Eigen::Index>(1, 20 / K);
}

void CdTrainer::MultiplyFactors() {
  if (!keep_w_) return;
  const Eigen::Index rows = a_.rows(), block = FactorRows();
  const int64_t blocks = (rows + block - 1) / block;
  pool_.ParallelFor(
      blocks,
      [&](int, int64_t b, int64_t e) {
        for (int64_t k = b; k < e; ++k) {
          const Eigen::Index r0 = k * block;
          const Eigen::Index n = std::min(block, rows - r0);
          p_.W.middleRows(r0, n).noalias() = a_.middleRows(r0, n) * bm_;
        }
      },
      nullptr, kPiecesPerThread);
}

void CdTrainer::AveragedRows(const RbmParams& avg, float a, Eigen::Index r0,
                             Eigen::Index n, RowMatrixXf* wt,
                             float* dst) const {
  // The block's product as MultiplyFactors makes it, then the average's
  // arithmetic over the block's contiguous entries: FactorRows() rows of F
  // floats are a whole number of SIMD packets, so every entry takes the
  // same path (packet or scalar tail) as in one pass over the full W.
  wt->resize(n, p_.F);
  wt->noalias() = a_.middleRows(r0, n) * bm_;
  const Eigen::Index size = n * p_.F;
  const float fresh = 1 - a;
  const Eigen::Map<const Eigen::ArrayXf> old(avg.W.row(r0).data(), size);
  const Eigen::Map<const Eigen::ArrayXf> fresh_w(wt->data(), size);
  Eigen::Map<Eigen::ArrayXf>(dst, size) = a * old + fresh * fresh_w;
}

void CdTrainer::Average(float a, bool first, RbmParams* avg) {
  const float fresh = 1 - a;
  if (keep_w_) {
    if (first) {
      *avg = p_;
      return;
    }
    avg->W = a * avg->W + fresh * p_.W;
    avg->b = a * avg->b + fresh * p_.b;
    avg->c = a * avg->c + fresh * p_.c;
    if (p_.conditional()) avg->D = a * avg->D + fresh * p_.D;
    return;
  }
  const Eigen::Index rows = a_.rows(), block = FactorRows();
  if (first) {
    avg->num_items = p_.num_items;
    avg->K = p_.K;
    avg->F = p_.F;
    avg->W.resize(rows, p_.F);
  }
  std::vector<RowMatrixXf> w(static_cast<size_t>(pool_.size()));
  const int64_t blocks = (rows + block - 1) / block;
  pool_.ParallelFor(
      blocks,
      [&](int t, int64_t b, int64_t e) {
        for (int64_t k = b; k < e; ++k) {
          const Eigen::Index r0 = k * block;
          const Eigen::Index n = std::min(block, rows - r0);
          if (first) {
            avg->W.middleRows(r0, n).noalias() = a_.middleRows(r0, n) * bm_;
          } else {
            AveragedRows(*avg, a, r0, n, &w[static_cast<size_t>(t)],
                         avg->W.row(r0).data());
          }
        }
      },
      nullptr, kPiecesPerThread);
  if (first) {
    avg->b = p_.b;
    avg->c = p_.c;
    avg->D = p_.D;
    return;
  }
  avg->b = a * avg->b + fresh * p_.b;
  avg->c = a * avg->c + fresh * p_.c;
  if (p_.conditional()) avg->D = a * avg->D + fresh * p_.D;
}

void CdTrainer::IndexBatch(int epoch, const int32_t* users, size_t nb) {
  IndexUsers(epoch, users, nb);
  IndexItems(users, nb);
}

void CdTrainer::IndexUsers(int epoch, const int32_t* users, size_t nb) {
  local_start_.resize(nb + 1);
  local_start_[0] = 0;
  for (size_t s = 0; s < nb; ++s) {
    local_start_[s + 1] = local_start_[s] + train_.RowSize(users[s]);
  }
  uniforms_.resize(nb * static_cast<size_t>(p_.F) +
                   static_cast<size_t>(local_start_[nb]));
  vt_.resize(static_cast<size_t>(local_start_[nb]));
  rngs_.clear();
  for (size_t s = 0; s < nb; ++s) {
    rngs_.emplace_back(StreamSeed(o_.seed,
                                  static_cast<uint64_t>(epoch) << 1 | 1,
                                  static_cast<uint64_t>(users[s])));
  }
}

void CdTrainer::IndexItems(const int32_t* users, size_t nb) {
  // The batch's items in increasing id order, so each thread's share of
  // the item-parallel steps is one range of W's rows (and of the visible
  // biases, 5 to a cache line, which two threads would otherwise write
  // side by side), read in address order; their slots and the starts of
  // their entries, from the batch's ratings counted per item (item_count_,
  // zero outside a batch). When the batch has ratings enough to touch a
  // good part of the catalogue, the count has no branch per rating and
  // one scan of the catalogue lists the items; else the items are listed
  // as first met and sorted.
  const int64_t n_local = local_start_[nb];
  batch_items_.clear();
  if (n_local * 16 >= train_.cols) {
    for (size_t s = 0; s < nb; ++s) {
      const int32_t u = users[s];
      for (int64_t r = train_.offsets[u]; r < train_.offsets[u + 1]; ++r) {
        ++item_count_[static_cast<size_t>(train_.col[r])];
      }
    }
    for (int32_t i = 0; i < train_.cols; ++i) {
      if (item_count_[static_cast<size_t>(i)] > 0) batch_items_.push_back(i);
    }
  } else {
    for (size_t s = 0; s < nb; ++s) {
      const int32_t u = users[s];
      for (int64_t r = train_.offsets[u]; r < train_.offsets[u + 1]; ++r) {
        if (item_count_[static_cast<size_t>(train_.col[r])]++ == 0) {
          batch_items_.push_back(train_.col[r]);
        }
      }
    }
    std::sort(batch_items_.begin(), batch_items_.end());
  }
  entry_start_.assign(1, 0);
  for (size_t t = 0; t < batch_items_.size(); ++t) {
    const size_t i = static_cast<size_t>(batch_items_[t]);
    item_slot_[i] = static_cast<int32_t>(t);
    entry_start_.push_back(entry_start_.back() + item_count_[i]);
    item_count_[i] = 0;
  }
  const size_t n_items = batch_items_.size();
  entry_fill_.assign(entry_start_.begin(), entry_start_.end() - 1);
  // The item-parallel steps' split: an item costs its entries (K logits,
  // two gradient rows each) plus the loads of its K rows of W and of their
  // velocities, which miss the cache for the many items a batch touches
  // once: about kItemCost entries' worth (measured on ML-1M-shaped data;
  // splitting by entries alone left one thread twice the other's time).
  constexpr int64_t kItemCost = 6;
  item_cost_.resize(n_items + 1);
  for (size_t t = 0; t <= n_items; ++t) {
    item_cost_[t] = entry_start_[t] + kItemCost * static_cast<int64_t>(t);
  }
  entries_.resize(static_cast<size_t>(n_local));
  entry_of_.resize(static_cast<size_t>(n_local));
  for (size_t s = 0; s < nb; ++s) {
    const int32_t u = users[s];
    for (int64_t r = train_.offsets[u]; r < train_.offsets[u + 1]; ++r) {
      const size_t slot =
          static_cast<size_t>(item_slot_[static_cast<size_t>(train_.col[r])]);
      const int64_t l = local_start_[s] + r - train_.offsets[u];
      entry_of_[static_cast<size_t>(l)] = entry_fill_[slot];
      entries_[static_cast<size_t>(entry_fill_[slot]++)] =
          Entry{static_cast<int32_t>(s), train_.k[static_cast<size_t>(r)], l};
    }
  }
  for (int32_t i : batch_items_) item_slot_[static_cast<size_t>(i)] = -1;
}

}  // namespace internal
}  // namespace rbmrec
