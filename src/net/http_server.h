// HttpServer: HTTP/1.1 over TLS for `cairn serve`, on Boost.Beast and Asio
// with OpenSSL (docs/ARCHITECTURE.md, "Server").
//
// Connections are served asynchronously on a few I/O threads; each request,
// once its header and body are read (both size-limited), goes to a pool of
// worker threads, where the handler may block (file I/O, hashing). A
// handler answers once with Send(), or streams a body with BeginStream() /
// Write() / End() (chunked transfer encoding): Write() blocks the worker
// until the connection took the bytes, so a slow client slows only its own
// request, and fails when the client is gone.
//
// Robustness: a header over max_header_bytes gets 431, a body over
// max_body_bytes 413, a malformed request 400, each with a one-line text
// body and the connection closed; a request that does not arrive within
// request_timeout (slowloris) and an idle keep-alive connection past
// idle_timeout are closed; past max_connections new connections are
// accepted and closed at once (they are counted, not queued).
//
// Thread safety: Stop() and the accessors may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/bytes.h"
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
  Bytes body;
  std::string peer;  // "127.0.0.1:41234", for logs
};

class ResponseWriter {
 public:
  virtual ~ResponseWriter() = default;
  // The whole response. `headers` are added as given (no Content-Length or
  // Transfer-Encoding: those are the server's).
  virtual void Send(int status, std::string_view content_type, ByteSpan body,
                    const std::vector<std::pair<std::string, std::string>>& headers = {}) = 0;
  void SendText(int status, std::string_view text) {
    Send(status, "text/plain; charset=utf-8", AsBytes(text));
  }
  // A streamed response: BeginStream once, Write any number of times, End.
  // After an error from any of them the connection is closed; the handler
  // should stop and return.
  virtual Status BeginStream(int status, std::string_view content_type) = 0;
  virtual Status Write(ByteSpan data) = 0;
  virtual Status End() = 0;
  // True once a response (whole or begun) was sent.
  virtual bool responded() const = 0;
};

// Runs on a worker thread. A handler that returns without responding gets a
// 500 sent for it; an exception it throws is caught and answered with 500.
using Handler = std::function<void(const HttpRequest&, ResponseWriter&)>;

struct ServerOptions {
  // "HOST:PORT" each ("127.0.0.1:8007", "[::1]:8007", "0.0.0.0:0"; port 0
  // picks a free port: see HttpServer::endpoints()).
  std::vector<std::string> listen;
  std::string cert_file;  // PEM
  std::string key_file;   // PEM
  size_t max_header_bytes = 16 << 10;
  size_t max_body_bytes = 64 << 20;
  int max_connections = 256;
  std::chrono::milliseconds request_timeout{60'000};  // header + body of one request
  std::chrono::milliseconds idle_timeout{120'000};    // keep-alive wait for the next one
  std::chrono::milliseconds write_timeout{120'000};   // one Write() / Send() to complete
  int io_threads = 2;
  int worker_threads = 0;  // 0: 2 per core, at least 4
};

struct ServerStats {
  uint64_t connections_accepted = 0;
  uint64_t connections_refused = 0;  // over max_connections
  uint64_t requests = 0;
  uint64_t bad_requests = 0;  // 400, 413, 431 and timeouts
};

class HttpServer {
 public:
  // Binds every address (an error names the one that failed), loads the
  // certificate and key, starts the threads and returns; serving has begun.
  static Result<std::unique_ptr<HttpServer>> Start(const ServerOptions& options, Handler handler);
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
