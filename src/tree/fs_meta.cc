#include "tree/fs_meta.h"

#include <fmt/format.h>
#include <grp.h>
#include <pwd.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <mutex>
#include <optional>
#include <unordered_map>


namespace cairn::tree {
namespace {

constexpr size_t kMaxOwnerName = 255;
constexpr size_t kMaxLinkTarget = 4095;

// Reads, checks against the archive's limits and sorts the xattrs.
Result<std::vector<Xattr>> ReadXattrsOf(Dir& dir, const std::string& name, mode_t mode) {
  CAIRN_ASSIGN_OR_RETURN(std::vector<Xattr> out, dir.ReadXattrs(name, mode & S_IFMT));
  const std::string shown = name.empty() ? dir.path() : name;
  for (const Xattr& x : out) {
    if (x.value.size() > kMaxXattrValue) {
      return InvalidArgumentError(
          fmt::format("{}: xattr {} has {} bytes, more than the {} a "
                      "tree archive stores",
                      shown, x.name, x.value.size(), kMaxXattrValue));
    }
  }
  if (out.size() > kMaxXattrs) {
    return InvalidArgumentError(
        fmt::format("{}: {} xattrs, more than the {} a tree archive "
                    "stores",
                    shown, out.size(), kMaxXattrs));
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

Result<std::string> ReadLinkTarget(Dir& dir, const std::string& name, const struct stat& st) {
  // st_size is the target's length on most filesystems, 0 on some.
  CAIRN_ASSIGN_OR_RETURN(std::string target, dir.ReadLink(name, static_cast<size_t>(st.st_size)));
  if (target.empty() || target.size() > kMaxLinkTarget) {
    return InvalidArgumentError(
        fmt::format("{}: symlink target of {} bytes not storable (1 to "
                    "{} bytes)",
                    name, target.size(), kMaxLinkTarget));
  }
  return target;
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

// Owner (as root), mode, xattrs and mtime through `set`, which has the
// setters of a WritableFile (an open file, or a Dir entry bound to its name).
template <typename Setter>
Status Apply(Setter& set, const Entry& e, const ApplyOptions& options,
             std::vector<std::string>* warnings) {
  // The effective uid, read once: tree restore applies metadata per file.
  static const bool as_root = ::geteuid() == 0;
  if (options.owner && as_root) {
    uint32_t uid = e.uid, gid = e.gid;
    if (options.by_name) {
      if (auto u = e.user.empty() ? std::nullopt : UidOf(e.user)) uid = *u;
      if (auto g = e.group.empty() ? std::nullopt : GidOf(e.group)) gid = *g;
    }
    CAIRN_RETURN_IF_ERROR(set.SetOwner(uid, gid));
  }
  // The restore created a non-symlink entry itself, so it is not a symlink.
  if (e.kind != EntryKind::kSymlink) CAIRN_RETURN_IF_ERROR(set.SetMode(e.mode & 07777));
  for (const Xattr& x : e.xattrs) {
    Status s = set.SetXattr(x.name, x.value);
    if (s.ok()) continue;
    if (!IsRefusedXattr(s)) return s;
    if (warnings != nullptr) {
      warnings->push_back(fmt::format("{}: xattr {} not restored ({})", Shown(e), x.name,
                                      s.message()));
    }
  }
  return set.SetModTime(e.mtime_ns);
}

// A Dir entry with the setters of a file.
struct DirEntrySetter {
  Dir& dir;
  const std::string& name;
  Status SetOwner(uint32_t uid, uint32_t gid) { return dir.SetOwner(name, uid, gid); }
  Status SetMode(uint32_t mode) { return dir.SetMode(name, mode); }
  Status SetXattr(const std::string& key, std::string_view v) { return dir.SetXattr(name, key, v); }
  Status SetModTime(int64_t ns) { return dir.SetModTime(name, ns); }
};

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

Result<std::vector<Xattr>> ReadXattrs(Dir& dir, const std::string& name) {
  CAIRN_ASSIGN_OR_RETURN(struct stat st, dir.Lstat(name));
  return ReadXattrsOf(dir, name, st.st_mode);
}

Result<Entry> CaptureEntry(Dir& dir, const std::string& name, const std::string& path,
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
    CAIRN_ASSIGN_OR_RETURN(e.link_target, ReadLinkTarget(dir, name, st));
  }
  if (with_xattrs) {
    CAIRN_ASSIGN_OR_RETURN(e.xattrs, ReadXattrsOf(dir, name, st.st_mode));
  }
  return e;
}

Status ApplyMetadata(Dir& dir, const std::string& name, const Entry& e,
                     const ApplyOptions& options, std::vector<std::string>* warnings) {
  DirEntrySetter set{dir, name};
  return Apply(set, e, options, warnings);
}

Status ApplyMetadata(WritableFile& file, const Entry& e, const ApplyOptions& options,
                     std::vector<std::string>* warnings) {
  return Apply(file, e, options, warnings);
}

Status CreateSpecial(Dir& dir, const std::string& name, const Entry& e) {
  switch (e.kind) {
    case EntryKind::kSymlink:
      return dir.CreateSymlink(name, e.link_target);
    case EntryKind::kFifo:
      return dir.CreateNode(name, S_IFIFO | (e.mode & 07777), 0);
    case EntryKind::kCharDevice:
    case EntryKind::kBlockDevice: {
      const mode_t type = e.kind == EntryKind::kCharDevice ? S_IFCHR : S_IFBLK;
      Status s = dir.CreateNode(name, type | (e.mode & 07777), e.rdev);
      if (s.code() == StatusCode::kPermissionDenied) {
        return PermissionDeniedError(fmt::format("{}: creating a device node ({}:{}) needs root",
                                                 Shown(e), major(static_cast<dev_t>(e.rdev)),
                                                 minor(static_cast<dev_t>(e.rdev))));
      }
      return s;
    }
    default:
      return InvalidArgumentError(
          fmt::format("{}: CreateSpecial given a kind it does not create ({})", Shown(e),
                      static_cast<int>(e.kind)));
  }
}

}  // namespace cairn::tree
