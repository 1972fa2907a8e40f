#include "cli_tree_fixture.h"

namespace cairn::cli_test {
namespace {

bool IsRoot() { return ::geteuid() == 0; }

char KindOf(mode_t m) {
  if (S_ISDIR(m)) return 'd';
  if (S_ISREG(m)) return 'f';
  if (S_ISLNK(m)) return 'l';
  if (S_ISFIFO(m)) return 'p';
  if (S_ISCHR(m)) return 'c';
  if (S_ISBLK(m)) return 'b';
  if (S_ISSOCK(m)) return 's';
  return '?';
}

std::map<std::string, std::string> ReadXattrs(const std::string& path) {
  std::map<std::string, std::string> out;
  ssize_t n = ::llistxattr(path.c_str(), nullptr, 0);
  if (n <= 0) return out;
  std::string names(static_cast<size_t>(n), '\0');
  n = ::llistxattr(path.c_str(), names.data(), names.size());
  if (n <= 0) return out;
  names.resize(static_cast<size_t>(n));
  for (size_t pos = 0; pos < names.size();) {
    std::string name = names.c_str() + pos;
    pos += name.size() + 1;
    if (!name.starts_with("user.") && !name.starts_with("system.posix_acl_")) continue;
    ssize_t len = ::lgetxattr(path.c_str(), name.c_str(), nullptr, 0);
    std::string value(len > 0 ? static_cast<size_t>(len) : 0, '\0');
    if (len > 0) {
      len = ::lgetxattr(path.c_str(), name.c_str(), value.data(), value.size());
      value.resize(len > 0 ? static_cast<size_t>(len) : 0);
    }
    out[name] = value;
  }
  return out;
}

void ScanInto(const std::string& root, const std::string& rel, Tree* tree) {
  const std::string path = rel.empty() ? root : root + "/" + rel;
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    ADD_FAILURE() << "lstat " << path << ": " << std::strerror(errno);
    return;
  }
  Node n;
  n.kind = KindOf(st.st_mode);
  n.mode = st.st_mode & 07777;
  n.uid = st.st_uid;
  n.gid = st.st_gid;
  n.mtime_ns = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
  n.size = n.kind == 'd' ? 0 : static_cast<uint64_t>(st.st_size);
  n.ino = st.st_ino;
  n.nlink = st.st_nlink;
  n.rdev = st.st_rdev;
  n.allocated = static_cast<uint64_t>(st.st_blocks) * 512;
  if (n.kind == 'l') {
    std::string buf(4096, '\0');
    ssize_t len = ::readlink(path.c_str(), buf.data(), buf.size());
    if (len >= 0) n.target.assign(buf.data(), static_cast<size_t>(len));
  }
  if (n.kind == 'f' || n.kind == 'd') n.xattrs = ReadXattrs(path);
  (*tree)[rel] = n;
  if (n.kind != 'd') return;
  DIR* d = ::opendir(path.c_str());
  if (d == nullptr) {
    ADD_FAILURE() << "opendir " << path << ": " << std::strerror(errno);
    return;
  }
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(d);
  for (const auto& name : names) ScanInto(root, rel.empty() ? name : rel + "/" + name, tree);
}

// The data ranges of a file ([start, end) pairs; the whole file when the
// filesystem does not report holes).
std::vector<std::pair<uint64_t, uint64_t>> DataRanges(int fd, uint64_t size) {
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  uint64_t off = 0;
  while (off < size) {
    off_t data = ::lseek(fd, static_cast<off_t>(off), SEEK_DATA);
    if (data < 0) {
      if (errno == ENXIO) break;  // only a hole is left
      return {{0, size}};
    }
    off_t hole = ::lseek(fd, data, SEEK_HOLE);
    if (hole < 0) return {{0, size}};
    ranges.emplace_back(static_cast<uint64_t>(data), static_cast<uint64_t>(hole));
    off = static_cast<uint64_t>(hole);
  }
  return ranges;
}

size_t PreadFull(int fd, char* buf, size_t len, uint64_t off) {
  size_t done = 0;
  while (done < len) {
    ssize_t n = ::pread(fd, buf + done, len - done, static_cast<off_t>(off + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

// Hardlink groups of a tree: sorted lists of the paths sharing an inode
// (regular files with more than one name inside the tree).
std::set<std::vector<std::string>> LinkGroups(const Tree& tree) {
  std::map<uint64_t, std::vector<std::string>> by_ino;
  for (const auto& [path, n] : tree) {
    if (n.kind == 'f') by_ino[n.ino].push_back(path);
  }
  std::set<std::vector<std::string>> groups;
  for (auto& [ino, paths] : by_ino) {
    if (paths.size() > 1) groups.insert(paths);
  }
  return groups;
}

std::string Show(const std::string& path) { return path.empty() ? "(root)" : path; }

bool IncludedBy(const std::string& path, const std::vector<std::string>& patterns) {
  // The path or one of its ancestors matches a pattern: on the whole
  // relative path, or (for a pattern without '/') on the single name.
  std::string prefix;
  size_t start = 0;
  while (true) {
    size_t slash = path.find('/', start);
    prefix = path.substr(0, slash);
    std::string name = path.substr(start, slash == std::string::npos ? slash : slash - start);
    for (const auto& p : patterns) {
      if (::fnmatch(p.c_str(), prefix.c_str(), 0) == 0) return true;
      if (p.find('/') == std::string::npos && ::fnmatch(p.c_str(), name.c_str(), 0) == 0) {
        return true;
      }
    }
    if (slash == std::string::npos) return false;
    start = slash + 1;
  }
}

}  // namespace

void MakeDir(const std::string& path, mode_t mode) {
  if (::mkdir(path.c_str(), mode) != 0 && errno != EEXIST) {
    ADD_FAILURE() << "mkdir " << path << ": " << std::strerror(errno);
  }
  ::chmod(path.c_str(), mode);  // umask
}

void Symlink(const std::string& target, const std::string& path) {
  if (::symlink(target.c_str(), path.c_str()) != 0) {
    ADD_FAILURE() << "symlink " << path << " -> " << target << ": " << std::strerror(errno);
  }
}

void Hardlink(const std::string& existing, const std::string& path) {
  if (::link(existing.c_str(), path.c_str()) != 0) {
    ADD_FAILURE() << "link " << path << " -> " << existing << ": " << std::strerror(errno);
  }
}

void Chmod(const std::string& path, mode_t mode) {
  if (::chmod(path.c_str(), mode) != 0) {
    ADD_FAILURE() << "chmod " << path << ": " << std::strerror(errno);
  }
}

void SetMtime(const std::string& path, int64_t sec, long nsec) {
  struct timespec ts[2];
  ts[0].tv_sec = ts[1].tv_sec = static_cast<time_t>(sec);
  ts[0].tv_nsec = ts[1].tv_nsec = nsec;
  if (::utimensat(AT_FDCWD, path.c_str(), ts, AT_SYMLINK_NOFOLLOW) != 0) {
    ADD_FAILURE() << "utimensat " << path << ": " << std::strerror(errno);
  }
}

bool SetXattr(const std::string& path, const std::string& name, const std::string& value) {
  return ::lsetxattr(path.c_str(), name.c_str(), value.data(), value.size(), 0) == 0;
}

std::string RandomString(std::mt19937_64& rng, size_t len) {
  std::string s(len, '\0');
  for (size_t i = 0; i < len; i += 8) {
    uint64_t v = rng();
    std::memcpy(s.data() + i, &v, std::min<size_t>(8, len - i));
  }
  return s;
}

std::string TextString(std::mt19937_64& rng, size_t len) {
  static constexpr const char* kWords[] = {"tree ",   "archive ", "restore ", "backup ", "inode ",
                                           "xattr ",  "symlink ", "mode ",    "mtime ",  "cairn ",
                                           "chunk ",  "payload ", "\n",       "fifo ",   "acl "};
  std::string s;
  s.reserve(len + 16);
  while (s.size() < len) s += kWords[rng() % std::size(kWords)];
  s.resize(len);
  return s;
}

TreeFeatures BuildRichTree(const std::string& root, uint64_t seed) {
  TreeFeatures f;
  std::mt19937_64 rng(seed);
  std::vector<std::string> dirs;  // in creation order
  auto dir = [&](const std::string& rel, mode_t mode = 0755) {
    MakeDir(root + (rel.empty() ? "" : "/" + rel), mode);
    dirs.push_back(rel);
  };
  int64_t t = 1700000000;
  long ns = 123456789;
  auto stamp = [&](const std::string& rel) {
    ns = (ns + 7919 * 1013) % 1000000000;
    SetMtime(root + "/" + rel, t++, ns);
  };
  auto file = [&](const std::string& rel, const std::string& data, mode_t mode = 0644) {
    WriteFile(root + "/" + rel, data);
    Chmod(root + "/" + rel, mode);
    ++f.regular_files;
  };

  dir("");
  // Configuration-like files (the *.conf include pattern), and a directory
  // whose own name matches it.
  dir("etc");
  dir("etc/conf.d");
  dir("etc/legacy.conf");
  file("etc/app.conf", "listen = 0.0.0.0:8080\nworkers = 4\n");
  file("etc/db.conf", "host = localhost\nport = 5432\n", 0600);
  file("etc/hosts", "127.0.0.1 localhost\n::1 localhost\n");
  file("etc/conf.d/x.conf", "x = 1\n");
  file("etc/conf.d/y.conf.bak", "y = 2\n");
  file("etc/legacy.conf/readme", "old layout\n");

  // Deep nesting.
  std::string deep = "data";
  dir(deep);
  for (const char* part : {"a", "b", "c", "d", "e", "f", "g"}) {
    deep += "/";
    deep += part;
    dir(deep);
  }
  file(deep + "/leaf.bin", RandomString(rng, 777));
  file("data/a/x", TextString(rng, 5000));
  file("data/a/b/notes.txt", TextString(rng, 12345));

  // Many files of varied sizes and contents, some duplicates of others.
  dir("many");
  std::vector<std::string> earlier;
  for (int d = 0; d < 10; ++d) {
    const std::string sub = "many/d" + std::to_string(d);
    dir(sub);
    for (int i = 0; i < 28; ++i) {
      const std::string rel = sub + "/f" + std::to_string(i) + (i % 5 == 0 ? ".txt" : ".dat");
      std::string data;
      switch ((d * 28 + i) % 8) {
        case 0: break;  // empty
        case 1: data = RandomString(rng, 1 + rng() % 100); break;
        case 2: data = TextString(rng, 100 + rng() % 4000); break;
        case 3: data = RandomString(rng, 4096 + rng() % 60000); break;
        case 4: data = TextString(rng, 65536 + rng() % 200000); break;
        case 5: data = std::string(1 + rng() % 50000, static_cast<char>(rng())); break;
        case 6: data = earlier.empty() ? "x" : ReadFile(root + "/" + earlier[rng() % earlier.size()]); break;
        case 7: data = RandomString(rng, 1 + rng() % 20000) + std::string(70000, '\0'); break;
      }
      file(rel, data, i % 9 == 4 ? 0600 : i % 9 == 5 ? 0755 : 0644);
      earlier.push_back(rel);
    }
  }

  // A few MiB-sized files: random, repetitive, and mixed.
  dir("big");
  file("big/random.bin", RandomString(rng, 3 * kMiB + 17));
  {
    std::string block = RandomString(rng, 64 * kKiB);
    std::string rep;
    while (rep.size() < 4 * kMiB) rep += block;
    file("big/repeat.bin", rep);
    file("big/mixed.bin", TextString(rng, kMiB) + RandomString(rng, kMiB) + std::string(kMiB, '\0') +
                              rep.substr(0, kMiB) + "end");
  }

  // Names that need care.
  dir("names");
  file("names/with space", "space\n");
  file("names/\u00fcn\u00efc\u00f6d\u00e9", "unicode\n");
  file("names/" + std::string(255, 'L'), "long name\n");
  file("names/-dash", "dash\n");
  file("names/.hidden", "hidden\n");
  file("names/back\\slash", "backslash\n");

  // Symlinks: relative, absolute (outside the tree; never followed), dangling,
  // to a directory, and a chain.
  dir("links");
  Symlink("../etc/hosts", root + "/links/rel");
  Symlink("/etc/hostname", root + "/links/abs");
  Symlink("nowhere/at/all", root + "/links/dangling");
  Symlink("../data", root + "/links/dirlink");
  Symlink("rel", root + "/links/chain");
  Symlink(std::string(200, 'T'), root + "/links/longtarget");

  // Hardlinks: in one directory, across directories, of an empty file, of
  // a 0600 file.
  dir("hard");
  file("hard/orig", TextString(rng, 30000));
  Hardlink(root + "/hard/orig", root + "/hard/link1");
  Hardlink(root + "/hard/orig", root + "/hard/link2");
  Hardlink(root + "/data/a/x", root + "/hard/x-too");
  Hardlink(root + "/hard/orig", root + "/etc/orig.hard");
  file("hard/empty", "");
  Hardlink(root + "/hard/empty", root + "/hard/empty.link");
  file("hard/private", "secret\n", 0600);
  Hardlink(root + "/hard/private", root + "/many/d3/private.link");

  // Modes: setuid/setgid executables, a read-only file, a setgid directory,
  // a sticky world-writable directory, a directory without write permission
  // (restore must apply directory modes last).
  dir("modes");
  file("modes/suid", "#!/bin/sh\n", 04755);
  file("modes/sgid", "#!/bin/sh\n", 02711);
  file("modes/readonly", "ro\n", 0444);
  file("modes/none", "no permissions\n", IsRoot() ? 0000 : 0400);
  dir("modes/setgid-dir", 02775);
  dir("modes/sticky", 01777);
  file("modes/sticky/inside", "in sticky\n");
  dir("modes/locked", 0555);
  // (the file in locked/ is written before its mode is applied below)

  // Specials.
  dir("special");
  if (::mkfifo((root + "/special/fifo").c_str(), 0640) != 0) {
    ADD_FAILURE() << "mkfifo: " << std::strerror(errno);
  }
  if (IsRoot() &&
      ::mknod((root + "/special/null").c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0) {
    f.device = true;
  }

  // Xattrs on files and directories (not on symlinks: Linux refuses user.*
  // there). A binary value, an empty one and a 4 KiB one.
  f.xattrs = SetXattr(root + "/etc/app.conf", "user.comment", "main config");
  if (f.xattrs) {
    EXPECT_TRUE(SetXattr(root + "/etc/app.conf", "user.bin", std::string("\0\x01\xff\n", 4)));
    EXPECT_TRUE(SetXattr(root + "/etc", "user.dir", "a directory"));
    EXPECT_TRUE(SetXattr(root + "/big/random.bin", "user.empty", ""));
    EXPECT_TRUE(SetXattr(root + "/big/random.bin", "user.long", TextString(rng, 4096)));
    EXPECT_TRUE(SetXattr(root + "/hard/orig", "user.linked", "shared by 4 names"));
  }

  // POSIX ACLs, written as the xattrs they are (no setfacl needed): an access
  // ACL granting user 1234 read on a file, and a default ACL on a directory
  // that already holds files (restore must set it after creating them, or
  // they would inherit it).
  {
    auto entry = [](uint16_t tag, uint16_t perm, uint32_t id) {
      std::string e(8, '\0');
      std::memcpy(e.data(), &tag, 2);
      std::memcpy(e.data() + 2, &perm, 2);
      std::memcpy(e.data() + 4, &id, 4);
      return e;
    };
    const uint32_t version = 2, none = 0xffffffff;
    std::string acl(reinterpret_cast<const char*>(&version), 4);
    acl += entry(0x01, 6, none) + entry(0x02, 4, 1234) + entry(0x04, 4, none) +
           entry(0x10, 4, none) + entry(0x20, 0, none);
    f.acls = SetXattr(root + "/etc/db.conf", "system.posix_acl_access", acl) &&
             SetXattr(root + "/etc/conf.d", "system.posix_acl_default", acl);
  }

  // Other owners (root only): ids with no name on this machine, on a file,
  // a directory, a symlink and a setuid file (chown clears setuid, so the
  // restore must set the mode after the owner).
  if (IsRoot()) {
    f.owners = ::chown((root + "/many/d1/f1.dat").c_str(), 1234, 5678) == 0 &&
               ::chown((root + "/many/d2").c_str(), 4321, 4321) == 0 &&
               ::lchown((root + "/links/rel").c_str(), 777, 888) == 0 &&
               ::chown((root + "/modes/suid").c_str(), 1000, 1000) == 0;
    Chmod(root + "/modes/suid", 04755);
  }

  // Mtimes with nanoseconds on everything but directories, then directories
  // deepest first; a few odd ones: before 1970, far future, zero ns.
  std::vector<std::string> all;
  std::function<void(const std::string&)> walk = [&](const std::string& rel) {
    DIR* d = ::opendir((root + (rel.empty() ? "" : "/" + rel)).c_str());
    if (d == nullptr) return;
    std::vector<std::string> names;
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(n);
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    for (const auto& n : names) {
      std::string child = rel.empty() ? n : rel + "/" + n;
      all.push_back(child);
      struct stat st;
      if (::lstat((root + "/" + child).c_str(), &st) == 0 && S_ISDIR(st.st_mode)) walk(child);
    }
  };
  // The file inside the locked directory: written with write permission
  // back for a moment.
  Chmod(root + "/modes/locked", 0755);
  file("modes/locked/kept", "in a locked directory\n");
  Chmod(root + "/modes/locked", 0555);
  walk("");
  f.names = static_cast<int>(all.size());
  for (const auto& rel : all) {
    struct stat st;
    if (::lstat((root + "/" + rel).c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) stamp(rel);
  }
  SetMtime(root + "/many/d0/f0.txt", -1234567890, 500000000);  // 1930
  SetMtime(root + "/many/d0/f1.dat", 4102444800, 999999999);   // 2100
  SetMtime(root + "/many/d0/f2.dat", 1600000000, 0);
  for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) {
    ns = (ns + 104729) % 1000000000;
    SetMtime(root + (it->empty() ? "" : "/" + *it), t++, ns);
  }
  return f;
}

Tree ScanTree(const std::string& root) {
  Tree tree;
  ScanInto(root, "", &tree);
  return tree;
}

std::string CompareContent(const std::string& a, const std::string& b) {
  struct stat sa, sb;
  if (::stat(a.c_str(), &sa) != 0) return "cannot stat " + a;
  if (::stat(b.c_str(), &sb) != 0) return "cannot stat " + b;
  if (sa.st_size != sb.st_size) {
    return "size " + std::to_string(sa.st_size) + " vs " + std::to_string(sb.st_size);
  }
  const uint64_t size = static_cast<uint64_t>(sa.st_size);
  if (size == 0) return "";
  int fa = ::open(a.c_str(), O_RDONLY | O_CLOEXEC);
  int fb = ::open(b.c_str(), O_RDONLY | O_CLOEXEC);
  std::string result;
  if (fa < 0 || fb < 0) result = "cannot open " + (fa < 0 ? a : b);
  if (result.empty()) {
    auto ranges = DataRanges(fa, size);
    auto rb = DataRanges(fb, size);
    ranges.insert(ranges.end(), rb.begin(), rb.end());
    std::sort(ranges.begin(), ranges.end());
    std::vector<std::pair<uint64_t, uint64_t>> merged;
    for (const auto& r : ranges) {
      if (!merged.empty() && r.first <= merged.back().second) {
        merged.back().second = std::max(merged.back().second, r.second);
      } else {
        merged.push_back(r);
      }
    }
    // Allocated once: hundreds of files are compared per test.
    static std::string ba(kMiB, '\0'), bb(kMiB, '\0');
    for (const auto& [start, end] : merged) {
      for (uint64_t off = start; off < std::min(end, size) && result.empty();) {
        size_t want = static_cast<size_t>(std::min<uint64_t>(kMiB, std::min(end, size) - off));
        if (PreadFull(fa, ba.data(), want, off) != want ||
            PreadFull(fb, bb.data(), want, off) != want) {
          result = "short read at " + std::to_string(off);
        } else if (std::memcmp(ba.data(), bb.data(), want) != 0) {
          size_t i = 0;
          while (ba[i] == bb[i]) ++i;
          result = "first difference at offset " + std::to_string(off + i);
        }
        off += want;
      }
      if (!result.empty()) break;
    }
  }
  if (fa >= 0) ::close(fa);
  if (fb >= 0) ::close(fb);
  return result;
}

std::string CompareTrees(const std::string& src, const std::string& dst,
                         const CompareOptions& options) {
  Tree a = ScanTree(src), b = ScanTree(dst);
  std::vector<std::string> diffs;
  auto diff = [&](const std::string& path, const std::string& what) {
    if (diffs.size() < 40) diffs.push_back(Show(path) + ": " + what);
  };
  if (options.only != nullptr) {
    for (auto it = a.begin(); it != a.end();) {
      it = options.only->count(it->first) ? std::next(it) : a.erase(it);
    }
  }
  for (const auto& [path, n] : a) {
    if (!b.count(path)) diff(path, "missing from the restore");
  }
  for (const auto& [path, n] : b) {
    if (!a.count(path)) diff(path, "restored but not in the source");
  }
  for (const auto& [path, x] : a) {
    auto it = b.find(path);
    if (it == b.end()) continue;
    const Node& y = it->second;
    if (x.kind != y.kind) {
      diff(path, std::string("kind ") + x.kind + " vs " + y.kind);
      continue;
    }
    const bool meta = !path.empty() || options.root_metadata;
    if (meta && x.kind != 'l' && x.mode != y.mode) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "mode %04o vs %04o", x.mode, y.mode);
      diff(path, buf);
    }
    if (x.uid != y.uid || x.gid != y.gid) {
      diff(path, "owner " + std::to_string(x.uid) + ":" + std::to_string(x.gid) + " vs " +
                     std::to_string(y.uid) + ":" + std::to_string(y.gid));
    }
    if (meta && x.mtime_ns != y.mtime_ns) {
      diff(path, "mtime_ns " + std::to_string(x.mtime_ns) + " vs " + std::to_string(y.mtime_ns));
    }
    if (x.xattrs != y.xattrs) {
      std::string s = "xattrs {";
      for (const auto& [k, v] : x.xattrs) s += k + " ";
      s += "} vs {";
      for (const auto& [k, v] : y.xattrs) s += k + " ";
      diff(path, s + "} (or values differ)");
    }
    if (x.kind == 'l' && x.target != y.target) {
      diff(path, "symlink target '" + x.target + "' vs '" + y.target + "'");
    }
    if ((x.kind == 'c' || x.kind == 'b') && x.rdev != y.rdev) diff(path, "rdev differs");
    if (x.kind == 'f') {
      if (x.size != y.size) {
        diff(path, "size " + std::to_string(x.size) + " vs " + std::to_string(y.size));
      } else if (options.content) {
        std::string c = CompareContent(src + "/" + path, dst + "/" + path);
        if (!c.empty()) diff(path, "content: " + c);
      }
      if (options.only == nullptr && x.nlink != y.nlink) {
        diff(path, "nlink " + std::to_string(x.nlink) + " vs " + std::to_string(y.nlink));
      }
    }
  }
  if (options.only == nullptr && LinkGroups(a) != LinkGroups(b)) {
    std::string s = "hardlink groups differ: source";
    for (const auto& g : LinkGroups(a)) {
      s += " {";
      for (const auto& p : g) s += p + " ";
      s += "}";
    }
    s += "; restored";
    for (const auto& g : LinkGroups(b)) {
      s += " {";
      for (const auto& p : g) s += p + " ";
      s += "}";
    }
    diff("", s);
  }
  std::string out;
  for (const auto& d : diffs) out += d + "\n";
  return out;
}

std::set<std::string> PathsOf(const Tree& tree) {
  std::set<std::string> paths;
  for (const auto& [p, n] : tree) {
    if (!p.empty()) paths.insert(p);
  }
  return paths;
}

std::set<std::string> ExpectedIncluded(const Tree& src, const std::vector<std::string>& patterns) {
  std::set<std::string> out = {""};
  for (const auto& [path, n] : src) {
    if (path.empty() || !IncludedBy(path, patterns)) continue;
    out.insert(path);
    for (size_t s = path.find('/'); s != std::string::npos; s = path.find('/', s + 1)) {
      out.insert(path.substr(0, s));
    }
  }
  return out;
}

std::string ChunkPathFor(const std::string& store, const std::string& hex) {
  return store + "/.chunks/" + hex.substr(0, 3) + "/" + hex;
}

std::optional<index::DynamicIndex> ReadDidx(const std::string& path) {
  std::string data = ReadFile(path);
  auto idx = index::DynamicIndex::Decode(AsBytes(data));
  if (!idx.ok()) {
    ADD_FAILURE() << path << ": " << idx.status().ToString();
    return std::nullopt;
  }
  return std::move(*idx);
}

std::string ReadStream(const std::string& store, const index::DynamicIndex& idx) {
  std::string out;
  for (size_t i = 0; i < idx.chunk_count(); ++i) {
    const std::string hex = crypto::DigestHex(idx.digest(i));
    std::string stored = ReadFile(ChunkPathFor(store, hex));
    auto plain = blob::DecodeChunk(AsBytes(stored), idx.digest(i));
    if (!plain.ok()) {
      ADD_FAILURE() << "chunk " << hex << ": " << plain.status().ToString();
      return "";
    }
    out.append(reinterpret_cast<const char*>(plain->data()), plain->size());
  }
  return out;
}

void ReplaceMetaStream(const std::string& store, const std::string& snap_dir,
                       const std::string& stream) {
  ASSERT_LE(stream.size(), blob::kMaxRawSize);
  ASSERT_FALSE(stream.empty());
  auto stored = blob::Encode(AsBytes(stream));
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  const crypto::Digest digest = crypto::Sha256(AsBytes(stream));
  const std::string hex = crypto::DigestHex(digest);
  WriteFile(ChunkPathFor(store, hex),
            std::string_view(reinterpret_cast<const char*>(stored->data()), stored->size()));
  index::DynamicIndex idx({index::DynamicEntry{stream.size(), digest}});
  Bytes encoded = idx.Encode();

  std::string manifest_bytes = ReadFile(snap_dir + "/" + index::kManifestFileName);
  auto manifest = index::DecodeManifest(AsBytes(manifest_bytes));
  ASSERT_TRUE(manifest.ok()) << manifest.status().ToString();
  bool found = false;
  for (auto& a : manifest->archives) {
    if (a.name != kArchive) continue;
    found = true;
    WriteFile(snap_dir + "/" + a.MetaFileName(),
              std::string_view(reinterpret_cast<const char*>(encoded.data()), encoded.size()));
    a.meta_size = stream.size();
    a.meta_csum = idx.csum();
  }
  ASSERT_TRUE(found) << "no archive " << kArchive << " in the manifest";
  auto out = index::EncodeManifest(*manifest);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  WriteFile(snap_dir + "/" + index::kManifestFileName,
            std::string_view(reinterpret_cast<const char*>(out->data()), out->size()));
}

size_t CountOccurrences(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

RestoreLine ParseRestoreLine(const std::string& out) {
  static const std::regex re(
      R"(restore tree complete \(files=(\d+), dirs=(\d+), bytes=(\d+), duration=[0-9.]+ s, speed=[0-9.]+ MB/s\))");
  std::smatch m;
  RestoreLine line;
  if (std::regex_search(out, m, re)) {
    line.found = true;
    line.files = std::stoull(m[1]);
    line.dirs = std::stoull(m[2]);
    line.bytes = std::stoull(m[3]);
  }
  return line;
}

std::set<std::string> LsPaths(const std::string& out) {
  std::set<std::string> paths;
  size_t start = 0;
  while (start < out.size()) {
    size_t nl = out.find('\n', start);
    std::string line = out.substr(start, nl == std::string::npos ? nl : nl - start);
    start = nl == std::string::npos ? out.size() : nl + 1;
    if (line.starts_with("./")) line = line.substr(2);
    while (line.starts_with("/")) line = line.substr(1);
    if (line.size() > 1 && line.ends_with("/")) line.pop_back();
    if (line.empty() || line == "." || line == "/") continue;
    paths.insert(line);
  }
  return paths;
}

std::set<std::string> LsJsonPaths(const nlohmann::json& j) {
  std::set<std::string> paths;
  const nlohmann::json* arr = &j;
  if (j.is_object() && j.contains("entries")) arr = &j["entries"];
  if (!arr->is_array()) {
    ADD_FAILURE() << "ls --json: no array of entries: " << j.dump().substr(0, 500);
    return paths;
  }
  for (const auto& e : *arr) {
    if (!e.is_object() || !e.contains("path") || !e["path"].is_string()) {
      ADD_FAILURE() << "ls --json: entry without a path: " << e.dump();
      continue;
    }
    std::string p = e["path"].get<std::string>();
    while (p.starts_with("/")) p = p.substr(1);
    if (p.starts_with("./")) p = p.substr(2);
    if (!p.empty() && p != ".") paths.insert(p);
  }
  return paths;
}

std::string Join(const std::set<std::string>& s, size_t max) {
  std::string out;
  size_t n = 0;
  for (const auto& x : s) {
    if (n++ == max) return out + " ...";
    out += " '" + x + "'";
  }
  return out;
}

std::set<std::string> Minus(const std::set<std::string>& a, const std::set<std::string>& b) {
  std::set<std::string> out;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::inserter(out, out.end()));
  return out;
}

}  // namespace cairn::cli_test
