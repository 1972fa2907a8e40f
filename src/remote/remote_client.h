// RemoteClient: the client side of a cairn server (docs/SERVER.md): the URL
// of a remote datastore, a pool of keep-alive TLS connections, and calls
// with retries.
//
// A call that fails in transport (net::HttpConnection's Unavailable) is
// retried on a fresh connection with backoff (0.1 s, 0.4 s, 1.6 s, then
// every 1.6 s for as long as the reconnect window lasts: SetReconnectWindow;
// restore and verify set one, so that they ride out a server restart); an HTTP
// error answer is never retried except 503 and 429 (the token has too many
// requests in progress). HTTP errors map to Status codes (401
// Unauthenticated, 403 PermissionDenied, 404 NotFound, 400 InvalidArgument,
// 423 Aborted (locked by another operation), 429 and 5xx Unavailable) with
// the server's message and the URL.
//
// A server keeps a reader's session in memory (the chunks its indexes grant:
// server/read_grants.h); after a restart it has forgotten it. The opener of
// a read session (remote_repo.h's MirrorEnv) registers how to re-establish
// it (SetSessionRestorer); a reader that is refused a chunk it had been
// granted calls RestoreSession once and asks again.
//
// Thread safety: all methods may be called concurrently.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/bytes.h"
#include "base/mutex.h"
#include "base/rate_limiter.h"
#include "base/status.h"
#include "net/http_client.h"
#include "protocol/routes.h"

namespace cairn::remote {

struct RemoteUrl {
  std::string host;
  uint16_t port = 8007;
  std::string store;
  std::string ToString() const;  // "https://host:port/store"
};

// "https://HOST[:PORT]/STORE" (IPv6 in brackets). InvalidArgument otherwise.
Result<RemoteUrl> ParseRemoteUrl(std::string_view text);
bool IsRemoteUrl(std::string_view text);  // starts with https:// (or http://)

// How a client proves who it is and whom it trusts. Filled from flags and
// the environment by the CLI (cli/cli_util.cc).
struct Credentials {
  std::string token;        // NAME:SECRET (--token, CAIRN_TOKEN)
  std::string fingerprint;  // --fingerprint, CAIRN_FINGERPRINT, or the trusted-servers file
};

// The trusted-servers file: lines "HOST:PORT FINGERPRINT", '#' comments.
// Default path: $CAIRN_TRUSTED_SERVERS, else $XDG_CONFIG_HOME/cairn/servers
// (~/.config/cairn/servers).
std::string TrustedServersPath();
// The fingerprint trusted for host:port there, or "" when none.
Result<std::string> LookupTrustedFingerprint(const std::string& path, const std::string& host,
                                             uint16_t port);

// Bandwidth caps shared by every connection of a run (and by every client
// given the same limiters): request bodies are charged to `upload` before
// they are sent, response bodies to `download` as they arrive. Null: no
// limit. Headers and TLS framing (a few hundred bytes a request) are not
// counted.
struct TransferLimits {
  std::shared_ptr<RateLimiter> upload;
  std::shared_ptr<RateLimiter> download;
};

class RemoteClient {
 public:
  RemoteClient(RemoteUrl url, Credentials credentials, TransferLimits limits = {});
  ~RemoteClient();

  const RemoteUrl& url() const { return url_; }

  // Checks that the server answers and that the token may use the store:
  // a clear error for an untrusted certificate, a bad token or store.
  Status Check();

  // A call returning the whole body. `path` starts with "/api/v1/".
  Result<Bytes> Call(std::string_view method, const std::string& path, ByteSpan body = {});
  // A call whose body streams to `on_data`. An error after data was
  // delivered is not retried (the caller decides).
  Status CallStreaming(std::string_view method, const std::string& path, ByteSpan body,
                       const std::function<Status(ByteSpan)>& on_data);

  // A call whose answer comes back whatever its status (transport
  // failures, 429 and 503 are retried as by Call): for routes whose error
  // answers carry more than a message (409 with a running task's id).
  Result<net::HttpResponse> CallRaw(std::string_view method, const std::string& path,
                                    ByteSpan body = {});

  // "/api/v1/stores/STORE" + suffix.
  std::string StorePath(std::string_view suffix) const;

  // The pool, for callers that run a request themselves (the chunk source
  // reads each answer into the pipeline's buffers): an idle connection or
  // a new one; Release() returns a connection still open and between
  // requests.
  Result<std::unique_ptr<net::HttpConnection>> Acquire();
  void Release(std::unique_ptr<net::HttpConnection> connection);
  // The Status for an error answer, with the server's message and the URL.
  Status ErrorFor(const net::HttpResponse& response, std::string_view method,
                  std::string_view path) const;

  // Charges bytes to the run's limits (TransferLimits; waits while over
  // them). Call and CallStreaming charge their own bodies; a caller that
  // runs a request on an Acquire()d connection charges what it sends and
  // receives itself (the chunk source, the speed test).
  void ChargeUpload(ByteSpan body) const;
  void ChargeDownload(size_t bytes) const;

  // Transport failures are retried for at least `window` after a call's
  // first try (and always 3 times): zero (the default) keeps the 3 retries
  // only. Set before the first call.
  void SetReconnectWindow(std::chrono::milliseconds window) { window_ = window; }
  std::chrono::milliseconds reconnect_window() const { return window_; }
  // Whether a request that failed in transport `attempts` times, the first
  // at `since`, is tried again (the caller backs off by RetryBackoff first).
  bool KeepTrying(int attempts, std::chrono::steady_clock::time_point since) const;
  static std::chrono::milliseconds RetryBackoff(int attempts);
  // The error of a request given up after `attempts` tries since `since`:
  // `last`, saying what was tried.
  Status GaveUp(const Status& last, int attempts,
                std::chrono::steady_clock::time_point since) const;

  // How to re-establish this client's read session on a server that
  // restarted (re-grant the indexes read). Set once, before reads start.
  void SetSessionRestorer(std::function<Status()> restore);
  // Counts RestoreSession calls that ran the restorer.
  uint64_t session_generation() const { return generation_.load(); }
  // Runs the restorer unless another caller did since `seen_generation`
  // (what session_generation() said before the refused request). OK when
  // no restorer is set.
  Status RestoreSession(uint64_t seen_generation);

 private:

  RemoteUrl url_;
  net::ClientOptions options_;
  TransferLimits limits_;
  Mutex mu_;
  std::vector<std::unique_ptr<net::HttpConnection>> idle_ GUARDED_BY(mu_);
  std::chrono::milliseconds window_{0};
  Mutex session_mu_;  // one RestoreSession at a time
  std::function<Status()> restore_session_ GUARDED_BY(session_mu_);
  std::atomic<uint64_t> generation_{0};
};

// Percent-encoded query string "?a=x&b=y" (protocol/routes.h).
using protocol::QueryString;

}  // namespace cairn::remote
