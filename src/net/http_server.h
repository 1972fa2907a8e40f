// HttpServer: HTTP/1.1 over TLS for `cairn serve`, on Boost.Beast and Asio
// with OpenSSL (docs/ARCHITECTURE.md, "Server").
//
// Connections are served asynchronously on a few I/O threads. A request's
// header is read first (header_timeout) and shown to the Admitter, which
// authenticates it and says how large its body may be: a request that is
// refused, or whose body is over its route's limit, is answered before
// a byte of its body is read. The body is then read (request_timeout) and
// the request goes to a pool of worker threads, where the handler may block
// on its own work (file I/O, hashing) but never on the client: Send() hands
// the whole response to the connection, and a streamed response is pulled
// from a Producer, called on a worker only while the client keeps taking
// what was produced. A client that stops reading holds no worker; it is
// cut off after write_timeout.
//
// Fairness: workers take requests lane by lane (the Admitter names each
// request's tenant: its token), at most tenant_workers at a time per lane,
// and a tenant may have at most max_requests_per_tenant requests admitted
// and unfinished (more get 429). So one client's backlog never delays
// another's request by more than the work in progress.
//
// Connection slots: a TLS handshake must finish within handshake_timeout;
// one address holds at most max_connections_per_address connections; and
// connections that never sent an authenticated request may use at most
// max_connections - reserved_connections slots: past that, the oldest of
// them is closed to make room, so idle sockets cannot lock clients out.
//
// Robustness: a header over max_header_bytes gets 431, a body over its
// limit 413, a malformed request 400, each with a one-line text body and
// the connection closed; an idle keep-alive connection past idle_timeout is
// closed.
//
// Thread safety: Stop() and the accessors may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/bytes.h"
#include "base/read_buffer.h"
#include "base/status.h"

namespace cairn::net {

struct HttpRequest {
  std::string method;  // "GET", "PUT", …
  std::string target;  // as received: "/api/v1/x?y=z"
  std::string path;    // percent-decoded, without the query: "/api/v1/x"
  // Percent-decoded query parameters ("+" is a space); a repeated name
  // keeps its last value. A target that does not decode gets 400 before
  // any handler runs.
  std::map<std::string, std::string> query;
  std::map<std::string, std::string> headers;  // names lowercased
  Bytes body;               // empty when shown to the Admitter
  std::string peer;         // "127.0.0.1:41234", for logs
  std::string peer_address;  // "127.0.0.1", "::1": who, for limits per address
  std::string tenant;        // as the Admitter named it ("" for anonymous requests)
  // The connection it came on: unique for the server's life, never 0.
  // ServerOptions::on_connection_closed names it again when it closes.
  uint64_t connection = 0;
};

class ResponseWriter {
 public:
  using Headers = std::vector<std::pair<std::string, std::string>>;
  virtual ~ResponseWriter() = default;
  // The whole response. `headers` are added as given (no Content-Length or
  // Transfer-Encoding: those are the server's). The connection writes it
  // after the handler returns; the handler never waits for the client.
  virtual void Send(int status, std::string_view content_type, Bytes body,
                    const Headers& headers = {}) = 0;
  void Send(int status, std::string_view content_type, ByteSpan body, const Headers& headers = {}) {
    Send(status, content_type, Bytes(body.begin(), body.end()), headers);
  }
  void SendText(int status, std::string_view text) {
    Send(status, "text/plain; charset=utf-8", AsBytes(text));
  }
  // A streamed response (chunked transfer encoding), pulled from `next`:
  // called on a worker thread, one call at a time, whenever less than
  // kStreamWindow bytes wait behind the piece being written, until it sets
  // *done. Each call appends the next pieces to `out` (none is fine). An
  // error cuts the response off (the connection is closed). `next` is
  // destroyed, with what it holds, once the response is over or the
  // connection gone; it must not refer to the handler's stack.
  struct StreamPieces;
  using Producer = std::function<Status(StreamPieces* out, bool* done)>;
  static constexpr size_t kStreamWindow = 4 << 20;
  virtual void Stream(int status, std::string_view content_type, Producer next) = 0;
  // True once a response was given.
  virtual bool responded() const = 0;
};

// What a stream's producer appends to: pieces sent in order, each written
// from its own buffer (no copy). Buffers of pieces already sent come back
// through Next(), so a stream of 4 MiB chunks reuses a few buffers instead
// of faulting in fresh memory for each (base/read_buffer.h says why).
struct ResponseWriter::StreamPieces {
  // A buffer for a large piece: one of a piece already sent when there is
  // (its content is unspecified), else a new one. Give it back with Push.
  ReadBuffer Take() {
    if (spare.empty()) return ReadBuffer();
    ReadBuffer b = std::move(spare.back());
    spare.pop_back();
    return b;
  }
  // Appends `piece` as the next piece, sent from its own memory.
  void Push(ReadBuffer piece) { pieces.push_back(std::move(piece)); }
  // Appends `data` to the last piece when that is a small one, else as a
  // new small piece: frame headers and messages travel together, copied.
  void Append(ByteSpan data) {
    if (pieces.empty() || pieces.back().size() + data.size() > kSmallPiece) pieces.emplace_back();
    ReadBuffer& last = pieces.back();
    size_t at = last.size();
    last.Resize(at + data.size());
    if (!data.empty()) std::memcpy(last.data() + at, data.data(), data.size());
  }
  static constexpr size_t kSmallPiece = 64 << 10;
  std::vector<ReadBuffer> pieces;
  std::vector<ReadBuffer> spare;
};

// Runs on a worker thread. A handler that returns without responding gets a
// 500 sent for it; an exception it throws is caught and answered with 500.
using Handler = std::function<void(const HttpRequest&, ResponseWriter&)>;

// What the server does with a request whose header has arrived.
struct Admission {
  // 0: read the body (at most max_body bytes: more is 413) and handle the
  // request. Else answer this status with `body` and close the connection
  // without reading the body.
  int status = 0;
  std::string content_type = "application/json";
  std::string body;
  ResponseWriter::Headers headers;
  size_t max_body = 0;
  // Who the request is for (its token): its lane in the worker pool and
  // the key of max_requests_per_tenant.
  std::string tenant;
  // A client that proved who it is: its connection no longer counts
  // against the slots of unauthenticated ones.
  bool authenticated = false;
};
// Runs on an I/O thread for every request, with the header only (no body):
// must be quick (no disk I/O but a stat). Null: every request is admitted
// with max_body_bytes, anonymous.
using Admitter = std::function<Admission(const HttpRequest& header)>;

struct ServerOptions {
  // "HOST:PORT" each ("127.0.0.1:8007", "[::1]:8007", "0.0.0.0:0"; port 0
  // picks a free port: see HttpServer::endpoints()).
  std::vector<std::string> listen;
  std::string cert_file;  // PEM
  std::string key_file;   // PEM
  size_t max_header_bytes = 16 << 10;
  size_t max_body_bytes = 64 << 20;  // no route allows more
  int max_connections = 256;
  int max_connections_per_address = 64;
  // Slots only connections that sent an authenticated request may use (at
  // most half of max_connections).
  int reserved_connections = 16;
  std::chrono::milliseconds handshake_timeout{10'000};  // TCP accept to TLS done
  std::chrono::milliseconds header_timeout{10'000};     // first byte to end of header
  std::chrono::milliseconds request_timeout{60'000};    // the body of one request
  std::chrono::milliseconds idle_timeout{120'000};      // keep-alive wait for the next one
  std::chrono::milliseconds write_timeout{120'000};     // one piece of a response to be taken
  int io_threads = 2;
  int worker_threads = 0;  // 0: 2 per core, at least 4
  // Per tenant (Admission::tenant): requests admitted and not finished, and
  // workers held at once (0: half the workers, at least 1).
  int max_requests_per_tenant = 64;
  int tenant_workers = 0;
  // Called once per connection when it is gone (after its last request's
  // handler returned): `by_client` is false when the server closed it for
  // idleness (idle_timeout and the other deadlines), true otherwise (the
  // client closed or reset it, or its process died). A backup session
  // bound to connections uses it to learn that its client is gone
  // (server/backup_session.h). Any thread; must not block.
  std::function<void(uint64_t connection, bool by_client)> on_connection_closed;
};

struct ServerStats {
  uint64_t connections_accepted = 0;
  uint64_t connections_refused = 0;  // over max_connections or per address
  uint64_t connections_evicted = 0;  // unauthenticated, closed to make room
  uint64_t connections_open = 0;     // now
  uint64_t requests = 0;
  uint64_t bad_requests = 0;  // 400, 413, 431 and timeouts
  uint64_t requests_refused = 0;  // by the Admitter, or over a tenant's limit
};

class HttpServer {
 public:
  // Binds every address (an error names the one that failed), loads the
  // certificate and key, starts the threads and returns; serving has begun.
  static Result<std::unique_ptr<HttpServer>> Start(const ServerOptions& options, Handler handler,
                                                   Admitter admitter = nullptr);
  // Stop() if still running.
  ~HttpServer();

  // The bound addresses, with the real port: "127.0.0.1:41234".
  const std::vector<std::string>& endpoints() const { return endpoints_; }
  ServerStats stats() const;

  // Graceful: stops accepting, lets requests in progress finish for up to
  // `grace`, then closes every connection and joins the threads. Idempotent.
  // Idle keep-alive connections are closed at once. A handler still running
  // after `grace` sees its writes fail; Stop() waits for it to return.
  // REQUIRES: not called from a handler (it joins the worker threads).
  void Stop(std::chrono::milliseconds grace = std::chrono::milliseconds(10'000));
  // Blocks until Stop() has finished (from another thread or a signal).
  void Wait();

  class Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  std::vector<std::string> endpoints_;
};

// Splits a request target ("/api/v1/x?a=1&b=%2F") into its percent-decoded
// path and query parameters ("+" is a space in the query; a repeated name
// keeps its last value), as the server does before any handler runs. False
// (400) when the target is not in origin form ("/…"), has a broken "%"
// escape, or decodes to a NUL byte. Exposed for tests and fuzzing.
bool DecodeRequestTarget(std::string_view target, std::string* path,
                         std::map<std::string, std::string>* query);

// Splits "HOST:PORT" / "[V6]:PORT". InvalidArgument on anything else.
Result<std::pair<std::string, uint16_t>> ParseHostPort(std::string_view text);

}  // namespace cairn::net
