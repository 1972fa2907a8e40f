#include "tree/fs_meta.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <grp.h>
#include <pwd.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "base/unique_fd.h"

namespace cairn::tree {
namespace {

constexpr size_t kMaxOwnerName = 255;
constexpr size_t kMaxLinkTarget = 4095;

// A path naming `name` in `dirfd` for the l*xattr calls: the kernel resolves
// /proc/self/fd/N to the directory itself, and the l-variants do not follow
// a final symlink. With AT_FDCWD, `name` is already such a path.
std::string ProcPath(int dirfd, const std::string& name) {
  if (dirfd == AT_FDCWD) return name;
  return fmt::format("/proc/self/fd/{}/{}", dirfd, name);
}

// Regular files and directories are opened (never a device: opening one can
// have side effects) so the xattr calls work on the fd; -1 when that fails
// (e.g. an unreadable file as non-root), and the caller falls back to the
// path.
int OpenForXattrs(int dirfd, const std::string& name, mode_t mode) {
  if (!S_ISREG(mode) && !S_ISDIR(mode)) return -1;
  return ::openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
}

bool NoXattrSupport(int err) { return err == ENOTSUP || err == ENOSYS; }

// Runs `call(buffer, size)` (a list or get xattr call) with a buffer that
// grows until the result fits. nullopt with errno set on failure.
template <typename Call>
std::optional<std::string> ReadGrowing(Call call) {
  std::string buf;
  for (int attempt = 0; attempt < 8; ++attempt) {
    ssize_t need = call(nullptr, 0);
    if (need < 0) return std::nullopt;
    buf.resize(static_cast<size_t>(need) + 1);
    ssize_t got = call(buf.data(), buf.size());
    if (got >= 0) {
      buf.resize(static_cast<size_t>(got));
      return buf;
    }
    if (errno != ERANGE) return std::nullopt;  // ERANGE: it grew meanwhile
  }
  errno = ERANGE;
  return std::nullopt;
}

Result<std::vector<Xattr>> ReadXattrsOf(int dirfd, const std::string& name, mode_t mode) {
  UniqueFd fd(OpenForXattrs(dirfd, name, mode));
  const std::string path = ProcPath(dirfd, name);
  auto list = ReadGrowing([&](char* buf, size_t size) {
    return fd.get() >= 0 ? ::flistxattr(fd.get(), buf, size)
                         : ::llistxattr(path.c_str(), buf, size);
  });
  if (!list) {
    if (NoXattrSupport(errno)) return std::vector<Xattr>();
    return ErrnoToStatus(errno, fmt::format("{}: list xattrs", name));
  }
  std::vector<Xattr> out;
  for (size_t pos = 0; pos < list->size();) {
    size_t end = list->find('\0', pos);
    if (end == std::string::npos) end = list->size();
    std::string key = list->substr(pos, end - pos);
    pos = end + 1;
    if (key.empty()) continue;
    auto value = ReadGrowing([&](char* buf, size_t size) {
      return fd.get() >= 0 ? ::fgetxattr(fd.get(), key.c_str(), buf, size)
                           : ::lgetxattr(path.c_str(), key.c_str(), buf, size);
    });
    if (!value) {
      if (errno == ENODATA) continue;  // removed since it was listed
      if (NoXattrSupport(errno)) return std::vector<Xattr>();
      return ErrnoToStatus(errno, fmt::format("{}: read xattr {}", name, key));
    }
    if (value->size() > kMaxXattrValue) {
      return InvalidArgumentError(
          fmt::format("{}: xattr {} has {} bytes, more than the {} a "
                      "tree archive stores",
                      name, key, value->size(), kMaxXattrValue));
    }
    out.push_back(Xattr{std::move(key), std::move(*value)});
  }
  if (out.size() > kMaxXattrs) {
    return InvalidArgumentError(
        fmt::format("{}: {} xattrs, more than the {} a tree archive "
                    "stores",
                    name, out.size(), kMaxXattrs));
  }
  std::sort(out.begin(), out.end(), [](const Xattr& a, const Xattr& b) { return a.name < b.name; });
  return out;
}

int64_t MtimeNs(const struct stat& st) {
  int64_t ns;
  if (__builtin_mul_overflow(static_cast<int64_t>(st.st_mtim.tv_sec), int64_t{1'000'000'000},
                             &ns) ||
      __builtin_add_overflow(ns, static_cast<int64_t>(st.st_mtim.tv_nsec), &ns)) {
    return st.st_mtim.tv_sec < 0 ? INT64_MIN : INT64_MAX;  // beyond ±292 years: saturate
  }
  return ns;
}

Result<std::string> ReadLinkTarget(int dirfd, const std::string& name, const struct stat& st) {
  // st_size is the target's length on most filesystems, 0 on some.
  std::string buf(std::max<size_t>(static_cast<size_t>(st.st_size), 255) + 1, '\0');
  while (true) {
    ssize_t n = ::readlinkat(dirfd, name.c_str(), buf.data(), buf.size());
    if (n < 0) return ErrnoToStatus(errno, fmt::format("{}: readlink", name));
    if (static_cast<size_t>(n) < buf.size()) {
      buf.resize(static_cast<size_t>(n));
      break;
    }
    if (buf.size() > kMaxLinkTarget + 1) break;  // too long either way
    buf.resize(buf.size() * 2);
  }
  if (buf.empty() || buf.size() > kMaxLinkTarget) {
    return InvalidArgumentError(
        fmt::format("{}: symlink target of {} bytes not storable (1 to "
                    "{} bytes)",
                    name, buf.size(), kMaxLinkTarget));
  }
  return buf;
}

// Id ↔ name caches. A process restores or backs up one machine's files, so
// the maps stay small (one entry per distinct owner).
struct NameCache {
  std::mutex mu;
  std::unordered_map<uint32_t, std::string> user_names, group_names;
  std::unordered_map<std::string, std::optional<uint32_t>> uids, gids;
};

NameCache& Cache() {
  static NameCache* cache = new NameCache();  // never destroyed: used until exit
  return *cache;
}

size_t LookupBufferSize() {
  long n = ::sysconf(_SC_GETPW_R_SIZE_MAX);
  return n > 0 ? static_cast<size_t>(n) : 16384;
}

// Calls a getpw*_r/getgr*_r style `lookup(buf, size, &result_ptr)` with a
// growing buffer; true when an entry was found.
template <typename Lookup>
bool LookupGrowing(Lookup lookup) {
  std::string buf(LookupBufferSize(), '\0');
  while (true) {
    int err = lookup(buf.data(), buf.size());
    if (err != ERANGE || buf.size() >= (size_t{1} << 20)) return err == 0;
    buf.resize(buf.size() * 2);
  }
}

std::string CheckedName(const char* name) {
  if (name == nullptr) return "";
  std::string s(name);
  return s.size() > kMaxOwnerName ? std::string() : s;
}

std::optional<uint32_t> UidOf(const std::string& user) {
  NameCache& c = Cache();
  std::lock_guard lock(c.mu);
  auto it = c.uids.find(user);
  if (it != c.uids.end()) return it->second;
  std::optional<uint32_t> uid;
  LookupGrowing([&](char* buf, size_t size) {
    struct passwd pw, *found = nullptr;
    int err = ::getpwnam_r(user.c_str(), &pw, buf, size, &found);
    if (err == 0 && found != nullptr) uid = found->pw_uid;
    return err;
  });
  c.uids.emplace(user, uid);
  return uid;
}

std::optional<uint32_t> GidOf(const std::string& group) {
  NameCache& c = Cache();
  std::lock_guard lock(c.mu);
  auto it = c.gids.find(group);
  if (it != c.gids.end()) return it->second;
  std::optional<uint32_t> gid;
  LookupGrowing([&](char* buf, size_t size) {
    struct group gr, *found = nullptr;
    int err = ::getgrnam_r(group.c_str(), &gr, buf, size, &found);
    if (err == 0 && found != nullptr) gid = found->gr_gid;
    return err;
  });
  c.gids.emplace(group, gid);
  return gid;
}

std::string Shown(const Entry& e) { return e.path.empty() ? std::string(".") : e.path; }

struct timespec MtimeSpec(int64_t mtime_ns) {
  struct timespec t;
  t.tv_sec = static_cast<time_t>(mtime_ns / 1'000'000'000);
  t.tv_nsec = static_cast<long>(mtime_ns % 1'000'000'000);
  if (t.tv_nsec < 0) {  // before 1970: floor division
    t.tv_nsec += 1'000'000'000;
    --t.tv_sec;
  }
  return t;
}

bool IsRefusedXattr(int err) {
  return err == ENOTSUP || err == EPERM || err == EACCES || err == E2BIG || err == ENOSYS;
}

Status ApplyXattrs(int dirfd, const std::string& name, const Entry& e,
                   std::vector<std::string>* warnings) {
  if (e.xattrs.empty()) return Status::Ok();
  const mode_t type = e.kind == EntryKind::kDirectory ? S_IFDIR
                      : e.kind == EntryKind::kFile    ? S_IFREG
                                                      : 0;
  UniqueFd fd(OpenForXattrs(dirfd, name, type));
  const std::string path = ProcPath(dirfd, name);
  for (const Xattr& x : e.xattrs) {
    int rc = fd.get() >= 0
                 ? ::fsetxattr(fd.get(), x.name.c_str(), x.value.data(), x.value.size(), 0)
                 : ::lsetxattr(path.c_str(), x.name.c_str(), x.value.data(), x.value.size(), 0);
    if (rc == 0) continue;
    if (!IsRefusedXattr(errno)) {
      return ErrnoToStatus(errno, fmt::format("{}: set xattr {}", Shown(e), x.name));
    }
    if (warnings != nullptr) {
      warnings->push_back(
          fmt::format("{}: xattr {} not restored: {}", Shown(e), x.name, std::strerror(errno)));
    }
  }
  return Status::Ok();
}

}  // namespace

std::string UserName(uint32_t uid) {
  NameCache& c = Cache();
  std::lock_guard lock(c.mu);
  auto it = c.user_names.find(uid);
  if (it != c.user_names.end()) return it->second;
  std::string name;
  LookupGrowing([&](char* buf, size_t size) {
    struct passwd pw, *found = nullptr;
    int err = ::getpwuid_r(uid, &pw, buf, size, &found);
    if (err == 0 && found != nullptr) name = CheckedName(found->pw_name);
    return err;
  });
  c.user_names.emplace(uid, name);
  return name;
}

std::string GroupName(uint32_t gid) {
  NameCache& c = Cache();
  std::lock_guard lock(c.mu);
  auto it = c.group_names.find(gid);
  if (it != c.group_names.end()) return it->second;
  std::string name;
  LookupGrowing([&](char* buf, size_t size) {
    struct group gr, *found = nullptr;
    int err = ::getgrgid_r(gid, &gr, buf, size, &found);
    if (err == 0 && found != nullptr) name = CheckedName(found->gr_name);
    return err;
  });
  c.group_names.emplace(gid, name);
  return name;
}

Result<std::vector<Xattr>> ReadXattrs(int dirfd, const std::string& name) {
  struct stat st;
  if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return ErrnoToStatus(errno, fmt::format("{}: lstat", name));
  }
  return ReadXattrsOf(dirfd, name, st.st_mode);
}

Result<Entry> CaptureEntry(int dirfd, const std::string& name, const std::string& path,
                           const struct stat& st, bool with_xattrs) {
  Entry e;
  e.name = name;
  e.path = path;
  switch (st.st_mode & S_IFMT) {
    case S_IFDIR:
      e.kind = EntryKind::kDirectory;
      break;
    case S_IFREG:
      e.kind = EntryKind::kFile;
      break;
    case S_IFLNK:
      e.kind = EntryKind::kSymlink;
      break;
    case S_IFCHR:
      e.kind = EntryKind::kCharDevice;
      break;
    case S_IFBLK:
      e.kind = EntryKind::kBlockDevice;
      break;
    case S_IFIFO:
      e.kind = EntryKind::kFifo;
      break;
    case S_IFSOCK:
      return InvalidArgumentError(fmt::format("{}: socket, skipped", name));
    default:
      return InvalidArgumentError(
          fmt::format("{}: unknown file type 0{:o}, skipped", name, st.st_mode & S_IFMT));
  }
  e.mode = st.st_mode & 07777;
  e.uid = st.st_uid;
  e.gid = st.st_gid;
  e.user = UserName(e.uid);
  e.group = GroupName(e.gid);
  e.mtime_ns = MtimeNs(st);
  if (e.kind == EntryKind::kFile) e.size = static_cast<uint64_t>(st.st_size);
  if (e.kind == EntryKind::kCharDevice || e.kind == EntryKind::kBlockDevice) e.rdev = st.st_rdev;
  if (e.kind == EntryKind::kSymlink) {
    CAIRN_ASSIGN_OR_RETURN(e.link_target, ReadLinkTarget(dirfd, name, st));
  }
  if (with_xattrs) {
    CAIRN_ASSIGN_OR_RETURN(e.xattrs, ReadXattrsOf(dirfd, name, st.st_mode));
  }
  return e;
}

Status ApplyMetadata(int dirfd, const std::string& name, const Entry& e,
                     const ApplyOptions& options, std::vector<std::string>* warnings) {
  if (options.owner && ::geteuid() == 0) {
    uint32_t uid = e.uid, gid = e.gid;
    if (options.by_name) {
      if (auto u = e.user.empty() ? std::nullopt : UidOf(e.user)) uid = *u;
      if (auto g = e.group.empty() ? std::nullopt : GidOf(e.group)) gid = *g;
    }
    if (::fchownat(dirfd, name.c_str(), uid, gid, AT_SYMLINK_NOFOLLOW) != 0) {
      return ErrnoToStatus(errno, fmt::format("{}: chown {}:{}", Shown(e), uid, gid));
    }
  }
  if (e.kind != EntryKind::kSymlink) {
    // The restore created `name` itself, so it is not a symlink; a single
    // name under a directory fd follows nothing else.
    if (::fchmodat(dirfd, name.c_str(), e.mode & 07777, 0) != 0) {
      return ErrnoToStatus(errno, fmt::format("{}: chmod {:o}", Shown(e), e.mode & 07777));
    }
  }
  CAIRN_RETURN_IF_ERROR(ApplyXattrs(dirfd, name, e, warnings));
  struct timespec times[2];
  times[0].tv_sec = 0;
  times[0].tv_nsec = UTIME_OMIT;
  times[1] = MtimeSpec(e.mtime_ns);
  if (::utimensat(dirfd, name.c_str(), times, AT_SYMLINK_NOFOLLOW) != 0) {
    return ErrnoToStatus(errno, fmt::format("{}: set mtime", Shown(e)));
  }
  return Status::Ok();
}

Status CreateSpecial(int dirfd, const std::string& name, const Entry& e) {
  int rc = 0;
  std::string_view what;
  switch (e.kind) {
    case EntryKind::kSymlink:
      what = "symlink";
      rc = ::symlinkat(e.link_target.c_str(), dirfd, name.c_str());
      break;
    case EntryKind::kFifo:
      what = "mkfifo";
      rc = ::mkfifoat(dirfd, name.c_str(), e.mode & 07777);
      break;
    case EntryKind::kCharDevice:
    case EntryKind::kBlockDevice: {
      what = "mknod";
      const mode_t type = e.kind == EntryKind::kCharDevice ? S_IFCHR : S_IFBLK;
      rc = ::mknodat(dirfd, name.c_str(), type | (e.mode & 07777), static_cast<dev_t>(e.rdev));
      if (rc != 0 && errno == EPERM) {
        return PermissionDeniedError(fmt::format("{}: creating a device node ({}:{}) needs root",
                                                 Shown(e), major(static_cast<dev_t>(e.rdev)),
                                                 minor(static_cast<dev_t>(e.rdev))));
      }
      break;
    }
    default:
      return InvalidArgumentError(
          fmt::format("{}: CreateSpecial given a kind it does not create ({})", Shown(e),
                      static_cast<int>(e.kind)));
  }
  if (rc != 0) return ErrnoToStatus(errno, fmt::format("{}: {}", Shown(e), what));
  return Status::Ok();
}

}  // namespace cairn::tree
