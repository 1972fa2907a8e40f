// `cairn serve` under systemd (packaging/cairn.service, Type=notify):
//   - sd_notify: READY=1 once it listens, WATCHDOG=1 every half
//     WATCHDOG_USEC, STOPPING=1 on SIGTERM, on the socket in NOTIFY_SOCKET
//     (this test plays the service manager);
//   - "log": FILE in the config: the server's log lines go to the file
//     (relative to the state directory), which SIGHUP reopens after
//     logrotate moved it away.
#include <sys/socket.h>
#include <sys/un.h>

#include "cli_server_fixture.h"

namespace cairn::cli_test {
namespace {

// A datagram socket bound to `path`, as systemd's notify socket.
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& path) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << std::strerror(errno);
  }
  ~NotifySocket() { ::close(fd_); }

  // Reads messages until one contains `what` (true) or 30 s pass.
  bool WaitFor(const std::string& what) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 200) <= 0) continue;
      char buf[4096];
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) continue;
      std::string msg(buf, static_cast<size_t>(n));
      received_ += msg + "\n---\n";
      if (msg.find(what) != std::string::npos) return true;
    }
    return false;
  }
  const std::string& received() const { return received_; }

 private:
  int fd_ = -1;
  std::string received_;
};

// Sets environment variables for the server process started in its scope.
class ScopedEnv {
 public:
  explicit ScopedEnv(std::vector<std::pair<std::string, std::string>> vars) : vars_(std::move(vars)) {
    for (const auto& [k, v] : vars_) ::setenv(k.c_str(), v.c_str(), 1);
  }
  ~ScopedEnv() {
    for (const auto& [k, v] : vars_) ::unsetenv(k.c_str());
  }

 private:
  std::vector<std::pair<std::string, std::string>> vars_;
};

TEST_F(CliTest, ServeTellsSystemdWhenReadyAliveAndStopping) {
  NotifySocket notify(Path("notify"));
  std::unique_ptr<ServerProcess> server;
  {
    ScopedEnv env({{"NOTIFY_SOCKET", Path("notify")}, {"WATCHDOG_USEC", "200000"}});
    server = std::make_unique<ServerProcess>(
        std::vector<std::string>{"serve", "--listen", "127.0.0.1:0", "--store", "main=" + store(),
                                 "--state-dir", Path("state")},
        Path("server.err"));
  }
  ASSERT_GT(server->port(), 0);
  EXPECT_TRUE(notify.WaitFor("READY=1")) << notify.received();
  EXPECT_NE(notify.received().find("STATUS=listening on https://127.0.0.1:"), std::string::npos)
      << notify.received();
  EXPECT_TRUE(notify.WaitFor("WATCHDOG=1")) << notify.received();
  EXPECT_EQ(server->Stop(), 0);
  EXPECT_TRUE(notify.WaitFor("STOPPING=1")) << notify.received();
}

TEST_F(CliTest, ServeLogsToTheConfiguredFileAndReopensItOnSighup) {
  const std::string state = Path("state");
  const std::string config = Path("server.json");
  WriteFile(config, "{\"listen\": [\"127.0.0.1:0\"], \"state_dir\": \"" + state +
                        "\", \"stores\": {\"main\": \"" + store() +
                        "\"}, \"log\": \"log/server.log\"}");
  ServerProcess server({"serve", "--config", config}, Path("server.err"));
  ASSERT_GT(server.port(), 0);
  const std::string log = state + "/log/server.log";
  EXPECT_NE(ReadFile(log).find("info: serving main=" + store()), std::string::npos) << ReadFile(log);
  // logrotate: move the file away, then SIGHUP.
  ASSERT_EQ(::rename(log.c_str(), (log + ".1").c_str()), 0);
  ASSERT_EQ(::kill(server.pid(), SIGHUP), 0);
  std::string fresh;
  for (int i = 0; i < 600 && fresh.find("reopened") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    fresh = Exists(log) ? ReadFile(log) : "";
  }
  EXPECT_NE(fresh.find("log file " + log + " reopened"), std::string::npos) << fresh;
  EXPECT_EQ(server.Stop(), 0);
  EXPECT_NE(ReadFile(log).find("info: stopped:"), std::string::npos) << ReadFile(log);
  // Nothing of it on stderr.
  EXPECT_EQ(ReadFile(Path("server.err")).find("serving"), std::string::npos);
}

}  // namespace
}  // namespace cairn::cli_test
