#ifndef RBMREC_SERVER_TRANSPORT_ARENA_ALLOCATOR_H_
#define RBMREC_SERVER_TRANSPORT_ARENA_ALLOCATOR_H_

// A grpc::MessageAllocator for callback unary methods that parses each
// request into a protobuf arena with an inline first block: a request's
// repeated strings (e.g. PredictRatings' item ids) cost no malloc/free
// pair each, only a bump of the arena, and the whole request is freed at
// once when the call ends. The response stays on the heap, so the handler's
// `*response = std::move(answer)` is a swap, not a deep copy across arenas.
//
// Thread-safe (AllocateMessages allocates a holder per call and touches no
// shared state). The allocator must outlive the server (gRPC's rule).

#include <cstddef>
#include <new>

#include "google/protobuf/arena.h"
#include "grpcpp/support/message_allocator.h"

namespace rbmrec::server {

template <typename Request, typename Response>
class ArenaRequestAllocator final
    : public grpc::MessageAllocator<Request, Response> {
 public:
  grpc::MessageHolder<Request, Response>* AllocateMessages() override {
    return new Holder();
  }

 private:
  // Requests up to about this size parse without a further allocation;
  // larger ones grow the arena block by block.
  static constexpr size_t kInlineBytes = 16 << 10;

  class Holder final : public grpc::MessageHolder<Request, Response> {
   public:
    Holder() : arena_(block_, sizeof(block_)) {
      this->set_request(
          google::protobuf::Arena::CreateMessage<Request>(&arena_));
      this->set_response(new Response());
    }
    ~Holder() override { delete this->response(); }
    // The arena (and with it the request) goes with the holder.
    void Release() override { delete this; }

   private:
    alignas(std::max_align_t) char block_[kInlineBytes];
    google::protobuf::Arena arena_;
  };
};

}  // namespace rbmrec::server

#endif  // RBMREC_SERVER_TRANSPORT_ARENA_ALLOCATOR_H_
