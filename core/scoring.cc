#include "core/scoring.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <vector>

#include "core/kernels.h"
#include "core/rbm.h"

namespace rbmrec {
namespace {

#ifdef RBMREC_AVX2
// The mean-field product W * h of a user-based RBM reads all of W (items x K
// x F floats: 7.4 MB at MovieLens 1M, more than L2) for one user and is
// bound by memory bandwidth. Callers that arrive while a product runs wait
// and are served together by the next one: one pass over W for up to
// kMaxBatch users (flat combining: whoever finds no product running
// computes the next batch, which may hold only other callers' requests).
// Every result is the one the caller would get alone (kernels::MatVecRows).
class MatVecCombiner {
 public:
  // A row-major rows x F matrix of floats or (half != nullptr) halves.
  struct Matrix {
    const float* w = nullptr;
    const uint16_t* half = nullptr;
    int64_t rows = 0;
    int F = 0;
    const void* key() const {
      return half != nullptr ? static_cast<const void*>(half) : w;
    }
  };

  // out = matrix * h (matrix.rows floats).
  void Run(const Matrix& matrix, const float* h, float* out) {
    Request req{&matrix, h, out};
    std::unique_lock<std::mutex> lock(mu_);
    pending_.push_back(&req);
    while (!req.done) {
      if (busy_) {
        cv_.wait(lock);
        continue;
      }
      busy_ = true;
      // The oldest pending request and the others on the same matrix.
      const Matrix m = *pending_.front()->matrix;
      Request* batch[kMaxBatch];
      int n = 0;
      for (auto it = pending_.begin(); it != pending_.end() && n < kMaxBatch;) {
        if ((*it)->matrix->key() == m.key()) {
          batch[n++] = *it;
          it = pending_.erase(it);
        } else {
          ++it;
        }
      }
      lock.unlock();
      const float* hs[kMaxBatch];
      float* outs[kMaxBatch];
      for (int b = 0; b < n; ++b) {
        hs[b] = batch[b]->h;
        outs[b] = batch[b]->out;
      }
      if (m.half != nullptr) {
        kernels::MatVecRowsHalf(m.half, m.rows, m.F, hs, outs, n);
      } else {
        kernels::MatVecRows(m.w, m.rows, m.F, hs, outs, n);
      }
      lock.lock();
      for (int b = 0; b < n; ++b) batch[b]->done = true;
      busy_ = false;
      cv_.notify_all();
    }
  }

 private:
  static constexpr int kMaxBatch = 8;
  struct Request {
    const Matrix* matrix;
    const float* h;
    float* out;
    bool done = false;
  };
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Request*> pending_;
  bool busy_ = false;
};

MatVecCombiner& Combiner() {
  static MatVecCombiner* c = new MatVecCombiner;  // never destroyed
  return *c;
}
#endif

}  // namespace

void SharedMatVec(const RbmParams& p, const float* h, float* out) {
  SharedMatVecRows(p.W.data(), p.W.rows(), p.F, h, out);
}

void SharedMatVecRows(const float* w, int64_t rows, int F, const float* h,
                      float* out) {
#ifdef RBMREC_AVX2
  MatVecCombiner::Matrix m;
  m.w = w;
  m.rows = rows;
  m.F = F;
  Combiner().Run(m, h, out);
#else
  Eigen::Map<Eigen::VectorXf>(out, rows).noalias() =
      Eigen::Map<const RowMatrixXf>(w, rows, F) *
      Eigen::Map<const Eigen::VectorXf>(h, F);
#endif
}

#ifdef RBMREC_AVX2
void SharedMatVecHalf(const uint16_t* w, int64_t rows, int F, const float* h,
                      float* out) {
  MatVecCombiner::Matrix m;
  m.half = w;
  m.rows = rows;
  m.F = F;
  Combiner().Run(m, h, out);
}
#endif

namespace {

// s->scores = the K logits of every item (item-major) of one user-based RBM
// for the user's ratings v: b + W sigmoid(x) for mean field, b + sum_j
// softplus(x_j + W_j) for the exact rule, with x = HiddenInput(p, v).
void MemberLogits(const RbmParams& p, const ExpWeights& table,
                  const VisibleSet& v, PredictMethod method,
                  ScoringScratch* s) {
  s->x.resize(p.F);
  HiddenInput(p, v, s->x.data());
  const Eigen::Index rows = p.W.rows();
  s->scores.resize(rows);
  if (method == PredictMethod::kMeanField) {
    SigmoidInPlace(s->x.data(), p.F);
    SharedMatVec(p, s->x.data(), s->scores.data());
    s->scores += p.b;
  } else if (table.ok.empty()) {
    for (Eigen::Index r = 0; r < rows; ++r) {
      s->scores[r] = p.b[r] + SoftplusSum(s->x.data(), p.W.row(r).data(), p.F);
    }
  } else {
    // The same logits Model::PredictWith computes (ExactLogit).
    SetExpInput(s->x.data(), p.F, &s->model.exp_in);
    for (Eigen::Index r = 0; r < rows; ++r) {
      s->scores[r] =
          ExactLogit(p, table, s->model.exp_in.view(), s->x.data(), r);
    }
  }
}

}  // namespace

void PredictAll(const Model& model, int32_t user, const VisibleSet& v,
                PredictMethod method, RowMatrixXf* out,
                ScoringScratch* scratch) {
  ScoringScratch& s = *scratch;
  const int K = model.K();
  const int32_t m = model.num_items();
  out->setZero(m, K);
  const float inv = model.members().empty()
                        ? 0.f
                        : 1.0f / static_cast<float>(model.members().size());
  for (size_t e = 0; e < model.members().size(); ++e) {
    const RbmParams& p = model.members()[e];
    MemberLogits(p, model.member_exp(e), v, method, &s);
    SoftmaxRows(s.scores.data(), m, K);
    // out (m x K, row-major) += inv * scores, viewed as the same shape.
    out->array() +=
        inv * Eigen::Map<const RowMatrixXf>(s.scores.data(), m, K).array();
  }
  model.MixItemRbm(user, v.n, method, out, &s.model);
  if (model.HasMf() && !model.members().empty()) {
    s.mf_x.resize(static_cast<size_t>(model.params().mf.factors) + 1);
    model.MfInput(v, s.mf_x.data());
    for (int32_t i = 0; i < m; ++i) {
      if (model.Trained(i)) model.BlendMf(i, s.mf_x.data(), out->row(i).data());
    }
  }
  s.fallback.resize(static_cast<size_t>(K));
  bool have_fallback = false;
  for (int32_t i = 0; i < m; ++i) {
    if (!model.Trained(i) || model.members().empty() ||
        !out->row(i).allFinite()) {
      if (!have_fallback) {
        model.FallbackDistribution(v, s.fallback.data());
        have_fallback = true;
      }
      for (int k = 0; k < K; ++k) {
        (*out)(i, k) = s.fallback[static_cast<size_t>(k)];
      }
    }
  }
}

namespace {

// scores += inv x the scores of one member's logits z (m x K, item-major).
void AddMemberScores(const float* z, int32_t m, int K, const float* values,
                     float inv, float* scores, ScoringScratch* s) {
  SoftmaxDotRows(z, m, K, values, s->part.data());
  for (int32_t i = 0; i < m; ++i) scores[i] += inv * s->part[i];
}

// The U/I mix of the item-based RBM and NaN for the untrained items.
void FinishMeanFieldScores(const Model& model, int32_t user,
                           const VisibleSet& v, const float* values,
                           float* scores, ScoringScratch* s) {
  const int K = model.K();
  const int32_t m = model.num_items();
  if (model.ItemRbmServes(user)) {
    model.ItemRbmMeanFieldLogits(user, &s->logits);
    SoftmaxDotRows(s->logits.data(), m, K, values, s->part.data());
    for (int32_t i = 0; i < m; ++i) {
      if (model.UsesItemRbm(user, i)) {
        const float w = model.UserWeight(v.n, i);
        scores[i] = w * scores[i] + (1 - w) * s->part[i];
      }
    }
  }
  for (int32_t i = 0; i < m; ++i) {
    if (!model.Trained(i) || model.members().empty()) scores[i] = NAN;
  }
}

float MemberWeight(const Model& model) {
  return model.members().empty()
             ? 0.f
             : 1.0f / static_cast<float>(model.members().size());
}

}  // namespace

void ScoreAllMeanField(const Model& model, int32_t user, const VisibleSet& v,
                       const float* values, float* scores,
                       ScoringScratch* scratch) {
  ScoringScratch& s = *scratch;
  const int K = model.K();
  const int32_t m = model.num_items();
  std::fill(scores, scores + m, 0.0f);
  s.part.resize(static_cast<size_t>(m));
  // The score is linear in the distribution, so the ensemble average and
  // the U/I mix apply to the per-RBM scores.
  const float inv = MemberWeight(model);
  for (const RbmParams& p : model.members()) {
    MemberLogits(p, ExpWeights(), v, PredictMethod::kMeanField, &s);
    AddMemberScores(s.scores.data(), m, K, values, inv, scores, &s);
  }
  FinishMeanFieldScores(model, user, v, values, scores, &s);
}

void ScoreAllMeanFieldBatch(const Model& model, const int32_t* users,
                            const VisibleSet* const* v, int n,
                            const float* values, float* const* scores,
                            ScoringScratch* scratch) {
#ifdef RBMREC_AVX2
  ScoringScratch& s = *scratch;
  const int K = model.K();
  const int32_t m = model.num_items();
  for (int b = 0; b < n; ++b) std::fill(scores[b], scores[b] + m, 0.0f);
  s.part.resize(static_cast<size_t>(m));
  const float inv = MemberWeight(model);
  for (const RbmParams& p : model.members()) {
    // Each user's sigmoid(x) as MemberLogits computes it, then one pass
    // over W for all of them (what SharedMatVec's batches compute).
    const size_t F = static_cast<size_t>(p.F);
    const size_t rows = static_cast<size_t>(p.W.rows());
    s.batch_h.resize(static_cast<size_t>(n) * F);
    s.batch_out.resize(static_cast<size_t>(n) * rows);
    const float* hs[kMaxScoreBatch];
    float* outs[kMaxScoreBatch];
    s.x.resize(p.F);
    for (int b = 0; b < n; ++b) {
      HiddenInput(p, *v[b], s.x.data());
      SigmoidInPlace(s.x.data(), p.F);
      float* h = s.batch_h.data() + static_cast<size_t>(b) * F;
      std::copy(s.x.data(), s.x.data() + p.F, h);
      hs[b] = h;
      outs[b] = s.batch_out.data() + static_cast<size_t>(b) * rows;
    }
    kernels::MatVecRows(p.W.data(), p.W.rows(), p.F, hs, outs, n);
    for (int b = 0; b < n; ++b) {
      Eigen::Map<Eigen::VectorXf>(outs[b], p.W.rows()) += p.b;
      AddMemberScores(outs[b], m, K, values, inv, scores[b], &s);
    }
  }
  for (int b = 0; b < n; ++b) {
    FinishMeanFieldScores(model, users[b], *v[b], values, scores[b], &s);
  }
#else
  for (int b = 0; b < n; ++b) {
    ScoreAllMeanField(model, users[b], *v[b], values, scores[b], scratch);
  }
#endif
}

}  // namespace rbmrec
