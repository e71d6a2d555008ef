#include "bench/similar_eval.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "core/rng.h"

namespace rbmrec::bench {

absl::StatusOr<std::vector<uint64_t>> ReadGenres(const std::string& path,
                                                 const IdMap& items) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::vector<uint64_t> out(static_cast<size_t>(items.size()), 0);
  std::map<std::string, int> bits;
  std::string line;
  int64_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    // Bytes are enough: ids and genre names are ASCII, titles are skipped.
    const size_t first = line.find("::");
    const size_t last = line.rfind("::");
    if (first == std::string::npos || last == first) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", number, ": expected MovieID::Title::Genres"));
    }
    uint64_t mask = 0;
    for (absl::string_view g :
         absl::StrSplit(line.substr(last + 2), '|', absl::SkipEmpty())) {
      auto [it, added] = bits.emplace(std::string(g), bits.size());
      if (it->second >= 64) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": more than 64 genre names"));
      }
      mask |= uint64_t{1} << it->second;
    }
    const int32_t i = items.Find(line.substr(0, first));
    if (i >= 0) out[static_cast<size_t>(i)] = mask;
  }
  return out;
}

SimilarProtocol::SimilarProtocol(const Model& model,
                                 const SparseRatings& train_by_user,
                                 const std::vector<TestRating>& test,
                                 std::vector<uint64_t> genres, double liked,
                                 uint64_t seed)
    : train_(train_by_user),
      num_items_(model.num_items()),
      genres_(std::move(genres)) {
  relevant_.resize(static_cast<size_t>(train_.rows));
  std::vector<int32_t> users;  // in order of first relevant test rating
  for (const TestRating& t : test) {
    if (t.user < 0 || t.item < 0 || t.user >= train_.rows || t.rating < liked) {
      continue;
    }
    auto& r = relevant_[static_cast<size_t>(t.user)];
    if (r.empty()) users.push_back(t.user);
    r.push_back(t.item);
  }
  Rng rng(seed);
  std::vector<int32_t> likes;
  for (const int32_t u : users) {
    std::sort(relevant_[static_cast<size_t>(u)].begin(),
              relevant_[static_cast<size_t>(u)].end());
    likes.clear();
    for (int64_t e = train_.offsets[u]; e < train_.offsets[u + 1]; ++e) {
      const size_t s = static_cast<size_t>(e);
      if (model.scale().Value(train_.k[s]) >= liked) {
        likes.push_back(train_.col[s]);
      }
    }
    // min(5, |likes|) without replacement: a partial Fisher-Yates shuffle.
    const size_t take = std::min<size_t>(5, likes.size());
    for (size_t j = 0; j < take; ++j) {
      std::swap(likes[j], likes[j + rng.Below(likes.size() - j)]);
      query_.push_back(likes[j]);
      query_user_.push_back(u);
    }
  }
}

namespace {
double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t r =
      static_cast<size_t>(std::ceil(p * static_cast<double>(v.size()))) - 1;
  return v[std::min(r, v.size() - 1)];
}

// This thread's CPU time in ms: a query's cost without the time other
// processes had the core.
double ThreadCpuMs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 +
         static_cast<double>(ts.tv_nsec) * 1e-6;
}
}  // namespace

absl::StatusOr<SimilarFigures> SimilarProtocol::Run(const SimilarFn& fn) const {
  SimilarFigures f;
  std::vector<double> ms, cpu_ms;
  ms.reserve(query_.size());
  cpu_ms.reserve(query_.size());
  int64_t hits = 0;
  for (size_t q = 0; q < query_.size(); ++q) {
    const int32_t u = query_user_[q];
    const absl::Span<const int32_t> seen(
        train_.col.data() + train_.offsets[u],
        static_cast<size_t>(train_.RowSize(u)));
    const double cpu0 = ThreadCpuMs();
    const auto t0 = std::chrono::steady_clock::now();
    auto list = fn(query_[q], seen, 10);
    ms.push_back(std::chrono::duration<double, std::milli>(
                     std::chrono::steady_clock::now() - t0)
                     .count());
    cpu_ms.push_back(ThreadCpuMs() - cpu0);
    if (!list.ok()) return list.status();
    const auto& rel = relevant_[static_cast<size_t>(u)];
    for (const SimilarItem& s : *list) {
      if (std::binary_search(rel.begin(), rel.end(), s.item)) {
        ++hits;
        break;
      }
    }
  }
  f.queries = static_cast<int64_t>(query_.size());
  f.hit = f.queries > 0
              ? static_cast<double>(hits) / static_cast<double>(f.queries)
              : 0;
  f.p50_ms = Percentile(ms, 0.50);
  f.p99_ms = Percentile(ms, 0.99);
  f.max_ms = Percentile(ms, 1.0);
  f.cpu_p50_ms = Percentile(cpu_ms, 0.50);
  f.cpu_p99_ms = Percentile(cpu_ms, 0.99);
  double genre = 0;
  for (int32_t i = 0; i < num_items_; ++i) {
    auto list = fn(i, {}, 10);
    if (!list.ok()) return list.status();
    if (list->empty()) continue;
    int agree = 0;
    for (const SimilarItem& s : *list) {
      agree += (genres_[static_cast<size_t>(i)] &
                genres_[static_cast<size_t>(s.item)]) != 0;
    }
    genre += static_cast<double>(agree) / static_cast<double>(list->size());
  }
  f.genre = num_items_ > 0 ? genre / num_items_ : 0;
  return f;
}

namespace {
// The top n of one row of scores with the query left out.
absl::StatusOr<std::vector<SimilarItem>> TopOfRow(
    const float* row, int32_t m, int32_t query,
    absl::Span<const int32_t> excluded, int n, SimilarScratch* scratch) {
  std::vector<float>& scores = scratch->scores;
  scores.assign(row, row + m);
  scores[static_cast<size_t>(query)] = std::numeric_limits<float>::quiet_NaN();
  SimilarRequest request;
  request.n = n;
  request.excluded = excluded;
  return TopScoredItems(scores, request, scratch);
}
}  // namespace

SimilarFn BinaryCosineLister(const SparseRatings& train_by_user) {
  const int32_t m = train_by_user.cols;
  auto cos = std::make_shared<RowMatrixXf>(RowMatrixXf::Zero(m, m));
  const SparseRatings& t = train_by_user;
  for (int32_t u = 0; u < t.rows; ++u) {
    for (int64_t a = t.offsets[u]; a < t.offsets[u + 1]; ++a) {
      float* row = cos->row(t.col[static_cast<size_t>(a)]).data();
      for (int64_t b = t.offsets[u]; b < t.offsets[u + 1]; ++b) {
        row[t.col[static_cast<size_t>(b)]] += 1.0f;
      }
    }
  }
  Eigen::VectorXf norm = cos->diagonal().cwiseSqrt();
  for (int32_t i = 0; i < m; ++i) {
    for (int32_t j = 0; j < m; ++j) {
      (*cos)(i, j) /= norm[i] * norm[j] + 1e-9f;
    }
  }
  auto scratch = std::make_shared<SimilarScratch>();
  return
      [cos, scratch, m](int32_t q, absl::Span<const int32_t> excluded, int n) {
        return TopOfRow(cos->row(q).data(), m, q, excluded, n, scratch.get());
      };
}

SimilarFn PopularityLister(const SparseRatings& train_by_user) {
  const int32_t m = train_by_user.cols;
  auto counts = std::make_shared<std::vector<float>>(static_cast<size_t>(m));
  for (const int32_t i : train_by_user.col) (*counts)[static_cast<size_t>(i)]++;
  auto scratch = std::make_shared<SimilarScratch>();
  return [counts, scratch, m](int32_t q, absl::Span<const int32_t> excluded,
                              int n) {
    return TopOfRow(counts->data(), m, q, excluded, n, scratch.get());
  };
}

SimilarFn ModelLister(const ItemSimilarity& index) {
  auto scratch = std::make_shared<SimilarScratch>();
  return
      [&index, scratch](int32_t q, absl::Span<const int32_t> excluded, int n) {
        SimilarRequest request;
        request.n = n;
        request.excluded = excluded;
        return SimilarItems(index, absl::MakeConstSpan(&q, 1), request,
                            scratch.get());
      };
}

}  // namespace rbmrec::bench

namespace rbmrec::bench {
namespace {

struct Measure {
  std::string name;
  SimilarityOptions options;
};

// The model's measures evaluated: the default (core/similar.h) with the
// given popularity weight first, then the variants tried.
std::vector<Measure> ModelMeasures(float weight) {
  std::vector<Measure> out;
  Measure m;
  m.options.popularity_weight = weight;
  m.name = absl::StrCat("rated-cosine-pop", weight);
  out.push_back(m);
  for (const float other : {0.0f, 0.1f, 0.2f, 0.22f, 0.25f, 0.3f}) {
    if (other == weight) continue;
    m.options.popularity_weight = other;
    m.name = absl::StrCat("rated-cosine-pop", other);
    out.push_back(m);
  }
  m.options.popularity_weight = weight;
  m.options.center = true;
  m.name = absl::StrCat("rated-cosine-centred-pop", weight);
  out.push_back(m);
  m = Measure();
  m.options.measure = SimilarityMeasure::kRatedConditional;
  for (const float lift : {0.0f, 0.85f, 1.0f}) {
    m.options.lift = lift;
    m.name = absl::StrCat("rated-conditional-lift", lift);
    out.push_back(m);
  }
  return out;
}

// One measure's line and JSON entry.
void Add(const std::string& name, const SimilarFigures& f, double build_ms,
         SimilarReport* r) {
  absl::StrAppendFormat(
      &r->text,
      "\nsimilar %-26s hit@10 %.4f (%lld queries)  genre agreement %.4f  "
      "query ms p50 %.3f p99 %.3f max %.3f (cpu p50 %.3f p99 %.3f)  build ms "
      "%.0f",
      name, f.hit, static_cast<long long>(f.queries), f.genre, f.p50_ms,
      f.p99_ms, f.max_ms, f.cpu_p50_ms, f.cpu_p99_ms, build_ms);
  r->json["measures"][name] = Json{
      {"hit10", Fixed(f.hit, 6)},
      {"queries", f.queries},
      {"genre_agreement", Fixed(f.genre, 6)},
      {"build_ms", Fixed(build_ms, 1)},
      {"query_ms", Json{{"p50", Fixed(f.p50_ms, 4)},
                        {"p99", Fixed(f.p99_ms, 4)},
                        {"max", Fixed(f.max_ms, 4)}}},
      {"query_cpu_ms",
       Json{{"p50", Fixed(f.cpu_p50_ms, 4)}, {"p99", Fixed(f.cpu_p99_ms, 4)}}}};
}

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - t0)
      .count();
}

}  // namespace

absl::StatusOr<SimilarReport> EvaluateSimilar(
    const Model& model, const SparseRatings& train_by_user,
    const std::vector<TestRating>& test, const std::string& movies,
    double liked, float popularity_weight) {
  auto genres = ReadGenres(movies, model.items());
  if (!genres.ok()) return genres.status();
  constexpr uint64_t kSeed = 7;
  const SimilarProtocol protocol(model, train_by_user, test, *std::move(genres),
                                 liked, kSeed);
  SimilarReport r;
  r.json = Json::object();
  r.json["movies"] = movies;
  r.json["queries"] = protocol.num_queries();
  r.json["seed"] = kSeed;
  r.json["protocol"] =
      "peer-similar.py's; queries drawn by core/rng.h (not numpy's "
      "RandomState stream); exact top 10 after the exclusions";
  r.json["measures"] = Json::object();
  for (const Measure& m : ModelMeasures(popularity_weight)) {
    const auto t0 = std::chrono::steady_clock::now();
    auto index = ItemSimilarity::Build(model, m.options);
    const double build_ms = MsSince(t0);
    if (!index.ok()) return index.status();
    auto f = protocol.Run(ModelLister(*index));
    if (!f.ok()) return f.status();
    Add(m.name, *f, build_ms, &r);
  }
  for (const bool cosine : {true, false}) {
    const auto t0 = std::chrono::steady_clock::now();
    const SimilarFn fn = cosine ? BinaryCosineLister(train_by_user)
                                : PopularityLister(train_by_user);
    const double build_ms = MsSince(t0);
    auto f = protocol.Run(fn);
    if (!f.ok()) return f.status();
    Add(cosine ? "item-item-cosine" : "popularity", *f, build_ms, &r);
  }
  return r;
}

}  // namespace rbmrec::bench
