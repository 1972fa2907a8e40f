// S3 datastores when the endpoint fails in the middle of a restore or a
// verify (what must hold, and how to run these: cli_s3_test.cc): a TCP proxy
// in this process between cairn and the S3 server goes down, answers 500 or
// garbles a byte; cairn exits non-zero naming the endpoint or chunk, leaves
// no target, never reports a wrong file as restored, and verify reads a
// garbled chunk again instead of quarantining it.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cli_s3_fixture.h"

namespace cairn::cli_test::s3_test {
namespace {

// --- a TCP proxy that injects faults -------------------------------------------

// Forwards every connection to the S3 endpoint until `fault_at` bytes went
// from the endpoint to the client, then:
//   kDown:     cuts every connection and stops listening (connection refused);
//   kHttp500:  cuts every connection and answers every later request with an
//              S3 InternalError (HTTP 500);
//   kFlipByte: flips that one byte and carries on.
// Faults are placed by byte count, never by time.
class FaultProxy {
 public:
  enum class Fault { kDown, kHttp500, kFlipByte };

  FaultProxy(const std::string& host, const std::string& port, uint64_t fault_at, Fault fault)
      : fault_at_(fault_at), fault_(fault) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0 || res == nullptr) {
      ADD_FAILURE() << "cannot resolve " << host << ":" << port;
      return;
    }
    upstream_.assign(reinterpret_cast<const char*>(res->ai_addr), res->ai_addrlen);
    upstream_family_ = res->ai_family;
    ::freeaddrinfo(res);

    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(listen_fd_, 128) != 0 ||
        ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      ADD_FAILURE() << "proxy listen: " << std::strerror(errno);
      return;
    }
    port_ = ntohs(a.sin_port);
    accept_thread_ = std::thread([this] { AcceptLoop(); });
  }

  ~FaultProxy() {
    stop_ = true;
    if (listen_fd_ >= 0) ::shutdown(listen_fd_, SHUT_RDWR);
    if (accept_thread_.joinable()) accept_thread_.join();
    {
      std::lock_guard lock(mu_);
      for (int fd : conn_fds_) ::shutdown(fd, SHUT_RDWR);
    }
    for (auto& t : threads_) t.join();
    for (int fd : conn_fds_) ::close(fd);
    if (listen_fd_ >= 0) ::close(listen_fd_);
  }

  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  int port() const { return port_; }
  bool tripped() const { return tripped_; }
  uint64_t bytes_to_client() const { return to_client_; }
  int connections() const { return connections_; }

 private:
  void AcceptLoop() {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      int n = ::poll(&p, 1, 50);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 || (p.revents & (POLLERR | POLLHUP | POLLNVAL)) != 0) break;
      if (n == 0) continue;
      int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) {
        if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED) continue;
        break;  // shut down: the endpoint is "down"
      }
      ++connections_;
      std::lock_guard lock(mu_);
      if (tripped_ && fault_ == Fault::kHttp500) {
        threads_.emplace_back([client] { Answer500(client); });
        continue;
      }
      int server = ::socket(upstream_family_, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (server < 0 || ::connect(server, reinterpret_cast<const sockaddr*>(upstream_.data()),
                                  static_cast<socklen_t>(upstream_.size())) != 0) {
        if (server >= 0) ::close(server);
        ::close(client);
        continue;
      }
      conn_fds_.push_back(client);
      conn_fds_.push_back(server);
      threads_.emplace_back([this, client, server] { Pump(client, server, false); });
      threads_.emplace_back([this, client, server] { Pump(server, client, true); });
    }
  }

  // Copies `from` to `to` until EOF, an error or the fault.
  void Pump(int from, int to, bool to_client) {
    std::vector<char> buf(64 * 1024);
    bool failed = false;
    while (!tripped_ || fault_ == Fault::kFlipByte) {
      ssize_t n = ::read(from, buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        failed = n < 0;
        break;
      }
      if (tripped_ && fault_ != Fault::kFlipByte) break;
      size_t send_len = static_cast<size_t>(n);
      bool trip_now = false;
      if (to_client) {
        uint64_t before = to_client_.fetch_add(static_cast<uint64_t>(n));
        if (before <= fault_at_ && fault_at_ < before + static_cast<uint64_t>(n)) {
          trip_now = true;
          if (fault_ == Fault::kFlipByte) {
            buf[fault_at_ - before] = static_cast<char>(buf[fault_at_ - before] ^ 0x20);
          } else {
            send_len = static_cast<size_t>(fault_at_ - before);
          }
        }
      }
      if (!SendAll(to, buf.data(), send_len)) {
        failed = true;
        break;
      }
      if (trip_now) {
        tripped_ = true;
        if (fault_ != Fault::kFlipByte) {
          CutEverything();
          return;
        }
      }
    }
    ::shutdown(to, failed ? SHUT_RDWR : SHUT_WR);
  }

  void CutEverything() {
    std::lock_guard lock(mu_);
    if (fault_ == Fault::kDown) ::shutdown(listen_fd_, SHUT_RDWR);
    for (int fd : conn_fds_) ::shutdown(fd, SHUT_RDWR);
  }

  static bool SendAll(int fd, const char* data, size_t len) {
    while (len > 0) {
      ssize_t n = ::send(fd, data, len, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      data += n;
      len -= static_cast<size_t>(n);
    }
    return true;
  }

  // Reads one request's head and answers it with an S3 InternalError.
  static void Answer500(int fd) {
    std::string head;
    char buf[4096];
    while (!Contains(head, "\r\n\r\n") && head.size() < 65536) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 2000) <= 0) break;
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n <= 0) break;
      head.append(buf, static_cast<size_t>(n));
    }
    const std::string body =
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>InternalError</Code>"
        "<Message>injected by the test proxy</Message></Error>";
    const std::string answer =
        "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/xml"
        "\r\nContent-Length: " +
        std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
    SendAll(fd, answer.data(), answer.size());
    ::shutdown(fd, SHUT_RDWR);
    ::close(fd);
  }

  const uint64_t fault_at_;
  const Fault fault_;
  std::string upstream_;  // a sockaddr
  int upstream_family_ = AF_INET;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<bool> tripped_{false};
  std::atomic<uint64_t> to_client_{0};
  std::atomic<int> connections_{0};
  std::mutex mu_;
  std::vector<int> conn_fds_;  // closed in the destructor, after every thread ended
  std::vector<std::thread> threads_;
  std::thread accept_thread_;
};

class S3FaultTest : public S3Test {
 protected:
  void SetUp() override {
    S3Test::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    static const std::regex re(R"(http://([^/:]+):(\d+)/?)");
    std::smatch m;
    if (!std::regex_match(endpoint_, m, re)) {
      GTEST_SKIP() << "the fault proxy forwards plain http://HOST:PORT endpoints, not "
                   << endpoint_;
    }
    host_ = m[1];
    port_ = m[2];
    Init();
    // 8 incompressible chunks (32 MiB): the metadata is a small part of it.
    image_ = Path("disk.img");
    WriteChunkImage(image_, {1, 2, 3, 4, 5, 6, 7, 8});
    Backup("vm/100", 1, {"disk0.img=" + image_});
    ids_ = ImageIds(Snap("vm/100", 1), "disk0.img");
  }

  // Restores through a proxy that injects `fault` after `fault_at` bytes.
  RunResult RestoreThroughProxy(FaultProxy::Fault fault, uint64_t fault_at,
                                const std::string& target, std::string* proxy_endpoint,
                                bool* tripped) {
    FaultProxy proxy(host_, port_, fault_at, fault);
    *proxy_endpoint = "127.0.0.1:" + std::to_string(proxy.port());
    // A cache of its own: every byte of metadata comes through the proxy too.
    RunResult r = OnS3("restore", {Snap("vm/100", 1), "disk0.img", target},
                       UrlFor(bucket_, kPrefix, "http://" + *proxy_endpoint),
                       Path("proxy-cache-" + std::to_string(++restores_)));
    *tripped = proxy.tripped();
    return r;
  }

  // The failure names where (the endpoint or the bucket) or what (a chunk).
  void ExpectClearFailure(const RunResult& r, const std::string& proxy_endpoint,
                          const std::string& target) {
    RecordProperty("error", r.err.substr(0, 1000));
    EXPECT_FALSE(r.killed()) << r.Describe();
    EXPECT_NE(r.exit_code, kExitOk) << r.Describe();
    bool named = Contains(r.err, proxy_endpoint) || Contains(r.err, "s3://" + bucket_);
    for (const auto& id : ids_) named = named || Contains(r.err, id);
    EXPECT_TRUE(named) << r.Describe();
    EXPECT_FALSE(Contains(r.out, "complete")) << r.Describe();
    EXPECT_FALSE(Contains(r.out, "restored")) << r.Describe();
    EXPECT_FALSE(Exists(target)) << "a failed restore left its target\n" << r.Describe();
    EXPECT_FALSE(Exists(target + ".partial")) << r.Describe();
  }

  std::string host_, port_, image_;
  std::vector<std::string> ids_;
};

TEST_F(S3FaultTest, EndpointGoingDownMidRestoreFailsClearly) {
  std::string proxy_endpoint;
  bool tripped = false;
  const std::string target = Path("down.raw");
  RunResult r = RestoreThroughProxy(FaultProxy::Fault::kDown, 10 * kMiB + 777, target,
                                    &proxy_endpoint, &tripped);
  ASSERT_TRUE(tripped) << "the restore never read 10 MiB through the proxy\n" << r.Describe();
  ExpectClearFailure(r, proxy_endpoint, target);
  // The real endpoint still serves it.
  EXPECT_EQ(RestoreDiff(Snap("vm/100", 1), "disk0.img", image_), "");
}

TEST_F(S3FaultTest, EndpointAnsweringErrorsMidRestoreFailsClearly) {
  std::string proxy_endpoint;
  bool tripped = false;
  const std::string target = Path("errors.raw");
  RunResult r = RestoreThroughProxy(FaultProxy::Fault::kHttp500, 10 * kMiB + 777, target,
                                    &proxy_endpoint, &tripped);
  ASSERT_TRUE(tripped) << "the restore never read 10 MiB through the proxy\n" << r.Describe();
  ExpectClearFailure(r, proxy_endpoint, target);
  EXPECT_TRUE(Contains(r.err, "500") || Contains(r.err, "InternalError")) << r.Describe();
}

TEST_F(S3FaultTest, GarbledByteMidRestoreIsNeverAWrongFile) {
  std::string proxy_endpoint;
  bool tripped = false;
  const std::string target = Path("garbled.raw");
  RunResult r = RestoreThroughProxy(FaultProxy::Fault::kFlipByte, 9 * kMiB + 12345, target,
                                    &proxy_endpoint, &tripped);
  ASSERT_TRUE(tripped) << r.Describe();
  // Either a retry fetched the chunk intact, or the restore failed; never a
  // wrong file reported as restored.
  RecordProperty("exit_code", r.exit_code);
  RecordProperty("error", r.err.substr(0, 1000));
  EXPECT_FALSE(r.killed()) << r.Describe();
  if (r.exit_code == kExitOk) {
    EXPECT_EQ(CompareFiles(image_, target), "") << r.Describe();
  } else {
    EXPECT_FALSE(Exists(target)) << r.Describe();
    EXPECT_FALSE(Contains(r.out, "complete")) << r.Describe();
  }
}

// A byte damaged on the way is not damage in the store: verify reads the
// chunk again, passes, says so, and quarantines nothing.
TEST_F(S3FaultTest, GarbledByteMidVerifyIsReadAgainNotQuarantined) {
  const std::set<std::string> before = ChunkIds();
  FaultProxy proxy(host_, port_, 9 * kMiB + 12345, FaultProxy::Fault::kFlipByte);
  const std::string endpoint = "http://127.0.0.1:" + std::to_string(proxy.port());
  RunResult r = OnS3("verify", {"--no-ledger"}, UrlFor(bucket_, kPrefix, endpoint),
                     Path("verify-proxy-cache"));
  ASSERT_TRUE(proxy.tripped()) << r.Describe();
  EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "passed on a second read")) << r.Describe();
  EXPECT_EQ(ChunkIds(), before);
  for (const auto& [name, key] : ChunkObjects()) {
    EXPECT_FALSE(name.ends_with(".bad")) << key;
  }
}

}  // namespace
}  // namespace cairn::cli_test::s3_test
