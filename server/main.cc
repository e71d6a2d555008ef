// rbmrec-server: serves rbmrec.v1.Rbmrec over gRPC from a SQLite database.
//
// Every flag can be given as --name=VALUE or --name VALUE, or through the
// environment variable RBMREC_<NAME> (upper case, '-' -> '_'); a flag
// overrides the environment, which overrides the default. `--help` lists
// them all with their variables and defaults.
//
// Signals: SIGTERM/SIGINT/SIGHUP are blocked before any thread starts and
// collected with sigwait() (the server may run as PID 1 in a container). On
// SIGTERM or SIGINT the server stops accepting calls, lets in-flight calls
// finish (up to --shutdown-grace-seconds), cancels a running training job,
// persists pending online updates and exits 0. On SIGHUP it re-reads the
// --auth-tokens file and the TLS files (server/security/auth.h, tls.h; the
// HTTP listener's too); a file that fails to load is logged, the old stays.
//
// Subcommands (no server is started):
//   rbmrec-server token new NAME ROLE   a fresh token and its token-file line
//   rbmrec-server token hash            the token-file hash of a token (stdin)

#include <signal.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/synchronization/mutex.h"
#include "core/cpu_check.h"
#include "core/rating_scale.h"
#include "core/trainer.h"
#include "server/http/http_server.h"
#include "server/log.h"
#include "server/memory.h"
#include "server/metrics/metrics.h"
#include "server/metrics/metrics_http.h"
#include "server/metrics/metrics_interceptor.h"
#include "server/security/auth.h"
#include "server/security/listen_policy.h"
#include "server/security/tls.h"
#include "server/security/token_command.h"
#include "server/service/service.h"
#include "server/service/service_metrics.h"
#include "server/transport/grpc_server.h"
#include "store/store.h"

namespace {

using rbmrec::server::ColdStart;
using rbmrec::server::F;
using rbmrec::server::Log;
using rbmrec::server::LogLevel;

// RBMREC_<NAME>: the flag's long name upper-cased, '-' -> '_'.
std::string EnvName(const std::string& flag) {
  std::string name = absl::StrCat("RBMREC_", flag);
  absl::AsciiStrToUpper(&name);
  absl::StrReplaceAll({{"-", "_"}}, &name);
  return name;
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

int UsageError(const std::string& message) {
  std::cerr << "rbmrec-server: " << message
            << "\n(run rbmrec-server --help for usage)\n";
  return 1;
}

// Every flag's value (and what it is bound to), with its default: the
// parts' options where a flag sets one directly, else the flag's text.
struct Flags {
  rbmrec::server::ServiceOptions so;
  rbmrec::server::GrpcServerOptions go;
  rbmrec::store::StoreOptions store_options;
  std::string db = "./rbmrec.db";
  std::string advertise;
  std::string scale_text = "1:5:1";
  std::string cd_text = so.train_defaults.cd.ToString();
  std::string log_level = "info";
  double grace = 5;
  std::string reflection = "auto";
  rbmrec::server::TlsFiles tls_files;
  std::string auth_tokens;
  bool insecure = false;
  std::string metrics_listen;
  rbmrec::server::http::HttpServerOptions http;  // listen empty: off
  int64_t db_max_mb = 0;
  int64_t max_train_memory_mb = so.training.max_train_memory_bytes >> 20;
  int64_t max_model_mb = so.training.max_model_bytes >> 20;
  int64_t version_cache_mb = so.registry.version_cache_bytes >> 20;
  std::string activate = "if-better";
};

// The flags in --help's order, in groups: address, database and scale.
void BindServerFlags(CLI::App& app, Flags& f) {
  rbmrec::server::GrpcServerOptions& go = f.go;
  auto& advertise = f.advertise;
  auto& db = f.db;
  auto& scale_text = f.scale_text;
  app.add_option("--listen", go.listen, "address to listen on (host:port)");
  app.add_option("--advertise", advertise,
                 "replicas on one PostgreSQL database: the HOST:PORT other "
                 "replicas and clients use to reach this server (told to "
                 "callers of Train on a follower; default: --listen)");
  app.add_option("--db", db,
                 "SQLite database file (created on first start), or a "
                 "PostgreSQL URI postgresql://USER@HOST[:PORT]/DB");
  app.add_option("--threads", go.threads,
                 "max threads serving RPCs (0 = gRPC default)")
      ->check(CLI::Range(0, 4096));
  app.add_option("--scale", scale_text, "rating scale MIN:MAX:STEP");
}

// Training defaults come from core's TrainOptions (the tuned settings):
// each flag's default is its field's value.
void BindTrainingFlags(CLI::App& app, Flags& f) {
  rbmrec::server::ServiceOptions& so = f.so;
  rbmrec::TrainOptions& t = f.so.train_defaults;
  auto& cd_text = f.cd_text;
  app.add_option("--hidden", t.hidden,
                 "training default: hidden units (0 = the size rule, README "
                 "\"The model\")")
      ->check(CLI::Range(0, 10000));
  app.add_option("--epochs", t.max_epochs, "training default: maximum epochs")
      ->check(CLI::Range(1, 100000));
  app.add_option("--batch-size,--batch", t.batch_size,
                 "training default: cases per mini-batch (0 = the size rule, "
                 "README \"The model\")")
      ->check(CLI::Range(0, 1000000));
  app.add_option("--learning-rate,--lr", t.learning_rate,
                 "training default: learning rate (0 = the size rule)")
      ->check(Finite());
  app.add_option("--momentum", t.momentum, "training default: momentum")
      ->check(Finite());
  app.add_option("--weight-decay", t.weight_decay,
                 "training default: L2 weight decay")
      ->check(Finite());
  app.add_option("--cd-steps", cd_text,
                 "training default: CD schedule (\"auto\", \"T\" or "
                 "\"T1,T2@E2\")");
  app.add_option("--seed", t.seed, "training default: random seed");
  app.add_option("--validation-fraction", t.validation_fraction,
                 "training default: held-out fraction for early stopping")
      ->check(Finite());
  app.add_flag("--ordinal", t.ordinal,
               "training default: ordinal sharing between rating values "
               "(default true; --ordinal=false turns it off)");
  app.add_option("--factors", t.factors,
                 "training default: factored training through C factors (-1 "
                 "= size rule, 0 = unfactored)")
      ->check(CLI::Range(-1, 10000));
  app.add_option("--average", t.average,
                 "training default: parameter averaging over epochs, in [0, "
                 "1) (0 = off)")
      ->check(Finite());
  app.add_option("--ensemble", t.ensemble,
                 "training default: user-based RBMs averaged (plus the "
                 "item-based one)")
      ->check(CLI::Range(1, 64));
  app.add_option("--rated-hidden", t.rated_hidden,
                 "training default: hidden units of the rated RBM behind "
                 "Recommend's default ranking (-1 = size rule, 0 = off)")
      ->check(CLI::Range(-1, 10000));
  app.add_option("--item-regression", t.item_regression,
                 "training default: the item regression behind Recommend's "
                 "default ranking, fitted with the rated RBM (-1 = over "
                 "every item when its items x items matrix fits the size "
                 "rule, else the 4,096 most rated, the default; 0 = off, for "
                 "cheaper Recommends by p(rated); 1 = every item)")
      ->check(CLI::Range(-1, 1));
  app.add_option("--mf-factors", t.mf_factors,
                 "training default: factors of the matrix factorisation "
                 "blended into the served distributions, kept when the "
                 "blend lowers the validation RMSE (0 = never)")
      ->check(CLI::Range(0, rbmrec::kMaxMfFactors));
  app.add_option("--rated-factors", t.rated_factors,
                 "training default: the rated RBM trained factored through "
                 "C factors (0 = unfactored)")
      ->check(CLI::Range(0, 10000));
  app.add_option("--train-threads", so.max_train_threads,
                 "max training threads (0 = hardware threads)")
      ->check(CLI::Range(0, 256));
  app.add_option("--train-nice", so.training.train_nice,
                 "niceness added to training threads so serving keeps the "
                 "cores (0-19; 0 = same priority)")
      ->check(CLI::Range(0, 19));
}

// Request limits, gRPC sizes and online updates.
void BindServingFlags(CLI::App& app, Flags& f) {
  rbmrec::server::ServiceOptions& so = f.so;
  rbmrec::server::GrpcServerOptions& go = f.go;
  app.add_option("--max-batch", so.limits.max_batch_rows,
                 "max rows per AddRatings batch / PutItems call / "
                 "GetUserRatings page")
      ->check(CLI::Range(1, 10000000));
  app.add_option("--max-predict-items", so.limits.max_predict_items,
                 "max item_ids per PredictRatings")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--max-recommend-n", so.limits.max_recommend_n,
                 "max n (and offset + n) of Recommend")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--max-filter-items", so.limits.max_filter_items,
                 "max exclude_item_ids and candidate_item_ids per Recommend "
                 "(each list)")
      ->check(CLI::Range(1, 10000000));
  app.add_option("--max-categories", so.limits.max_categories,
                 "max categories + required_categories per Recommend")
      ->check(CLI::Range(1, 100000));
  app.add_option("--max-message-mb", go.max_message_mb,
                 "max gRPC message size in MiB")
      ->check(CLI::Range(1, 2047));
  app.add_option("--recommend-candidates", so.recommend_candidates,
                 "Recommend (exact): items pre-ranked by mean field and "
                 "re-scored exactly (0 = exact over all items)")
      ->check(CLI::Range(0, 10000000));
  app.add_option("--cold-start", so.cold_start,
                 "Recommend for a user without ratings: popular (the most "
                 "rated items that pass the filters) or empty-user (the "
                 "model's answer for an empty user)")
      ->transform(CLI::CheckedTransformer(
          std::map<std::string, ColdStart>{
              {"popular", ColdStart::kPopular},
              {"empty-user", ColdStart::kEmptyUser}},
          CLI::ignore_case))
      ->default_str("popular");
  app.add_option("--online", so.online.enabled,
                 "apply online per-user CD updates (true/false)")
      ->default_str("true");
  app.add_option("--online-lr", so.online.learning_rate,
                 "learning rate of online updates (> 0)")
      ->check(Finite());
  app.add_option("--online-steps", so.online.steps,
                 "CD updates per changed user")
      ->check(CLI::Range(1, 1000));
  app.add_option("--online-publish-seconds", so.online.publish_seconds,
                 "how often a changed online model is stored as a new "
                 "version (> 0)")
      ->check(Finite());
}

// Reflection, TLS, tokens, metrics, shutdown and logging.
void BindSecurityFlags(CLI::App& app, Flags& f) {
  auto& reflection = f.reflection;
  auto& tls_files = f.tls_files;
  auto& auth_tokens = f.auth_tokens;
  auto& insecure = f.insecure;
  auto& metrics_listen = f.metrics_listen;
  auto& grace = f.grace;
  auto& log_level = f.log_level;
  app.add_option("--reflection", reflection,
                 "serve gRPC server reflection v1 and v1alpha: auto (on when "
                 "--listen is a loopback address), on or off; needs the "
                 "read role when --auth-tokens is set")
      ->check(CLI::IsMember({"auto", "on", "off", "true", "false"}));
  app.add_option("--tls-cert", tls_files.cert,
                 "serve TLS with this PEM certificate chain (with --tls-key)");
  app.add_option("--tls-key", tls_files.key, "PEM private key of --tls-cert");
  app.add_option("--tls-client-ca", tls_files.client_ca,
                 "PEM CA bundle: require client certificates signed by it "
                 "(mTLS)");
  app.add_option("--auth-tokens", auth_tokens,
                 "token file (lines 'NAME ROLE sha256:HEX'): every call "
                 "except health needs a token with the method's role");
  app.add_flag("--insecure", insecure,
               "allow a non-loopback --listen without TLS and tokens, and a "
               "non-loopback --metrics-listen");
  app.add_option("--metrics-listen", metrics_listen,
                 "serve Prometheus metrics over plain HTTP at "
                 "http://HOST:PORT/metrics (empty = off; a non-loopback "
                 "address needs --insecure)");
  app.add_option("--http-listen", f.http.listen,
                 "serve the HTTP/JSON API (docs/http.md) on HOST:PORT (empty "
                 "= off; the same TLS, token and loopback policy as --listen)");
  app.add_option("--http-threads", f.http.threads,
                 "polling threads of the HTTP listener, each serving many "
                 "connections (0 = one per hardware thread)")
      ->check(CLI::Range(0, 256));
  app.add_option("--http-max-connections", f.http.max_connections,
                 "open connections of the HTTP listener at most")
      ->check(CLI::Range(1, 100000));
  app.add_option("--http-timeout-seconds", f.http.timeout_seconds,
                 "close an HTTP connection idle this long")
      ->check(CLI::Range(1, 3600));
  app.add_option("--shutdown-grace-seconds", grace,
                 "how long in-flight RPCs may run after SIGTERM")
      ->check(Finite());
  app.add_option("--log-level", log_level, "debug, info, warn or error")
      ->check(CLI::IsMember({"debug", "info", "warn", "warning", "error"}));
}

// Limits, retention and activation (ServiceOptions) and the database
// size limit (StoreOptions::max_bytes).
void BindStorageFlags(CLI::App& app, Flags& f) {
  rbmrec::server::ServiceOptions& so = f.so;
  auto& store_options = f.store_options;
  auto& db_max_mb = f.db_max_mb;
  auto& max_train_memory_mb = f.max_train_memory_mb;
  auto& max_model_mb = f.max_model_mb;
  auto& activate = f.activate;
  auto& version_cache_mb = f.version_cache_mb;
  app.add_option("--max-adhoc-ratings", so.limits.max_adhoc_ratings,
                 "max ad-hoc ratings per PredictRatings / Recommend")
      ->check(CLI::Range(0, 10000000));
  app.add_option("--max-bulk-users", so.limits.max_bulk_users,
                 "max user_ids per RecommendAll request (0 users = every "
                 "stored user, not limited)")
      ->check(CLI::Range(1, 100000000));
  app.add_option("--max-train-memory-mb", max_train_memory_mb,
                 "a Train job whose estimated peak memory is larger is "
                 "refused (RESOURCE_EXHAUSTED, MEMORY_LIMIT); 0 = half of "
                 "min(RAM, cgroup memory.max)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  app.add_option("--max-model-mb", max_model_mb,
                 "a Train job whose estimated model is larger is refused")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  app.add_option("--keep-full-models", so.registry.keep_full,
                 "stored full-training models kept (plus active and pinned)")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--keep-online-models", so.registry.keep_online,
                 "stored online-update versions kept (plus active and "
                 "pinned)")
      ->check(CLI::Range(0, 1000000));
  app.add_option("--activate", activate,
                 "when a finished Train becomes active: always, if-better "
                 "(validation RMSE not worse than the active model's by more "
                 "than --activate-tolerance) or never")
      ->check(CLI::IsMember({"always", "if-better", "never"}));
  app.add_option("--activate-tolerance", so.registry.activate_tolerance,
                 "if-better: allowed validation RMSE increase")
      ->check(CLI::Range(0.0, 1e9));
  app.add_option("--db-max-mb", db_max_mb,
                 "database size limit in MiB; writes past it fail with "
                 "RESOURCE_EXHAUSTED, STORAGE_FULL (0 = unlimited)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  app.add_option("--retrain-after-erasures", so.retrain_after_erasures,
                 "start a full training after this many DeleteUser erasures "
                 "since the last one started, so that the weights shared by "
                 "all users stop carrying the erased users (0 = never)")
      ->check(CLI::Range(0, 1000000000));
  app.add_option("--integrity-check", store_options.check_integrity,
                 "check a SQLite database's structure at start (PRAGMA "
                 "quick_check, about 1 s per GiB); a damaged file is refused")
      ->default_str("true");
  app.add_option("--version-cache-mb", version_cache_mb,
                 "loaded non-active model versions kept in memory, MiB")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
}

// Parses argv into `f`: -1 to go on, else the exit code (--help: 0, a
// usage error: 1).
int ParseFlags(int argc, char** argv, Flags& f) {
  CLI::App app(
      "Serves rbmrec.v1.Rbmrec (plus grpc.health.v1 and server reflection "
      "v1/v1alpha) over gRPC.",
      "rbmrec-server");
  app.option_defaults()->always_capture_default();
  app.footer(
      "Each flag may also be set by the environment variable shown (flag > "
      "env > default).\n\nClient tokens (--auth-tokens):\n"
      "  rbmrec-server token new NAME ROLE   print a new token and its "
      "token-file line\n"
      "  rbmrec-server token hash            print the token-file hash of the "
      "token on stdin");
  BindServerFlags(app, f);
  BindTrainingFlags(app, f);
  BindServingFlags(app, f);
  BindSecurityFlags(app, f);
  BindStorageFlags(app, f);

  for (CLI::Option* opt : app.get_options()) {
    if (opt->get_name() == "--help" || opt->get_lnames().empty()) continue;
    opt->envname(EnvName(opt->get_lnames().front()));
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 1;  // --help: 0; a usage error: 1
  }

  return -1;
}

// The flags' texts made into the parts' options, and the checks main makes
// of them: -1 to go on, else the exit code.
int ResolveFlags(Flags& f) {
  rbmrec::server::ServiceOptions& so = f.so;
  rbmrec::TrainOptions& t = f.so.train_defaults;
  auto& store_options = f.store_options;
  using rbmrec::server::Activation;
  so.registry.activation = f.activate == "always"      ? Activation::kAlways
                           : f.activate == "if-better" ? Activation::kIfBetter
                                                       : Activation::kNever;
  so.training.max_train_memory_bytes = f.max_train_memory_mb << 20;
  so.training.max_model_bytes = f.max_model_mb << 20;
  so.registry.version_cache_bytes = f.version_cache_mb << 20;
  store_options.max_bytes = f.db_max_mb << 20;

  LogLevel level = LogLevel::kInfo;
  rbmrec::server::ParseLogLevel(f.log_level, &level);
  rbmrec::server::SetLogLevel(level);

  absl::StatusOr<rbmrec::RatingScale> scale =
      rbmrec::RatingScale::Parse(f.scale_text);
  if (!scale.ok()) {
    return UsageError(absl::StrCat("--scale: ", scale.status().message()));
  }
  so.scale = *scale;
  absl::StatusOr<rbmrec::CdSchedule> cd = rbmrec::CdSchedule::Parse(f.cd_text);
  if (!cd.ok()) {
    return UsageError(absl::StrCat("--cd-steps: ", cd.status().message()));
  }
  t.cd = *cd;
  t.threads = so.max_train_threads;
  if (!(so.online.publish_seconds > 0)) {
    return UsageError("--online-publish-seconds: must be > 0");
  }
  if (!(so.online.learning_rate > 0)) {
    return UsageError("--online-lr: must be > 0");
  }
  if (absl::Status s = rbmrec::ValidateTrainOptions(t); !s.ok()) {
    return UsageError(absl::StrCat("training defaults: ", s.message()));
  }

  return -1;
}

// What serving needs beyond the flags: the token table and the TLS files,
// reloaded on SIGHUP.
struct Security {
  std::shared_ptr<rbmrec::server::Authorizer> authorizer;
  std::unique_ptr<rbmrec::server::TlsCredentials> tls;
  bool tls_on = false;
  bool tokens_on = false;
};

// --http-listen: the policy of --listen (RefusalLine); client certificates
// (--tls-client-ca) are not checked by the HTTP listener, so they are
// refused there. -1 to go on, else the exit code.
int CheckHttpPolicy(const Flags& f, bool tls_on, bool tokens_on) {
  if (f.http.listen.empty()) return -1;
  if (!f.tls_files.client_ca.empty()) {
    std::cerr << "rbmrec-server: --http-listen does not check client "
                 "certificates (--tls-client-ca); serve HTTP without mTLS "
                 "from another server, or leave --http-listen off\n";
    return 2;
  }
  if (std::string refusal = rbmrec::server::RefusalLine(f.http.listen, tls_on,
                                                        tokens_on, f.insecure);
      !refusal.empty()) {
    std::cerr << refusal << " (--http-listen)\n";
    return 1;
  }
  return -1;
}

// The HTTP/JSON listener when --http-listen is set: the tokens of
// --auth-tokens, the certificate of --tls-cert, the body limit of
// --max-message-mb. Null and a logged error when it cannot start.
absl::StatusOr<std::unique_ptr<rbmrec::server::http::HttpServer>> StartHttp(
    Flags& f, const Security& sec, rbmrec::server::RbmrecService* service) {
  rbmrec::server::http::HttpServerOptions o = f.http;
  o.authorizer = sec.authorizer;
  o.max_body_bytes = static_cast<size_t>(f.go.max_message_mb) << 20;
  if (sec.tls_on) {
    absl::StatusOr<rbmrec::server::TlsMaterial> pem =
        rbmrec::server::LoadTlsMaterial(f.tls_files);
    if (!pem.ok()) return pem.status();
    o.tls_cert_pem = pem->cert_pem;
    o.tls_key_pem = pem->key_pem;
  }
  return rbmrec::server::http::HttpServer::Start(service, std::move(o));
}

// Secure defaults, checked before anything is opened or bound; loads the
// tokens and TLS files into `sec` and f.go. -1 to go on, else the exit code.
int SetUpSecurity(Flags& f, Security& sec) {
  rbmrec::server::GrpcServerOptions& go = f.go;
  auto& tls_files = f.tls_files;
  auto& auth_tokens = f.auth_tokens;
  auto& insecure = f.insecure;
  auto& metrics_listen = f.metrics_listen;
  auto& reflection = f.reflection;
  if (tls_files.cert.empty() != tls_files.key.empty()) {
    return UsageError(
        "--tls-cert and --tls-key go together: set both or "
        "neither");
  }
  if (!tls_files.client_ca.empty() && tls_files.cert.empty()) {
    return UsageError("--tls-client-ca needs --tls-cert and --tls-key");
  }
  const bool tls_on = sec.tls_on = !tls_files.cert.empty();
  const bool tokens_on = sec.tokens_on = !auth_tokens.empty();
  if (std::string refusal =
          rbmrec::server::RefusalLine(go.listen, tls_on, tokens_on, insecure);
      !refusal.empty()) {
    std::cerr << refusal << "\n";
    return 1;
  }
  if (int code = CheckHttpPolicy(f, tls_on, tokens_on); code >= 0) {
    return code;
  }
  if (!rbmrec::server::IsLoopbackListen(go.listen) && !(tls_on && tokens_on)) {
    Log(LogLevel::kWarn, "insecure_listen",
        {F("listen", go.listen), F("tls", tls_on ? "on" : "off"),
         F("tokens", tokens_on ? "on" : "off"),
         F("message",
           "INSECURE: --insecure serves this API to the network without "
           "TLS and client tokens; anyone who can connect can read, "
           "change and delete data and models")});
  }
  // The metrics endpoint is plain HTTP without tokens: loopback only,
  // unless --insecure.
  if (!metrics_listen.empty() &&
      !rbmrec::server::IsLoopbackListen(metrics_listen) && !insecure) {
    std::cerr << "rbmrec-server: refusing to serve metrics on "
              << metrics_listen
              << " (not a loopback address): the metrics endpoint is plain "
                 "HTTP without tokens; listen on 127.0.0.1, or pass "
                 "--insecure to serve it to the network anyway\n";
    return 1;
  }
  go.reflection = rbmrec::server::ReflectionEnabled(reflection, go.listen);
  std::shared_ptr<rbmrec::server::Authorizer>& authorizer = sec.authorizer;
  if (tokens_on) {
    absl::StatusOr<std::unique_ptr<rbmrec::server::Authorizer>> a =
        rbmrec::server::Authorizer::Create(auth_tokens);
    if (!a.ok()) {
      std::cerr << "rbmrec-server: --auth-tokens: " << a.status().message()
                << "\n";
      return 1;
    }
    authorizer = std::move(*a);
    go.authorizer = authorizer;
    Log(LogLevel::kInfo, "auth_tokens_loaded",
        {F("file", auth_tokens),
         F("clients", authorizer->table()->entries().size())});
  }
  std::unique_ptr<rbmrec::server::TlsCredentials>& tls = sec.tls;
  if (tls_on) {
    absl::StatusOr<std::unique_ptr<rbmrec::server::TlsCredentials>> created =
        rbmrec::server::TlsCredentials::Create(tls_files);
    if (!created.ok()) {
      std::cerr << "rbmrec-server: " << created.status().message() << "\n";
      return 1;
    }
    tls = std::move(*created);
    go.credentials = tls->server_credentials();
    Log(LogLevel::kInfo, "tls_loaded",
        {F("cert", tls_files.cert), F("certificate", tls->summary()),
         F("client_certificates",
           tls_files.client_ca.empty() ? "not requested" : "required (mTLS)")});
  }

  return -1;
}

// SIGHUP reloads the tokens and TLS files; returns the signal that stops
// the server (SIGTERM or SIGINT).
int WaitForShutdown(const sigset_t& signals, const std::string& auth_tokens,
                    const Security& sec,
                    rbmrec::server::http::HttpServer* http) {
  const std::unique_ptr<rbmrec::server::TlsCredentials>& tls = sec.tls;
  int sig = 0;
  while (true) {
    if (sigwait(&signals, &sig) != 0) continue;
    if (sig != SIGHUP) break;
    Log(LogLevel::kInfo, "reload_started", {F("signal", strsignal(sig))});
    if (sec.authorizer != nullptr) {
      if (absl::Status s = sec.authorizer->Reload(); s.ok()) {
        Log(LogLevel::kInfo, "auth_tokens_reloaded",
            {F("file", auth_tokens),
             F("clients", sec.authorizer->table()->entries().size())});
      } else {
        Log(LogLevel::kError, "auth_tokens_reload_failed",
            {F("file", auth_tokens), F("error", s.message()),
             F("kept", "the previous token table stays in use")});
      }
    }
    if (tls != nullptr) {
      if (absl::Status s = tls->Reload(); s.ok()) {
        Log(LogLevel::kInfo, "tls_reloaded",
            {F("certificate", tls->summary()),
             F("effective",
               "new connections within 1 s; open connections keep theirs")});
        auto pem = rbmrec::server::LoadTlsMaterial(tls->files());
        if (http != nullptr && pem.ok()) {  // HttpServer::ReloadTls logs
          http->ReloadTls(pem->cert_pem, pem->key_pem).IgnoreError();
        }
      } else {
        Log(LogLevel::kError, "tls_reload_failed",
            {F("error", s.message()),
             F("kept", "the certificate in use stays")});
      }
    }
  }
  return sig;
}

// Opens the store, creates the service, starts the gRPC server and the
// metrics listener, waits for a stopping signal and shuts down in order.
int Serve(Flags& f, Security& sec, const sigset_t& signals) {
  rbmrec::server::ServiceOptions& so = f.so;
  rbmrec::server::GrpcServerOptions& go = f.go;
  auto& advertise = f.advertise;
  auto& db = f.db;
  auto& store_options = f.store_options;
  auto& metrics_listen = f.metrics_listen;
  auto& tls_files = f.tls_files;
  auto& grace = f.grace;
  const bool tls_on = sec.tls_on;
  const bool tokens_on = sec.tokens_on;
  so.advertise = advertise.empty() ? go.listen : advertise;
  absl::StatusOr<std::unique_ptr<rbmrec::store::Store>> store =
      rbmrec::store::Store::Open(db, store_options);
  if (!store.ok()) {
    Log(LogLevel::kError, "db_open_failed",
        {F("db", db), F("error", store.status().ToString())});
    std::cerr << "rbmrec-server: cannot open database " << db << ": "
              << store.status().message() << "\n";
    return 1;
  }
  absl::StatusOr<std::unique_ptr<rbmrec::server::RbmrecService>> service =
      rbmrec::server::RbmrecService::Create(std::move(*store), so);
  if (!service.ok()) {
    std::cerr << "rbmrec-server: " << service.status().message() << "\n";
    return 1;
  }
  // Readiness of "rbmrec.v1.Rbmrec" in grpc.health.v1.
  go.serving = [svc = service->get()] { return svc->Serving(); };
  // Metrics: declared before the server, whose interceptors feed them.
  rbmrec::server::MetricsRegistry metrics;
  if (!metrics_listen.empty()) {
    rbmrec::server::AddServiceCollector(&metrics, service->get());
    f.http.metrics = &metrics;  // rbmrec_http_* when --http-listen is set
    go.interceptors = [&metrics] {
      std::vector<std::unique_ptr<
          grpc::experimental::ServerInterceptorFactoryInterface>>
          v;
      v.push_back(std::make_unique<rbmrec::server::MetricsInterceptorFactory>(
          &metrics.rpc(), rbmrec::server::ServerServiceNames()));
      return v;
    };
  }
  absl::StatusOr<std::unique_ptr<rbmrec::server::GrpcServer>> server =
      rbmrec::server::GrpcServer::Start(service->get(), go);
  if (!server.ok()) {
    Log(LogLevel::kError, "listen_failed",
        {F("listen", go.listen), F("error", server.status().ToString())});
    std::cerr << "rbmrec-server: " << server.status().message() << "\n";
    (*service)->Shutdown();
    return 1;
  }
  std::unique_ptr<rbmrec::server::MetricsHttpServer> metrics_http;
  if (!metrics_listen.empty()) {
    absl::StatusOr<std::unique_ptr<rbmrec::server::MetricsHttpServer>> m =
        rbmrec::server::MetricsHttpServer::Start(metrics_listen, &metrics);
    if (!m.ok()) {
      Log(LogLevel::kError, "metrics_listen_failed",
          {F("metrics_listen", metrics_listen),
           F("error", m.status().ToString())});
      std::cerr << "rbmrec-server: " << m.status().message() << "\n";
      (*server)->Shutdown(std::chrono::system_clock::now());
      (*service)->Shutdown();
      return 1;
    }
    metrics_http = std::move(*m);
    Log(LogLevel::kInfo, "metrics_started",
        {F("metrics_listen", metrics_listen), F("port", metrics_http->port())});
  }
  std::unique_ptr<rbmrec::server::http::HttpServer> http;
  if (!f.http.listen.empty()) {
    auto h = StartHttp(f, sec, service->get());
    if (!h.ok()) {
      Log(LogLevel::kError, "http_listen_failed",
          {F("http_listen", f.http.listen), F("error", h.status().ToString())});
      std::cerr << "rbmrec-server: " << h.status().message() << "\n";
      (*server)->Shutdown(std::chrono::system_clock::now());
      (*service)->Shutdown();
      return 1;
    }
    http = std::move(*h);
    Log(LogLevel::kInfo, "http_started",
        {F("http_listen", f.http.listen), F("port", http->port()),
         F("threads", f.http.threads)});
  }
  Log(LogLevel::kInfo, "server_started",
      {F("listen", go.listen), F("port", (*server)->port()), F("db", db),
       F("scale", so.scale.ToString()),
       F("active_model_version", (*service)->active_version()),
       F("online", so.online.enabled ? "true" : "false"),
       F("reflection", go.reflection ? "true" : "false"),
       F("tls", !tls_on                       ? "off"
                : tls_files.client_ca.empty() ? "on"
                                              : "mtls"),
       F("tokens", tokens_on ? "on" : "off")});

  const int sig = WaitForShutdown(signals, f.auth_tokens, sec, http.get());
  Log(LogLevel::kInfo, "shutdown_started", {F("signal", strsignal(sig))});
  (*service)->BeginShutdown();  // Train streams end CANCELLED
  (*server)->Shutdown(
      std::chrono::system_clock::now() +
      std::chrono::milliseconds(static_cast<int64_t>(grace * 1000)));
  if (http != nullptr) http->Stop();  // after BeginShutdown: streams end
  (*service)->Shutdown();             // joins training, persists online updates
  if (metrics_http != nullptr) metrics_http->Stop();  // before the service
  server->reset();
  service->reset();  // closes the store (WAL checkpoint)
  sec.tls.reset();   // after the server: gRPC's watcher reads its files
  Log(LogLevel::kInfo, "shutdown_complete");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "token") == 0) {
    return rbmrec::server::TokenCommand(argc, argv);
  }
  if (!rbmrec::CpuSupported("rbmrec-server")) return 1;
  // Debian's Abseil is built without NDEBUG, so every absl::Mutex lock
  // (gRPC's own included) would update the deadlock-detection graph; that
  // showed up as 1-3% of the server's CPU in perf profiles under load.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // Fewer malloc arenas: RSS that levels off under mixed load (memory.h).
  rbmrec::server::LimitMallocArenas();
  // Block the shutdown signals before any thread exists, so every thread
  // inherits the mask and only sigwait() below receives them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  Flags f;
  if (int code = ParseFlags(argc, argv, f); code >= 0) return code;
  if (int code = ResolveFlags(f); code >= 0) return code;
  Security sec;
  if (int code = SetUpSecurity(f, sec); code >= 0) return code;
  return Serve(f, sec, signals);
}
