#include "core/online.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "absl/strings/str_cat.h"
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

float NewItemRatedBias(const Model& model, int64_t ratings) {
  const double users =
      std::max<double>(1, static_cast<double>(model.users().size()));
  const double q =
      std::min(0.99, (static_cast<double>(ratings) + 0.5) / (users + 1.0));
  return static_cast<float>(std::log(q / (1.0 - q)));
}

int AddItems(Model* model, const std::vector<std::string>& item_ids,
             uint64_t seed) {
  std::vector<std::string> fresh;
  for (const std::string& id : item_ids) {
    if (model->p_.items.Find(id) < 0) {
      model->p_.items.GetOrAdd(id);
      fresh.push_back(id);
    }
  }
  if (fresh.empty()) return 0;
  const int K = model->K();
  const int32_t m = model->p_.items.size();
  model->p_.item_hist.resize(static_cast<size_t>(m) * K, 0);
  model->RefreshItemWeights(m - static_cast<int32_t>(fresh.size()), m);
  if (model->p_.item_rbm.F > 0) {
    // New items have no I-RBM inputs until the next full training.
    RowMatrixXf x = RowMatrixXf::Zero(m, model->p_.item_rbm.F);
    x.topRows(model->p_.item_x.rows()) = model->p_.item_x;
    model->p_.item_x = std::move(x);
    model->RefreshItemHidden();
    model->p_.item_in_irbm.resize(static_cast<size_t>(m), 0);
  }
  if (model->p_.rated_rbm.F > 0) {
    // Rated RBM: no weights (new items take no part in the hidden state)
    // and the bias of an item nobody has rated; AdjustHistogram raises it
    // with the item's ratings until the next full training.
    RbmParams& r = model->p_.rated_rbm;
    RowMatrixXf w = RowMatrixXf::Zero(m, r.F);
    w.topRows(r.W.rows()) = r.W;
    Eigen::VectorXf b(m);
    b.head(r.b.size()) = r.b;
    for (int32_t i = r.num_items; i < m; ++i)
      b[i] = NewItemRatedBias(*model, 0);
    r.W = std::move(w);
    r.b = std::move(b);
    const int32_t old_m = r.num_items;
    r.num_items = m;
    model->RefreshRatedForm(old_m, m);
  }
  for (RbmParams& p : model->p_.members) {
    const int32_t old_m = p.num_items;
    RowMatrixXf w(static_cast<Eigen::Index>(m) * K, p.F);
    w.topRows(p.W.rows()) = p.W;
    Eigen::VectorXf b(static_cast<Eigen::Index>(m) * K);
    b.head(p.b.size()) = p.b;
    for (int32_t i = old_m; i < m; ++i) {
      Rng rng(StreamSeed(seed, HashId(model->p_.items.Name(i))));
      for (int k = 0; k < K; ++k) {
        const int64_t row = static_cast<int64_t>(i) * K + k;
        for (int j = 0; j < p.F; ++j) {
          w(row, j) =
              static_cast<float>(rng.Normal() * model->p_.options.init_std);
        }
        b[row] = -std::log(static_cast<float>(K));
      }
    }
    p.W = std::move(w);
    p.b = std::move(b);
    if (p.conditional()) {
      // A new item in r shifts no hidden unit until the next training.
      RowMatrixXf d = RowMatrixXf::Zero(m, p.F);
      d.topRows(p.D.rows()) = p.D;
      p.D = std::move(d);
    }
    p.num_items = m;
  }
  for (size_t e = 0; e < model->p_.members.size(); ++e) {
    const RbmParams& p = model->p_.members[e];
    model->RefreshExp(static_cast<int>(e),
                      p.Row(m - static_cast<int32_t>(fresh.size()), 0),
                      p.W.rows());
  }
  return static_cast<int>(fresh.size());
}

void OnlineUserUpdate(Model* model, const VisibleSet& v,
                      const OnlineOptions& options, uint64_t user_key) {
  if (v.n == 0) return;
  const float lr = options.learning_rate;
  const float wd = model->p_.options.weight_decay;
  for (size_t e = 0; e < model->p_.members.size(); ++e) {
    RbmParams& p = model->p_.members[e];
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
    for (int64_t r = 0; r < v.n; ++r) {
      const int64_t row = p.Row(v.items[r], 0);
      model->RefreshExp(static_cast<int>(e), row, row + K);
    }
  }
}

void AdjustHistogram(Model* model, int32_t item, int k, int delta) {
  uint32_t& c = model->p_.item_hist[static_cast<size_t>(item) * model->K() + k];
  if (delta < 0 && c < static_cast<uint32_t>(-delta)) {
    c = 0;
  } else {
    c = static_cast<uint32_t>(static_cast<int64_t>(c) + delta);
  }
  model->RefreshItemWeights(item, item + 1);
  RbmParams& r = model->p_.rated_rbm;
  if (r.F > 0 && item < r.num_items && r.W.row(item).isZero(0)) {
    // An item added online: its p(rated) follows its number of ratings.
    int64_t n = 0;
    for (int j = 0; j < model->K(); ++j) {
      n += model->p_.item_hist[static_cast<size_t>(item) * model->K() + j];
    }
    r.b[item] = NewItemRatedBias(*model, n);
  }
}

void AdjustItemInput(Model* model, int32_t user, int32_t item, int k,
                     int delta) {
  RbmParams& p = model->p_.item_rbm;
  if (p.F == 0 || user < 0 || user >= p.num_items || delta == 0) return;
  uint8_t& in_irbm = model->p_.item_in_irbm[static_cast<size_t>(item)];
  auto x = model->p_.item_x.row(item);
  if (!in_irbm) {
    if (delta < 0) return;  // nothing of this item is in the I-RBM
    x = p.c.transpose();
    in_irbm = 1;
  }
  x += static_cast<float>(delta) * p.W.row(p.Row(user, k));
  for (int j = 0; j < p.F; ++j) {
    model->item_hT_(j, item) = 1.0f / (1.0f + std::exp(-x[j]));
  }
  model->RefreshItemExp(item, item + 1);
}

std::string ErasedUserId(int32_t index) {
  return absl::StrCat(
      "\x1f"
      "erased:",
      index);
}

bool EraseUser(Model* model, std::string_view user_id,
               const VisibleSet& ratings) {
  ModelParams& p = model->p_;
  const int32_t user = p.users.Find(user_id);
  if (user < 0) return false;
  RbmParams& irbm = p.item_rbm;
  if (irbm.F > 0 && user < irbm.num_items) {
    for (int64_t r = 0; r < ratings.n; ++r) {
      const int32_t item = ratings.items[r];
      if (item < 0 || item >= model->num_items()) continue;
      AdjustItemInput(model, user, item, ratings.ks[r], -1);
    }
    for (int k = 0; k < irbm.K; ++k) {
      irbm.W.row(irbm.Row(user, k)).setZero();
      irbm.b[irbm.Row(user, k)] = 0.0f;
    }
    model->RefreshExp(-1, irbm.Row(user, 0), irbm.Row(user, 0) + irbm.K);
  }
  if (p.item_regression != nullptr) {
    // The user's training row out of the regression's X, exactly (the row
    // it was fitted with, whatever the user rated since); a regression
    // that cannot take it out is dropped rather than keep the user in it.
    auto copy = std::make_shared<ItemRegression>(*p.item_regression);
    if (RemoveUserFromItemRegression(copy.get(), user)) {
      p.item_regression = std::move(copy);
    } else {
      p.item_regression = nullptr;
    }
  }
  p.users.Rename(user, ErasedUserId(user));
  return true;
}

bool SameShape(const Model& a, const Model& b) {
  if (a.K() != b.K() || a.num_items() != b.num_items() ||
      a.params().users.size() != b.params().users.size() ||
      a.params().members.size() != b.params().members.size() ||
      a.params().item_hist.size() != b.params().item_hist.size() ||
      a.params().item_x.rows() != b.params().item_x.rows() ||
      a.params().item_x.cols() != b.params().item_x.cols() ||
      a.item_hT().rows() != b.item_hT().rows() ||
      a.item_hT().cols() != b.item_hT().cols() ||
      a.params().item_in_irbm.size() != b.params().item_in_irbm.size() ||
      a.rated_rbm().F != b.rated_rbm().F ||
      a.rated_rbm().num_items != b.rated_rbm().num_items) {
    return false;
  }
  for (size_t e = 0; e < a.params().members.size(); ++e) {
    const RbmParams& p = a.params().members[e];
    const RbmParams& q = b.params().members[e];
    if (p.W.rows() != q.W.rows() || p.W.cols() != q.W.cols() ||
        p.b.size() != q.b.size() || p.c.size() != q.c.size() ||
        p.D.rows() != q.D.rows() || p.D.cols() != q.D.cols()) {
      return false;
    }
  }
  return true;
}

void CopyItemState(const Model& src, const std::vector<int32_t>& items,
                   Model* dst) {
  const int K = src.K();
  for (size_t e = 0; e < src.p_.members.size(); ++e) {
    const RbmParams& p = src.p_.members[e];
    RbmParams& q = dst->p_.members[e];
    for (const int32_t i : items) {
      const Eigen::Index row = static_cast<Eigen::Index>(p.Row(i, 0));
      q.W.middleRows(row, K) = p.W.middleRows(row, K);
      dst->RefreshExp(static_cast<int>(e), row, row + K);
      q.b.segment(row, K) = p.b.segment(row, K);
      if (p.conditional()) q.D.row(i) = p.D.row(i);
    }
    q.c = p.c;
  }
  for (const int32_t i : items) {
    const size_t h = static_cast<size_t>(i) * static_cast<size_t>(K);
    std::copy(src.p_.item_hist.begin() + static_cast<std::ptrdiff_t>(h),
              src.p_.item_hist.begin() + static_cast<std::ptrdiff_t>(h + K),
              dst->p_.item_hist.begin() + static_cast<std::ptrdiff_t>(h));
    dst->RefreshItemWeights(i, i + 1);
    if (i < src.p_.item_x.rows()) dst->p_.item_x.row(i) = src.p_.item_x.row(i);
    if (i < src.item_hT_.cols()) dst->item_hT_.col(i) = src.item_hT_.col(i);
    dst->RefreshItemExp(i, i + 1);
    if (i < src.p_.rated_rbm.num_items) {
      dst->p_.rated_rbm.W.row(i) = src.p_.rated_rbm.W.row(i);
      dst->p_.rated_rbm.b[i] = src.p_.rated_rbm.b[i];
      dst->RefreshRatedForm(i, i + 1);
    }
    if (static_cast<size_t>(i) < src.p_.item_in_irbm.size()) {
      dst->p_.item_in_irbm[static_cast<size_t>(i)] =
          src.p_.item_in_irbm[static_cast<size_t>(i)];
    }
  }
}

}  // namespace rbmrec
