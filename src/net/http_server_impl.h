// The insides of net::HttpServer (http_server.h), shared by the server's
// two files: http_server.cc (listening, connection slots, admission, the
// worker pool, stopping) and http_connection.cc (one connection: reading
// requests, writing responses). Not part of the interface.
//
// A connection's life, all on its strand:
//   handshake (handshake_timeout) → header (header_timeout) → Admit → body
//   (request_timeout) → dispatch to a worker → the handler returns its
//   Response → written by the strand (write_timeout per piece; a stream's
//   next piece is produced on a worker when the client has taken enough)
//   → done → wait for the next request (idle_timeout until its first byte)
//   or shut down.
// Only one request per connection is in flight, so a connection never has a
// read and a write pending at once, and one deadline serves both. The
// deadline is a time, not a timer per operation: moving it later costs
// nothing, and the one timer, armed at the earliest deadline it may have to
// enforce, looks at the current deadline when it fires (re-arming for a
// later one), so a 4 MiB chunk written in slices arms no timer at all.
#pragma once

// g++ 12 warns that TSan does not model Asio's atomic_thread_fence
// (-Wtsan, an error under -Werror in the tsan preset). Asio's fences only
// back up its mutexes, which TSan does see; silence it for these files.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#pragma GCC diagnostic ignored "-Wtsan"
#endif

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "net/byte_body.h"
#include "net/http_server.h"
#include "net/tls_stream.h"
#include "pipeline/fair_queue.h"
#include "pipeline/worker_group.h"

namespace cairn::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using error_code = beast::error_code;

using Stream = TlsStream;
using RequestParser = http::request_parser<ByteBody>;

// What a handler answered: a whole body, or a producer of a stream.
struct Response {
  int status = 500;
  std::string content_type;
  ResponseWriter::Headers headers;
  Bytes body;
  ResponseWriter::Producer producer;  // set: a streamed response
};

class Session;

class HttpServer::Impl {
 public:
  Impl(const ServerOptions& options, Handler handler, Admitter admitter);
  ~Impl() { Stop(std::chrono::milliseconds(0)); }

  Status Configure(std::vector<std::string>* endpoints);
  void StartThreads();
  void Stop(std::chrono::milliseconds grace);
  void Wait();
  ServerStats stats() const;

  // For sessions (any thread).
  const ServerOptions& options() const { return options_; }
  bool stopping() const { return stopping_.load(); }
  void CountRequest() { requests_++; }
  void CountBadRequest() { bad_requests_++; }
  void CountRefused() { requests_refused_++; }
  // The Admitter's answer for `header`, and the tenant's slot: a request
  // over max_requests_per_tenant gets 429. An admitted request holds its
  // tenant's slot until ReleaseTenant.
  Admission Admit(const HttpRequest& header);
  void ReleaseTenant(const std::string& tenant);
  // The connection `id` sent an authenticated request: it leaves the pool
  // of unauthenticated connections.
  void MarkAuthenticated(uint64_t id);
  // Runs the handler on a worker and hands its Response to the session;
  // false when the server is stopping.
  bool Dispatch(std::shared_ptr<Session> session, HttpRequest request, bool keep_alive);
  // Runs `job` on a worker in `tenant`'s lane; false when stopping.
  bool PushJob(const std::string& tenant, std::function<void()> job);
  // Memory for a request body of `length` bytes (empty, its capacity at
  // least `length` where one is kept), and a spent body's memory back.
  // A batch of uploaded chunks is one request of many, on any of a
  // backup's connections; a fresh multi-megabyte body per request cost a
  // page fault per 4 KiB (two thirds of the server's page faults during a
  // backup through it). At most kSpareBodies of 1 to kMaxSpareBody bytes
  // are kept. Any thread.
  Bytes TakeBody(size_t length);
  void GiveBody(Bytes body);
  static constexpr size_t kSpareBodies = 4;
  static constexpr size_t kMaxSpareBody = size_t{32} << 20;
  void RequestDone();
  void SessionGone(uint64_t id, const std::string& address, bool by_client);
  ssl::context& ssl_ctx() { return ssl_ctx_; }
  const Handler& handler() const { return handler_; }

 private:
  struct Listener {
    explicit Listener(asio::io_context& ioc)
        : acceptor(asio::make_strand(ioc)), retry(acceptor.get_executor()) {}
    tcp::acceptor acceptor;
    asio::steady_timer retry;
  };

  Status Listen(const std::string& address, std::vector<std::string>* endpoints);
  void Accept(Listener* l);
  void OnAccept(Listener* l, error_code ec, tcp::socket socket);
  // Takes a slot for a new connection from `address`: a session id, or
  // nullopt when none is free. `evict` is set to the oldest
  // unauthenticated connection when it must make room.
  std::optional<uint64_t> TakeSlot(const std::string& address, std::shared_ptr<Session>* evict);
  void RunIo();
  void RunWorker();
  template <typename F>
  void ForEachSession(F f);

  const ServerOptions options_;
  const Handler handler_;
  const Admitter admitter_;
  ssl::context ssl_ctx_;

  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> accepted_{0};
  std::atomic<uint64_t> refused_{0};
  std::atomic<uint64_t> evicted_{0};
  std::atomic<uint64_t> requests_{0};
  std::atomic<uint64_t> bad_requests_{0};
  std::atomic<uint64_t> requests_refused_{0};

  mutable Mutex mu_;
  CondVar idle_cv_;  // in_flight_ or live_connections_ reached 0
  CondVar stopped_cv_;  // stopped_ set
  int live_connections_ GUARDED_BY(mu_) = 0;
  int in_flight_ GUARDED_BY(mu_) = 0;
  uint64_t next_session_id_ GUARDED_BY(mu_) = 0;
  std::map<uint64_t, std::weak_ptr<Session>> sessions_ GUARDED_BY(mu_);
  std::set<uint64_t> unauthenticated_ GUARDED_BY(mu_);  // oldest first
  std::map<std::string, int> per_address_ GUARDED_BY(mu_);
  std::map<std::string, int> per_tenant_ GUARDED_BY(mu_);
  bool stopped_ GUARDED_BY(mu_) = false;
  std::once_flag stop_once_;

  Mutex bodies_mu_;
  std::vector<Bytes> spare_bodies_ GUARDED_BY(bodies_mu_);

  pipeline::FairQueue<std::function<void()>> jobs_;
  pipeline::WorkerGroup workers_;

  // Destroyed before the members above: pending handlers own sessions,
  // which reach back into this object when they go.
  asio::io_context ioc_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::vector<std::unique_ptr<Listener>> listeners_;
  std::vector<std::jthread> io_threads_;
};

// One TLS connection. Everything but Deliver runs on the connection's
// strand.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(HttpServer::Impl* server, tcp::socket socket, uint64_t id, std::string peer,
          std::string address);
  ~Session() { server_->SessionGone(id_, address_, !timed_out_); }

  void Start();
  // Stop: connections waiting for a request close now; one whose request
  // is with a handler closes after its response.
  void CloseIfIdle();
  void CloseNow();
  // From a worker: the handler's answer to the current request (or nullopt
  // when the server stops before it ran), written by the strand.
  void Deliver(std::optional<Response> response, bool head, bool keep_alive);

 private:
  using Clock = std::chrono::steady_clock;
  // The connection's deadline (see the top of this file): past it, the
  // socket is closed and the operation in flight fails (timed_out_ set).
  void SetDeadline(std::chrono::milliseconds d);
  void ClearDeadline() { deadline_ = Clock::time_point::max(); }
  void ArmTimer(Clock::time_point at);
  void OnTimer(uint64_t generation);

  void OnHandshake(error_code ec);
  void ReadNextRequest();
  void StartHeader();
  void OnHeader(error_code ec);
  void OnBody(error_code ec);
  // Maps a read error to its answer (431, 413, 400) or a silent close.
  void FailRead(error_code ec);
  void StartResponse(Response response, bool head);
  void PumpStream();
  void Produce();
  // The current request is over: its tenant slot and in-flight count are
  // released. False when there was none.
  bool ReleaseRequest();
  // The same, then the next request (`reusable`: the response went out
  // whole on a keep-alive connection) or the end of the connection.
  void FinishRequest(bool reusable);
  void Reject(int status, std::string_view text);
  void RejectWith(const Admission& a);
  void WriteAndLinger(std::shared_ptr<http::response<http::string_body>> res);
  void LingerClose();
  void DrainSome(size_t budget);
  void Shutdown();
  void Abort();

  HttpServer::Impl* const server_;
  const ServerOptions& options_;
  Stream stream_;
  const uint64_t id_;
  const std::string peer_;
  const std::string address_;
  asio::steady_timer timer_;
  Clock::time_point deadline_ = Clock::time_point::max();
  Clock::time_point armed_ = Clock::time_point::max();  // when timer_ fires
  uint64_t timer_generation_ = 0;
  bool timed_out_ = false;
  beast::flat_buffer buffer_;
  // Buffers of written stream pieces, for the next pieces of this and later
  // answers on the connection (a batched download is one request of many on
  // a keep-alive connection): a fresh multi-megabyte buffer per chunk costs
  // the kernel's zeroing of its pages every time. At most kSpareBuffers;
  // freed with the connection. Used on the strand only.
  std::vector<ReadBuffer> spare_;
  std::optional<RequestParser> parser_;
  HttpRequest request_;  // the one being read
  bool keep_alive_ = false;
  bool handling_ = false;    // a request was admitted and is not finished
  bool dispatched_ = false;  // … and handed to a worker (counted in flight)
  bool closed_ = false;
  std::string tenant_;  // of the current request; its slot is held while handling_
  bool tenant_held_ = false;

  // The response being written.
  struct Out;
  std::shared_ptr<Out> out_;
};

}  // namespace cairn::net
