#include "core/online.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "core/rng.h"

namespace rbmrec {
namespace {

uint64_t HashId(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char ch : s) {
    h ^= ch;
    h *= 0x100000001b3ULL;
  }
  return h;
}

}  // namespace

int AddItems(Model* model, const std::vector<std::string>& item_ids,
             uint64_t seed) {
  std::vector<std::string> fresh;
  for (const std::string& id : item_ids) {
    if (model->items.Find(id) < 0) {
      model->items.GetOrAdd(id);
      fresh.push_back(id);
    }
  }
  if (fresh.empty()) return 0;
  const int K = model->K();
  const int32_t m = model->items.size();
  model->item_hist.resize(static_cast<size_t>(m) * K, 0);
  if (model->item_rbm.F > 0) {
    // New items have no I-RBM inputs until the next full training.
    RowMatrixXf x = RowMatrixXf::Zero(m, model->item_rbm.F);
    x.topRows(model->item_x.rows()) = model->item_x;
    model->item_x = std::move(x);
    model->RefreshItemHidden();
    model->item_in_irbm.resize(static_cast<size_t>(m), 0);
  }
  for (RbmParams& p : model->members) {
    const int32_t old_m = p.num_items;
    RowMatrixXf w(static_cast<Eigen::Index>(m) * K, p.F);
    w.topRows(p.W.rows()) = p.W;
    Eigen::VectorXf b(static_cast<Eigen::Index>(m) * K);
    b.head(p.b.size()) = p.b;
    for (int32_t i = old_m; i < m; ++i) {
      Rng rng(StreamSeed(seed, HashId(model->items.Name(i))));
      for (int k = 0; k < K; ++k) {
        const int64_t row = static_cast<int64_t>(i) * K + k;
        for (int j = 0; j < p.F; ++j) {
          w(row, j) =
              static_cast<float>(rng.Normal() * model->options.init_std);
        }
        b[row] = -std::log(static_cast<float>(K));
      }
    }
    p.W = std::move(w);
    p.b = std::move(b);
    p.num_items = m;
  }
  return static_cast<int>(fresh.size());
}

void OnlineUserUpdate(Model* model, const VisibleSet& v,
                      const OnlineOptions& options, uint64_t user_key) {
  if (v.n == 0) return;
  const float lr = options.learning_rate;
  const float wd = model->options.weight_decay;
  for (size_t e = 0; e < model->members.size(); ++e) {
    RbmParams& p = model->members[e];
    const int F = p.F, K = p.K;
    Eigen::VectorXf h0(F), hs(F), ht(F), logits(K);
    std::vector<uint8_t> vt(static_cast<size_t>(v.n));
    Rng rng(StreamSeed(options.seed, user_key, e));
    for (int step = 0; step < options.steps; ++step) {
      HiddenInput(p, v, h0.data());
      SigmoidInPlace(h0.data(), F);
      for (int j = 0; j < F; ++j) hs[j] = rng.Uniform() < h0[j] ? 1.f : 0.f;
      for (int64_t r = 0; r < v.n; ++r) {
        VisibleLogits(p, v.items[r], hs.data(), logits.data());
        SoftmaxInPlace(logits.data(), K);
        const float u = rng.Uniform();
        int pick = K - 1;
        float acc = 0;
        for (int k = 0; k + 1 < K; ++k) {
          acc += logits[k];
          if (u < acc) {
            pick = k;
            break;
          }
        }
        vt[static_cast<size_t>(r)] = static_cast<uint8_t>(pick);
      }
      HiddenInput(p, VisibleSet{v.items, vt.data(), v.n}, ht.data());
      SigmoidInPlace(ht.data(), F);
      for (int64_t r = 0; r < v.n; ++r) {
        const int64_t pos = p.Row(v.items[r], v.ks[r]);
        const int64_t neg = p.Row(v.items[r], vt[static_cast<size_t>(r)]);
        p.W.row(pos) += lr * (h0.transpose() - wd * p.W.row(pos));
        p.W.row(neg) -= lr * ht.transpose();
        p.b[pos] += lr;
        p.b[neg] -= lr;
      }
      p.c += lr * (h0 - ht);
    }
  }
}

void AdjustHistogram(Model* model, int32_t item, int k, int delta) {
  uint32_t& c = model->item_hist[static_cast<size_t>(item) * model->K() + k];
  if (delta < 0 && c < static_cast<uint32_t>(-delta)) {
    c = 0;
  } else {
    c = static_cast<uint32_t>(static_cast<int64_t>(c) + delta);
  }
}

void AdjustItemInput(Model* model, int32_t user, int32_t item, int k,
                     int delta) {
  RbmParams& p = model->item_rbm;
  if (p.F == 0 || user < 0 || user >= p.num_items || delta == 0) return;
  uint8_t& in_irbm = model->item_in_irbm[static_cast<size_t>(item)];
  auto x = model->item_x.row(item);
  if (!in_irbm) {
    if (delta < 0) return;  // nothing of this item is in the I-RBM
    x = p.c.transpose();
    in_irbm = 1;
  }
  x += static_cast<float>(delta) * p.W.row(p.Row(user, k));
  if (model->ItemHiddenFresh()) {
    for (int j = 0; j < p.F; ++j) {
      model->item_hT(j, item) = 1.0f / (1.0f + std::exp(-x[j]));
    }
  }
}

bool SameShape(const Model& a, const Model& b) {
  if (a.K() != b.K() || a.num_items() != b.num_items() ||
      a.users.size() != b.users.size() ||
      a.members.size() != b.members.size() ||
      a.item_hist.size() != b.item_hist.size() ||
      a.item_x.rows() != b.item_x.rows() ||
      a.item_x.cols() != b.item_x.cols() ||
      a.item_hT.rows() != b.item_hT.rows() ||
      a.item_hT.cols() != b.item_hT.cols() ||
      a.item_in_irbm.size() != b.item_in_irbm.size()) {
    return false;
  }
  for (size_t e = 0; e < a.members.size(); ++e) {
    const RbmParams& p = a.members[e];
    const RbmParams& q = b.members[e];
    if (p.W.rows() != q.W.rows() || p.W.cols() != q.W.cols() ||
        p.b.size() != q.b.size() || p.c.size() != q.c.size()) {
      return false;
    }
  }
  return true;
}

void CopyItemState(const Model& src, const std::vector<int32_t>& items,
                   Model* dst) {
  const int K = src.K();
  for (size_t e = 0; e < src.members.size(); ++e) {
    const RbmParams& p = src.members[e];
    RbmParams& q = dst->members[e];
    for (const int32_t i : items) {
      const Eigen::Index row = static_cast<Eigen::Index>(p.Row(i, 0));
      q.W.middleRows(row, K) = p.W.middleRows(row, K);
      q.b.segment(row, K) = p.b.segment(row, K);
    }
    q.c = p.c;
  }
  for (const int32_t i : items) {
    const size_t h = static_cast<size_t>(i) * static_cast<size_t>(K);
    std::copy(src.item_hist.begin() + static_cast<std::ptrdiff_t>(h),
              src.item_hist.begin() + static_cast<std::ptrdiff_t>(h + K),
              dst->item_hist.begin() + static_cast<std::ptrdiff_t>(h));
    if (i < src.item_x.rows()) dst->item_x.row(i) = src.item_x.row(i);
    if (i < src.item_hT.cols()) dst->item_hT.col(i) = src.item_hT.col(i);
    if (static_cast<size_t>(i) < src.item_in_irbm.size()) {
      dst->item_in_irbm[static_cast<size_t>(i)] =
          src.item_in_irbm[static_cast<size_t>(i)];
    }
  }
}

}  // namespace rbmrec
