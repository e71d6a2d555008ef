// rbmrec-loadgen: a closed-loop gRPC load generator for rbmrec-server.
//
// --concurrency N RPCs are kept in flight for --duration seconds after
// --warmup seconds (closed loop: each of N slots starts its next call when
// the previous one completes), picking the RPC type from a weighted --mix.
// By default the calls use gRPC's callback API, so the generator needs no
// thread per slot and leaves the shared cores to the server; --mode threads
// runs one blocking thread per slot instead (the older, costlier client). Users
// and items come from a ratings file the server imported (--ratings) or from
// --user-ids / --item-ids. Prints, per RPC type and overall: count, errors by
// status code, QPS and exact p50/p90/p99/p999 latencies (ms) of the calls
// completed in the measured window.
//
// Loopback only: the --server host must be 127.0.0.1, localhost or [::1].
// TLS and tokens as in the rbmrec CLI (client/security.h): --tls-ca,
// --tls-cert/--tls-key, --tls-server-name, --token-file and the matching
// RBMREC_TLS_* / RBMREC_TOKEN* variables; the token goes with every call
// except health.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "bench/json_numbers.h"
#include "client/client.h"
#include "client/security.h"
#include "core/cpu_check.h"
#include "core/error_reason.h"
#include "core/readers.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "nlohmann/json.hpp"
#include "proto/health.grpc.pb.h"
#include "proto/rbmrec.grpc.pb.h"

namespace {

namespace v1 = ::rbmrec::v1;
using Clock = std::chrono::steady_clock;

enum RpcType { kPredict = 0, kRecommend, kHealth, kStats, kSimilar, kNumTypes };
constexpr const char* kTypeNames[kNumTypes] = {"predict", "recommend", "health",
                                               "stats", "similar"};

struct Flags {
  std::string server = "127.0.0.1:50051";
  int concurrency = 16;
  double duration = 10;
  double warmup = 1;
  std::string mix = "predict=1";
  std::string ratings;
  std::string user_ids;
  std::string item_ids;
  int items_per_predict = 10;
  int n = 10;
  std::string method;
  // Recommend filters sent with every Recommend: categories (any-of) and a
  // file of candidate item ids (one a line).
  std::vector<std::string> categories;
  std::string candidate_items;
  int channels = 0;  // 0: min(concurrency, 64)
  int timeout_ms = 5000;
  uint64_t seed = 1;
  bool json = false;
  std::string mode = "callback";
  bool threads = false;  // mode == "threads"
  // --tls-ca, ... as given (nullopt when absent).
  rbmrec::client::SecuritySettings security;
};

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "rbmrec-loadgen: %s\n", message.c_str());
  std::exit(1);
}

// Parses the flags into `f`. Returns -1 to go on, else the exit code (0 after
// --help, 1 after a usage error, which is printed).
int ParseFlags(int argc, char** argv, Flags* f) {
  CLI::App app(
      "Closed-loop gRPC load generator for rbmrec-server (loopback only).",
      "rbmrec-loadgen");
  app.option_defaults()->always_capture_default();
  app.add_option("--server", f->server, "loopback server HOST:PORT");
  app.add_option("--concurrency", f->concurrency, "RPCs in flight")
      ->check(CLI::Range(1, 1024));
  app.add_option("--mode", f->mode,
                 "callback: callback API, no thread per call; threads: one "
                 "blocking thread per slot")
      ->check(CLI::IsMember({"callback", "threads"}));
  app.add_option("--duration", f->duration, "measured window in seconds")
      ->check(CLI::Range(0.1, 600.0));
  app.add_option("--warmup", f->warmup,
                 "unmeasured load before the window, in seconds")
      ->check(CLI::Range(0.0, 60.0));
  app.add_option("--mix", f->mix,
                 "weights, e.g. \"predict=8,recommend=2\"; types: predict, "
                 "recommend, health, stats, similar (SimilarItems of one "
                 "random item, n = --n)");
  app.add_option("--ratings", f->ratings,
                 "ratings file the server imported: users and items are "
                 "drawn from it (any format rbmrec import reads)");
  app.add_option("--user-ids,--users", f->user_ids,
                 "user ids to query, A,B,... (instead of / besides "
                 "--ratings)");
  app.add_option("--item-ids", f->item_ids,
                 "item ids to predict, A,B,... (instead of / besides "
                 "--ratings)");
  app.add_option("--items-per-predict", f->items_per_predict,
                 "items per PredictRatings")
      ->check(CLI::Range(1, 10000));
  app.add_option("--n", f->n, "Recommend top N")->check(CLI::Range(1, 10000));
  app.add_option("--category", f->categories,
                 "Recommend only items of this category (repeatable: any of "
                 "them)");
  app.add_option("--candidate-items", f->candidate_items,
                 "file of item ids (one a line): Recommend ranks only among "
                 "them");
  app.add_option("--method", f->method,
                 "prediction method (default: the server's)")
      ->check(CLI::IsMember({"exact", "mean_field"}));
  app.add_option("--channels", f->channels,
                 "gRPC connections, shared round-robin (0: one per in-flight "
                 "call, like N separate clients, at most 64)")
      ->check(CLI::Range(0, 64));
  app.add_option("--timeout-ms", f->timeout_ms, "deadline of each RPC")
      ->check(CLI::Range(1, 600000));
  app.add_option("--seed", f->seed, "random seed")
      ->check(CLI::Range(uint64_t{0}, uint64_t{2147483647}));
  app.add_flag("--json", f->json, "print one JSON object instead of a table");
  std::string tls_ca, tls_cert, tls_key, tls_server_name, token_file;
  app.add_option("--tls-ca", tls_ca,
                 "use TLS, verifying the server against this PEM CA (default "
                 "$RBMREC_TLS_CA)");
  app.add_option("--tls-cert", tls_cert,
                 "client certificate for mTLS (default $RBMREC_TLS_CERT)");
  app.add_option("--tls-key", tls_key,
                 "its private key (default $RBMREC_TLS_KEY)");
  app.add_option("--tls-server-name", tls_server_name,
                 "name expected in the server's certificate (default "
                 "$RBMREC_TLS_SERVER_NAME, else the --server host)");
  app.add_option("--token-file", token_file,
                 "token sent with every call but health: first line of FILE "
                 "(default $RBMREC_TOKEN, else $RBMREC_TOKEN_FILE)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 1;
  }
  f->threads = f->mode == "threads";
  const std::pair<const char*,
                  std::pair<std::string*, std::optional<std::string>*>>
      given[] = {{"--tls-ca", {&tls_ca, &f->security.tls_ca}},
                 {"--tls-cert", {&tls_cert, &f->security.tls_cert}},
                 {"--tls-key", {&tls_key, &f->security.tls_key}},
                 {"--tls-server-name",
                  {&tls_server_name, &f->security.tls_server_name}},
                 {"--token-file", {&token_file, &f->security.token_file}}};
  for (const auto& [name, value] : given) {
    if (app.count(name) > 0) *value.second = *value.first;
  }
  return -1;
}

void CheckLoopback(const std::string& target) {
  std::string host;
  if (!target.empty() && target[0] == '[') {
    const size_t close = target.find(']');
    if (close == std::string::npos) Die("--server: bad address " + target);
    host = target.substr(1, close - 1);
  } else {
    host = target.substr(0, target.rfind(':'));
  }
  if (target.find(':') == std::string::npos) {
    Die("--server: expected HOST:PORT, got " + target);
  }
  if (host != "127.0.0.1" && host != "localhost" && host != "::1") {
    Die("--server: loopback only (127.0.0.1, localhost or [::1]), got " +
        target);
  }
}

std::vector<double> ParseMix(const std::string& spec) {
  std::vector<double> w(kNumTypes, 0.0);
  for (absl::string_view part :
       absl::StrSplit(spec, ',', absl::SkipWhitespace())) {
    std::vector<std::string> kv = absl::StrSplit(part, '=');
    double weight = 1;
    if (kv.size() > 2 ||
        (kv.size() == 2 && (!absl::SimpleAtod(kv[1], &weight) ||
                            !(weight >= 0) || !std::isfinite(weight)))) {
      Die(absl::StrCat("--mix: bad entry '", part, "'"));
    }
    int type = -1;
    for (int t = 0; t < kNumTypes; ++t) {
      if (kv[0] == kTypeNames[t]) type = t;
    }
    if (type < 0) {
      Die(absl::StrCat("--mix: unknown RPC '", kv[0],
                       "' (predict, recommend, health, stats, similar)"));
    }
    w[static_cast<size_t>(type)] = weight;
  }
  double total = 0;
  for (double x : w) total += x;
  if (!(total > 0)) Die("--mix: all weights are zero");
  return w;
}

// Latencies (ns) and error counts of one RPC type in one worker.
struct CallRecord {
  std::vector<int64_t> latencies_ns;  // successful calls only
  std::map<int, int64_t> errors;      // grpc::StatusCode -> count
  std::string first_error;
};

struct Workload {
  std::vector<std::string> users;
  std::vector<std::string> items;
  std::vector<double> weights;
  int items_per_predict = 10;
  int n = 10;
  v1::Method method = v1::METHOD_UNSPECIFIED;
  std::vector<std::string> categories;       // sent with every Recommend
  std::vector<std::string> candidate_items;  // sent with every Recommend
  std::chrono::milliseconds timeout{5000};
  rbmrec::client::ClientSecurity security;  // its token goes with each call
};

struct Channel {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Rbmrec::Stub> stub;
  // Recommend with a request serialized by the slot (Slot::Prepare).
  std::unique_ptr<grpc::GenericStub> generic;
  std::unique_ptr<grpc::health::v1::Health::Stub> health;
};

// One slot's request/response objects and RNG; builds the next call.
class Slot {
 public:
  Slot(const Workload& w, const Channel& ch, uint64_t seed,
       Clock::time_point measure_from, Clock::time_point end,
       std::vector<CallRecord>* records)
      : w_(w),
        ch_(ch),
        rng_(seed),
        pick_type_(w.weights.begin(), w.weights.end()),
        pick_user_(0, w.users.size() - 1),
        pick_item_(0, w.items.empty() ? 0 : w.items.size() - 1),
        measure_from_(measure_from),
        end_(end),
        records_(records) {
    // Every Recommend differs only in its user: the rest of the request
    // (its filter lists may hold hundreds of ids) is built once, and, for
    // the callback loop, serialized once. A serialized message followed by
    // another is their merge, so each call sends these bytes and then its
    // user_id field: the same request as recommend_ with that user.
    recommend_.set_n(w_.n);
    recommend_.set_method(w_.method);
    for (const std::string& c : w_.categories) recommend_.add_categories(c);
    for (const std::string& id : w_.candidate_items) {
      recommend_.add_candidate_item_ids(id);
    }
    recommend_fixed_ = recommend_.SerializeAsString();
    if (!w_.users.empty()) {  // the merge gives the same request
      recommend_.set_user_id(w_.users[0]);
      v1::RecommendRequest merged;
      if (!merged.ParseFromString(recommend_fixed_ +
                                  UserOnly(w_.users[0]).SerializeAsString()) ||
          merged.SerializeAsString() != recommend_.SerializeAsString()) {
        Die("internal: the serialized Recommend does not round-trip");
      }
    }
  }

  // Blocking loop (--mode threads).
  void RunBlocking() {
    while (true) {
      start_ = Clock::now();
      if (start_ >= end_) break;
      Prepare();
      grpc::Status status;
      switch (type_) {
        case kPredict:
          status =
              ch_.stub->PredictRatings(ctx_.get(), predict_, &predict_resp_);
          break;
        case kRecommend:
          status =
              ch_.stub->Recommend(ctx_.get(), recommend_, &recommend_resp_);
          break;
        case kHealth:
          status = ch_.health->Check(ctx_.get(), health_, &health_resp_);
          break;
        case kSimilar:
          status = ch_.stub->SimilarItems(ctx_.get(), similar_, &similar_resp_);
          break;
        default:
          status = ch_.stub->GetStats(ctx_.get(), stats_, &stats_resp_);
          break;
      }
      RecordCall(status);
    }
  }

  ~Slot() {
    std::lock_guard<std::mutex> lock(restart_mu_);
    for (std::thread& t : restarts_) t.join();
  }

  // Callback loop (--mode callback): starts a call whose completion starts
  // the next one; calls `done` once the window has ended.
  void StartAsync(std::function<void()> done) {
    done_ = std::move(done);
    Next();
  }

 private:
  void Next() {
    start_ = Clock::now();
    if (start_ >= end_) {
      done_();
      return;
    }
    Prepare();
    auto on_done = [this](grpc::Status status) {
      RecordCall(status);
      Next();
    };
    switch (type_) {
      case kPredict:
        ch_.stub->async()->PredictRatings(ctx_.get(), &predict_, &predict_resp_,
                                          on_done);
        break;
      case kRecommend: {
        // The fixed part's bytes, then this call's user_id field.
        grpc::Slice parts[2] = {
            grpc::Slice(recommend_fixed_.data(), recommend_fixed_.size(),
                        grpc::Slice::STATIC_SLICE),
            grpc::Slice(UserOnly(recommend_.user_id()).SerializeAsString())};
        recommend_buf_ = grpc::ByteBuffer(parts, 2);
        ch_.generic->UnaryCall(
            ctx_.get(), recommend_method_, grpc::StubOptions(), &recommend_buf_,
            &recommend_resp_buf_, [this, on_done](grpc::Status status) {
              // Parsed like any client's answer.
              if (status.ok() &&
                  !grpc::SerializationTraits<
                       v1::RecommendResponse>::Deserialize(&recommend_resp_buf_,
                                                           &recommend_resp_)
                       .ok()) {
                status = grpc::Status(grpc::StatusCode::INTERNAL,
                                      "RecommendResponse did not parse");
              }
              on_done(status);
            });
        break;
      }
      case kHealth:
        ch_.health->async()->Check(ctx_.get(), &health_, &health_resp_,
                                   on_done);
        break;
      case kSimilar:
        ch_.stub->async()->SimilarItems(ctx_.get(), &similar_, &similar_resp_,
                                        on_done);
        break;
      default:
        ch_.stub->async()->GetStats(ctx_.get(), &stats_, &stats_resp_, on_done);
        break;
    }
  }

  static v1::RecommendRequest UserOnly(const std::string& user) {
    v1::RecommendRequest r;
    r.set_user_id(user);
    return r;
  }

  // Picks the RPC type and fills its request; a fresh context per call.
  void Prepare() {
    type_ = pick_type_(rng_);
    ctx_ = std::make_unique<grpc::ClientContext>();
    ctx_->set_deadline(std::chrono::system_clock::now() + w_.timeout);
    if (type_ != kHealth) rbmrec::client::AddToken(w_.security, ctx_.get());
    switch (type_) {
      case kPredict: {
        predict_.Clear();
        predict_.set_user_id(w_.users[pick_user_(rng_)]);
        predict_.set_method(w_.method);
        chosen_.clear();
        const size_t want = std::min(w_.items.size(),
                                     static_cast<size_t>(w_.items_per_predict));
        while (chosen_.size() < want) {
          const size_t i = pick_item_(rng_);
          if (std::find(chosen_.begin(), chosen_.end(), i) == chosen_.end()) {
            chosen_.push_back(i);
            predict_.add_item_ids(w_.items[i]);
          }
        }
        break;
      }
      case kRecommend:
        recommend_.set_user_id(w_.users[pick_user_(rng_)]);
        break;
      case kSimilar:
        similar_.Clear();
        similar_.add_item_ids(w_.items[pick_item_(rng_)]);
        similar_.set_n(w_.n);
        break;
      default:
        break;
    }
  }

  void RecordCall(const grpc::Status& status) {
    const Clock::time_point done = Clock::now();
    // Only calls that start and finish inside the window are measured.
    if (start_ < measure_from_ || done > end_) return;
    CallRecord& r = (*records_)[static_cast<size_t>(type_)];
    if (status.ok()) {
      r.latencies_ns.push_back(
          std::chrono::duration_cast<std::chrono::nanoseconds>(done - start_)
              .count());
    } else {
      if (r.first_error.empty()) {
        r.first_error =
            absl::StrCat(status.error_code(), ": ", status.error_message());
      }
      ++r.errors[status.error_code()];
    }
  }

  const Workload& w_;
  const Channel& ch_;
  std::mt19937_64 rng_;
  std::discrete_distribution<int> pick_type_;
  std::uniform_int_distribution<size_t> pick_user_;
  std::uniform_int_distribution<size_t> pick_item_;
  const Clock::time_point measure_from_, end_;
  std::vector<CallRecord>* records_;
  std::function<void()> done_;
  std::mutex restart_mu_;
  std::vector<std::thread> restarts_;
  int type_ = kPredict;
  Clock::time_point start_;
  std::unique_ptr<grpc::ClientContext> ctx_;
  std::vector<size_t> chosen_;
  v1::PredictRatingsRequest predict_;
  v1::PredictRatingsResponse predict_resp_;
  v1::RecommendRequest recommend_;
  const std::string recommend_method_ =
      absl::StrCat("/", v1::Rbmrec::service_full_name(), "/Recommend");
  std::string recommend_fixed_;  // recommend_ without user_id, serialized
  grpc::ByteBuffer recommend_buf_, recommend_resp_buf_;
  v1::RecommendResponse recommend_resp_;
  v1::SimilarItemsRequest similar_;
  v1::SimilarItemsResponse similar_resp_;
  grpc::health::v1::HealthCheckRequest health_;
  grpc::health::v1::HealthCheckResponse health_resp_;
  v1::GetStatsRequest stats_;
  v1::GetStatsResponse stats_resp_;
};

struct Summary {
  std::string name;
  int64_t count = 0;  // successful
  int64_t error_count = 0;
  std::map<int, int64_t> errors;
  std::string first_error;
  double qps = 0;  // successful calls per second
  double p50 = 0, p90 = 0, p99 = 0, p999 = 0, mean = 0, max = 0;  // ms
};

// Exact percentile: the smallest recorded latency with at least q of the
// samples <= it (nearest-rank).
double Percentile(const std::vector<int64_t>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double rank = std::ceil(q * static_cast<double>(sorted.size()));
  size_t idx = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  idx = std::min(idx, sorted.size() - 1);
  return static_cast<double>(sorted[idx]) / 1e6;
}

Summary Summarize(const std::string& name, std::vector<int64_t> lat,
                  const std::map<int, int64_t>& errors,
                  const std::string& first_error, double seconds) {
  Summary s;
  s.name = name;
  std::sort(lat.begin(), lat.end());
  s.count = static_cast<int64_t>(lat.size());
  s.errors = errors;
  s.first_error = first_error;
  for (const auto& [code, c] : errors) s.error_count += c;
  s.qps = static_cast<double>(s.count) / seconds;
  s.p50 = Percentile(lat, 0.50);
  s.p90 = Percentile(lat, 0.90);
  s.p99 = Percentile(lat, 0.99);
  s.p999 = Percentile(lat, 0.999);
  double sum = 0;
  for (int64_t x : lat) sum += static_cast<double>(x);
  s.mean = lat.empty() ? 0 : sum / static_cast<double>(lat.size()) / 1e6;
  s.max = lat.empty() ? 0 : static_cast<double>(lat.back()) / 1e6;
  return s;
}

std::string ErrorsText(const Summary& s) {
  if (s.errors.empty()) return "0";
  std::string out = absl::StrCat(s.error_count, " (");
  bool first = true;
  for (const auto& [code, c] : s.errors) {
    absl::StrAppend(&out, first ? "" : ", ", rbmrec::StatusCodeName(code), "=",
                    c);
    first = false;
  }
  return out + ")";
}

using ::rbmrec::bench::Fixed;
using ::rbmrec::bench::General;
using ::rbmrec::bench::Json;

Json SummaryJson(const Summary& s) {
  Json errors = Json::object();
  for (const auto& [code, c] : s.errors) {
    errors[std::string(rbmrec::StatusCodeName(code))] = c;
  }
  return Json{{"rpc", s.name},
              {"count", s.count},
              {"errors", s.error_count},
              {"errors_by_code", errors},
              {"first_error", s.first_error},
              {"qps", Fixed(s.qps, 1)},
              {"p50_ms", Fixed(s.p50, 3)},
              {"p90_ms", Fixed(s.p90, 3)},
              {"p99_ms", Fixed(s.p99, 3)},
              {"p999_ms", Fixed(s.p999, 3)},
              {"mean_ms", Fixed(s.mean, 3)},
              {"max_ms", Fixed(s.max, 3)}};
}

}  // namespace

int main(int argc, char** argv) {
  if (!rbmrec::CpuSupported("rbmrec-loadgen")) return 1;
  // As in rbmrec-server: no Abseil deadlock-detection bookkeeping on every
  // mutex lock (Debian's Abseil is a debug-mode build).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  Flags flags;
  if (const int rc = ParseFlags(argc, argv, &flags); rc >= 0) return rc;
  CheckLoopback(flags.server);
  absl::StatusOr<rbmrec::client::ClientSecurity> security =
      rbmrec::client::LoadSecurity(flags.security,
                                   rbmrec::client::SecurityEnvFromProcess());
  if (!security.ok()) Die(std::string(security.status().message()));

  Workload w;
  w.weights = ParseMix(flags.mix);
  w.items_per_predict = flags.items_per_predict;
  w.n = flags.n;
  w.timeout = std::chrono::milliseconds(flags.timeout_ms);
  w.security = *std::move(security);
  if (flags.method == "exact") w.method = v1::EXACT;
  if (flags.method == "mean_field") w.method = v1::MEAN_FIELD;
  w.categories = flags.categories;
  if (!flags.candidate_items.empty()) {
    std::ifstream in(flags.candidate_items);
    if (!in) Die("--candidate-items: cannot read " + flags.candidate_items);
    for (std::string line; std::getline(in, line);) {
      if (!line.empty()) w.candidate_items.push_back(line);
    }
  }

  absl::flat_hash_set<std::string> seen_users, seen_items;
  auto add_ids = [](const std::string& list, std::vector<std::string>* out,
                    absl::flat_hash_set<std::string>* seen) {
    for (absl::string_view id :
         absl::StrSplit(list, ',', absl::SkipWhitespace())) {
      if (seen->insert(std::string(id)).second) out->emplace_back(id);
    }
  };
  add_ids(flags.user_ids, &w.users, &seen_users);
  add_ids(flags.item_ids, &w.items, &seen_items);
  if (!flags.ratings.empty()) {
    absl::StatusOr<rbmrec::ReadResult> read =
        rbmrec::ReadRatingsFile(flags.ratings, rbmrec::ReadOptions{});
    if (!read.ok()) Die(std::string(read.status().message()));
    for (const rbmrec::RawRating& r : read->rows) {
      if (seen_users.insert(r.user).second) w.users.push_back(r.user);
      if (seen_items.insert(r.item).second) w.items.push_back(r.item);
    }
  }
  const bool needs_user = w.weights[kPredict] > 0 || w.weights[kRecommend] > 0;
  if (needs_user && w.users.empty()) {
    Die("predict/recommend need users: give --ratings FILE or --user-ids");
  }
  if ((w.weights[kPredict] > 0 || w.weights[kSimilar] > 0) && w.items.empty()) {
    Die("predict/similar need items: give --ratings FILE or --item-ids");
  }
  if (w.users.empty()) w.users.push_back("");

  if (flags.channels == 0) flags.channels = std::min(flags.concurrency, 64);
  std::vector<Channel> channels(static_cast<size_t>(flags.channels));
  for (size_t c = 0; c < channels.size(); ++c) {
    grpc::ChannelArguments args;
    // A distinct connection per channel (no subchannel sharing).
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("rbmrec.loadgen.channel", static_cast<int>(c));
    args.SetMaxReceiveMessageSize(64 << 20);
    channels[c].channel =
        rbmrec::client::CreateSecureChannel(flags.server, w.security, args);
    if (!channels[c].channel->WaitForConnected(
            std::chrono::system_clock::now() + std::chrono::seconds(5))) {
      // One health call for the reason (e.g. a failed TLS handshake).
      rbmrec::client::RbmrecClient probe(
          channels[c].channel, rbmrec::client::RbmrecClient::Options());
      const absl::Status status = probe.Health("").status();
      const std::string hint = rbmrec::client::SecurityHint(status, w.security);
      Die(absl::StrCat(
          "cannot connect to ", flags.server, ": ", status.ToString(),
          hint.empty() ? "" : absl::StrCat(" (hint: ", hint, ")")));
    }
    channels[c].stub = v1::Rbmrec::NewStub(channels[c].channel);
    channels[c].generic =
        std::make_unique<grpc::GenericStub>(channels[c].channel);
    channels[c].health = grpc::health::v1::Health::NewStub(channels[c].channel);
  }

  const auto to_dur = [](double s) {
    return std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(s));
  };
  const Clock::time_point begin = Clock::now();
  const Clock::time_point measure_from = begin + to_dur(flags.warmup);
  const Clock::time_point end = measure_from + to_dur(flags.duration);
  const size_t nworkers = static_cast<size_t>(flags.concurrency);
  std::vector<std::vector<CallRecord>> records(
      nworkers, std::vector<CallRecord>(kNumTypes));
  std::vector<std::unique_ptr<Slot>> slots;
  slots.reserve(nworkers);
  for (size_t t = 0; t < nworkers; ++t) {
    slots.push_back(std::make_unique<Slot>(w, channels[t % channels.size()],
                                           flags.seed * 1000003u + t,
                                           measure_from, end, &records[t]));
  }
  if (flags.threads) {
    std::vector<std::thread> threads;
    threads.reserve(nworkers);
    for (auto& slot : slots) {
      threads.emplace_back([&slot] { slot->RunBlocking(); });
    }
    for (std::thread& t : threads) t.join();
  } else {
    std::mutex mu;
    std::condition_variable cv;
    size_t running = nworkers;
    for (auto& slot : slots) {
      slot->StartAsync([&] {
        std::lock_guard<std::mutex> lock(mu);
        if (--running == 0) cv.notify_all();
      });
    }
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return running == 0; });
  }
  const double seconds = flags.duration;

  std::vector<Summary> summaries;
  std::vector<int64_t> all_lat;
  std::map<int, int64_t> all_err;
  std::string all_first;
  for (int type = 0; type < kNumTypes; ++type) {
    if (!(w.weights[static_cast<size_t>(type)] > 0)) continue;
    std::vector<int64_t> lat;
    std::map<int, int64_t> err;
    std::string first;
    for (const std::vector<CallRecord>& rec : records) {
      const CallRecord& r = rec[static_cast<size_t>(type)];
      lat.insert(lat.end(), r.latencies_ns.begin(), r.latencies_ns.end());
      for (const auto& [code, c] : r.errors) err[code] += c;
      if (first.empty()) first = r.first_error;
    }
    all_lat.insert(all_lat.end(), lat.begin(), lat.end());
    for (const auto& [code, c] : err) all_err[code] += c;
    if (all_first.empty()) all_first = first;
    summaries.push_back(
        Summarize(kTypeNames[type], std::move(lat), err, first, seconds));
  }
  summaries.push_back(
      Summarize("overall", std::move(all_lat), all_err, all_first, seconds));

  if (flags.json) {
    Json rpcs = Json::array();
    for (const Summary& summary : summaries) {
      rpcs.push_back(SummaryJson(summary));
    }
    const Json out{{"server", flags.server},
                   {"mode", flags.threads ? "threads" : "callback"},
                   {"concurrency", flags.concurrency},
                   {"channels", flags.channels},
                   {"duration_s", General(flags.duration)},
                   {"warmup_s", General(flags.warmup)},
                   {"mix", flags.mix},
                   {"users", w.users.size()},
                   {"items", w.items.size()},
                   {"items_per_predict", flags.items_per_predict},
                   {"n", flags.n},
                   {"tls", w.security.tls},
                   {"token", !w.security.token.empty()},
                   {"rpcs", rpcs}};
    std::printf(
        "%s\n",
        out.dump(-1, ' ', false, Json::error_handler_t::replace).c_str());
  } else {
    std::printf(
        "server %s  mode %s  concurrency %d  channels %d  duration %gs (+%gs "
        "warmup)  "
        "mix %s  users %zu  items %zu  tls %s  token %s\n",
        flags.server.c_str(), flags.threads ? "threads" : "callback",
        flags.concurrency, flags.channels, flags.duration, flags.warmup,
        flags.mix.c_str(), w.users.size(), w.items.size(),
        w.security.tls ? "on" : "off", w.security.token.empty() ? "no" : "yes");
    std::printf("%-10s %9s %10s %9s %8s %8s %8s %8s %8s\n", "rpc", "count",
                "errors", "qps", "p50_ms", "p90_ms", "p99_ms", "p999_ms",
                "max_ms");
    for (const Summary& s : summaries) {
      std::printf("%-10s %9lld %10s %9.1f %8.3f %8.3f %8.3f %8.3f %8.3f\n",
                  s.name.c_str(), static_cast<long long>(s.count),
                  ErrorsText(s).c_str(), s.qps, s.p50, s.p90, s.p99, s.p999,
                  s.max);
    }
    for (const Summary& s : summaries) {
      if (!s.first_error.empty() && s.name != "overall") {
        std::printf("first %s error: %s\n", s.name.c_str(),
                    s.first_error.c_str());
      }
    }
  }
  return 0;
}
