// HttpConnection on a blocking socket and net::TlsEngine (http_client.h has
// why). The response header is parsed by Beast's parser (fed the header
// block, nothing else); the body is read by net::BodyReader, straight into
// the caller's memory.
#include "net/http_client.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <cerrno>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "base/text.h"
#include "net/http_body.h"
#include "net/tls.h"
#include "net/tls_engine.h"

namespace cairn::net {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using Clock = std::chrono::steady_clock;

constexpr size_t kPieceBytes = 256 << 10;  // RequestStreaming's pieces
// Plaintext encrypted before the ciphertext is sent: one send() per slice.
constexpr size_t kSendSlice = 1 << 20;
constexpr size_t kMaxResponseHeader = 64 << 10;
// An error answer's body kept for the message.
constexpr uint64_t kMaxErrorBody = 1 << 20;

bool IsIpLiteral(const std::string& host) {
  in6_addr a6;
  in_addr a4;
  return inet_pton(AF_INET, host.c_str(), &a4) == 1 || inet_pton(AF_INET6, host.c_str(), &a6) == 1;
}

// No control characters or spaces: they would split the request line or a header.
bool IsSafeToken(std::string_view s, bool allow_space) {
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f || (!allow_space && c == ' ')) return false;
  }
  return true;
}

// One client context for the process: no CA vouches for a cairn server, so
// any chain is accepted here and the leaf certificate is pinned after the
// handshake.
SSL_CTX* ClientContext() {
  static SSL_CTX* ctx = [] {
    SSL_CTX* c = SSL_CTX_new(TLS_client_method());
    if (c != nullptr) {
      ConfigureDataPlaneContext(c);
      SSL_CTX_set_verify(c, SSL_VERIFY_NONE, nullptr);
    }
    return c;
  }();
  return ctx;
}

void SetTimeouts(int fd, std::chrono::milliseconds t) {
  auto ms = std::max<int64_t>(1, t.count());
  timeval tv{static_cast<time_t>(ms / 1000), static_cast<suseconds_t>((ms % 1000) * 1000)};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

}  // namespace

class HttpConnection::Impl final : public PlainSource {
 public:
  explicit Impl(const ClientOptions& options) : options_(options), in_(this) {
    std::string host = options.host;
    if (host.find(':') != std::string::npos) host = "[" + host + "]";
    where_ = host + ":" + std::to_string(options.port);
  }
  ~Impl() override { Close(); }

  // Connects and shakes hands; with `pin`, checks the certificate against
  // options_.fingerprint. `*fingerprint` gets the server's.
  Status Connect(bool pin, std::string* fingerprint);
  Result<HttpResponse> Send(std::string_view method, std::string_view target,
                            std::span<const ByteSpan> body, std::string_view content_type);
  Status ReadBody(uint8_t* dest, size_t n, size_t* got);
  Status ReadBodyExactly(uint8_t* dest, size_t n, std::string_view what);
  Result<HttpResponse> Exchange(std::string_view method, std::string_view target, ByteSpan body,
                                std::string_view content_type,
                                const std::function<Status(ByteSpan)>* on_data);
  bool open() const { return open_; }

  void Close() {
    if (fd_ >= 0) {
      ::shutdown(fd_, SHUT_RDWR);
      ::close(fd_);
      fd_ = -1;
    }
    open_ = false;
    in_body_ = false;
    in_.Reset();
  }

  // PlainSource: TLS plaintext, receiving ciphertext as needed.
  Status ReadSome(uint8_t* dest, size_t n, size_t* got) override;

 private:
  Status ConnectSocket(Clock::time_point deadline);
  Status Handshake(Clock::time_point deadline);
  Status Fail(std::string_view what, std::string why) {
    Close();
    return UnavailableError(fmt::format("{} {}: {}", what, where_, why));
  }
  // `s` with the request and the server, unless a transport error has them.
  Status InContext(const Status& s, std::string_view what) const {
    if (std::string_view(s.message()).starts_with(context_)) return s;
    return Status(s.code(), fmt::format("{}: {} {}: {}", context_, what, where_, s.message()));
  }
  std::string TimeoutText(std::chrono::milliseconds t) const {
    return fmt::format("timed out after {} ms", t.count());
  }
  // Sends the out queue whole (the socket's send timeout bounds each call).
  Status Flush(std::string_view context);
  // Receives what the kernel has (up to the engine's 1 MiB) into the engine.
  Status Receive(std::string_view context);
  // Encrypts `data` into the out queue, sending every kSendSlice.
  Status Write(ByteSpan data, std::string_view context);
  Status FinishBody();

  const ClientOptions options_;
  std::string where_;  // "host:port" for messages
  int fd_ = -1;
  std::unique_ptr<TlsEngine> tls_;
  BufferedReader in_;
  BodyReader body_;
  bool in_body_ = false;     // a response body is being read
  bool keep_alive_ = false;  // of the current response
  std::string context_;      // "HTTP GET /x" of the current request
  bool open_ = false;
  Bytes piece_;
};

Status HttpConnection::Impl::ConnectSocket(Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  int rc = ::getaddrinfo(options_.host.c_str(), std::to_string(options_.port).c_str(), &hints, &list);
  if (rc != 0) return UnavailableError(fmt::format("resolve {}: {}", where_, gai_strerror(rc)));
  std::string last = "no address";
  for (addrinfo* a = list; a != nullptr; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) {
      last = std::strerror(errno);
      continue;
    }
    int err = 0;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        pollfd p{fd, POLLOUT, 0};
        int n = left.count() > 0 ? ::poll(&p, 1, static_cast<int>(left.count())) : 0;
        socklen_t len = sizeof(err);
        if (n == 1) {
          ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        } else {
          err = ETIMEDOUT;
        }
      }
    }
    if (err == 0) {
      ::freeaddrinfo(list);
      fd_ = fd;
      ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_NONBLOCK);
      int one = 1;
      ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      return Status::Ok();
    }
    last = err == ETIMEDOUT ? TimeoutText(options_.connect_timeout) : std::strerror(err);
    ::close(fd);
  }
  ::freeaddrinfo(list);
  return UnavailableError(fmt::format("connect to {}: {}", where_, last));
}

Status HttpConnection::Impl::Handshake(Clock::time_point deadline) {
  for (;;) {
    TlsEngine::Step step = tls_->Handshake();
    if (!tls_->out_empty()) CAIRN_RETURN_IF_ERROR(Flush("TLS handshake with"));
    if (step == TlsEngine::Step::kOk) return Status::Ok();
    if (step != TlsEngine::Step::kWantRead) {
      return Fail("TLS handshake with", tls_->error());
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return Fail("TLS handshake with", TimeoutText(options_.connect_timeout));
    SetTimeouts(fd_, left);
    CAIRN_RETURN_IF_ERROR(Receive("TLS handshake with"));
    if (tls_->eof() && tls_->in_buffered() == 0) {
      return Fail("TLS handshake with", "the server closed the connection");
    }
  }
}

Status HttpConnection::Impl::Connect(bool pin, std::string* fingerprint) {
  const auto deadline = Clock::now() + options_.connect_timeout;
  CAIRN_RETURN_IF_ERROR(ConnectSocket(deadline));
  open_ = true;
  SSL_CTX* ctx = ClientContext();
  if (ctx != nullptr) tls_ = std::make_unique<TlsEngine>(ctx, /*server=*/false);
  if (!tls_ || !tls_->valid()) {
    Close();
    return InternalError("creating a TLS client session failed");
  }
  SSL* ssl = tls_->ssl();
  if (!IsIpLiteral(options_.host)) SSL_set_tlsext_host_name(ssl, options_.host.c_str());
  CAIRN_RETURN_IF_ERROR(Handshake(deadline));
  SetTimeouts(fd_, options_.io_timeout);

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

Status HttpConnection::Impl::Flush(std::string_view context) {
  while (!tls_->out_empty()) {
    ByteSpan out = tls_->OutPending();
    ssize_t n = ::send(fd_, out.data(), out.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      bool timeout = errno == EAGAIN || errno == EWOULDBLOCK;
      return Fail(fmt::format("{}: sending to", context),
                  timeout ? TimeoutText(options_.io_timeout) : std::strerror(errno));
    }
    tls_->ConsumeOut(static_cast<size_t>(n));
  }
  return Status::Ok();
}

Status HttpConnection::Impl::Receive(std::string_view context) {
  MutableByteSpan space = tls_->InSpace();
  for (;;) {
    ssize_t n = ::recv(fd_, space.data(), space.size(), 0);
    if (n > 0) {
      tls_->CommitIn(static_cast<size_t>(n));
      return Status::Ok();
    }
    if (n == 0) {
      tls_->SetEof();
      return Status::Ok();
    }
    if (errno == EINTR) continue;
    bool timeout = errno == EAGAIN || errno == EWOULDBLOCK;
    return Fail(fmt::format("{}: receiving from", context),
                timeout ? TimeoutText(options_.io_timeout) : std::strerror(errno));
  }
}

Status HttpConnection::Impl::ReadSome(uint8_t* dest, size_t n, size_t* got) {
  *got = 0;
  if (!open_) return UnavailableError(fmt::format("{}: the connection to {} is closed", context_, where_));
  for (;;) {
    TlsEngine::Step step = tls_->Read(dest, n, got);
    // Reading may answer something (a key update): send it along.
    if (!tls_->out_empty()) CAIRN_RETURN_IF_ERROR(Flush(context_));
    switch (step) {
      case TlsEngine::Step::kOk: return Status::Ok();
      case TlsEngine::Step::kClosed: return Status::Ok();  // *got = 0: end of stream
      case TlsEngine::Step::kWantRead: break;
      case TlsEngine::Step::kError:
        return Fail(fmt::format("{}: reading the response from", context_), tls_->error());
    }
    CAIRN_RETURN_IF_ERROR(Receive(context_));
  }
}

Status HttpConnection::Impl::Write(ByteSpan data, std::string_view context) {
  while (!data.empty()) {
    size_t n = std::min(data.size(), kSendSlice - std::min(kSendSlice, tls_->OutPending().size()));
    if (n == 0) {
      CAIRN_RETURN_IF_ERROR(Flush(context));
      continue;
    }
    if (tls_->Write(data.data(), n) != TlsEngine::Step::kOk) {
      return Fail(fmt::format("{}: sending the request to", context), tls_->error());
    }
    data = data.subspan(n);
  }
  return Status::Ok();
}

Result<HttpResponse> HttpConnection::Impl::Send(std::string_view method, std::string_view target,
                                               std::span<const ByteSpan> body,
                                               std::string_view content_type) {
  context_ = "HTTP " + std::string(method) + " " + std::string(target);
  if (method.empty() || !IsSafeToken(method, false) || target.empty() ||
      !IsSafeToken(target, false) || !IsSafeToken(content_type, true) ||
      !IsSafeToken(options_.authorization, true)) {
    return InvalidArgumentError(context_ + ": control characters or spaces in the request");
  }
  if (!open_) return UnavailableError(context_ + ": the connection to " + where_ + " is closed");
  if (in_body_) {
    Close();
    return FailedPreconditionError(context_ + ": the previous response's body was not read");
  }
  uint64_t length = 0;
  for (ByteSpan piece : body) length += piece.size();
  std::string head;
  head.reserve(256 + target.size() + options_.authorization.size());
  head.append(method).append(" ").append(target).append(" HTTP/1.1\r\nHost: ");
  head.append(where_).append("\r\nUser-Agent: cairn\r\n");
  if (!options_.authorization.empty()) {
    head.append("Authorization: ").append(options_.authorization).append("\r\n");
  }
  bool bodyless_method = method == "GET" || method == "HEAD" || method == "DELETE";
  if (length > 0 || !bodyless_method) {
    head.append("Content-Length: ").append(std::to_string(length)).append("\r\n");
  }
  if (length > 0 && !content_type.empty()) {
    head.append("Content-Type: ").append(content_type).append("\r\n");
  }
  head.append("\r\n");
  // The header and the body go out together, in slices of kSendSlice.
  CAIRN_RETURN_IF_ERROR(Write(AsBytes(head), context_));
  for (ByteSpan piece : body) CAIRN_RETURN_IF_ERROR(Write(piece, context_));
  CAIRN_RETURN_IF_ERROR(Flush(context_));

  std::string block;
  bool empty_stream = false;
  Status s = in_.ReadHeaderBlock(&block, kMaxResponseHeader, &empty_stream);
  if (!s.ok()) {
    Close();
    return InContext(s, "reading the response from");
  }
  http::response_parser<http::empty_body> parser;
  parser.eager(false);
  parser.header_limit(static_cast<uint32_t>(kMaxResponseHeader));
  if (method == "HEAD") parser.skip(true);
  beast::error_code ec;
  parser.put(boost::asio::buffer(block.data(), block.size()), ec);
  if (ec || !parser.is_header_done()) {
    Close();
    return DataLossError(fmt::format("{}: a malformed response header from {}: {}", context_,
                                     where_, ec ? ec.message() : "incomplete"));
  }
  HttpResponse response;
  response.status = static_cast<int>(parser.get().result_int());
  for (const auto& field : parser.get()) {
    auto [it, inserted] = response.headers.emplace(AsciiLower(std::string(field.name_string())),
                                                    std::string(field.value()));
    if (!inserted) it->second += ", " + std::string(field.value());
  }
  keep_alive_ = parser.keep_alive();
  const int st = response.status;
  if (method == "HEAD" || st / 100 == 1 || st == 204 || st == 304) {
    body_.Start(BodyReader::Mode::kNone);
  } else if (parser.chunked()) {
    body_.Start(BodyReader::Mode::kChunked);
  } else if (parser.content_length()) {
    body_.Start(BodyReader::Mode::kLength, *parser.content_length());
  } else {
    body_.Start(BodyReader::Mode::kUntilClose);
    keep_alive_ = false;
  }
  in_body_ = true;
  CAIRN_RETURN_IF_ERROR(FinishBody());
  return response;
}

// After the last byte of the body: the connection takes the next request,
// or closes.
Status HttpConnection::Impl::FinishBody() {
  if (!in_body_ || !body_.done()) return Status::Ok();
  in_body_ = false;
  if (!keep_alive_ || in_.buffered() > 0) Close();  // nothing may follow an answer
  return Status::Ok();
}

Status HttpConnection::Impl::ReadBody(uint8_t* dest, size_t n, size_t* got) {
  *got = 0;
  if (!in_body_) return Status::Ok();
  Status s = body_.Read(in_, dest, n, got);
  if (!s.ok()) {
    Close();
    return InContext(s, "reading the response body from");
  }
  return FinishBody();
}

Status HttpConnection::Impl::ReadBodyExactly(uint8_t* dest, size_t n, std::string_view what) {
  size_t done = 0;
  while (done < n) {
    size_t got = 0;
    CAIRN_RETURN_IF_ERROR(ReadBody(dest + done, n - done, &got));
    if (got == 0) {
      Close();
      return UnavailableError(fmt::format("{}: the response body from {} ended {} of {} bytes "
                                          "into {}",
                                          context_, where_, done, n, what));
    }
    done += got;
  }
  return Status::Ok();
}

Result<HttpResponse> HttpConnection::Impl::Exchange(
    std::string_view method, std::string_view target, ByteSpan body, std::string_view content_type,
    const std::function<Status(ByteSpan)>* on_data) {
  ByteSpan pieces[1] = {body};
  CAIRN_ASSIGN_OR_RETURN(HttpResponse response,
                         Send(method, target, std::span<const ByteSpan>(pieces, body.empty() ? 0 : 1),
                              content_type));
  // Only a success's body streams; an error's (a message) is collected.
  const bool ok = response.status >= 200 && response.status < 300;
  if (!ok) on_data = nullptr;
  if (piece_.size() != kPieceBytes) piece_.resize(kPieceBytes);
  uint64_t collected = 0;
  for (;;) {
    size_t got = 0;
    CAIRN_RETURN_IF_ERROR(ReadBody(piece_.data(), piece_.size(), &got));
    if (got == 0) break;
    if (on_data == nullptr) {
      collected += got;
      if (!ok && collected > kMaxErrorBody) continue;  // the start says enough
      response.body.insert(response.body.end(), piece_.begin(), piece_.begin() + got);
    } else if (Status s = (*on_data)(ByteSpan(piece_.data(), got)); !s.ok()) {
      Close();
      return s;
    }
  }
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

Result<HttpResponse> HttpConnection::Send(std::string_view method, std::string_view target,
                                          std::span<const ByteSpan> body,
                                          std::string_view content_type) {
  return impl_->Send(method, target, body, content_type);
}

Status HttpConnection::ReadBody(uint8_t* dest, size_t n, size_t* got) {
  return impl_->ReadBody(dest, n, got);
}

Status HttpConnection::ReadBodyExactly(uint8_t* dest, size_t n, std::string_view what) {
  return impl_->ReadBodyExactly(dest, n, what);
}

void HttpConnection::Close() { impl_->Close(); }

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

std::string UrlEncode(std::string_view text) { return PercentEncode(text); }

}  // namespace cairn::net
