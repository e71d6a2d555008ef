// rbmrec-cd-bench: one epoch of CD-1 training of the user-based RBM (F=100,
// K=5, the shipped update rules, mini-batches of 20 and of 100 users, 1 and
// 2 threads, factored through 32 factors as the size rule trains data of
// this size, and unfactored) on synthetic data shaped
// like MovieLens 1M's 90% training part: 6,040 users, 3,706 items,
// ~900,000 ratings, user activity heavy-tailed (at least 18 ratings, mean
// ~149, a few users with ~2,000) and item popularity Zipf-like, so the rows
// of W a mini-batch touches are as skewed as in real data.
//
// Google Benchmark, manual time = the trainer's own timing of the CD
// updates of one epoch (EpochStats::train_seconds of the second of two
// epochs: no validation pass, no set-up). Counters:
//   Mratings/s  ratings processed per second (millions), wall clock
//   Mratings/cpu_s  the same per CPU-second of all threads: steadier than
//               the wall clock on a busy machine, and at 1 thread the
//               kernel's own speed
//   GFLOP/s     achieved. Unfactored, counting 2 * (2*K*F + 6*F) = 3,200
//               FLOPs per rating at K=5, F=100: per rating, the positive
//               hidden input (F adds), the K logits of the reconstruction
//               (K*F FMAs), the negative hidden input (F adds), two gradient
//               rows (2F adds) and the momentum/weight-decay update of up to
//               two rows (2F FMAs), i.e. (2K+6)F multiply-adds of 2 FLOPs
//               each (../shared/docs/benchmarks.md, "what the machine
//               allows"). Factored (W = A B, C factors), the same terms in
//               C-wide rows of A, 2 * (2*K*C + 6*C) = 1,024 FLOPs per rating
//               at C=32, plus per user the seven C x F products (c + a0 B,
//               B hs, c + aT B, B h0, B hT and the two terms of B's
//               gradient), 2 * 7*C*F = 44,800 FLOPs: ~1,325 FLOPs per rating
//               at this data's ~149 ratings per user.
//   peak_pct    GFLOP/s as a percentage of the FMA peak of the threads used:
//               threads x 32 FLOPs/cycle (two 8-lane FMA ports) x the clock
//               /proc/cpuinfo reports (0 when it reports none).
//
// With conditional:1 the RBM is conditional (r = the user's rated items):
// the same FLOPs are counted, so its rates show D's cost.
//
//   rbmrec-cd-bench [--benchmark_repetitions=3] [--benchmark_filter=...]

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

#include "core/ratings.h"
#include "core/rng.h"
#include "core/trainer.h"

namespace rbmrec {
namespace {

constexpr int kUsers = 6040;
constexpr int kItems = 3706;
constexpr int kK = 5;
constexpr int kHidden = 100;

// FLOPs of one epoch (see the file comment), factored through `factors`
// (0: unfactored).
double EpochFlops(const SparseRatings& train, int factors) {
  const double nnz = static_cast<double>(train.nnz());
  if (factors <= 0) return nnz * 2.0 * (2 * kK * kHidden + 6 * kHidden);
  double users = 0;
  for (int32_t u = 0; u < train.rows; ++u) users += train.RowSize(u) > 0;
  const double C = factors;
  return nnz * 2.0 * (2 * kK * C + 6 * C) + users * 2.0 * 7 * C * kHidden;
}

// ML-1M-shaped training ratings (deterministic, seed 7).
const SparseRatings& Data() {
  static const SparseRatings data = [] {
    Rng rng(7);
    // Item popularity ~ 1/(rank + 20)^1.1, as a cumulative table.
    std::vector<double> cdf(kItems);
    double total = 0;
    for (int i = 0; i < kItems; ++i) {
      total += 1.0 / std::pow(i + 20.0, 1.1);
      cdf[static_cast<size_t>(i)] = total;
    }
    std::vector<double> item_bias(kItems), user_bias(kUsers);
    for (double& b : item_bias) b = 0.5 * rng.Normal();
    for (double& b : user_bias) b = 0.4 * rng.Normal();
    std::vector<Rating> ratings;
    std::vector<char> seen(kItems, 0);
    std::vector<int32_t> mine;
    for (int u = 0; u < kUsers; ++u) {
      // Log-normal activity: median ~90, mean ~149, clipped to [18, 2100].
      const int n = static_cast<int>(
          std::clamp(std::exp(4.5 + 1.0 * rng.Normal()), 18.0, 2100.0));
      mine.clear();
      while (static_cast<int>(mine.size()) < n) {
        const double x = rng.UniformDouble() * total;
        const int i = static_cast<int>(
            std::lower_bound(cdf.begin(), cdf.end(), x) - cdf.begin());
        const int item = std::min(i, kItems - 1);
        if (!seen[static_cast<size_t>(item)]) {
          seen[static_cast<size_t>(item)] = 1;
          mine.push_back(item);
        }
      }
      for (int32_t i : mine) {
        seen[static_cast<size_t>(i)] = 0;
        const double r = 3.6 + user_bias[static_cast<size_t>(u)] +
                         item_bias[static_cast<size_t>(i)] + 0.9 * rng.Normal();
        Rating x;
        x.user = u;
        x.item = i;
        x.k = static_cast<uint8_t>(std::clamp(std::lround(r), 1L, 5L) - 1);
        ratings.push_back(x);
      }
    }
    return SparseRatings::FromRatings(kUsers, kItems, ratings);
  }();
  return data;
}

// CPU time of the whole process (all threads), in seconds.
double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) +
         1e-9 * static_cast<double>(ts.tv_nsec);
}

// The clock /proc/cpuinfo reports, in GHz (0 if none).
double CpuGhz() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("cpu MHz", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) {
        return std::atof(line.c_str() + colon + 1) / 1000.0;
      }
    }
  }
  return 0;
}

void BM_CdEpoch(benchmark::State& state) {
  const SparseRatings& train = Data();
  SparseRatings valid;  // empty: no validation pass
  valid.rows = train.rows;
  valid.cols = train.cols;
  valid.offsets.assign(static_cast<size_t>(train.rows) + 1, 0);
  TrainOptions o;
  o.hidden = kHidden;
  o.max_epochs = 1;
  o.threads = static_cast<int>(state.range(0));
  o.batch_size = static_cast<int>(state.range(1));
  o.factors = static_cast<int>(state.range(2));
  o.conditional = state.range(3) != 0;  // r = the user's rated items
  o.item_based = false;
  // Two epochs per iteration; the second is measured (the first includes
  // the trainer's set-up in its CPU time).
  o.max_epochs = 2;
  o.patience = 10;
  double seconds = 0, cpu_seconds = 0;
  int64_t ratings = 0;
  for (auto _ : state) {
    double epoch_seconds = 0, cpu_before = 0, cpu_after = 0;
    absl::StatusOr<TrainResult> r =
        TrainRbmSplit(train, valid, kK, o, [&](const EpochStats& st) {
          if (st.epoch == 1) {
            cpu_before = ProcessCpuSeconds();
          } else {
            cpu_after = ProcessCpuSeconds();
            epoch_seconds = st.train_seconds;
          }
          return true;
        });
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      return;
    }
    state.SetIterationTime(epoch_seconds);
    seconds += epoch_seconds;
    cpu_seconds += cpu_after - cpu_before;
    ratings += r->train_ratings;
  }
  const double rate = seconds > 0 ? static_cast<double>(ratings) / seconds : 0;
  const double gflops = rate * EpochFlops(train, o.factors) /
                        static_cast<double>(train.nnz()) / 1e9;
  const double peak = static_cast<double>(o.threads) * 32.0 * CpuGhz();
  state.counters["Mratings/s"] = rate / 1e6;
  state.counters["Mratings/cpu_s"] =
      cpu_seconds > 0 ? static_cast<double>(ratings) / cpu_seconds / 1e6 : 0;
  state.counters["GFLOP/s"] = gflops;
  state.counters["peak_pct"] = peak > 0 ? 100.0 * gflops / peak : 0;
  state.counters["ratings"] = static_cast<double>(train.nnz());
}
BENCHMARK(BM_CdEpoch)
    ->ArgsProduct({{1, 2}, {20, 100}, {32, 0}, {0}})
    ->ArgNames({"threads", "batch", "factors", "conditional"})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1.5);
// The conditional RBM (TrainOptions::conditional, r = the rated items): its
// cost against the conditional=0 rows above.
BENCHMARK(BM_CdEpoch)
    ->ArgsProduct({{1, 2}, {100}, {32, 0}, {1}})
    ->ArgNames({"threads", "batch", "factors", "conditional"})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1.5);

}  // namespace
}  // namespace rbmrec

BENCHMARK_MAIN();
