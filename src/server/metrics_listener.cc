#include "server/metrics_listener.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cstring>

#include <fmt/format.h>

#include "base/tcp_listen.h"
#include "net/http_server.h"

namespace cairn::server {
namespace {

constexpr size_t kMaxRequest = 8 << 10;
constexpr int kPollMillis = 200;  // how soon the thread sees a stop

// Writes all of `data` (the socket has a send timeout).
bool WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

void Reply(int fd, int status, std::string_view reason, std::string_view type, std::string_view body) {
  WriteAll(fd, fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n"
                           "Connection: close\r\n\r\n",
                           status, reason, type, body.size()));
  WriteAll(fd, body);
}

}  // namespace

Result<std::unique_ptr<MetricsListener>> MetricsListener::Start(const std::string& listen,
                                                                Render render) {
  CAIRN_ASSIGN_OR_RETURN(auto hp, net::ParseHostPort(listen));
  std::string endpoint;
  CAIRN_ASSIGN_OR_RETURN(UniqueFd fd, ListenTcp(hp.first, std::to_string(hp.second), 16,
                                                fmt::format("metrics listen {}", listen), &endpoint));
  std::unique_ptr<MetricsListener> l(
      new MetricsListener(std::move(fd), std::move(endpoint), std::move(render)));
  l->thread_ = std::jthread([p = l.get()](std::stop_token stop) { p->Serve(stop); });
  return l;
}

MetricsListener::MetricsListener(UniqueFd fd, std::string endpoint, Render render)
    : fd_(std::move(fd)), endpoint_(std::move(endpoint)), render_(std::move(render)) {}

MetricsListener::~MetricsListener() {
  if (thread_.joinable()) {
    thread_.request_stop();
    thread_.join();
  }
}

void MetricsListener::Serve(std::stop_token stop) {
  while (!stop.stop_requested()) {
    pollfd p{fd_.get(), POLLIN, 0};
    if (::poll(&p, 1, kPollMillis) <= 0) continue;
    UniqueFd conn(::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (conn.get() < 0) continue;
    // A client that sends nothing, or takes nothing, holds the thread 5 s
    // at most.
    timeval timeout{5, 0};
    ::setsockopt(conn.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    ::setsockopt(conn.get(), SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
    Answer(conn.get());
  }
}

void MetricsListener::Answer(int fd) {
  std::string request;
  char buf[2048];
  while (request.find("\r\n\r\n") == std::string::npos) {
    if (request.size() > kMaxRequest) {
      return Reply(fd, 431, "Request Header Fields Too Large", "text/plain", "too large\n");
    }
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // gone, or too slow
    request.append(buf, static_cast<size_t>(n));
  }
  // "GET /metrics HTTP/1.1" (a query string is ignored, as Prometheus may
  // add one).
  const std::string line = request.substr(0, request.find("\r\n"));
  const size_t sp1 = line.find(' ');
  const size_t sp2 = line.find(' ', sp1 + 1);
  if (sp1 == std::string::npos || sp2 == std::string::npos) {
    return Reply(fd, 400, "Bad Request", "text/plain", "bad request\n");
  }
  const std::string method = line.substr(0, sp1);
  std::string target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  target = target.substr(0, target.find('?'));
  if (target != "/metrics") {
    return Reply(fd, 404, "Not Found", "text/plain", "only /metrics is here\n");
  }
  if (method != "GET" && method != "HEAD") {
    return Reply(fd, 405, "Method Not Allowed", "text/plain", "GET /metrics\n");
  }
  std::string body = render_();
  if (method == "HEAD") body.clear();
  Reply(fd, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", body);
}

}  // namespace cairn::server
