#include "net/http_client.h"

namespace cairn::net {
class HttpConnection::Impl {};
HttpConnection::HttpConnection(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpConnection::~HttpConnection() = default;
Result<std::unique_ptr<HttpConnection>> HttpConnection::Connect(const ClientOptions&) {
  return UnimplementedError("not yet");
}
Result<HttpResponse> HttpConnection::Request(std::string_view, std::string_view, ByteSpan,
                                             std::string_view) {
  return UnimplementedError("not yet");
}
Result<HttpResponse> HttpConnection::RequestStreaming(std::string_view, std::string_view, ByteSpan,
                                                      const std::function<Status(ByteSpan)>&,
                                                      std::string_view) {
  return UnimplementedError("not yet");
}
bool HttpConnection::open() const { return false; }
Result<std::string> FetchServerFingerprint(const std::string&, uint16_t, std::chrono::milliseconds) {
  return UnimplementedError("not yet");
}
std::string UrlEncode(std::string_view text) { return std::string(text); }
}  // namespace cairn::net
