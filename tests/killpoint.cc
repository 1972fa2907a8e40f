// cairn-killpoint: runs a program and SIGKILLs it just before its Nth
// file-system (or network) write, sync, rename, unlink or create — the kill
// harness of the crash tests (tests/cli_kill_test.cc) and of bench/soak.sh.
//
//   cairn-killpoint [--kill-at N] [--events file|net|file,net]
//                   [--report FILE] [--trace] -- PROGRAM ARGS…
//
// The program runs under ptrace with a seccomp filter that stops it only
// at the system calls that change what a crash leaves (the "events"):
//   file  write/pwrite/writev to a regular file; fsync, fdatasync, syncfs,
//         sync_file_range; rename*, unlink*, rmdir, mkdir*, link*,
//         symlink*, (f)truncate, fallocate; open/openat/creat with O_CREAT
//         or O_TRUNC;
//   net   write/writev/sendto/sendmsg/sendmmsg to a socket.
// Every thread and child is traced. Events are counted over all of them in
// the order the tracer sees them; at event N (1-based) the program is
// SIGKILLed before that call runs, so everything up to event N-1 happened
// and nothing after. A kill point is therefore a number, not a time: the
// same N hits the same place of a single-threaded writer on any machine,
// and the same neighbourhood of a multi-threaded one (threads interleave).
// With N = 0 (the default) nothing is killed and the report says how many
// events the whole run had, so a test can count first and then pick
// seeded points in [1, count].
//
// The program runs with detect_leaks=0 added to ASAN_OPTIONS: LeakSanitizer
// needs ptrace at exit, which a traced process cannot have.
//
// Exit: the program's exit code, or the signal that ended it re-raised
// (SIGKILL when killed here), so a caller sees what it would have seen
// without this wrapper. SIGTERM, SIGINT, SIGHUP and SIGUSR1/2 are passed on
// to the program. 125: the harness could not start (no ptrace, no seccomp,
// an unsupported architecture); callers skip then.
//
// --report FILE: written at the end, lines "events N", "killed 0|1",
// "last DESCRIPTION" (the event killed at, or the last one counted):
// e.g. "rename /store/.chunks/ab12/ab12….tmp-77-0".
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace {

#if defined(__x86_64__)
constexpr uint32_t kAuditArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr uint32_t kAuditArch = AUDIT_ARCH_AARCH64;
#else
constexpr uint32_t kAuditArch = 0;  // unsupported: exit 125
#endif

// Classes in the filter's SECCOMP_RET_DATA.
enum Class : uint16_t {
  kFdWrite = 1,   // write family: a file or a socket, decided by the fd
  kSync = 2,      // file event
  kNamespace = 3, // file event; path in an argument
  kCreate = 4,    // open with O_CREAT/O_TRUNC (file event)
  kSend = 5,      // net event
};

struct Syscall {
  long nr;
  Class cls;
  const char* name;
  int path_arg;  // argument holding a path (-1: none)
  int fd_arg;    // argument holding an fd (-1: none)
};

const std::vector<Syscall>& Traced() {
  static const std::vector<Syscall> calls = {
      {SYS_write, kFdWrite, "write", -1, 0},
      {SYS_pwrite64, kFdWrite, "pwrite", -1, 0},
      {SYS_writev, kFdWrite, "writev", -1, 0},
      {SYS_pwritev, kFdWrite, "pwritev", -1, 0},
#ifdef SYS_pwritev2
      {SYS_pwritev2, kFdWrite, "pwritev2", -1, 0},
#endif
      {SYS_fsync, kSync, "fsync", -1, 0},
      {SYS_fdatasync, kSync, "fdatasync", -1, 0},
      {SYS_syncfs, kSync, "syncfs", -1, 0},
      {SYS_sync_file_range, kSync, "sync_file_range", -1, 0},
      {SYS_sync, kSync, "sync", -1, -1},
#ifdef SYS_rename
      {SYS_rename, kNamespace, "rename", 0, -1},
      {SYS_unlink, kNamespace, "unlink", 0, -1},
      {SYS_rmdir, kNamespace, "rmdir", 0, -1},
      {SYS_mkdir, kNamespace, "mkdir", 0, -1},
      {SYS_link, kNamespace, "link", 1, -1},
      {SYS_symlink, kNamespace, "symlink", 1, -1},
      {SYS_creat, kNamespace, "creat", 0, -1},
#endif
      {SYS_renameat, kNamespace, "renameat", 1, -1},
      {SYS_renameat2, kNamespace, "renameat2", 1, -1},
      {SYS_unlinkat, kNamespace, "unlinkat", 1, -1},
      {SYS_mkdirat, kNamespace, "mkdirat", 1, -1},
      {SYS_linkat, kNamespace, "linkat", 3, -1},
      {SYS_symlinkat, kNamespace, "symlinkat", 2, -1},
      {SYS_truncate, kNamespace, "truncate", 0, -1},
      {SYS_ftruncate, kNamespace, "ftruncate", -1, 0},
      {SYS_fallocate, kNamespace, "fallocate", -1, 0},
      {SYS_sendto, kSend, "sendto", -1, 0},
      {SYS_sendmsg, kSend, "sendmsg", -1, 0},
      {SYS_sendmmsg, kSend, "sendmmsg", -1, 0},
  };
  return calls;
}

// open/openat: traced only with O_CREAT or O_TRUNC (the flags argument).
struct OpenCall {
  long nr;
  const char* name;
  int path_arg;
  int flags_arg;
};
const std::vector<OpenCall>& TracedOpens() {
  static const std::vector<OpenCall> calls = {
#ifdef SYS_open
      {SYS_open, "open", 0, 1},
#endif
      {SYS_openat, "openat", 1, 2},
  };
  return calls;
}

std::vector<sock_filter> BuildFilter() {
  std::vector<sock_filter> f;
  auto stmt = [&](uint16_t code, uint32_t k) { f.push_back(BPF_STMT(code, k)); };
  auto jump = [&](uint16_t code, uint32_t k, uint8_t jt, uint8_t jf) {
    f.push_back(BPF_JUMP(code, k, jt, jf));
  };
  stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch));
  jump(BPF_JMP | BPF_JEQ | BPF_K, kAuditArch, 1, 0);
  stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr));
  for (const Syscall& s : Traced()) {
    jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(s.nr), 0, 1);
    stmt(BPF_RET | BPF_K, SECCOMP_RET_TRACE | s.cls);
  }
  for (const OpenCall& o : TracedOpens()) {
    // Self-contained: both branches return once the number matched.
    jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(o.nr), 0, 4);
    stmt(BPF_LD | BPF_W | BPF_ABS,
         static_cast<uint32_t>(offsetof(seccomp_data, args) + 8 * o.flags_arg));
    jump(BPF_JMP | BPF_JSET | BPF_K, O_CREAT | O_TRUNC, 0, 1);
    stmt(BPF_RET | BPF_K, SECCOMP_RET_TRACE | kCreate);
    stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  }
  stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  return f;
}

// The traced program: a signal to this wrapper goes straight on to it
// (kill is async-signal-safe), so none is lost between two waits.
volatile pid_t g_child = 0;
void OnSignal(int sig) {
  if (g_child > 0) kill(g_child, sig);
}

std::string ReadTraceeString(pid_t tid, uint64_t addr) {
  std::string out(4096, '\0');
  iovec local{out.data(), out.size()};
  iovec remote{reinterpret_cast<void*>(addr), out.size()};
  ssize_t n = process_vm_readv(tid, &local, 1, &remote, 1, 0);
  if (n <= 0) {
    // The string may end near a page end: read up to it.
    size_t to_page = 4096 - (addr & 4095);
    local.iov_len = remote.iov_len = to_page;
    n = process_vm_readv(tid, &local, 1, &remote, 1, 0);
    if (n <= 0) return "?";
  }
  out.resize(static_cast<size_t>(n));
  size_t end = out.find('\0');
  if (end != std::string::npos) out.resize(end);
  return out;
}

std::string FdTarget(pid_t tid, uint64_t fd) {
  std::string link = "/proc/" + std::to_string(tid) + "/fd/" + std::to_string(fd);
  char buf[4096];
  ssize_t n = readlink(link.c_str(), buf, sizeof buf - 1);
  if (n <= 0) return "";
  return std::string(buf, static_cast<size_t>(n));
}

bool IsFilePath(const std::string& target) {
  return !target.empty() && target[0] == '/' && target.rfind("/dev/", 0) != 0;
}

int Usage() {
  std::fprintf(stderr,
               "usage: cairn-killpoint [--kill-at N] [--events file|net|file,net] "
               "[--report FILE] [--trace] -- PROGRAM ARGS...\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t kill_at = 0;
  bool count_file = true, count_net = false, trace = false;
  std::string report_path;
  int i = 1;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a == "--kill-at" && i + 1 < argc) {
      kill_at = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--events" && i + 1 < argc) {
      std::string e = argv[++i];
      count_file = e.find("file") != std::string::npos;
      count_net = e.find("net") != std::string::npos;
      if (!count_file && !count_net) return Usage();
    } else if (a == "--report" && i + 1 < argc) {
      report_path = argv[++i];
    } else if (a == "--trace") {
      trace = true;
    } else {
      return Usage();
    }
  }
  if (i >= argc) return Usage();
  if (kAuditArch == 0) {
    std::fprintf(stderr, "cairn-killpoint: unsupported architecture\n");
    return 125;
  }

  std::vector<sock_filter> filter = BuildFilter();
  pid_t child = fork();
  if (child < 0) {
    std::perror("cairn-killpoint: fork");
    return 125;
  }
  if (child == 0) {
    if (ptrace(PTRACE_TRACEME, 0, nullptr, nullptr) != 0) _exit(125);
    raise(SIGSTOP);  // the tracer sets its options, then the filter goes on
    sock_fprog prog{static_cast<unsigned short>(filter.size()), filter.data()};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) _exit(125);
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) _exit(125);
    // LeakSanitizer stops the world with ptrace at exit, which fails under
    // this tracer and would fail a sanitized program's run: off.
    const char* asan = std::getenv("ASAN_OPTIONS");
    std::string asan_options = asan != nullptr && *asan != '\0' ? std::string(asan) + ":" : "";
    asan_options += "detect_leaks=0";
    setenv("ASAN_OPTIONS", asan_options.c_str(), 1);
    execvp(argv[i], argv + i);
    std::fprintf(stderr, "cairn-killpoint: cannot run %s: %s\n", argv[i], std::strerror(errno));
    _exit(127);
  }

  int status = 0;
  if (waitpid(child, &status, 0) != child || !WIFSTOPPED(status)) {
    std::fprintf(stderr, "cairn-killpoint: ptrace is not available here\n");
    return 125;
  }
  const long options = PTRACE_O_TRACESECCOMP | PTRACE_O_TRACECLONE | PTRACE_O_TRACEFORK |
                       PTRACE_O_TRACEVFORK | PTRACE_O_TRACEEXEC | PTRACE_O_EXITKILL;
  if (ptrace(PTRACE_SETOPTIONS, child, nullptr, reinterpret_cast<void*>(options)) != 0) {
    std::fprintf(stderr, "cairn-killpoint: PTRACE_SETOPTIONS: %s\n", std::strerror(errno));
    kill(child, SIGKILL);
    return 125;
  }

  g_child = child;
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2}) sigaction(sig, &sa, nullptr);

  std::map<long, const Syscall*> by_nr;
  for (const Syscall& s : Traced()) by_nr[s.nr] = &s;
  std::map<long, const OpenCall*> opens;
  for (const OpenCall& o : TracedOpens()) opens[o.nr] = &o;

  uint64_t events = 0;
  bool killed = false;
  std::string last;
  int child_status = 0;
  bool child_done = false;
  ptrace(PTRACE_CONT, child, nullptr, nullptr);
  for (;;) {
    pid_t tid = waitpid(-1, &status, __WALL);
    if (tid < 0) {
      if (errno == EINTR) continue;
      break;  // ECHILD: every tracee is gone
    }
    if (WIFEXITED(status) || WIFSIGNALED(status)) {
      if (tid == child) {
        child_status = status;
        child_done = true;
        g_child = 0;  // reaped: its pid may be reused
      }
      continue;
    }
    if (!WIFSTOPPED(status)) continue;
    const int sig = WSTOPSIG(status);
    const int event = status >> 16;
    int deliver = 0;
    if (sig == SIGTRAP && event == PTRACE_EVENT_SECCOMP) {
      __ptrace_syscall_info info = {};
      long got = ptrace(PTRACE_GET_SYSCALL_INFO, tid, reinterpret_cast<void*>(sizeof info), &info);
      bool counts = false;
      std::string desc;
      if (got > 0 && info.op == PTRACE_SYSCALL_INFO_SECCOMP) {
        const long nr = static_cast<long>(info.seccomp.nr);
        const uint64_t* args = info.seccomp.args;
        if (auto it = by_nr.find(nr); it != by_nr.end()) {
          const Syscall& s = *it->second;
          std::string target;
          if (s.fd_arg >= 0) target = FdTarget(tid, args[s.fd_arg]);
          if (s.path_arg >= 0) target = ReadTraceeString(tid, args[s.path_arg]);
          switch (s.cls) {
            case kFdWrite:
              counts = (count_file && IsFilePath(target)) ||
                       (count_net && target.rfind("socket:", 0) == 0);
              break;
            case kSend:
              counts = count_net;
              break;
            default:
              counts = count_file;
          }
          desc = std::string(s.name) + " " + target;
        } else if (auto ot = opens.find(nr); ot != opens.end()) {
          counts = count_file;
          desc = std::string(ot->second->name) + " " +
                 ReadTraceeString(tid, args[ot->second->path_arg]);
        }
      }
      if (counts) {
        ++events;
        last = desc;
        if (trace) std::fprintf(stderr, "cairn-killpoint: #%llu %s\n",
                                static_cast<unsigned long long>(events), desc.c_str());
        if (kill_at != 0 && events == kill_at && !killed) {
          killed = true;
          kill(child, SIGKILL);  // the whole thread group, before this call runs
        }
      }
    } else if (sig == SIGTRAP && event != 0) {
      // clone, fork, vfork, exec events: nothing to do
    } else if (sig == SIGSTOP) {
      // A new thread's or child's first stop (or a stop nobody here sends).
    } else if (sig != SIGTRAP) {
      deliver = sig;
    }
    ptrace(PTRACE_CONT, tid, nullptr, reinterpret_cast<void*>(static_cast<intptr_t>(deliver)));
  }

  if (!report_path.empty()) {
    FILE* r = std::fopen(report_path.c_str(), "w");
    if (r != nullptr) {
      std::fprintf(r, "events %llu\nkilled %d\nlast %s\n", static_cast<unsigned long long>(events),
                   killed ? 1 : 0, last.c_str());
      std::fclose(r);
    }
  }
  if (!child_done) return 125;
  if (WIFEXITED(child_status)) return WEXITSTATUS(child_status);
  const int term = WTERMSIG(child_status);
  signal(term, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, term);
  sigprocmask(SIG_UNBLOCK, &set, nullptr);
  kill(getpid(), term);
  return 128 + term;
}
