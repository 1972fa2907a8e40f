// S3 client tests that need no S3 server: endpoints and addressing,
// credentials, error mapping, retry classification and backoff; and the
// engine against a scripted loopback HTTP server (retries, error bodies,
// many requests in flight).
#include "s3/s3_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <latch>
#include <map>
#include <mutex>
#include <thread>

#include <curl/curl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tests/unit_test_util.h"

namespace cairn::s3 {
namespace {

TEST(S3ConfigTest, ParsesEndpoints) {
  auto ep = ParseEndpoint("http://127.0.0.1:7480/");
  ASSERT_TRUE(ep.ok());
  EXPECT_EQ(ep->scheme, "http");
  EXPECT_EQ(ep->host, "127.0.0.1:7480");
  EXPECT_EQ(ParseEndpoint("HTTPS://s3.example.com")->scheme, "https");
  for (const char* bad : {"127.0.0.1:7480", "ftp://h", "http://", "http://h/path", "http://u@h",
                          "http://h?x=1"}) {
    EXPECT_FALSE(ParseEndpoint(bad).ok()) << bad;
  }
}

TEST(S3ConfigTest, PathStyleTargets) {
  Endpoint ep{"http", "127.0.0.1:7480"};
  auto t = BuildTarget(ep, Addressing::kPathStyle, "bkt", "dir/a b+c$.txt", {});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->host, "127.0.0.1:7480");
  EXPECT_EQ(t->path, "/bkt/dir/a b+c$.txt");
  EXPECT_EQ(t->url, "http://127.0.0.1:7480/bkt/dir/a%20b%2Bc%24.txt");
  t = BuildTarget(ep, Addressing::kPathStyle, "bkt", "",
                  {{"list-type", "2"}, {"continuation-token", "a/b="}, {"prefix", ""}});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->path, "/bkt");
  EXPECT_EQ(t->url, "http://127.0.0.1:7480/bkt?continuation-token=a%2Fb%3D&list-type=2&prefix=");
  t = BuildTarget(ep, Addressing::kPathStyle, "bkt", "", {{"delete", ""}});
  EXPECT_EQ(t->url, "http://127.0.0.1:7480/bkt?delete=");
  EXPECT_EQ(BuildTarget(ep, Addressing::kPathStyle, "", "", {})->url, "http://127.0.0.1:7480/");
}

TEST(S3ConfigTest, VirtualHostTargets) {
  Endpoint ep{"https", "s3.example.com"};
  auto t = BuildTarget(ep, Addressing::kVirtualHost, "my-bucket", "k/1", {});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->host, "my-bucket.s3.example.com");
  EXPECT_EQ(t->path, "/k/1");
  EXPECT_EQ(t->url, "https://my-bucket.s3.example.com/k/1");
  EXPECT_EQ(BuildTarget(ep, Addressing::kVirtualHost, "my-bucket", "", {})->url,
            "https://my-bucket.s3.example.com/");
  for (const char* bad : {"My_Bucket", "ab", "-abc", "abc."}) {
    EXPECT_FALSE(BuildTarget(ep, Addressing::kVirtualHost, bad, "k", {}).ok()) << bad;
  }
}

TEST(S3ConfigTest, ParsesCredentialsFile) {
  constexpr char kFile[] =
      "# comment\n[default]\naws_access_key_id = AKDEFAULT\r\naws_secret_access_key=sd\n\n"
      "[profile other]\n  aws_access_key_id=AKOTHER \n aws_secret_access_key = so\n"
      "aws_session_token = tok\nregion = eu\n[broken]\naws_access_key_id = x\n";
  auto c = ParseCredentialsFile(kFile, "default", "f");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->access_key, "AKDEFAULT");
  EXPECT_EQ(c->secret_key, "sd");
  EXPECT_EQ(c->session_token, "");
  c = ParseCredentialsFile(kFile, "other", "f");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->access_key, "AKOTHER");
  EXPECT_EQ(c->secret_key, "so");
  EXPECT_EQ(c->session_token, "tok");
  EXPECT_EQ(ParseCredentialsFile(kFile, "missing", "f").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ParseCredentialsFile(kFile, "broken", "f").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ParseCredentialsFile("[default\nx=y\n", "default", "f").status().code(),
            StatusCode::kInvalidArgument);
}

TEST(S3ConfigTest, LoadsCredentialsFromEnvironmentThenFile) {
  test_util::TempDir dir;
  auto env = NewPosixEnv();
  std::map<std::string, std::string> vars;
  GetEnvFn getenv = [&](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
  vars["HOME"] = dir.path();
  EXPECT_EQ(LoadCredentials(getenv, env.get()).status().code(), StatusCode::kNotFound);
  std::filesystem::create_directories(dir.Join(".aws"));
  test_util::WriteFileOrFail(dir.Join(".aws/credentials"),
                             AsBytes(std::string_view(
                                 "[default]\naws_access_key_id=AKF\naws_secret_access_key=SF\n"
                                 "[p2]\naws_access_key_id=AK2\naws_secret_access_key=S2\n")));
  auto c = LoadCredentials(getenv, env.get());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->access_key, "AKF");
  vars["AWS_PROFILE"] = "p2";
  EXPECT_EQ(LoadCredentials(getenv, env.get())->access_key, "AK2");
  vars["AWS_ACCESS_KEY_ID"] = "AKENV";
  EXPECT_EQ(LoadCredentials(getenv, env.get()).status().code(), StatusCode::kInvalidArgument);
  vars["AWS_SECRET_ACCESS_KEY"] = "SENV";
  c = LoadCredentials(getenv, env.get());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->access_key, "AKENV");
  EXPECT_EQ(c->secret_key, "SENV");
}

TEST(S3ErrorTest, ClassifiesErrors) {
  EXPECT_EQ(ClassifyError(200, ""), S3ErrorKind::kNone);
  EXPECT_EQ(ClassifyError(206, ""), S3ErrorKind::kNone);
  EXPECT_EQ(ClassifyError(403, "InvalidAccessKeyId"), S3ErrorKind::kBadCredentials);
  EXPECT_EQ(ClassifyError(403, "SignatureDoesNotMatch"), S3ErrorKind::kBadCredentials);
  EXPECT_EQ(ClassifyError(403, "AccessDenied"), S3ErrorKind::kAccessDenied);
  EXPECT_EQ(ClassifyError(404, "NoSuchBucket"), S3ErrorKind::kNoSuchBucket);
  EXPECT_EQ(ClassifyError(404, "NoSuchKey"), S3ErrorKind::kNoSuchKey);
  EXPECT_EQ(ClassifyError(404, ""), S3ErrorKind::kNoSuchKey);
  EXPECT_EQ(ClassifyError(412, "PreconditionFailed"), S3ErrorKind::kAlreadyExists);
  EXPECT_EQ(ClassifyError(409, "BucketAlreadyExists"), S3ErrorKind::kAlreadyExists);
  EXPECT_EQ(ClassifyError(503, "SlowDown"), S3ErrorKind::kThrottled);
  EXPECT_EQ(ClassifyError(503, ""), S3ErrorKind::kThrottled);
  EXPECT_EQ(ClassifyError(429, ""), S3ErrorKind::kThrottled);
  EXPECT_EQ(ClassifyError(500, "InternalError"), S3ErrorKind::kServerError);
  EXPECT_EQ(ClassifyError(502, ""), S3ErrorKind::kServerError);
  EXPECT_EQ(ClassifyError(400, "RequestTimeout"), S3ErrorKind::kTimeout);
  EXPECT_EQ(ClassifyError(400, "BadDigest"), S3ErrorKind::kClientError);
  EXPECT_EQ(ClassifyError(400, "InvalidArgument"), S3ErrorKind::kClientError);
  // Swift's s3api answers a create-only PUT this way: not worth a retry.
  EXPECT_EQ(ClassifyError(501, "NotImplemented"), S3ErrorKind::kNotImplemented);
  EXPECT_EQ(ErrorStatus({"PutObject", "b", "k", "http://h"}, 501, {}).code(),
            StatusCode::kUnimplemented);
}

TEST(S3ErrorTest, RetriesOnlyServerSideTrouble) {
  for (auto k : {S3ErrorKind::kThrottled, S3ErrorKind::kServerError, S3ErrorKind::kTimeout}) {
    EXPECT_TRUE(IsRetryable(k));
  }
  for (auto k : {S3ErrorKind::kNone, S3ErrorKind::kBadCredentials, S3ErrorKind::kAccessDenied,
                 S3ErrorKind::kNoSuchBucket, S3ErrorKind::kNoSuchKey, S3ErrorKind::kAlreadyExists,
                 S3ErrorKind::kClientError, S3ErrorKind::kNotImplemented}) {
    EXPECT_FALSE(IsRetryable(k));
  }
  EXPECT_TRUE(IsRetryableCurlError(CURLE_COULDNT_CONNECT));
  EXPECT_TRUE(IsRetryableCurlError(CURLE_OPERATION_TIMEDOUT));
  EXPECT_TRUE(IsRetryableCurlError(CURLE_RECV_ERROR));
  EXPECT_TRUE(IsRetryableCurlError(CURLE_GOT_NOTHING));
  EXPECT_FALSE(IsRetryableCurlError(CURLE_URL_MALFORMAT));
  EXPECT_FALSE(IsRetryableCurlError(CURLE_PEER_FAILED_VERIFICATION));
  EXPECT_FALSE(IsRetryableCurlError(CURLE_OK));
}

TEST(S3ErrorTest, StatusSaysWhatWhereWhy) {
  ErrorContext ctx{"GetObject", "bkt", "k1", "http://127.0.0.1:7480"};
  auto body = [](std::string_view code) {
    return std::string("<Error><Code>") + std::string(code) + "</Code><Message>msg</Message></Error>";
  };
  Status s = ErrorStatus(ctx, 404, AsBytes(body("NoSuchKey")));
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(),
            "S3 GetObject s3://bkt/k1 at http://127.0.0.1:7480: HTTP 404 NoSuchKey: msg (no such key)");
  EXPECT_EQ(ErrorStatus(ctx, 404, AsBytes(body("NoSuchBucket"))).code(),
            StatusCode::kFailedPrecondition);
  s = ErrorStatus(ctx, 403, AsBytes(body("SignatureDoesNotMatch")));
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(s.message().find("bad credentials"), std::string::npos);
  s = ErrorStatus(ctx, 403, AsBytes(body("AccessDenied")));
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(s.message().find("access denied"), std::string::npos);
  EXPECT_EQ(ErrorStatus(ctx, 412, AsBytes(body("PreconditionFailed"))).code(),
            StatusCode::kAlreadyExists);
  EXPECT_EQ(ErrorStatus(ctx, 503, AsBytes(body("SlowDown"))).code(), StatusCode::kUnavailable);
  EXPECT_EQ(ErrorStatus(ctx, 500, {}).code(), StatusCode::kUnavailable);
  EXPECT_EQ(ErrorStatus(ctx, 400, AsBytes(body("BadDigest"))).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrorStatus(ctx, 416, AsBytes(body("InvalidRange"))).code(), StatusCode::kOutOfRange);
  s = ErrorStatus(ctx, 502, AsBytes(std::string_view("<html>bad gateway</html>")));
  EXPECT_NE(s.message().find("HTTP 502 (<html>bad gateway</html>)"), std::string::npos);
}

TEST(S3ErrorTest, BackoffGrowsWithJitterAndCap) {
  RetryPolicy p;
  p.base_delay = std::chrono::milliseconds(100);
  p.max_delay = std::chrono::milliseconds(1000);
  EXPECT_EQ(BackoffDelay(p, 1, 0).count(), 50);    // half fixed
  EXPECT_EQ(BackoffDelay(p, 1, 50).count(), 100);  // + up to half random
  EXPECT_EQ(BackoffDelay(p, 2, 0).count(), 100);
  EXPECT_EQ(BackoffDelay(p, 3, 0).count(), 200);
  for (uint64_t r : {0ull, 1ull, 12345ull, ~0ull}) {
    for (int retry = 1; retry < 70; ++retry) {
      auto d = BackoffDelay(p, retry, r).count();
      EXPECT_GE(d, 50);
      EXPECT_LE(d, 1000);
    }
  }
  EXPECT_EQ(BackoffDelay(p, 60, 0).count(), 500);
}

TEST(S3ErrorTest, ContentMd5IsBase64) {
  EXPECT_EQ(ContentMd5({}), "1B2M2Y8AsgTpgAmY7PhCfg==");
  EXPECT_EQ(ContentMd5(AsBytes(std::string_view("Welcome to Amazon S3."))), "1EfQ6PKJ8WoS/2AnznfCWA==");
}

// A scripted HTTP/1.1 server on loopback: each request goes to `handler`,
// which returns the status line code, extra headers and body. Keep-alive.
class FakeS3Server {
 public:
  struct Request {
    std::string method, target;
    std::map<std::string, std::string> headers;
    std::string body;
  };
  struct Reply {
    int status = 200;
    std::string body;
    std::string headers;  // "Name: value\r\n" lines
  };
  using Handler = std::function<Reply(const Request&)>;

  explicit FakeS3Server(Handler handler) : handler_(std::move(handler)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    EXPECT_EQ(::listen(fd_, 128), 0);
    acceptor_ = std::jthread([this] { Accept(); });
  }
  ~FakeS3Server() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    acceptor_.join();
    std::lock_guard lock(mu_);
    for (int c : conns_) ::shutdown(c, SHUT_RDWR);
    workers_.clear();  // joins
  }
  std::string endpoint() const { return fmt::format("http://127.0.0.1:{}", port_); }
  int connections() const { return accepted_.load(); }

 private:
  void Accept() {
    while (true) {
      int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      ++accepted_;
      std::lock_guard lock(mu_);
      conns_.push_back(c);
      workers_.emplace_back([this, c] { Serve(c); ::close(c); });
    }
  }
  void Serve(int c) {
    std::string buf;
    char tmp[65536];
    while (true) {
      size_t end;
      while ((end = buf.find("\r\n\r\n")) == std::string::npos) {
        ssize_t n = ::read(c, tmp, sizeof tmp);
        if (n <= 0) return;
        buf.append(tmp, static_cast<size_t>(n));
      }
      Request req;
      std::string head = buf.substr(0, end);
      buf.erase(0, end + 4);
      size_t sp1 = head.find(' '), sp2 = head.find(' ', sp1 + 1);
      req.method = head.substr(0, sp1);
      req.target = head.substr(sp1 + 1, sp2 - sp1 - 1);
      for (size_t pos = head.find("\r\n"); pos != std::string::npos;) {
        size_t next = head.find("\r\n", pos + 2);
        std::string line = head.substr(pos + 2, next == std::string::npos ? std::string::npos : next - pos - 2);
        size_t colon = line.find(':');
        std::string name = line.substr(0, colon);
        for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        req.headers[name] = line.substr(colon + 2);
        pos = next;
      }
      size_t length = req.headers.count("content-length") ? std::stoul(req.headers["content-length"]) : 0;
      while (buf.size() < length) {
        ssize_t n = ::read(c, tmp, sizeof tmp);
        if (n <= 0) return;
        buf.append(tmp, static_cast<size_t>(n));
      }
      req.body = buf.substr(0, length);
      buf.erase(0, length);
      Reply r = handler_(req);
      std::string out = "HTTP/1.1 " + std::to_string(r.status) + " X\r\n" + r.headers +
                        "Content-Length: " + std::to_string(r.body.size()) + "\r\n\r\n";
      if (req.method != "HEAD") out += r.body;
      // MSG_NOSIGNAL: a client that gave up (a timeout test) must not SIGPIPE us.
      if (::send(c, out.data(), out.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(out.size())) return;
    }
  }

  Handler handler_;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<int> accepted_{0};
  std::mutex mu_;
  std::vector<int> conns_;
  std::vector<std::jthread> workers_;
  std::jthread acceptor_;
};

std::unique_ptr<S3Client> OpenFake(const FakeS3Server& server, int max_connections = 8) {
  S3Config config;
  config.endpoint = server.endpoint();
  config.bucket = "bkt";
  config.credentials = {"AK", "SK", ""};
  config.max_connections = max_connections;
  config.retry.base_delay = std::chrono::milliseconds(1);
  config.retry.max_delay = std::chrono::milliseconds(5);
  auto client = S3Client::Open(config);
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  return std::move(*client);
}

TEST(S3ClientTest, PutCarriesContentMd5UntilAProbeShowsTheServerChecksTheHash) {
  std::mutex mu;
  std::vector<FakeS3Server::Request> seen;
  FakeS3Server server([&](const FakeS3Server::Request& r) {
    std::lock_guard lock(mu);
    seen.push_back(r);
    if (r.target == "/bkt/.probe/check" &&
        r.headers.at("x-amz-content-sha256") != Sha256Hex(AsBytes(std::string_view(r.body)))) {
      return FakeS3Server::Reply{400, "<Error><Code>XAmzContentSHA256Mismatch</Code></Error>", ""};
    }
    return FakeS3Server::Reply{200, "", "ETag: \"x\"\r\n"};
  });
  auto client = OpenFake(server);
  PutOptions opts;
  opts.create_only = true;
  ASSERT_TRUE(client->PutObject("dir/k 1", Bytes{'a', 'b', 'c'}, opts).ok());
  EXPECT_FALSE(client->payload_hash_checked());
  EXPECT_TRUE(client->ProbePayloadHashCheck(".probe/check"));
  EXPECT_TRUE(client->ProbePayloadHashCheck(".probe/check"));  // once: the verdict is kept
  ASSERT_TRUE(client->PutObject("dir/k 1", Bytes{'a', 'b', 'c'}, opts).ok());
  std::lock_guard lock(mu);
  ASSERT_EQ(seen.size(), 3u);
  const auto& before = seen[0];
  EXPECT_EQ(before.method, "PUT");
  EXPECT_EQ(before.target, "/bkt/dir/k%201");
  EXPECT_EQ(before.body, "abc");
  EXPECT_EQ(before.headers.at("content-md5"), "kAFQmDzST7DWlj99KOF/cg==");
  EXPECT_EQ(before.headers.at("if-none-match"), "*");
  EXPECT_EQ(before.headers.at("x-amz-content-sha256"), Sha256Hex(AsBytes(std::string_view("abc"))));
  EXPECT_EQ(before.headers.count("expect"), 0u);
  EXPECT_TRUE(before.headers.at("authorization").starts_with("AWS4-HMAC-SHA256 Credential=AK/"));
  EXPECT_NE(before.headers.at("authorization").find("SignedHeaders=content-md5;content-type;host;"
                                                   "if-none-match;x-amz-content-sha256;x-amz-date"),
            std::string::npos);
  // The probe: signed for other bytes than it carries.
  EXPECT_EQ(seen[1].target, "/bkt/.probe/check");
  EXPECT_NE(seen[1].headers.at("x-amz-content-sha256"), Sha256Hex(AsBytes(std::string_view(seen[1].body))));
  // After it, the signed SHA-256 is the body's only check: no MD5.
  const auto& after = seen[2];
  EXPECT_EQ(after.headers.count("content-md5"), 0u);
  EXPECT_EQ(after.headers.at("x-amz-content-sha256"), Sha256Hex(AsBytes(std::string_view("abc"))));
  EXPECT_NE(after.headers.at("authorization").find("SignedHeaders=content-type;host;"
                                                  "if-none-match;x-amz-content-sha256;x-amz-date"),
            std::string::npos);
}

TEST(S3ClientTest, AServerThatStoresAMismatchedBodyKeepsContentMd5) {
  std::mutex mu;
  std::vector<FakeS3Server::Request> seen;
  FakeS3Server server([&](const FakeS3Server::Request& r) {
    std::lock_guard lock(mu);
    seen.push_back(r);
    return FakeS3Server::Reply{200, "", ""};  // checks nothing
  });
  auto client = OpenFake(server);
  EXPECT_FALSE(client->ProbePayloadHashCheck(".probe/check"));
  ASSERT_TRUE(client->PutObject("k", Bytes{'a', 'b', 'c'}).ok());
  std::lock_guard lock(mu);
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].method, "PUT");
  EXPECT_EQ(seen[1].method, "DELETE");  // the probe object it stored goes again
  EXPECT_EQ(seen[1].target, "/bkt/.probe/check");
  EXPECT_EQ(seen[2].headers.at("content-md5"), "kAFQmDzST7DWlj99KOF/cg==");
}

TEST(S3ClientTest, ContentMd5WhereThePayloadIsUnsignedAndOnPost) {
  std::mutex mu;
  std::vector<FakeS3Server::Request> seen;
  FakeS3Server server([&](const FakeS3Server::Request& r) {
    std::lock_guard lock(mu);
    seen.push_back(r);
    return FakeS3Server::Reply{200, "", ""};
  });
  auto client = OpenFake(server);
  auto send = [&](S3Request r) {
    std::promise<Result<S3Response>> done;
    client->Submit(std::move(r), [&](Result<S3Response> got) { done.set_value(std::move(got)); });
    auto got = done.get_future().get();
    ASSERT_TRUE(got.ok()) << got.status().ToString();
  };
  S3Request unsigned_put{"PutObject", "PUT", "bkt", "u", {}, {}, Bytes{'a', 'b', 'c'}, false, {}};
  send(unsigned_put);
  S3Request post{"DeleteObjects", "POST", "bkt", "", {{"delete", ""}}, {}, Bytes{'a', 'b', 'c'}, true, {}};
  send(post);
  std::lock_guard lock(mu);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].headers["x-amz-content-sha256"], "UNSIGNED-PAYLOAD");
  EXPECT_EQ(seen[0].headers["content-md5"], "kAFQmDzST7DWlj99KOF/cg==");
  EXPECT_EQ(seen[1].headers["content-md5"], "kAFQmDzST7DWlj99KOF/cg==");
  EXPECT_EQ(seen[1].headers["x-amz-content-sha256"], Sha256Hex(AsBytes(std::string_view("abc"))));
}

TEST(S3ClientTest, RetriesServerErrorsButNotClientErrors) {
  std::atomic<int> calls{0};
  FakeS3Server server([&](const FakeS3Server::Request& r) {
    int n = ++calls;
    if (r.target == "/bkt/flaky") {
      if (n <= 2) return FakeS3Server::Reply{503, "<Error><Code>SlowDown</Code></Error>", ""};
      return FakeS3Server::Reply{200, "data", ""};
    }
    if (r.target == "/bkt/down") return FakeS3Server::Reply{500, "<Error><Code>InternalError</Code></Error>", ""};
    return FakeS3Server::Reply{404, "<Error><Code>NoSuchKey</Code></Error>", ""};
  });
  auto client = OpenFake(server);
  auto got = client->GetObject("flaky");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(AsStringView(*got), "data");
  EXPECT_EQ(calls.load(), 3);
  EXPECT_EQ(client->stats().retries, 2u);

  calls = 0;
  EXPECT_EQ(client->GetObject("missing").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(calls.load(), 1);

  calls = 0;
  Status down = client->GetObject("down").status();
  EXPECT_EQ(down.code(), StatusCode::kUnavailable);
  EXPECT_NE(down.message().find("InternalError"), std::string::npos);
  EXPECT_EQ(calls.load(), client->config().retry.max_attempts);
}

TEST(S3ClientTest, RetriesAnAttemptThatTimesOut) {
  std::atomic<int> calls{0};
  FakeS3Server server([&](const FakeS3Server::Request&) {
    if (++calls == 1) std::this_thread::sleep_for(std::chrono::milliseconds(2000));
    return FakeS3Server::Reply{200, "late", ""};
  });
  S3Config config;
  config.endpoint = server.endpoint();
  config.bucket = "bkt";
  config.credentials = {"AK", "SK", ""};
  // Generous against a loaded (sanitizer) machine: only the first attempt
  // must time out, and a slow later one may too without failing the test.
  config.request_timeout = std::chrono::milliseconds(700);
  config.retry = {5, std::chrono::milliseconds(1), std::chrono::milliseconds(2)};
  auto client = S3Client::Open(config);
  ASSERT_TRUE(client.ok());
  auto got = (*client)->GetObject("k");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(AsStringView(*got), "late");
  EXPECT_GE(calls.load(), 2);
  EXPECT_GE((*client)->stats().retries, 1u);
}

TEST(S3ClientTest, ConnectionRefusedIsUnavailableAfterRetries) {
  int port;
  {
    FakeS3Server gone([](const FakeS3Server::Request&) { return FakeS3Server::Reply{}; });
    port = std::stoi(gone.endpoint().substr(gone.endpoint().rfind(':') + 1));
  }
  S3Config config;
  config.endpoint = fmt::format("http://127.0.0.1:{}", port);
  config.bucket = "bkt";
  config.credentials = {"AK", "SK", ""};
  config.retry = {3, std::chrono::milliseconds(1), std::chrono::milliseconds(2)};
  auto client = S3Client::Open(config);
  ASSERT_TRUE(client.ok());
  Status s = (*client)->HeadObject("k").status();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("S3 HeadObject s3://bkt/k at http://127.0.0.1:"), std::string::npos);
  EXPECT_NE(s.message().find("after 3 attempts"), std::string::npos);
}

TEST(S3ClientTest, ManyRequestsInFlightReuseConnections) {
  FakeS3Server server([](const FakeS3Server::Request& r) {
    if (r.method == "HEAD") return FakeS3Server::Reply{200, std::string(7, 'x'), ""};
    auto range = r.headers.find("range");
    if (range == r.headers.end()) return FakeS3Server::Reply{400, "<Error><Code>NoRange</Code></Error>", ""};
    return FakeS3Server::Reply{206, range->second, ""};
  });
  auto client = OpenFake(server, 4);
  constexpr int kRequests = 200;
  std::latch done(kRequests);
  std::atomic<int> good{0};
  for (int i = 0; i < kRequests; ++i) {
    client->GetObjectAsync(fmt::format("k{}", i), ByteRange{uint64_t(i), 10},
                           [&, i](Result<Bytes> r) {
                             if (r.ok() && AsStringView(*r) == fmt::format("bytes={}-{}", i, i + 9)) {
                               ++good;
                             }
                             done.count_down();
                           });
  }
  done.wait();
  EXPECT_EQ(good.load(), kRequests);
  EXPECT_LE(server.connections(), 4);  // keep-alive, never more than max_connections
  EXPECT_EQ(client->GetObject("").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(client->PutObject("", {}).code(), StatusCode::kInvalidArgument);
  auto info = client->HeadObject("k");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->size, 7u);
}

TEST(S3ClientTest, ListFollowsContinuationTokens) {
  FakeS3Server server([](const FakeS3Server::Request& r) {
    bool second = r.target.find("continuation-token=t%2F1") != std::string::npos;
    std::string body = second
        ? "<ListBucketResult><Contents><Key>b</Key><Size>2</Size></Contents>"
          "<IsTruncated>false</IsTruncated></ListBucketResult>"
        : "<ListBucketResult><Contents><Key>a&amp;</Key><Size>1</Size></Contents>"
          "<IsTruncated>true</IsTruncated><NextContinuationToken>t/1</NextContinuationToken>"
          "</ListBucketResult>";
    return FakeS3Server::Reply{200, body, ""};
  });
  auto client = OpenFake(server);
  auto list = client->ListObjectsV2({"", "", 1});
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(list->pages, 2);
  ASSERT_EQ(list->objects.size(), 2u);
  EXPECT_EQ(list->objects[0].key, "a&");
  EXPECT_EQ(list->objects[1].key, "b");
}

TEST(S3ClientTest, ClosingCancelsPendingRequests) {
  std::latch release(1);
  FakeS3Server server([&](const FakeS3Server::Request&) {
    release.wait();
    return FakeS3Server::Reply{};
  });
  auto client = OpenFake(server, 1);
  std::atomic<int> cancelled{0};
  for (int i = 0; i < 3; ++i) {
    client->GetObjectAsync("k", std::nullopt, [&](Result<Bytes> r) {
      if (r.status().code() == StatusCode::kCancelled) ++cancelled;
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  client.reset();
  release.count_down();
  EXPECT_EQ(cancelled.load(), 3);
}

}  // namespace
}  // namespace cairn::s3
