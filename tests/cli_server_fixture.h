// Fixture for the tests of `cairn serve` and the remote client: a real
// server process on loopback (ServerProcess), tokens made with `cairn token
// create`, a client environment with its own cache, and a datastore with two
// snapshots of group vm/100 (an image and a tree) made in SetUp.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "cli_fixture.h"

namespace cairn::cli_test {

// A `cairn serve` process, started with the given arguments (as WRAPPER…
// cairn ARGS… when `wrapper` is given: cairn-killpoint, tests/cli_kill.h);
// waits for its "listening on" line. SIGTERM and a wait on destruction.
class ServerProcess {
 public:
  ServerProcess(const std::vector<std::string>& args, const std::string& stderr_path,
                const std::vector<std::string>& wrapper = {}) {
    int out[2];
    if (pipe(out) != 0) {
      ADD_FAILURE() << "pipe: " << std::strerror(errno);
      return;
    }
    std::vector<std::string> argv_s = wrapper;
    argv_s.push_back(CairnBinary());
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], 1);
      int err = open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (err >= 0) dup2(err, 2);
      close(out[0]);
      std::vector<char*> argv;
      for (auto& a : argv_s) argv.push_back(a.data());
      argv.push_back(nullptr);
      unsetenv("CAIRN_REPO");
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(out[1]);
    fd_ = out[0];
    // Read until the line that says where it listens (at most 60 s: the
    // first start makes a certificate).
    std::string text;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (text.find('\n') == std::string::npos && std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 200) <= 0) continue;
      char buf[512];
      ssize_t n = read(fd_, buf, sizeof buf);
      if (n <= 0) break;
      text.append(buf, static_cast<size_t>(n));
    }
    std::smatch m;
    std::regex re(R"(listening on https://127\.0\.0\.1:(\d+) \(certificate fingerprint ([0-9a-f:]+)\))");
    if (!std::regex_search(text, m, re)) {
      ADD_FAILURE() << "the server did not say where it listens: " << text << "\nstderr: "
                    << ReadFile(stderr_path);
      return;
    }
    port_ = std::stoi(m[1]);
    fingerprint_ = m[2];
  }

  ~ServerProcess() {
    if (pid_ > 0 && !stopped_) Stop();
    if (fd_ >= 0) close(fd_);
  }

  // True once the process has ended by itself (reaped: Stop and the
  // destructor do nothing more).
  bool Ended() {
    if (stopped_) return true;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) != pid_) return false;
    stopped_ = true;
    return true;
  }

  // SIGTERM, then the exit status (-1 when it had to be killed).
  int Stop() {
    stopped_ = true;
    kill(pid_, SIGTERM);
    for (int i = 0; i < 300; ++i) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    return -1;
  }

  bool alive() const { return pid_ > 0 && kill(pid_, 0) == 0; }
  pid_t pid() const { return pid_; }
  int port() const { return port_; }
  const std::string& fingerprint() const { return fingerprint_; }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  int port_ = 0;
  std::string fingerprint_;
  bool stopped_ = false;
};

// Sends raw bytes to 127.0.0.1:port and closes.
inline void SendRaw(int port, std::string_view bytes) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    ssize_t n = write(s, bytes.data(), bytes.size());
    (void)n;
    char buf[256];
    pollfd p{s, POLLIN, 0};
    if (poll(&p, 1, 2000) > 0) {
      n = read(s, buf, sizeof buf);
    }
  }
  close(s);
}

class ServerTest : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    state_ = Path("state");
    image_ = Path("disk.img");
    ImageWriter(image_, 10 * kChunk + 12345, 7)
        .Random(0, 3 * kChunk)
        .Text(3 * kChunk, 3 * kChunk)
        .Copy(0, 7 * kChunk, kChunk)
        .Random(8 * kChunk + 100, kChunk);
    tree_ = Path("tree");
    std::filesystem::create_directories(tree_ + "/etc/app");
    WriteFile(tree_ + "/etc/app/config", "port = 8007\nname = cairn\n");
    WriteFile(tree_ + "/README", std::string(300000, 'r'));
    symlink("etc/app/config", (tree_ + "/link").c_str());
    Backup("vm/100", 1, {"disk0.img=" + image_, "root.tree=" + tree_}, false);
    Backup("vm/100", 2, {"disk0.img=" + image_}, false);
    reader_ = Token("reader1", "main", "reader");
    server_ = std::make_unique<ServerProcess>(
        std::vector<std::string>{"serve", "--listen", "127.0.0.1:0", "--store", "main=" + store(),
                                 "--store", "other=" + OtherStore(), "--state-dir", state_},
        Path("server.err"));
    ASSERT_GT(server_->port(), 0);
    url_ = "https://127.0.0.1:" + std::to_string(server_->port()) + "/main";
  }

  std::string OtherStore() {
    std::string other = Path("other");
    if (!Exists(other)) {
      EXPECT_EQ(Cairn({"init", other}).exit_code, 0);
    }
    return other;
  }

  // cairn token create …; returns NAME:SECRET.
  std::string Token(const std::string& name, const std::string& store, const std::string& role) {
    RunResult r = Cairn({"token", "create", name, "--state-dir", state_, "--store", store,
                         "--role", role});
    EXPECT_EQ(r.exit_code, 0) << r.Describe();
    std::string line = r.out.substr(0, r.out.find('\n'));
    EXPECT_EQ(line.rfind(name + ":", 0), 0u) << r.out;
    return line;
  }

  // The environment of a client: its own cache, no trusted-servers file.
  std::vector<std::string> ClientEnv(const std::string& token, bool with_fingerprint = true) const {
    std::vector<std::string> env = {"CAIRN_CACHE_DIR=" + tmp_.Join("cache"),
                                    "CAIRN_TRUSTED_SERVERS=" + tmp_.Join("servers"),
                                    "CAIRN_TOKEN=" + token};
    if (with_fingerprint) env.push_back("CAIRN_FINGERPRINT=" + server_->fingerprint());
    return env;
  }

  // cairn VERB -r URL ARGS… as a client with `token`.
  RunResult Remote(const std::string& verb, std::vector<std::string> args,
                   const std::string& token) const {
    std::vector<std::string> full = {verb, "-r", url_};
    full.insert(full.end(), args.begin(), args.end());
    RunOptions options;
    options.env = ClientEnv(token);
    return RunCairn(full, options);
  }

  std::string state_;
  std::string image_;
  std::string tree_;
  std::string reader_;
  std::string url_;
  std::unique_ptr<ServerProcess> server_;
};

}  // namespace cairn::cli_test
