// Metrics (server/metrics/metrics.h, metrics_interceptor.h, metrics_http.h):
// - the Prometheus text format against hand-written expected text (HELP and
//   TYPE lines, escaping, histogram buckets);
// - end to end: a real gRPC server in process with the interceptor and the
//   HTTP listener on free loopback ports; RPCs of every kind (sync unary,
//   the sync Train stream, the raw AddRatings stream, the callback
//   PredictRatings/Recommend, health, reflection, an unknown method);
//   /metrics fetched over a plain socket, parsed by a small parser of the
//   text format below, and the counters checked against the calls made.

#include "server/metrics/metrics.h"

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/impl/rpc_method.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/sync_stream.h"
#include "gtest/gtest.h"
#include "proto/health.grpc.pb.h"
#include "proto/rbmrec.grpc.pb.h"
#include "proto/reflection_v1.grpc.pb.h"
#include "server/metrics/metrics_http.h"
#include "server/metrics/metrics_interceptor.h"
#include "server/service/service_metrics.h"
#include "server/transport/grpc_server.h"
#include "store/store.h"
#include "tests/server/grpc_fixture.h"
#include "tests/server/http_client.h"

namespace rbmrec::server {
namespace {

// --- The text format ---------------------------------------------------------

TEST(MetricsTextTest, CounterAndGaugeWithEscaping) {
  std::vector<MetricFamily> families = {
      {"a_total",
       "Help with \\ backslash\nand newline.",
       "counter",
       {{"", {{"method", "Get"}, {"code", "OK"}}, 3},
        {"", {{"method", "q\"uo\\te\nnl"}, {"code", "NOT_FOUND"}}, 0.5}}},
      {"b", "A gauge.", "gauge", {{"", {}, -2}}},
      {"c", "Empty.", "gauge", {}},
  };
  EXPECT_EQ(RenderText(families),
            "# HELP a_total Help with \\\\ backslash\\nand newline.\n"
            "# TYPE a_total counter\n"
            "a_total{method=\"Get\",code=\"OK\"} 3\n"
            "a_total{method=\"q\\\"uo\\\\te\\nnl\",code=\"NOT_FOUND\"} 0.5\n"
            "# HELP b A gauge.\n"
            "# TYPE b gauge\n"
            "b -2\n"
            "# HELP c Empty.\n"
            "# TYPE c gauge\n");
}

TEST(MetricsTextTest, Values) {
  EXPECT_EQ(FormatValue(0), "0");
  EXPECT_EQ(FormatValue(12345678901234), "12345678901234");
  EXPECT_EQ(FormatValue(0.1), "0.1");
  EXPECT_EQ(FormatValue(0.00025), "0.00025");
  EXPECT_EQ(FormatValue(1.0 / 3), "0.3333333333333333");
  EXPECT_EQ(FormatValue(1e300), "1e+300");
  EXPECT_EQ(FormatValue(INFINITY), "+Inf");
  EXPECT_EQ(FormatValue(-INFINITY), "-Inf");
  EXPECT_EQ(FormatValue(NAN), "NaN");
}

TEST(MetricsTextTest, ScalarFamilyKeepsCreationOrderAndAdds) {
  ScalarFamily f("x_total", "X.", "counter", {"k"});
  f.Add({"b"}, 1);
  f.Add({"a"}, 2);
  f.Add({"b"}, 1.5);
  f.Set({"c"}, 7);
  EXPECT_EQ(RenderText({f.Snapshot()}),
            "# HELP x_total X.\n"
            "# TYPE x_total counter\n"
            "x_total{k=\"b\"} 2.5\n"
            "x_total{k=\"a\"} 2\n"
            "x_total{k=\"c\"} 7\n");
}

TEST(MetricsTextTest, HistogramBucketsAreCumulativeWithInf) {
  HistogramFamily h("d_seconds", "D.", {"method"}, {0.1, 1, 10});
  h.Observe({"m"}, 0.05);  // <= 0.1
  h.Observe({"m"}, 0.1);   // <= 0.1 (le is inclusive)
  h.Observe({"m"}, 0.5);   // <= 1
  h.Observe({"m"}, 20);    // +Inf only
  h.Observe({"n"}, 2);
  EXPECT_EQ(RenderText({h.Snapshot()}),
            "# HELP d_seconds D.\n"
            "# TYPE d_seconds histogram\n"
            "d_seconds_bucket{method=\"m\",le=\"0.1\"} 2\n"
            "d_seconds_bucket{method=\"m\",le=\"1\"} 3\n"
            "d_seconds_bucket{method=\"m\",le=\"10\"} 3\n"
            "d_seconds_bucket{method=\"m\",le=\"+Inf\"} 4\n"
            "d_seconds_sum{method=\"m\"} 20.65\n"
            "d_seconds_count{method=\"m\"} 4\n"
            "d_seconds_bucket{method=\"n\",le=\"0.1\"} 0\n"
            "d_seconds_bucket{method=\"n\",le=\"1\"} 0\n"
            "d_seconds_bucket{method=\"n\",le=\"10\"} 1\n"
            "d_seconds_bucket{method=\"n\",le=\"+Inf\"} 1\n"
            "d_seconds_sum{method=\"n\"} 2\n"
            "d_seconds_count{method=\"n\"} 1\n");
}

TEST(MetricsTextTest, RpcDurationBucketsSpan100usTo10s) {
  const std::vector<double>& b = RpcDurationBuckets();
  ASSERT_FALSE(b.empty());
  EXPECT_EQ(b.front(), 0.0001);
  EXPECT_EQ(b.back(), 10);
  for (size_t i = 1; i < b.size(); ++i) EXPECT_LT(b[i - 1], b[i]);
}

TEST(MetricsTextTest, StoreErrorsSkipRequestErrors) {
  auto count = [](const std::string& code) -> int64_t {
    for (const auto& [c, n] : StoreErrorCounts()) {
      if (c == code) return n;
    }
    return 0;
  };
  const int64_t unavailable = count("UNAVAILABLE");
  const int64_t invalid = count("INVALID_ARGUMENT");
  NoteStoreStatus(absl::OkStatus());
  NoteStoreStatus(absl::InvalidArgumentError("x"));
  NoteStoreStatus(absl::NotFoundError("x"));
  NoteStoreStatus(absl::UnavailableError("locked"));
  NoteStoreStatus(absl::UnavailableError("locked"));
  EXPECT_EQ(count("UNAVAILABLE"), unavailable + 2);
  EXPECT_EQ(count("INVALID_ARGUMENT"), invalid);
}

// --- A parser of the text format (what a scraper checks) --------------------

struct Scrape {
  int http_status = 0;
  std::string content_type;
  std::string body;
  // "name{k1=v1,k2=v2}" with labels sorted by name -> value.
  std::map<std::string, double> values;
  std::map<std::string, std::string> types;  // family -> type
  std::vector<std::string> errors;           // format violations

  double Get(const std::string& key) const {
    auto it = values.find(key);
    return it == values.end() ? -1 : it->second;
  }
  bool Has(const std::string& key) const { return values.count(key) > 0; }
  // Sum of every series of `name` whose labels include `match`.
  double Sum(const std::string& name, const std::string& match) const {
    double sum = 0;
    for (const auto& [key, value] : values) {
      if (key.rfind(name + "{", 0) == 0 &&
          key.find(match) != std::string::npos) {
        sum += value;
      }
    }
    return sum;
  }
};

std::string Key(const std::string& name,
                std::map<std::string, std::string> labels = {}) {
  if (labels.empty()) return name;
  std::vector<std::string> parts;
  for (const auto& [k, v] : labels) parts.push_back(absl::StrCat(k, "=", v));
  return absl::StrCat(name, "{", absl::StrJoin(parts, ","), "}");
}

bool NameChar(char c, bool first) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
         c == ':' || (!first && c >= '0' && c <= '9');
}

// Parses the body: every line is "# HELP name text", "# TYPE name type" or
// a sample `name{label="value",...} value` (labels optional); a sample's
// family must have had its TYPE line, and a histogram's samples are
// name_bucket (with le), name_sum and name_count.
void Parse(Scrape* s) {
  std::map<std::string, bool> helped;
  for (absl::string_view line : absl::StrSplit(s->body, '\n')) {
    if (line.empty()) continue;
    if (line[0] == '#') {
      std::vector<std::string> f =
          absl::StrSplit(line, absl::MaxSplits(' ', 3));
      if (f.size() < 3 || (f[1] != "HELP" && f[1] != "TYPE")) {
        s->errors.push_back(absl::StrCat("bad comment: ", line));
      } else if (f[1] == "HELP") {
        helped[f[2]] = true;
      } else {
        if (f.size() != 4 ||
            !(f[3] == "counter" || f[3] == "gauge" || f[3] == "histogram")) {
          s->errors.push_back(absl::StrCat("bad TYPE: ", line));
        } else if (!helped[f[2]] || s->types.count(f[2])) {
          s->errors.push_back(
              absl::StrCat("TYPE without HELP or twice: ", line));
        } else {
          s->types[f[2]] = f[3];
        }
      }
      continue;
    }
    size_t i = 0;
    while (i < line.size() && NameChar(line[i], i == 0)) ++i;
    if (i == 0) {
      s->errors.push_back(absl::StrCat("no metric name: ", line));
      continue;
    }
    const std::string name(line.substr(0, i));
    std::map<std::string, std::string> labels;
    if (i < line.size() && line[i] == '{') {
      ++i;
      bool ok = true;
      while (ok && i < line.size() && line[i] != '}') {
        size_t start = i;
        while (i < line.size() && NameChar(line[i], i == start)) ++i;
        const std::string label(line.substr(start, i - start));
        if (label.empty() || i + 1 >= line.size() || line[i] != '=' ||
            line[i + 1] != '"') {
          ok = false;
          break;
        }
        i += 2;
        std::string value;
        while (i < line.size() && line[i] != '"') {
          if (line[i] == '\\' && i + 1 < line.size()) {
            const char e = line[i + 1];
            value += e == 'n' ? '\n' : e;
            i += 2;
          } else {
            value += line[i++];
          }
        }
        if (i >= line.size()) {
          ok = false;
          break;
        }
        ++i;  // closing quote
        labels[label] = value;
        if (i < line.size() && line[i] == ',') ++i;
      }
      if (!ok || i >= line.size()) {
        s->errors.push_back(absl::StrCat("bad labels: ", line));
        continue;
      }
      ++i;  // '}'
    }
    if (i >= line.size() || line[i] != ' ') {
      s->errors.push_back(absl::StrCat("no value: ", line));
      continue;
    }
    const std::string text(line.substr(i + 1));
    double value = 0;
    if (text == "+Inf") {
      value = INFINITY;
    } else if (text == "-Inf") {
      value = -INFINITY;
    } else if (text == "NaN") {
      value = NAN;
    } else if (!absl::SimpleAtod(text, &value)) {
      s->errors.push_back(absl::StrCat("bad value: ", line));
      continue;
    }
    // The family: the name itself, or a histogram's name without suffix.
    std::string family = name;
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string sx(suffix);
      if (name.size() > sx.size() &&
          name.compare(name.size() - sx.size(), sx.size(), sx) == 0 &&
          s->types.count(name.substr(0, name.size() - sx.size())) &&
          s->types[name.substr(0, name.size() - sx.size())] == "histogram") {
        family = name.substr(0, name.size() - sx.size());
        if (sx == "_bucket" && !labels.count("le")) {
          s->errors.push_back(absl::StrCat("bucket without le: ", line));
        }
      }
    }
    if (!s->types.count(family)) {
      s->errors.push_back(absl::StrCat("sample before its TYPE: ", line));
    } else if (s->types[family] == "histogram" && family == name) {
      s->errors.push_back(
          absl::StrCat("histogram sample without suffix: ", line));
    }
    const std::string key = Key(name, labels);
    if (s->values.count(key)) {
      s->errors.push_back(absl::StrCat("duplicate series: ", line));
    }
    s->values[key] = value;
  }
}

// One HTTP/1.1 request to 127.0.0.1:port (tests/server/http_client.h).
Scrape Fetch(int port, const std::string& method = "GET",
             const std::string& path = "/metrics") {
  Scrape s;
  HttpReply reply = RawRequest(
      port, absl::StrCat(
                method, " ", path,
                " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"));
  if (reply.status == 0) {
    s.errors.push_back("no HTTP answer");
    return s;
  }
  s.http_status = reply.status;
  s.content_type = reply.headers["content-type"];
  s.body = std::move(reply.body);
  if (s.http_status == 200) Parse(&s);
  return s;
}

// --- End to end --------------------------------------------------------------

class MetricsEndToEndTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(":memory:", store::StoreOptions()); }

  void Start(const std::string& db, const store::StoreOptions& options) {
    metrics_ = std::make_unique<MetricsRegistry>();
    GrpcServerOptions go;
    go.serving = [this] { return srv_.service->Serving(); };
    go.interceptors = [m = metrics_.get()] {
      std::vector<std::unique_ptr<
          grpc::experimental::ServerInterceptorFactoryInterface>>
          v;
      v.push_back(std::make_unique<MetricsInterceptorFactory>(
          &m->rpc(), ServerServiceNames()));
      return v;
    };
    srv_.Start(go, InProcessServiceOptions(), db, options);
    service_ = srv_.service.get();
    server_ = srv_.server.get();
    channel_ = srv_.channel;
    stub_ = srv_.stub.get();
    AddServiceCollector(metrics_.get(), service_);
    absl::StatusOr<std::unique_ptr<MetricsHttpServer>> http =
        MetricsHttpServer::Start("127.0.0.1:0", metrics_.get());
    ASSERT_TRUE(http.ok()) << http.status();
    http_ = std::move(*http);
    ASSERT_GT(http_->port(), 0);
  }

  void TearDown() override {
    if (http_ != nullptr) http_->Stop();
    srv_.Stop();
    http_.reset();
  }

  // 200 rows of 20 users on 15 items (100 distinct ratings), one stream.
  grpc::Status AddSomeRatings() { return server::AddSomeRatings(stub_); }

  // An AddRatings stream whose one message does not parse.
  grpc::Status AddMalformed() {
    grpc::ClientContext context;
    grpc::ByteBuffer response;
    const grpc::internal::RpcMethod method(
        "/rbmrec.v1.Rbmrec/AddRatings",
        grpc::internal::RpcMethod::CLIENT_STREAMING, channel_);
    std::unique_ptr<grpc::ClientWriter<grpc::ByteBuffer>> writer(
        grpc::internal::ClientWriterFactory<grpc::ByteBuffer>::Create(
            channel_.get(), method, &context, &response));
    grpc::Slice slice(std::string("\xff\xff\xff"));
    writer->Write(grpc::ByteBuffer(&slice, 1));
    writer->WritesDone();
    return writer->Finish();
  }

  grpc::Status TrainOnce() {
    grpc::Status status;
    EXPECT_EQ(TrainTiny(stub_, &status).state(), v1::TrainProgress::SUCCEEDED);
    return status;
  }

  grpc::Status GetStats() {
    grpc::ClientContext context;
    v1::GetStatsResponse response;
    return stub_->GetStats(&context, v1::GetStatsRequest(), &response);
  }
  grpc::Status Predict(const std::string& user) {
    grpc::ClientContext context;
    v1::PredictRatingsRequest request;
    request.set_user_id(user);
    request.add_item_ids("i1");
    v1::PredictRatingsResponse response;
    return stub_->PredictRatings(&context, request, &response);
  }
  grpc::Status Recommend(const std::string& user) {
    grpc::ClientContext context;
    v1::RecommendRequest request;
    request.set_user_id(user);
    request.set_n(3);
    v1::RecommendResponse response;
    return stub_->Recommend(&context, request, &response);
  }
  grpc::Status HealthCheck() {
    auto health = grpc::health::v1::Health::NewStub(channel_);
    grpc::ClientContext context;
    grpc::health::v1::HealthCheckRequest request;
    grpc::health::v1::HealthCheckResponse response;
    return health->Check(&context, request, &response);
  }
  grpc::Status Reflect() {
    auto stub = grpc::reflection::v1::ServerReflection::NewStub(channel_);
    grpc::ClientContext context;
    auto stream = stub->ServerReflectionInfo(&context);
    grpc::reflection::v1::ServerReflectionRequest request;
    request.set_list_services("");
    grpc::reflection::v1::ServerReflectionResponse response;
    stream->Write(request);
    stream->Read(&response);
    stream->WritesDone();
    return stream->Finish();
  }
  // A unary call of a method no service has.
  grpc::Status Unknown() {
    grpc::GenericStub stub(channel_);
    grpc::ClientContext context;
    grpc::Slice empty(std::string{});
    grpc::ByteBuffer request(&empty, 1), response;
    grpc::Status status;
    bool done = false;
    std::mutex mu;
    std::condition_variable cv;
    stub.UnaryCall(&context, "/rbmrec.v1.Rbmrec/NoSuchMethod", {}, &request,
                   &response, [&](grpc::Status s) {
                     std::lock_guard<std::mutex> lock(mu);
                     status = s;
                     done = true;
                     cv.notify_one();
                   });
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
    return status;
  }

  Scrape Metrics() {
    Scrape s = Fetch(http_->port());
    EXPECT_EQ(s.http_status, 200);
    EXPECT_EQ(s.content_type, "text/plain; version=0.0.4; charset=utf-8");
    EXPECT_TRUE(s.errors.empty()) << absl::StrJoin(s.errors, "\n");
    return s;
  }

  static std::string Requests(const std::string& method,
                              const std::string& code) {
    return Key("rbmrec_rpc_requests_total",
               {{"method", method}, {"code", code}});
  }
  static std::string InFlight(const std::string& method) {
    return Key("rbmrec_rpc_in_flight", {{"method", method}});
  }
  static std::string DurationCount(const std::string& method) {
    return Key("rbmrec_rpc_duration_seconds_count", {{"method", method}});
  }

  std::unique_ptr<MetricsRegistry> metrics_;
  std::unique_ptr<MetricsHttpServer> http_;
  InProcessServer srv_;  // after metrics_: its interceptors count into it
  RbmrecService* service_ = nullptr;
  GrpcServer* server_ = nullptr;
  std::shared_ptr<grpc::Channel> channel_;
  v1::Rbmrec::Stub* stub_ = nullptr;
};

TEST_F(MetricsEndToEndTest, CountersMoveWithTrafficOfEveryKind) {
  // Before any call: no request counted, nothing in flight.
  Scrape before = Metrics();
  EXPECT_EQ(before.Sum("rbmrec_rpc_requests_total", ""), 0) << before.body;
  EXPECT_EQ(before.Sum("rbmrec_rpc_in_flight", ""), 0);
  EXPECT_EQ(before.types["rbmrec_rpc_requests_total"], "counter");
  EXPECT_EQ(before.types["rbmrec_rpc_duration_seconds"], "histogram");
  EXPECT_EQ(before.types["rbmrec_rpc_in_flight"], "gauge");

  // The failing callback call first (no model yet).
  EXPECT_EQ(Predict("u1").error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  ASSERT_TRUE(AddSomeRatings().ok());  // raw sync stream
  EXPECT_EQ(AddMalformed().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  ASSERT_TRUE(GetStats().ok());  // sync unary
  ASSERT_TRUE(GetStats().ok());
  ASSERT_TRUE(TrainOnce().ok());    // sync server stream
  ASSERT_TRUE(Predict("u1").ok());  // callback, inline
  ASSERT_TRUE(Predict("u2").ok());
  EXPECT_EQ(Predict("nobody").error_code(), grpc::StatusCode::NOT_FOUND);
  ASSERT_TRUE(Recommend("u3").ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(HealthCheck().ok());
  ASSERT_TRUE(Reflect().ok());  // bidi stream
  EXPECT_EQ(Unknown().error_code(), grpc::StatusCode::UNIMPLEMENTED);

  Scrape s = Metrics();
  const std::map<std::string, double> want = {
      {Requests("PredictRatings", "FAILED_PRECONDITION"), 1},
      {Requests("PredictRatings", "OK"), 2},
      {Requests("PredictRatings", "NOT_FOUND"), 1},
      {Requests("AddRatings", "OK"), 1},
      {Requests("AddRatings", "INVALID_ARGUMENT"), 1},
      {Requests("GetStats", "OK"), 2},
      {Requests("Train", "OK"), 1},
      {Requests("Recommend", "OK"), 1},
      {Requests("Check", "OK"), 3},
      {Requests("ServerReflectionInfo", "OK"), 1},
      {Requests("unknown", "UNIMPLEMENTED"), 1},
  };
  double total = 0;
  for (const auto& [key, n] : want) {
    EXPECT_EQ(s.Get(key), n) << key << "\n" << s.body;
    total += n;
  }
  // Nothing else was counted.
  EXPECT_EQ(s.Sum("rbmrec_rpc_requests_total", ""), total) << s.body;
  // Each method's histogram counted each of its calls; buckets cumulative,
  // +Inf equal to _count.
  for (const char* m :
       {"PredictRatings", "AddRatings", "GetStats", "Train", "Recommend",
        "Check", "ServerReflectionInfo", "unknown"}) {
    const double calls =
        s.Sum("rbmrec_rpc_requests_total", absl::StrCat("method=", m, "}"));
    EXPECT_EQ(s.Get(DurationCount(m)), calls) << m;
    EXPECT_EQ(s.Get(Key("rbmrec_rpc_duration_seconds_bucket",
                        {{"method", m}, {"le", "+Inf"}})),
              calls)
        << m;
    double previous = 0;
    for (double le : RpcDurationBuckets()) {
      const double b = s.Get(Key("rbmrec_rpc_duration_seconds_bucket",
                                 {{"method", m}, {"le", FormatValue(le)}}));
      EXPECT_GE(b, previous) << m << " le=" << le;
      previous = b;
    }
    EXPECT_GT(s.Get(Key("rbmrec_rpc_duration_seconds_sum", {{"method", m}})), 0)
        << m;
  }
  // Every call has finished.
  EXPECT_EQ(s.Sum("rbmrec_rpc_in_flight", ""), 0) << s.body;

  // The service's gauges.
  EXPECT_EQ(s.Get("rbmrec_ratings_stored"), 100);  // 5 distinct items a user
  EXPECT_EQ(s.Get("rbmrec_users_stored"), 20);
  EXPECT_EQ(s.Get("rbmrec_items_stored"), 15);
  EXPECT_EQ(s.Get("rbmrec_serving"), 1);
  EXPECT_EQ(s.Get("rbmrec_active_model_version"),
            static_cast<double>(service_->active_version()));
  EXPECT_GT(s.Get("rbmrec_active_model_version"), 0);
  EXPECT_GE(s.Get("rbmrec_active_model_age_seconds"), -1);
  EXPECT_LT(s.Get("rbmrec_active_model_age_seconds"), 60);
  EXPECT_GT(s.Get("rbmrec_last_full_model_epochs"), 0);
  EXPECT_TRUE(s.Has("rbmrec_last_full_model_validation_rmse"));
  EXPECT_EQ(s.Get("rbmrec_training_running"), 0);
  EXPECT_EQ(s.Get("rbmrec_online_updates_total"), 0);
  EXPECT_EQ(s.types["rbmrec_online_updates_total"], "counter");
  EXPECT_EQ(s.types["rbmrec_store_errors_total"], "counter");
  EXPECT_EQ(s.Get("rbmrec_leader"), 1);
  EXPECT_EQ(s.Get(Key("rbmrec_build_info", {{"version", "0.1.0"}})), 1);
  EXPECT_GT(s.Get("process_resident_memory_bytes"), 1 << 20);

  // More traffic moves exactly the counters it should: 3 PredictRatings OK.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Predict("u4").ok());
  Scrape after = Metrics();
  for (const auto& [key, value] : s.values) {
    if (key.rfind("rbmrec_rpc_requests_total{", 0) != 0) continue;
    const double expected =
        key == Requests("PredictRatings", "OK") ? value + 3 : value;
    EXPECT_EQ(after.Get(key), expected) << key;
  }
  EXPECT_EQ(after.Sum("rbmrec_rpc_requests_total", ""), total + 3);
  EXPECT_EQ(after.Get(DurationCount("PredictRatings")),
            s.Get(DurationCount("PredictRatings")) + 3);
  EXPECT_EQ(after.Sum("rbmrec_rpc_in_flight", ""), 0);
}

// Every metric the Grafana dashboard queries exists once a model is trained.
TEST_F(MetricsEndToEndTest, DashboardQueriesOnlyMetricsThatExist) {
  std::ifstream file(RBMREC_DASHBOARD);
  ASSERT_TRUE(file) << RBMREC_DASHBOARD;
  std::stringstream text;
  text << file.rdbuf();
  const std::string dashboard = text.str();
  std::set<std::string> names;
  for (size_t at = 0;
       (at = dashboard.find("\"expr\"", at)) != std::string::npos; ++at) {
    const size_t end = dashboard.find('\n', at);
    const std::string expr = dashboard.substr(at, end - at);
    for (const char* prefix : {"rbmrec_", "process_"}) {
      for (size_t i = 0; (i = expr.find(prefix, i)) != std::string::npos;) {
        size_t j = i;
        while (j < expr.size() && NameChar(expr[j], false)) ++j;
        names.insert(expr.substr(i, j - i));
        i = j;
      }
    }
  }
  ASSERT_GT(names.size(), 15u);
  ASSERT_TRUE(AddSomeRatings().ok());
  ASSERT_TRUE(TrainOnce().ok());
  ASSERT_TRUE(Predict("u1").ok());
  Scrape s = Metrics();
  for (const std::string& name : names) {
    bool found = s.types.count(name) > 0;
    for (const auto& [key, value] : s.values) {
      if (key == name || key.rfind(name + "{", 0) == 0) found = true;
    }
    EXPECT_TRUE(found) << name << " is in the dashboard, not in /metrics";
  }
}

// A callback call finished from the loader thread (a stored version that is
// not in memory) is counted like one finished inline.
TEST_F(MetricsEndToEndTest, CallsFinishedOnTheLoaderThreadAreCounted) {
  ASSERT_TRUE(AddSomeRatings().ok());
  ASSERT_TRUE(TrainOnce().ok());
  ASSERT_TRUE(TrainOnce().ok());
  ASSERT_EQ(service_->active_version(), 2);
  ASSERT_FALSE(service_->ModelResident(1));
  Scrape before = Metrics();
  grpc::ClientContext context;
  v1::PredictRatingsRequest request;
  request.set_user_id("u3");
  request.add_item_ids("i1");
  request.set_model_version(1);
  v1::PredictRatingsResponse response;
  ASSERT_TRUE(stub_->PredictRatings(&context, request, &response).ok());
  EXPECT_EQ(response.model_version(), 1);
  EXPECT_TRUE(service_->ModelResident(1));  // it went through the loader
  Scrape after = Metrics();
  const std::string ok = Requests("PredictRatings", "OK");
  EXPECT_EQ(after.Get(ok), (before.Has(ok) ? before.Get(ok) : 0) + 1);
  EXPECT_EQ(after.Get(DurationCount("PredictRatings")),
            before.Get(DurationCount("PredictRatings")) + 1);
  EXPECT_EQ(after.Get(InFlight("PredictRatings")), 0);
}

// A full database: the failed write counts once in the store errors and
// once in the RPC counters.
TEST_F(MetricsEndToEndTest, StoreErrorsCountAFullDatabase) {
  TearDown();
  char dir[] = "/tmp/rbmrec_metrics_test_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = absl::StrCat(dir, "/full.db");
  store::StoreOptions options;
  options.max_bytes = 1 << 20;
  Start(path, options);
  const std::string full =
      Key("rbmrec_store_errors_total", {{"code", "RESOURCE_EXHAUSTED"}});
  Scrape before = Metrics();
  const double errors_before = before.Has(full) ? before.Get(full) : 0;

  grpc::Status status;
  int streams = 0;
  for (int b = 0; b < 100 && status.ok(); ++b, ++streams) {
    grpc::ClientContext context;
    v1::AddRatingsResponse response;
    auto writer = stub_->AddRatings(&context, &response);
    v1::AddRatingsRequest batch;
    for (int i = 0; i < 5000; ++i) {
      v1::Rating* r = batch.add_ratings();
      r->set_user_id(absl::StrCat("user-", b, "-", i / 50));
      r->set_item_id(absl::StrCat("item-", i % 50));
      r->set_rating(1 + i % 5);
    }
    writer->Write(batch);
    writer->WritesDone();
    status = writer->Finish();
  }
  ASSERT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << status.error_message();
  Scrape after = Metrics();
  EXPECT_EQ(after.Get(full), errors_before + 1) << after.body;
  EXPECT_EQ(after.Get(Requests("AddRatings", "RESOURCE_EXHAUSTED")), 1);
  EXPECT_EQ(after.Get(Requests("AddRatings", "OK")), streams - 1);
  TearDown();
  std::remove(path.c_str());
  std::remove((path + "-wal").c_str());
  std::remove((path + "-shm").c_str());
  rmdir(dir);
}

TEST_F(MetricsEndToEndTest, InFlightCountsAnOpenStreamUntilItEnds) {
  auto health = grpc::health::v1::Health::NewStub(channel_);
  grpc::ClientContext context;
  grpc::health::v1::HealthCheckRequest request;
  auto watch = health->Watch(&context, request);
  grpc::health::v1::HealthCheckResponse response;
  ASSERT_TRUE(watch->Read(&response));  // the stream is open on the server
  Scrape open = Metrics();
  EXPECT_EQ(open.Get(InFlight("Watch")), 1) << open.body;
  EXPECT_EQ(open.Sum("rbmrec_rpc_requests_total", "method=Watch}"), 0);

  context.TryCancel();
  while (watch->Read(&response)) {
  }
  EXPECT_EQ(watch->Finish().error_code(), grpc::StatusCode::CANCELLED);
  // The server learns of the cancellation asynchronously, and one scrape
  // reads the families one after the other (the call may finish between
  // the requests counter and the in-flight gauge): wait for both.
  Scrape closed;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  do {
    closed = Metrics();
    if (closed.Get(InFlight("Watch")) == 0 &&
        closed.Sum("rbmrec_rpc_requests_total", "method=Watch}") == 1) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } while (std::chrono::steady_clock::now() < until);
  EXPECT_EQ(closed.Get(InFlight("Watch")), 0) << closed.body;
  EXPECT_EQ(closed.Sum("rbmrec_rpc_requests_total", "method=Watch}"), 1)
      << closed.body;
  EXPECT_EQ(closed.Get(DurationCount("Watch")), 1);
}

TEST_F(MetricsEndToEndTest, OnlyGetMetricsIsServed) {
  EXPECT_EQ(Fetch(http_->port(), "GET", "/").http_status, 404);
  EXPECT_EQ(Fetch(http_->port(), "GET", "/metricsx").http_status, 404);
  EXPECT_EQ(Fetch(http_->port(), "POST", "/metrics").http_status, 405);
  EXPECT_EQ(Fetch(http_->port(), "HEAD", "/metrics").http_status, 200);
}

TEST(MetricsHttpTest, BadAddresses) {
  MetricsRegistry registry;
  EXPECT_EQ(MetricsHttpServer::Start("nohostport", &registry).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MetricsHttpServer::Start(":9100", &registry).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      MetricsHttpServer::Start("127.0.0.1:99999", &registry).status().code(),
      absl::StatusCode::kInvalidArgument);
  // A port in use.
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> first =
      MetricsHttpServer::Start("127.0.0.1:0", &registry);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(MetricsHttpServer::Start(
                absl::StrCat("127.0.0.1:", (*first)->port()), &registry)
                .status()
                .code(),
            absl::StatusCode::kUnavailable);
  // IPv6 loopback and a name.
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> v6 =
      MetricsHttpServer::Start("[::1]:0", &registry);
  if (v6.ok()) {  // hosts without IPv6 skip this
    EXPECT_GT((*v6)->port(), 0);
  }
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> named =
      MetricsHttpServer::Start("localhost:0", &registry);
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_GT((*named)->port(), 0);
}

}  // namespace
}  // namespace rbmrec::server
