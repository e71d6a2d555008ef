#ifndef RBMREC_SERVER_HTTP_EVENT_STREAM_H_
#define RBMREC_SERVER_HTTP_EVENT_STREAM_H_

// A server-streaming call (Train, RecommendAll) over HTTP as server-sent
// events (text/event-stream): the call runs on a thread of its own; each
// response
// message becomes one event "data: JSON\n\n" (protobuf's JSON mapping, one
// line); an error after the first message becomes "event: error\ndata:
// {"error":{...}}\n\n" (server/http/http_status.h); the stream ends when the
// call returns. While no event is due the reader suspends its connection
// (libmicrohttpd's suspend/resume) instead of waiting, so a long Train holds
// no polling thread; the next event, the end or Detach resumes it.
// Back-pressure: while kMaxPendingBytes or more are queued and not read
// (a slow reader), the call's writer blocks until the reader catches up
// or detaches, so a long stream never buffers more than that plus one
// event.
//
// Thread safety: every method may be called from any thread.

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "server/http/dispatch.h"

namespace rbmrec::server::http {

class EventStream {
 public:
  // Starts `entry.streaming(*request)` on a new thread. REQUIRES:
  // entry.streaming is set; entry and the service outlive the stream.
  static std::shared_ptr<EventStream> Start(
      const Dispatcher::Entry& entry,
      std::unique_ptr<google::protobuf::Message> request);
  // Join().
  ~EventStream();

  // Blocks until the first message or the call's end: the call's error
  // when it failed before any message (send it as a plain error answer),
  // else OK (answer 200 and Read the events).
  absl::Status AwaitStart() ABSL_LOCKS_EXCLUDED(mu_);
  // Queued bytes at which the call's writer waits for the reader.
  static constexpr size_t kMaxPendingBytes = 256 << 10;
  // What Read returned besides bytes.
  static constexpr size_t kEnd = 0;  // ended and everything was read
  static constexpr size_t kSuspended = static_cast<size_t>(-1);
  // Copies up to `max` bytes of the next events into `buf`. With nothing
  // to read yet, calls `suspend` (under the stream's lock, so no event is
  // missed) and returns kSuspended: `wake` (SetWake) is called once the
  // next event is queued or the stream ends or is detached. After Detach:
  // kEnd.
  size_t Read(char* buf, size_t max, const std::function<void()>& suspend)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Sets what resumes a suspended reader. REQUIRES: before the first Read.
  void SetWake(std::function<void()> wake) ABSL_LOCKS_EXCLUDED(mu_);
  // The receiver went away (or the server stops): the call's writer returns
  // false from now on, a suspended reader is woken and reads kEnd. With
  // `forget_wake`, `wake` is never called again (its connection is gone).
  void Detach(bool forget_wake = false) ABSL_LOCKS_EXCLUDED(mu_);
  // Whether the call has returned.
  bool Done() const ABSL_LOCKS_EXCLUDED(mu_);
  // Waits for the call's thread. Idempotent; not from the call's thread.
  void Join();

 private:
  EventStream() = default;
  // Queues an event once fewer than kMaxPendingBytes wait (or drops it
  // after Detach). Returns false when detached.
  bool Push(std::string event) ABSL_LOCKS_EXCLUDED(mu_);
  void WakeLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  // pending_[read_..] is not yet read.
  std::string pending_ ABSL_GUARDED_BY(mu_);
  size_t read_ ABSL_GUARDED_BY(mu_) = 0;
  int messages_ ABSL_GUARDED_BY(mu_) = 0;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool detached_ ABSL_GUARDED_BY(mu_) = false;
  bool suspended_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void()> wake_ ABSL_GUARDED_BY(mu_);
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
  absl::Mutex join_mu_;
};

}  // namespace rbmrec::server::http

#endif  // RBMREC_SERVER_HTTP_EVENT_STREAM_H_
