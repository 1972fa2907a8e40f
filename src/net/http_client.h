// HttpConnection: one keep-alive HTTP/1.1 connection over TLS to a cairn
// server, with the server's certificate pinned by fingerprint (net/tls.h).
// Pools, retries and the choice of how many connections are the callers'
// (remote/): a connection is a plain blocking object.
//
// The data plane (docs/ARCHITECTURE.md): a blocking socket whose timeouts
// are the socket's own (SO_RCVTIMEO/SO_SNDTIMEO: no timer is armed per
// operation, no event loop spins), TLS through net::TlsEngine, so that a
// request body goes out encrypted in slices of 1 MiB per send() and the
// answer comes in up to 1 MiB per recv(); Send() + ReadBody() hand the body
// to the caller's memory directly (a chunk lands in the pipeline's buffer).
//
// Errors:
//   - Unavailable: connect, TLS or transport failure, a timeout, or the
//     server closed the connection. The connection is then closed
//     (open() is false); the request may be retried on a new one.
//   - PermissionDenied: the server's certificate does not match the pinned
//     fingerprint. The message shows both fingerprints and how to trust
//     the server (--fingerprint / CAIRN_FINGERPRINT).
//   - An HTTP error status is not an error here: the response carries it.
//
// Thread safety: none; one thread uses a connection at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "base/bytes.h"
#include "base/status.h"

namespace cairn::net {

struct ClientOptions {
  std::string host;
  uint16_t port = 8007;
  // Display form of the pinned fingerprint (NormalizeFingerprint). Empty
  // refuses every server, with its fingerprint in the message.
  std::string fingerprint;
  // Sent as the Authorization header on every request when not empty
  // ("Bearer NAME:SECRET").
  std::string authorization;
  std::chrono::milliseconds connect_timeout{10'000};
  // Any single read or write: a peer that sends or takes nothing for this
  // long is given up (the socket's own timeouts).
  std::chrono::milliseconds io_timeout{60'000};
};

struct HttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lowercased
  Bytes body;  // RequestStreaming: only for a status other than 2xx
};

class HttpConnection {
 public:
  static Result<std::unique_ptr<HttpConnection>> Connect(const ClientOptions& options);
  ~HttpConnection();

  Result<HttpResponse> Request(std::string_view method, std::string_view target,
                               ByteSpan body = {},
                               std::string_view content_type = "application/octet-stream");
  // As Request(), but for a 2xx status the body goes to `on_data` in pieces
  // as it arrives (chunked or with a length); any other status's body (an
  // error message) is collected into the response's body instead. An error
  // from on_data aborts: the connection is closed and that error returned.
  Result<HttpResponse> RequestStreaming(std::string_view method, std::string_view target,
                                        ByteSpan body,
                                        const std::function<Status(ByteSpan)>& on_data,
                                        std::string_view content_type = "application/octet-stream");
  bool open() const;

  // The two halves of a request, for callers that read the body into their
  // own memory: Send() writes the request (its body the concatenation of
  // `body`, encrypted and sent in large slices) and reads the response's
  // status and headers; ReadBody() then yields the body (*got = 0 at its
  // end). Every byte of the body must be read before the next Send() on a
  // keep-alive connection; Close() abandons it.
  Result<HttpResponse> Send(std::string_view method, std::string_view target,
                            std::span<const ByteSpan> body = {},
                            std::string_view content_type = "application/octet-stream");
  Status ReadBody(uint8_t* dest, size_t n, size_t* got);
  // Exactly n bytes of the body; Unavailable (naming `what`) when it ends first.
  Status ReadBodyExactly(uint8_t* dest, size_t n, std::string_view what);
  void Close();

  class Impl;

 private:
  explicit HttpConnection(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Connects without checking the certificate and returns its fingerprint in
// display form (for the "unknown server" message and `cairn cert show`
// against a running server).
Result<std::string> FetchServerFingerprint(const std::string& host, uint16_t port,
                                           std::chrono::milliseconds timeout);

// Percent-encodes a path segment or query value (unreserved characters kept).
std::string UrlEncode(std::string_view text);

}  // namespace cairn::net
