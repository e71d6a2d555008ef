// CdTrainer's parameter update of a mini-batch: the gradient of each
// batch item's rows summed in batch order, the momentum and weight-decay
// step (or the ordinal-sharing step), the factored B and the hidden
// biases.

#include <algorithm>
#include <cstdint>

#include "core/cd_trainer.h"
#include "core/kernels.h"

namespace rbmrec {
namespace internal {

void CdTrainer::OrdinalStep(RowMatrixXf& w, int32_t item, const float* g,
                            const float* gb, const uint64_t* touched,
                            float scale, float decay) {
  const int K = p_.K;
  const int64_t row0 = p_.Row(item, 0);
  kernels::OrdinalRows(w.row(row0).data(), vel_w_.row(row0).data(), g, touched,
                       K, static_cast<int>(w.cols()), o_.momentum, scale,
                       decay);
  // The item's K visible biases are the same step with one "hidden unit"
  // and no decay.
  kernels::OrdinalRows(p_.b.data() + row0, vel_b_.data() + row0, gb, touched, K,
                       1, o_.momentum, scale, 0.0f);
}

void CdTrainer::Update(size_t nb, float lr) {
  const bool factored = C_ > 0;
  const int64_t n_items = static_cast<int64_t>(batch_items_.size());
  const int64_t n_work = factored ? n_items + 1 : n_items;
  const int64_t* cost = item_cost_.data();
  if (factored) {
    work_cost_.assign(item_cost_.begin(), item_cost_.end());
    work_cost_.push_back(item_cost_.back() +
                         static_cast<int64_t>(nb) * p_.F / 4);
    cost = work_cost_.data();
  }
  pool_.ParallelFor(
      n_work,
      [&](int thread, int64_t b, int64_t e) {
        float* g = scratch_[static_cast<size_t>(thread)].grad.data();
        float gb[256];
        for (int64_t x = b; x < e; ++x) {
          if (x == n_items) {
            GlobalStep(nb, lr);
          } else {
            UpdateItem(x, e, nb, lr, g, gb);
          }
        }
      },
      cost, kPiecesPerThread);
  if (!factored) GlobalStep(nb, lr);
}

void CdTrainer::ConditionalStep(const int32_t* users, size_t nb, float lr) {
  // The (item, batch position) pairs of the batch's r sets, sorted: each
  // item's run lists its users in batch order.
  cond_pairs_.clear();
  for (size_t s = 0; s < nb; ++s) {
    const VisibleSet v = UserSet(users[s]);
    for (int64_t r = 0; r < v.n + v.n_extra; ++r) {
      const int32_t item = r < v.n ? v.items[r] : v.extra[r - v.n];
      cond_pairs_.push_back(static_cast<uint64_t>(item) << 32 | s);
    }
  }
  std::sort(cond_pairs_.begin(), cond_pairs_.end());
  cond_start_.clear();
  for (size_t q = 0; q < cond_pairs_.size(); ++q) {
    if (q == 0 || cond_pairs_[q] >> 32 != cond_pairs_[q - 1] >> 32) {
      cond_start_.push_back(static_cast<int64_t>(q));
    }
  }
  const int64_t n_items = static_cast<int64_t>(cond_start_.size());
  cond_start_.push_back(static_cast<int64_t>(cond_pairs_.size()));
  const int F = p_.F;
  const float mom = o_.momentum, decay = lr * o_.weight_decay;
  // Each user's h0 - hT once: the items' sums then read one row a term.
  const Eigen::Index nbi = static_cast<Eigen::Index>(nb);
  dh_ = h0_.topRows(nbi) - ht_.topRows(nbi);
  pool_.ParallelFor(
      n_items,
      [&](int thread, int64_t b, int64_t e) {
        float* g = scratch_[static_cast<size_t>(thread)].gd.data();
        for (int64_t x = b; x < e; ++x) {
          const int64_t q0 = cond_start_[static_cast<size_t>(x)];
          const int64_t q1 = cond_start_[static_cast<size_t>(x) + 1];
          std::fill(g, g + F, 0.0f);
          for (int64_t q = q0; q < q1; ++q) {
            const Eigen::Index s = static_cast<Eigen::Index>(
                cond_pairs_[static_cast<size_t>(q)] & 0xffffffffu);
            const float* dr = dh_.row(s).data();
            for (int j = 0; j < F; ++j) g[j] += dr[j];
          }
          const float n = o_.per_item_normalize ? static_cast<float>(q1 - q0)
                                                : static_cast<float>(nb);
          const float scale = lr / n;
          const Eigen::Index item = static_cast<Eigen::Index>(
              cond_pairs_[static_cast<size_t>(q0)] >> 32);
          float* d = p_.D.row(item).data();
          float* vd = vel_d_.row(item).data();
          for (int j = 0; j < F; ++j) {
            vd[j] = mom * vd[j] + scale * g[j] - decay * d[j];
            d[j] += vd[j];
          }
        }
      },
      cond_start_.data());
}

void CdTrainer::GlobalStep(size_t nb, float lr) {
  const bool factored = C_ > 0;
  const float mom = o_.momentum, decay = lr * o_.weight_decay;
  const float batch_scale = lr / static_cast<float>(nb);
  const Eigen::Index nbi = static_cast<Eigen::Index>(nb);
  if (factored) {
    db_.noalias() = a0_.topRows(nbi).transpose() * h0_.topRows(nbi);
    db_.noalias() -= at_.topRows(nbi).transpose() * ht_.topRows(nbi);
    const float b_scale = lr / static_cast<float>(local_start_[nb]);
    vel_bm_ = mom * vel_bm_ + b_scale * db_ - decay * bm_;
    bm_ += vel_bm_;
  }
  gc_.setZero(p_.F);
  for (size_t s = 0; s < nb; ++s) {
    gc_ += h0_.row(static_cast<Eigen::Index>(s)).transpose() -
           ht_.row(static_cast<Eigen::Index>(s)).transpose();
  }
  vel_c_ = mom * vel_c_ + batch_scale * gc_;
  p_.c += vel_c_;
}

void CdTrainer::UpdateItem(int64_t x, int64_t e, size_t nb, float lr, float* g,
                           float* gb) {
  const int K = p_.K;
  const bool factored = C_ > 0;
  RowMatrixXf& w = factored ? a_ : p_.W;
  const RowMatrixXf& pos = factored ? g0_ : h0_;
  const RowMatrixXf& neg = factored ? gt_ : ht_;
  const int width = static_cast<int>(w.cols());
  const float mom = o_.momentum, decay = lr * o_.weight_decay;
  const int64_t n_items = static_cast<int64_t>(batch_items_.size());
  const int32_t item = batch_items_[static_cast<size_t>(x)];
  const int64_t q0 = entry_start_[static_cast<size_t>(x)];
  const int64_t q1 = entry_start_[static_cast<size_t>(x) + 1];
  if (o_.ordinal && x + 1 < e && x + 1 < n_items) {
    // The next item's K rows of W and of their velocities, all
    // of which OrdinalStep reads and writes: ask for them while
    // this item's gradients are summed (most miss the cache).
    const int64_t next = p_.Row(batch_items_[static_cast<size_t>(x) + 1], 0);
    const char* wn = reinterpret_cast<const char*>(w.row(next).data());
    const char* vn = reinterpret_cast<const char*>(vel_w_.row(next).data());
    const int64_t bytes = static_cast<int64_t>(K) * width * 4;
    for (int64_t off = 0; off < bytes; off += 64) {
      __builtin_prefetch(wn + off, 1);
      __builtin_prefetch(vn + off, 1);
    }
  }
  uint64_t touched[4] = {0, 0, 0, 0};  // bit k: row (item, k)
  auto touch = [&](int k) {
    float* gk = g + static_cast<int64_t>(k) * width;
    if (!(touched[k >> 6] >> (k & 63) & 1)) {
      touched[k >> 6] |= uint64_t{1} << (k & 63);
      for (int j = 0; j < width; ++j) gk[j] = 0.0f;
      gb[k] = 0.0f;
    }
    return gk;
  };
  for (int64_t q = q0; q < q1; ++q) {
    const Entry& en = entries_[static_cast<size_t>(q)];
    const int kp = en.k;
    const int kn = factored ? vt_[static_cast<size_t>(en.l)]
                            : vt_entry_[static_cast<size_t>(q)];
    float* gp = touch(kp);
    const float* hp = pos.row(en.s).data();
    for (int j = 0; j < width; ++j) gp[j] += hp[j];
    gb[kp] += 1.0f;
    float* gn = touch(kn);
    const float* hn = neg.row(en.s).data();
    for (int j = 0; j < width; ++j) gn[j] -= hn[j];
    gb[kn] -= 1.0f;
  }
  const float n = o_.per_item_normalize ? static_cast<float>(q1 - q0)
                                        : static_cast<float>(nb);
  const float scale = lr / n;
  if (o_.ordinal) {
    OrdinalStep(w, item, g, gb, touched, scale, decay);
    return;
  }
  for (int k = 0; k < K; ++k) {
    if (!(touched[k >> 6] >> (k & 63) & 1)) continue;
    const int64_t row = p_.Row(item, k);
    const float* gk = g + static_cast<int64_t>(k) * width;
    float* wr = w.row(row).data();
    float* vw = vel_w_.row(row).data();
    for (int j = 0; j < width; ++j) {
      vw[j] = mom * vw[j] + scale * gk[j] - decay * wr[j];
      wr[j] += vw[j];
    }
    vel_b_[row] = mom * vel_b_[row] + scale * gb[k];
    p_.b[row] += vel_b_[row];
  }
}

}  // namespace internal
}  // namespace rbmrec
