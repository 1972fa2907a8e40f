// Tests of net/'s HTTP server and client talking to each other over TLS on
// 127.0.0.1, and of the client's address and URL helpers.

#include <arpa/inet.h>
#include <signal.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <stdexcept>
#include <thread>

#include "net/http_client.h"
#include "net/http_server.h"
#include "net/tls.h"
#include "tests/unit_test_util.h"

namespace cairn::net {
namespace {

using namespace std::chrono_literals;
using test_util::TempDir;

// ---------------------------------------------------------------- helpers

TEST(NetTest, ParseHostPort) {
  auto r = ParseHostPort("127.0.0.1:8007");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->first, "127.0.0.1");
  EXPECT_EQ(r->second, 8007);
  r = ParseHostPort("[::1]:0");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->first, "::1");
  EXPECT_EQ(r->second, 0);
  r = ParseHostPort("backup.example.org:65535");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->first, "backup.example.org");
  for (const char* bad : {"", "host", ":80", "host:", "host:65536", "host:8x", "::1:80", "[::1]",
                          "[::1]80", "[]:80", "host:123456"}) {
    EXPECT_EQ(ParseHostPort(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(NetTest, UrlEncode) {
  EXPECT_EQ(UrlEncode("abc-XYZ_0.9~"), "abc-XYZ_0.9~");
  EXPECT_EQ(UrlEncode("a b/c?d=e&f%+\xff"), "a%20b%2Fc%3Fd%3De%26f%25%2B%FF");
}

// ---------------------------------------------------------------- server + client

// A raw client socket for misbehaving-client tests; closes itself.
class RawSocket {
 public:
  // `from`: the loopback address to connect from.
  explicit RawSocket(uint16_t port, const char* from = nullptr) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{5, 0};  // a safety net: no test waits this long
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (from != nullptr) {
      sockaddr_in src{};
      src.sin_family = AF_INET;
      ::inet_pton(AF_INET, from, &src.sin_addr);
      if (::bind(fd_, reinterpret_cast<sockaddr*>(&src), sizeof(src)) != 0) return;
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~RawSocket() {
    if (ssl_ != nullptr) SSL_free(ssl_);
    if (ctx_ != nullptr) SSL_CTX_free(ctx_);
    ::close(fd_);
  }
  bool connected() const { return connected_; }
  int fd() const { return fd_; }
  bool StartTls(int max_version = 0) {
    ctx_ = SSL_CTX_new(TLS_client_method());
    if (max_version != 0) {
      SSL_CTX_set_security_level(ctx_, 0);
      SSL_CTX_set_min_proto_version(ctx_, TLS1_VERSION);
      SSL_CTX_set_max_proto_version(ctx_, max_version);
    }
    ssl_ = SSL_new(ctx_);
    SSL_set_fd(ssl_, fd_);
    return SSL_connect(ssl_) == 1;
  }
  bool WriteTls(std::string_view data) {
    return SSL_write(ssl_, data.data(), static_cast<int>(data.size())) ==
           static_cast<int>(data.size());
  }
  // Reads until the peer closes (true) or the 5 s safety timeout (false).
  bool ReadTlsUntilClosed(std::string* got) {
    char buf[4096];
    for (;;) {
      errno = 0;
      int n = SSL_read(ssl_, buf, sizeof(buf));
      if (n > 0) {
        got->append(buf, static_cast<size_t>(n));
        continue;
      }
      return !(errno == EAGAIN || errno == EWOULDBLOCK);
    }
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
};

Bytes PatternBytes(size_t n) { return test_util::RandomBytes(n, 42); }

class HttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cert_ = dir_.Join("cert.pem");
    key_ = dir_.Join("key.pem");
    ASSERT_TRUE(GenerateSelfSigned(cert_, key_).ok());
    fingerprint_ = *CertificateFingerprint(cert_);
    options_.listen = {"127.0.0.1:0"};
    options_.cert_file = cert_;
    options_.key_file = key_;
    options_.worker_threads = 4;
  }
  void TearDown() override {
    if (server_) server_->Stop(2s);
  }

  void StartServer() {
    auto s = HttpServer::Start(
        options_, [this](const HttpRequest& req, ResponseWriter& w) { Handle(req, w); }, admitter_);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(*s);
    ASSERT_EQ(server_->endpoints().size(), 1u);
    port_ = ParseHostPort(server_->endpoints()[0])->second;
    ASSERT_NE(port_, 0);
  }

  ClientOptions Client() const {
    ClientOptions c;
    c.host = "127.0.0.1";
    c.port = port_;
    c.fingerprint = fingerprint_;
    c.connect_timeout = 5s;
    c.io_timeout = 5s;
    return c;
  }
  std::unique_ptr<HttpConnection> ConnectOrDie() {
    auto c = HttpConnection::Connect(Client());
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(*c) : nullptr;
  }

  // The test server's routes.
  void Handle(const HttpRequest& req, ResponseWriter& w) {
    handled_++;
    if (req.path == "/echo") {
      std::string auth = req.headers.count("authorization") ? req.headers.at("authorization") : "";
      w.Send(200, "application/octet-stream", req.body,
             {{"X-Method", req.method}, {"X-Auth", auth}, {"X-Peer", req.peer}});
    } else if (req.path == "/query") {
      std::string out = "path=" + req.path + "\n";
      for (const auto& [k, v] : req.query) out += k + "=" + v + "\n";
      w.SendText(200, out);
    } else if (req.path == "/stream") {
      size_t size = std::stoul(req.query.at("size"));
      auto data = std::make_shared<Bytes>(PatternBytes(size));
      auto off = std::make_shared<size_t>(0);
      w.Stream(200, "application/octet-stream",
               [data, off](ResponseWriter::StreamPieces* out, bool* done) {
                 size_t n = std::min<size_t>(1 << 20, data->size() - *off);
                 ReadBuffer piece = out->Take();
                 piece.Resize(n);
                 std::memcpy(piece.data(), data->data() + *off, n);
                 out->Push(std::move(piece));
                 *off += n;
                 *done = *off == data->size();
                 return Status::Ok();
               });
    } else if (req.path == "/endless") {
      // Never done; the flag says when the server let go of the producer
      // (the client went away), and producing counts the pieces asked.
      struct Flag {
        std::atomic<bool>* done;
        ~Flag() { *done = true; }
      };
      std::shared_ptr<Flag> flag(new Flag{&endless_done_});
      std::atomic<int>* produced = &endless_pieces_;
      w.Stream(200, "application/octet-stream",
               [flag, produced](ResponseWriter::StreamPieces* out, bool*) {
                 ++*produced;
                 out->Append(Bytes(64 << 10, 'x'));
                 return Status::Ok();
               });
    } else if (req.path == "/block") {
      blocked_++;
      release_.wait();
      w.SendText(200, "released");
    } else if (req.path == "/silent") {
      // Returns without responding.
    } else if (req.path == "/throw") {
      throw std::runtime_error("boom");
    } else {
      w.SendText(404, "no such route");
    }
  }

  TempDir dir_;
  std::string cert_, key_, fingerprint_;
  ServerOptions options_;
  std::unique_ptr<HttpServer> server_;
  uint16_t port_ = 0;
  std::atomic<int> handled_{0};
  std::atomic<bool> endless_done_{false};
  std::atomic<int> endless_pieces_{0};
  Admitter admitter_;
  std::atomic<int> blocked_{0};
  std::promise<void> unblock_;
  std::shared_future<void> release_ = unblock_.get_future().share();
};

TEST_F(HttpTest, EchoesGetAndPut) {
  options_.listen = {"127.0.0.1:0", "[::1]:0"};
  auto s = HttpServer::Start(options_,
                             [this](const HttpRequest& r, ResponseWriter& w) { Handle(r, w); });
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  server_ = std::move(*s);
  ASSERT_EQ(server_->endpoints().size(), 2u);
  EXPECT_EQ(server_->endpoints()[1].rfind("[::1]:", 0), 0u) << server_->endpoints()[1];
  port_ = ParseHostPort(server_->endpoints()[0])->second;

  ClientOptions opts = Client();
  opts.authorization = "Bearer alice:secret";
  auto conn = HttpConnection::Connect(opts);
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  auto r = (*conn)->Request("GET", "/echo");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(r->body.empty());
  EXPECT_EQ(r->headers["x-method"], "GET");
  EXPECT_EQ(r->headers["x-auth"], "Bearer alice:secret");
  EXPECT_EQ(r->headers["x-peer"].rfind("127.0.0.1:", 0), 0u);

  Bytes body = PatternBytes(3 << 20);
  r = (*conn)->Request("PUT", "/echo", body);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->headers["x-method"], "PUT");
  EXPECT_EQ(r->headers["content-length"], std::to_string(body.size()));
  EXPECT_TRUE(r->body == body);

  r = (*conn)->Request("GET", "/nowhere");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(AsStringView(r->body), "no such route");

  // HEAD: the length of the body, not the body.
  r = (*conn)->Request("HEAD", "/nowhere");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 404);
  EXPECT_TRUE(r->body.empty());
  EXPECT_TRUE((*conn)->open());

  // Over IPv6 too.
  opts.host = "::1";
  opts.port = ParseHostPort(server_->endpoints()[1])->second;
  auto conn6 = HttpConnection::Connect(opts);
  ASSERT_TRUE(conn6.ok()) << conn6.status().ToString();
  r = (*conn6)->Request("PUT", "/echo", AsBytes("six"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(AsStringView(r->body), "six");
}

TEST_F(HttpTest, KeepsConnectionAlive) {
  StartServer();
  auto conn = ConnectOrDie();
  ASSERT_TRUE(conn);
  for (int i = 0; i < 20; ++i) {
    std::string text = "request " + std::to_string(i);
    auto r = conn->Request("POST", "/echo", AsBytes(text));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(AsStringView(r->body), text);
  }
  EXPECT_TRUE(conn->open());
  ServerStats stats = server_->stats();
  EXPECT_EQ(stats.connections_accepted, 1u);
  EXPECT_EQ(stats.requests, 20u);
  EXPECT_EQ(stats.bad_requests, 0u);
}

// Request bodies of 1 MiB and more are read into memory kept from earlier
// requests (HttpServer's body pool): each one must arrive whole and alone,
// whatever was in that memory before, on one connection and across them.
TEST_F(HttpTest, LargeBodiesInKeptMemoryArriveWhole) {
  StartServer();
  auto first = ConnectOrDie();
  auto second = ConnectOrDie();
  ASSERT_TRUE(first && second);
  const size_t sizes[] = {3 << 20, (1 << 20) + 7, 5 << 20, 2 << 20, 100, (4 << 20) + 3};
  int i = 0;
  for (size_t size : sizes) {
    for (HttpConnection* conn : {first.get(), second.get()}) {
      Bytes body(size, static_cast<uint8_t>('a' + i++));
      body.back() = '!';
      auto r = conn->Request("POST", "/echo", body);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_EQ(r->status, 200);
      EXPECT_TRUE(r->body == body) << "body of " << size << " bytes came back as "
                                   << r->body.size() << " bytes";
    }
  }
}

TEST_F(HttpTest, StreamsLargeChunkedResponse) {
  StartServer();
  auto conn = ConnectOrDie();
  ASSERT_TRUE(conn);
  const size_t size = 20 << 20;
  Bytes got;
  int pieces = 0;
  auto r = conn->RequestStreaming("GET", "/stream?size=" + std::to_string(size), {},
                                  [&](ByteSpan piece) {
                                    ++pieces;
                                    got.insert(got.end(), piece.begin(), piece.end());
                                    return Status::Ok();
                                  });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->headers["transfer-encoding"], "chunked");
  EXPECT_TRUE(r->body.empty());
  EXPECT_GT(pieces, 1);
  ASSERT_EQ(got.size(), size);
  EXPECT_TRUE(got == PatternBytes(size));

  // The connection carries on; a Content-Length body streams too.
  got.clear();
  r = conn->RequestStreaming("PUT", "/echo", AsBytes("tail"), [&](ByteSpan piece) {
    got.insert(got.end(), piece.begin(), piece.end());
    return Status::Ok();
  });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(AsStringView(got), "tail");

  // An error status's body is collected, not streamed.
  bool streamed = false;
  r = conn->RequestStreaming("GET", "/nowhere", {}, [&](ByteSpan) {
    streamed = true;
    return Status::Ok();
  });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(AsStringView(r->body), "no such route");
  EXPECT_FALSE(streamed);

  // An error from on_data aborts and closes.
  r = conn->RequestStreaming("GET", "/stream?size=1000000", {},
                             [](ByteSpan) { return AbortedError("enough"); });
  EXPECT_EQ(r.status().code(), StatusCode::kAborted);
  EXPECT_FALSE(conn->open());
  EXPECT_EQ(conn->Request("GET", "/echo").status().code(), StatusCode::kUnavailable);
}

TEST_F(HttpTest, DecodesPathAndQuery) {
  StartServer();
  auto conn = ConnectOrDie();
  ASSERT_TRUE(conn);
  std::string target = "/qu%65ry?name=" + UrlEncode("a b&c=d/é") + "&plus=1+2&x=1&x=2&flag";
  auto r = conn->Request("GET", target);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(AsStringView(r->body), "path=/query\nflag=\nname=a b&c=d/é\nplus=1 2\nx=2\n");

  int before = handled_;
  r = conn->Request("GET", "/query?bad=%zz");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 400);
  EXPECT_FALSE(conn->open());
  EXPECT_EQ(handled_, before);  // no handler saw it

  conn = ConnectOrDie();
  ASSERT_TRUE(conn);
  r = conn->Request("GET", "/a%0");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(handled_, before);
}

TEST_F(HttpTest, OversizedHeaderGets431) {
  options_.max_header_bytes = 2048;
  StartServer();
  ClientOptions opts = Client();
  opts.authorization = "Bearer " + std::string(8000, 'a');
  auto conn = HttpConnection::Connect(opts);
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  auto r = (*conn)->Request("GET", "/echo");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 431);
  EXPECT_FALSE((*conn)->open());
  EXPECT_EQ(handled_, 0);
  EXPECT_GE(server_->stats().bad_requests, 1u);
}

TEST_F(HttpTest, OversizedBodyGets413) {
  options_.max_body_bytes = 4096;
  StartServer();
  auto conn = ConnectOrDie();
  ASSERT_TRUE(conn);
  auto r = conn->Request("PUT", "/echo", Bytes(4096, 'a'));  // at the limit: fine
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  r = conn->Request("PUT", "/echo", Bytes(20000, 'a'));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 413);
  EXPECT_FALSE(conn->open());
  EXPECT_EQ(handled_, 1);
}

TEST_F(HttpTest, MalformedRequestGets400) {
  StartServer();
  RawSocket raw(port_);
  ASSERT_TRUE(raw.connected());
  ASSERT_TRUE(raw.StartTls());
  ASSERT_TRUE(raw.WriteTls("GET /echo HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n"));
  std::string got;
  EXPECT_TRUE(raw.ReadTlsUntilClosed(&got));
  EXPECT_EQ(got.rfind("HTTP/1.1 400", 0), 0u) << got;
  EXPECT_EQ(handled_, 0);
}

TEST_F(HttpTest, HonorsConnectionClose) {
  StartServer();
  RawSocket raw(port_);
  ASSERT_TRUE(raw.connected());
  ASSERT_TRUE(raw.StartTls());
  ASSERT_TRUE(raw.WriteTls("GET /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  std::string got;
  EXPECT_TRUE(raw.ReadTlsUntilClosed(&got));
  EXPECT_EQ(got.rfind("HTTP/1.1 200", 0), 0u) << got;
  EXPECT_NE(got.find("Connection: close"), std::string::npos) << got;
}

TEST_F(HttpTest, SurvivesGarbage) {
  StartServer();
  {
    RawSocket raw(port_);
    ASSERT_TRUE(raw.connected());
    std::string junk = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    Bytes noise = PatternBytes(10000);
    junk.append(reinterpret_cast<const char*>(noise.data()), noise.size());
    ASSERT_GT(::send(raw.fd(), junk.data(), junk.size(), MSG_NOSIGNAL), 0);
    char buf[256];
    (void)!::recv(raw.fd(), buf, sizeof(buf), 0);  // whatever the server says, until it closes
  }
  {
    RawSocket raw(port_);  // connect and leave at once
    ASSERT_TRUE(raw.connected());
  }
  auto conn = ConnectOrDie();
  ASSERT_TRUE(conn);
  auto r = conn->Request("GET", "/echo");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
}

TEST_F(HttpTest, RefusesTlsBelow12) {
  StartServer();
  RawSocket old(port_);
  ASSERT_TRUE(old.connected());
  EXPECT_FALSE(old.StartTls(TLS1_1_VERSION));
  RawSocket ok(port_);
  ASSERT_TRUE(ok.connected());
  EXPECT_TRUE(ok.StartTls(TLS1_2_VERSION));
}

TEST_F(HttpTest, ClosesStalledRequest) {
  // A header that never ends is cut off by the header deadline. 1.5 s: 300
  // ms could run out on a loaded machine under TSan, and 1.5 s stays well
  // inside the 5 s safety net that tells "closed by the deadline" from
  // "hung".
  options_.header_timeout = 1500ms;
  StartServer();
  RawSocket raw(port_);
  ASSERT_TRUE(raw.connected());
  ASSERT_TRUE(raw.StartTls());
  ASSERT_TRUE(raw.WriteTls("GET /echo HTTP/1.1\r\nHost: x\r\n"));  // and never the rest
  std::string got;
  EXPECT_TRUE(raw.ReadTlsUntilClosed(&got));  // closed well before the 5 s safety net
  EXPECT_EQ(handled_, 0);
  // Counted just after the close the client saw.
  for (int i = 0; i < 200 && server_->stats().bad_requests == 0; ++i) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(server_->stats().bad_requests, 1u);
}

TEST_F(HttpTest, ClosesIdleConnection) {
  options_.idle_timeout = 200ms;
  StartServer();
  auto conn = ConnectOrDie();
  ASSERT_TRUE(conn);
  ASSERT_TRUE(conn->Request("GET", "/echo").ok());
  EXPECT_EQ(server_->stats().connections_open, 1u);
  // The server closes the idle connection (well before this 5 s bound)...
  for (int i = 0; i < 500 && server_->stats().connections_open != 0; ++i) {
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_EQ(server_->stats().connections_open, 0u) << "the idle connection was not closed";
  // ...so the next request on it fails, as retryable.
  auto r = conn->Request("GET", "/echo");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
}

TEST_F(HttpTest, EnforcesMaxConnections) {
  options_.max_connections = 2;
  StartServer();
  // Each client sends a request (it is then an authenticated one, which is
  // never evicted to make room).
  auto a = ConnectOrDie();
  ASSERT_TRUE(a && a->Request("GET", "/echo").ok());
  auto b = ConnectOrDie();
  ASSERT_TRUE(b && b->Request("GET", "/echo").ok());

  auto c = HttpConnection::Connect(Client());
  EXPECT_EQ(c.status().code(), StatusCode::kUnavailable) << c.status().ToString();
  EXPECT_GE(server_->stats().connections_refused, 1u);

  // Once one goes, there is room again (after the server noticed).
  a.reset();
  bool connected = false;
  for (int i = 0; i < 100 && !connected; ++i) {
    auto d = HttpConnection::Connect(Client());
    if (d.ok() && (*d)->Request("GET", "/echo").ok()) connected = true;
    if (!connected) std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(connected);
}

TEST_F(HttpTest, RefusesUnpinnedServer) {
  StartServer();
  TempDir other;
  ASSERT_TRUE(GenerateSelfSigned(other.Join("c.pem"), other.Join("k.pem")).ok());
  std::string wrong = *CertificateFingerprint(other.Join("c.pem"));

  ClientOptions opts = Client();
  opts.fingerprint = wrong;
  auto c = HttpConnection::Connect(opts);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kPermissionDenied);
  std::string msg(c.status().message());
  EXPECT_NE(msg.find(fingerprint_), std::string::npos) << msg;
  EXPECT_NE(msg.find(wrong), std::string::npos) << msg;
  EXPECT_NE(msg.find("CAIRN_FINGERPRINT"), std::string::npos) << msg;

  opts.fingerprint = "";
  c = HttpConnection::Connect(opts);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(c.status().message().find(fingerprint_), std::string::npos);

  // The pinned form may be bare upper-case hex.
  std::string bare;
  for (char ch : fingerprint_) {
    if (ch != ':') bare += static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  }
  opts.fingerprint = bare;
  EXPECT_TRUE(HttpConnection::Connect(opts).ok());
}

TEST_F(HttpTest, FetchesServerFingerprint) {
  StartServer();
  auto fp = FetchServerFingerprint("127.0.0.1", port_, 5s);
  ASSERT_TRUE(fp.ok()) << fp.status().ToString();
  EXPECT_EQ(*fp, fingerprint_);
  // Nothing listening.
  server_->Stop();
  EXPECT_EQ(FetchServerFingerprint("127.0.0.1", port_, 2s).status().code(),
            StatusCode::kUnavailable);
}

TEST_F(HttpTest, AnswersForSilentOrThrowingHandler) {
  StartServer();
  auto conn = ConnectOrDie();
  ASSERT_TRUE(conn);
  auto r = conn->Request("GET", "/silent");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 500);
  r = conn->Request("GET", "/throw");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 500);
  r = conn->Request("GET", "/echo");  // still in service, same connection
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
}

TEST_F(HttpTest, StopsWithStreamInFlight) {
  StartServer();
  auto idle = ConnectOrDie();  // an idle keep-alive connection too
  ASSERT_TRUE(idle && idle->Request("GET", "/echo").ok());
  std::promise<void> started;
  std::thread reader([&] {
    auto conn = ConnectOrDie();
    if (!conn) return started.set_value();
    bool first = true;
    auto r = conn->RequestStreaming("GET", "/endless", {}, [&](ByteSpan) {
      if (first) started.set_value();
      first = false;
      return Status::Ok();
    });
    if (first) started.set_value();
    EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
  });
  started.get_future().wait();
  auto t0 = std::chrono::steady_clock::now();
  server_->Stop(100ms);
  server_->Wait();  // returns: Stop has finished
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  reader.join();
  EXPECT_TRUE(endless_done_);
  EXPECT_EQ(idle->Request("GET", "/echo").status().code(), StatusCode::kUnavailable);
}

TEST_F(HttpTest, SlowReaderDoesNotBlockOthers) {
  // One worker: a response the client does not take must not hold it.
  options_.worker_threads = 1;
  StartServer();
  std::promise<void> stalled;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::thread slow([&] {
    auto conn = ConnectOrDie();
    if (!conn) return stalled.set_value();
    bool first = true;
    auto r = conn->RequestStreaming("GET", "/endless", {}, [&](ByteSpan) {
      if (first) {
        first = false;
        stalled.set_value();
        released.wait();  // stop reading: the server's writes back up
        return CancelledError("done");
      }
      return Status::Ok();
    });
    if (first) stalled.set_value();
    EXPECT_EQ(r.status().code(), StatusCode::kCancelled);
  });
  stalled.get_future().wait();
  auto other = ConnectOrDie();
  ASSERT_TRUE(other);
  for (int i = 0; i < 10; ++i) {
    auto r = other->Request("PUT", "/echo", AsBytes("quick"));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(AsStringView(r->body), "quick");
  }
  release.set_value();
  slow.join();
  // The handler sees the client gone.
  for (int i = 0; i < 200 && !endless_done_; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(endless_done_);
}

TEST_F(HttpTest, RefusedRequestsAreAnsweredBeforeTheirBody) {
  admitter_ = [](const HttpRequest& h) {
    Admission a;
    if (h.headers.count("authorization") == 0) {
      a.status = 401;
      a.body = R"({"error": "who?"})";
    } else {
      a.max_body = 1000;
      a.tenant = h.headers.at("authorization");
      a.authenticated = true;
    }
    return a;
  };
  StartServer();
  for (const char* head : {"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 50000000\r\n\r\n",
                           "POST /echo HTTP/1.1\r\nHost: x\r\nAuthorization: me\r\n"
                           "Content-Length: 5000\r\n\r\n"}) {
    RawSocket raw(port_);
    ASSERT_TRUE(raw.connected() && raw.StartTls());
    ASSERT_TRUE(raw.WriteTls(head));  // and no body: the answer comes anyway
    std::string got;
    EXPECT_TRUE(raw.ReadTlsUntilClosed(&got));
    EXPECT_NE(got.find(std::string_view(head).find("Authorization") == std::string_view::npos
                           ? "HTTP/1.1 401"
                           : "HTTP/1.1 413"),
              std::string::npos)
        << got;
  }
  EXPECT_EQ(handled_, 0);
  auto c = Client();
  c.authorization = "me";
  auto conn = HttpConnection::Connect(c);
  ASSERT_TRUE(conn.ok());
  auto r = (*conn)->Request("PUT", "/echo", AsBytes("small"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
}

TEST_F(HttpTest, ATenantOverItsLimitGets429AndOthersAreServed) {
  options_.max_requests_per_tenant = 1;
  admitter_ = [](const HttpRequest& h) {
    Admission a;
    a.max_body = 1000;
    a.tenant = h.headers.count("authorization") ? h.headers.at("authorization") : "";
    a.authenticated = true;
    return a;
  };
  StartServer();
  auto as = [&](const char* who) {
    auto c = Client();
    c.authorization = who;
    auto conn = HttpConnection::Connect(c);
    EXPECT_TRUE(conn.ok());
    return conn.ok() ? std::move(*conn) : nullptr;
  };
  auto busy = as("busy");
  std::thread held([&] { EXPECT_TRUE(busy->Request("GET", "/block").ok()); });
  for (int i = 0; i < 500 && blocked_ == 0; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(blocked_, 1);
  auto again = as("busy")->Request("GET", "/echo");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->status, 429);
  auto other = as("other")->Request("GET", "/echo");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->status, 200);
  unblock_.set_value();
  held.join();
}

TEST_F(HttpTest, CapsConnectionsPerAddress) {
  ::signal(SIGPIPE, SIG_IGN);  // the refused handshake writes to a closed socket
  options_.max_connections_per_address = 2;
  StartServer();
  RawSocket a(port_), b(port_), c(port_);
  ASSERT_TRUE(a.StartTls() && b.StartTls());
  EXPECT_FALSE(c.StartTls());  // a third from 127.0.0.1: closed at once
  RawSocket d(port_, "127.0.0.2");
  EXPECT_TRUE(d.StartTls());
  EXPECT_GE(server_->stats().connections_refused, 1u);
}

TEST_F(HttpTest, EvictsTheOldestUnauthenticatedConnection) {
  options_.max_connections = 4;
  StartServer();
  // An authenticated client, then idle sockets from three addresses: the
  // unauthenticated may hold half the slots; the oldest goes first.
  auto conn = ConnectOrDie();
  ASSERT_TRUE(conn && conn->Request("GET", "/echo").ok());
  RawSocket x1(port_, "127.0.0.3"), x2(port_, "127.0.0.4"), x3(port_, "127.0.0.5");
  ASSERT_TRUE(x1.connected() && x2.connected() && x3.connected());
  char byte;
  EXPECT_EQ(::recv(x1.fd(), &byte, 1, 0), 0) << "evicted";
  EXPECT_TRUE(conn->Request("GET", "/echo").ok());
  EXPECT_GE(server_->stats().connections_evicted, 1u);
}

TEST_F(HttpTest, HandshakeTimeoutClosesSilentSockets) {
  options_.handshake_timeout = 300ms;
  StartServer();
  RawSocket silent(port_);
  ASSERT_TRUE(silent.connected());
  char byte;
  EXPECT_EQ(::recv(silent.fd(), &byte, 1, 0), 0);  // closed well before the 5 s safety net
}

TEST_F(HttpTest, ReportsBindAndCertificateErrors) {
  StartServer();
  ServerOptions o = options_;
  o.listen = {server_->endpoints()[0]};  // taken
  auto s = HttpServer::Start(o, [](const HttpRequest&, ResponseWriter&) {});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find(server_->endpoints()[0]), std::string::npos)
      << s.status().ToString();

  o.listen = {"127.0.0.1:0"};
  o.key_file = dir_.Join("missing.key");
  s = HttpServer::Start(o, [](const HttpRequest&, ResponseWriter&) {});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("missing.key"), std::string::npos) << s.status().ToString();
}

}  // namespace
}  // namespace cairn::net
