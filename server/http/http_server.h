#ifndef RBMREC_SERVER_HTTP_HTTP_SERVER_H_
#define RBMREC_SERVER_HTTP_HTTP_SERVER_H_

// The HTTP/JSON listener of --http-listen: every rpc of rbmrec.v1.Rbmrec as
// JSON (routes from the .proto's google.api.http options and POST
// /v1/rbmrec.v1.Rbmrec/METHOD, server/http/routes.h), calling RbmrecService
// directly (no gRPC in between), GET /openapi.json (server/http/openapi.h),
// and the dashboard's files at / and /ui/ (server/http/static_files.h: no
// token needed, headers of their own).
//
// Built on libmicrohttpd (as --metrics-listen): `threads` polling threads
// (MHD's thread pool; each multiplexes its connections, so a slow or idle
// client holds a socket, never a thread), at most `max_connections` open
// connections, an idle connection closed after `timeout_seconds`, a request
// body over `max_body_bytes` answered 413 (by Content-Length before it is
// read, else as soon as it grows past the cap). A call runs on the polling
// thread that read it (the service's calls are short, or bounded like
// Train's start); a stream (Train, RecommendAll: server-sent events,
// event_stream.h) runs on a thread of its own, at most `max_streams` at once,
// and its connection is suspended between events, holding no polling
// thread.
//
// Tokens (`authorizer` set): "Authorization: Bearer TOKEN", the role of
// each method from the same table as gRPC (RequiredRole,
// server/security/auth.h), checked before the body is read: 401 (with
// WWW-Authenticate: Bearer) or 403 with the JSON error body. /openapi.json
// needs read, as reflection does. Errors: http_status.h. Every answer
// carries X-Content-Type-Options: nosniff, Cache-Control: no-store,
// Content-Security-Policy: default-src 'none'; frame-ancestors 'none',
// X-Frame-Options: DENY and Referrer-Policy: no-referrer. With
// `metrics`, every request is counted (server/http/http_metrics.h).
//
// TLS (`tls_cert_pem` set): MHD_USE_TLS (GnuTLS) with the PEM certificate
// chain and key, replaceable while serving (ReloadTls, on SIGHUP;
// server/http/http_tls.h).
//
// Thread safety: Start() and Stop() from one thread; port() from any.

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/http/dispatch.h"
#include "server/http/http_tls.h"
#include "server/http/routes.h"
#include "server/metrics/metrics.h"
#include "server/security/auth.h"
#include "server/service/service.h"

struct MHD_Daemon;

namespace rbmrec::server::http {

class EventStream;
class HttpMetrics;

struct HttpServerOptions {
  std::string listen;  // HOST:PORT; port 0 picks a free one
  // Null: tokens are off and every call is allowed.
  std::shared_ptr<const Authorizer> authorizer;
  // Polling threads; 0 = one per hardware thread (a pool larger than the
  // cores only adds scheduling delay to the tail: each unary call runs on
  // the polling thread that read it).
  int threads = 0;
  int max_connections = 256;
  int timeout_seconds = 30;
  size_t max_body_bytes = 4u << 20;
  // Streams (Train, RecommendAll) running at once at most, each on a
  // thread of its own; more are refused with RESOURCE_EXHAUSTED +
  // LIMIT_EXCEEDED (429).
  size_t max_streams = 32;
  // Set: rbmrec_http_* on its /metrics (server/http/http_metrics.h); not
  // owned, outlives the server.
  MetricsRegistry* metrics = nullptr;
  std::string tls_cert_pem;  // with tls_key_pem; empty: plain HTTP
  std::string tls_key_pem;
};

class HttpServer {
 public:
  // Builds the routes, the OpenAPI document and the dispatcher and
  // listens. InvalidArgument for bad options or a bad address or route;
  // Internal when an adapter does not match the service; Unavailable
  // when the address cannot be bound. `service` is not owned and must
  // outlive the server.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(
      RbmrecService* service, HttpServerOptions options);
  // Stop().
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }
  // Closes the listener and every connection, then waits for the
  // streams' threads (a stream whose client is gone stops at its next
  // event; BeginShutdown of the service ends a running job). Idempotent.
  void Stop();
  // New handshakes use this certificate chain and key; open connections
  // keep their session. InvalidArgument when GnuTLS cannot use them (the
  // certificate in use stays); FailedPrecondition without TLS. Logs the
  // outcome (http_tls_reloaded, http_tls_reload_failed).
  absl::Status ReloadTls(const std::string& cert_pem,
                         const std::string& key_pem);

 private:
  friend struct HttpAccess;
  explicit HttpServer(RbmrecService* service) : dispatcher_(service) {}
  // Starts a stream (EventStream::Start) and keeps it for Stop, or refuses
  // it over options_.max_streams.
  absl::StatusOr<std::shared_ptr<EventStream>> StartStream(
      const Dispatcher::Entry& entry,
      std::unique_ptr<google::protobuf::Message> request)
      ABSL_LOCKS_EXCLUDED(mu_);

  HttpServerOptions options_;
  Dispatcher dispatcher_;
  Router router_;
  std::string openapi_;
  std::unique_ptr<HttpTlsIdentity> tls_;  // null without TLS
  std::shared_ptr<HttpMetrics> metrics_;  // null without options.metrics
  MHD_Daemon* daemon_ = nullptr;
  int port_ = 0;
  absl::Mutex mu_;
  std::vector<std::shared_ptr<EventStream>> streams_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rbmrec::server::http

#endif  // RBMREC_SERVER_HTTP_HTTP_SERVER_H_
