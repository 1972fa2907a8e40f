#include "remote/remote_client.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "net/tls.h"
#include "protocol/messages.h"

namespace cairn::remote {
namespace {

constexpr int kAttempts = 4;  // one try and three retries
constexpr size_t kMaxIdle = 64;

std::chrono::milliseconds Backoff(int attempt) {
  return RemoteClient::RetryBackoff(attempt + 1);
}

bool Retryable(const Status& s) { return s.code() == StatusCode::kUnavailable; }

}  // namespace

std::string RemoteUrl::ToString() const {
  bool v6 = host.find(':') != std::string::npos;
  return fmt::format("https://{}{}{}:{}/{}", v6 ? "[" : "", host, v6 ? "]" : "", port, store);
}

bool IsRemoteUrl(std::string_view text) {
  return text.starts_with("https://") || text.starts_with("http://");
}

Result<RemoteUrl> ParseRemoteUrl(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return InvalidArgumentError(
        fmt::format("repository '{}': {} (expected https://HOST[:PORT]/STORE)", text, why));
  };
  if (text.starts_with("http://")) return bad("plain HTTP is not supported; use https://");
  if (!text.starts_with("https://")) return bad("not an https:// URL");
  std::string_view rest = text.substr(8);
  size_t slash = rest.find('/');
  if (slash == std::string_view::npos) return bad("no datastore name after the host");
  std::string_view authority = rest.substr(0, slash);
  std::string_view store = rest.substr(slash + 1);
  while (!store.empty() && store.back() == '/') store.remove_suffix(1);
  if (store.empty() || store.find('/') != std::string_view::npos) {
    return bad("the path must be exactly one datastore name");
  }
  RemoteUrl url;
  url.store = std::string(store);
  std::string_view host = authority, port;
  if (authority.starts_with("[")) {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) return bad("unclosed '[' in the host");
    host = authority.substr(1, close - 1);
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return bad("junk after the IPv6 address");
      port = after.substr(1);
    }
  } else if (size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
  }
  if (host.empty()) return bad("no host");
  url.host = std::string(host);
  if (!port.empty()) {
    int value = 0;
    for (char c : port) {
      if (c < '0' || c > '9' || value > 65535) return bad("the port is not a number");
      value = value * 10 + (c - '0');
    }
    if (value < 1 || value > 65535) return bad("the port is out of range");
    url.port = static_cast<uint16_t>(value);
  }
  return url;
}

std::string TrustedServersPath() {
  if (const char* p = std::getenv("CAIRN_TRUSTED_SERVERS"); p != nullptr && *p) return p;
  if (const char* x = std::getenv("XDG_CONFIG_HOME"); x != nullptr && *x) {
    return std::string(x) + "/cairn/servers";
  }
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : "/root") + "/.config/cairn/servers";
}

Result<std::string> LookupTrustedFingerprint(const std::string& path, const std::string& host,
                                             uint16_t port) {
  std::ifstream in(path);
  if (!in) return std::string();
  std::string want = fmt::format("{}:{}", host, port);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    std::istringstream fields(line);
    std::string server, fingerprint;
    if (!(fields >> server) || server[0] == '#') continue;
    if (!(fields >> fingerprint)) {
      return InvalidArgumentError(
          fmt::format("{} line {}: expected 'HOST:PORT FINGERPRINT'", path, number));
    }
    if (server != want) continue;
    auto normal = net::NormalizeFingerprint(fingerprint);
    if (!normal.ok()) return normal.status().WithContext(fmt::format("{} line {}", path, number));
    return *normal;
  }
  return std::string();
}

RemoteClient::RemoteClient(RemoteUrl url, Credentials credentials, TransferLimits limits)
    : url_(std::move(url)), limits_(std::move(limits)) {
  options_.host = url_.host;
  options_.port = url_.port;
  options_.fingerprint = credentials.fingerprint;
  if (!credentials.token.empty()) options_.authorization = "Bearer " + credentials.token;
}

RemoteClient::~RemoteClient() = default;

void RemoteClient::ChargeUpload(ByteSpan body) const {
  if (limits_.upload) limits_.upload->Acquire(body.size());
}

void RemoteClient::ChargeDownload(size_t bytes) const {
  if (limits_.download) limits_.download->Acquire(bytes);
}

std::string RemoteClient::StorePath(std::string_view suffix) const {
  return protocol::StorePath(url_.store, suffix);
}

Result<std::unique_ptr<net::HttpConnection>> RemoteClient::Acquire() {
  {
    MutexLock lock(mu_);
    while (!idle_.empty()) {
      auto c = std::move(idle_.back());
      idle_.pop_back();
      if (c->open()) return c;
    }
  }
  auto c = net::HttpConnection::Connect(options_);
  if (!c.ok()) return c.status().WithContext(url_.ToString());
  return std::move(*c);
}

void RemoteClient::Release(std::unique_ptr<net::HttpConnection> connection) {
  if (!connection || !connection->open()) return;
  MutexLock lock(mu_);
  if (idle_.size() < kMaxIdle) idle_.push_back(std::move(connection));
}

Status RemoteClient::ErrorFor(const net::HttpResponse& response, std::string_view method,
                              std::string_view path) const {
  return protocol::StatusForHttp(
      response.status, fmt::format("server {} answered {} {} with {}: {}", url_.ToString(), method,
                                   path, response.status, protocol::ErrorMessageOf(response.body)));
}

Result<net::HttpResponse> RemoteClient::CallRaw(std::string_view method, const std::string& path,
                                                ByteSpan body) {
  Status last;
  const auto since = std::chrono::steady_clock::now();
  int attempt = 0;
  for (; attempt == 0 || KeepTrying(attempt, since); ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(Backoff(attempt - 1));
    auto c = Acquire();
    if (!c.ok()) {
      if (!Retryable(c.status())) return c.status();
      last = c.status();
      continue;
    }
    ChargeUpload(body);
    auto response = (*c)->Request(method, path, body);
    if (response.ok()) ChargeDownload(response->body.size());
    if (!response.ok()) {
      last = response.status();
      if (!Retryable(last)) return last;
      continue;
    }
    Release(std::move(*c));
    if (!protocol::RetriedStatus(response->status)) return response;
    last = ErrorFor(*response, method, path);
  }
  return GaveUp(last, attempt, since);
}

Result<Bytes> RemoteClient::Call(std::string_view method, const std::string& path,
                                 ByteSpan body) {
  CAIRN_ASSIGN_OR_RETURN(net::HttpResponse response, CallRaw(method, path, body));
  if (response.status / 100 == 2) return std::move(response.body);
  return ErrorFor(response, method, path);
}

Status RemoteClient::CallStreaming(std::string_view method, const std::string& path,
                                   ByteSpan body,
                                   const std::function<Status(ByteSpan)>& on_data) {
  Status last;
  const auto since = std::chrono::steady_clock::now();
  int attempt = 0;
  for (; attempt == 0 || KeepTrying(attempt, since); ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(Backoff(attempt - 1));
    auto c = Acquire();
    if (!c.ok()) {
      if (!Retryable(c.status())) return c.status();
      last = c.status();
      continue;
    }
    bool delivered = false;
    ChargeUpload(body);
    auto response = (*c)->RequestStreaming(method, path, body, [&](ByteSpan piece) -> Status {
      delivered = true;
      ChargeDownload(piece.size());
      return on_data(piece);
    });
    if (!response.ok()) {
      last = response.status();
      if (!Retryable(last) || delivered) return last;
      continue;
    }
    Release(std::move(*c));
    if (response->status / 100 == 2) return Status::Ok();
    last = ErrorFor(*response, method, path);
    if (!protocol::RetriedStatus(response->status)) return last;
  }
  return GaveUp(last, attempt, since);
}

bool RemoteClient::KeepTrying(int attempts, std::chrono::steady_clock::time_point since) const {
  return attempts < kAttempts || std::chrono::steady_clock::now() - since < window_;
}

std::chrono::milliseconds RemoteClient::RetryBackoff(int attempts) {
  return std::chrono::milliseconds(100 << (2 * std::clamp(attempts - 1, 0, 2)));  // 100, 400, 1600 ms
}

Status RemoteClient::GaveUp(const Status& last, int attempts,
                            std::chrono::steady_clock::time_point since) const {
  if (window_.count() == 0) return last.WithContext(fmt::format("after {} attempts", attempts));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
  return last.WithContext(fmt::format(
      "server {} did not come back: {} attempts over {:.0f} s (the reconnect window is {} s, "
      "CAIRN_RECONNECT_TIMEOUT)",
      url_.ToString(), attempts, seconds,
      std::chrono::duration_cast<std::chrono::seconds>(window_).count()));
}

void RemoteClient::SetSessionRestorer(std::function<Status()> restore) {
  MutexLock lock(session_mu_);
  restore_session_ = std::move(restore);
}

Status RemoteClient::RestoreSession(uint64_t seen_generation) {
  MutexLock lock(session_mu_);
  if (!restore_session_ || generation_.load() != seen_generation) return Status::Ok();
  Status s = restore_session_();
  ++generation_;
  return s.WithContext(fmt::format("re-establishing the read session on server {}",
                                   url_.ToString()));
}

Status RemoteClient::Check() {
  auto body = Call("GET", protocol::StoresPath());
  if (!body.ok()) return body.status();
  auto parsed = nlohmann::json::parse(AsStringView(*body), nullptr, false);
  if (!parsed.is_object() || !parsed["stores"].is_array()) {
    return DataLossError(fmt::format("server {}: malformed answer to GET /api/v1/stores",
                                     url_.ToString()));
  }
  for (const auto& name : parsed["stores"]) {
    if (name.is_string() && name.get<std::string>() == url_.store) return Status::Ok();
  }
  return NotFoundError(fmt::format("server {}:{} has no datastore '{}' that this token may use",
                                   url_.host, url_.port, url_.store));
}

}  // namespace cairn::remote
