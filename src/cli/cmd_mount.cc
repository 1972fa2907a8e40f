// cairn mount -r REPO MOUNTPOINT [GROUP | SNAPSHOT] [--daemon] [--allow-other]
//   [--cache SIZE] [--jobs auto|N]
// Shows snapshots as a read-only file system (FUSE 3) until unmounted
// (fusermount3 -u MOUNTPOINT) or stopped by SIGINT, SIGTERM or SIGHUP.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "access/archive_open.h"
#include "cli/access_options.h"
#include "cli/cli_util.h"
#include "mount/fuse_mount.h"
#include "mount/snapshot_fs.h"

namespace cairn::cli {
namespace {

struct MountArgs {
  std::string mountpoint;
  std::string scope;  // GROUP or SNAPSHOT, or empty
  bool daemon = false;
  bool allow_other = false;
  bool no_default_permissions = false;
  bool debug_fuse = false;
  std::string log;  // --log FILE: a daemon's stderr
  double remote_refresh_s = 5;  // --remote-refresh
  AccessOptions access;
  BenchOptions bench;
};

// --daemon: the process forks before anything starts a thread; the parent
// waits on a pipe until the child has mounted (or failed) and reports it,
// so errors still reach the terminal and the exit code.
class Daemon {
 public:
  // In the parent: waits for the child's word and returns the exit code.
  // In the child: returns nullopt and carries on.
  std::optional<int> Fork() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return std::nullopt;
    pid_t pid = ::fork();
    if (pid < 0) return std::nullopt;
    if (pid > 0) {
      ::close(fds[1]);
      std::string word;
      char buf[512];
      ssize_t n;
      while ((n = ::read(fds[0], buf, sizeof buf)) > 0) word.append(buf, static_cast<size_t>(n));
      ::close(fds[0]);
      if (word.starts_with("ok\n")) {
        std::fputs(word.c_str() + 3, stdout);
        return kExitOk;
      }
      int status = 0;
      ::waitpid(pid, &status, 0);
      return WIFEXITED(status) && WEXITSTATUS(status) != 0 ? WEXITSTATUS(status) : kExitFailure;
    }
    ::close(fds[0]);
    fd_ = fds[1];
    ::setsid();
    return std::nullopt;
  }
  // In the child, once mounted: tells the parent, lets go of the terminal
  // (stdin, stdout, and stderr unless it goes to `log`).
  void Ready(const std::string& line, const std::string& log) {
    if (fd_ < 0) return;
    std::string word = "ok\n" + line;
    if (::write(fd_, word.data(), word.size()) < 0) {
      // The parent is gone: nobody to tell.
    }
    ::close(fd_);
    fd_ = -1;
    int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    int err = log.empty() ? -1 : ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    std::fflush(stderr);
    if (null >= 0) {
      ::dup2(null, STDIN_FILENO);
      ::dup2(null, STDOUT_FILENO);
      ::dup2(err >= 0 ? err : null, STDERR_FILENO);
      ::close(null);
    }
    if (err >= 0) ::close(err);
  }
  bool child() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

Status Mount(Context& ctx, const MountArgs& args, Daemon& daemon) {
  const int64_t start = ctx.env->NowMonotonicNanos();
  CAIRN_ASSIGN_OR_RETURN(AccessSettings settings, ParseAccessOptions(args.access));
  sigset_t stop = BlockStopSignals();
  sigaddset(&stop, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  CAIRN_ASSIGN_OR_RETURN(auto store, OpenRepoWithKey(ctx));
  std::unique_ptr<store::ChunkSource> injected;
  CAIRN_ASSIGN_OR_RETURN(store::ChunkSource* source,
                         MaybeInject(args.bench.inject_latency, store->source(), &injected));
  access::ChunkCache cache({.capacity_bytes = settings.cache_bytes, .logger = ctx.logger.get()});
  mount::SnapshotFsOptions fo;
  fo.readers = {&cache, source, access::ReadaheadFor(settings.cache_bytes, settings.jobs)};
  fo.readers.readahead.cpu_workers = args.bench.cpu_workers;
  fo.store_refresh_ns = static_cast<int64_t>(args.remote_refresh_s * 1e9);
  fo.uid = ::getuid();
  fo.gid = ::getgid();
  fo.logger = ctx.logger.get();
  CAIRN_ASSIGN_OR_RETURN(auto fs, mount::SnapshotFs::Open(*store, ctx.ns, args.scope, fo));
  mount::FuseMountOptions mo;
  mo.mountpoint = args.mountpoint;
  mo.allow_other = args.allow_other;
  mo.default_permissions = !args.no_default_permissions;
  mo.debug = args.debug_fuse;
  mo.logger = ctx.logger.get();
  const std::string what = args.scope.empty() ? store->DisplayName() : args.scope;
  auto result = mount::RunFuseMount(*fs, mo, [&] {
    const double ready = static_cast<double>(ctx.env->NowMonotonicNanos() - start) / 1e9;
    std::string line;
    if (ctx.json) {
      line = nlohmann::json{{"event", "mounted"}, {"mountpoint", args.mountpoint}, {"scope", what},
                            {"pid", ::getpid()}, {"ready_seconds", ready}}
                 .dump() + "\n";
    } else {
      line = fmt::format("mounted {} at {} (ready in {:.2f} s; pid {}); unmount with fusermount3 -u {}\n",
                         what, args.mountpoint, ready, ::getpid(), args.mountpoint);
    }
    if (daemon.child()) {
      daemon.Ready(line, args.log);
    } else {
      std::fputs(line.c_str(), stdout);
      std::fflush(stdout);
    }
  });
  if (!result.ok()) return result.status();
  const access::ChunkCacheStats c = cache.stats();
  const mount::SnapshotFsStats f = fs->stats();
  fmt::print(stderr,
             "cairn mount: unmounted {} ({}); fetched {} chunks ({}), cache hits {}, joined "
             "fetches in progress {}, peak cache {}, tree views loaded {}\n",
             args.mountpoint,
             result->signal != 0 ? fmt::format("signal {}", result->signal) : "unmounted from outside",
             c.loads, HumanBytes(c.loaded_bytes), c.hits, c.joins, HumanBytes(c.peak_bytes),
             f.trees_loaded);
  return Status::Ok();
}

}  // namespace

void RegisterMount(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand(
      "mount", "show snapshots as a read-only file system (FUSE) until unmounted");
  auto args = std::make_shared<MountArgs>();
  AddRepoOptions(cmd, ctx);
  AddKeyOptions(cmd, &ctx.key);
  AddJsonOption(cmd, ctx);
  cmd->add_option("MOUNTPOINT", args->mountpoint, "an existing empty directory")->required();
  cmd->add_option("SCOPE", args->scope,
                  "only this group (TYPE/ID) or snapshot (TYPE/ID/TIME, TYPE/ID/latest); "
                  "default: every snapshot");
  cmd->add_flag("--daemon", args->daemon, "go to the background once mounted");
  cmd->add_option("--log", args->log,
                  "with --daemon: append its messages (damaged chunks, errors) to FILE "
                  "(default: dropped)");
  cmd->add_flag("--allow-other", args->allow_other,
                "let other users in (needs user_allow_other in /etc/fuse.conf unless root)");
  cmd->add_flag("--no-default-permissions", args->no_default_permissions,
                "do not have the kernel check the stored modes and owners");
  cmd->add_option("--remote-refresh", args->remote_refresh_s,
                  "on a server or object store, look for new snapshots at most every SECONDS "
                  "(default 5; a directory store is listed again after a second)")
      ->check(CLI::Range(0.0, 86400.0));
  cmd->add_flag("--debug-fuse", args->debug_fuse, "libfuse's trace of every request")
      ->group("");
  AddAccessOptions(cmd, &args->access);
  AddBenchOptions(cmd, &args->bench);
  cmd->callback([&ctx, args] {
    Daemon daemon;
    if (args->daemon) {
      if (auto code = daemon.Fork(); code.has_value()) {
        ctx.exit_code = *code;
        return;
      }
    }
    Status s = Mount(ctx, *args, daemon);
    if (!s.ok()) {
      Fail(ctx, s);
      if (daemon.child()) std::fflush(stderr);
    }
  });
}

}  // namespace cairn::cli
