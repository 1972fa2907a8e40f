// `cairn serve` and the remote client end to end: a real server process on
// loopback (TLS, self-signed certificate made at first start, tokens made
// with `cairn token create`), and the real client running restore, verify,
// snapshots, ls and cat against https://127.0.0.1:PORT/STORE.
//
// What must hold (docs/SERVER.md):
//   - a remote restore (one archive, and --all) is byte-identical to the
//     source, and so are ls and cat of a tree archive;
//   - remote verify finds a chunk corrupted on the server (exit 3), naming
//     it, and does not move anything on the server;
//   - a server whose fingerprint the client was not given is refused, with
//     its fingerprint in the message; a wrong fingerprint too; the trusted
//     servers file works;
//   - no token → 401, a bad secret → 401, another datastore → 403, a
//     backup token reading chunks → 403; each with a message saying so;
//   - snapshots forgotten on the server leave the client's mirror;
//   - commands that change a datastore are refused on a server for now;
//   - the server survives garbage on its port and stops cleanly on SIGTERM.
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
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "cli_fixture.h"

namespace cairn::cli_test {
namespace {

// A `cairn serve` process, started with the given arguments; waits for its
// "listening on" line. SIGTERM and a wait on destruction.
class ServerProcess {
 public:
  ServerProcess(const std::vector<std::string>& args, const std::string& stderr_path) {
    int out[2];
    if (pipe(out) != 0) {
      ADD_FAILURE() << "pipe: " << std::strerror(errno);
      return;
    }
    std::vector<std::string> argv_s = {CairnBinary()};
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
void SendRaw(int port, std::string_view bytes) {
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

TEST_F(ServerTest, SnapshotsListsWhatTheServerHas) {
  RunResult r = Remote("snapshots", {"--json"}, reader_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  nlohmann::json j = ParseJson(r.out);
  std::string text = j.dump();
  EXPECT_NE(text.find(SnapTime(1)), std::string::npos) << text;
  EXPECT_NE(text.find(SnapTime(2)), std::string::npos) << text;
}

TEST_F(ServerTest, RestoreOfAnImageIsByteIdentical) {
  std::string out = Path("restored.img");
  RunResult r = Remote("restore", {Snap("vm/100", 1), "disk0.img", out}, reader_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(CompareFiles(image_, out), "");
  // Again from the warm mirror, the latest snapshot.
  std::string out2 = Path("restored2.img");
  r = Remote("restore", {"vm/100/latest", "disk0.img", out2}, reader_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(CompareFiles(image_, out2), "");
}

TEST_F(ServerTest, RestoreAllAndTreeReadsAreByteIdentical) {
  std::string dir = Path("all");
  RunResult r = Remote("restore", {Snap("vm/100", 1), "--all", dir}, reader_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(CompareFiles(image_, dir + "/disk0.img"), "");
  EXPECT_EQ(ReadFile(dir + "/root/etc/app/config"), ReadFile(tree_ + "/etc/app/config"));
  EXPECT_EQ(ReadFile(dir + "/root/README"), ReadFile(tree_ + "/README"));

  r = Remote("ls", {Snap("vm/100", 1), "root.tree", "/etc/app"}, reader_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.out.find("config"), std::string::npos) << r.out;
  r = Remote("cat", {Snap("vm/100", 1), "root.tree", "/README"}, reader_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(r.out, ReadFile(tree_ + "/README"));
}

TEST_F(ServerTest, VerifyFindsCorruptionOnTheServerAndMovesNothing) {
  RunResult r = Remote("verify", {}, reader_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.out.find("verified"), std::string::npos) << r.Describe();

  std::vector<std::string> ids = IndexDigests(SnapshotDir(store(), Snap("vm/100", 1)) + "/disk0.img.fidx");
  ASSERT_FALSE(ids.empty());
  std::string victim = ChunkFiles(store()).at(ids[0]);
  FlipBit(victim, FileSize(victim) / 2, 3);
  r = Remote("verify", {}, reader_);
  EXPECT_EQ(r.exit_code, kExitCorruption) << r.Describe();
  EXPECT_NE((r.out + r.err).find(ids[0]), std::string::npos) << r.Describe();
  EXPECT_TRUE(Exists(victim)) << "a client must not quarantine on the server";
  // And a restore that needs it fails as corruption, leaving no target.
  std::string out = Path("bad.img");
  r = Remote("restore", {Snap("vm/100", 1), "disk0.img", out}, reader_);
  EXPECT_EQ(r.exit_code, kExitCorruption) << r.Describe();
  EXPECT_FALSE(Exists(out));
}

TEST_F(ServerTest, AnUntrustedServerIsRefusedWithItsFingerprint) {
  RunOptions options;
  options.env = ClientEnv(reader_, /*with_fingerprint=*/false);
  RunResult r = RunCairn({"snapshots", "-r", url_}, options);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find(server_->fingerprint()), std::string::npos) << r.Describe();
  EXPECT_NE(r.err.find("--fingerprint"), std::string::npos) << r.Describe();

  std::string wrong = server_->fingerprint();
  wrong[0] = wrong[0] == 'a' ? 'b' : 'a';
  r = RunCairn({"snapshots", "-r", url_, "--fingerprint", wrong}, options);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find(server_->fingerprint()), std::string::npos) << r.Describe();

  // Trusted through the servers file.
  WriteFile(tmp_.Join("servers"), "# trusted\n127.0.0.1:" + std::to_string(server_->port()) + " " +
                                      server_->fingerprint() + "\n");
  r = RunCairn({"snapshots", "-r", url_}, options);
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
}

TEST_F(ServerTest, TokensAreCheckedForEveryRequest) {
  RunResult r = Remote("snapshots", {}, "");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("401"), std::string::npos) << r.Describe();

  std::string bad = reader_.substr(0, reader_.size() - 1) + (reader_.back() == '0' ? "1" : "0");
  r = Remote("snapshots", {}, bad);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("invalid token"), std::string::npos) << r.Describe();

  std::string other = Token("other1", "other", "reader");
  r = Remote("snapshots", {}, other);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("main"), std::string::npos) << r.Describe();

  // A backup token sees only groups it owns (none here) and reads no chunk.
  std::string backup = Token("backup1", "main", "backup");
  r = Remote("snapshots", {"--json"}, backup);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(ParseJson(r.out).dump().find(SnapTime(1)), std::string::npos) << r.out;

  // A revoked token stops working at once (the server re-reads the file).
  ASSERT_EQ(Cairn({"token", "revoke", "reader1", "--state-dir", state_}).exit_code, 0);
  r = Remote("snapshots", {}, reader_);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("invalid token"), std::string::npos) << r.Describe();
}

TEST_F(ServerTest, ForgottenSnapshotsLeaveTheMirror) {
  ASSERT_EQ(Remote("snapshots", {}, reader_).exit_code, 0);
  RunResult f = OnStore("forget", {Snap("vm/100", 2)});
  ASSERT_EQ(f.exit_code, 0) << f.Describe();
  RunResult r = Remote("snapshots", {"--json"}, reader_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  std::string text = ParseJson(r.out).dump();
  EXPECT_EQ(text.find(SnapTime(2)), std::string::npos) << text;
  EXPECT_NE(text.find(SnapTime(1)), std::string::npos) << text;
}

TEST_F(ServerTest, ChangesThroughTheServerAreRefusedForNow) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"backup", "--id", "vm/200", "disk0.img=" + image_}, {"gc"}, {"prune", "--keep-last", "1"}}) {
    std::vector<std::string> rest(args.begin() + 1, args.end());
    RunResult r = Remote(args[0], rest, reader_);
    EXPECT_NE(r.exit_code, 0) << r.Describe();
    EXPECT_NE(r.err.find("not supported yet"), std::string::npos) << r.Describe();
  }
  RunResult r = Cairn({"init", url_});
  EXPECT_NE(r.exit_code, 0);
}

TEST_F(ServerTest, SurvivesGarbageAndStopsCleanly) {
  SendRaw(server_->port(), "GET / HTTP/1.1\r\nHost: x\r\n\r\n");  // plain HTTP on a TLS port
  SendRaw(server_->port(), std::string(100000, '\x16'));
  SendRaw(server_->port(), "");
  EXPECT_TRUE(server_->alive());
  RunResult r = Remote("snapshots", {}, reader_);
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(server_->Stop(), 0);
}

TEST_F(ServerTest, AServerGoneMidRestoreIsAClearErrorAndLeavesNoTarget) {
  std::string out = Path("cut.img");
  RunOptions options;
  options.env = ClientEnv(reader_);
  int polls = 0;
  // Injected latency makes the restore last a few seconds; the server goes
  // away early in it.
  options.poll = [&](pid_t) {
    if (++polls == 400) server_->Stop();
    return false;
  };
  RunResult r = RunCairn({"restore", "-r", url_, Snap("vm/100", 1), "disk0.img", out,
                          "--jobs", "1", "--inject-latency", "300"},
                         options);
  EXPECT_NE(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.exit_code, kExitCorruption) << "a server that went away is not corruption";
  EXPECT_NE(r.err.find("127.0.0.1"), std::string::npos) << r.Describe();
  EXPECT_FALSE(Exists(out));
  EXPECT_FALSE(Exists(out + ".partial"));
}

TEST_F(ServerTest, CertShowPrintsTheServersFingerprint) {
  RunResult r = Cairn({"cert", "show", "--state-dir", state_});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.out.find(server_->fingerprint()), std::string::npos) << r.out;
}

}  // namespace
}  // namespace cairn::cli_test
