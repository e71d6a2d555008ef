// rbmrec-eval: offline training and evaluation of the RBM on rating files.
//
//   rbmrec-eval --train FILE --test FILE [flags]
//   rbmrec-eval --ratings FILE --split 0.9 --seed S [flags]
//
// --predictions FILE writes each test rating's predicted rating, one a
// line in the test file's order (with --ratings: the held-out part's, after
// the seeded shuffle); bench/blend_peers.sh reads it.
//
// Per-epoch progress goes to stderr; with --json stdout is exactly one JSON
// object with the metrics and the hyper-parameters used:
//   rmse, mae, n_test, n_fallback, epochs_run, best_epoch, valid_rmse,
//   train_seconds, train_ratings, train_ratings_per_second, peak_rss_mb,
//   scale, params {every hyper-parameter};
//   nll, ece: mean negative log-likelihood (nats) of the true rating and
//     classwise calibration error of the predicted distributions;
//     hist_nll, hist_ece: the same for the item histogram baseline;
//   item_regression {items, of_items, lambda, seconds, mb} when the model
//     has the item regression (core/item_regression.h; fitted with the
//     rated RBM over the items its size rule allows, all of_items or the
//     most-rated `items` (--item-regression -1, the default), or over every
//     item (1); mb is its P's; its seconds are part of train_seconds);
//   rated {hidden, epochs_run, valid_ndcg, seconds} when the ranking model
//     (the rated RBM) was trained: with --topn, --save-model or
//     --rated-hidden; its seconds are part of train_seconds;
//   with --topn N: topn {n, relevant, users, and per ranking NAME
//     {precision, recall, ndcg} at N, and known {precision, recall, ndcg,
//     users}: the same in ../shared/tools/peer-ease.py's protocol, where
//     relevant test items unknown to training are dropped, not misses};
//   reliability {bins, values: [the K rating values], model: [K entries,
//     one per value, each {count: [bins], predicted: [bins], observed:
//     [bins]}], hist: [the same for the baseline]}: the tables behind ece
//     and hist_ece (core/metrics.h ReliabilityTable; bin b covers
//     predicted p in [b / bins, (b + 1) / bins); predicted = mean p in the
//     bin, observed = share of its test ratings equal to the value; both 0
//     in an empty bin);
//   with --topn N --cold-start: topn_cold {the same as topn, every user
//     ranked as a user without ratings: no visible units, no parameters};
//   with --topn N: topn_at {per ranking NAME, in the order of topn,
//     {precision: [N], recall: [N], ndcg: [N]}}, element j at cut-off
//     j + 1 (the last equals topn's);
//   with --similar MOVIES.DAT: similar {movies, queries, seed, protocol,
//     measures: {per NAME {hit10, queries, genre_agreement, build_ms,
//     query_ms {p50, p99, max}, query_cpu_ms {p50, p99}}}}: similar items
//     (core/similar.h) by the protocol of bench/similar_eval.h, the model's
//     measures first, then the item-item cosine and popularity anchors.
// bench/plots.sh draws the reliability and the topn_at curves as SVG.

#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/json_numbers.h"
#include "bench/similar_eval.h"
#include "core/cpu_check.h"
#include "core/fit.h"
#include "core/interned_ratings.h"
#include "core/item_regression.h"
#include "core/model_file.h"
#include "core/readers.h"
#include "core/rng.h"
#include "nlohmann/json.hpp"

namespace rbmrec {
namespace {

struct Args {
  std::string train, test, ratings, format = "auto", scale = "auto";
  std::string save_model, predictions, cd, predict = "exact";
  double split = 0.9;
  bool json = false, lenient = false, quiet = false;
  int topn = 0;             // 0: no ranking metrics
  bool cold_start = false;  // --cold-start: topn_cold too
  std::string similar;      // movies.dat for --similar; empty: off
  float similar_popularity = SimilarityOptions().popularity_weight;
  double relevant = 4.0;         // test ratings >= this are relevant
  std::string crbm_r = "train";  // --crbm-r: the conditional RBM's r
  TrainOptions o;
};

// The conditional RBM's extra items for --crbm-r train+test (the seed
// paper's set-up): each training user's test items known to the model,
// once each, as rows of the model's users.
SparseRatings TestExtras(const FitData& train,
                         const std::vector<TestRating>& test) {
  std::vector<Rating> pairs;
  for (const TestRating& t : test) {
    if (t.user >= 0 && t.item >= 0) pairs.push_back({t.user, t.item, 0});
  }
  return SparseRatings::FromRatings(train.users.size(), train.items.size(),
                                    pairs);
}

// A finite number (CLI11 would also take "nan" and "inf").
const CLI::Validator& Finite() {
  static const CLI::Validator v(
      [](std::string& text) {
        double d = 0;
        if (!absl::SimpleAtod(text, &d) || !std::isfinite(d)) {
          return absl::StrCat("expected a finite number, got '", text, "'");
        }
        return std::string();
      },
      "NUMBER");
  return v;
}

// 0..INT_MAX (CLI::NonNegativeNumber's message prints DBL_MAX).
CLI::Range NonNegative() {
  return CLI::Range(0, std::numeric_limits<int>::max());
}

// Binds every flag to `a`; defaults are the current values of `a` (the
// tuned TrainOptions).
void AddFlags(CLI::App* app, Args* a) {
  TrainOptions& o = a->o;
  app->option_defaults()->always_capture_default();
  app->add_option("--train", a->train, "training ratings file");
  app->add_option("--test", a->test, "held-out ratings file");
  app->add_option("--ratings", a->ratings,
                  "one ratings file to split (with --split, --seed)");
  app->add_option("--split", a->split, "training fraction for --ratings")
      ->check(Finite());
  app->add_option("--format", a->format, "auto|ml100k|dat|mlcsv|csv|tsv|space");
  app->add_option("--scale", a->scale, "MIN:MAX:STEP, or auto from the data");
  app->add_flag("--lenient", a->lenient, "skip and count malformed lines");
  app->add_option("--hidden", o.hidden,
                  "hidden units F (0 = the size rule: 100 up to ~230,000 "
                  "ratings, 100 * sqrt(ratings / 200,000) beyond, at most 200)")
      ->check(NonNegative());
  app->add_option("--epochs", o.max_epochs,
                  "maximum epochs (early stopping may end sooner)")
      ->check(NonNegative());
  app->add_option("--batch-size,--batch", o.batch_size,
                  "cases per mini-batch (0 = the size rule: 20 up to ~110,000 "
                  "ratings, 20 * sqrt(ratings / 100,000) beyond, at most 200)")
      ->check(NonNegative());
  app->add_option("--learning-rate,--lr", o.learning_rate,
                  "learning rate (0 = the size rule: 0.05 * sqrt(batch / 20))")
      ->check(Finite());
  app->add_option("--lr-decay", o.lr_decay, "learning-rate factor per epoch")
      ->check(Finite());
  app->add_option("--momentum", o.momentum, "momentum")->check(Finite());
  app->add_option("--weight-decay", o.weight_decay, "L2 weight decay on W")
      ->check(Finite());
  app->add_option("--init-std", o.init_std,
                  "standard deviation of the initial W")
      ->check(Finite());
  app->add_option("--cd-steps", a->cd,
                  "CD steps: T (default 1), auto, or a schedule like "
                  "1,3@20,5@30");
  app->add_flag("--per-item-normalize", o.per_item_normalize,
                "divide item gradients by their count in the batch "
                "(default false)");
  app->add_option("--validation", o.validation_fraction,
                  "fraction of each user's training ratings held out for "
                  "early stopping")
      ->check(Finite());
  app->add_option("--patience", o.patience,
                  "epochs without validation improvement before stopping")
      ->check(NonNegative());
  app->add_option("--min-improvement", o.min_improvement,
                  "relative fall of the validation RMSE that counts as an "
                  "improvement for --patience")
      ->check(Finite());
  app->add_flag("--ordinal", o.ordinal,
                "ordinal sharing: train W_i^k as U_i^0 + ... + U_i^k (default "
                "true; --ordinal=false turns it off)");
  app->add_option("--factors", o.factors,
                  "factored RBM: train W = A B through C factors (paper Eq. "
                  "12; -1 = the size rule: 32 from 500,000 ratings on, else "
                  "0 = unfactored)")
      ->check(CLI::Range(-1, 10000));
  app->add_option("--average", o.average,
                  "parameter averaging over epochs: validation and the model "
                  "use A = average * A + (1 - average) * params after every "
                  "epoch (0 = off)")
      ->check(Finite());
  app->add_flag("--conditional", o.conditional,
                "conditional RBM: the user-based RBMs' hidden units also see "
                "r, which items the user rated (or is asked about), through "
                "weights D (default false)");
  app->add_option("--crbm-r", a->crbm_r,
                  "with --conditional: r = the user's training items "
                  "(train), or those plus the user's test items (train+test, "
                  "the seed paper's set-up: the test items are in r in "
                  "training and prediction)")
      ->check(CLI::IsMember({"train", "train+test"}));
  app->add_option("--item-regression", o.item_regression,
                  "the item regression (EASE's closed form over which items "
                  "users rated), fitted with the rated RBM: -1 = over every "
                  "item when its items x items matrix fits the size rule, "
                  "else over the most-rated 4,096 (the default, as the "
                  "service's), 0 = never, 1 = over every item")
      ->check(CLI::Range(-1, 1));
  app->add_option("--item-lambda", o.item_lambda,
                  "the item regression's ridge penalty (0 = the rule, 40 x "
                  "sqrt(mean ratings per item))")
      ->check(Finite())
      ->check(CLI::NonNegativeNumber);
  app->add_option("--mf-factors", o.mf_factors,
                  "factors of the matrix factorisation blended into the "
                  "served distributions, kept when the blend lowers the "
                  "validation RMSE (0 = never)")
      ->check(CLI::Range(0, kMaxMfFactors));
  app->add_option("--mf-epochs", o.mf_epochs,
                  "the matrix factorisation's SGD passes")
      ->check(CLI::Range(1, kMaxMfEpochs));
  app->add_option("--mf-lambda", o.mf_lambda,
                  "the matrix factorisation's L2 penalty")
      ->check(Finite())
      ->check(CLI::NonNegativeNumber);
  app->add_option("--ensemble", o.ensemble,
                  "number of user-based RBMs averaged")
      ->check(NonNegative());
  app->add_flag("--item-based", o.item_based,
                "also train the item-based RBM and mix it in "
                "(default true; --item-based=false turns it off)");
  app->add_option("--rated-hidden", o.rated_hidden,
                  "hidden units of the rated RBM, the ranking model (p(rated) "
                  "rankings; -1 = the size rule, 0 = do not train it). Not "
                  "given: the size rule when --topn, --similar or "
                  "--save-model uses the model, else not trained (the RMSE "
                  "does not use it)")
      ->check(CLI::Range(-1, 10000));
  app->add_option("--rated-epochs", o.rated_max_epochs,
                  "upper bound on the rated RBM's epochs (early stopping "
                  "on validation NDCG ends sooner)")
      ->check(NonNegative());
  app->add_option("--rated-lr", o.rated_learning_rate,
                  "learning rate of the rated RBM")
      ->check(Finite());
  app->add_option("--rated-factors", o.rated_factors,
                  "the rated RBM trained factored through C factors (0 = "
                  "unfactored)")
      ->check(CLI::Range(0, 10000));
  app->add_option("--predict", a->predict, "exact|meanfield");
  app->add_option("--seed", o.seed, "random seed (same seed, same model)");
  app->add_option("--threads", o.threads, "worker threads (0 = all cores)")
      ->check(NonNegative());
  app->add_option("--save-model", a->save_model,
                  "write the trained model to this path");
  app->add_option("--predictions", a->predictions,
                  "write each test rating's predicted (expected) rating to "
                  "this file, one per line in the test file's order (with "
                  "--ratings: the held-out part's, shuffled by --seed), e.g. "
                  "to blend with another system's predictions");
  app->add_flag("--json", a->json,
                "print one JSON object with the results on stdout");
  app->add_flag("--quiet", a->quiet, "no per-epoch progress on stderr");
  app->add_option("--topn", a->topn,
                  "also rank N items for every test user with a relevant "
                  "test rating (candidates: items not rated in training) "
                  "and report precision@N, recall@N and NDCG@N of each "
                  "ranking beside a most-popular list (0: off)")
      ->check(CLI::Range(0, 10000));
  app->add_flag("--cold-start", a->cold_start,
                "with --topn: also rank every test user as a user without "
                "ratings (Recommend's cold start: the empty user's list "
                "beside the most-popular list), reported as topn_cold");
  app->add_option("--relevant", a->relevant,
                  "a test rating >= this value is relevant for --topn; also "
                  "the threshold of the p(rating >= t) ranking")
      ->check(Finite());
  app->add_option("--similar", a->similar,
                  "MOVIES.DAT: also evaluate similar items (core/similar.h) "
                  "by hit@10 and genre agreement beside the item-item "
                  "cosine and popularity anchors (bench/similar_eval.h); "
                  "trains the rated RBM");
  app->add_option("--similar-popularity", a->similar_popularity,
                  "popularity weight b of the similar items' default "
                  "measure (cosine + b log(1 + n), n the item's training "
                  "ratings)")
      ->check(Finite())
      ->check(CLI::Range(0.0, 1e9));
}

double PeakRssMb() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;
}

using ::rbmrec::bench::Fixed;
using ::rbmrec::bench::General;
using ::rbmrec::bench::Json;

// {"count": [...], "predicted": [...], "observed": [...]} of class k.
Json ReliabilityClassJson(const Reliability& r, int k) {
  Json count = Json::array(), predicted = Json::array(),
       observed = Json::array();
  for (int b = 0; b < r.bins; ++b) {
    const ReliabilityBin& bin = r.at(k, b);
    count.push_back(bin.count);
    predicted.push_back(Fixed(bin.mean_p, 6));
    observed.push_back(Fixed(bin.observed, 6));
  }
  return Json{
      {"count", count}, {"predicted", predicted}, {"observed", observed}};
}

// The "reliability" object (see the top of this file).
Json ReliabilityJson(const EvalMetrics& m, const RatingScale& scale) {
  Json out = Json::object();
  out["bins"] = m.reliability.bins;
  Json values = Json::array();
  for (int k = 0; k < m.reliability.K; ++k)
    values.push_back(General(scale.Value(k)));
  out["values"] = values;
  for (const auto& [name, r] :
       {std::pair<const char*, const Reliability*>{"model", &m.reliability},
        {"hist", &m.hist_reliability}}) {
    Json classes = Json::array();
    for (int k = 0; k < r->K; ++k) {
      classes.push_back(ReliabilityClassJson(*r, k));
    }
    out[name] = classes;
  }
  return out;
}

// EvaluateTopN's rankings (every user as a user without ratings when
// cold_start) as the "topn" object (see the top of this file) and text
// lines appended to *text.
std::vector<TopNResult> TopNSection(const Model& model,
                                    const SparseRatings& train_by_user,
                                    const std::vector<TestRating>& test,
                                    const Args& a, bool cold_start, Json* json,
                                    std::string* text) {
  int64_t users = 0;
  std::vector<TopNResult> topn =
      EvaluateTopN(model, train_by_user, test, a.relevant, a.topn, a.o.threads,
                   &users, cold_start);
  (*json)["n"] = a.topn;
  (*json)["relevant"] = General(a.relevant);
  (*json)["users"] = users;
  for (const TopNResult& r : topn) {
    (*json)[r.name] =
        Json{{"precision", Fixed(r.mean.precision, 6)},
             {"recall", Fixed(r.mean.recall, 6)},
             {"ndcg", Fixed(r.mean.ndcg, 6)},
             {"known", Json{{"precision", Fixed(r.known.precision, 6)},
                            {"recall", Fixed(r.known.recall, 6)},
                            {"ndcg", Fixed(r.known.ndcg, 6)},
                            {"users", r.known_users}}}};
    absl::StrAppendFormat(text,
                          "\n%stop %d (%d users, relevant >= %g) %-16s "
                          "precision %.4f  recall %.4f  ndcg %.4f",
                          cold_start ? "cold start " : "", a.topn, users,
                          a.relevant, r.name.c_str(), r.mean.precision,
                          r.mean.recall, r.mean.ndcg);
  }
  // The same lists in peer-ease.py's protocol (relevant items unknown to
  // training dropped), comparable with its EASE and popularity lines; one
  // note when no relevant test item is unknown (the figures are the same).
  bool same = true;
  for (const TopNResult& r : topn) {
    same = same && r.known_users == users && r.known.ndcg == r.mean.ndcg &&
           r.known.recall == r.mean.recall;
  }
  if (same) {
    absl::StrAppendFormat(text,
                          "\n%stop %d: every relevant test item is known to "
                          "training, so peer-ease.py's protocol gives the "
                          "same figures",
                          cold_start ? "cold start " : "", a.topn);
  }
  for (const TopNResult& r : topn) {
    if (same) continue;
    absl::StrAppendFormat(
        text,
        "\n%stop %d known items (%d users, peer-ease.py protocol) %-16s "
        "precision %.4f  recall %.4f  ndcg %.4f",
        cold_start ? "cold start " : "", a.topn, r.known_users, r.name.c_str(),
        r.known.precision, r.known.recall, r.known.ndcg);
  }
  return topn;
}

// The "topn_at" object (see the top of this file).
Json TopNCurvesJson(const std::vector<TopNResult>& topn) {
  Json out = Json::object();
  for (const TopNResult& t : topn) {
    Json precision = Json::array(), recall = Json::array(),
         ndcg = Json::array();
    for (const auto& at : t.at) {
      precision.push_back(Fixed(at.precision, 6));
      recall.push_back(Fixed(at.recall, 6));
      ndcg.push_back(Fixed(at.ndcg, 6));
    }
    out[t.name] =
        Json{{"precision", precision}, {"recall", recall}, {"ndcg", ndcg}};
  }
  return out;
}

// The scale: --scale, or inferred from the training and test ratings'
// distinct values (RatingScale::Infer looks at nothing else).
absl::StatusOr<RatingScale> PickScale(const Args& a,
                                      const InternedRatings& train,
                                      const InternedRatings* test) {
  if (a.scale != "auto") return RatingScale::Parse(a.scale);
  std::vector<double> values = train.values;
  if (test != nullptr) {
    values.insert(values.end(), test->values.begin(), test->values.end());
  }
  return RatingScale::Infer(values);
}

void PrintProblems(const ReadResult& read) {
  for (const auto& p : read.problems) {
    std::fprintf(stderr, "skipped %s\n", p.c_str());
  }
}

// Reads the training Dataset and the test ratings (--train and --test, or
// --ratings shuffled with --seed and split), held as InternedRatings (12
// bytes a rating) until the Dataset is built, never as RawRatings. Ids are
// numbered in order of first appearance in the training ratings.
absl::Status LoadData(const Args& a, const ReadOptions& ro, Dataset* train,
                      std::vector<TestRating>* test) {
  const bool split_mode = !a.ratings.empty();
  auto rows = ReadRatingsInterned(split_mode ? a.ratings : a.train, ro);
  if (!rows.ok()) return rows.status();
  PrintProblems(rows->read);
  absl::StatusOr<InternedRatings> test_rows;
  if (!split_mode) {
    test_rows = ReadRatingsInterned(a.test, ro);
    if (!test_rows.ok()) return test_rows.status();
    PrintProblems(test_rows->read);
  }
  auto scale = PickScale(a, *rows, split_mode ? nullptr : &test_rows.value());
  if (!scale.ok()) return scale.status();
  auto k = ValueIndices(*rows, *scale, split_mode ? a.ratings : a.train);
  if (!k.ok()) return k.status();
  size_t n_train = rows->size();
  if (split_mode) {
    // Seeded shuffle, then the first `split` fraction trains.
    Rng rng(StreamSeed(a.o.seed, 0x5b117));
    for (size_t i = rows->size(); i > 1; --i) {
      const size_t j = rng.Below(i);
      std::swap(rows->user[i - 1], rows->user[j]);
      std::swap(rows->item[i - 1], rows->item[j]);
      std::swap(rows->value[i - 1], rows->value[j]);
    }
    n_train = static_cast<size_t>(
        std::llround(a.split * static_cast<double>(rows->size())));
  }
  std::vector<int32_t> user_map, item_map;
  *train =
      DatasetFromInterned(*rows, 0, n_train, *scale, *k, &user_map, &item_map);
  const InternedRatings* t = &*rows;
  size_t begin = n_train;
  if (!split_mode) {
    *rows = InternedRatings();  // the Dataset holds the training ratings
    t = &test_rows.value();
    begin = 0;
    user_map = MapIds(t->users, train->users);
    item_map = MapIds(t->items, train->items);
    auto tk = ValueIndices(*t, *scale, a.test);
    if (!tk.ok()) return tk.status();
  }
  test->reserve(t->size() - begin);
  for (size_t i = begin; i < t->size(); ++i) {
    test->push_back({user_map[static_cast<size_t>(t->user[i])],
                     item_map[static_cast<size_t>(t->item[i])],
                     t->values[t->value[i]]});
  }
  return absl::OkStatus();
}

// --predictions: one expected rating a line ("%.6f"), in test order.
absl::Status WritePredictions(const std::string& path,
                              const std::vector<double>& predictions) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--predictions: cannot write ", path));
  }
  bool ok = true;
  for (double p : predictions) ok = ok && std::fprintf(f, "%.6f\n", p) > 0;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) {
    return absl::DataLossError(
        absl::StrCat("--predictions: writing ", path, " failed"));
  }
  return absl::OkStatus();
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "rbmrec-eval: %s\n", std::string(s.message()).c_str());
  return 1;
}

int Run(int argc, char** argv) {
  Args a;
  CLI::App app(
      "Trains the RBM and reports RMSE/MAE on the test ratings. Defaults are "
      "the best settings found; every hyper-parameter can be overridden.\n"
      "  rbmrec-eval --train FILE --test FILE [flags]\n"
      "  rbmrec-eval --ratings FILE [--split 0.9] [--seed S] [flags]",
      "rbmrec-eval");
  AddFlags(&app, &a);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help: 0; a usage error: 2
  }
  // The ranking model is trained when something uses it: the rankings of
  // --topn, the similar items of --similar, or the saved model (which the
  // service can serve). An RMSE run trains the rating model only, what its
  // figures come from.
  if (app.get_option("--rated-hidden")->count() == 0 && a.topn == 0 &&
      a.save_model.empty() && a.similar.empty()) {
    a.o.rated_hidden = 0;
  }
  const bool split_mode = !a.ratings.empty();
  if (split_mode == (!a.train.empty() || !a.test.empty()) ||
      (!split_mode && (a.train.empty() || a.test.empty()))) {
    std::fprintf(stderr,
                 "rbmrec-eval: give either --train and --test, or --ratings "
                 "(see --help)\n");
    return 2;
  }
  if (!(a.split > 0 && a.split < 1)) {
    std::fprintf(stderr, "rbmrec-eval: --split must be in (0, 1)\n");
    return 2;
  }
  if (!a.cd.empty()) {
    auto cd = CdSchedule::Parse(a.cd);
    if (!cd.ok()) return Fail(cd.status());
    a.o.cd = *cd;
  }
  if (a.predict == "exact") {
    a.o.predict = PredictMethod::kExact;
  } else if (a.predict == "meanfield" || a.predict == "mean-field") {
    a.o.predict = PredictMethod::kMeanField;
  } else {
    std::fprintf(stderr, "rbmrec-eval: --predict must be exact or meanfield\n");
    return 2;
  }
  if (!a.similar.empty() && !std::ifstream(a.similar)) {
    // Before training, not after it.
    return Fail(absl::NotFoundError(absl::StrCat("cannot open ", a.similar)));
  }
  if (absl::Status s = ValidateTrainOptions(a.o); !s.ok()) return Fail(s);
  auto format = ParseRatingFormat(a.format);
  if (!format.ok()) return Fail(format.status());
  ReadOptions ro;
  ro.format = *format;
  ro.lenient = a.lenient;

  Dataset train_set;
  std::vector<TestRating> test;
  if (absl::Status s = LoadData(a, ro, &train_set, &test); !s.ok()) {
    return Fail(s);
  }
  if (!a.quiet) {
    std::fprintf(stderr,
                 "data: %zu training ratings (%d users, %d items), %zu test "
                 "ratings, scale %s (K=%d)\n",
                 train_set.ratings.size(), train_set.users.size(),
                 train_set.items.size(), test.size(),
                 train_set.scale.ToString().c_str(), train_set.scale.K());
  }
  // Trained from the ratings by user alone: the Dataset's rating list (12
  // bytes a rating) is dropped first.
  FitData train;
  train.scale = train_set.scale;
  train.by_user = train_set.ByUser();
  train.users = std::move(train_set.users);
  train.items = std::move(train_set.items);
  train.ratings = static_cast<int64_t>(train_set.ratings.size());
  train_set = Dataset();
  const RatingScale& scale = train.scale;
  const SparseRatings& train_by_user = train.by_user;
  SparseRatings extra;
  const bool test_in_r = a.o.conditional && a.crbm_r == "train+test";
  if (test_in_r) extra = TestExtras(train, test);
  const SparseRatings* extra_ptr = test_in_r ? &extra : nullptr;
  const auto t0 = std::chrono::steady_clock::now();
  auto model = FitModel(
      &train, a.o,
      [&](int member, const EpochStats& st) {
        if (!a.quiet && st.valid_ndcg >= -0.5) {
          std::fprintf(stderr, "rated RBM epoch %3d  valid ndcg %.4f\n",
                       st.epoch, st.valid_ndcg);
        } else if (!a.quiet && member == FactorisationMember(a.o)) {
          std::fprintf(stderr, "matrix factorisation epoch %3d  train %.4f\n",
                       st.epoch, st.train_rmse);
        } else if (!a.quiet) {
          std::fprintf(stderr,
                       "member %d epoch %3d  T=%d  lr=%.4f  train %.4f  valid "
                       "%.4f  %.3fs\n",
                       member, st.epoch, st.cd_steps, st.learning_rate,
                       st.train_rmse, st.valid_rmse, st.seconds);
        }
        return true;
      },
      extra_ptr);
  if (!model.ok()) return Fail(model.status());
  const double train_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  std::vector<double> predictions;
  const EvalMetrics m =
      Evaluate(*model, train_by_user, test, a.o.predict, a.o.threads, extra_ptr,
               a.predictions.empty() ? nullptr : &predictions);
  if (!a.predictions.empty()) {
    if (absl::Status s = WritePredictions(a.predictions, predictions);
        !s.ok()) {
      return Fail(s);
    }
  }
  std::vector<TopNResult> topn;
  Json topn_json = Json::object(), cold_json = Json::object();
  std::string topn_text;
  if (a.topn > 0) {
    topn = TopNSection(*model, train_by_user, test, a, false, &topn_json,
                       &topn_text);
    if (a.cold_start) {
      TopNSection(*model, train_by_user, test, a, true, &cold_json, &topn_text);
    }
  }
  bench::SimilarReport similar;
  if (!a.similar.empty()) {
    auto r = bench::EvaluateSimilar(*model, train_by_user, test, a.similar,
                                    a.relevant, a.similar_popularity);
    if (!r.ok()) return Fail(r.status());
    similar = *std::move(r);
  }
  if (!a.save_model.empty()) {
    if (absl::Status s = SaveModelFile(*model, a.save_model); !s.ok()) {
      return Fail(s);
    }
  }
  const double rps =
      static_cast<double>(model->summary().rating_epochs) / train_seconds;
  // The rated RBM (p(rated) rankings), when trained.
  Json rated_json;
  std::string rated_text;
  if (model->HasRatedRbm()) {
    const TrainingSummary& sm = model->summary();
    rated_json = Json{{"hidden", model->rated_rbm().F},
                      {"epochs_run", sm.rated_epochs},
                      {"valid_ndcg", Fixed(sm.rated_valid_ndcg, 6)},
                      {"seconds", Fixed(sm.rated_seconds, 4)}};
    rated_text = absl::StrFormat(
        "\nrated RBM: hidden %d  epochs_run %d  valid_ndcg %.4f  seconds %.2f",
        model->rated_rbm().F, sm.rated_epochs, sm.rated_valid_ndcg,
        sm.rated_seconds);
  } else {
    rated_text =
        "\nrated RBM (ranking model): not trained (--topn, --save-model or "
        "--rated-hidden trains it)";
  }
  // The item regression, when fitted.
  Json regression_json;
  if (model->HasItemRegression()) {
    const ItemRegression& reg = model->item_regression();
    const double mb = static_cast<double>(ItemRegressionBytes(reg.items)) / 1e6;
    const double seconds = model->summary().item_regression_seconds;
    regression_json = Json{{"items", reg.items},
                           {"of_items", model->num_items()},
                           {"lambda", General(reg.lambda)},
                           {"seconds", Fixed(seconds, 4)},
                           {"mb", Fixed(mb, 1)}};
    absl::StrAppendFormat(&rated_text,
                          "\nitem regression: %d of %d items (%.1f MB)  "
                          "lambda %g  seconds %.2f",
                          reg.items, model->num_items(), mb, reg.lambda,
                          seconds);
  } else if (model->HasRatedRbm()) {
    absl::StrAppendFormat(
        &rated_text, "\nitem regression: not fitted (%d items, %.1f MB; %s)",
        model->num_items(),
        static_cast<double>(ItemRegressionBytes(model->num_items())) / 1e6,
        a.o.item_regression == 0 ? "--item-regression 0" : "the size rule");
  }
  // The matrix factorisation blended in, when kept.
  Json mf_json;
  if (model->HasMf()) {
    const MfParams& mf = model->params().mf;
    const double seconds = model->summary().mf_seconds;
    mf_json = Json{{"factors", mf.factors},
                   {"intercept", General(mf.intercept)},
                   {"rbm_weight", General(mf.rbm_weight)},
                   {"mf_weight", General(mf.mf_weight)},
                   {"seconds", Fixed(seconds, 4)}};
    absl::StrAppendFormat(&rated_text,
                          "\nmatrix factorisation: %d factors  blend %.3f + "
                          "%.3f x RBM + %.3f x MF  seconds %.2f",
                          mf.factors, mf.intercept, mf.rbm_weight, mf.mf_weight,
                          seconds);
  } else {
    absl::StrAppendFormat(
        &rated_text, "\nmatrix factorisation: not blended in (%s)",
        a.o.mf_factors == 0 ? "--mf-factors 0"
                            : "the blend did not lower the validation RMSE");
  }
  if (a.json) {
    const TrainOptions& o = model->options();  // with the size rule applied
    const TrainingSummary& sm = model->summary();
    Json j = Json::object();
    j["rmse"] = Fixed(m.rmse, 6);
    j["mae"] = Fixed(m.mae, 6);
    j["n_test"] = m.n;
    j["n_fallback"] = m.n_fallback;
    j["epochs_run"] = sm.epochs_run;
    j["best_epoch"] = sm.best_epoch;
    j["valid_rmse"] = Fixed(sm.valid_rmse, 6);
    j["train_seconds"] = Fixed(train_seconds, 4);
    j["train_ratings"] = sm.train_ratings;
    j["train_ratings_per_second"] = Fixed(rps, 0);
    j["peak_rss_mb"] = Fixed(PeakRssMb(), 1);
    j["scale"] = scale.ToString();
    j["params"] = Json{
        {"hidden", o.hidden},
        {"epochs", o.max_epochs},
        {"batch", o.batch_size},
        {"lr", General(o.learning_rate)},
        {"lr_decay", General(o.lr_decay)},
        {"momentum", General(o.momentum)},
        {"weight_decay", General(o.weight_decay)},
        {"init_std", General(o.init_std)},
        {"ordinal", o.ordinal},
        {"factors", o.factors},
        {"rated_factors", o.rated_factors},
        {"cd_steps", o.cd.ToString()},
        {"per_item_normalize", o.per_item_normalize},
        {"validation", General(o.validation_fraction)},
        {"patience", o.patience},
        {"min_improvement", General(o.min_improvement)},
        {"average", General(o.average)},
        {"ensemble", o.ensemble},
        {"item_based", o.item_based},
        {"conditional", o.conditional},
        {"item_regression", o.item_regression},
        {"item_lambda", General(o.item_lambda)},
        {"mf_factors", o.mf_factors},
        {"mf_epochs", o.mf_epochs},
        {"mf_lambda", General(o.mf_lambda)},
        {"crbm_r", a.crbm_r},
        {"user_weight", General(model->params().user_weight)},
        {"user_weight_per_log_user",
         General(model->params().user_weight_per_log_user)},
        {"user_weight_per_log_item",
         General(model->params().user_weight_per_log_item)},
        {"predict", o.predict == PredictMethod::kExact ? "exact" : "meanfield"},
        {"seed", o.seed},
        {"threads", o.threads}};
    j["nll"] = Fixed(m.nll, 6);
    j["ece"] = Fixed(m.ece, 6);
    j["hist_nll"] = Fixed(m.hist_nll, 6);
    j["hist_ece"] = Fixed(m.hist_ece, 6);
    if (!rated_json.is_null()) j["rated"] = rated_json;
    if (!regression_json.is_null()) j["item_regression"] = regression_json;
    if (!mf_json.is_null()) j["mf"] = mf_json;
    if (a.topn > 0) j["topn"] = topn_json;
    if (a.topn > 0 && a.cold_start) j["topn_cold"] = cold_json;
    j["reliability"] = ReliabilityJson(m, scale);
    if (a.topn > 0) j["topn_at"] = TopNCurvesJson(topn);
    if (!a.similar.empty()) j["similar"] = similar.json;
    std::printf("%s\n",
                j.dump(-1, ' ', false, Json::error_handler_t::replace).c_str());
  } else {
    std::printf(
        "rmse %.4f  mae %.4f  n_test %lld  n_fallback %lld  epochs_run %d  "
        "best_epoch %d  train_seconds %.2f  train_ratings_per_second %.0f  "
        "peak_rss_mb %.1f\nnll %.4f  ece %.4f  (item histogram: nll %.4f  "
        "ece %.4f)%s%s%s\n",
        m.rmse, m.mae, static_cast<long long>(m.n),
        static_cast<long long>(m.n_fallback), model->summary().epochs_run,
        model->summary().best_epoch, train_seconds, rps, PeakRssMb(), m.nll,
        m.ece, m.hist_nll, m.hist_ece, rated_text.c_str(), topn_text.c_str(),
        similar.text.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace rbmrec

int main(int argc, char** argv) {
  if (!rbmrec::CpuSupported("rbmrec-eval")) return 1;
  return rbmrec::Run(argc, argv);
}
