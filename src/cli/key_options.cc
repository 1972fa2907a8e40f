#include "cli/key_options.h"

#include <dirent.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <fmt/format.h>
#include <openssl/crypto.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/env.h"
#include "base/unique_fd.h"
#include "crypto/key_file.h"

namespace cairn::cli {
namespace {

constexpr size_t kMaxPassphraseSize = 4096;

const char* GetEnv(const char* name) {
  const char* v = name ? std::getenv(name) : nullptr;
  return v && *v ? v : nullptr;
}

// Up to `max` bytes of an open file; FailedPrecondition past that.
Result<std::string> ReadAll(int fd, const std::string& what, size_t max) {
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoToStatus(errno, fmt::format("reading {}", what));
    if (n == 0) return out;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > max) {
      OPENSSL_cleanse(out.data(), out.size());
      return FailedPreconditionError(fmt::format("{} is larger than {} bytes", what, max));
    }
  }
}

Result<std::string> ReadPassphraseFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (fd.get() < 0) return ErrnoToStatus(errno, fmt::format("passphrase file {}", path));
  CAIRN_ASSIGN_OR_RETURN(
      std::string text,
      ReadAll(fd.get(), fmt::format("passphrase file {}", path), kMaxPassphraseSize));
  if (text.ends_with('\n')) text.pop_back();
  return text;
}

}  // namespace

Result<std::string> RunPasswordCommand(const std::string& command) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return ErrnoToStatus(errno, "pipe for the password command");
  UniqueFd read_end(fds[0]);
  UniqueFd write_end(fds[1]);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, write_end.get(), STDOUT_FILENO);
  const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, "/bin/sh", &actions, nullptr, const_cast<char**>(argv), ::environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return ErrnoToStatus(rc, fmt::format("starting password command `{}`", command));
  write_end = UniqueFd();  // our copy: the read ends when the command's ends
  auto text = ReadAll(read_end.get(), fmt::format("the output of password command `{}`", command),
                      kMaxPassphraseSize);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!text.ok()) return text.status();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    OPENSSL_cleanse(text->data(), text->size());
    return FailedPreconditionError(
        WIFEXITED(status)
            ? fmt::format("password command `{}` failed (exit {})", command, WEXITSTATUS(status))
            : fmt::format("password command `{}` was killed by signal {}", command,
                          WTERMSIG(status)));
  }
  if (text->ends_with('\n')) text->pop_back();
  if (text->empty()) {
    return FailedPreconditionError(fmt::format("password command `{}` printed nothing", command));
  }
  return text;
}

namespace {

// --- the terminal ----------------------------------------------------------

// The signal that interrupted a prompt; the handler only records it, so the
// prompt can restore the terminal's echo before dying of it.
volatile sig_atomic_t g_prompt_signal = 0;
void OnPromptSignal(int sig) { g_prompt_signal = sig; }

constexpr int kPromptSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

// Echo off and the signals above caught while it lives; restored after.
class EchoOff {
 public:
  explicit EchoOff(int tty) : tty_(tty) {
    g_prompt_signal = 0;
    struct sigaction sa = {};
    sa.sa_handler = OnPromptSignal;  // no SA_RESTART: read() returns EINTR
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < std::size(kPromptSignals); ++i) {
      ::sigaction(kPromptSignals[i], &sa, &saved_actions_[i]);
    }
    if (::tcgetattr(tty_, &saved_) == 0) {
      struct termios quiet = saved_;
      quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO | ECHOE | ECHOK | ECHONL);
      restore_ = ::tcsetattr(tty_, TCSAFLUSH, &quiet) == 0;
    }
  }
  ~EchoOff() {
    if (restore_) ::tcsetattr(tty_, TCSAFLUSH, &saved_);
    for (size_t i = 0; i < std::size(kPromptSignals); ++i) {
      ::sigaction(kPromptSignals[i], &saved_actions_[i], nullptr);
    }
    if (g_prompt_signal != 0) ::raise(g_prompt_signal);  // die of it, echo restored
  }
  EchoOff(const EchoOff&) = delete;
  EchoOff& operator=(const EchoOff&) = delete;

 private:
  int tty_;
  bool restore_ = false;
  struct termios saved_ = {};
  struct sigaction saved_actions_[std::size(kPromptSignals)] = {};
};

void WriteTty(int tty, std::string_view text) {
  while (!text.empty()) {
    ssize_t n = ::write(tty, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // a prompt that cannot be shown: the read still works
    text.remove_prefix(static_cast<size_t>(n));
  }
}

// One line typed on the terminal `tty` after `prompt`, not echoed.
Result<std::string> PromptLine(int tty, const std::string& prompt) {
  std::string line;
  {
    EchoOff quiet(tty);
    WriteTty(tty, prompt);
    char c;
    for (;;) {
      if (g_prompt_signal != 0) return CancelledError("passphrase prompt interrupted");
      ssize_t n = ::read(tty, &c, 1);
      if (n < 0 && errno == EINTR && g_prompt_signal == 0) continue;
      if (n < 0) {
        OPENSSL_cleanse(line.data(), line.size());
        return g_prompt_signal != 0 ? CancelledError("passphrase prompt interrupted")
                                    : ErrnoToStatus(errno, "reading the passphrase from /dev/tty");
      }
      if (n == 0 || c == '\n') break;
      line.push_back(c);
      if (line.size() > kMaxPassphraseSize) {
        OPENSSL_cleanse(line.data(), line.size());
        return InvalidArgumentError(
            fmt::format("passphrase longer than {} bytes", kMaxPassphraseSize));
      }
    }
    WriteTty(tty, "\n");
  }
  if (line.ends_with('\r')) line.pop_back();
  return line;
}

// --- writing key files -------------------------------------------------------

// Creates the missing directories above `path` with mode 0700.
Status CreateParents(const std::string& path) {
  const std::string dir = DirName(path);
  if (dir == "." || dir == "/" || dir == path) return Status::Ok();
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return Status::Ok();
    return FailedPreconditionError(fmt::format("{} is not a directory", dir));
  }
  CAIRN_RETURN_IF_ERROR(CreateParents(dir));
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return ErrnoToStatus(errno, fmt::format("creating directory {}", dir));
  }
  return Status::Ok();
}

Status WriteAllAndSync(int fd, std::string_view text, const std::string& what) {
  if (::fchmod(fd, 0600) != 0) return ErrnoToStatus(errno, fmt::format("chmod 600 {}", what));
  while (!text.empty()) {
    ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoToStatus(errno, fmt::format("writing {}", what));
    text.remove_prefix(static_cast<size_t>(n));
  }
  if (::fsync(fd) != 0) return ErrnoToStatus(errno, fmt::format("fsync {}", what));
  return Status::Ok();
}

// rename(2) that fails with EEXIST instead of replacing `to`.
int RenameNoReplace(const std::string& from, const std::string& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return 0;
  if (errno != EINVAL && errno != ENOSYS) return -1;
  // A file system without RENAME_NOREPLACE: link(2) refuses to replace too.
  if (::link(from.c_str(), to.c_str()) != 0) return -1;
  ::unlink(from.c_str());
  return 0;
}

Status SyncDirOf(const std::string& path) {
  const std::string dir = DirName(path);
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0 || ::fsync(fd.get()) != 0) {
    return ErrnoToStatus(errno, fmt::format("fsync directory {}", dir));
  }
  return Status::Ok();
}

}  // namespace

void AddKeyOptions(CLI::App* cmd, KeyOptions* options) {
  cmd->add_option("--keyfile", options->keyfile, "encryption key file (or CAIRN_KEYFILE)");
  cmd->add_option("--passphrase-file", options->passphrase_file,
                  "file holding the key's passphrase (or CAIRN_PASSPHRASE, CAIRN_PASSPHRASE_FILE)");
  cmd->add_option("--password-command", options->password_command,
                  "shell command that prints the key's passphrase, like 'pass show cairn' (or "
                  "CAIRN_PASSWORD_COMMAND)")
      ->type_name("CMD");
}

std::string NamedKeyFile(const KeyOptions& options) {
  if (!options.keyfile.empty()) return options.keyfile;
  const char* env = GetEnv("CAIRN_KEYFILE");
  return env ? env : "";
}

Result<std::string> DefaultKeyFilePath() {
  if (const char* xdg = GetEnv("XDG_CONFIG_HOME")) return JoinPath(xdg, "cairn/key.json");
  if (const char* home = GetEnv("HOME")) return JoinPath(home, ".config/cairn/key.json");
  return FailedPreconditionError(
      "no key file path given and neither XDG_CONFIG_HOME nor HOME is set: name the key file");
}

Result<std::string> ReadKeyFile(const std::string& path, KeyFileAccess access) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (fd.get() < 0) {
    if (errno == ENOENT) {
      return NotFoundError(fmt::format(
          "key file {} does not exist (create one with `cairn key create {}`)", path, path));
    }
    return ErrnoToStatus(errno, fmt::format("opening key file {}", path));
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoToStatus(errno, fmt::format("stat {}", path));
  if (!S_ISREG(st.st_mode)) {
    return FailedPreconditionError(fmt::format("key file {} is not a regular file", path));
  }
  if ((st.st_mode & 077) != 0) {
    const std::string msg =
        fmt::format("key file {} has unsafe permissions {:04o}: run chmod 600 {}", path,
                    st.st_mode & 07777, path);
    if (access == KeyFileAccess::kPrivate) {
      return FailedPreconditionError(msg + " (group and others must not read or write a key file)");
    }
    std::fflush(stdout);
    fmt::print(stderr, "cairn: warning: {}\n", msg);
  }
  return ReadAll(fd.get(), fmt::format("key file {}", path), crypto::kMaxKeyFileSize);
}

namespace {

// Removes PATH.tmp-PID files that a killed earlier write left (found by
// the kill tests, tests/cli_kill_test.cc): their process is gone, or it is
// this one (pids repeat after a reboot), whose O_EXCL create would fail.
void RemoveStaleTemporaries(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  const std::string prefix =
      (slash == std::string::npos ? path : path.substr(slash + 1)) + ".tmp-";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string digits = name.substr(prefix.size());
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const long pid = std::strtol(digits.c_str(), nullptr, 10);
    if (pid == ::getpid() || (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)) {
      ::unlink((dir + "/" + name).c_str());
    }
  }
  ::closedir(d);
}

}  // namespace

Status WriteKeyFile(const std::string& path, std::string_view text, bool replace) {
  CAIRN_RETURN_IF_ERROR(CreateParents(path));
  RemoveStaleTemporaries(path);
  const std::string tmp = fmt::format("{}.tmp-{}", path, ::getpid());
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (fd.get() < 0) return ErrnoToStatus(errno, fmt::format("creating {}", tmp));
  Status s = WriteAllAndSync(fd.get(), text, tmp);
  if (s.ok()) s = fd.Close(fmt::format("closing {}", tmp));
  if (s.ok()) {
    const int rc = replace ? ::rename(tmp.c_str(), path.c_str()) : RenameNoReplace(tmp, path);
    if (rc != 0 && errno == EEXIST) {
      s = AlreadyExistsError(
          fmt::format("{} already exists: refusing to overwrite a key file", path));
    } else if (rc != 0) {
      s = ErrnoToStatus(errno, fmt::format("renaming {} to {}", tmp, path));
    }
  }
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  return SyncDirOf(path);
}

Result<std::string> ReadPassphrase(const PassphraseSources& sources) {
  if (!sources.file.empty()) return ReadPassphraseFile(sources.file);
  if (!sources.command.empty()) return RunPasswordCommand(sources.command);
  if (const char* pass = GetEnv(sources.env)) return std::string(pass);
  if (const char* file = GetEnv(sources.file_env)) {
    auto text = ReadPassphraseFile(file);
    if (!text.ok()) return text.status().WithContext(sources.file_env);
    return text;
  }
  if (const char* command = GetEnv(sources.command_env)) {
    auto text = RunPasswordCommand(command);
    if (!text.ok()) return text.status().WithContext(sources.command_env);
    return text;
  }
  UniqueFd tty(::open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (tty.get() < 0) {
    return FailedPreconditionError(fmt::format("no passphrase for {} and no terminal to ask on: {}",
                                               sources.what, sources.how_to_give));
  }
  CAIRN_ASSIGN_OR_RETURN(std::string first, PromptLine(tty.get(), sources.prompt));
  if (!sources.confirm) return first;
  auto second = PromptLine(tty.get(), "Repeat it: ");
  const bool same = second.ok() && *second == first;
  OPENSSL_cleanse(first.data(), first.size());
  if (!second.ok()) return second.status();
  if (!same) {
    OPENSSL_cleanse(second->data(), second->size());
    return InvalidArgumentError("the two passphrases typed differ; nothing changed");
  }
  return second;
}

PassphraseSources KeyPassphraseSources(const KeyOptions& options, const std::string& path) {
  PassphraseSources s;
  s.file = options.passphrase_file;
  s.command = options.password_command;
  s.env = "CAIRN_PASSPHRASE";
  s.file_env = "CAIRN_PASSPHRASE_FILE";
  s.command_env = "CAIRN_PASSWORD_COMMAND";
  s.prompt = fmt::format("Passphrase for key {}: ", path);
  s.what = fmt::format("key file {}", path);
  s.how_to_give =
      "set CAIRN_PASSPHRASE, pass --passphrase-file FILE or --password-command CMD, or set "
      "CAIRN_PASSPHRASE_FILE or CAIRN_PASSWORD_COMMAND";
  return s;
}

Status KeyFileError(const Status& s, const std::string& path) {
  if (s.code() == StatusCode::kUnauthenticated) {
    return UnauthenticatedError(fmt::format("wrong passphrase for key file {}", path));
  }
  return s.WithContext(path);
}

Result<std::shared_ptr<const crypto::CryptConfig>> LoadKey(const KeyOptions& options) {
  const std::string path = NamedKeyFile(options);
  if (path.empty() && !options.passphrase_file.empty()) {
    // Not silently unencrypted when the user plainly meant to encrypt.
    return InvalidArgumentError(fmt::format(
        "--passphrase-file {} given but no key file: pass --keyfile PATH or set CAIRN_KEYFILE",
        options.passphrase_file));
  }
  if (path.empty() && !options.password_command.empty()) {
    return InvalidArgumentError(
        "--password-command given but no key file: pass --keyfile PATH or set CAIRN_KEYFILE");
  }
  if (path.empty()) return std::shared_ptr<const crypto::CryptConfig>();
  CAIRN_ASSIGN_OR_RETURN(std::string text, ReadKeyFile(path, KeyFileAccess::kPrivate));
  // A malformed file is reported before anyone is asked for a passphrase.
  if (auto info = crypto::ParseKeyFile(text); !info.ok()) return KeyFileError(info.status(), path);
  CAIRN_ASSIGN_OR_RETURN(std::string pass, ReadPassphrase(KeyPassphraseSources(options, path)));
  auto master = crypto::UnwrapKey(text, pass);
  OPENSSL_cleanse(pass.data(), pass.size());
  if (!master.ok()) return KeyFileError(master.status(), path);
  auto config = crypto::CryptConfig::FromMasterKey(*master);
  OPENSSL_cleanse(master->data(), master->size());
  return config;
}

}  // namespace cairn::cli
