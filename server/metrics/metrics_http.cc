#include "server/metrics/metrics_http.h"

#include <microhttpd.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "server/log.h"
#include "server/mhd_listener.h"

namespace rbmrec::server {

struct MetricsHttpAccess {
  static MHD_Result Queue(MHD_Connection* connection, unsigned int code,
                          const std::string& body, const char* type) {
    MHD_Response* response = MHD_create_response_from_buffer(
        body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
    if (response == nullptr) return MHD_NO;
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    const MHD_Result r = MHD_queue_response(connection, code, response);
    MHD_destroy_response(response);
    return r;
  }

  // libmicrohttpd's access handler: called once the request headers are in
  // (GET and HEAD have no body to wait for).
  static MHD_Result Handle(void* cls, MHD_Connection* connection,
                           const char* url, const char* method,
                           const char* /*version*/, const char* /*upload_data*/,
                           size_t* upload_data_size, void** /*con_cls*/) {
    auto* server = static_cast<MetricsHttpServer*>(cls);
    const bool get = std::strcmp(method, MHD_HTTP_METHOD_GET) == 0;
    const bool head = std::strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
    if (!get && !head) {
      *upload_data_size = 0;  // ignore a body
      return Queue(connection, MHD_HTTP_METHOD_NOT_ALLOWED,
                   "only GET /metrics\n", "text/plain; charset=utf-8");
    }
    if (std::strcmp(url, "/metrics") != 0) {
      return Queue(connection, MHD_HTTP_NOT_FOUND,
                   "not found; the metrics are at /metrics\n",
                   "text/plain; charset=utf-8");
    }
    return Queue(connection, MHD_HTTP_OK, server->registry_->Render(),
                 kTextContentType);
  }
};

namespace {

// libmicrohttpd's error messages as structured log lines.
}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& listen, MetricsRegistry* registry) {
  absl::StatusOr<ListenAddress> address =
      ResolveListen("--metrics-listen", listen);
  if (!address.ok()) return address.status();
  std::unique_ptr<MetricsHttpServer> server(new MetricsHttpServer());
  server->registry_ = registry;
  unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
  if (address->ipv6) flags |= MHD_USE_IPv6;
  server->daemon_ = MHD_start_daemon(
      flags, static_cast<uint16_t>(address->port), nullptr, nullptr,
      &MetricsHttpAccess::Handle, server.get(),
      // The logger must be the first option.
      MHD_OPTION_EXTERNAL_LOGGER, &LogMhdError,
      const_cast<char*>("metrics_http_error"), MHD_OPTION_SOCK_ADDR,
      address->sockaddr_ptr(), MHD_OPTION_CONNECTION_LIMIT, 16u,
      MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
  if (server->daemon_ == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("--metrics-listen: cannot listen on ", listen,
                     " (address in use, or not an address of this host?)"));
  }
  const MHD_DaemonInfo* info =
      MHD_get_daemon_info(server->daemon_, MHD_DAEMON_INFO_BIND_PORT);
  server->port_ = info != nullptr ? info->port : address->port;
  return server;
}

void MetricsHttpServer::Stop() {
  if (daemon_ != nullptr) {
    MHD_stop_daemon(daemon_);
    daemon_ = nullptr;
  }
}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

}  // namespace rbmrec::server
