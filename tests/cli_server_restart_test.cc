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
#include <functional>
#include <thread>

#include "cli_server_fixture.h"

namespace cairn::cli_test {
namespace {

class ServerRestartTest : public ServerTest {
 protected:
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

  // What RunWhileServerDies saw.
  struct ChaosRun {
    RunResult result;
    bool killed_mid_run = false;  // the kill came and `mid_run` held right after it
  };

  // Runs `command` (a client of the server) while another thread waits, up
  // to a minute, for `ready` to hold, SIGKILLs the server and asks
  // `mid_run` whether the client was still at work; with `restart`, it
  // starts the server again on its port 2.5 s later: long enough for the
  // client's quick retries (0.1 + 0.4 + 1.6 s) to run out, so only the
  // reconnect window carries the client across.
  ChaosRun RunWhileServerDies(const std::function<bool()>& ready,
                              const std::function<bool()>& mid_run, bool restart,
                              const std::function<RunResult()>& command) {
    const int port = server_->port();
    std::atomic<bool> done = false;
    bool killed_mid_run = false;
    std::thread chaos([&] {
      bool hit = false;
      for (int i = 0; i < 6000 && !done && !hit; ++i) {
        hit = ready();
        if (!hit) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      if (!hit) return;
      KillServer();
      killed_mid_run = mid_run();
      if (!restart) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(2500));
      RestartServer(port);
    });
    ChaosRun run{command()};
    done = true;
    chaos.join();
    run.killed_mid_run = killed_mid_run;
    return run;
  }

  // Kills the server once the restore to `out` has begun writing (its
  // .partial exists), checking that it had not finished.
  ChaosRun RestoreWhileServerDies(const std::string& out, const std::string& window,
                                  bool restart) {
    return RunWhileServerDies([&] { return Exists(out + ".partial"); },
                              [&] { return Exists(out + ".partial") && !Exists(out); }, restart,
                              [&] { return SlowRestore(out, window); });
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
  ChaosRun run = RestoreWhileServerDies(out, "60s", /*restart=*/true);
  ASSERT_TRUE(run.killed_mid_run) << "the restore was not running when the server died";
  ASSERT_EQ(run.result.exit_code, 0) << run.result.Describe();
  EXPECT_EQ(CompareFiles(image_, out), "");
  EXPECT_FALSE(Exists(out + ".partial"));
}

// The same for a verify: killed once it has fetched its first index into
// the client's cache (its chunk reads follow), back 2.5 s later.
TEST_F(ServerRestartTest, VerifyCompletesAcrossAServerRestart) {
  auto index_fetched = [&] {
    std::error_code ec;
    for (auto it = std::filesystem::recursive_directory_iterator(tmp_.Join("cache"), ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
      if (it->path().filename() == "disk0.img.fidx") return true;
    }
    return false;
  };
  RunOptions options;
  options.env = ClientEnv(reader_);
  ChaosRun run = RunWhileServerDies(index_fetched, [] { return true; }, /*restart=*/true, [&] {
    return RunCairn({"verify", "-r", url_, "--limit-download", "4M", "--json"}, options);
  });
  ASSERT_TRUE(run.killed_mid_run) << "the verify fetched no index";
  const RunResult& r = run.result;
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(ParseJson(r.out)["ok"], true) << r.out;
}

TEST_F(ServerRestartTest, RestoreFailsClearlyWhenTheServerDoesNotComeBack) {
  const std::string out = Path("restored.img");
  ChaosRun run = RestoreWhileServerDies(out, "3s", /*restart=*/false);
  ASSERT_TRUE(run.killed_mid_run) << "the restore was not running when the server died";
  const RunResult& r = run.result;
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
