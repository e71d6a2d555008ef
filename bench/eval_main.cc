// rbmrec-eval: offline training and evaluation of the RBM on rating files.
//
//   rbmrec-eval --train FILE --test FILE [flags]
//   rbmrec-eval --ratings FILE --split 0.9 --seed S [flags]
//
// Per-epoch progress goes to stderr; with --json stdout is exactly one JSON
// object with the metrics and the hyper-parameters used.

#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/cpu_check.h"
#include "core/fit.h"
#include "core/model_file.h"
#include "core/readers.h"
#include "core/rng.h"

namespace rbmrec {
namespace {

struct Args {
  std::string train, test, ratings, format = "auto", scale = "auto";
  std::string save_model, cd, predict = "exact";
  double split = 0.9;
  bool json = false, lenient = false, quiet = false;
  TrainOptions o;
};

struct Flag {
  std::string help;
  std::function<bool(const std::string&)> set;  // false: bad value
  bool is_bool = false;
};

template <typename T>
std::function<bool(const std::string&)> Num(T* out) {
  return [out](const std::string& v) {
    if constexpr (std::is_floating_point_v<T>) {
      double d;
      if (!absl::SimpleAtod(v, &d) || !std::isfinite(d)) return false;
      *out = static_cast<T>(d);
    } else {
      int64_t i;
      if (!absl::SimpleAtoi(v, &i) || i < 0) return false;
      *out = static_cast<T>(i);
    }
    return true;
  };
}

std::function<bool(const std::string&)> Str(std::string* out) {
  return [out](const std::string& v) {
    *out = v;
    return true;
  };
}

std::function<bool(const std::string&)> Bool(bool* out) {
  return [out](const std::string& v) {
    if (v == "" || v == "true" || v == "1") {
      *out = true;
    } else if (v == "false" || v == "0") {
      *out = false;
    } else {
      return false;
    }
    return true;
  };
}

std::map<std::string, Flag> MakeFlags(Args* a) {
  TrainOptions& o = a->o;
  std::map<std::string, Flag> f;
  f["train"] = {"training ratings file", Str(&a->train)};
  f["test"] = {"held-out ratings file", Str(&a->test)};
  f["ratings"] = {"one ratings file to split (with --split, --seed)",
                  Str(&a->ratings)};
  f["split"] = {"training fraction for --ratings (default 0.9)",
                Num(&a->split)};
  f["format"] = {"auto|ml100k|dat|mlcsv|csv|tsv|space (default auto)",
                 Str(&a->format)};
  f["scale"] = {"MIN:MAX:STEP, or auto from the data (default)",
                Str(&a->scale)};
  f["lenient"] = {"skip and count malformed lines", Bool(&a->lenient), true};
  f["hidden"] = {"hidden units F", Num(&o.hidden)};
  f["epochs"] = {"maximum epochs (early stopping may end sooner)",
                 Num(&o.max_epochs)};
  f["batch"] = {"users per mini-batch", Num(&o.batch_size)};
  f["lr"] = {"learning rate", Num(&o.learning_rate)};
  f["lr-decay"] = {"learning-rate factor per epoch", Num(&o.lr_decay)};
  f["momentum"] = {"momentum", Num(&o.momentum)};
  f["weight-decay"] = {"L2 weight decay on W", Num(&o.weight_decay)};
  f["init-std"] = {"standard deviation of the initial W", Num(&o.init_std)};
  f["cd-steps"] = {
      "CD steps: T (default 1), auto, or a schedule like 1,3@20,5@30",
      Str(&a->cd)};
  f["per-item-normalize"] = {
      "divide item gradients by their count in the batch (true/false)",
      Bool(&o.per_item_normalize), true};
  f["validation"] = {
      "fraction of each user's training ratings held out "
      "for early stopping",
      Num(&o.validation_fraction)};
  f["patience"] = {"epochs without validation improvement before stopping",
                   Num(&o.patience)};
  f["ensemble"] = {"number of user-based RBMs averaged", Num(&o.ensemble)};
  f["item-based"] = {
      "also train the item-based RBM and mix it in "
      "(true/false)",
      Bool(&o.item_based), true};
  f["predict"] = {"exact|meanfield", Str(&a->predict)};
  f["seed"] = {"random seed (same seed, same model)", Num(&o.seed)};
  f["threads"] = {"worker threads (0 = all cores)", Num(&o.threads)};
  f["save-model"] = {"write the trained model to this path",
                     Str(&a->save_model)};
  f["json"] = {"print one JSON object with the results on stdout",
               Bool(&a->json), true};
  f["quiet"] = {"no per-epoch progress on stderr", Bool(&a->quiet), true};
  return f;
}

void Usage(const std::map<std::string, Flag>& flags, FILE* out) {
  std::fprintf(out,
               "usage: rbmrec-eval --train FILE --test FILE [flags]\n"
               "       rbmrec-eval --ratings FILE [--split 0.9] [--seed S] "
               "[flags]\n\nTrains the RBM and reports RMSE/MAE on the test "
               "ratings. Defaults are the\nbest settings found; every "
               "hyper-parameter can be overridden.\n\nflags:\n");
  for (const auto& [name, flag] : flags) {
    std::fprintf(out, "  --%-20s %s\n", name.c_str(), flag.help.c_str());
  }
}

double PeakRssMb() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;
}

std::string JsonEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += absl::StrFormat("\\u%04x", static_cast<int>(c));
    } else {
      out += c;
    }
  }
  return out;
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "rbmrec-eval: %s\n", std::string(s.message()).c_str());
  return 1;
}

int Run(int argc, char** argv) {
  Args a;
  auto flags = MakeFlags(&a);
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      Usage(flags, stdout);
      return 0;
    }
    if (arg.rfind("--", 0) != 0) {
      std::fprintf(stderr, "rbmrec-eval: unexpected argument '%s'\n",
                   arg.c_str());
      return 2;
    }
    std::string name = arg.substr(2), value;
    bool has_value = false;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    auto it = flags.find(name);
    if (it == flags.end()) {
      std::fprintf(stderr, "rbmrec-eval: unknown flag --%s (see --help)\n",
                   name.c_str());
      return 2;
    }
    if (!has_value && !it->second.is_bool) {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "rbmrec-eval: --%s needs a value\n", name.c_str());
        return 2;
      }
      value = argv[++i];
    }
    if (!it->second.set(value)) {
      std::fprintf(stderr, "rbmrec-eval: bad value '%s' for --%s\n",
                   value.c_str(), name.c_str());
      return 2;
    }
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
  if (absl::Status s = ValidateTrainOptions(a.o); !s.ok()) return Fail(s);
  auto format = ParseRatingFormat(a.format);
  if (!format.ok()) return Fail(format.status());
  ReadOptions ro;
  ro.format = *format;
  ro.lenient = a.lenient;

  std::vector<RawRating> train_rows, test_rows;
  std::string train_name = a.train, test_name = a.test;
  if (split_mode) {
    auto all = ReadRatingsFile(a.ratings, ro);
    if (!all.ok()) return Fail(all.status());
    for (const auto& p : all->problems)
      std::fprintf(stderr, "skipped %s\n", p.c_str());
    // Seeded shuffle, then the first `split` fraction trains.
    std::vector<RawRating>& rows = all->rows;
    Rng rng(StreamSeed(a.o.seed, 0x5b117));
    for (size_t i = rows.size(); i > 1; --i) {
      std::swap(rows[i - 1], rows[rng.Below(i)]);
    }
    const size_t n_train = static_cast<size_t>(
        std::llround(a.split * static_cast<double>(rows.size())));
    train_rows.assign(rows.begin(),
                      rows.begin() + static_cast<std::ptrdiff_t>(n_train));
    test_rows.assign(rows.begin() + static_cast<std::ptrdiff_t>(n_train),
                     rows.end());
    train_name = test_name = a.ratings;
  } else {
    auto tr = ReadRatingsFile(a.train, ro);
    if (!tr.ok()) return Fail(tr.status());
    auto te = ReadRatingsFile(a.test, ro);
    if (!te.ok()) return Fail(te.status());
    for (const auto& p : tr->problems)
      std::fprintf(stderr, "skipped %s\n", p.c_str());
    for (const auto& p : te->problems)
      std::fprintf(stderr, "skipped %s\n", p.c_str());
    train_rows = std::move(tr->rows);
    test_rows = std::move(te->rows);
  }
  RatingScale scale;
  if (a.scale == "auto") {
    std::vector<double> values;
    values.reserve(train_rows.size() + test_rows.size());
    for (const auto& r : train_rows) values.push_back(r.rating);
    for (const auto& r : test_rows) values.push_back(r.rating);
    auto s = RatingScale::Infer(values);
    if (!s.ok()) return Fail(s.status());
    scale = *s;
  } else {
    auto s = RatingScale::Parse(a.scale);
    if (!s.ok()) return Fail(s.status());
    scale = *s;
  }
  auto train = DatasetFromRaw(train_rows, scale, train_name);
  if (!train.ok()) return Fail(train.status());
  std::vector<TestRating> test;
  test.reserve(test_rows.size());
  for (const auto& r : test_rows) {
    if (auto k = scale.Index(r.rating); !k.ok()) {
      return Fail(absl::InvalidArgumentError(
          absl::StrCat(test_name, ":", r.line, ": ", k.status().message())));
    }
    test.push_back(
        {train->users.Find(r.user), train->items.Find(r.item), r.rating});
  }
  if (!a.quiet) {
    std::fprintf(stderr,
                 "data: %zu training ratings (%d users, %d items), %zu test "
                 "ratings, scale %s (K=%d)\n",
                 train->ratings.size(), train->users.size(),
                 train->items.size(), test.size(), scale.ToString().c_str(),
                 scale.K());
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto model = FitModel(*train, a.o, [&](int member, const EpochStats& st) {
    if (!a.quiet) {
      std::fprintf(stderr,
                   "member %d epoch %3d  T=%d  lr=%.4f  train %.4f  valid "
                   "%.4f  %.3fs\n",
                   member, st.epoch, st.cd_steps, st.learning_rate,
                   st.train_rmse, st.valid_rmse, st.seconds);
    }
    return true;
  });
  if (!model.ok()) return Fail(model.status());
  const double train_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  const EvalMetrics m =
      Evaluate(*model, train->ByUser(), test, a.o.predict, a.o.threads);
  if (!a.save_model.empty()) {
    if (absl::Status s = SaveModelFile(*model, a.save_model); !s.ok()) {
      return Fail(s);
    }
  }
  const double rps =
      static_cast<double>(model->summary.rating_epochs) / train_seconds;
  if (a.json) {
    const TrainOptions& o = a.o;
    std::printf(
        "{\"rmse\": %.6f, \"mae\": %.6f, \"n_test\": %lld, \"n_fallback\": "
        "%lld, \"epochs_run\": %d, \"best_epoch\": %d, \"valid_rmse\": %.6f, "
        "\"train_seconds\": %.4f, \"train_ratings\": %lld, "
        "\"train_ratings_per_second\": %.0f, \"peak_rss_mb\": %.1f, "
        "\"scale\": \"%s\", \"params\": {\"hidden\": %d, \"epochs\": %d, "
        "\"batch\": %d, \"lr\": %g, \"lr_decay\": %g, \"momentum\": %g, "
        "\"weight_decay\": %g, \"init_std\": %g, \"cd_steps\": \"%s\", "
        "\"per_item_normalize\": %s, \"validation\": %g, \"patience\": %d, "
        "\"ensemble\": %d, \"item_based\": %s, \"user_weight\": %g, "
        "\"predict\": \"%s\", \"seed\": %llu, \"threads\": "
        "%d}}\n",
        m.rmse, m.mae, static_cast<long long>(m.n),
        static_cast<long long>(m.n_fallback), model->summary.epochs_run,
        model->summary.best_epoch, model->summary.valid_rmse, train_seconds,
        static_cast<long long>(model->summary.train_ratings), rps, PeakRssMb(),
        JsonEscape(scale.ToString()).c_str(), o.hidden, o.max_epochs,
        o.batch_size, o.learning_rate, o.lr_decay, o.momentum, o.weight_decay,
        o.init_std, JsonEscape(o.cd.ToString()).c_str(),
        o.per_item_normalize ? "true" : "false", o.validation_fraction,
        o.patience, o.ensemble, o.item_based ? "true" : "false",
        static_cast<double>(model->user_weight),
        o.predict == PredictMethod::kExact ? "exact" : "meanfield",
        static_cast<unsigned long long>(o.seed), o.threads);
  } else {
    std::printf(
        "rmse %.4f  mae %.4f  n_test %lld  n_fallback %lld  epochs_run %d  "
        "best_epoch %d  train_seconds %.2f  train_ratings_per_second %.0f  "
        "peak_rss_mb %.1f\n",
        m.rmse, m.mae, static_cast<long long>(m.n),
        static_cast<long long>(m.n_fallback), model->summary.epochs_run,
        model->summary.best_epoch, train_seconds, rps, PeakRssMb());
  }
  return 0;
}

}  // namespace
}  // namespace rbmrec

int main(int argc, char** argv) {
  if (!rbmrec::CpuSupported("rbmrec-eval")) return 1;
  return rbmrec::Run(argc, argv);
}
