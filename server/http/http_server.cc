#include "server/http/http_server.h"

#include <microhttpd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/error_reason.h"
#include "google/protobuf/message.h"
#include "google/protobuf/util/json_util.h"
#include "proto/rbmrec.grpc.pb.h"
#include "server/http/event_stream.h"
#include "server/http/http_metrics.h"
#include "server/http/http_status.h"
#include "server/http/http_tls.h"
#include "server/http/openapi.h"
#include "server/http/request_mapping.h"
#include "server/http/static_files.h"
#include "server/log.h"
#include "server/mhd_listener.h"

namespace rbmrec::server::http {

namespace pb = ::google::protobuf;

namespace {

constexpr char kJson[] = "application/json";
constexpr char kOpenApiPath[] = "/openapi.json";

// One request's state between libmicrohttpd's calls of the handler.
struct Exchange {
  std::chrono::steady_clock::time_point start =
      std::chrono::steady_clock::now();
  const Route* route = nullptr;
  bool openapi = false;
  Bindings bindings;
  std::string body;
  bool too_large = false;
  bool answered = false;  // a response was queued on the first call
};

void AddSecurityHeaders(MHD_Response* response) {
  MHD_add_response_header(response, "X-Content-Type-Options", "nosniff");
  MHD_add_response_header(response, "Cache-Control", "no-store");
  MHD_add_response_header(response, "Content-Security-Policy",
                          "default-src 'none'; frame-ancestors 'none'");
  MHD_add_response_header(response, "X-Frame-Options", "DENY");
  MHD_add_response_header(response, "Referrer-Policy", "no-referrer");
}

MHD_Result Send(
    MHD_Connection* connection, unsigned int code, const std::string& body,
    const char* type,
    const std::vector<std::pair<std::string, std::string>>& headers = {}) {
  MHD_Response* response = MHD_create_response_from_buffer(
      body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
  if (response == nullptr) return MHD_NO;
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, type);
  AddSecurityHeaders(response);
  for (const auto& [key, value] : headers) {
    MHD_add_response_header(response, key.c_str(), value.c_str());
  }
  const MHD_Result r = MHD_queue_response(connection, code, response);
  MHD_destroy_response(response);
  return r;
}

MHD_Result SendError(
    MHD_Connection* connection, const absl::Status& status,
    const std::vector<std::pair<std::string, std::string>>& headers = {}) {
  return Send(connection,
              static_cast<unsigned int>(HttpStatusOf(status.code())),
              ErrorJson(status) + "\n", kJson, headers);
}

// The dashboard's files (static_files.h): no token needed (the page asks
// for one; its calls carry it), headers of their own.
MHD_Result SendStatic(MHD_Connection* connection, const char* method,
                      const char* url) {
  const char* tag = MHD_lookup_connection_value(connection, MHD_HEADER_KIND,
                                                MHD_HTTP_HEADER_IF_NONE_MATCH);
  const StaticAnswer a = AnswerStatic(method, url, tag != nullptr ? tag : "");
  MHD_Response* response = MHD_create_response_from_buffer(
      a.body.size(), const_cast<char*>(a.body.data()), MHD_RESPMEM_PERSISTENT);
  if (response == nullptr) return MHD_NO;
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE,
                          a.content_type.c_str());
  for (const auto& [key, value] : a.headers) {
    MHD_add_response_header(response, key.c_str(), value.c_str());
  }
  const MHD_Result r = MHD_queue_response(
      connection, static_cast<unsigned int>(a.status), response);
  MHD_destroy_response(response);
  return r;
}

MHD_Result CollectQuery(void* cls, MHD_ValueKind /*kind*/, const char* key,
                        const char* value) {
  static_cast<Bindings*>(cls)->emplace_back(key, value != nullptr ? value : "");
  return MHD_YES;
}

// The response's hold on a stream and its connection (for suspend).
struct StreamHold {
  std::shared_ptr<EventStream> stream;
  MHD_Connection* connection;
};

ssize_t ReadEvents(void* cls, uint64_t /*pos*/, char* buf, size_t max) {
  auto* hold = static_cast<StreamHold*>(cls);
  const size_t n = hold->stream->Read(
      buf, max, [hold] { MHD_suspend_connection(hold->connection); });
  if (n == EventStream::kEnd) return MHD_CONTENT_READER_END_OF_STREAM;
  if (n == EventStream::kSuspended) return 0;  // resumed by the next event
  return static_cast<ssize_t>(n);
}

}  // namespace

struct HttpAccess {
  // The first call of a request (headers in, body not yet read): the route,
  // the token and the declared size.
  static MHD_Result First(HttpServer* server, MHD_Connection* connection,
                          const char* url, const char* method, Exchange* ex) {
    const char* auth = MHD_lookup_connection_value(
        connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    absl::string_view name;
    Role needed = kReflectionRole;
    if (IsStaticPath(url)) {
      ex->answered = true;
      return SendStatic(connection, method, url);
    }
    if (std::strcmp(url, kOpenApiPath) == 0) {
      if (std::strcmp(method, MHD_HTTP_METHOD_GET) != 0) {
        ex->answered = true;
        return SendError(connection,
                         absl::InvalidArgumentError(
                             absl::StrCat(kOpenApiPath, " takes GET only")),
                         {{"Allow", "GET"}});
      }
      name = "openapi.json";
      ex->openapi = true;
    } else {
      Router::Lookup found = server->router_.Find(method, url);
      if (found.route == nullptr) {
        ex->answered = true;
        if (found.allowed.empty()) {
          return SendError(connection,
                           absl::NotFoundError(absl::StrCat(
                               "no route ", method, " ", url,
                               "; the routes are in ", kOpenApiPath)));
        }
        const std::string allow = absl::StrJoin(found.allowed, ", ");
        return Send(connection, 405,
                    ErrorJson(absl::UnimplementedError(absl::StrCat(
                                  url, " takes ", allow, ", not ", method)),
                              405) +
                        "\n",
                    kJson, {{"Allow", allow}});
      }
      ex->route = found.route;
      ex->bindings = std::move(found.bindings);
      name = ex->route->method->name();
      needed = RequiredRole(name).value_or(Role::kAdmin);
    }
    if (server->options_.authorizer != nullptr) {
      absl::optional<absl::string_view> header;
      if (auth != nullptr) header = absl::string_view(auth);
      Caller caller;
      if (absl::Status s = server->options_.authorizer->CheckHeader(
              header, name, needed, &caller);
          !s.ok()) {
        Log(LogLevel::kWarn, "call_denied",
            {F("transport", "http"), F("method", name),
             F("client", caller.name),
             F("code", absl::StatusCodeToString(s.code())),
             F("needed", RoleName(needed))});
        ex->answered = true;
        std::vector<std::pair<std::string, std::string>> headers;
        if (s.code() == absl::StatusCode::kUnauthenticated) {
          headers.emplace_back("WWW-Authenticate", "Bearer");
        }
        return SendError(connection, s, headers);
      }
    }
    if (const char* length = MHD_lookup_connection_value(
            connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH)) {
      uint64_t n = 0;
      if (absl::SimpleAtoi(length, &n) && n > server->options_.max_body_bytes) {
        ex->answered = true;
        return TooLarge(server, connection);
      }
    }
    return MHD_YES;
  }

  static MHD_Result TooLarge(HttpServer* server, MHD_Connection* connection) {
    return Send(
        connection, 413,
        ErrorJson(WithReason(absl::ResourceExhaustedError(absl::StrCat(
                                 "request body over the server's limit of ",
                                 server->options_.max_body_bytes,
                                 " bytes (--max-message-mb)")),
                             kReasonLimitExceeded),
                  413) +
            "\n",
        kJson);
  }

  // The last call: the whole body is in.
  static MHD_Result Answer(HttpServer* server, MHD_Connection* connection,
                           Exchange* ex) {
    if (ex->too_large) return TooLarge(server, connection);
    if (ex->route == nullptr) {
      return Send(connection, 200, server->openapi_, kJson);
    }
    const pb::MethodDescriptor* method = ex->route->method;
    const Dispatcher::Entry* entry = server->dispatcher_.Find(method->name());
    if (entry == nullptr) {
      return SendError(connection, absl::UnimplementedError(absl::StrCat(
                                       method->full_name(),
                                       " has no HTTP adapter in this server "
                                       "(server/http/dispatch.cc)")));
    }
    std::unique_ptr<pb::Message> request(
        pb::MessageFactory::generated_factory()
            ->GetPrototype(method->input_type())
            ->New());
    Bindings query;
    MHD_get_connection_values(connection, MHD_GET_ARGUMENT_KIND, &CollectQuery,
                              &query);
    if (absl::Status s = BuildRequest(*ex->route, ex->bindings, query, ex->body,
                                      request.get());
        !s.ok()) {
      return SendError(connection, s);
    }
    if (entry->streaming)
      return Stream(server, connection, *entry, std::move(request));
    absl::StatusOr<std::unique_ptr<pb::Message>> result =
        entry->unary(*request);
    if (!result.ok()) return SendError(connection, result.status());
    std::string json;
    pb::util::JsonPrintOptions options;
    options.always_print_primitive_fields = true;
    if (!pb::util::MessageToJsonString(**result, &json, options).ok()) {
      return SendError(connection,
                       absl::InternalError("response not printable as JSON"));
    }
    json += "\n";
    return Send(connection, 200, json, kJson);
  }

  static MHD_Result Stream(HttpServer* server, MHD_Connection* connection,
                           const Dispatcher::Entry& entry,
                           std::unique_ptr<pb::Message> request) {
    absl::StatusOr<std::shared_ptr<EventStream>> started =
        server->StartStream(entry, std::move(request));
    if (!started.ok()) return SendError(connection, started.status());
    std::shared_ptr<EventStream> stream = *std::move(started);
    if (absl::Status s = stream->AwaitStart(); !s.ok()) {
      return SendError(connection, s);
    }
    // The response owns a reference: it may read the last events after
    // the server forgot the finished stream.
    auto* owner = new StreamHold{stream, connection};
    stream->SetWake([connection] { MHD_resume_connection(connection); });
    MHD_Response* response = MHD_create_response_from_callback(
        MHD_SIZE_UNKNOWN, 32 << 10, &ReadEvents, owner, [](void* cls) {
          auto* held = static_cast<StreamHold*>(cls);
          held->stream->Detach(/*forget_wake=*/true);
          delete held;
        });
    if (response == nullptr) {
      delete owner;
      return MHD_NO;
    }
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE,
                            "text/event-stream");
    AddSecurityHeaders(response);
    const MHD_Result r = MHD_queue_response(connection, 200, response);
    MHD_destroy_response(response);
    return r;
  }

  static MHD_Result Handle(void* cls, MHD_Connection* connection,
                           const char* url, const char* method,
                           const char* /*version*/, const char* upload_data,
                           size_t* upload_data_size, void** con_cls) {
    auto* server = static_cast<HttpServer*>(cls);
    if (*con_cls == nullptr) {
      auto* ex = new Exchange();
      *con_cls = ex;
      return First(server, connection, url, method, ex);
    }
    auto* ex = static_cast<Exchange*>(*con_cls);
    if (*upload_data_size > 0) {
      if (!ex->answered && !ex->too_large) {
        if (ex->body.size() + *upload_data_size >
            server->options_.max_body_bytes) {
          ex->too_large = true;
          std::string().swap(ex->body);
        } else {
          ex->body.append(upload_data, *upload_data_size);
        }
      }
      *upload_data_size = 0;
      return MHD_YES;
    }
    if (ex->answered) return MHD_YES;
    ex->answered = true;
    return Answer(server, connection, ex);
  }

  static void Completed(void* cls, MHD_Connection* connection, void** con_cls,
                        MHD_RequestTerminationCode /*toe*/) {
    auto* server = static_cast<HttpServer*>(cls);
    auto* ex = static_cast<Exchange*>(*con_cls);
    if (ex != nullptr && server->metrics_ != nullptr) {
      const MHD_ConnectionInfo* info =
          MHD_get_connection_info(connection, MHD_CONNECTION_INFO_HTTP_STATUS);
      const std::string route =
          ex->route != nullptr ? absl::StrCat(ex->route->http_method, " ",
                                              ex->route->path.text())
          : ex->openapi        ? absl::StrCat("GET ", kOpenApiPath)
                               : "unmatched";
      server->metrics_->Observe(
          route, info != nullptr ? info->http_status : 0,
          std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                        ex->start)
              .count());
    }
    delete ex;
    *con_cls = nullptr;
  }
};

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    RbmrecService* service, HttpServerOptions options) {
  const pb::ServiceDescriptor* descriptor =
      pb::DescriptorPool::generated_pool()->FindServiceByName(
          v1::Rbmrec::service_full_name());
  if (descriptor == nullptr) {
    return absl::InternalError("no descriptor for rbmrec.v1.Rbmrec");
  }
  if (absl::Status s = CheckRoleTable(*descriptor); !s.ok()) return s;
  if (options.threads < 0 || options.max_connections < 1 ||
      options.timeout_seconds < 1) {
    return absl::InvalidArgumentError(
        "--http-threads must be at least 0, --http-max-connections and "
        "--http-timeout-seconds at least 1");
  }
  absl::StatusOr<ListenAddress> address =
      ResolveListen("--http-listen", options.listen);
  if (!address.ok()) return address.status();
  std::unique_ptr<HttpServer> server(new HttpServer(service));
  server->options_ = std::move(options);
  if (server->options_.threads == 0) {
    server->options_.threads =
        static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }
  if (absl::Status s = server->dispatcher_.Check(*descriptor); !s.ok()) {
    return s;
  }
  absl::StatusOr<Router> router = Router::Build(*descriptor);
  if (!router.ok()) return router.status();
  server->router_ = std::move(*router);
  server->openapi_ = OpenApiJson(*descriptor, server->router_);
  if (server->options_.metrics != nullptr) {
    server->metrics_ = std::make_shared<HttpMetrics>();
    HttpMetrics::Register(server->metrics_, server->options_.metrics);
  }
  const HttpServerOptions& o = server->options_;
  // epoll instead of select/poll, and TURBO (opportunistic reads and
  // writes, fewer syscalls per request): a lower tail under load
  // (bench/http_bench.sh, docs/benchmarks.md).
  unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG |
                       MHD_ALLOW_SUSPEND_RESUME | MHD_USE_EPOLL | MHD_USE_TURBO;
  if (address->ipv6) flags |= MHD_USE_IPv6;
  const bool tls = !o.tls_cert_pem.empty();
  if (tls) flags |= MHD_USE_TLS;
  std::vector<MHD_OptionItem> items = {
      {MHD_OPTION_CONNECTION_LIMIT, o.max_connections, nullptr},
      {MHD_OPTION_CONNECTION_TIMEOUT, o.timeout_seconds, nullptr},
      {MHD_OPTION_NOTIFY_COMPLETED,
       reinterpret_cast<intptr_t>(&HttpAccess::Completed), server.get()},
  };
  // One polling thread is MHD's internal thread without a pool (a pool of
  // one is refused with a warning).
  if (o.threads > 1) {
    items.push_back({MHD_OPTION_THREAD_POOL_SIZE, o.threads, nullptr});
  }
  if (tls) {
    absl::StatusOr<std::unique_ptr<HttpTlsIdentity>> identity =
        HttpTlsIdentity::Create(o.tls_cert_pem, o.tls_key_pem);
    if (!identity.ok()) return identity.status();
    server->tls_ = *std::move(identity);
    items.push_back({MHD_OPTION_HTTPS_CERT_CALLBACK, 0,
                     HttpTlsIdentity::RetrieveFunction()});
  }
  items.push_back({MHD_OPTION_END, 0, nullptr});
  server->daemon_ = MHD_start_daemon(
      flags, static_cast<uint16_t>(address->port), nullptr, nullptr,
      &HttpAccess::Handle, server.get(),
      // The logger must be the first option.
      MHD_OPTION_EXTERNAL_LOGGER, &LogMhdError, const_cast<char*>("http_error"),
      MHD_OPTION_SOCK_ADDR, address->sockaddr_ptr(), MHD_OPTION_ARRAY,
      items.data(), MHD_OPTION_END);
  if (server->daemon_ == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        "--http-listen: cannot listen on ", o.listen,
        tls ? " (address in use, not an address of this host, or the TLS "
              "certificate and key are not usable by GnuTLS?)"
            : " (address in use, or not an address of this host?)"));
  }
  const MHD_DaemonInfo* info =
      MHD_get_daemon_info(server->daemon_, MHD_DAEMON_INFO_BIND_PORT);
  server->port_ = info != nullptr ? info->port : address->port;
  if (server->tls_ != nullptr) server->tls_->Register(server->port_);
  return server;
}

absl::StatusOr<std::shared_ptr<EventStream>> HttpServer::StartStream(
    const Dispatcher::Entry& entry, std::unique_ptr<pb::Message> request) {
  absl::MutexLock lock(&mu_);
  // Forget the streams whose call has returned (their threads end).
  std::vector<std::shared_ptr<EventStream>> live;
  for (std::shared_ptr<EventStream>& s : streams_) {
    if (s->Done()) {
      s->Join();
    } else {
      live.push_back(std::move(s));
    }
  }
  streams_ = std::move(live);
  if (streams_.size() >= options_.max_streams) {
    return WithReason(
        absl::ResourceExhaustedError(absl::StrCat(
            "the HTTP listener already runs ", options_.max_streams,
            " streams (Train, RecommendAll); retry (or resume) later")),
        kReasonLimitExceeded);
  }
  streams_.push_back(EventStream::Start(entry, std::move(request)));
  return streams_.back();
}

void HttpServer::Stop() {
  std::vector<std::shared_ptr<EventStream>> streams;
  {
    absl::MutexLock lock(&mu_);
    streams.swap(streams_);
  }
  // Suspended stream connections are resumed first, to end.
  for (std::shared_ptr<EventStream>& s : streams) s->Detach();
  if (daemon_ != nullptr) {
    MHD_stop_daemon(daemon_);
    daemon_ = nullptr;
  }
  if (tls_ != nullptr) tls_->Unregister();
  for (std::shared_ptr<EventStream>& s : streams) s->Join();
}

absl::Status HttpServer::ReloadTls(const std::string& cert_pem,
                                   const std::string& key_pem) {
  if (tls_ == nullptr) {
    return absl::FailedPreconditionError("the HTTP listener has no TLS");
  }
  absl::Status s = tls_->Replace(cert_pem, key_pem);
  if (s.ok()) {
    Log(LogLevel::kInfo, "http_tls_reloaded",
        {F("effective", "new connections; open connections keep theirs")});
  } else {
    Log(LogLevel::kError, "http_tls_reload_failed",
        {F("error", s.message()), F("kept", "the certificate in use stays")});
  }
  return s;
}

HttpServer::~HttpServer() { Stop(); }

}  // namespace rbmrec::server::http
