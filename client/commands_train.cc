// `rbmrec train`: starts a training job, draws its progress table, and
// turns Ctrl-C into a cancellation of the job.

#include <signal.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/command_context.h"

namespace rbmrec::client {
namespace {

std::atomic<bool> g_interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free);

extern "C" void OnInterrupt(int) { g_interrupted.store(true); }

// Installs the SIGINT handler for the lifetime of the object. SA_RESETHAND:
// a second Ctrl-C terminates the process as usual.
class InterruptGuard {
 public:
  explicit InterruptGuard(bool enabled) : enabled_(enabled) {
    g_interrupted.store(false);
    if (!enabled_) return;
    struct sigaction action {};
    action.sa_handler = OnInterrupt;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESETHAND;
    sigaction(SIGINT, &action, &previous_);
  }
  ~InterruptGuard() {
    if (enabled_) sigaction(SIGINT, &previous_, nullptr);
  }
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

 private:
  bool enabled_;
  struct sigaction previous_ {};
};

}  // namespace

int RunTrain(Context& ctx) {
  absl::StatusOr<v1::TrainRequest> request = BuildTrainRequest(ctx.args());
  if (!request.ok()) return ctx.UsageError(request.status());

  // The table goes to stdout, or to a terminal's stderr with --json.
  const bool json = ctx.json();
  const bool table = !json || ctx.env().stderr_is_tty;
  std::ostream& table_out = json ? ctx.err() : ctx.out();
  const bool live = ctx.env().stderr_is_tty;

  std::mutex mu;  // guards the streams and the fields below
  bool header_printed = false;
  bool status_drawn = false;
  v1::TrainProgress latest;
  absl::Time latest_at = absl::Now();
  std::vector<v1::TrainProgress> history;

  auto clear_status = [&]() {  // REQUIRES mu held
    if (status_drawn) {
      ctx.err() << "\r\033[K";
      ctx.err().flush();
      status_drawn = false;
    }
  };

  RbmrecClient& client = ctx.client();  // created before the watcher thread
  InterruptGuard guard(ctx.env().handle_signals);
  std::atomic<bool> done{false};
  std::thread watcher([&]() {
    bool cancel_sent = false;
    while (!done.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (g_interrupted.load() && !cancel_sent) {
        cancel_sent = true;
        {
          std::lock_guard<std::mutex> lock(mu);
          clear_status();
          ctx.err() << "cancelling the training job (Ctrl-C again to quit "
                       "without waiting)\n";
        }
        absl::StatusOr<v1::CancelTrainingResponse> r = client.CancelTraining();
        std::lock_guard<std::mutex> lock(mu);
        if (!r.ok()) {
          ctx.err() << "error: " << TerminalSafe(r.status().message()) << "\n";
        }
      }
      if (!live) continue;
      std::lock_guard<std::mutex> lock(mu);
      if (latest.state() != v1::TrainProgress::QUEUED &&
          latest.state() != v1::TrainProgress::RUNNING) {
        continue;
      }
      const double elapsed = latest.elapsed_seconds() +
                             absl::ToDoubleSeconds(absl::Now() - latest_at);
      ctx.err() << "\r"
                << (latest.state() == v1::TrainProgress::QUEUED
                        ? std::string("preparing")
                        : absl::StrCat("epoch ", latest.epoch() + 1, "/",
                                       latest.max_epochs()))
                << "  elapsed " << FormatDuration(elapsed) << "\033[K";
      ctx.err().flush();
      status_drawn = true;
    }
  });

  absl::StatusOr<v1::TrainProgress> last =
      client.Train(*request, [&](const v1::TrainProgress& p) {
        std::lock_guard<std::mutex> lock(mu);
        latest = p;
        latest_at = absl::Now();
        if (json) history.push_back(p);
        // One row per RUNNING message after an epoch. (Epoch numbers restart
        // for each member of an ensemble; terminal messages repeat the last
        // epoch.)
        const bool new_epoch =
            p.state() == v1::TrainProgress::RUNNING && p.epoch() > 0;
        if (!table || !new_epoch) return;
        clear_status();
        if (!header_printed) {
          table_out << EpochTableHeader();
          header_printed = true;
        }
        table_out << FormatEpochRow(p);
        table_out.flush();
      });
  done.store(true);
  watcher.join();
  {
    std::lock_guard<std::mutex> lock(mu);
    clear_status();
  }
  if (!last.ok()) return ctx.RpcError(last.status());

  const bool succeeded = last->state() == v1::TrainProgress::SUCCEEDED;
  if (json) {
    Json progress = Json::array();
    for (const auto& p : history) progress.push_back(ProtoJson(p));
    Json j = Json::object();
    j["result"] = ProtoJson(*last);
    j["progress"] = std::move(progress);
    ctx.out() << DumpJson(j) << "\n";
  } else {
    ctx.out() << FormatTrainResult(*last);
  }
  if (!succeeded) {
    ctx.err() << "error: training " << TrainStateName(last->state());
    if (!last->message().empty()) {
      ctx.err() << ": " << TerminalSafe(last->message());
    }
    ctx.err() << "\n";
    return kExitRpc;
  }
  return kExitOk;
}

}  // namespace rbmrec::client
