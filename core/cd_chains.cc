// CdTrainer's Gibbs chains of a mini-batch: the positive phase (hidden
// probabilities of the data) and the CD-T negative phase (alternating
// visible reconstructions and hidden samples), for the plain RBM item by
// item (BatchChains) and for the factored RBM user by user
// (FactoredChains), with each user's random draws from its own stream.

#include <algorithm>
#include <vector>

#include "core/cd_trainer.h"
#include "core/kernels.h"

namespace rbmrec {
namespace internal {

void CdTrainer::SampleHidden(size_t nb, size_t s, const float* hp) {
  const int F = p_.F;
  Rng& rng = rngs_[s];
  float* uh = HiddenUniforms(s);
  for (int j = 0; j < F; ++j) uh[j] = rng.Uniform();
  float* uv = VisibleUniforms(nb, s);
  const int64_t n = local_start_[s + 1] - local_start_[s];
  for (int64_t r = 0; r < n; ++r) uv[r] = rng.Uniform();
  float* h = hs_.row(static_cast<Eigen::Index>(s)).data();
  for (int j = 0; j < F; ++j) h[j] = uh[j] < hp[j] ? 1.f : 0.f;
}

void CdTrainer::BatchChains(int epoch, const int32_t* users, size_t nb,
                            int cd_steps) {
  IndexBatch(epoch, users, nb);
  const int F = p_.F;
  const size_t n_items = batch_items_.size();
  const int64_t n_local = local_start_[nb];
  d2_.resize(static_cast<size_t>(n_local));
  vt_entry_.resize(static_cast<size_t>(n_local));
  // Positive phase and the first hidden sample.
  pool_.ParallelFor(
      static_cast<int64_t>(nb),
      [&](int, int64_t b, int64_t e) {
        for (int64_t s = b; s < e; ++s) {
          float* h0 = h0_.row(static_cast<Eigen::Index>(s)).data();
          HiddenInput(p_, UserSet(users[s]), h0);
          SigmoidInPlace(h0, F);
          SampleHidden(nb, static_cast<size_t>(s), h0);
        }
      },
      local_start_.data());
  for (int step = 0; step < cd_steps; ++step) {
    pool_.ParallelFor(
        static_cast<int64_t>(n_items),
        [&](int t, int64_t b, int64_t e) {
          ReconstructItems(nb, step, t, b, e);
        },
        item_cost_.data());
    const bool last = step + 1 == cd_steps;
    pool_.ParallelFor(
        static_cast<int64_t>(nb),
        [&](int, int64_t b, int64_t e) {
          RehideUsers(users, nb, step, last, b, e);
        },
        local_start_.data());
  }
}

void CdTrainer::ReconstructItems(size_t nb, int step, int t, int64_t b,
                                 int64_t e) {
  const int F = p_.F, K = p_.K;
  // Logits of all the chunk's entries item by item, then one
  // SoftmaxSampleRows over them all.
  Scratch& sc = scratch_[static_cast<size_t>(t)];
  std::vector<float>& probs = sc.probs;
  const int64_t e0 = entry_start_[static_cast<size_t>(b)];
  const int64_t n = entry_start_[static_cast<size_t>(e)] - e0;
  const size_t need = static_cast<size_t>(n * K);
  if (probs.size() < need) probs.resize(need);
  for (int64_t x = b; x < e; ++x) {
    const int32_t item = batch_items_[static_cast<size_t>(x)];
    const int64_t row0 = p_.Row(item, 0);
    const float* w = p_.W.row(row0).data();
    const float* bias = p_.b.data() + row0;
    const int64_t q1 = entry_start_[static_cast<size_t>(x) + 1];
    int64_t q = entry_start_[static_cast<size_t>(x)];
    // Two entries per pass over the item's K rows.
    for (; q + 1 < q1; q += 2) {
      kernels::RowDots2(
          w, bias, K, F, hs_.row(entries_[static_cast<size_t>(q)].s).data(),
          hs_.row(entries_[static_cast<size_t>(q + 1)].s).data(),
          probs.data() + (q - e0) * K, probs.data() + (q + 1 - e0) * K);
    }
    if (q < q1) {
      kernels::RowDots(w, bias, K, F,
                       hs_.row(entries_[static_cast<size_t>(q)].s).data(),
                       probs.data() + (q - e0) * K);
    }
  }
  // Each entry's uniform (from its user's stream), then the
  // samples and, at step 1, the expectations.
  if (sc.uniforms.size() < static_cast<size_t>(n)) {
    sc.uniforms.resize(static_cast<size_t>(n));
  }
  if (sc.means.size() < static_cast<size_t>(n)) {
    sc.means.resize(static_cast<size_t>(n));
  }
  for (int64_t q = 0; q < n; ++q) {
    const Entry& en = entries_[static_cast<size_t>(e0 + q)];
    const size_t s = static_cast<size_t>(en.s);
    sc.uniforms[static_cast<size_t>(q)] =
        VisibleUniforms(nb, s)[en.l - local_start_[s]];
  }
  SoftmaxSampleRows(probs.data(), n, K, sc.uniforms.data(),
                    vt_entry_.data() + e0,
                    step == 0 ? sc.means.data() : nullptr);
  if (step == 0) {
    for (int64_t q = 0; q < n; ++q) {
      const Entry& en = entries_[static_cast<size_t>(e0 + q)];
      const double d = sc.means[static_cast<size_t>(q)] - en.k;
      d2_[static_cast<size_t>(e0 + q)] = d * d;
    }
  }
}

void CdTrainer::RehideUsers(const int32_t* users, size_t nb, int step,
                            bool last, int64_t b, int64_t e) {
  const int F = p_.F;
  for (int64_t s64 = b; s64 < e; ++s64) {
    const size_t s = static_cast<size_t>(s64);
    const int32_t u = users[s];
    float* ht = ht_.row(static_cast<Eigen::Index>(s)).data();
    const VisibleSet v = UserSet(u);
    // The user's samples, from the item-major order of step 2.
    uint8_t* vt = vt_.data() + local_start_[s];
    for (int64_t l = local_start_[s]; l < local_start_[s + 1]; ++l) {
      vt[l - local_start_[s]] =
          vt_entry_[static_cast<size_t>(entry_of_[static_cast<size_t>(l)])];
    }
    HiddenInput(p_, VisibleSet{v.items, vt, v.n, v.extra, v.n_extra}, ht);
    SigmoidInPlace(ht, F);
    if (step == 0) {
      double sq = 0;
      for (int64_t l = local_start_[s]; l < local_start_[s + 1]; ++l) {
        sq += d2_[static_cast<size_t>(entry_of_[static_cast<size_t>(l)])];
      }
      sq_err_[s] = sq;
    }
    if (!last) SampleHidden(nb, s, ht);
  }
}

void CdTrainer::FactoredChains(int epoch, const int32_t* users, size_t nb,
                               int cd_steps) {
  IndexUsers(epoch, users, nb);
  const int F = p_.F, K = p_.K;
  // Work 0 builds the item index (IndexItems, which only Update reads)
  // while the others run the chains of users 0..nb-1 (work 1..nb): with
  // two threads or more the index costs no wall time. It costs about a
  // fifth of a chain per rating (a profile of one thread: the index 8%
  // of the time, the chains 37%).
  const int64_t n_local = local_start_[nb];
  work_cost_.resize(nb + 2);
  work_cost_[0] = 0;
  work_cost_[1] = n_local / 5;
  for (size_t s = 0; s < nb; ++s) {
    work_cost_[s + 2] = work_cost_[1] + local_start_[s + 1];
  }
  pool_.ParallelFor(
      static_cast<int64_t>(nb) + 1,
      [&](int t, int64_t b, int64_t e) {
        Scratch& sc = scratch_[static_cast<size_t>(t)];
        for (int64_t w = b; w < e; ++w) {
          if (w == 0) {
            IndexItems(users, nb);
            continue;
          }
          const size_t s = static_cast<size_t>(w - 1);
          const Eigen::Index si = static_cast<Eigen::Index>(s);
          const int32_t u = users[s];
          const VisibleSet v = UserSet(u);
          // The hidden inputs' fixed part: c, plus the D rows of r for the
          // conditional RBM.
          const float* base = p_.c.data();
          if (p_.conditional()) {
            ConditionalSum(p_, v, base, sc.x.data());
            base = sc.x.data();
          }
          const Eigen::Map<const Eigen::RowVectorXf> fixed(base, F);
          const size_t need = static_cast<size_t>(v.n * K);
          if (sc.probs.size() < need) sc.probs.resize(need);
          if (sc.rows.size() < static_cast<size_t>(v.n)) {
            sc.rows.resize(static_cast<size_t>(v.n));
          }
          if (sc.means.size() < static_cast<size_t>(v.n)) {
            sc.means.resize(static_cast<size_t>(v.n));
          }
          double* means = sc.means.data();
          float* probs = sc.probs.data();
          const float** rows = sc.rows.data();
          // a0 = the sum of A's rows of the user's ratings, in rating
          // order (asking for the rows of the items a few ratings ahead
          // made it slower: 15.4-17.6 against 18.0-18.8 M ratings/s).
          for (int64_t r = 0; r < v.n; ++r) {
            rows[r] = a_.row(p_.Row(v.items[r], v.ks[r])).data();
          }
          auto a0 = a0_.row(si);
          kernels::SumRows(zeros_.data(), rows, v.n, C_, a0.data());
          auto h0 = h0_.row(si);
          h0 = fixed;
          h0.noalias() += a0 * bm_;
          SigmoidInPlace(h0.data(), F);
          SampleHidden(nb, s, h0.data());
          auto ht = ht_.row(si);
          auto at = at_.row(si);
          uint8_t* vt = vt_.data() + local_start_[s];
          for (int step = 0; step < cd_steps; ++step) {
            sc.z.noalias() = bm_ * hs_.row(si).transpose();
            for (int64_t r = 0; r < v.n; ++r) {
              const int64_t row0 = p_.Row(v.items[r], 0);
              kernels::RowDots(a_.row(row0).data(), p_.b.data() + row0, K, C_,
                               sc.z.data(), probs + r * K);
            }
            // The visible sample and, at step 1, the expectations of the
            // reconstruction (the squared error reported as train RMSE).
            SoftmaxSampleRows(probs, v.n, K, VisibleUniforms(nb, s), vt,
                              step == 0 ? means : nullptr);
            for (int64_t r = 0; r < v.n; ++r) {
              rows[r] = a_.row(p_.Row(v.items[r], vt[r])).data();
            }
            kernels::SumRows(zeros_.data(), rows, v.n, C_, at.data());
            if (step == 0) {
              double sq = 0;
              for (int64_t r = 0; r < v.n; ++r) {
                const double d = means[r] - v.ks[r];
                sq += d * d;
              }
              sq_err_[s] = sq;
            }
            ht = fixed;
            ht.noalias() += at * bm_;
            SigmoidInPlace(ht.data(), F);
            if (step + 1 < cd_steps) SampleHidden(nb, s, ht.data());
          }
          g0_.row(si).noalias() = (bm_ * h0.transpose()).transpose();
          gt_.row(si).noalias() = (bm_ * ht.transpose()).transpose();
        }
      },
      work_cost_.data(), kPiecesPerThread);
}

}  // namespace internal
}  // namespace rbmrec
