#ifndef RBMREC_TESTS_SERVER_HTTP_CLIENT_H_
#define RBMREC_TESTS_SERVER_HTTP_CLIENT_H_

// A small HTTP/1.1 client on raw sockets for the tests of the HTTP listeners
// (metrics, the HTTP/JSON API): one request per connection, the answer read
// to EOF, chunked bodies decoded, so the tests see the bytes on the wire.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace rbmrec::server {

struct HttpReply {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
};

// A connected socket to 127.0.0.1:port; -1 on failure.
inline int ConnectLoopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

inline std::string Dechunk(const std::string& raw) {
  std::string out;
  size_t pos = 0;
  while (pos < raw.size()) {
    const size_t eol = raw.find("\r\n", pos);
    if (eol == std::string::npos) break;
    size_t n = 0;
    if (!absl::SimpleHexAtoi(raw.substr(pos, eol - pos), &n) || n == 0) break;
    out += raw.substr(eol + 2, n);
    pos = eol + 2 + n + 2;
  }
  return out;
}

// Sends `text` and reads the answer to EOF.
inline HttpReply RawRequest(int port, const std::string& text) {
  HttpReply reply;
  const int fd = ConnectLoopback(port);
  if (fd < 0) return reply;
  size_t sent = 0;
  while (sent < text.size()) {
    const ssize_t n =
        send(fd, text.data() + sent, text.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server may answer early (413) and close
    sent += static_cast<size_t>(n);
  }
  std::string raw;
  char buf[65536];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof buf, 0)) > 0) raw.append(buf, n);
  close(fd);
  const size_t end = raw.find("\r\n\r\n");
  if (end == std::string::npos) return reply;
  std::vector<std::string> lines = absl::StrSplit(raw.substr(0, end), "\r\n");
  std::vector<std::string> status_line = absl::StrSplit(lines[0], ' ');
  if (status_line.size() < 2 ||
      !absl::SimpleAtoi(status_line[1], &reply.status)) {
    return reply;
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t colon = lines[i].find(':');
    if (colon == std::string::npos) continue;
    reply.headers[absl::AsciiStrToLower(lines[i].substr(0, colon))] =
        std::string(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
  }
  reply.body = raw.substr(end + 4);
  if (reply.headers["transfer-encoding"] == "chunked") {
    reply.body = Dechunk(reply.body);
  }
  return reply;
}

}  // namespace rbmrec::server

#endif  // RBMREC_TESTS_SERVER_HTTP_CLIENT_H_
