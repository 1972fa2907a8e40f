#include "net/http_server.h"

namespace cairn::net {
class HttpServer::Impl {};
HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpServer::~HttpServer() = default;
Result<std::unique_ptr<HttpServer>> HttpServer::Start(const ServerOptions&, Handler) {
  return UnimplementedError("not yet");
}
ServerStats HttpServer::stats() const { return {}; }
void HttpServer::Stop(std::chrono::milliseconds) {}
void HttpServer::Wait() {}
Result<std::pair<std::string, uint16_t>> ParseHostPort(std::string_view) {
  return UnimplementedError("not yet");
}
}  // namespace cairn::net
