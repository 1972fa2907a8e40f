// HttpServer on Boost.Beast: one strand per connection on the I/O threads,
// handlers on a worker pool (pipeline/ queue and worker group).
//
// A connection's life, all on its strand:
//   handshake → read request (header + body, request_timeout) → dispatch to
//   a worker → the worker's writes run on the strand (write_timeout each)
//   while the worker waits → response done → wait for the next request
//   (idle_timeout until its first byte) or shut down.
// Only one request per connection is in flight, so a connection never has a
// read and a write pending at once and the tcp_stream's one timer serves
// both.

// g++ 12 warns that TSan does not model Asio's atomic_thread_fence
// (-Wtsan, an error under -Werror in the tsan preset). Asio's fences only
// back up its mutexes, which TSan does see; silence it for this file.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#pragma GCC diagnostic ignored "-Wtsan"
#endif

#include "net/http_server.h"

#include <openssl/ssl.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <condition_variable>
#include <exception>
#include <future>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>

#include "net/byte_body.h"
#include "pipeline/bounded_queue.h"
#include "pipeline/worker_group.h"

namespace cairn::net {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using error_code = beast::error_code;

using Stream = beast::ssl_stream<beast::tcp_stream>;
using RequestParser = http::request_parser<ByteBody>;

constexpr auto kAcceptRetryDelay = std::chrono::milliseconds(100);
constexpr auto kLingerTime = std::chrono::milliseconds(1000);
constexpr size_t kLingerBytes = 1 << 20;
constexpr auto kMaxShutdownTime = std::chrono::milliseconds(5000);

std::string EndpointString(const tcp::endpoint& ep) {
  std::string addr = ep.address().to_string();
  if (ep.address().is_v6()) addr = "[" + addr + "]";
  return addr + ":" + std::to_string(ep.port());
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decodes `in`; false on a broken escape or a NUL byte.
bool PercentDecode(std::string_view in, bool plus_is_space, std::string* out) {
  out->clear();
  out->reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '%') {
      if (i + 2 >= in.size()) return false;
      int hi = HexValue(in[i + 1]);
      int lo = HexValue(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      c = static_cast<char>(hi * 16 + lo);
      i += 2;
    } else if (c == '+' && plus_is_space) {
      c = ' ';
    }
    if (c == '\0') return false;
    out->push_back(c);
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

bool IsFramingHeader(std::string_view name) {
  std::string lower = Lowercase(name);
  return lower == "content-length" || lower == "transfer-encoding";
}

}  // namespace

class Session;

class HttpServer::Impl {
 public:
  Impl(const ServerOptions& options, Handler handler)
      : options_(options),
        handler_(std::move(handler)),
        ssl_ctx_(ssl::context::tls_server),
        jobs_(static_cast<size_t>(std::max(options.max_connections, 1)) + 16) {}
  ~Impl() { Stop(std::chrono::milliseconds(0)); }

  Status Configure(std::vector<std::string>* endpoints);
  void StartThreads();
  void Stop(std::chrono::milliseconds grace);
  void Wait() {
    std::unique_lock lock(mu_);
    stopped_cv_.wait(lock, [&] { return stopped_; });
  }
  ServerStats stats() const {
    ServerStats s;
    s.connections_accepted = accepted_.load();
    s.connections_refused = refused_.load();
    s.requests = requests_.load();
    s.bad_requests = bad_requests_.load();
    return s;
  }

  // For sessions (any thread).
  const ServerOptions& options() const { return options_; }
  bool stopping() const { return stopping_.load(); }
  void CountRequest() { requests_++; }
  void CountBadRequest() { bad_requests_++; }
  // Queues a handler run; false when the server is stopping. `keep_alive`:
  // the client asked to keep the connection.
  bool Dispatch(std::shared_ptr<Session> session, HttpRequest request, bool keep_alive);
  void RequestDone() {
    std::lock_guard lock(mu_);
    if (--in_flight_ == 0) idle_cv_.notify_all();
  }
  void SessionGone(uint64_t id) {
    std::lock_guard lock(mu_);
    sessions_.erase(id);
    live_connections_--;
  }
  ssl::context& ssl_ctx() { return ssl_ctx_; }

 private:
  struct Listener {
    Listener(asio::io_context& ioc)
        : acceptor(asio::make_strand(ioc)), retry(acceptor.get_executor()) {}
    tcp::acceptor acceptor;
    asio::steady_timer retry;
  };

  Status Listen(const std::string& address, std::vector<std::string>* endpoints);
  void Accept(Listener* l);
  void OnAccept(Listener* l, error_code ec, tcp::socket socket);
  void RunIo();
  void RunWorker();
  template <typename F>
  void ForEachSession(F f);

  const ServerOptions options_;
  const Handler handler_;
  ssl::context ssl_ctx_;

  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> accepted_{0};
  std::atomic<uint64_t> refused_{0};
  std::atomic<uint64_t> requests_{0};
  std::atomic<uint64_t> bad_requests_{0};

  mutable std::mutex mu_;
  std::condition_variable idle_cv_;                      // in_flight_ reached 0
  std::condition_variable stopped_cv_;                   // stopped_ set
  int live_connections_ = 0;                             // GUARDED_BY(mu_)
  int in_flight_ = 0;                                    // GUARDED_BY(mu_)
  uint64_t next_session_id_ = 0;                         // GUARDED_BY(mu_)
  std::map<uint64_t, std::weak_ptr<Session>> sessions_;  // GUARDED_BY(mu_)
  bool stopped_ = false;                                 // GUARDED_BY(mu_)
  std::once_flag stop_once_;

  pipeline::BoundedQueue<std::function<void()>> jobs_;
  pipeline::WorkerGroup workers_;

  // Destroyed before the members above: pending handlers own sessions,
  // which reach back into this object when they go.
  asio::io_context ioc_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::vector<std::unique_ptr<Listener>> listeners_;
  std::vector<std::jthread> io_threads_;
};

// One TLS connection. Everything but BlockingWrite/FinishRequest runs on the
// connection's strand.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(HttpServer::Impl* server, tcp::socket socket, uint64_t id, std::string peer)
      : server_(server),
        options_(server->options()),
        stream_(std::move(socket), server->ssl_ctx()),
        id_(id),
        peer_(std::move(peer)) {}
  ~Session() { server_->SessionGone(id_); }

  void Start() {
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] {
      if (self->closed_) return;
      self->Lowest().expires_after(self->options_.request_timeout);
      self->stream_.async_handshake(ssl::stream_base::server,
                                    [self](error_code ec) { self->OnHandshake(ec); });
    });
  }

  // Stop: connections waiting for a request close now; one whose request
  // is with a handler closes after its response.
  void CloseIfIdle() {
    asio::post(stream_.get_executor(), [self = shared_from_this()] {
      if (!self->handling_) self->Abort();
    });
  }
  void CloseNow() {
    asio::post(stream_.get_executor(), [self = shared_from_this()] { self->Abort(); });
  }

  // From a worker: runs `start` on the strand with the write timeout armed
  // and blocks until the operation it starts reports completion.
  using Done = std::function<void(error_code)>;
  error_code BlockingWrite(const std::function<void(Stream&, Done)>& start);
  // From a worker, once the handler is done: `reusable` when the response
  // went out complete.
  void FinishRequest(bool reusable);
  const std::string& peer() const { return peer_; }

 private:
  beast::tcp_stream& Lowest() { return beast::get_lowest_layer(stream_); }

  void OnHandshake(error_code ec) {
    if (ec) {
      if (ec == beast::error::timeout) server_->CountBadRequest();
      return Abort();
    }
    StartParse();  // the first request shares the handshake's deadline
  }

  void ReadNextRequest() {
    if (buffer_.size() > 0) {  // pipelined
      Lowest().expires_after(options_.request_timeout);
      return StartParse();
    }
    Lowest().expires_after(options_.idle_timeout);
    stream_.async_read_some(buffer_.prepare(4096),
                            [self = shared_from_this()](error_code ec, size_t n) {
                              if (ec) return self->Abort();
                              self->buffer_.commit(n);
                              self->Lowest().expires_after(self->options_.request_timeout);
                              self->StartParse();
                            });
  }

  void StartParse() {
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(
        std::min<size_t>(options_.max_header_bytes, std::numeric_limits<uint32_t>::max())));
    parser_->body_limit(options_.max_body_bytes);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](error_code ec, size_t) { self->OnRead(ec); });
  }

  void OnRead(error_code ec) {
    if (closed_) return;
    if (ec == http::error::header_limit) return Reject(431, "request header too large");
    if (ec == http::error::body_limit) return Reject(413, "request body too large");
    if (ec == beast::error::timeout) {
      server_->CountBadRequest();
      return Abort();
    }
    if (ec && ec.category() == http::make_error_code(http::error::bad_target).category() &&
        ec != http::error::end_of_stream && ec != http::error::partial_message) {
      return Reject(400, "malformed request");
    }
    if (ec) return Abort();  // the client went away

    auto message = parser_->release();
    parser_.reset();
    HttpRequest req;
    req.method = std::string(message.method_string());
    req.target = std::string(message.target());
    if (!DecodeRequestTarget(req.target, &req.path, &req.query)) {
      return Reject(400, "malformed request target");
    }
    for (const auto& field : message) {
      std::string name = Lowercase(std::string(field.name_string()));
      auto [it, inserted] = req.headers.emplace(name, std::string(field.value()));
      if (!inserted) it->second += ", " + std::string(field.value());
    }
    req.body = std::move(message.body());
    req.peer = peer_;
    keep_alive_ = message.keep_alive();
    handling_ = true;
    Lowest().expires_never();
    server_->CountRequest();
    if (!server_->Dispatch(shared_from_this(), std::move(req), keep_alive_)) {
      handling_ = false;
      Abort();
    }
  }

  // Answers a bad request with a one-line text body and closes.
  void Reject(int status, std::string_view text) {
    server_->CountBadRequest();
    auto res =
        std::make_shared<http::response<http::string_body>>(static_cast<http::status>(status), 11);
    res->set(http::field::server, "cairn");
    res->set(http::field::content_type, "text/plain; charset=utf-8");
    res->keep_alive(false);
    res->body() = std::string(text) + "\n";
    res->prepare_payload();
    Lowest().expires_after(options_.write_timeout);
    http::async_write(stream_, *res, [self = shared_from_this(), res](error_code ec, size_t) {
      if (ec) return self->Abort();
      self->LingerClose();
    });
  }

  // After an error response the client may still be sending: stop writing
  // and discard what arrives for a moment, so that closing with unread
  // data (a TCP reset) does not destroy the response before it is read.
  void LingerClose() {
    error_code ignored;
    Lowest().socket().shutdown(tcp::socket::shutdown_send, ignored);
    Lowest().expires_after(kLingerTime);
    buffer_.clear();
    DrainSome(kLingerBytes);
  }
  void DrainSome(size_t budget) {
    Lowest().async_read_some(buffer_.prepare(16384),
                             [self = shared_from_this(), budget](error_code ec, size_t n) {
                               if (ec || n >= budget) return self->Abort();
                               self->DrainSome(budget - n);
                             });
  }

  void Shutdown() {
    Lowest().expires_after(
        std::min<std::chrono::milliseconds>(options_.write_timeout, kMaxShutdownTime));
    stream_.async_shutdown([self = shared_from_this()](error_code) { self->Abort(); });
  }

  void Abort() {
    if (closed_) return;
    closed_ = true;
    error_code ignored;
    Lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
    Lowest().close();
  }

  HttpServer::Impl* const server_;
  const ServerOptions& options_;
  Stream stream_;
  const uint64_t id_;
  const std::string peer_;
  beast::flat_buffer buffer_;
  std::optional<RequestParser> parser_;
  bool keep_alive_ = false;
  bool handling_ = false;  // a handler has the request
  bool closed_ = false;
};

error_code Session::BlockingWrite(const std::function<void(Stream&, Done)>& start) {
  auto done = std::make_shared<std::promise<error_code>>();
  std::future<error_code> result = done->get_future();
  asio::post(stream_.get_executor(), [self = shared_from_this(), &start, done] {
    if (self->closed_) return done->set_value(asio::error::not_connected);
    self->Lowest().expires_after(self->options_.write_timeout);
    start(self->stream_, [self, done](error_code ec) {
      if (ec) self->Abort();
      done->set_value(ec);
    });
  });
  try {
    return result.get();
  } catch (const std::future_error&) {  // the I/O threads went away first
    return asio::error::operation_aborted;
  }
}

void Session::FinishRequest(bool reusable) {
  asio::post(stream_.get_executor(), [self = shared_from_this(), reusable] {
    self->handling_ = false;
    self->server_->RequestDone();
    if (self->closed_) return;
    if (reusable && self->keep_alive_ && !self->server_->stopping()) {
      self->ReadNextRequest();
    } else {
      self->Shutdown();
    }
  });
}

namespace {

Status WriteError(error_code ec) {
  return UnavailableError("writing the response: " + ec.message());
}

// The ResponseWriter a handler gets; lives on the worker's stack.
class Writer final : public ResponseWriter {
 public:
  Writer(std::shared_ptr<Session> session, bool head, bool keep_alive)
      : session_(std::move(session)), head_(head), keep_alive_(keep_alive) {}

  void Send(int status, std::string_view content_type, ByteSpan body,
            const std::vector<std::pair<std::string, std::string>>& headers) override {
    if (responded_) return;
    responded_ = true;
    ended_ = true;
    // The body is written from the caller's memory: we wait for the write.
    http::response<http::buffer_body> res(static_cast<http::status>(status), 11);
    FillHeader(res, content_type, headers);
    res.content_length(body.size());
    res.body().data = head_ ? nullptr : const_cast<uint8_t*>(body.data());
    res.body().size = head_ ? 0 : body.size();
    res.body().more = false;
    error_code ec;
    if (head_) {
      http::response_serializer<http::buffer_body> sr(res);
      ec = session_->BlockingWrite([&sr](Stream& s, Session::Done done) {
        http::async_write_header(s, sr, [done](error_code e, size_t) { done(e); });
      });
    } else {
      ec = session_->BlockingWrite([&res](Stream& s, Session::Done done) {
        http::async_write(s, res, [done](error_code e, size_t) { done(e); });
      });
    }
    if (ec) failed_ = true;
  }

  Status BeginStream(int status, std::string_view content_type) override {
    if (responded_) return FailedPreconditionError("the response was already begun");
    responded_ = true;
    header_.emplace(static_cast<http::status>(status), 11);
    FillHeader(*header_, content_type, {});
    header_->chunked(true);
    serializer_.emplace(*header_);
    error_code ec = session_->BlockingWrite([this](Stream& s, Session::Done done) {
      http::async_write_header(s, *serializer_, [done](error_code e, size_t) { done(e); });
    });
    if (ec) {
      failed_ = true;
      return WriteError(ec);
    }
    if (head_) ended_ = true;
    return Status::Ok();
  }

  Status Write(ByteSpan data) override {
    if (!header_ || failed_) return FailedPreconditionError("no open response stream");
    if (data.empty() || head_) return Status::Ok();  // an empty chunk would end the body
    if (ended_) return FailedPreconditionError("the response stream was already ended");
    error_code ec = session_->BlockingWrite([data](Stream& s, Session::Done done) {
      asio::async_write(s, http::make_chunk(asio::const_buffer(data.data(), data.size())),
                        [done](error_code e, size_t) { done(e); });
    });
    if (ec) {
      failed_ = true;
      return WriteError(ec);
    }
    return Status::Ok();
  }

  Status End() override {
    if (!header_ || failed_) return FailedPreconditionError("no open response stream");
    if (ended_) return head_ ? Status::Ok() : FailedPreconditionError("already ended");
    ended_ = true;
    error_code ec = session_->BlockingWrite([](Stream& s, Session::Done done) {
      asio::async_write(s, http::make_chunk_last(), [done](error_code e, size_t) { done(e); });
    });
    if (ec) {
      failed_ = true;
      return WriteError(ec);
    }
    return Status::Ok();
  }

  bool responded() const override { return responded_; }
  // The whole response went out: the connection may serve another request.
  bool complete() const { return responded_ && ended_ && !failed_; }
  // The response said the connection stays open.
  bool keep_alive() const { return keep_alive_; }

 private:
  template <typename Message>
  void FillHeader(Message& res, std::string_view content_type,
                  const std::vector<std::pair<std::string, std::string>>& headers) {
    res.set(http::field::server, "cairn");
    if (!content_type.empty()) {
      res.set(http::field::content_type,
              beast::string_view(content_type.data(), content_type.size()));
    }
    for (const auto& [name, value] : headers) {
      if (!IsFramingHeader(name)) res.insert(name, value);
    }
    res.keep_alive(keep_alive_);
  }

  std::shared_ptr<Session> session_;
  const bool head_;
  const bool keep_alive_;
  bool responded_ = false;
  bool ended_ = false;
  bool failed_ = false;
  std::optional<http::response<http::empty_body>> header_;
  std::optional<http::response_serializer<http::empty_body>> serializer_;
};

}  // namespace

bool HttpServer::Impl::Dispatch(std::shared_ptr<Session> session, HttpRequest request,
                                bool keep_alive) {
  {
    std::lock_guard lock(mu_);
    ++in_flight_;
  }
  bool queued = jobs_.Push([this, session, request = std::move(request), keep_alive] {
    Writer writer(session, request.method == "HEAD", keep_alive && !stopping());
    try {
      handler_(request, writer);
    } catch (...) {
      // Answered below, as a handler that did not respond.
    }
    if (!writer.responded()) writer.SendText(500, "internal error: the handler did not respond");
    session->FinishRequest(writer.complete() && writer.keep_alive());
  });
  if (!queued) RequestDone();
  return queued;
}

void HttpServer::Impl::RunWorker() {
  while (std::optional<std::function<void()>> job = jobs_.Pop()) (*job)();
}

void HttpServer::Impl::RunIo() {
  for (;;) {
    try {
      ioc_.run();
      return;
    } catch (...) {
      // A handler threw (out of memory): keep serving the other connections.
    }
  }
}

Status HttpServer::Impl::Configure(std::vector<std::string>* endpoints) {
  SSL_CTX* ctx = ssl_ctx_.native_handle();
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(
      ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_cipher_list(ctx, "ECDHE+AESGCM:ECDHE+CHACHA20");
  error_code ec;
  ssl_ctx_.use_certificate_chain_file(options_.cert_file, ec);
  if (ec) {
    return FailedPreconditionError("TLS certificate " + options_.cert_file + ": " + ec.message());
  }
  ssl_ctx_.use_private_key_file(options_.key_file, ssl::context::pem, ec);
  if (ec) return FailedPreconditionError("TLS key " + options_.key_file + ": " + ec.message());
  if (SSL_CTX_check_private_key(ctx) != 1) {
    return FailedPreconditionError("TLS key " + options_.key_file +
                                   " does not match the certificate " + options_.cert_file);
  }
  if (options_.listen.empty()) return InvalidArgumentError("no address to listen on");
  for (const std::string& address : options_.listen) {
    CAIRN_RETURN_IF_ERROR(Listen(address, endpoints));
  }
  return Status::Ok();
}

Status HttpServer::Impl::Listen(const std::string& address, std::vector<std::string>* endpoints) {
  CAIRN_ASSIGN_OR_RETURN(auto host_port, ParseHostPort(address));
  auto fail = [&](std::string_view what, const error_code& ec) {
    std::string msg = "listen on " + address + ": " + std::string(what);
    if (ec.category() == asio::error::get_system_category()) return ErrnoToStatus(ec.value(), msg);
    return UnavailableError(msg + ": " + ec.message());
  };
  error_code ec;
  tcp::endpoint ep;
  asio::ip::address ip = asio::ip::make_address(host_port.first, ec);
  if (!ec) {
    ep = tcp::endpoint(ip, host_port.second);
  } else {
    tcp::resolver resolver(ioc_);
    auto results = resolver.resolve(host_port.first, std::to_string(host_port.second),
                                    tcp::resolver::passive, ec);
    if (ec) return fail("resolve", ec);
    if (results.empty()) return UnavailableError("listen on " + address + ": no address");
    ep = results.begin()->endpoint();
  }
  auto l = std::make_unique<Listener>(ioc_);
  l->acceptor.open(ep.protocol(), ec);
  if (ec) return fail("socket", ec);
  l->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (ep.address().is_v6()) l->acceptor.set_option(asio::ip::v6_only(true), ec);
  l->acceptor.bind(ep, ec);
  if (ec) return fail("bind", ec);
  l->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return fail("listen", ec);
  tcp::endpoint bound = l->acceptor.local_endpoint(ec);
  if (ec) return fail("local address", ec);
  endpoints->push_back(EndpointString(bound));
  listeners_.push_back(std::move(l));
  return Status::Ok();
}

void HttpServer::Impl::StartThreads() {
  work_.emplace(ioc_.get_executor());
  for (auto& l : listeners_) Accept(l.get());
  int workers = options_.worker_threads;
  if (workers <= 0)
    workers = std::max(4, 2 * static_cast<int>(std::thread::hardware_concurrency()));
  workers_.Start(workers, [this](int) {
    RunWorker();
    return Status::Ok();
  });
  for (int i = 0; i < std::max(1, options_.io_threads); ++i) {
    io_threads_.emplace_back([this] { RunIo(); });
  }
}

void HttpServer::Impl::Accept(Listener* l) {
  l->acceptor.async_accept(asio::make_strand(ioc_), [this, l](error_code ec, tcp::socket socket) {
    OnAccept(l, ec, std::move(socket));
  });
}

void HttpServer::Impl::OnAccept(Listener* l, error_code ec, tcp::socket socket) {
  if (stopping() || ec == asio::error::operation_aborted) return;
  if (ec) {
    // Out of descriptors or memory: wait instead of spinning on accept.
    l->retry.expires_after(kAcceptRetryDelay);
    l->retry.async_wait([this, l](error_code wait_ec) {
      if (!wait_ec && !stopping()) Accept(l);
    });
    return;
  }
  error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  tcp::endpoint remote = socket.remote_endpoint(ignored);
  std::shared_ptr<Session> session;
  {
    std::lock_guard lock(mu_);
    if (!stopping() && live_connections_ < options_.max_connections) {
      ++live_connections_;
      uint64_t id = next_session_id_++;
      session = std::make_shared<Session>(this, std::move(socket), id, EndpointString(remote));
      sessions_[id] = session;
    }
  }
  if (session) {
    accepted_++;
    session->Start();
  } else {
    refused_++;
    socket.close(ignored);
  }
  Accept(l);
}

template <typename F>
void HttpServer::Impl::ForEachSession(F f) {
  std::vector<std::shared_ptr<Session>> live;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, weak] : sessions_) {
      if (auto s = weak.lock()) live.push_back(std::move(s));
    }
  }
  for (auto& s : live) f(*s);
}

void HttpServer::Impl::Stop(std::chrono::milliseconds grace) {
  std::call_once(stop_once_, [&] {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    if (!work_) {  // never started
      std::lock_guard lock(mu_);
      stopped_ = true;
      stopped_cv_.notify_all();
      return;
    }
    for (auto& l : listeners_) {
      asio::post(l->acceptor.get_executor(), [l = l.get()] {
        error_code ignored;
        l->acceptor.close(ignored);
        l->retry.cancel();
      });
    }
    ForEachSession([](Session& s) { s.CloseIfIdle(); });
    {
      std::unique_lock lock(mu_);
      idle_cv_.wait_for(lock, grace, [&] { return in_flight_ == 0; });
    }
    ForEachSession([](Session& s) { s.CloseNow(); });
    jobs_.Close();                  // queued requests still run, against closed connections
    workers_.Wait().IgnoreError();  // workers return OK
    work_.reset();
    ioc_.stop();
    for (auto& t : io_threads_) t.join();
    io_threads_.clear();
    std::lock_guard lock(mu_);
    stopped_ = true;
    stopped_cv_.notify_all();
  });
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpServer::~HttpServer() { Stop(); }

Result<std::unique_ptr<HttpServer>> HttpServer::Start(const ServerOptions& options,
                                                      Handler handler) {
  auto impl = std::make_unique<Impl>(options, std::move(handler));
  std::vector<std::string> endpoints;
  CAIRN_RETURN_IF_ERROR(impl->Configure(&endpoints));
  impl->StartThreads();
  std::unique_ptr<HttpServer> server(new HttpServer(std::move(impl)));
  server->endpoints_ = std::move(endpoints);
  return server;
}

ServerStats HttpServer::stats() const { return impl_->stats(); }
void HttpServer::Stop(std::chrono::milliseconds grace) { impl_->Stop(grace); }
void HttpServer::Wait() { impl_->Wait(); }

bool DecodeRequestTarget(std::string_view target, std::string* path,
                         std::map<std::string, std::string>* query) {
  path->clear();
  query->clear();
  if (target.empty() || target.front() != '/') return false;
  size_t q = target.find('?');
  if (!PercentDecode(target.substr(0, q), false, path)) return false;
  if (q == std::string_view::npos) return true;
  std::string_view rest = target.substr(q + 1);
  std::string name, value;
  while (!rest.empty()) {
    size_t amp = rest.find('&');
    std::string_view pair = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    if (pair.empty()) continue;
    size_t eq = pair.find('=');
    std::string_view raw_value = eq == std::string_view::npos ? "" : pair.substr(eq + 1);
    if (!PercentDecode(pair.substr(0, eq), true, &name) ||
        !PercentDecode(raw_value, true, &value)) {
      return false;
    }
    (*query)[name] = value;
  }
  return true;
}

Result<std::pair<std::string, uint16_t>> ParseHostPort(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return InvalidArgumentError("address \"" + std::string(text) + "\": " + std::string(why) +
                                " (expected HOST:PORT or [IPV6]:PORT)");
  };
  std::string host;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return bad("unterminated or portless [IPv6] address");
    }
    host = std::string(text.substr(1, close - 1));
    port = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) return bad("no port");
    host = std::string(text.substr(0, colon));
    if (host.find(':') != std::string::npos) return bad("an IPv6 address needs [brackets]");
    port = text.substr(colon + 1);
  }
  if (host.empty()) return bad("no host");
  if (port.empty() || port.size() > 5) return bad("bad port");
  uint32_t value = 0;
  for (char c : port) {
    if (c < '0' || c > '9') return bad("bad port");
    value = value * 10 + static_cast<uint32_t>(c - '0');
  }
  if (value > 65535) return bad("port out of range");
  return std::make_pair(host, static_cast<uint16_t>(value));
}

}  // namespace cairn::net
