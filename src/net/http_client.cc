// HttpConnection on Boost.Beast: each blocking call starts one asynchronous
// operation on the connection's private io_context and runs it to
// completion; the tcp_stream's expiry bounds every operation (Asio's
// blocking calls would ignore socket timeouts).

// g++ 12 warns that TSan does not model Asio's atomic_thread_fence
// (-Wtsan, an error under -Werror in the tsan preset). Asio's fences only
// back up its mutexes, which TSan does see; silence it for this file.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#pragma GCC diagnostic ignored "-Wtsan"
#endif

#include "net/http_client.h"

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <limits>

#include "net/tls.h"

namespace cairn::net {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using error_code = beast::error_code;

constexpr size_t kPieceBytes = 256 << 10;     // one read of a response body
constexpr size_t kWriteSliceBytes = 1 << 20;  // one timed write of a request body
constexpr size_t kSmallBodyBytes = 64 << 10;  // sent in the header's write
constexpr uint32_t kMaxResponseHeader = 64 << 10;

bool IsIpLiteral(const std::string& host) {
  error_code ec;
  asio::ip::make_address(host, ec);
  return !ec;
}

// No control characters or spaces: they would split the request line or a header.
bool IsSafeToken(std::string_view s, bool allow_space) {
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f || (!allow_space && c == ' ')) return false;
  }
  return true;
}

std::string Lowercase(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

}  // namespace

class HttpConnection::Impl {
 public:
  explicit Impl(const ClientOptions& options)
      : options_(options), ssl_ctx_(ssl::context::tls_client), stream_(ioc_, ssl_ctx_) {
    std::string host = options.host;
    if (host.find(':') != std::string::npos) host = "[" + host + "]";
    where_ = host + ":" + std::to_string(options.port);
  }
  ~Impl() { Close(); }

  // Connects and shakes hands; with `pin`, checks the certificate against
  // options_.fingerprint. `*fingerprint` gets the server's.
  Status Connect(bool pin, std::string* fingerprint);
  Result<HttpResponse> Exchange(std::string_view method, std::string_view target, ByteSpan body,
                                std::string_view content_type,
                                const std::function<Status(ByteSpan)>* on_data);
  bool open() const { return open_; }

 private:
  beast::tcp_stream& Lowest() { return beast::get_lowest_layer(stream_); }

  // Starts an operation with `start(handler)` under a `timeout` deadline
  // and runs the io_context until it completes.
  template <typename Start>
  error_code Await(std::chrono::milliseconds timeout, Start start) {
    error_code result = asio::error::would_block;
    Lowest().expires_after(timeout);
    start([&result](error_code ec, auto&&...) { result = ec; });
    ioc_.restart();
    ioc_.run();
    Lowest().expires_never();
    return result;
  }

  Status Fail(std::string_view what, error_code ec, std::chrono::milliseconds timeout) {
    Close();
    std::string why = ec == beast::error::timeout
                          ? "timed out after " + std::to_string(timeout.count()) + " ms"
                          : ec.message();
    return UnavailableError(std::string(what) + " " + where_ + ": " + why);
  }

  void Close() {
    if (!open_ && !Lowest().socket().is_open()) return;
    open_ = false;
    error_code ignored;
    Lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
    Lowest().close();
  }

  Status WriteRequest(std::string_view method, std::string_view target, ByteSpan body,
                      std::string_view content_type, const std::string& context);
  Status ReadResponse(bool head, const std::function<Status(ByteSpan)>* on_data,
                      HttpResponse* response, const std::string& context);

  const ClientOptions options_;
  std::string where_;  // "host:port" for messages
  asio::io_context ioc_;
  ssl::context ssl_ctx_;
  beast::ssl_stream<beast::tcp_stream> stream_;
  beast::flat_buffer buffer_;
  Bytes piece_;
  bool open_ = false;
};

Status HttpConnection::Impl::Connect(bool pin, std::string* fingerprint) {
  const auto timeout = options_.connect_timeout;
  tcp::resolver resolver(ioc_);
  error_code ec = asio::error::would_block;
  tcp::resolver::results_type endpoints;
  resolver.async_resolve(options_.host, std::to_string(options_.port),
                         [&](error_code e, tcp::resolver::results_type r) {
                           ec = e;
                           endpoints = std::move(r);
                         });
  ioc_.restart();
  ioc_.run_for(timeout);
  if (ec == asio::error::would_block) {
    resolver.cancel();
    ioc_.restart();
    ioc_.run();
    return UnavailableError("resolve " + where_ + ": timed out");
  }
  if (ec) return UnavailableError("resolve " + where_ + ": " + ec.message());

  ec = Await(timeout, [&](auto handler) { Lowest().async_connect(endpoints, handler); });
  if (ec) return Fail("connect to", ec, timeout);
  open_ = true;
  error_code ignored;
  Lowest().socket().set_option(tcp::no_delay(true), ignored);

  SSL* ssl = stream_.native_handle();
  SSL_set_min_proto_version(ssl, TLS1_2_VERSION);
  if (!IsIpLiteral(options_.host)) SSL_set_tlsext_host_name(ssl, options_.host.c_str());
  // No CA vouches for a cairn server: accept any chain here and pin the
  // leaf certificate below.
  stream_.set_verify_mode(ssl::verify_peer);
  stream_.set_verify_callback([](bool, ssl::verify_context&) { return true; });
  ec = Await(timeout,
             [&](auto handler) { stream_.async_handshake(ssl::stream_base::client, handler); });
  if (ec) return Fail("TLS handshake with", ec, timeout);

  X509* leaf = SSL_get0_peer_certificate(ssl);
  if (leaf == nullptr) {
    Close();
    return UnavailableError("TLS handshake with " + where_ + ": no server certificate");
  }
  unsigned char* der = nullptr;
  int len = i2d_X509(leaf, &der);
  if (len <= 0) {
    Close();
    return InternalError("encoding the certificate of " + where_ + " as DER failed");
  }
  *fingerprint = FingerprintOfDer(ByteSpan(der, static_cast<size_t>(len)));
  OPENSSL_free(der);
  if (!pin) return Status::Ok();

  if (options_.fingerprint.empty()) {
    Close();
    return PermissionDeniedError("the server's certificate fingerprint is " + *fingerprint +
                                 "; it is not trusted yet: pass --fingerprint " + *fingerprint +
                                 " or set CAIRN_FINGERPRINT");
  }
  auto pinned = NormalizeFingerprint(options_.fingerprint);
  if (!pinned.ok()) {
    Close();
    return pinned.status();
  }
  if (*pinned != *fingerprint) {
    Close();
    return PermissionDeniedError("server " + where_ + " presented certificate fingerprint " +
                                 *fingerprint + "; expected " + *pinned +
                                 ". If you trust this server, pass --fingerprint " + *fingerprint +
                                 " or set CAIRN_FINGERPRINT");
  }
  return Status::Ok();
}

Status HttpConnection::Impl::WriteRequest(std::string_view method, std::string_view target,
                                          ByteSpan body, std::string_view content_type,
                                          const std::string& context) {
  std::string head;
  head.reserve(256 + target.size() + options_.authorization.size());
  head.append(method).append(" ").append(target).append(" HTTP/1.1\r\nHost: ");
  head.append(where_).append("\r\nUser-Agent: cairn\r\n");
  if (!options_.authorization.empty()) {
    head.append("Authorization: ").append(options_.authorization).append("\r\n");
  }
  bool bodyless_method = method == "GET" || method == "HEAD" || method == "DELETE";
  if (!body.empty() || !bodyless_method) {
    head.append("Content-Length: ").append(std::to_string(body.size())).append("\r\n");
  }
  if (!body.empty() && !content_type.empty()) {
    head.append("Content-Type: ").append(content_type).append("\r\n");
  }
  head.append("\r\n");

  // A small body goes out with the header in one write; a large one
  // follows it in slices, each under its own deadline.
  size_t offset = 0;
  if (body.size() <= kSmallBodyBytes) {
    head.append(AsStringView(body));
    offset = body.size();
  }
  std::string_view next = head;
  while (!next.empty()) {
    error_code ec = Await(options_.io_timeout, [&](auto handler) {
      asio::async_write(stream_, asio::buffer(next.data(), next.size()), handler);
    });
    if (ec) return Fail(context + ": sending the request to", ec, options_.io_timeout);
    size_t n = std::min(kWriteSliceBytes, body.size() - offset);
    next = AsStringView(body.subspan(offset, n));
    offset += n;
  }
  return Status::Ok();
}

Status HttpConnection::Impl::ReadResponse(bool head, const std::function<Status(ByteSpan)>* on_data,
                                          HttpResponse* response, const std::string& context) {
  const auto timeout = options_.io_timeout;
  http::response_parser<http::buffer_body> parser;
  parser.header_limit(kMaxResponseHeader);
  // Not boost::none: Boost 1.74 compares the length with the empty optional.
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  if (head) parser.skip(true);
  error_code ec = Await(
      timeout, [&](auto handler) { http::async_read_header(stream_, buffer_, parser, handler); });
  if (ec) return Fail(context + ": reading the response from", ec, timeout);
  response->status = static_cast<int>(parser.get().result_int());
  for (const auto& field : parser.get()) {
    auto [it, inserted] = response->headers.emplace(Lowercase(std::string(field.name_string())),
                                                    std::string(field.value()));
    if (!inserted) it->second += ", " + std::string(field.value());
  }
  // Only a success's body streams; an error's (a message) is collected.
  if (response->status < 200 || response->status >= 300) on_data = nullptr;
  if (piece_.empty()) piece_.resize(kPieceBytes);
  while (!parser.is_done()) {
    parser.get().body().data = piece_.data();
    parser.get().body().size = piece_.size();
    ec = Await(timeout, [&](auto handler) { http::async_read(stream_, buffer_, parser, handler); });
    if (ec == http::error::need_buffer) ec = {};
    if (ec) return Fail(context + ": reading the response body from", ec, timeout);
    ByteSpan got(piece_.data(), piece_.size() - parser.get().body().size);
    if (got.empty()) continue;
    if (on_data == nullptr) {
      response->body.insert(response->body.end(), got.begin(), got.end());
    } else if (Status s = (*on_data)(got); !s.ok()) {
      Close();
      return s;
    }
  }
  if (!parser.keep_alive()) Close();
  return Status::Ok();
}

Result<HttpResponse> HttpConnection::Impl::Exchange(
    std::string_view method, std::string_view target, ByteSpan body, std::string_view content_type,
    const std::function<Status(ByteSpan)>* on_data) {
  std::string context = "HTTP " + std::string(method) + " " + std::string(target);
  if (method.empty() || !IsSafeToken(method, false) || target.empty() ||
      !IsSafeToken(target, false) || !IsSafeToken(content_type, true) ||
      !IsSafeToken(options_.authorization, true)) {
    return InvalidArgumentError(context + ": control characters or spaces in the request");
  }
  if (!open_) return UnavailableError(context + ": the connection to " + where_ + " is closed");
  CAIRN_RETURN_IF_ERROR(WriteRequest(method, target, body, content_type, context));
  HttpResponse response;
  CAIRN_RETURN_IF_ERROR(ReadResponse(method == "HEAD", on_data, &response, context));
  return response;
}

HttpConnection::HttpConnection(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpConnection::~HttpConnection() = default;

Result<std::unique_ptr<HttpConnection>> HttpConnection::Connect(const ClientOptions& options) {
  auto impl = std::make_unique<Impl>(options);
  std::string fingerprint;
  CAIRN_RETURN_IF_ERROR(impl->Connect(/*pin=*/true, &fingerprint));
  return std::unique_ptr<HttpConnection>(new HttpConnection(std::move(impl)));
}

Result<HttpResponse> HttpConnection::Request(std::string_view method, std::string_view target,
                                             ByteSpan body, std::string_view content_type) {
  return impl_->Exchange(method, target, body, content_type, nullptr);
}

Result<HttpResponse> HttpConnection::RequestStreaming(
    std::string_view method, std::string_view target, ByteSpan body,
    const std::function<Status(ByteSpan)>& on_data, std::string_view content_type) {
  return impl_->Exchange(method, target, body, content_type, &on_data);
}

bool HttpConnection::open() const { return impl_->open(); }

Result<std::string> FetchServerFingerprint(const std::string& host, uint16_t port,
                                           std::chrono::milliseconds timeout) {
  ClientOptions options;
  options.host = host;
  options.port = port;
  options.connect_timeout = timeout;
  HttpConnection::Impl impl(options);
  std::string fingerprint;
  CAIRN_RETURN_IF_ERROR(impl.Connect(/*pin=*/false, &fingerprint));
  return fingerprint;
}

std::string UrlEncode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    auto u = static_cast<unsigned char>(c);
    bool unreserved = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '.' || c == '_' || c == '~';
    if (unreserved) {
      out += c;
    } else {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 0xf];
    }
  }
  return out;
}

}  // namespace cairn::net
