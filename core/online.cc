#include "core/online.h"

#include <cmath>

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

}  // namespace rbmrec
