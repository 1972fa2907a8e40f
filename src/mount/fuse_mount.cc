#define FUSE_USE_VERSION 314
#include "mount/fuse_mount.h"

#include <fuse_lowlevel.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <unordered_set>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "base/mutex.h"
#include "base/read_buffer.h"
#include "base/thread_annotations.h"

namespace cairn::mount {
namespace {

constexpr double kStableTimeout = 3600;  // seconds: inside a snapshot
constexpr double kDynamicTimeout = 1;    // listings that change, `latest`

struct DirHandle;

// Open file and directory handles. The kernel sends RELEASE after a close,
// but not for handles still open (or not yet released) when the file system
// is unmounted: those are freed when the session ends.
class OpenHandles {
 public:
  void Add(void* h) {
    MutexLock lock(mu_);
    open_.insert(h);
  }
  // False when `h` was not open (never registered, or freed already).
  bool Remove(void* h) {
    MutexLock lock(mu_);
    return open_.erase(h) == 1;
  }
  std::unordered_set<void*> TakeAll() {
    MutexLock lock(mu_);
    return std::exchange(open_, {});
  }

 private:
  Mutex mu_;
  std::unordered_set<void*> open_ GUARDED_BY(mu_);
};

struct Session {
  SnapshotFs* fs;
  const FuseMountOptions* options;
  OpenHandles files;
  OpenHandles dirs;
};

Session& SessionOf(fuse_req_t req) { return *static_cast<Session*>(fuse_req_userdata(req)); }
SnapshotFs& Fs(fuse_req_t req) { return *SessionOf(req).fs; }

int ErrnoOf(const Status& s, int invalid = EINVAL) {
  switch (s.code()) {
    case StatusCode::kNotFound: return ENOENT;
    case StatusCode::kInvalidArgument: return invalid;
    case StatusCode::kFailedPrecondition:
    case StatusCode::kPermissionDenied: return EACCES;
    case StatusCode::kOutOfRange: return EINVAL;
    case StatusCode::kResourceExhausted: return ENOMEM;
    default: return EIO;
  }
}

struct stat StatOf(const Attr& a) {
  struct stat st {};
  st.st_ino = a.ino;
  st.st_mode = a.mode;
  st.st_nlink = a.nlink;
  st.st_uid = a.uid;
  st.st_gid = a.gid;
  st.st_size = static_cast<off_t>(a.size);
  st.st_rdev = a.rdev;
  st.st_blksize = a.blksize;
  st.st_blocks = static_cast<blkcnt_t>((a.allocated.value_or(a.size) + 511) / 512);
  int64_t sec = a.mtime_ns / 1'000'000'000, nsec = a.mtime_ns % 1'000'000'000;
  if (nsec < 0) {
    nsec += 1'000'000'000;
    --sec;
  }
  st.st_mtim = {sec, nsec};
  st.st_ctim = st.st_mtim;
  st.st_atim = st.st_mtim;
  return st;
}

double TimeoutOf(const Attr& a) { return a.stable ? kStableTimeout : kDynamicTimeout; }

fuse_entry_param EntryOf(const Attr& a) {
  fuse_entry_param e{};
  e.ino = a.ino;
  e.attr = StatOf(a);
  e.attr_timeout = TimeoutOf(a);
  e.entry_timeout = TimeoutOf(a);
  return e;
}

void OnInit(void*, fuse_conn_info* conn) {
  if (conn->capable & FUSE_CAP_CACHE_SYMLINKS) conn->want |= FUSE_CAP_CACHE_SYMLINKS;
  if (conn->capable & FUSE_CAP_READDIRPLUS) conn->want |= FUSE_CAP_READDIRPLUS;
  conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;  // always with attributes: `find` stats every entry
  if (conn->capable & FUSE_CAP_ASYNC_READ) conn->want |= FUSE_CAP_ASYNC_READ;
  conn->max_readahead = std::max(conn->max_readahead, 1u << 20);
}

void OnLookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  auto a = Fs(req).Lookup(parent, name);
  if (!a.ok()) {
    fuse_reply_err(req, ErrnoOf(a.status(), ENOTDIR));
    return;
  }
  fuse_entry_param e = EntryOf(*a);
  fuse_reply_entry(req, &e);
}

void OnGetattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  auto a = Fs(req).GetAttr(ino);
  if (!a.ok()) {
    fuse_reply_err(req, ErrnoOf(a.status()));
    return;
  }
  struct stat st = StatOf(*a);
  fuse_reply_attr(req, &st, TimeoutOf(*a));
}

void OnReadlink(fuse_req_t req, fuse_ino_t ino) {
  auto t = Fs(req).ReadLink(ino);
  if (!t.ok()) {
    fuse_reply_err(req, ErrnoOf(t.status()));
    return;
  }
  fuse_reply_readlink(req, t->c_str());
}

// A directory's listing, taken when it is opened.
struct DirHandle {
  uint64_t ino;
  std::vector<DirEntry> entries;
};

void OnOpendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  auto entries = Fs(req).ReadDir(ino);
  if (!entries.ok()) {
    fuse_reply_err(req, ErrnoOf(entries.status(), ENOTDIR));
    return;
  }
  auto attr = Fs(req).GetAttr(ino);
  auto* h = new DirHandle{ino, std::move(*entries)};
  fi->fh = reinterpret_cast<uint64_t>(h);
  if (attr.ok() && attr->stable) {
    fi->cache_readdir = 1;  // a snapshot's directories never change
    fi->keep_cache = 1;
  }
  SessionOf(req).dirs.Add(h);
  if (fuse_reply_open(req, fi) != 0 && SessionOf(req).dirs.Remove(h)) delete h;
}

void ReadDirImpl(fuse_req_t req, size_t size, off_t off, fuse_file_info* fi, bool plus) {
  auto* h = reinterpret_cast<DirHandle*>(fi->fh);
  std::vector<char> buf(size);
  size_t used = 0;
  const size_t total = h->entries.size() + 2;  // ".", ".." first
  for (size_t i = static_cast<size_t>(off); i < total; ++i) {
    const char* name;
    fuse_entry_param e{};
    if (i < 2) {
      name = i == 0 ? "." : "..";
      e.attr.st_ino = i == 0 ? h->ino : 0;
      e.attr.st_mode = S_IFDIR;
    } else {
      const DirEntry& d = h->entries[i - 2];
      name = d.name.c_str();
      e = EntryOf(d.attr);
    }
    const off_t next = static_cast<off_t>(i + 1);
    size_t need = plus ? fuse_add_direntry_plus(req, buf.data() + used, size - used, name, &e, next)
                       : fuse_add_direntry(req, buf.data() + used, size - used, name, &e.attr, next);
    if (need > size - used) break;
    used += need;
  }
  fuse_reply_buf(req, buf.data(), used);
}

void OnReaddir(fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info* fi) {
  ReadDirImpl(req, size, off, fi, false);
}
void OnReaddirplus(fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info* fi) {
  ReadDirImpl(req, size, off, fi, true);
}
void OnReleasedir(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  auto* h = reinterpret_cast<DirHandle*>(fi->fh);
  if (SessionOf(req).dirs.Remove(h)) delete h;
  fuse_reply_err(req, 0);
}

void OnOpen(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  if ((fi->flags & O_ACCMODE) != O_RDONLY) {
    fuse_reply_err(req, EROFS);
    return;
  }
  auto f = Fs(req).OpenFile(ino);
  if (!f.ok()) {
    fuse_reply_err(req, ErrnoOf(f.status(), EISDIR));
    return;
  }
  SnapshotFs::File* file = f->release();
  fi->fh = reinterpret_cast<uint64_t>(file);
  fi->keep_cache = 1;  // the content never changes: keep the page cache across opens
  fi->direct_io = file->direct_io() ? 1 : 0;
  SessionOf(req).files.Add(file);
  if (fuse_reply_open(req, fi) != 0 && SessionOf(req).files.Remove(file)) delete file;
}

void OnRead(fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info* fi) {
  auto* file = reinterpret_cast<SnapshotFs::File*>(fi->fh);
  thread_local ReadBuffer buf;
  buf.Resize(size);
  auto n = file->Read(static_cast<uint64_t>(off), buf.mutable_span());
  if (!n.ok()) {
    fuse_reply_err(req, ErrnoOf(n.status()));
    return;
  }
  fuse_reply_buf(req, reinterpret_cast<const char*>(buf.data()), *n);
}

// SEEK_DATA and SEEK_HOLE (the kernel answers the other kinds itself), so
// `cp` skips an image's zero chunks instead of reading them.
void OnLseek(fuse_req_t req, fuse_ino_t, off_t off, int whence, fuse_file_info* fi) {
  if ((whence != SEEK_DATA && whence != SEEK_HOLE) || off < 0) {
    fuse_reply_err(req, EINVAL);
    return;
  }
  const auto* file = reinterpret_cast<const SnapshotFs::File*>(fi->fh);
  auto to = file->Seek(static_cast<uint64_t>(off), whence == SEEK_DATA);
  if (!to.ok()) {
    fuse_reply_err(req, to.status().code() == StatusCode::kOutOfRange ? ENXIO : ErrnoOf(to.status()));
    return;
  }
  fuse_reply_lseek(req, static_cast<off_t>(*to));
}

void OnRelease(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  auto* file = reinterpret_cast<SnapshotFs::File*>(fi->fh);
  if (SessionOf(req).files.Remove(file)) delete file;
  fuse_reply_err(req, 0);
}

// getxattr/listxattr: size 0 asks for the length.
void ReplyXattr(fuse_req_t req, const std::string& value, size_t size) {
  if (size == 0) {
    fuse_reply_xattr(req, value.size());
  } else if (size < value.size()) {
    fuse_reply_err(req, ERANGE);
  } else {
    fuse_reply_buf(req, value.data(), value.size());
  }
}

void OnGetxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  auto v = Fs(req).GetXattr(ino, name);
  if (!v.ok()) {
    fuse_reply_err(req, v.status().code() == StatusCode::kNotFound ? ENODATA : ErrnoOf(v.status()));
    return;
  }
  ReplyXattr(req, *v, size);
}

void OnListxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  auto names = Fs(req).ListXattr(ino);
  if (!names.ok()) {
    fuse_reply_err(req, ErrnoOf(names.status()));
    return;
  }
  std::string all;
  for (const auto& n : *names) all.append(n).push_back('\0');
  ReplyXattr(req, all, size);
}

fuse_lowlevel_ops Operations() {
  fuse_lowlevel_ops ops{};
  ops.init = OnInit;
  ops.lookup = OnLookup;
  ops.getattr = OnGetattr;
  ops.readlink = OnReadlink;
  ops.opendir = OnOpendir;
  ops.readdir = OnReaddir;
  ops.readdirplus = OnReaddirplus;
  ops.releasedir = OnReleasedir;
  ops.open = OnOpen;
  ops.read = OnRead;
  ops.lseek = OnLseek;
  ops.release = OnRelease;
  ops.getxattr = OnGetxattr;
  ops.listxattr = OnListxattr;
  return ops;
}

}  // namespace

Result<FuseMountResult> RunFuseMount(SnapshotFs& fs, const FuseMountOptions& options,
                                     const std::function<void()>& ready) {
  // A killed FUSE daemon leaves its mount behind, answering ENOTCONN. stat
  // may still be served from the kernel's attribute cache; statfs never is.
  struct statfs sfs;
  const bool stale = ::statfs(options.mountpoint.c_str(), &sfs) != 0 && errno == ENOTCONN;
  struct stat st;
  if (stale || ::stat(options.mountpoint.c_str(), &st) != 0) {
    if (stale || errno == ENOTCONN) {
      return FailedPreconditionError(fmt::format(
          "{} is a stale mount (a cairn mount that was killed?): clear it with fusermount3 -u {}",
          options.mountpoint, options.mountpoint));
    }
    return ErrnoToStatus(errno, "mountpoint " + options.mountpoint);
  }
  if (!S_ISDIR(st.st_mode)) {
    return InvalidArgumentError(fmt::format("mountpoint {} is not a directory", options.mountpoint));
  }
  std::string opts = "ro,fsname=cairn,subtype=cairn";
  if (options.default_permissions) opts += ",default_permissions";
  if (options.allow_other) opts += ",allow_other";
  std::vector<std::string> argv_s = {"cairn", "-o", opts};
  if (options.debug) argv_s.push_back("-d");
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  fuse_args args = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());
  // fuse_session_new parses `args` into a copy libfuse allocates (allocated
  // = 1); it is ours to free, as libfuse's examples do.
  struct FreeArgs {
    fuse_args* args;
    ~FreeArgs() { fuse_opt_free_args(args); }
  } free_args{&args};
  Session session{&fs, &options, {}, {}};
  const fuse_lowlevel_ops ops = Operations();
  fuse_session* se = fuse_session_new(&args, &ops, sizeof ops, &session);
  if (se == nullptr) return InternalError("fuse_session_new failed (see libfuse's message above)");
  std::unique_ptr<fuse_session, void (*)(fuse_session*)> destroy(se, fuse_session_destroy);
  if (fuse_set_signal_handlers(se) != 0) return InternalError("cannot install signal handlers");
  if (fuse_session_mount(se, options.mountpoint.c_str()) != 0) {
    fuse_remove_signal_handlers(se);
    return FailedPreconditionError(fmt::format(
        "cannot mount on {} (is /dev/fuse there, and fuse3 installed? libfuse's message is above)",
        options.mountpoint));
  }
  ready();
  // libfuse's handlers run here: this thread waits for the loop's end; its
  // workers and every other thread keep the signals blocked.
  sigset_t stop;
  sigemptyset(&stop);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stop, sig);
  pthread_sigmask(SIG_UNBLOCK, &stop, nullptr);
  fuse_loop_config* cfg = fuse_loop_cfg_create();
  fuse_loop_cfg_set_clone_fd(cfg, 1);
  fuse_loop_cfg_set_max_threads(cfg, static_cast<unsigned>(options.max_threads));
  fuse_loop_cfg_set_idle_threads(cfg, 8);
  int rc = fuse_session_loop_mt(se, cfg);
  fuse_loop_cfg_destroy(cfg);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  FuseMountResult result;
  // libfuse returns the signal that ended the loop; 0 when the file system
  // was unmounted from outside.
  result.signal = rc > 0 ? rc : 0;
  fuse_remove_signal_handlers(se);
  fuse_session_unmount(se);
  // Handles the kernel never released (open at the unmount): freed before
  // the file system they point into goes away.
  for (void* h : session.files.TakeAll()) delete static_cast<SnapshotFs::File*>(h);
  for (void* h : session.dirs.TakeAll()) delete static_cast<DirHandle*>(h);
  if (rc < 0 && rc != -ENODEV) {
    return ErrnoToStatus(-rc, "FUSE session on " + options.mountpoint);
  }
  return result;
}

}  // namespace cairn::mount
