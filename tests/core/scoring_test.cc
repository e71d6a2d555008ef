#include "core/scoring.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/fit.h"
#include "gtest/gtest.h"
#include "tests/core/synthetic.h"

namespace rbmrec {
namespace {

TEST(PredictAll, MatchesModelPredictItemByItem) {
  Dataset ds;
  for (int u = 0; u < 50; ++u) {
    for (int i = 0; i < 30; ++i) {
      if ((u * 5 + i * 3) % 4 == 0) continue;
      Rating r;
      r.user = ds.users.GetOrAdd(absl::StrCat("u", u));
      r.item = ds.items.GetOrAdd(absl::StrCat("i", i));
      r.k = static_cast<uint8_t>(((i % 2) == (u % 2)) ? 4 : 0);
      ds.ratings.push_back(r);
    }
  }
  ds.items.GetOrAdd("never-rated");  // an untrained item -> fallback row
  TrainOptions o;
  o.hidden = 7;
  o.max_epochs = 5;
  o.threads = 1;
  o.ensemble = 2;
  absl::StatusOr<Model> model = FitModel(ds, o);
  ASSERT_TRUE(model.ok()) << model.status();
  UserRatings user;
  user.items = {0, 3, 7};
  user.ks = {4, 0, 2};
  ASSERT_GT(model->item_rbm().F, 0);
  std::vector<int32_t> all(static_cast<size_t>(model->num_items()));
  for (int32_t i = 0; i < model->num_items(); ++i) {
    all[static_cast<size_t>(i)] = i;
  }
  const int K = model->K();
  ScoringScratch scratch;
  // A new user (U-RBM alone) and a training user (U and I mixed).
  for (int32_t model_user : {-1, 3}) {
    for (PredictMethod method :
         {PredictMethod::kExact, PredictMethod::kMeanField}) {
      RowMatrixXf got, u_only;
      PredictAll(*model, model_user, user.view(), method, &got, &scratch);
      std::vector<float> want(all.size() * static_cast<size_t>(K));
      model->Predict(model_user, user.view(), all, method, want.data(),
                     nullptr);
      ASSERT_EQ(got.rows(), model->num_items());
      ASSERT_EQ(got.cols(), K);
      for (int32_t i = 0; i < model->num_items(); ++i) {
        for (int k = 0; k < K; ++k) {
          EXPECT_NEAR(got(i, k),
                      want[static_cast<size_t>(i) * static_cast<size_t>(K) +
                           static_cast<size_t>(k)],
                      1e-5)
              << "user " << model_user << " item " << i;
        }
      }
      PredictAll(*model, -1, user.view(), method, &u_only, &scratch);
      if (model_user >= 0 && model->params().user_weight < 1.0f) {
        // The item-based part really changes the answer.
        EXPECT_GT((got - u_only).cwiseAbs().maxCoeff(), 1e-4f);
      }
    }
  }
}

TEST(ScoreAllMeanField, IsTheExpectationOfPredictAll) {
  Dataset ds;
  for (int u = 0; u < 40; ++u) {
    for (int i = 0; i < 25; ++i) {
      if ((u * 3 + i * 5) % 3 == 0) continue;
      Rating r;
      r.user = ds.users.GetOrAdd(absl::StrCat("u", u));
      r.item = ds.items.GetOrAdd(absl::StrCat("i", i));
      r.k = static_cast<uint8_t>((u + i) % 5);
      ds.ratings.push_back(r);
    }
  }
  ds.items.GetOrAdd("never-rated");
  TrainOptions o;
  o.hidden = 6;
  o.max_epochs = 4;
  o.threads = 1;
  o.mf_factors = 0;  // the RBMs' part: see ScoreAllMeanField
  for (int ensemble : {1, 2}) {
    o.ensemble = ensemble;
    absl::StatusOr<Model> model = FitModel(ds, o);
    ASSERT_TRUE(model.ok()) << model.status();
    *model = WithUserWeight(*std::move(model), 0.4f);  // exercise the mix
    UserRatings user;
    user.items = {1, 4, 9};
    user.ks = {0, 4, 2};
    const int K = model->K();
    // Expected rating, then P(rating index >= 3).
    std::vector<std::vector<float>> all_values = {{1, 2, 3, 4, 5},
                                                  {0, 0, 0, 1, 1}};
    for (int32_t model_user : {-1, 2}) {
      for (const std::vector<float>& values : all_values) {
        RowMatrixXf probs;
        ScoringScratch scratch;
        PredictAll(*model, model_user, user.view(), PredictMethod::kMeanField,
                   &probs, &scratch);
        std::vector<float> scores(static_cast<size_t>(model->num_items()));
        ScoreAllMeanField(*model, model_user, user.view(), values.data(),
                          scores.data(), &scratch);
        for (int32_t i = 0; i < model->num_items(); ++i) {
          if (!model->Trained(i)) {
            EXPECT_TRUE(std::isnan(scores[static_cast<size_t>(i)]));
            continue;
          }
          float want = 0;
          for (int k = 0; k < K; ++k) want += probs(i, k) * values[k];
          EXPECT_NEAR(scores[static_cast<size_t>(i)], want, 1e-5)
              << "ensemble " << ensemble << " user " << model_user << " item "
              << i;
        }
      }
    }
  }
}

// Model::PredictWith with MemberInputs computed beforehand (what the server
// keeps per user) is Model::Predict bit for bit, and both are the
// documented formula step by step: the members' distributions from their
// hidden inputs averaged, then the I-RBM part mixed in with user_weight, the
// fallback for untrained items.
TEST(PredictWith, IsPredictAndTheFormulaBitForBit) {
  Dataset ds;
  for (int u = 0; u < 40; ++u) {
    for (int i = 0; i < 25; ++i) {
      if ((u * 7 + i * 3) % 3 == 0) continue;
      Rating r;
      r.user = ds.users.GetOrAdd(absl::StrCat("u", u));
      r.item = ds.items.GetOrAdd(absl::StrCat("i", i));
      r.k = static_cast<uint8_t>((u * i) % 5);
      ds.ratings.push_back(r);
    }
  }
  ds.items.GetOrAdd("never-rated");
  TrainOptions o;
  o.hidden = 13;  // not a multiple of 8
  o.max_epochs = 3;
  o.threads = 1;
  o.mf_factors = 0;  // the factorisation's blend: PredictWith.TiltsToTheBlend
  o.ensemble = 2;
  absl::StatusOr<Model> fit = FitModel(ds, o);
  ASSERT_TRUE(fit.ok()) << fit.status();
  // A weight that depends on the user's and the item's rating counts.
  constexpr float kBase = 0.3f, kPerLogUser = 0.05f, kPerLogItem = -0.04f;
  const Model model =
      WithUserWeight(*std::move(fit), kBase, kPerLogUser, kPerLogItem);
  UserRatings user;
  user.items = {0, 2, 5, 11};
  user.ks = {1, 4, 0, 3};
  const VisibleSet v = user.view();
  const int K = model.K();
  const std::vector<int32_t> query = {3, 24, 25, -1, 7, 0};
  std::vector<float> x;
  model.MemberInputs(v, &x);
  ASSERT_EQ(x.size(), static_cast<size_t>(2 * o.hidden));
  Model::Scratch scratch;
  for (int32_t model_user : {-1, 4}) {
    for (PredictMethod method :
         {PredictMethod::kExact, PredictMethod::kMeanField}) {
      const size_t n = query.size() * static_cast<size_t>(K);
      std::vector<float> got(n), want(n), ref(n, 0.0f);
      std::vector<bool> got_fb, want_fb;
      model.PredictWith(model_user, v, x.data(), query, method, got.data(),
                        &got_fb, &scratch);
      model.Predict(model_user, v, query, method, want.data(), &want_fb);
      // The formula with the building blocks of core/rbm.h.
      const float inv = 1.0f / static_cast<float>(model.members().size());
      std::vector<float> probs(static_cast<size_t>(K));
      // The exact rule through the model's exp(W) tables (ExactLogit).
      ExpInput in;
      for (size_t e = 0; e < model.members().size(); ++e) {
        const RbmParams& p = model.members()[e];
        ASSERT_FALSE(model.member_exp(e).ok.empty());
        std::vector<float> h(static_cast<size_t>(p.F));
        HiddenInput(p, v, h.data());
        if (method == PredictMethod::kMeanField) SigmoidInPlace(h.data(), p.F);
        SetExpInput(h.data(), p.F, &in);
        for (size_t q = 0; q < query.size(); ++q) {
          if (!model.Trained(query[q])) continue;
          if (method == PredictMethod::kMeanField) {
            PredictMeanField(p, h.data(), query[q], probs.data());
          } else {
            PredictExactFromExp(p, model.member_exp(e), in.view(), h.data(),
                                query[q], probs.data());
          }
          for (int k = 0; k < K; ++k) ref[q * K + k] += inv * probs[k];
        }
      }
      const RbmParams& ip = model.item_rbm();
      std::vector<float> fb(static_cast<size_t>(K));
      model.FallbackDistribution(v, fb.data());
      for (size_t q = 0; q < query.size(); ++q) {
        const int32_t item = query[q];
        if (!model.Trained(item)) {
          std::copy(fb.begin(), fb.end(), ref.begin() + q * K);
          continue;
        }
        if (!model.UsesItemRbm(model_user, item)) continue;
        uint32_t count = 0;
        for (int k = 0; k < K; ++k) {
          count += model.item_hist()[static_cast<size_t>(item) * K + k];
        }
        const float w = model.UserWeight(v.n, item);
        EXPECT_NEAR(
            w,
            std::clamp(kBase +
                           kPerLogUser * std::log1p(static_cast<float>(v.n)) +
                           kPerLogItem * std::log1p(static_cast<float>(count)),
                       0.0f, 1.0f),
            1e-6f);
        EXPECT_GT(w, 0.0f);
        EXPECT_LT(w, kBase);
        if (method == PredictMethod::kMeanField) {
          std::vector<float> h(static_cast<size_t>(ip.F));
          for (int j = 0; j < ip.F; ++j) h[j] = model.item_hT()(j, item);
          PredictMeanField(ip, h.data(), model_user, probs.data());
        } else {
          const float* xi = model.item_x().row(item).data();
          SetExpInput(xi, ip.F, &in);
          PredictExactFromExp(ip, model.item_rbm_exp(), in.view(), xi,
                              model_user, probs.data());
        }
        for (int k = 0; k < K; ++k) {
          ref[q * K + k] = w * ref[q * K + k] + (1 - w) * probs[k];
        }
      }
      EXPECT_EQ(got, want) << "user " << model_user;
      EXPECT_EQ(got, ref) << "user " << model_user;
      EXPECT_EQ(got_fb, want_fb);
      EXPECT_EQ(got_fb,
                std::vector<bool>({false, false, true, true, false, false}));
    }
  }
}

// With the matrix factorisation (core/mf.h), every trained item's
// distribution is the RBMs' (the same model without it) tilted to the
// blended mean intercept + rbm_weight * E + mf_weight * p_u . q_i, p_u
// folded in from the user's ratings; MemberInputs carries p_u after the
// members' inputs, PredictAll gives the same rows, and the scores of the
// stage-1 scorer stay the RBMs' part.
TEST(PredictWith, TiltsToTheBlendedMean) {
  auto s = testing_data::PlantedRatings(40, 20, 2, 0.5, 5);
  TrainOptions o;
  o.hidden = 8;
  o.max_epochs = 3;
  o.threads = 1;
  o.mf_factors = 0;
  absl::StatusOr<Model> fit = FitModel(s.train, o);
  ASSERT_TRUE(fit.ok()) << fit.status();
  const Model plain = *std::move(fit);
  ModelParams params = plain.params();
  MfOptions mo;
  mo.factors = 12;  // not a multiple of 8
  mo.epochs = 5;
  params.mf = TrainMf(s.train.ByUser(), s.train.scale, mo);
  ASSERT_FALSE(params.mf.empty());
  params.mf.intercept = -0.4f;
  params.mf.rbm_weight = 0.7f;
  params.mf.mf_weight = 0.45f;
  const Model model(std::move(params));
  ASSERT_TRUE(model.HasMf());
  const MfParams& mf = model.params().mf;
  UserRatings user;
  user.items = {5, 1, 9, 14};
  user.ks = {4, 0, 3, 1};
  const VisibleSet v = user.view();
  std::vector<float> x, plain_x;
  model.MemberInputs(v, &x);
  plain.MemberInputs(v, &plain_x);
  ASSERT_EQ(x.size(), plain_x.size() + 12 + 1);
  EXPECT_TRUE(std::equal(plain_x.begin(), plain_x.end(), x.begin()));
  std::vector<float> p(12);
  EXPECT_EQ(FoldInUser(mf, model.scale(), v, p.data()), 4);
  EXPECT_TRUE(std::equal(p.begin(), p.end(), x.begin() + plain_x.size()));
  EXPECT_EQ(x.back(), 1.0f);  // the factor used ratings: blended
  const int K = model.K();
  std::vector<int32_t> query;
  for (int32_t i = 0; i < model.num_items(); ++i) query.push_back(i);
  for (int32_t model_user : {-1, 3}) {
    const size_t n = query.size() * static_cast<size_t>(K);
    std::vector<float> got(n), rbm(n);
    model.Predict(model_user, v, query, PredictMethod::kExact, got.data(),
                  nullptr);
    plain.Predict(model_user, v, query, PredictMethod::kExact, rbm.data(),
                  nullptr);
    RowMatrixXf all;
    ScoringScratch scratch;
    PredictAll(model, model_user, v, PredictMethod::kExact, &all, &scratch);
    int tilted = 0;
    for (size_t q = 0; q < query.size(); ++q) {
      float* want = rbm.data() + q * K;
      const double e = model.Expectation(want);
      const double target = mf.intercept + mf.rbm_weight * e +
                            mf.mf_weight * MfScore(mf, p.data(), query[q]);
      TiltToMean(model.scale(), target, want);
      for (int k = 0; k < K; ++k) {
        EXPECT_EQ(got[q * K + k], want[k]) << "item " << q;
        EXPECT_NEAR(all(static_cast<Eigen::Index>(q), k), want[k], 1e-5);
      }
      const double lo = model.scale().Value(0);
      const double hi = model.scale().Value(K - 1);
      EXPECT_NEAR(
          model.Expectation(got.data() + q * K),
          std::clamp(target, lo + 1e-3 * (hi - lo), hi - 1e-3 * (hi - lo)),
          1e-4);
      tilted += std::abs(model.Expectation(got.data() + q * K) - e) > 1e-3;
    }
    EXPECT_GT(tilted, 0);  // the blend moved some means
  }
  // A user with no rating the factorisation knows (none, or only items
  // without a factor) has only the start as a factor: not blended, the
  // RBMs' distributions as they are.
  UserRatings unknown;
  unknown.items = {19};
  unknown.ks = {2};
  ModelParams no_19 = model.params();
  no_19.mf.trained[19] = 0;
  const Model partial(std::move(no_19));
  for (const VisibleSet& empty : {VisibleSet{}, unknown.view()}) {
    const Model& m = empty.n == 0 ? model : partial;
    std::vector<float> ex;
    m.MemberInputs(empty, &ex);
    EXPECT_EQ(ex.back(), 0.0f);
    const size_t n = query.size() * static_cast<size_t>(K);
    std::vector<float> got(n), rbm(n);
    m.Predict(-1, empty, query, PredictMethod::kExact, got.data(), nullptr);
    plain.Predict(-1, empty, query, PredictMethod::kExact, rbm.data(), nullptr);
    EXPECT_EQ(got, rbm);
  }
}

// Thread-safe with a scratch per thread: every thread's scores are those of
// the same call made alone, bit for bit.
TEST(ScoreAllMeanField, ConcurrentCallersGetTheirOwnScoresBitForBit) {
  Dataset ds;
  for (int u = 0; u < 60; ++u) {
    for (int i = 0; i < 40; ++i) {
      if ((u * 7 + i * 11) % 4 == 0) continue;
      Rating r;
      r.user = ds.users.GetOrAdd(absl::StrCat("u", u));
      r.item = ds.items.GetOrAdd(absl::StrCat("i", i));
      r.k = static_cast<uint8_t>((u + 2 * i) % 5);
      ds.ratings.push_back(r);
    }
  }
  TrainOptions o;
  o.hidden = 16;
  o.max_epochs = 2;
  o.threads = 1;
  o.ensemble = 2;
  absl::StatusOr<Model> model = FitModel(ds, o);
  ASSERT_TRUE(model.ok()) << model.status();
  const int32_t m = model->num_items();
  const std::vector<float> values = {1, 2, 3, 4, 5};
  constexpr int kThreads = 8;
  std::vector<UserRatings> users(kThreads);
  std::vector<std::vector<float>> alone(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    for (int32_t i = t; i < m; i += 3 + t) {
      users[t].items.push_back(i);
      users[t].ks.push_back(static_cast<uint8_t>((i + t) % 5));
    }
    ScoringScratch scratch;
    alone[t].resize(static_cast<size_t>(m));
    ScoreAllMeanField(*model, t, users[t].view(), values.data(),
                      alone[t].data(), &scratch);
  }
  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ScoringScratch scratch;
      std::vector<float> got(static_cast<size_t>(m));
      for (int rep = 0; rep < 200; ++rep) {
        ScoreAllMeanField(*model, t, users[t].view(), values.data(), got.data(),
                          &scratch);
        for (int32_t i = 0; i < m; ++i) {
          const float a = got[static_cast<size_t>(i)];
          const float b = alone[t][static_cast<size_t>(i)];
          if (!(a == b || (std::isnan(a) && std::isnan(b)))) ++mismatches[t];
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(mismatches[t], 0) << t;
}

}  // namespace
}  // namespace rbmrec
