// A restore through `cairn serve` rides out a server restart (issue 29; a
// systemd restart or an upgrade): the server is SIGKILLed mid-restore and
// started again on the same port; the client retries its reads for its
// reconnect window, re-grants the indexes it read (the new server has
// forgotten the reader's grants: server/read_grants.h) and the restore
// completes byte for byte (a verify likewise completes, clean). When the
// server does not come back within the window (CAIRN_RECONNECT_TIMEOUT),
// the restore fails with exit 1 and an error naming the server, and leaves
// no file behind. The download is
// capped (--limit-download) so that the restore is still running when the
// server dies; the kill waits for the restore's .partial file, not a time.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include "cli_server_fixture.h"

namespace cairn::cli_test {
namespace {

class ServerRestartTest : public ServerTest {
 protected:
  // Waits (up to a minute) for `path` to exist; false when it never did or
  // `done` came first.
  static bool WaitFor(const std::string& path, const std::atomic<bool>& done) {
    for (int i = 0; i < 6000 && !done; ++i) {
      if (Exists(path)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  void KillServer() {
    ::kill(server_->pid(), SIGKILL);
    server_->Stop();  // reaps it
  }

  // A new server on the old port (the same state: certificate, tokens).
  void RestartServer(int port) {
    for (int i = 0; i < 50; ++i) {
      server_ = std::make_unique<ServerProcess>(
          std::vector<std::string>{"serve", "--listen", "127.0.0.1:" + std::to_string(port),
                                   "--store", "main=" + store(), "--store",
                                   "other=" + OtherStore(), "--state-dir", state_},
          Path("server2.err"));
      if (server_->port() == port) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ADD_FAILURE() << "could not start the server again on port " << port;
  }

  // The restore of the image of snapshot 1, 4 MiB/s at most (the image's
  // distinct chunks are about 16 MiB: 4 s or more).
  RunResult SlowRestore(const std::string& out, const std::string& window) {
    RunOptions options;
    options.env = ClientEnv(reader_);
    options.env.push_back("CAIRN_RECONNECT_TIMEOUT=" + window);
    return RunCairn({"restore", "-r", url_, Snap("vm/100", 1), "disk0.img", out,
                     "--limit-download", "4M"},
                    options);
  }
};

TEST_F(ServerRestartTest, RestoreCompletesAcrossAServerRestart) {
  const std::string out = Path("restored.img");
  const int port = server_->port();
  std::atomic<bool> done = false;
  bool killed_mid_restore = false;
  std::thread chaos([&] {
    if (!WaitFor(out + ".partial", done)) return;
    KillServer();
    killed_mid_restore = Exists(out + ".partial") && !Exists(out);
    // Down long enough for the client's quick retries (0.1 + 0.4 + 1.6 s)
    // to run out: only the reconnect window carries it across.
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    RestartServer(port);
  });
  RunResult r = SlowRestore(out, "60s");
  done = true;
  chaos.join();
  ASSERT_TRUE(killed_mid_restore) << "the restore was not running when the server died";
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(CompareFiles(image_, out), "");
  EXPECT_FALSE(Exists(out + ".partial"));
}

// The same for a verify: killed once it has fetched its first index into
// the client's cache (its chunk reads follow), back 2.5 s later.
TEST_F(ServerRestartTest, VerifyCompletesAcrossAServerRestart) {
  const int port = server_->port();
  std::atomic<bool> done = false;
  bool killed = false;
  std::thread chaos([&] {
    for (int i = 0; i < 6000 && !done && !killed; ++i) {
      std::error_code ec;
      for (auto it = std::filesystem::recursive_directory_iterator(tmp_.Join("cache"), ec);
           !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
        if (it->path().filename() == "disk0.img.fidx") killed = true;
      }
      if (!killed) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!killed) return;
    KillServer();
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    RestartServer(port);
  });
  RunOptions options;
  options.env = ClientEnv(reader_);
  RunResult r = RunCairn({"verify", "-r", url_, "--limit-download", "4M", "--json"}, options);
  done = true;
  chaos.join();
  ASSERT_TRUE(killed) << "the verify fetched no index";
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(ParseJson(r.out)["ok"], true) << r.out;
}

TEST_F(ServerRestartTest, RestoreFailsClearlyWhenTheServerDoesNotComeBack) {
  const std::string out = Path("restored.img");
  std::atomic<bool> done = false;
  bool killed_mid_restore = false;
  std::thread chaos([&] {
    if (!WaitFor(out + ".partial", done)) return;
    KillServer();
    killed_mid_restore = Exists(out + ".partial") && !Exists(out);
  });
  RunResult r = SlowRestore(out, "3s");
  done = true;
  chaos.join();
  ASSERT_TRUE(killed_mid_restore) << "the restore was not running when the server died";
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_NE(r.err.find(url_), std::string::npos) << r.Describe();
  EXPECT_NE(r.err.find("did not come back"), std::string::npos) << r.Describe();
  EXPECT_NE(r.err.find("CAIRN_RECONNECT_TIMEOUT"), std::string::npos) << r.Describe();
  // A failed restore leaves no new file.
  EXPECT_FALSE(Exists(out));
  EXPECT_FALSE(Exists(out + ".partial"));
}

}  // namespace
}  // namespace cairn::cli_test
