// rbmrec-server: serves rbmrec.v1.Rbmrec over gRPC from a SQLite database.
//
// Every flag can be given as --name=VALUE or --name VALUE, or through the
// environment variable RBMREC_<NAME> (upper case, '-' -> '_'); a flag
// overrides the environment, which overrides the default. `--help` lists
// them all with their variables and defaults.
//
// Signals: SIGTERM/SIGINT are blocked before any thread starts and collected
// with sigwait() (the server may run as PID 1 in a container); on either the
// server stops accepting calls, lets in-flight calls finish (up to
// --shutdown-grace-seconds), cancels a running training job, persists pending
// online updates and exits 0.

#include <signal.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/synchronization/mutex.h"
#include "core/cpu_check.h"
#include "core/rating_scale.h"
#include "core/trainer.h"
#include "server/grpc_server.h"
#include "server/log.h"
#include "server/memory.h"
#include "server/service.h"
#include "store/store.h"

namespace {

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

}  // namespace

int main(int argc, char** argv) {
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
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  // Training defaults come from core's TrainOptions (the tuned settings),
  // limits from ServiceOptions: each flag's default is its field's value.
  rbmrec::server::ServiceOptions so;
  rbmrec::server::GrpcServerOptions go;
  rbmrec::TrainOptions& t = so.train_defaults;
  std::string db = "./rbmrec.db";
  std::string scale_text = "1:5:1";
  std::string cd_text = t.cd.ToString();
  std::string log_level = "info";
  double grace = 5;

  CLI::App app(
      "Serves rbmrec.v1.Rbmrec (plus grpc.health.v1 and server reflection "
      "v1/v1alpha) over gRPC.",
      "rbmrec-server");
  app.option_defaults()->always_capture_default();
  app.footer(
      "Each flag may also be set by the environment variable shown (flag > "
      "env > default).");
  app.add_option("--listen", go.listen, "address to listen on (host:port)");
  app.add_option("--db", db, "SQLite database file (created on first start)");
  app.add_option("--threads", go.threads,
                 "max threads serving RPCs (0 = gRPC default)")
      ->check(CLI::Range(0, 4096));
  app.add_option("--scale", scale_text, "rating scale MIN:MAX:STEP");
  app.add_option("--hidden", t.hidden, "training default: hidden units")
      ->check(CLI::Range(1, 10000));
  app.add_option("--epochs", t.max_epochs, "training default: maximum epochs")
      ->check(CLI::Range(1, 100000));
  app.add_option("--batch-size,--batch", t.batch_size,
                 "training default: users per mini-batch")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--learning-rate,--lr", t.learning_rate,
                 "training default: learning rate")
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
  app.add_option("--ensemble", t.ensemble,
                 "training default: user-based RBMs averaged (plus the "
                 "item-based one)")
      ->check(CLI::Range(1, 64));
  app.add_option("--train-threads", so.max_train_threads,
                 "max training threads (0 = hardware threads)")
      ->check(CLI::Range(0, 256));
  app.add_option("--train-nice", so.train_nice,
                 "niceness added to training threads so serving keeps the "
                 "cores (0-19; 0 = same priority)")
      ->check(CLI::Range(0, 19));
  app.add_option("--max-batch", so.max_batch_rows,
                 "max rows per AddRatings batch / PutItems call")
      ->check(CLI::Range(1, 10000000));
  app.add_option("--max-predict-items", so.max_predict_items,
                 "max item_ids per PredictRatings")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--max-recommend-n", so.max_recommend_n, "max n of Recommend")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--max-message-mb", go.max_message_mb,
                 "max gRPC message size in MiB")
      ->check(CLI::Range(1, 2047));
  app.add_option("--recommend-candidates", so.recommend_candidates,
                 "Recommend (exact): items pre-ranked by mean field and "
                 "re-scored exactly (0 = exact over all items)")
      ->check(CLI::Range(0, 10000000));
  app.add_option("--online", so.online,
                 "apply online per-user CD updates (true/false)")
      ->default_str("true");
  app.add_option("--online-lr", so.online_learning_rate,
                 "learning rate of online updates (> 0)")
      ->check(Finite());
  app.add_option("--online-steps", so.online_steps,
                 "CD updates per changed user")
      ->check(CLI::Range(1, 1000));
  app.add_option("--online-publish-seconds", so.online_publish_seconds,
                 "how often a changed online model is stored as a new "
                 "version (> 0)")
      ->check(Finite());
  app.add_option("--reflection", go.reflection,
                 "serve gRPC server reflection v1 and v1alpha (true/false)")
      ->default_str("true");
  app.add_option("--shutdown-grace-seconds", grace,
                 "how long in-flight RPCs may run after SIGTERM")
      ->check(Finite());
  app.add_option("--log-level", log_level, "debug, info, warn or error")
      ->check(CLI::IsMember({"debug", "info", "warn", "warning", "error"}));

  // Limits, retention and activation (ServiceOptions) and the database
  // size limit (StoreOptions::max_bytes).
  rbmrec::store::StoreOptions store_options;
  int64_t db_max_mb = 0;
  int64_t max_train_memory_mb = so.max_train_memory_bytes >> 20;
  int64_t max_model_mb = so.max_model_bytes >> 20;
  int64_t version_cache_mb = so.version_cache_bytes >> 20;
  std::string activate = "if-better";
  app.add_option("--max-adhoc-ratings", so.max_adhoc_ratings,
                 "max ad-hoc ratings per PredictRatings / Recommend")
      ->check(CLI::Range(0, 10000000));
  app.add_option("--max-train-memory-mb", max_train_memory_mb,
                 "a Train job whose estimated peak memory is larger is "
                 "refused (RESOURCE_EXHAUSTED, MEMORY_LIMIT); 0 = half of "
                 "min(RAM, cgroup memory.max)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  app.add_option("--max-model-mb", max_model_mb,
                 "a Train job whose estimated model is larger is refused")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  app.add_option("--keep-full-models", so.keep_full_models,
                 "stored full-training models kept (plus active and pinned)")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--keep-online-models", so.keep_online_models,
                 "stored online-update versions kept (plus active and "
                 "pinned)")
      ->check(CLI::Range(0, 1000000));
  app.add_option("--activate", activate,
                 "when a finished Train becomes active: always, if-better "
                 "(validation RMSE not worse than the active model's by more "
                 "than --activate-tolerance) or never")
      ->check(CLI::IsMember({"always", "if-better", "never"}));
  app.add_option("--activate-tolerance", so.activate_tolerance,
                 "if-better: allowed validation RMSE increase")
      ->check(CLI::Range(0.0, 1e9));
  app.add_option("--db-max-mb", db_max_mb,
                 "database size limit in MiB; writes past it fail with "
                 "RESOURCE_EXHAUSTED, STORAGE_FULL (0 = unlimited)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  app.add_option("--version-cache-mb", version_cache_mb,
                 "loaded non-active model versions kept in memory, MiB")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));

  for (CLI::Option* opt : app.get_options()) {
    if (opt->get_name() == "--help" || opt->get_lnames().empty()) continue;
    opt->envname(EnvName(opt->get_lnames().front()));
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 1;  // --help: 0; a usage error: 1
  }

  using rbmrec::server::Activation;
  so.activation = activate == "always"      ? Activation::kAlways
                  : activate == "if-better" ? Activation::kIfBetter
                                            : Activation::kNever;
  so.max_train_memory_bytes = max_train_memory_mb << 20;
  so.max_model_bytes = max_model_mb << 20;
  so.version_cache_bytes = version_cache_mb << 20;
  store_options.max_bytes = db_max_mb << 20;

  LogLevel level = LogLevel::kInfo;
  rbmrec::server::ParseLogLevel(log_level, &level);
  rbmrec::server::SetLogLevel(level);

  absl::StatusOr<rbmrec::RatingScale> scale =
      rbmrec::RatingScale::Parse(scale_text);
  if (!scale.ok()) {
    return UsageError(absl::StrCat("--scale: ", scale.status().message()));
  }
  so.scale = *scale;
  absl::StatusOr<rbmrec::CdSchedule> cd = rbmrec::CdSchedule::Parse(cd_text);
  if (!cd.ok()) {
    return UsageError(absl::StrCat("--cd-steps: ", cd.status().message()));
  }
  t.cd = *cd;
  t.threads = so.max_train_threads;
  if (!(so.online_publish_seconds > 0)) {
    return UsageError("--online-publish-seconds: must be > 0");
  }
  if (!(so.online_learning_rate > 0)) {
    return UsageError("--online-lr: must be > 0");
  }
  if (absl::Status s = rbmrec::ValidateTrainOptions(t); !s.ok()) {
    return UsageError(absl::StrCat("training defaults: ", s.message()));
  }

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
  absl::StatusOr<std::unique_ptr<rbmrec::server::GrpcServer>> server =
      rbmrec::server::GrpcServer::Start(service->get(), go);
  if (!server.ok()) {
    Log(LogLevel::kError, "listen_failed",
        {F("listen", go.listen), F("error", server.status().ToString())});
    std::cerr << "rbmrec-server: " << server.status().message() << "\n";
    (*service)->Shutdown();
    return 1;
  }
  Log(LogLevel::kInfo, "server_started",
      {F("listen", go.listen), F("port", (*server)->port()), F("db", db),
       F("scale", so.scale.ToString()),
       F("active_model_version", (*service)->active_version()),
       F("online", so.online ? "true" : "false"),
       F("reflection", go.reflection ? "true" : "false")});

  int sig = 0;
  while (sigwait(&signals, &sig) != 0) {
  }
  Log(LogLevel::kInfo, "shutdown_started", {F("signal", strsignal(sig))});
  (*service)->BeginShutdown();  // Train streams end CANCELLED
  (*server)->Shutdown(
      std::chrono::system_clock::now() +
      std::chrono::milliseconds(static_cast<int64_t>(grace * 1000)));
  (*service)->Shutdown();  // joins training, persists online updates
  server->reset();
  service->reset();  // closes the store (WAL checkpoint)
  Log(LogLevel::kInfo, "shutdown_complete");
  return 0;
}
