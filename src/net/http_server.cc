// HttpServer on Boost.Beast: listening, connection slots, admission, the
// worker pool and stopping (http_server_impl.h; one connection's life is
// in http_connection.cc).
#include "net/http_server_impl.h"

#include <fmt/format.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <boost/asio/ip/v6_only.hpp>
#include <exception>
#include <optional>

#include "base/mutex.h"
#include "base/text.h"

namespace cairn::net {
namespace {

constexpr auto kAcceptRetryDelay = std::chrono::milliseconds(100);
// How long Stop waits for closed connections to finish.
constexpr auto kMaxDrainTime = std::chrono::milliseconds(2000);

int WorkerCount(const ServerOptions& options) {
  if (options.worker_threads > 0) return options.worker_threads;
  return std::max(4, 2 * static_cast<int>(std::thread::hardware_concurrency()));
}

// Workers one tenant may hold at once.
int TenantWorkers(const ServerOptions& options) {
  if (options.tenant_workers > 0) return options.tenant_workers;
  return std::max(1, WorkerCount(options) / 2);
}

std::string EndpointString(const tcp::endpoint& ep) {
  std::string addr = ep.address().to_string();
  if (ep.address().is_v6()) addr = "[" + addr + "]";
  return addr + ":" + std::to_string(ep.port());
}

// Percent-decodes `in` into `out`; false on a broken escape or a NUL byte.
bool PercentDecodeInto(std::string_view in, bool plus_is_space, std::string* out) {
  std::optional<std::string> decoded = PercentDecode(in, plus_is_space);
  if (!decoded) return false;
  *out = std::move(*decoded);
  return true;
}

}  // namespace

HttpServer::Impl::Impl(const ServerOptions& options, Handler handler, Admitter admitter)
    : options_(options),
      handler_(std::move(handler)),
      admitter_(std::move(admitter)),
      ssl_ctx_(ssl::context::tls_server),
      jobs_(static_cast<size_t>(TenantWorkers(options))) {}

void HttpServer::Impl::Wait() {
  MutexLock lock(mu_);
  while (!stopped_) stopped_cv_.Wait(mu_);
}

ServerStats HttpServer::Impl::stats() const {
  ServerStats s;
  s.connections_accepted = accepted_.load();
  s.connections_refused = refused_.load();
  s.connections_evicted = evicted_.load();
  s.requests = requests_.load();
  s.bad_requests = bad_requests_.load();
  s.requests_refused = requests_refused_.load();
  MutexLock lock(mu_);
  s.connections_open = static_cast<uint64_t>(live_connections_);
  return s;
}

Admission HttpServer::Impl::Admit(const HttpRequest& header) {
  Admission a;
  if (admitter_) {
    try {
      a = admitter_(header);
    } catch (...) {
      a.status = 500;
      a.body = R"({"error": "internal error while admitting the request"})";
    }
  } else {
    a.max_body = options_.max_body_bytes;
    a.authenticated = true;  // no admitter: every client is as good as any
  }
  if (a.status != 0) return a;
  a.max_body = std::min(a.max_body, options_.max_body_bytes);
  MutexLock lock(mu_);
  int& n = per_tenant_[a.tenant];
  if (n >= options_.max_requests_per_tenant) {
    if (n == 0) per_tenant_.erase(a.tenant);
    Admission busy;
    busy.status = 429;
    busy.body = fmt::format(
        R"({{"error": "too many requests of this client in progress (at most {}): retry when one has finished"}})",
        options_.max_requests_per_tenant);
    busy.headers.emplace_back("Retry-After", "1");
    return busy;
  }
  ++n;
  return a;
}

void HttpServer::Impl::ReleaseTenant(const std::string& tenant) {
  MutexLock lock(mu_);
  auto it = per_tenant_.find(tenant);
  if (it != per_tenant_.end() && --it->second <= 0) per_tenant_.erase(it);
}

void HttpServer::Impl::MarkAuthenticated(uint64_t id) {
  MutexLock lock(mu_);
  unauthenticated_.erase(id);
}

void HttpServer::Impl::RequestDone() {
  MutexLock lock(mu_);
  if (--in_flight_ == 0) idle_cv_.NotifyAll();
}

void HttpServer::Impl::SessionGone(uint64_t id, const std::string& address, bool by_client) {
  // Before the count drops: Stop() waits for it, and the callback may
  // reach objects that live no longer than the server.
  if (options_.on_connection_closed) options_.on_connection_closed(id, by_client);
  MutexLock lock(mu_);
  sessions_.erase(id);
  unauthenticated_.erase(id);
  if (--live_connections_ == 0) idle_cv_.NotifyAll();
  auto it = per_address_.find(address);
  if (it != per_address_.end() && --it->second <= 0) per_address_.erase(it);
}

bool HttpServer::Impl::PushJob(const std::string& tenant, std::function<void()> job) {
  return jobs_.Push(tenant, std::move(job));
}

bool HttpServer::Impl::Dispatch(std::shared_ptr<Session> session, HttpRequest request,
                                bool keep_alive) {
  {
    MutexLock lock(mu_);
    ++in_flight_;
  }
  const std::string tenant = request.tenant;
  bool queued = jobs_.Push(tenant, [this, session, request = std::move(request), keep_alive]() mutable {
    // The handler's answer is written by the connection: the worker is
    // free as soon as the handler returns.
    class Writer final : public ResponseWriter {
     public:
      void Send(int status, std::string_view content_type, Bytes body,
                const Headers& headers) override {
        if (response_) return;
        response_ = Response{status, std::string(content_type), headers, std::move(body), {}};
      }
      void Stream(int status, std::string_view content_type, Producer next) override {
        if (response_) return;
        response_ = Response{status, std::string(content_type), {}, {}, std::move(next)};
      }
      bool responded() const override { return response_.has_value(); }
      std::optional<Response> response_;
    } writer;
    try {
      handler_(request, writer);
    } catch (...) {
      // Answered below, as a handler that did not respond.
    }
    if (!writer.responded()) writer.SendText(500, "internal error: the handler did not respond");
    session->Deliver(std::move(writer.response_), request.method == "HEAD",
                     keep_alive && !stopping());
    GiveBody(std::move(request.body));
  });
  if (!queued) RequestDone();
  return queued;
}

Bytes HttpServer::Impl::TakeBody(size_t length) {
  Bytes body;
  {
    MutexLock lock(bodies_mu_);
    // The smallest that holds `length`.
    auto best = spare_bodies_.end();
    for (auto it = spare_bodies_.begin(); it != spare_bodies_.end(); ++it) {
      if (it->capacity() >= length &&
          (best == spare_bodies_.end() || it->capacity() < best->capacity())) {
        best = it;
      }
    }
    if (best != spare_bodies_.end()) {
      body = std::move(*best);
      spare_bodies_.erase(best);
      return body;
    }
  }
  // None holds it: fresh memory, with room for the slightly larger bodies
  // that follow (upload batches vary by up to a chunk).
  // (A body too large to be kept gets exactly its length, from its reader.)
  if (length >= (size_t{1} << 20) && length <= kMaxSpareBody) {
    body.reserve(std::min(length + length / 2, kMaxSpareBody));
  }
  return body;
}

void HttpServer::Impl::GiveBody(Bytes body) {
  if (body.capacity() < (size_t{1} << 20) || body.capacity() > kMaxSpareBody) return;
  body.clear();
  MutexLock lock(bodies_mu_);
  if (spare_bodies_.size() < kSpareBodies) {
    spare_bodies_.push_back(std::move(body));
    return;
  }
  // Full: keep the larger ones.
  auto smallest = std::min_element(
      spare_bodies_.begin(), spare_bodies_.end(),
      [](const Bytes& a, const Bytes& b) { return a.capacity() < b.capacity(); });
  if (smallest->capacity() < body.capacity()) *smallest = std::move(body);
}

void HttpServer::Impl::RunWorker() {
  while (auto job = jobs_.Pop()) {
    job->second();
    jobs_.Done(job->first);
  }
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
  ConfigureDataPlaneContext(ctx);
  SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE);
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
  workers_.Start(WorkerCount(options_), [this](int) {
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

std::optional<uint64_t> HttpServer::Impl::TakeSlot(const std::string& address,
                                                   std::shared_ptr<Session>* evict) {
  MutexLock lock(mu_);
  if (stopping()) return std::nullopt;
  if (per_address_[address] >= options_.max_connections_per_address) {
    if (per_address_[address] == 0) per_address_.erase(address);
    return std::nullopt;
  }
  // At least half the slots stay open to newcomers, whatever the reserve.
  const int unauthenticated_slots =
      std::max({1, options_.max_connections / 2,
                options_.max_connections - std::max(0, options_.reserved_connections)});
  if (live_connections_ >= options_.max_connections ||
      static_cast<int>(unauthenticated_.size()) >= unauthenticated_slots) {
    // Full: the oldest connection that never authenticated makes room (a
    // socket left idle, a handshake never finished). Only when every
    // connection is an authenticated client's is the new one refused.
    while (!unauthenticated_.empty() && *evict == nullptr) {
      uint64_t oldest = *unauthenticated_.begin();
      unauthenticated_.erase(unauthenticated_.begin());
      auto it = sessions_.find(oldest);
      if (it != sessions_.end()) *evict = it->second.lock();
    }
    if (*evict == nullptr) {
      if (per_address_[address] == 0) per_address_.erase(address);
      return std::nullopt;
    }
  }
  ++live_connections_;
  ++per_address_[address];
  uint64_t id = next_session_id_++;
  unauthenticated_.insert(id);
  return id;
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
  asio::ip::address ip = remote.address();
  if (ip.is_v6() && ip.to_v6().is_v4_mapped()) {
    ip = asio::ip::make_address_v4(asio::ip::v4_mapped, ip.to_v6());
  }
  const std::string address = ip.to_string();
  std::shared_ptr<Session> evict;
  std::optional<uint64_t> id = TakeSlot(address, &evict);
  if (evict != nullptr) {
    evicted_++;
    evict->CloseNow();
  }
  if (id) {
    auto session =
        std::make_shared<Session>(this, std::move(socket), *id, EndpointString(remote), address);
    {
      MutexLock lock(mu_);
      sessions_[*id] = session;
    }
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
    MutexLock lock(mu_);
    for (auto& [id, weak] : sessions_) {
      if (auto s = weak.lock()) live.push_back(std::move(s));
    }
  }
  for (auto& s : live) f(*s);
}

void HttpServer::Impl::Stop(std::chrono::milliseconds grace) {
  std::call_once(stop_once_, [&] {
    {
      MutexLock lock(mu_);
      stopping_ = true;
    }
    if (!work_) {  // never started
      MutexLock lock(mu_);
      stopped_ = true;
      stopped_cv_.NotifyAll();
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
      const auto deadline = std::chrono::steady_clock::now() + grace;
      MutexLock lock(mu_);
      while (in_flight_ != 0 && idle_cv_.WaitUntil(mu_, deadline)) {
      }
    }
    ForEachSession([](Session& s) { s.CloseNow(); });
    jobs_.Close();                  // queued requests still run, against closed connections
    workers_.Wait().IgnoreError();  // workers return OK
    {
      // The closed connections finish on the I/O threads and let go of
      // what their responses held (a stream's producer and its state).
      const auto deadline = std::chrono::steady_clock::now() + kMaxDrainTime;
      MutexLock lock(mu_);
      while (live_connections_ != 0 && idle_cv_.WaitUntil(mu_, deadline)) {
      }
    }
    work_.reset();
    ioc_.stop();
    for (auto& t : io_threads_) t.join();
    io_threads_.clear();
    MutexLock lock(mu_);
    stopped_ = true;
    stopped_cv_.NotifyAll();
  });
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpServer::~HttpServer() { Stop(); }

Result<std::unique_ptr<HttpServer>> HttpServer::Start(const ServerOptions& options,
                                                      Handler handler, Admitter admitter) {
  auto impl = std::make_unique<Impl>(options, std::move(handler), std::move(admitter));
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
  if (!PercentDecodeInto(target.substr(0, q), false, path)) return false;
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
    if (!PercentDecodeInto(pair.substr(0, eq), true, &name) ||
        !PercentDecodeInto(raw_value, true, &value)) {
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
