#include "server/http/event_stream.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"
#include "server/http/http_status.h"

namespace rbmrec::server::http {

std::shared_ptr<EventStream> EventStream::Start(
    const Dispatcher::Entry& entry,
    std::unique_ptr<google::protobuf::Message> request) {
  std::shared_ptr<EventStream> stream(new EventStream());
  EventStream* s = stream.get();
  // The thread holds only a raw pointer: the owner joins it before the
  // stream is destroyed (the destructor joins).
  s->thread_ = std::thread([s, &entry, request = std::move(request)] {
    absl::Status status = entry.streaming(
        *request, [s](const google::protobuf::Message& message) {
          {
            absl::MutexLock lock(&s->mu_);
            if (s->detached_) return false;
          }
          // Printed outside the lock; the reader is not held up.
          std::string json;
          google::protobuf::util::JsonPrintOptions options;
          options.always_print_primitive_fields = true;
          (void)google::protobuf::util::MessageToJsonString(message, &json,
                                                            options);
          return s->Push(absl::StrCat("data: ", json, "\n\n"));
        });
    absl::MutexLock lock(&s->mu_);
    if (!status.ok() && s->messages_ > 0) {
      absl::StrAppend(&s->pending_, "event: error\ndata: ", ErrorJson(status),
                      "\n\n");
    }
    s->status_ = std::move(status);
    s->done_ = true;
    s->WakeLocked();
  });
  return stream;
}

EventStream::~EventStream() { Join(); }

void EventStream::Join() {
  absl::MutexLock lock(&join_mu_);
  if (thread_.joinable()) thread_.join();
}

bool EventStream::Push(std::string event) {
  absl::MutexLock lock(&mu_);
  auto room = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return detached_ || pending_.size() - read_ < kMaxPendingBytes;
  };
  mu_.Await(absl::Condition(&room));
  if (detached_) return false;
  ++messages_;
  pending_.erase(0, read_);  // moves at most kMaxPendingBytes
  read_ = 0;
  pending_ += event;
  WakeLocked();
  return true;
}

void EventStream::WakeLocked() {
  if (!suspended_) return;
  suspended_ = false;
  if (wake_) wake_();
}

void EventStream::SetWake(std::function<void()> wake) {
  absl::MutexLock lock(&mu_);
  wake_ = std::move(wake);
}

absl::Status EventStream::AwaitStart() {
  absl::MutexLock lock(&mu_);
  auto started = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return messages_ > 0 || done_;
  };
  mu_.Await(absl::Condition(&started));
  if (messages_ == 0 && !status_.ok()) return status_;
  return absl::OkStatus();
}

size_t EventStream::Read(char* buf, size_t max,
                         const std::function<void()>& suspend) {
  absl::MutexLock lock(&mu_);
  if (detached_) return kEnd;
  if (read_ == pending_.size() && !done_) {
    suspended_ = true;
    suspend();
    return kSuspended;
  }
  const size_t n = std::min(max, pending_.size() - read_);
  std::memcpy(buf, pending_.data() + read_, n);
  read_ += n;
  if (read_ == pending_.size()) {
    pending_.clear();
    read_ = 0;
  }
  return n;
}

void EventStream::Detach(bool forget_wake) {
  absl::MutexLock lock(&mu_);
  detached_ = true;
  if (forget_wake) {
    wake_ = nullptr;
    suspended_ = false;
  }
  WakeLocked();
}

bool EventStream::Done() const {
  absl::MutexLock lock(&mu_);
  return done_;
}

}  // namespace rbmrec::server::http
