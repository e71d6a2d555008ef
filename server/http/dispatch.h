#ifndef RBMREC_SERVER_HTTP_DISPATCH_H_
#define RBMREC_SERVER_HTTP_DISPATCH_H_

// The calls of RbmrecService (server/service/service.h) by method name, for
// the HTTP layer: the one list of per-method adapters (dispatch.cc). A new
// unary rpc of rbmrec.v1 needs one line there (Unary(&RbmrecService::M)); a
// method without an adapter is routed but answers UNIMPLEMENTED (501).
// Streaming shapes: AddRatings takes one request message as one batch (its
// response as a unary call); a server-streaming method (Train,
// RecommendAll) writes each response message to a Writer, which may block
// while the receiver is behind.
//
// Thread safety: immutable after construction; the adapters are as
// thread-safe as RbmrecService (every method may run concurrently).

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "server/service/service.h"

namespace rbmrec::server::http {

class Dispatcher {
 public:
  using Message = google::protobuf::Message;
  using UnaryCall =
      std::function<absl::StatusOr<std::unique_ptr<Message>>(const Message&)>;
  // Returns false when the receiver went away (the call then stops
  // writing).
  using Writer = std::function<bool(const Message&)>;
  using StreamingCall =
      std::function<absl::Status(const Message&, const Writer&)>;

  struct Entry {
    const google::protobuf::Descriptor* input = nullptr;
    const google::protobuf::Descriptor* output = nullptr;
    UnaryCall unary;          // set for unary methods (and AddRatings)
    StreamingCall streaming;  // set for server-streaming methods
  };

  // `service` is not owned and must outlive the dispatcher.
  explicit Dispatcher(RbmrecService* service);

  // The adapter of `method` (a short name, "Train"), or null.
  const Entry* Find(absl::string_view method) const;

  // Internal naming every adapter whose name is not a method of `service`
  // or whose message types differ from the method's (a renamed rpc).
  absl::Status Check(const google::protobuf::ServiceDescriptor& service) const;

 private:
  std::map<std::string, Entry, std::less<>> entries_;
};

}  // namespace rbmrec::server::http

#endif  // RBMREC_SERVER_HTTP_DISPATCH_H_
