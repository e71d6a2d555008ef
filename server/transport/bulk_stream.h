#ifndef RBMREC_SERVER_TRANSPORT_BULK_STREAM_H_
#define RBMREC_SERVER_TRANSPORT_BULK_STREAM_H_

// One RecommendAll stream on gRPC's callback API, never blocking an event
// thread: the job is built (RbmrecService::StartRecommendAll, which may
// load a stored model version) and every message is computed on the bulk
// threads (`pool`), at most `window` messages of the stream computed or
// waiting at once (bounded memory), and written in stream order one at a
// time, the next write starting when gRPC has taken the previous one (the
// stream's flow control). A cancelled call or a reader that goes away
// stops the computing; the first error ends the stream with it after the
// messages before it.
//
// Thread-safe: the reactor's reactions and its pool tasks synchronise on
// one mutex; it deletes itself in OnDone.

#include "grpcpp/grpcpp.h"
#include "proto/rbmrec.pb.h"
#include "server/service/service.h"
#include "server/transport/blocking_executor.h"

namespace rbmrec::server {

// Starts serving `request` on `context`. REQUIRES: service and pool outlive
// the call (the server drains calls before destroying them); window >= 1.
grpc::ServerWriteReactor<v1::RecommendAllResponse>* StartBulkStream(
    RbmrecService* service, grpc::CallbackServerContext* context,
    const v1::RecommendAllRequest* request, BlockingExecutor* pool, int window);

}  // namespace rbmrec::server

#endif  // RBMREC_SERVER_TRANSPORT_BULK_STREAM_H_
