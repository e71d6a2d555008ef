#include "core/rated_rbm.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/kernels.h"
#include "core/rng.h"
#include "core/thread_pool.h"

namespace rbmrec {
namespace {

// Work is split into chunks of a fixed size, whatever the thread count, so
// every matrix product has the same shape (and rounds the same way) with 1
// or 2 threads: results are bit-identical.
constexpr int64_t kItemChunk = 256;
constexpr int64_t kUserChunk = 16;

int64_t Chunks(int64_t n, int64_t size) { return (n + size - 1) / size; }

// In-place logistic function over n values. Eigen's vectorised exp clamps
// its argument, so large |x| give 0 or 1, never NaN.
void SigmoidArray(float* x, int64_t n) {
  Eigen::Map<Eigen::ArrayXf> a(x, n);
  a = 1.0f / (1.0f + (-a).exp());
}

// p(h | r) into h's rows 0..n-1 for the users users[0..n). Unfactored
// (a == nullptr): RatedHidden. Factored (p.W == a * bm): z's rows = the
// sums of A's rows of each user's rated items, then h = sigmoid(c + z B),
// C per rated item instead of F. REQUIRES: h (and, factored, z) have at
// least n rows.
void HiddenRows(const RbmParams& p, const RowMatrixXf* a, const RowMatrixXf* bm,
                const SparseRatings& train, const int32_t* users, int64_t n,
                Eigen::Ref<RowMatrixXf> z, Eigen::Ref<RowMatrixXf> h) {
  for (int64_t r = 0; r < n; ++r) {
    const int32_t u = users[r];
    const int32_t* items = train.col.data() + train.offsets[u];
    if (a == nullptr) {
      RatedHidden(p, items, train.RowSize(u), h.row(r).data());
      continue;
    }
    auto zr = z.row(r);
    zr.setZero();
    for (int64_t t = 0; t < train.RowSize(u); ++t) zr += a->row(items[t]);
  }
  if (a == nullptr) return;
  h.topRows(n).noalias() = z.topRows(n) * *bm;
  for (int64_t r = 0; r < n; ++r) {
    h.row(r) += p.c.transpose();
    SigmoidArray(h.row(r).data(), p.F);
  }
}

absl::Status Validate(const RatedRbmOptions& o) {
  auto bad = [](const char* what, double v) {
    return absl::InvalidArgumentError(
        absl::StrCat("rated RBM option ", what, " = ", v, " is out of range"));
  };
  if (o.hidden < 1 || o.hidden > 10000) return bad("hidden", o.hidden);
  if (o.max_epochs < 1 || o.max_epochs > 100000) {
    return bad("max_epochs", o.max_epochs);
  }
  if (o.batch_size < 1 || o.batch_size > 100000) {
    return bad("batch_size", o.batch_size);
  }
  if (!(o.learning_rate > 0 && o.learning_rate <= 10)) {
    return bad("learning_rate", o.learning_rate);
  }
  if (!(o.momentum >= 0 && o.momentum < 1)) return bad("momentum", o.momentum);
  if (!(o.weight_decay >= 0 && o.weight_decay < 1)) {
    return bad("weight_decay", o.weight_decay);
  }
  if (!(o.init_std >= 0 && o.init_std <= 1)) return bad("init_std", o.init_std);
  if (o.patience < 1) return bad("patience", o.patience);
  if (o.eval_n < 1) return bad("eval_n", o.eval_n);
  if (o.factors < 0 || o.factors > 10000) return bad("factors", o.factors);
  return absl::OkStatus();
}

// Mean NDCG@n over the users with validation entries: each ranks the items
// with training data outside their own training set by logit. With factors
// (`a` and `bm` not null, p.W == a * bm) the logits are computed through
// them: ~C instead of F per item and user.
double ValidationNdcg(const RbmParams& p, const RowMatrixXf* a,
                      const RowMatrixXf* bm, const SparseRatings& train,
                      const SparseRatings& valid,
                      const std::vector<uint8_t>& has_data, int n,
                      ThreadPool* pool) {
  std::vector<int32_t> users;
  for (int32_t u = 0; u < valid.rows; ++u) {
    if (valid.RowSize(u) > 0) users.push_back(u);
  }
  if (users.empty()) return -1;
  const int64_t m = p.num_items;
  std::vector<double> ndcg(users.size(), 0.0);
  // b_i for the items with training data, -inf for the others.
  constexpr float kInf = std::numeric_limits<float>::infinity();
  Eigen::VectorXf bias(m);
  for (int64_t i = 0; i < m; ++i) bias[i] = has_data[i] ? p.b[i] : -kInf;
  std::vector<double> discount(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) discount[r] = 1.0 / std::log2(r + 2.0);
  pool->ParallelFor(
      Chunks(static_cast<int64_t>(users.size()), kUserChunk),
      [&](int, int64_t cb, int64_t ce) {
        RowMatrixXf h(kUserChunk, p.F), logits(kUserChunk, m), hb;
        if (a != nullptr) hb.resize(kUserChunk, a->cols());
        // The best n candidates so far, best first (higher logit, then
        // lower item id): the items come in increasing id order, so a new
        // one enters only with a strictly higher logit than the n-th.
        std::vector<std::pair<float, int32_t>> top;
        for (int64_t c = cb; c < ce; ++c) {
          const int64_t u0 = c * kUserChunk;
          const int64_t nu = std::min<int64_t>(
              kUserChunk, static_cast<int64_t>(users.size()) - u0);
          HiddenRows(p, a, bm, train, users.data() + u0, nu, hb, h);
          if (a != nullptr) {
            hb.topRows(nu).noalias() = h.topRows(nu) * bm->transpose();
            logits.topRows(nu).noalias() = hb.topRows(nu) * a->transpose();
          } else {
            logits.topRows(nu).noalias() = h.topRows(nu) * p.W.transpose();
          }
          for (int64_t r = 0; r < nu; ++r) {
            const int32_t u = users[static_cast<size_t>(u0 + r)];
            // Scores l_i + bias_i, -inf for the items that are not
            // candidates (bias -inf, or the logit set to -inf for the
            // user's own), so the scan is one comparison per item.
            float* l = logits.row(r).data();
            for (int64_t x = train.offsets[u]; x < train.offsets[u + 1]; ++x) {
              l[train.col[x]] = -kInf;
            }
            top.clear();
            float bar = -kInf;  // the n-th best so far once there are n
            auto offer = [&](int64_t i) {
              const float score = l[i] + bias[i];
              if (!(score > bar)) return;
              auto at = top.end();
              while (at != top.begin() && (at - 1)->first < score) --at;
              top.insert(at, {score, static_cast<int32_t>(i)});
              if (static_cast<int>(top.size()) > n) top.pop_back();
              if (static_cast<int>(top.size()) == n) bar = top.back().first;
            };
            int64_t i = 0;
#ifdef RBMREC_AVX2
            // Eight scores at a time; the few above the bar go to offer.
            for (; i + 8 <= m; i += 8) {
              const __m256 s = _mm256_add_ps(_mm256_loadu_ps(l + i),
                                             _mm256_loadu_ps(bias.data() + i));
              unsigned above = static_cast<unsigned>(_mm256_movemask_ps(
                  _mm256_cmp_ps(s, _mm256_set1_ps(bar), _CMP_GT_OQ)));
              for (; above != 0; above &= above - 1) {
                offer(i + __builtin_ctz(above));
              }
            }
#endif
            for (; i < m; ++i) offer(i);
            const int32_t* vb = valid.col.data() + valid.offsets[u];
            const int32_t* ve = vb + valid.RowSize(u);
            double dcg = 0, ideal = 0;
            for (size_t r2 = 0; r2 < top.size(); ++r2) {
              if (std::binary_search(vb, ve, top[r2].second)) {
                dcg += discount[r2];
              }
            }
            const int64_t rel = std::min<int64_t>(valid.RowSize(u), n);
            for (int64_t r2 = 0; r2 < rel; ++r2) ideal += discount[r2];
            ndcg[static_cast<size_t>(u0 + r)] = dcg / ideal;
          }
        }
      });
  double sum = 0;
  for (double x : ndcg) sum += x;
  return sum / static_cast<double>(users.size());
}

}  // namespace

void RatedHidden(const RbmParams& p, const int32_t* items, int64_t n,
                 float* h) {
  Eigen::Map<Eigen::VectorXf> x(h, p.F);
  x = p.c;
  for (int64_t t = 0; t < n; ++t) {
    const int32_t i = items[t];
    if (i >= 0 && i < p.num_items) x += p.W.row(i).transpose();
  }
  SigmoidArray(h, p.F);
}

void RatedLogits(const RbmParams& p, const float* h, float* logits) {
  Eigen::Map<Eigen::VectorXf> out(logits, p.num_items);
  out.noalias() = p.W * Eigen::Map<const Eigen::VectorXf>(h, p.F);
  out += p.b;
}

namespace {

// One run of TrainRatedRbm: CD-1 on the users' rated sets, in mini-batches
// of a seeded order. Each batch: the rated sets item-major (IndexBatch),
// the positive phase p(h | r) and its sample (PositivePhase), the negative
// phase p(r | h) for every item and p(h | that) (NegativePhase), then the
// parameters' momentum step (Update). Factored (RatedRbmOptions::factors),
// W = A B is trained through A and B and multiplied out after every epoch.
class RatedTrainer {
 public:
  RatedTrainer(const SparseRatings& train, const RatedRbmOptions& o);

  // One epoch over all users with a rated item.
  void Epoch(int epoch);
  // Mean validation NDCG of the current parameters (ValidationNdcg).
  double Ndcg(const SparseRatings& valid) {
    return ValidationNdcg(p_, C_ > 0 ? &a_ : nullptr, C_ > 0 ? &bm_ : nullptr,
                          train_, valid, has_data_, o_.eval_n, &pool_);
  }
  const RbmParams& params() const { return p_; }

 private:
  // The initial W (or A and B) from the seed, and the visible biases.
  void InitWeights();
  void InitBiases();
  // The rated sets of batch cases cases_[s .. s + bs) item-major: the batch
  // rows that rated item i are rated_row_[rated_start_[i] ..
  // rated_start_[i + 1]), in row order.
  void IndexBatch(size_t s, int64_t bs);
  void PositivePhase(int epoch, size_t s, int64_t bs);
  void NegativePhase(int64_t bs);
  void Update(int64_t bs);

  const SparseRatings& train_;
  const RatedRbmOptions& o_;
  const int64_t m_;
  const int F_;
  const int C_;  // factors, 0 = W itself
  const int B_;  // batch size
  RbmParams p_;
  RowMatrixXf a_, bm_, vel_a_, vel_bm_;
  std::vector<uint8_t> has_data_;  // items with training data
  std::vector<int32_t> cases_;     // the users with a rated item
  RowMatrixXf vel_w_;
  Eigen::VectorXf vel_b_, vel_c_;
  RowMatrixXf v1_, h_, hs_, h1_;
  // Factored: a0 / at the batch's visibles times A (positive: the sum of the
  // rated items' rows; negative: v1 A), g0 / gt = h B^T / h1 B^T (the
  // gradient of W times B^T is the gradient of A), hb = hs B^T.
  RowMatrixXf a0_, at_, g0_, gt_, hb_;
  // The batch's rated sets item-major (IndexBatch). The positive phase's
  // gradient sum_r r_ri h_r is sparse: read from here instead of a dense
  // (batch x items) product with the 0/1 visibles.
  std::vector<int64_t> rated_start_;
  std::vector<int32_t> rated_row_;
  ThreadPool pool_;
};

RatedTrainer::RatedTrainer(const SparseRatings& train, const RatedRbmOptions& o)
    : train_(train),
      o_(o),
      m_(train.cols),
      F_(o.hidden),
      C_(o.factors > 0 && o.factors < o.hidden ? o.factors : 0),
      B_(o.batch_size),
      rated_start_(static_cast<size_t>(train.cols) + 1),
      pool_(std::max(1, o.threads)) {
  p_.Resize(static_cast<int32_t>(m_), 1, F_);
  InitWeights();
  InitBiases();
  for (int32_t u = 0; u < train.rows; ++u) {
    if (train.RowSize(u) > 0) cases_.push_back(u);
  }
  vel_w_ = RowMatrixXf::Zero(C_ > 0 ? 0 : m_, F_);
  vel_b_ = Eigen::VectorXf::Zero(m_);
  vel_c_ = Eigen::VectorXf::Zero(F_);
  v1_.resize(B_, m_);
  h_.resize(B_, F_);
  hs_.resize(B_, F_);
  h1_.resize(B_, F_);
  if (C_ > 0) {
    for (RowMatrixXf* x : {&a0_, &at_, &g0_, &gt_, &hb_}) x->setZero(B_, C_);
  }
}

void RatedTrainer::InitWeights() {
  Rng init(StreamSeed(o_.seed, 0x7a7edULL));
  // Factored (RatedRbmOptions::factors): W = A B, A m x C, B C x F. B's
  // entries ~ N(0, 1 / F), so B B^T is near the identity and A's first
  // steps move W about as far as W's own would; A's ~ N(0, init_std^2 F /
  // C), so W's entries start with W's own init_std. (Both at sqrt(init_std
  // / sqrt(C)), as the rating RBMs' factored trainer has them, the first
  // steps are so small on small data that early stopping ends training
  // before anything is learned.)
  if (C_ > 0) {
    const double sd_a = o_.init_std * std::sqrt(double{1.0} * F_ / C_);
    const double sd_b = 1.0 / std::sqrt(double{1.0} * F_);
    a_.resize(m_, C_);
    bm_.resize(C_, F_);
    for (int64_t i = 0; i < a_.size(); ++i) {
      a_.data()[i] = static_cast<float>(sd_a * init.Normal());
    }
    for (int64_t i = 0; i < bm_.size(); ++i) {
      bm_.data()[i] = static_cast<float>(sd_b * init.Normal());
    }
    vel_a_.setZero(m_, C_);
    vel_bm_.setZero(C_, F_);
    p_.W.noalias() = a_ * bm_;
  } else {
    for (int64_t i = 0; i < p_.W.size(); ++i) {
      p_.W.data()[i] = static_cast<float>(o_.init_std * init.Normal());
    }
  }
}

void RatedTrainer::InitBiases() {
  // Visible biases: the logit of each item's share of users (smoothed).
  std::vector<int64_t> count(static_cast<size_t>(m_), 0);
  for (const int32_t i : train_.col) ++count[static_cast<size_t>(i)];
  has_data_.assign(static_cast<size_t>(m_), 0);
  const double users = std::max<int32_t>(1, train_.rows);
  for (int64_t i = 0; i < m_; ++i) {
    const double q = (static_cast<double>(count[i]) + 0.5) / (users + 1.0);
    p_.b[i] = static_cast<float>(std::log(q / (1.0 - q)));
    has_data_[i] = count[i] > 0;
  }
}

void RatedTrainer::Epoch(int epoch) {
  Rng order(StreamSeed(o_.seed, 0x5e7ULL, static_cast<uint64_t>(epoch)));
  for (size_t t = cases_.size(); t > 1; --t) {
    std::swap(cases_[t - 1], cases_[order.Below(t)]);
  }
  for (size_t s = 0; s < cases_.size(); s += static_cast<size_t>(B_)) {
    const int64_t bs = std::min<int64_t>(B_, cases_.size() - s);
    IndexBatch(s, bs);
    PositivePhase(epoch, s, bs);
    NegativePhase(bs);
    Update(bs);
  }
  if (C_ > 0) p_.W.noalias() = a_ * bm_;
}

void RatedTrainer::IndexBatch(size_t s, int64_t bs) {
  const SparseRatings& train = train_;
  std::fill(rated_start_.begin(), rated_start_.end(), 0);
  for (int64_t r = 0; r < bs; ++r) {
    const int32_t u = cases_[s + static_cast<size_t>(r)];
    for (int64_t x = train.offsets[u]; x < train.offsets[u + 1]; ++x) {
      ++rated_start_[static_cast<size_t>(train.col[x]) + 1];
    }
  }
  for (int64_t i = 0; i < m_; ++i) rated_start_[i + 1] += rated_start_[i];
  rated_row_.resize(static_cast<size_t>(rated_start_[m_]));
  for (int64_t r = 0; r < bs; ++r) {
    const int32_t u = cases_[s + static_cast<size_t>(r)];
    for (int64_t x = train.offsets[u]; x < train.offsets[u + 1]; ++x) {
      rated_row_[static_cast<size_t>(rated_start_[train.col[x]]++)] =
          static_cast<int32_t>(r);
    }
  }
  // The fill above advanced every start to the next item's: shift back.
  for (int64_t i = m_; i > 0; --i) rated_start_[i] = rated_start_[i - 1];
  rated_start_[0] = 0;
}

void RatedTrainer::PositivePhase(int epoch, size_t s, int64_t bs) {
  // p(h | r) and its sample, in chunks of users of a fixed size (the
  // same products, so the same bits, at any thread count); factored,
  // h = sigmoid(c + a0 B) and then hb = hs B^T and g0 = h B^T.
  const int C = C_, F = F_;
  pool_.ParallelFor(Chunks(bs, kUserChunk), [&](int, int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      const int64_t r0 = c * kUserChunk;
      const int64_t nr = std::min(kUserChunk, bs - r0);
      HiddenRows(p_, C > 0 ? &a_ : nullptr, C > 0 ? &bm_ : nullptr, train_,
                 cases_.data() + s + r0, nr,
                 C > 0 ? a0_.middleRows(r0, nr) : hb_.topRows(0),
                 h_.middleRows(r0, nr));
      for (int64_t r = r0; r < r0 + nr; ++r) {
        const int32_t u = cases_[s + static_cast<size_t>(r)];
        Rng rng(StreamSeed(o_.seed, static_cast<uint64_t>(epoch),
                           static_cast<uint64_t>(u) + 1));
        for (int j = 0; j < F; ++j) {
          hs_(r, j) = rng.Uniform() < h_(r, j) ? 1.0f : 0.0f;
        }
      }
      if (C > 0) {
        hb_.middleRows(r0, nr).noalias() =
            hs_.middleRows(r0, nr) * bm_.transpose();
        g0_.middleRows(r0, nr).noalias() =
            h_.middleRows(r0, nr) * bm_.transpose();
      }
    }
  });
}

void RatedTrainer::NegativePhase(int64_t bs) {
  // p(r | h sampled) for every item, then p(h | that).
  const int C = C_, F = F_;
  const int64_t m = m_;
  pool_.ParallelFor(Chunks(m, kItemChunk), [&](int, int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      const int64_t i0 = c * kItemChunk;
      const int64_t len = std::min(kItemChunk, m - i0);
      // The biases first and the product added to them: one pass
      // less over the block than a product (which Eigen zeroes first)
      // and then the biases, and the same sums (b + the product).
      auto block = v1_.block(0, i0, bs, len);
      block.rowwise() = p_.b.segment(i0, len).transpose();
      if (C > 0) {
        block.noalias() += hb_.topRows(bs) * a_.middleRows(i0, len).transpose();
      } else {
        block.noalias() +=
            hs_.topRows(bs) * p_.W.middleRows(i0, len).transpose();
      }
      for (int64_t r = 0; r < bs; ++r) {
        SigmoidArray(v1_.row(r).data() + i0, len);
      }
    }
  });
  pool_.ParallelFor(Chunks(bs, kUserChunk), [&](int, int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      const int64_t r0 = c * kUserChunk;
      const int64_t nr = std::min(kUserChunk, bs - r0);
      if (C > 0) {
        at_.middleRows(r0, nr).noalias() = v1_.middleRows(r0, nr) * a_;
        h1_.middleRows(r0, nr).noalias() = at_.middleRows(r0, nr) * bm_;
      } else {
        h1_.middleRows(r0, nr).noalias() = v1_.middleRows(r0, nr) * p_.W;
      }
      for (int64_t r = r0; r < r0 + nr; ++r) {
        h1_.row(r) += p_.c.transpose();
        SigmoidArray(h1_.row(r).data(), F);
      }
      if (C > 0) {
        gt_.middleRows(r0, nr).noalias() =
            h1_.middleRows(r0, nr) * bm_.transpose();
      }
    }
  });
}

void RatedTrainer::Update(int64_t bs) {
  // Item rows in parallel (each row's gradient is a sum over the batch in
  // a fixed order). Factored, the rows of A take the place of W's, with
  // g0 / gt in place of h / h1.
  const RatedRbmOptions& o = o_;
  const int C = C_;
  const int64_t m = m_;
  const float scale = 1.0f / static_cast<float>(bs);
  RowMatrixXf& w_all = C > 0 ? a_ : p_.W;
  RowMatrixXf& vel_all = C > 0 ? vel_a_ : vel_w_;
  const RowMatrixXf& pos = C > 0 ? g0_ : h_;
  const RowMatrixXf& neg = C > 0 ? gt_ : h1_;
  const int64_t width = w_all.cols();
  pool_.ParallelFor(Chunks(m, kItemChunk), [&](int, int64_t cb, int64_t ce) {
    RowMatrixXf grad(kItemChunk, width);
    for (int64_t c = cb; c < ce; ++c) {
      const int64_t i0 = c * kItemChunk;
      const int64_t len = std::min(kItemChunk, m - i0);
      auto g = grad.topRows(len);
      g.noalias() = -v1_.block(0, i0, bs, len).transpose() * neg.topRows(bs);
      for (int64_t i = i0; i < i0 + len; ++i) {
        for (int64_t t = rated_start_[i]; t < rated_start_[i + 1]; ++t) {
          g.row(i - i0) += pos.row(rated_row_[static_cast<size_t>(t)]);
        }
      }
      auto w = w_all.middleRows(i0, len);
      auto vw = vel_all.middleRows(i0, len);
      vw = o.momentum * vw + o.learning_rate * (scale * g - o.weight_decay * w);
      w += vw;
      const Eigen::RowVectorXf neg_sum =
          v1_.block(0, i0, bs, len).colwise().sum();
      for (int64_t i = i0; i < i0 + len; ++i) {
        const float gb =
            static_cast<float>(rated_start_[i + 1] - rated_start_[i]) -
            neg_sum[i - i0];
        vel_b_[i] = o.momentum * vel_b_[i] + o.learning_rate * scale * gb;
        p_.b[i] += vel_b_[i];
      }
    }
  });
  if (C > 0) {
    // B's gradient A^T (the gradient of W) = a0^T h - at^T h1, a sum
    // over every rated item of the batch: its step is scaled by the
    // batch's rated count rather than its users (the rating RBMs' rule).
    RowMatrixXf db = a0_.topRows(bs).transpose() * h_.topRows(bs);
    db.noalias() -= at_.topRows(bs).transpose() * h1_.topRows(bs);
    const float b_scale =
        o.learning_rate / static_cast<float>(std::max<int64_t>(
                              1, rated_start_[static_cast<size_t>(m)]));
    vel_bm_ = o.momentum * vel_bm_ + b_scale * db -
              (o.learning_rate * o.weight_decay) * bm_;
    bm_ += vel_bm_;
  }
  Eigen::VectorXf gc = (h_.topRows(bs) - h1_.topRows(bs)).colwise().sum();
  vel_c_ = o.momentum * vel_c_ + (o.learning_rate * scale) * gc;
  p_.c += vel_c_;
}

}  // namespace

absl::StatusOr<RatedRbmResult> TrainRatedRbm(const SparseRatings& train,
                                             const SparseRatings& valid,
                                             const RatedRbmOptions& o,
                                             const RatedProgressFn& progress) {
  if (absl::Status s = Validate(o); !s.ok()) return s;
  if (valid.nnz() > 0 &&
      (valid.rows != train.rows || valid.cols != train.cols)) {
    return absl::InvalidArgumentError(
        "rated RBM: validation data does not match the training data's shape");
  }
  const auto start = std::chrono::steady_clock::now();
  RatedRbmResult result;
  RatedTrainer trainer(train, o);
  RbmParams best = trainer.params();
  double best_ndcg = -2;
  int since_best = 0;
  for (int epoch = 1; epoch <= o.max_epochs; ++epoch) {
    trainer.Epoch(epoch);
    result.epochs_run = epoch;
    const double ndcg = trainer.Ndcg(valid);
    result.valid_ndcg.push_back(ndcg);
    if (ndcg < 0 || ndcg > best_ndcg) {
      best_ndcg = ndcg;
      best = trainer.params();
      result.best_epoch = epoch;
      since_best = 0;
    } else {
      ++since_best;
    }
    if (progress && !progress(epoch, ndcg)) {
      result.cancelled = true;
      break;
    }
    if (since_best >= o.patience) break;
  }
  result.params = std::move(best);
  result.best_valid_ndcg = best_ndcg < -1 ? -1 : best_ndcg;
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return result;
}

}  // namespace rbmrec
