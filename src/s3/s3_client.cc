// The I/O engine of S3Client (see s3_client.h for the design): one thread,
// one CURLM, pooled easy handles, a queue of requests waiting for a free
// connection slot and a timer list of requests waiting to retry.
#include "s3/s3_client.h"

#include <curl/curl.h>
#include <openssl/evp.h>
#include <openssl/md5.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <stop_token>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>

#include "base/mutex.h"
#include "base/text.h"

namespace cairn::s3 {

using Clock = std::chrono::steady_clock;

namespace {

std::string_view TrimSpace(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

// One logical request, alive from Submit() to its callback, over attempts.
struct PendingCall {
  S3Request request;
  RawCallback done;
  RequestTarget target;
  std::string payload_hash;
  std::string content_md5;  // empty when there is no body
  int attempt = 0;          // attempts started
  Clock::time_point started;
  // The current attempt.
  curl_slist* header_list = nullptr;
  S3Response response;
  char error[CURL_ERROR_SIZE] = {};
  RateLimiter* download_limit = nullptr;  // the client's, or null
};

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  auto* call = static_cast<PendingCall*>(user);
  call->response.body.insert(call->response.body.end(), reinterpret_cast<uint8_t*>(data),
                             reinterpret_cast<uint8_t*>(data) + size * n);
  if (call->download_limit != nullptr) call->download_limit->Acquire(size * n);
  return size * n;
}

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  auto* call = static_cast<PendingCall*>(user);
  std::string_view line(data, size * n);
  if (line.starts_with("HTTP/")) {
    call->response.headers.clear();  // a new response (after 100 Continue)
  } else if (size_t colon = line.find(':'); colon != std::string_view::npos) {
    std::string name = AsciiLower(TrimSpace(line.substr(0, colon)));
    std::string_view value = TrimSpace(line.substr(colon + 1));
    if (name == "content-length" && call->request.method != "HEAD") {
      // One allocation for the body instead of doublings (bounded: the
      // header is the server's word, not a promise).
      uint64_t length = 0;
      std::from_chars(value.data(), value.data() + value.size(), length);
      call->response.body.reserve(static_cast<size_t>(std::min<uint64_t>(length, 64u << 20)));
    }
    call->response.headers.emplace_back(std::move(name), std::string(value));
  }
  return size * n;
}

// A transport failure after the last attempt: Unavailable when another try
// later may work; otherwise a configuration problem (a certificate not
// trusted, a malformed URL) that retrying will not fix.
Status TransportError(CURLcode code, std::string msg) {
  if (IsRetryableCurlError(code)) return UnavailableError(std::move(msg));
  switch (code) {
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
      return FailedPreconditionError(msg + " (TLS: the server's certificate is not trusted)");
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
      return InvalidArgumentError(std::move(msg));
    default:
      return InternalError(std::move(msg));
  }
}

void InitCurlOnce() {
  // libcurl's one process-wide initialisation (not thread-safe in general):
  // done once here rather than requiring every main() to know about it.
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

}  // namespace

bool IsRetryableCurlError(int curl_code) {
  switch (static_cast<CURLcode>(curl_code)) {
    case CURLE_COULDNT_RESOLVE_HOST:  // DNS hiccup; a wrong name fails all attempts
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return true;
    default:
      return false;
  }
}

std::string ContentMd5(ByteSpan data) {
  uint8_t md[16];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_md5(), nullptr);
  uint8_t b64[32];
  int n = EVP_EncodeBlock(b64, md, static_cast<int>(len));
  return std::string(reinterpret_cast<char*>(b64), static_cast<size_t>(n));
}

std::string Md5Hex(ByteSpan data) {
  uint8_t md[16];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_md5(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 15];
  }
  return out;
}

class S3Client::Impl {
 public:
  Impl(S3Config config, Endpoint endpoint)
      : config_(std::move(config)), endpoint_(std::move(endpoint)), rng_(std::random_device{}()) {
    multi_ = curl_multi_init();
    curl_multi_setopt(multi_, CURLMOPT_MAXCONNECTS, static_cast<long>(config_.max_connections));
    thread_ = std::jthread([this](std::stop_token st) { Run(st); });
  }

  ~Impl() {
    thread_.request_stop();
    curl_multi_wakeup(multi_);
    thread_.join();
    for (CURL* e : idle_) curl_easy_cleanup(e);
    curl_multi_cleanup(multi_);
  }

  const S3Config& config() const { return config_; }
  const Endpoint& endpoint() const { return endpoint_; }

  void Submit(S3Request request, RawCallback done) {
    auto call = std::make_unique<PendingCall>();
    auto target = BuildTarget(endpoint_, config_.addressing, request.bucket, request.key,
                              request.query);
    if (!target.ok()) {
      done(target.status());
      return;
    }
    call->target = std::move(*target);
    // Hashing happens here, on the submitting thread, not on the I/O thread.
    call->payload_hash = !request.payload_hash.empty() ? request.payload_hash
                         : request.sign_payload       ? Sha256Hex(request.body)
                                                      : std::string(kUnsignedPayload);
    // Content-MD5 where nothing else makes the server check the body: a
    // server that checks the signed SHA-256 (payload_hash_checked_) needs
    // no second hash of the same bytes (~0.75 GB/s, the largest CPU cost of
    // a sync to S3). POST (multi-object delete) needs it anyway.
    const bool sha_checked = request.sign_payload && request.payload_hash.empty() &&
                             payload_hash_checked_.load(std::memory_order_relaxed);
    if (request.method == "POST" || (!request.body.empty() && !sha_checked)) {
      call->content_md5 = ContentMd5(request.body);
    }
    if (config_.upload_limit) config_.upload_limit->Acquire(request.body.size());
    call->download_limit = config_.download_limit.get();
    call->request = std::move(request);
    call->done = std::move(done);
    call->started = Clock::now();
    {
      MutexLock lock(mu_);
      if (!stopping_) {
        incoming_.push_back(std::move(call));
      }
    }
    if (call) {  // the client is being destroyed
      call->done(CancelledError("S3 client is shutting down"));
      return;
    }
    curl_multi_wakeup(multi_);
  }

  Stats stats() const {
    return Stats{requests_.load(), retries_.load(), connections_.load()};
  }

 private:
  void Run(std::stop_token st) {
    while (!st.stop_requested()) {
      {
        MutexLock lock(mu_);
        for (auto& c : incoming_) waiting_.push_back(std::move(c));
        incoming_.clear();
      }
      for (auto now = Clock::now(); !timers_.empty() && timers_.begin()->first <= now;) {
        waiting_.push_back(std::move(timers_.begin()->second));
        timers_.erase(timers_.begin());
      }
      StartWaiting();
      int running = 0;
      curl_multi_perform(multi_, &running);
      CollectFinished();
      StartWaiting();
      int timeout_ms = 1000;
      if (!timers_.empty()) {
        auto until = std::chrono::ceil<std::chrono::milliseconds>(timers_.begin()->first - Clock::now());
        timeout_ms = static_cast<int>(std::clamp<int64_t>(until.count(), 0, timeout_ms));
      }
      curl_multi_poll(multi_, nullptr, 0, timeout_ms, nullptr);
    }
    CancelAll();
  }

  void StartWaiting() {
    while (!waiting_.empty() && active_.size() < static_cast<size_t>(config_.max_connections)) {
      std::unique_ptr<PendingCall> call = std::move(waiting_.front());
      waiting_.pop_front();
      Start(std::move(call));
    }
  }

  void Start(std::unique_ptr<PendingCall> call) {
    CURL* e;
    if (!idle_.empty()) {
      e = idle_.back();
      idle_.pop_back();
      curl_easy_reset(e);
    } else {
      e = curl_easy_init();
    }
    ++call->attempt;
    ++requests_;
    call->response = S3Response();
    call->error[0] = '\0';
    const S3Request& r = call->request;

    std::string amz_date = AmzDate(std::chrono::duration_cast<std::chrono::seconds>(
                                       std::chrono::system_clock::now().time_since_epoch())
                                       .count());
    Pairs headers = {{"host", call->target.host},
                     {"x-amz-date", amz_date},
                     {"x-amz-content-sha256", call->payload_hash}};
    if (!config_.credentials.session_token.empty()) {
      headers.emplace_back("x-amz-security-token", config_.credentials.session_token);
    }
    if (!call->content_md5.empty()) headers.emplace_back("content-md5", call->content_md5);
    for (const auto& h : r.headers) headers.push_back(h);
    SigningRequest sreq{r.method, call->target.path, r.query, headers, call->payload_hash};
    SigningParams params{config_.credentials.access_key, config_.credentials.secret_key,
                         config_.region, amz_date};
    headers.emplace_back("Authorization", AuthorizationHeader(sreq, params));
    curl_slist* list = nullptr;
    for (const auto& [name, value] : headers) {
      list = curl_slist_append(list, fmt::format("{}: {}", name, value).c_str());
    }
    // No "Expect: 100-continue" round trip; no form content type by default.
    list = curl_slist_append(list, "Expect:");
    bool has_type = std::any_of(r.headers.begin(), r.headers.end(),
                                [](const auto& h) { return AsciiLower(h.first) == "content-type"; });
    if (!has_type) list = curl_slist_append(list, "Content-Type:");
    call->header_list = list;

    curl_easy_setopt(e, CURLOPT_URL, call->target.url.c_str());
    curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L);  // the signed path must go out unchanged
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(config_.connect_timeout.count()));
    if (config_.request_timeout.count() > 0) {
      curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(config_.request_timeout.count()));
    }
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME,
                     std::max(1L, static_cast<long>(config_.stall_timeout.count() / 1000)));
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, config_.verify_tls ? 1L : 0L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, config_.verify_tls ? 2L : 0L);
    if (!config_.ca_file.empty()) curl_easy_setopt(e, CURLOPT_CAINFO, config_.ca_file.c_str());
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &OnBody);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, call.get());
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &OnHeader);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, call.get());
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, call->error);
    if (r.method == "GET") {
      curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    } else if (r.method == "HEAD") {
      curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    } else {
      curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, r.method.c_str());
      if (!r.body.empty() || r.method == "PUT" || r.method == "POST") {
        // The body stays in the Call until completion; curl does not copy it.
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(r.body.size()));
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, r.body.empty() ? "" : reinterpret_cast<const char*>(r.body.data()));
      }
    }
    CURLMcode mc = curl_multi_add_handle(multi_, e);
    if (mc != CURLM_OK) {
      curl_slist_free_all(list);
      call->header_list = nullptr;
      idle_.push_back(e);
      call->done(InternalError(fmt::format("{}: curl_multi_add_handle: {}", Context(*call),
                                           curl_multi_strerror(mc))));
      return;
    }
    active_.emplace(e, std::move(call));
  }

  std::string Context(const PendingCall& call) const {
    return Describe({call.request.operation, call.request.bucket, call.request.key, config_.endpoint});
  }

  void CollectFinished() {
    int left = 0;
    while (CURLMsg* msg = curl_multi_info_read(multi_, &left)) {
      if (msg->msg != CURLMSG_DONE) continue;
      CURL* e = msg->easy_handle;
      CURLcode code = msg->data.result;
      auto node = active_.extract(e);
      std::unique_ptr<PendingCall> call = std::move(node.mapped());
      long http = 0, connects = 0;
      curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &http);
      curl_easy_getinfo(e, CURLINFO_NUM_CONNECTS, &connects);
      connections_ += static_cast<uint64_t>(connects);
      curl_multi_remove_handle(multi_, e);
      curl_slist_free_all(call->header_list);
      call->header_list = nullptr;
      if (idle_.size() < static_cast<size_t>(config_.max_connections)) {
        idle_.push_back(e);
      } else {
        curl_easy_cleanup(e);
      }
      Finish(std::move(call), code, static_cast<int>(http));
    }
  }

  void Finish(std::unique_ptr<PendingCall> call, CURLcode code, int http) {
    bool can_retry = call->attempt < config_.retry.max_attempts;
    if (code != CURLE_OK) {
      if (IsRetryableCurlError(code) && can_retry) return Retry(std::move(call));
      std::string detail = call->error[0] ? call->error : curl_easy_strerror(code);
      std::string msg = fmt::format("{}: {} (after {} attempt{})", Context(*call), detail,
                                    call->attempt, call->attempt == 1 ? "" : "s");
      call->done(TransportError(code, std::move(msg)));
      return;
    }
    call->response.http_status = http;
    call->response.attempts = call->attempt;
    if (http >= 300 && can_retry) {
      S3ErrorBody err = ParseErrorBody(call->response.body);
      if (IsRetryable(ClassifyError(http, err.code))) return Retry(std::move(call));
    }
    call->done(std::move(call->response));
  }

  void Retry(std::unique_ptr<PendingCall> call) {
    ++retries_;
    auto delay = BackoffDelay(config_.retry, call->attempt, rng_());
    timers_.emplace(Clock::now() + delay, std::move(call));
  }

  void CancelAll() {
    {
      MutexLock lock(mu_);
      stopping_ = true;
      for (auto& c : incoming_) waiting_.push_back(std::move(c));
      incoming_.clear();
    }
    std::vector<std::unique_ptr<PendingCall>> all;
    for (auto& [e, call] : active_) {
      curl_multi_remove_handle(multi_, e);
      curl_slist_free_all(call->header_list);
      curl_easy_cleanup(e);
      all.push_back(std::move(call));
    }
    active_.clear();
    for (auto& c : waiting_) all.push_back(std::move(c));
    for (auto& [t, c] : timers_) all.push_back(std::move(c));
    waiting_.clear();
    timers_.clear();
    for (auto& c : all) c->done(CancelledError(Context(*c) + ": the S3 client was closed"));
  }

  const S3Config config_;
  const Endpoint endpoint_;
  CURLM* multi_ = nullptr;

  Mutex mu_;
  std::vector<std::unique_ptr<PendingCall>> incoming_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;

  // The I/O thread's own state.
  std::deque<std::unique_ptr<PendingCall>> waiting_;
  std::multimap<Clock::time_point, std::unique_ptr<PendingCall>> timers_;
  std::unordered_map<CURL*, std::unique_ptr<PendingCall>> active_;
  std::vector<CURL*> idle_;
  std::mt19937_64 rng_;

  std::atomic<uint64_t> requests_{0}, retries_{0}, connections_{0};

 public:
  // ProbePayloadHashCheck's verdict (any thread; set once).
  std::once_flag probe_once_;
  std::atomic<bool> payload_hash_checked_{false};

 private:
  std::jthread thread_;  // last: starts after, and stops before, the rest
};

Result<std::unique_ptr<S3Client>> S3Client::Open(S3Config config) {
  CAIRN_ASSIGN_OR_RETURN(Endpoint endpoint, ParseEndpoint(config.endpoint));
  if (config.bucket.empty()) return InvalidArgumentError("S3 client: no bucket configured");
  if (config.credentials.access_key.empty() || config.credentials.secret_key.empty()) {
    return InvalidArgumentError(fmt::format("S3 client for {}: no credentials", config.endpoint));
  }
  if (config.max_connections < 1) config.max_connections = 1;
  if (config.retry.max_attempts < 1) config.retry.max_attempts = 1;
  InitCurlOnce();
  return std::unique_ptr<S3Client>(
      new S3Client(std::make_unique<Impl>(std::move(config), std::move(endpoint))));
}

S3Client::S3Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
S3Client::~S3Client() = default;
const S3Config& S3Client::config() const { return impl_->config(); }
void S3Client::Submit(S3Request request, RawCallback done) {
  impl_->Submit(std::move(request), std::move(done));
}
S3Client::Stats S3Client::stats() const { return impl_->stats(); }
bool S3Client::payload_hash_checked() const {
  return impl_->payload_hash_checked_.load(std::memory_order_relaxed);
}
bool S3Client::ProbePayloadHashCheck(const std::string& probe_key) {
  std::call_once(impl_->probe_once_, [&] {
    impl_->payload_hash_checked_.store(ProbeServerChecksPayloadHash(probe_key), std::memory_order_relaxed);
  });
  return payload_hash_checked();
}

}  // namespace cairn::s3
