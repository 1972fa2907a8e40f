#include "cli_background.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "cli_harness.h"

extern char** environ;

namespace cairn::cli_test {

BackgroundCairn::BackgroundCairn(const std::vector<std::string>& args, std::string stderr_path,
                                 const std::vector<std::string>& env)
    : stderr_path_(std::move(stderr_path)) {
  command_ = "cairn";
  for (const auto& a : args) command_ += " " + a;
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe: " << std::strerror(errno);
    return;
  }
  std::vector<std::string> argv_s = {CairnBinary()};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_s;
  for (char** e = environ; *e != nullptr; ++e) {
    if (!std::string_view(*e).starts_with("CAIRN_REPO=")) env_s.emplace_back(*e);
  }
  env_s.insert(env_s.end(), env.begin(), env.end());
  std::vector<char*> envp;
  for (auto& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_ = ::fork();
  if (pid_ == 0) {
    int null_fd = ::open("/dev/null", O_RDONLY);
    int err_fd = ::open(stderr_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (null_fd < 0 || err_fd < 0 || ::dup2(null_fd, 0) < 0 || ::dup2(out[1], 1) < 0 ||
        ::dup2(err_fd, 2) < 0) {
      ::_exit(127);
    }
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(out[1]);
  out_fd_ = out[0];
  if (pid_ < 0) ADD_FAILURE() << "fork: " << std::strerror(errno);
}

BackgroundCairn::~BackgroundCairn() {
  if (running()) Kill();
  if (out_fd_ >= 0) ::close(out_fd_);
}

void BackgroundCairn::ReadAvailable(int timeout_ms) {
  if (out_fd_ < 0) return;
  pollfd p{out_fd_, POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) <= 0) return;
  char buf[4096];
  ssize_t n = ::read(out_fd_, buf, sizeof buf);
  if (n > 0) {
    out_.append(buf, static_cast<size_t>(n));
  } else if (n == 0) {
    ::close(out_fd_);
    out_fd_ = -1;
  }
}

int BackgroundCairn::Reap(bool block) {
  if (exited_) return exit_code_;
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, block ? 0 : WNOHANG);
  if (r != pid_) return -2;
  exited_ = true;
  exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return exit_code_;
}

std::string BackgroundCairn::WaitForLine(std::string_view text, int seconds) {
  std::string line = TryWaitForLine(text, seconds);
  if (!line.empty()) return line;
  ADD_FAILURE() << command_ << ": no line with '" << text << "' ("
                << (exited_ ? "it exited " + std::to_string(exit_code_) : "timed out")
                << ")\nstdout: " << out_ << "\nstderr: " << err();
  return "";
}

std::string BackgroundCairn::TryWaitForLine(std::string_view text, int seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (true) {
    for (size_t start = 0; start < out_.size();) {
      size_t end = out_.find('\n', start);
      if (end == std::string::npos) break;
      std::string line = out_.substr(start, end - start);
      if (line.find(text) != std::string::npos) return line;
      start = end + 1;
    }
    if (out_fd_ < 0 || std::chrono::steady_clock::now() > deadline) break;
    ReadAvailable(100);
  }
  Reap(false);
  return "";
}

int BackgroundCairn::Stop(int sig) {
  if (!running()) return exit_code_;
  ::kill(pid_, sig);
  int code = WaitExit(60);
  if (code == -2) {
    ADD_FAILURE() << command_ << " did not stop on signal " << sig << " within 60 s";
    Kill();
    return -1;
  }
  return code;
}

int BackgroundCairn::WaitExit(int seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    ReadAvailable(0);
    int code = Reap(false);
    if (code != -2) return code;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return -2;
}

void BackgroundCairn::Kill() {
  if (!running()) return;
  ::kill(pid_, SIGKILL);
  Reap(true);
}

std::string BackgroundCairn::err() const { return ReadFile(stderr_path_); }

std::string FuseUnavailableReason() {
  if (::access("/dev/fuse", R_OK | W_OK) != 0) return "no usable /dev/fuse on this machine";
  if (!MissingTools({"fusermount3"}).empty()) return "fusermount3 is not installed (fuse3)";
  return "";
}

std::string MountRefusedReason(const std::string& err) {
  // libfuse's words when mount(2) and fusermount3 are refused: a container
  // without CAP_SYS_ADMIN, a kernel without FUSE. Anything else (a bad
  // option, a cairn error) is a failure, not a reason to skip.
  for (const char* refusal : {"Operation not permitted", "Permission denied", "device not found"}) {
    if (err.find("cannot mount on") != std::string::npos &&
        err.find(refusal) != std::string::npos) {
      return "FUSE mounts are refused on this machine (" + std::string(refusal) +
             "; a container without CAP_SYS_ADMIN?): " + err;
    }
  }
  return "";
}

std::string WaitMounted(BackgroundCairn& mount) {
  if (!mount.TryWaitForLine("mounted").empty()) return "";
  mount.WaitExit(10);
  if (std::string why = MountRefusedReason(mount.err()); !why.empty()) return why;
  ADD_FAILURE() << mount.command() << ": not mounted (" << (mount.running() ? "timed out" : "it exited")
                << ")\nstdout: " << mount.out() << "\nstderr: " << mount.err();
  return "not mounted (see the failure above)";
}

bool IsMounted(const std::string& path) {
  char real[PATH_MAX];
  std::string want = ::realpath(path.c_str(), real) != nullptr ? real : path;
  std::ifstream mounts("/proc/self/mounts");
  std::string dev, dir, rest;
  while (mounts >> dev >> dir && std::getline(mounts, rest)) {
    if (dir == want || dir == path) return true;
  }
  return false;
}

bool ForceUnmount(const std::string& path) {
  if (IsMounted(path)) Shell("fusermount3 -u -z '" + path + "'");
  return !IsMounted(path);
}

std::string MissingTools(const std::vector<std::string>& tools) {
  std::string missing;
  for (const auto& t : tools) {
    if (std::system(("command -v " + t + " >/dev/null 2>&1").c_str()) != 0) {
      missing += (missing.empty() ? "" : ", ") + t;
    }
  }
  return missing;
}

ShellResult Shell(const std::string& command_line) {
  ShellResult r;
  FILE* p = ::popen((command_line + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace cairn::cli_test
