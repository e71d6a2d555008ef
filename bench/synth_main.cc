// rbmrec-synth: synthetic rating data shaped like real collaborative
// filtering data, at any size, for scale measurements (docs/scaling.md).
//
//   rbmrec-synth --users U --items M --ratings N [--seed S] [--test-fraction
//   F] --out TRAIN [--test-out TEST]
//
// Shape: item popularity follows a Zipf law (exponent 0.9, as MovieLens and
// Netflix roughly do: a few items get most ratings), user activity a
// log-normal (sigma 1) scaled to N ratings in all (each user 1..M/2); each
// user's items are drawn by popularity without repeats. Ratings come from a
// low-rank taste model so that there is something to learn: r = clamp(round(3.6
// + b_i + u . v / 2 + noise), 1, 5) with 8 latent factors ~ N(0, 1/8), item
// biases b_i ~ N(0, 0.5^2) and noise ~ N(0, 0.8^2). Lines are
// "user<TAB>item<TAB> rating" (ids "uN", "iN"); --test-fraction of the lines
// (default 0) go to
// --test-out instead. Deterministic for a seed. Writes ~20 bytes a rating;
// memory ~ (U + M) * 40 bytes plus one user's items at a time.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/container/flat_hash_set.h"
#include "core/rng.h"

namespace {

constexpr int kFactors = 8;

struct Flags {
  int64_t users = 10000;
  int64_t items = 2000;
  int64_t ratings = 1000000;
  uint64_t seed = 1;
  double test_fraction = 0;
  std::string out, test_out;
};

int Run(const Flags& f) {
  if (f.users < 1 || f.items < 1 || f.ratings < f.users) {
    std::fprintf(stderr,
                 "rbmrec-synth: need users >= 1, items >= 1 and ratings >= "
                 "users\n");
    return 1;
  }
  if (f.ratings > f.users * f.items / 2) {
    std::fprintf(stderr,
                 "rbmrec-synth: --ratings %lld is more than half of users x "
                 "items; the sampler needs a sparse matrix\n",
                 static_cast<long long>(f.ratings));
    return 1;
  }
  std::FILE* out = std::fopen(f.out.c_str(), "w");
  std::FILE* test =
      f.test_out.empty() ? nullptr : std::fopen(f.test_out.c_str(), "w");
  if (out == nullptr || (!f.test_out.empty() && test == nullptr)) {
    std::fprintf(stderr, "rbmrec-synth: cannot write %s\n",
                 out == nullptr ? f.out.c_str() : f.test_out.c_str());
    return 1;
  }
  rbmrec::Rng rng(rbmrec::StreamSeed(f.seed, 1));
  // Item popularity (Zipf, items in a random order) as a cumulative table.
  std::vector<int64_t> order(static_cast<size_t>(f.items));
  for (int64_t i = 0; i < f.items; ++i) order[i] = i;
  for (size_t t = order.size(); t > 1; --t) {
    std::swap(order[t - 1], order[rng.Below(t)]);
  }
  std::vector<double> cdf(static_cast<size_t>(f.items));
  double total = 0;
  for (int64_t r = 0; r < f.items; ++r) {
    total += 1.0 / std::pow(static_cast<double>(r + 1), 0.9);
    cdf[static_cast<size_t>(r)] = total;
  }
  std::vector<float> item_f(static_cast<size_t>(f.items * kFactors));
  std::vector<float> item_b(static_cast<size_t>(f.items));
  for (float& x : item_f) x = static_cast<float>(rng.Normal() / std::sqrt(8.0));
  for (float& x : item_b) x = static_cast<float>(0.5 * rng.Normal());
  // User activity: log-normal (sigma 1), scaled so that the counts add up
  // to exactly N (each within [1, items / 2]).
  std::vector<int64_t> count(static_cast<size_t>(f.users));
  {
    std::vector<double> raw(count.size());
    double sum = 0;
    for (int64_t u = 0; u < f.users; ++u) {
      rbmrec::Rng ur(rbmrec::StreamSeed(f.seed, 3, static_cast<uint64_t>(u)));
      raw[static_cast<size_t>(u)] = std::exp(ur.Normal());
      sum += raw[static_cast<size_t>(u)];
    }
    const int64_t cap = f.items / 2;
    int64_t assigned = 0;
    for (size_t u = 0; u < count.size(); ++u) {
      const double want = raw[u] / sum * static_cast<double>(f.ratings);
      count[u] = std::clamp<int64_t>(std::llround(want), 1, cap);
      assigned += count[u];
    }
    // Hand out (or take back) the rounding difference one by one.
    for (size_t u = 0; assigned != f.ratings; u = (u + 1) % count.size()) {
      if (assigned < f.ratings && count[u] < cap) {
        ++count[u];
        ++assigned;
      } else if (assigned > f.ratings && count[u] > 1) {
        --count[u];
        --assigned;
      }
    }
  }
  int64_t written = 0;
  absl::flat_hash_set<int64_t> seen;
  float uf[kFactors];
  for (int64_t u = 0; u < f.users; ++u) {
    rbmrec::Rng ur(rbmrec::StreamSeed(f.seed, 2, static_cast<uint64_t>(u)));
    const int64_t n = count[static_cast<size_t>(u)];
    for (float& x : uf) x = static_cast<float>(ur.Normal() / std::sqrt(8.0));
    seen.clear();
    while (static_cast<int64_t>(seen.size()) < n) {
      const double x = ur.UniformDouble() * total;
      const int64_t rank =
          std::lower_bound(cdf.begin(), cdf.end(), x) - cdf.begin();
      const int64_t item =
          order[static_cast<size_t>(std::min<int64_t>(rank, f.items - 1))];
      if (!seen.insert(item).second) continue;
      double dot = 0;
      for (int j = 0; j < kFactors; ++j) {
        dot += uf[j] * item_f[static_cast<size_t>(item * kFactors + j)];
      }
      const double r =
          3.6 + item_b[static_cast<size_t>(item)] + dot / 2 + 0.8 * ur.Normal();
      const int rating = static_cast<int>(std::clamp(std::lround(r), 1L, 5L));
      std::FILE* dst =
          test != nullptr && ur.UniformDouble() < f.test_fraction ? test : out;
      std::fprintf(dst, "u%lld\ti%lld\t%d\n", static_cast<long long>(u),
                   static_cast<long long>(item), rating);
    }
    written += n;
  }
  const bool ok =
      std::fclose(out) == 0 && (test == nullptr || std::fclose(test) == 0);
  if (!ok) {
    std::fprintf(stderr, "rbmrec-synth: write failed\n");
    return 1;
  }
  std::fprintf(stderr, "rbmrec-synth: %lld ratings, %lld users, %lld items\n",
               static_cast<long long>(written), static_cast<long long>(f.users),
               static_cast<long long>(f.items));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  CLI::App app{"rbmrec-synth: synthetic rating data at any size"};
  app.add_option("--users", f.users, "users")->required();
  app.add_option("--items", f.items, "items")->required();
  app.add_option("--ratings", f.ratings, "ratings in total")->required();
  app.add_option("--seed", f.seed, "random seed (same seed, same data)");
  app.add_option("--test-fraction", f.test_fraction,
                 "share of the ratings written to --test-out")
      ->check(CLI::Range(0.0, 0.5));
  app.add_option("--out", f.out, "training ratings file")->required();
  app.add_option("--test-out", f.test_out, "test ratings file");
  CLI11_PARSE(app, argc, argv);
  return Run(f);
}
