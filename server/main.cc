// rbmrec-server: serves rbmrec.v1.Rbmrec over gRPC from a SQLite database.
//
// Every flag can be given as --name=VALUE or --name VALUE, or through the
// environment variable RBMREC_<NAME> (upper case, '-' -> '_'); a flag
// overrides the environment, which overrides the default.
//
// Signals: SIGTERM/SIGINT are blocked before any thread starts and collected
// with sigwait() (the server may run as PID 1 in a container); on either the
// server stops accepting calls, lets in-flight calls finish (up to
// --shutdown-grace-seconds), cancels a running training job, persists pending
// online updates and exits 0.

#include <signal.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

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
#include "server/service.h"
#include "store/store.h"

namespace {

using rbmrec::server::F;
using rbmrec::server::Log;
using rbmrec::server::LogLevel;

struct FlagDef {
  const char* name;
  std::string def;
  const char* help;
};

// The flags, their defaults and help, in --help order.
const std::vector<FlagDef>& Flags() {
  // Training defaults come from core's TrainOptions (the tuned settings).
  static const rbmrec::TrainOptions d;
  static const std::vector<FlagDef> flags = {
      {"listen", "127.0.0.1:50051", "address to listen on (host:port)"},
      {"db", "./rbmrec.db", "SQLite database file (created on first start)"},
      {"threads", "0", "max threads serving RPCs (0 = gRPC default)"},
      {"scale", "1:5:1", "rating scale MIN:MAX:STEP"},
      {"hidden", absl::StrCat(d.hidden), "training default: hidden units"},
      {"epochs", absl::StrCat(d.max_epochs),
       "training default: maximum epochs"},
      {"batch-size", absl::StrCat(d.batch_size),
       "training default: users per mini-batch"},
      {"learning-rate", absl::StrCat(d.learning_rate),
       "training default: learning rate"},
      {"momentum", absl::StrCat(d.momentum), "training default: momentum"},
      {"weight-decay", absl::StrCat(d.weight_decay),
       "training default: L2 weight decay"},
      {"cd-steps", d.cd.ToString(),
       "training default: CD schedule (\"auto\", \"T\" or \"T1,T2@E2\")"},
      {"seed", absl::StrCat(d.seed), "training default: random seed"},
      {"validation-fraction", absl::StrCat(d.validation_fraction),
       "training default: held-out fraction for early stopping"},
      {"ensemble", absl::StrCat(d.ensemble),
       "training default: user-based RBMs averaged (plus the item-based one)"},
      {"train-threads", "0", "max training threads (0 = hardware threads)"},
      {"train-nice", "10",
       "niceness added to training threads so serving keeps the cores "
       "(0-19; 0 = same priority)"},
      {"max-batch", "10000", "max rows per AddRatings batch / PutItems call"},
      {"max-predict-items", "1000", "max item_ids per PredictRatings"},
      {"max-recommend-n", "1000", "max n of Recommend"},
      {"max-message-mb", "64", "max gRPC message size in MiB"},
      {"recommend-candidates", "30",
       "Recommend (exact): items pre-ranked by mean field and re-scored "
       "exactly (0 = exact over all items)"},
      {"online", "true", "apply online per-user CD updates (true/false)"},
      {"online-lr", "0.01", "learning rate of online updates"},
      {"online-steps", "1", "CD updates per changed user"},
      {"online-publish-seconds", "60",
       "how often a changed online model is stored as a new version"},
      {"shutdown-grace-seconds", "5",
       "how long in-flight RPCs may run after SIGTERM"},
      {"log-level", "info", "debug, info, warn or error"},
  };
  return flags;
}

std::string EnvName(absl::string_view flag) {
  std::string name = absl::StrCat("RBMREC_", flag);
  absl::AsciiStrToUpper(&name);
  absl::StrReplaceAll({{"-", "_"}}, &name);
  return name;
}

std::string Usage() {
  std::string out =
      "Usage: rbmrec-server [--flag=value | --flag value]...\n"
      "Serves rbmrec.v1.Rbmrec (plus grpc.health.v1 and reflection) over "
      "gRPC.\nEach flag may also be set by the environment variable shown "
      "(flag > env > default).\n\n";
  for (const FlagDef& f : Flags()) {
    absl::StrAppend(&out, "  --", f.name, " (", EnvName(f.name), ", default ",
                    f.def, ")\n      ", f.help, "\n");
  }
  absl::StrAppend(&out, "  --help\n      print this help and exit\n");
  return out;
}

int UsageError(const std::string& message) {
  std::cerr << "rbmrec-server: " << message
            << "\n(run rbmrec-server --help for usage)\n";
  return 1;
}

class Config {
 public:
  std::map<std::string, std::string> values;
  std::string error;

  bool GetInt(const char* name, int64_t min, int64_t max, int* out) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(values[name], &v) || v < min || v > max) {
      error = absl::StrCat("--", name, ": expected an integer in ", min, "..",
                           max, ", got '", values[name], "'");
      return false;
    }
    *out = static_cast<int>(v);
    return true;
  }
  bool GetU64(const char* name, uint64_t* out) {
    if (!absl::SimpleAtoi(values[name], out)) {
      error =
          absl::StrCat("--", name, ": expected a non-negative integer, got '",
                       values[name], "'");
      return false;
    }
    return true;
  }
  bool GetDouble(const char* name, double* out) {
    if (!absl::SimpleAtod(values[name], out) || !std::isfinite(*out)) {
      error = absl::StrCat("--", name, ": expected a number, got '",
                           values[name], "'");
      return false;
    }
    return true;
  }
  bool GetBool(const char* name, bool* out) {
    const std::string v = absl::AsciiStrToLower(values[name]);
    if (v == "true" || v == "1" || v == "yes" || v == "on") {
      *out = true;
    } else if (v == "false" || v == "0" || v == "no" || v == "off") {
      *out = false;
    } else {
      error = absl::StrCat("--", name, ": expected true or false, got '",
                           values[name], "'");
      return false;
    }
    return true;
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (!rbmrec::CpuSupported("rbmrec-server")) return 1;
  // Debian's Abseil is built without NDEBUG, so every absl::Mutex lock
  // (gRPC's own included) would update the deadlock-detection graph; that
  // showed up as 1-3% of the server's CPU in perf profiles under load.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // Block the shutdown signals before any thread exists, so every thread
  // inherits the mask and only sigwait() below receives them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  Config config;
  for (const FlagDef& f : Flags()) {
    config.values[f.name] = f.def;
    if (const char* env = std::getenv(EnvName(f.name).c_str());
        env != nullptr) {
      config.values[f.name] = env;
    }
  }
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << Usage();
      return 0;
    }
    if (arg.rfind("--", 0) != 0) {
      return UsageError(absl::StrCat("unexpected argument '", arg, "'"));
    }
    std::string name = arg.substr(2);
    std::string value;
    bool has_value = false;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    if (config.values.count(name) == 0) {
      return UsageError(absl::StrCat("unknown flag --", name));
    }
    if (!has_value) {
      if (i + 1 >= argc) {
        return UsageError(absl::StrCat("--", name, " needs a value"));
      }
      value = argv[++i];
    }
    config.values[name] = value;
  }

  LogLevel level = LogLevel::kInfo;
  if (!rbmrec::server::ParseLogLevel(config.values["log-level"], &level)) {
    return UsageError(
        absl::StrCat("--log-level: expected debug, info, warn "
                     "or error, got '",
                     config.values["log-level"], "'"));
  }
  rbmrec::server::SetLogLevel(level);

  rbmrec::server::ServiceOptions so;
  rbmrec::server::GrpcServerOptions go;
  go.listen = config.values["listen"];
  absl::StatusOr<rbmrec::RatingScale> scale =
      rbmrec::RatingScale::Parse(config.values["scale"]);
  if (!scale.ok()) {
    return UsageError(absl::StrCat("--scale: ", scale.status().message()));
  }
  so.scale = *scale;
  rbmrec::TrainOptions& t = so.train_defaults;
  double lr = 0, momentum = 0, wd = 0, online_lr = 0;
  absl::StatusOr<rbmrec::CdSchedule> cd =
      rbmrec::CdSchedule::Parse(config.values["cd-steps"]);
  if (!cd.ok()) {
    return UsageError(absl::StrCat("--cd-steps: ", cd.status().message()));
  }
  t.cd = *cd;
  bool ok =
      config.GetInt("threads", 0, 4096, &go.threads) &&
      config.GetInt("hidden", 1, 10000, &t.hidden) &&
      config.GetInt("epochs", 1, 100000, &t.max_epochs) &&
      config.GetInt("batch-size", 1, 1000000, &t.batch_size) &&
      config.GetDouble("learning-rate", &lr) &&
      config.GetDouble("momentum", &momentum) &&
      config.GetDouble("weight-decay", &wd) && config.GetU64("seed", &t.seed) &&
      config.GetDouble("validation-fraction", &t.validation_fraction) &&
      config.GetInt("ensemble", 1, 64, &t.ensemble) &&
      config.GetInt("train-threads", 0, 256, &so.max_train_threads) &&
      config.GetInt("train-nice", 0, 19, &so.train_nice) &&
      config.GetInt("max-batch", 1, 10000000, &so.max_batch_rows) &&
      config.GetInt("max-predict-items", 1, 1000000, &so.max_predict_items) &&
      config.GetInt("max-recommend-n", 1, 1000000, &so.max_recommend_n) &&
      config.GetInt("max-message-mb", 1, 2047, &go.max_message_mb) &&
      config.GetInt("recommend-candidates", 0, 10000000,
                    &so.recommend_candidates) &&
      config.GetBool("online", &so.online) &&
      config.GetDouble("online-lr", &online_lr) &&
      config.GetInt("online-steps", 1, 1000, &so.online_steps) &&
      config.GetDouble("online-publish-seconds", &so.online_publish_seconds);
  double grace = 5;
  ok = ok && config.GetDouble("shutdown-grace-seconds", &grace);
  if (!ok) return UsageError(config.error);
  t.learning_rate = static_cast<float>(lr);
  t.momentum = static_cast<float>(momentum);
  t.weight_decay = static_cast<float>(wd);
  t.threads = so.max_train_threads;
  so.online_learning_rate = static_cast<float>(online_lr);
  if (!(so.online_publish_seconds > 0)) {
    return UsageError("--online-publish-seconds: must be > 0");
  }
  if (!(online_lr > 0)) return UsageError("--online-lr: must be > 0");
  if (absl::Status s = rbmrec::ValidateTrainOptions(t); !s.ok()) {
    return UsageError(absl::StrCat("training defaults: ", s.message()));
  }

  const std::string db = config.values["db"];
  absl::StatusOr<std::unique_ptr<rbmrec::store::Store>> store =
      rbmrec::store::Store::Open(db);
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
       F("online", so.online ? "true" : "false")});

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
