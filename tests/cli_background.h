// Long-running cairn processes for the integration tests of `cairn mount`,
// `cairn nbd` and `restore --instant`: started in the background, their
// stdout read line by line (they announce when they are ready), their
// stderr kept in a file; and helpers for FUSE mounts and the NBD tools.
//
// Waits are on conditions (a line appears, the process exits, a mount goes
// away), each with a generous limit that only a hang reaches.
//
// Thread safety: none; one test uses its objects from one thread.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

namespace cairn::cli_test {

class BackgroundCairn {
 public:
  // Starts `cairn ARGS…` with `env` added (CAIRN_REPO never inherited).
  BackgroundCairn(const std::vector<std::string>& args, std::string stderr_path,
                  const std::vector<std::string>& env = {});
  ~BackgroundCairn();  // SIGKILL if still running
  BackgroundCairn(const BackgroundCairn&) = delete;
  BackgroundCairn& operator=(const BackgroundCairn&) = delete;

  // The first stdout line (so far or to come) containing `text`; "" and a
  // test failure when the process exits or `seconds` pass first.
  std::string WaitForLine(std::string_view text, int seconds = 60);
  // The same without the test failure: "" when it exits or times out.
  std::string TryWaitForLine(std::string_view text, int seconds = 60);
  // Sends `sig` and waits for the exit: the exit code, -1 when a signal
  // ended it (or it had to be killed after 60 s).
  int Stop(int sig);
  // Waits up to `seconds` for it to exit by itself: the exit code, -1 for a
  // signal, -2 when it is still running.
  int WaitExit(int seconds);
  void Kill();  // SIGKILL and reap

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0 && !exited_; }
  const std::string& out() const { return out_; }
  std::string err() const;
  std::string command() const { return command_; }

 private:
  void ReadAvailable(int timeout_ms);
  int Reap(bool block);

  pid_t pid_ = -1;
  int out_fd_ = -1;
  bool exited_ = false;
  int exit_code_ = 0;
  std::string out_;
  std::string stderr_path_;
  std::string command_;
};

// Why FUSE cannot be used here ("" when it can): no /dev/fuse, no
// fusermount3.
std::string FuseUnavailableReason();
// Why a `cairn mount` whose stderr is `err` could not mount, when the
// machine refused FUSE mounts altogether (no CAP_SYS_ADMIN in a container,
// no fuse module): a reason to skip; "" for any other error.
std::string MountRefusedReason(const std::string& err);
// Waits for a `cairn mount` to say "mounted": "" once it has; the reason to
// skip when the machine refuses FUSE mounts (MountRefusedReason); otherwise
// a test failure and a non-empty reason.
std::string WaitMounted(BackgroundCairn& mount);
// True when `path` is a mount point now (/proc/self/mounts).
bool IsMounted(const std::string& path);
// fusermount3 -u -z PATH (a lazy unmount: clears a stale mount); true when
// it is no longer mounted afterwards.
bool ForceUnmount(const std::string& path);
// Which of `tools` are not on PATH, comma-separated ("" when all are).
std::string MissingTools(const std::vector<std::string>& tools);
// Runs a shell command line: its exit code (-1 on a signal) and its output
// (stdout and stderr together).
struct ShellResult {
  int exit_code = -1;
  std::string output;
};
ShellResult Shell(const std::string& command_line);

}  // namespace cairn::cli_test
