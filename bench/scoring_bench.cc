// rbmrec-scoring-bench: CPU cost of the serving-side scoring steps, without
// gRPC, on a model trained from a ratings file (or loaded from a model
// file). Prints microseconds per call (best of --rounds rounds, each over
// --users users; thread CPU time) for
//   predict10_exact / predict10_meanfield  Model::Predict of 10 items
//   user_inputs                           Model::MemberInputs: the user's
//                                         hidden inputs and factorisation
//                                         fold-in, the part of Predict the
//                                         server caches per user
//   fold_in                               Model::MfInput: the fold-in alone
//                                         (in user_inputs; 0 without the
//                                         factorisation)
//   predict10_cached                      Model::PredictWith of 10 items
//                                         given those inputs (exact): what
//                                         a PredictRatings costs the server
//                                         on a cache hit
//   all_meanfield                         PredictAll, every item
//   score_all_meanfield                   ScoreAllMeanField (Recommend's
//                                         first stage: scores only)
//   all_exact                             PredictAll, every item, Eq. 7
//   rescore50_exact                       Model::Predict of 50 items
//   urbm_matvec / irbm_logits             the two products inside
//                                         score_all_meanfield: W * h of the
//                                         (first) user-based RBM, all items,
//                                         and the I-RBM's logits of all items
//                                         (Model::ItemRbmMeanFieldLogits)
// and, for Recommend's two-stage ranking (mean field for all items, exact
// for the best C), how many of the exact top 10 each C recovers.
//
// rank_candidates500 / rank_tenth: p(rated) x p(>= t) among a fixed
// pseudo-random 500 items / tenth of the items (Recommend's filters).
//
// rank_regression_at_least: Recommend's default for a model with the item
// regression (core/item_regression.h); item_regression_scores: its first
// step, every item's score, against rated_probabilities, the p(rated) step
// of rank_rated_at_least (both 0 for a model without it).
//
//   rbmrec-scoring-bench --train u1.base [--model FILE] [--users 200]
//                        [--rounds 5] [--json]

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/cpu_check.h"
#include "core/fit.h"
#include "core/item_filter.h"
#include "core/item_regression.h"
#include "core/model_file.h"
#include "core/rbm.h"
#include "core/readers.h"
#include "core/recommend.h"
#include "core/scoring.h"

namespace rbmrec {
namespace {

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "rbmrec-scoring-bench: %s\n", message.c_str());
  std::exit(1);
}

struct User {
  int32_t index;
  UserRatings ratings;
};

// This thread's CPU time in microseconds (steadier than wall time on a
// shared machine).
double ThreadCpuUs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 +
         static_cast<double>(ts.tv_nsec) / 1e3;
}

// Best-of-rounds CPU microseconds per call of fn(user).
template <typename Fn>
double TimeUs(const std::vector<User>& users, int rounds, Fn fn) {
  double best = 1e300;
  for (int r = 0; r < rounds; ++r) {
    const double t0 = ThreadCpuUs();
    for (const User& u : users) fn(u);
    const double us = (ThreadCpuUs() - t0) / static_cast<double>(users.size());
    best = std::min(best, us);
  }
  return best;
}

// The top n unrated items by expected rating of `probs` (m x K) among
// `candidates` (all items when empty).
std::vector<int32_t> TopN(const Model& model, const RowMatrixXf& probs,
                          const std::vector<uint8_t>& rated, size_t n) {
  std::vector<std::pair<double, int32_t>> s;
  for (int32_t i = 0; i < model.num_items(); ++i) {
    if (rated[static_cast<size_t>(i)] || !model.Trained(i)) continue;
    s.emplace_back(-model.Expectation(probs.row(i).data()), i);
  }
  const size_t top = std::min(n, s.size());
  std::partial_sort(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(top),
                    s.end());
  std::vector<int32_t> out;
  for (size_t r = 0; r < top; ++r) out.push_back(s[r].second);
  return out;
}

int Main(int argc, char** argv) {
  std::string train_path, model_path;
  int n_users = 200, rounds = 5;
  bool json = false;
  CLI::App app(
      "CPU cost of the serving-side scoring steps, without gRPC, on a model "
      "trained from a ratings file (or loaded from a model file).",
      "rbmrec-scoring-bench");
  app.option_defaults()->always_capture_default();
  app.add_option("--train", train_path, "training ratings file (required)");
  app.add_option("--model", model_path,
                 "model file to load instead of training one");
  app.add_option("--users", n_users, "users timed per round")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--rounds", rounds, "rounds; the best is reported")
      ->check(CLI::Range(1, 1000));
  app.add_flag("--json", json, "print one JSON object");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 1;
  }
  if (train_path.empty()) Die("--train FILE is required (see --help)");

  absl::StatusOr<ReadResult> read = ReadRatingsFile(train_path, ReadOptions{});
  if (!read.ok()) Die(std::string(read.status().message()));
  std::vector<double> values;
  for (const RawRating& r : read->rows) values.push_back(r.rating);
  absl::StatusOr<RatingScale> scale = RatingScale::Infer(values);
  if (!scale.ok()) Die(std::string(scale.status().message()));
  absl::StatusOr<Dataset> ds = DatasetFromRaw(read->rows, *scale, train_path);
  if (!ds.ok()) Die(std::string(ds.status().message()));
  absl::StatusOr<Model> model = model_path.empty()
                                    ? FitModel(*ds, TrainOptions{})
                                    : LoadModelFile(model_path);
  if (!model.ok()) Die(std::string(model.status().message()));

  // The first n_users training users, with their ratings mapped to the
  // model's item indices.
  const SparseRatings by_user = ds->ByUser();
  std::vector<User> users;
  for (int32_t u = 0;
       u < by_user.rows && static_cast<int>(users.size()) < n_users; ++u) {
    User user;
    user.index = model->users().Find(ds->users.Name(u));
    for (int64_t r = by_user.offsets[u]; r < by_user.offsets[u + 1]; ++r) {
      const int32_t item = model->items().Find(ds->items.Name(by_user.col[r]));
      if (item < 0) continue;
      user.ratings.items.push_back(item);
      user.ratings.ks.push_back(by_user.k[r]);
    }
    users.push_back(std::move(user));
  }
  const int K = model->K();
  const int32_t m = model->num_items();
  auto query = [&](size_t n, int32_t salt) {
    std::vector<int32_t> q;
    for (size_t i = 0; i < n; ++i) {
      q.push_back(static_cast<int32_t>((i * 7919 + static_cast<size_t>(salt)) %
                                       static_cast<size_t>(m)));
    }
    return q;
  };
  std::vector<float> out(50 * static_cast<size_t>(K));
  RowMatrixXf all;
  double sink = 0;
  ScoringScratch scratch;
  auto predict = [&](size_t n, PredictMethod method) {
    return [&, n, method](const User& u) {
      const std::vector<int32_t> q = query(n, u.index);
      model->Predict(u.index, u.ratings.view(), q, method, out.data(), nullptr);
      sink += out[0];
    };
  };
  auto score_all = [&](PredictMethod method) {
    return [&, method](const User& u) {
      PredictAll(*model, u.index, u.ratings.view(), method, &all, &scratch);
      sink += all(0, 0);
    };
  };
  const double p10e = TimeUs(users, rounds, predict(10, PredictMethod::kExact));
  const double p10m =
      TimeUs(users, rounds, predict(10, PredictMethod::kMeanField));
  std::vector<std::vector<float>> inputs(users.size());
  size_t next_user = 0;
  const double user_inputs = TimeUs(users, rounds, [&](const User& u) {
    std::vector<float>& x = inputs[next_user++ % users.size()];
    model->MemberInputs(u.ratings.view(), &x);
    sink += x.empty() ? 0 : x[0];
  });
  std::vector<float> mf_x(model->MfInputSize());
  const double fold_in =
      model->HasMf() ? TimeUs(users, rounds,
                              [&](const User& u) {
                                model->MfInput(u.ratings.view(), mf_x.data());
                                sink += mf_x[0];
                              })
                     : 0;
  Model::Scratch predict_scratch;
  next_user = 0;
  const double p10c = TimeUs(users, rounds, [&](const User& u) {
    const std::vector<int32_t> q = query(10, u.index);
    model->PredictWith(
        u.index, u.ratings.view(), inputs[next_user++ % users.size()].data(), q,
        PredictMethod::kExact, out.data(), nullptr, &predict_scratch);
    sink += out[0];
  });
  const double allm =
      TimeUs(users, rounds, score_all(PredictMethod::kMeanField));
  std::vector<float> rating_values(static_cast<size_t>(K)),
      scores(static_cast<size_t>(m));
  for (int k = 0; k < K; ++k) {
    rating_values[static_cast<size_t>(k)] =
        static_cast<float>(model->scale().Value(k));
  }
  const double scorem = TimeUs(users, rounds, [&](const User& u) {
    ScoreAllMeanField(*model, u.index, u.ratings.view(), rating_values.data(),
                      scores.data(), &scratch);
    sink += scores[0];
  });
  double urbm = 0, irbm = 0;
  if (!model->members().empty()) {
    const RbmParams& p0 = model->members()[0];
    Eigen::VectorXf h(p0.F), z(p0.W.rows());
    urbm = TimeUs(users, rounds, [&](const User& u) {
      HiddenInput(p0, u.ratings.view(), h.data());
      SigmoidInPlace(h.data(), p0.F);
      z.noalias() = p0.W * h;
      sink += z[0];
    });
  }
  RowMatrixXf logits;
  bool any_irbm = false;
  irbm = TimeUs(users, rounds, [&](const User& u) {
    if (!model->ItemRbmServes(u.index)) return;
    any_irbm = true;
    model->ItemRbmMeanFieldLogits(u.index, &logits);
    sink += logits(0, 0);
  });
  if (!any_irbm) irbm = 0;
  const double alle =
      TimeUs(users, std::min(rounds, 2), score_all(PredictMethod::kExact));
  const double r50 = TimeUs(users, rounds, predict(50, PredictMethod::kExact));
  // Recommend's whole ranking (core/recommend.h), top 10, exact: by
  // expected rating (two stages) and by the default p(rated) x p(>= t)
  // (bounded search over items in decreasing p(rated)); and p(rated) alone.
  // `filter` (may be null): Recommend's filters (core/item_filter.h), e.g.
  // a candidate set; the same ranking restricted to the items it allows.
  auto rank = [&](RankBy by, const ItemFilter* filter = nullptr) {
    return [&, by, filter](const User& u) {
      RankOptions ro;
      ro.by = by;
      ro.filter = filter;
      ro.k0 = DefaultThresholdIndex(*model);
      const std::vector<Ranked> r = RankItems(*model, u.index, u.ratings.view(),
                                              u.ratings.items, ro, &scratch);
      sink += r.empty() ? 0 : r[0].score;
    };
  };
  const double rank_expected = TimeUs(users, rounds, rank(RankBy::kExpected));
  const bool has_rated = model->HasRatedRbm();
  const double rank_rated_at_least =
      has_rated ? TimeUs(users, rounds, rank(RankBy::kRatedAtLeast)) : 0;
  // The default ranking among a fixed pseudo-random sample of items: 500
  // (a candidate set, as `service_bench.sh --ml1m` sends) and a tenth of
  // the items (about one genre's share).
  auto sample_filter = [&](int32_t count) {
    std::vector<uint8_t> mask(static_cast<size_t>(m), 0);
    std::mt19937 rng(7);
    std::vector<int32_t> order(static_cast<size_t>(m));
    for (int32_t i = 0; i < m; ++i) order[static_cast<size_t>(i)] = i;
    std::shuffle(order.begin(), order.end(), rng);
    for (int32_t i = 0; i < std::min(count, m); ++i) {
      mask[static_cast<size_t>(order[static_cast<size_t>(i)])] = 1;
    }
    return ItemFilter::FromMask(mask);
  };
  const ItemFilter cand500 = sample_filter(500);
  const ItemFilter tenth = sample_filter(std::max<int32_t>(1, m / 10));
  const double rank_cand500 =
      has_rated ? TimeUs(users, rounds, rank(RankBy::kRatedAtLeast, &cand500))
                : 0;
  const double rank_tenth =
      has_rated ? TimeUs(users, rounds, rank(RankBy::kRatedAtLeast, &tenth))
                : 0;
  std::vector<float> p_rated(static_cast<size_t>(m));
  const double rated_probs =
      has_rated ? TimeUs(users, rounds,
                         [&](const User& u) {
                           RatedProbabilities(*model, u.ratings.view(),
                                              p_rated.data(), &scratch);
                           sink += p_rated[0];
                         })
                : 0;

  double regression_us = 0, rank_regression = 0;
  if (model->HasItemRegression()) {
    std::vector<float> e(static_cast<size_t>(m));
    regression_us = TimeUs(users, rounds, [&](const User& u) {
      ItemRegressionScores(model->item_regression(), u.ratings.items.data(),
                           static_cast<int64_t>(u.ratings.items.size()),
                           e.data());
      sink += e[0];
    });
    rank_regression = TimeUs(users, rounds, rank(RankBy::kRegressionAtLeast));
  }

  // Two-stage ranking quality: |exact top 10 ∩ (mean-field top C, re-scored
  // exactly, top 10)| / 10, averaged over the users.
  const std::vector<size_t> cs = {10, 20, 30, 50, 100};
  std::vector<double> recall(cs.size(), 0);
  RowMatrixXf exact_all, mf_all;
  for (const User& u : users) {
    std::vector<uint8_t> rated(static_cast<size_t>(m), 0);
    for (int32_t i : u.ratings.items) rated[static_cast<size_t>(i)] = 1;
    PredictAll(*model, u.index, u.ratings.view(), PredictMethod::kExact,
               &exact_all, &scratch);
    PredictAll(*model, u.index, u.ratings.view(), PredictMethod::kMeanField,
               &mf_all, &scratch);
    const std::vector<int32_t> want = TopN(*model, exact_all, rated, 10);
    for (size_t c = 0; c < cs.size(); ++c) {
      const std::vector<int32_t> cand = TopN(*model, mf_all, rated, cs[c]);
      // Re-score the candidates exactly (rows copied from exact_all, which
      // PredictAll computed with the same rule) and take their top 10.
      std::vector<std::pair<double, int32_t>> s;
      for (int32_t i : cand) {
        s.emplace_back(-model->Expectation(exact_all.row(i).data()), i);
      }
      std::sort(s.begin(), s.end());
      size_t hits = 0;
      for (size_t r = 0; r < std::min<size_t>(10, s.size()); ++r) {
        if (std::find(want.begin(), want.end(), s[r].second) != want.end()) {
          ++hits;
        }
      }
      recall[c] += static_cast<double>(hits) /
                   static_cast<double>(std::max<size_t>(1, want.size()));
    }
  }
  for (double& r : recall) r /= static_cast<double>(users.size());

  if (json) {
    std::string rec;
    for (size_t c = 0; c < cs.size(); ++c) {
      absl::StrAppendFormat(&rec, "%s\"%d\":%.4f", c ? "," : "", cs[c],
                            recall[c]);
    }
    std::printf(
        "{\"items\":%d,\"K\":%d,\"hidden\":%d,\"users\":%d,"
        "\"predict10_exact_us\":%.2f,\"predict10_meanfield_us\":%.2f,"
        "\"user_inputs_us\":%.2f,\"fold_in_us\":%.2f,"
        "\"predict10_cached_us\":%.2f,"
        "\"all_meanfield_us\":%.2f,\"score_all_meanfield_us\":%.2f,"
        "\"all_exact_us\":%.2f,"
        "\"rescore50_exact_us\":%.2f,\"urbm_matvec_us\":%.2f,"
        "\"irbm_logits_us\":%.2f,\"rank_expected_us\":%.2f,"
        "\"rank_rated_at_least_us\":%.2f,\"rank_candidates500_us\":%.2f,"
        "\"rank_tenth_us\":%.2f,\"rated_probabilities_us\":%.2f,"
        "\"item_regression_scores_us\":%.2f,"
        "\"rank_regression_at_least_us\":%.2f,"
        "\"top10_recall_by_candidates\":{%s}}\n",
        m, K, model->members().empty() ? 0 : model->members()[0].F,
        static_cast<int>(users.size()), p10e, p10m, user_inputs, fold_in, p10c,
        allm, scorem, alle, r50, urbm, irbm, rank_expected, rank_rated_at_least,
        rank_cand500, rank_tenth, rated_probs, regression_us, rank_regression,
        rec.c_str());
  } else {
    std::printf("model: %d items, K %d, %zu users timed (best of %d rounds)\n",
                m, K, users.size(), rounds);
    std::printf("  predict10_exact      %9.2f us\n", p10e);
    std::printf("  predict10_meanfield  %9.2f us\n", p10m);
    std::printf("  user_inputs          %9.2f us  (in each predict10)\n",
                user_inputs);
    std::printf("  fold_in              %9.2f us  (in user_inputs)\n", fold_in);
    std::printf(
        "  predict10_cached     %9.2f us  (predict10_exact, inputs cached)\n",
        p10c);
    std::printf("  all_meanfield        %9.2f us\n", allm);
    std::printf("  score_all_meanfield  %9.2f us\n", scorem);
    std::printf("  all_exact            %9.2f us\n", alle);
    std::printf("  rescore50_exact      %9.2f us\n", r50);
    std::printf("  urbm_matvec          %9.2f us  (in score_all_meanfield)\n",
                urbm);
    std::printf("  irbm_logits          %9.2f us  (in score_all_meanfield)\n",
                irbm);
    std::printf(
        "  rank_expected        %9.2f us  (Recommend top 10, two stages)\n",
        rank_expected);
    std::printf(
        "  rank_rated_at_least  %9.2f us  (Recommend top 10, the default "
        "without the item regression)\n",
        rank_rated_at_least);
    std::printf("  rank_candidates500   %9.2f us  (the same among 500 items)\n",
                rank_cand500);
    std::printf("  rank_tenth           %9.2f us  (the same among a tenth)\n",
                rank_tenth);
    std::printf("  rated_probabilities  %9.2f us  (in rank_rated_at_least)\n",
                rated_probs);
    std::printf(
        "  rank_regression_at_least %5.2f us  (Recommend top 10, default "
        "with the item regression)\n",
        rank_regression);
    std::printf(
        "  item_regression_scores %7.2f us  (in rank_regression_at_least)\n",
        regression_us);
    std::printf(
        "  exact top-10 recovered by mean-field top C + exact rescoring:\n");
    for (size_t c = 0; c < cs.size(); ++c) {
      std::printf("    C = %3zu: %.4f\n", cs[c], recall[c]);
    }
  }
  if (sink == 12345.678) std::puts("");  // keeps the timed work observable
  return 0;
}

}  // namespace
}  // namespace rbmrec

int main(int argc, char** argv) {
  if (!rbmrec::CpuSupported("rbmrec-scoring-bench")) return 1;
  return rbmrec::Main(argc, argv);
}
