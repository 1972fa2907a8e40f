// End-to-end tests of tree archives (`root.tree=DIR`) through the real
// binary: backup, restore, ls, cat, verify, as a user runs them.
//
// The trees are written here, in C++ (nested directories, files of varied
// sizes and contents, symlinks, hardlinks, a fifo, odd modes, nanosecond
// mtimes, xattrs and POSIX ACLs where the filesystem takes them, other owners
// and a device node when running as root), and a restored tree is compared
// with its source by a recursive comparer: the same paths, kinds, bytes
// (hole-aware), modes, mtimes, owners, symlink targets, xattrs and hardlink
// groups.
//
// Hostile archives are made from real ones: the metadata stream of a backup
// is read back, records in it are patched to what the decoder must refuse
// ("..", ".", names with '/', empty names, NUL, duplicates, hardlinks out of
// the tree or to directories), and the stream is stored again as a chunk
// with a matching dynamic index and manifest (the test links cairn_index for
// blob, dynamic index and manifest coding; the record layout is in
// src/tree/tree_format.cc). Every restore of such an archive must fail and
// create nothing outside its target directory.
//
// CAIRN_TEST_LARGE=0 (sanitizer builds) shrinks the 100k-file and the 4 GiB
// sparse cases.
#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "blob/blob.h"
#include "cli_fixture.h"
#include "crypto/sha256.h"
#include "index/dynamic_index.h"
#include "index/manifest.h"

namespace cairn::cli_test {
namespace {

constexpr char kArchive[] = "root.tree";
constexpr char kGroup[] = "host/tree";

bool IsRoot() { return ::geteuid() == 0; }

// --- writing trees -----------------------------------------------------------

void MakeDir(const std::string& path, mode_t mode = 0755) {
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

// Sets the mtime (and atime) of `path` itself, never a symlink's target.
void SetMtime(const std::string& path, int64_t sec, long nsec) {
  struct timespec ts[2];
  ts[0].tv_sec = ts[1].tv_sec = static_cast<time_t>(sec);
  ts[0].tv_nsec = ts[1].tv_nsec = nsec;
  if (::utimensat(AT_FDCWD, path.c_str(), ts, AT_SYMLINK_NOFOLLOW) != 0) {
    ADD_FAILURE() << "utimensat " << path << ": " << std::strerror(errno);
  }
}

// False when the filesystem refuses user xattrs (then the tree has none).
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

// What a source tree ended up with: the parts the filesystem or the user's
// privileges may refuse are optional.
struct TreeFeatures {
  bool xattrs = false;
  bool acls = false;     // POSIX ACLs (system.posix_acl_* xattrs)
  bool owners = false;   // files owned by other users (root only)
  bool device = false;   // a character device node (root with CAP_MKNOD)
  int regular_files = 0; // distinct regular files (inodes), hardlinks not counted
  int names = 0;         // every entry below the root
};

// A varied tree of ~300 files, deterministic from `seed`: see the comments
// inline. Directory mtimes are set last, deepest first.
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

// --- reading trees -----------------------------------------------------------

struct Node {
  char kind = '?';  // d f l p c b s
  uint32_t mode = 0;  // 07777
  uint32_t uid = 0, gid = 0;
  int64_t mtime_ns = 0;
  uint64_t size = 0;
  uint64_t ino = 0;
  uint64_t nlink = 0;
  uint64_t rdev = 0;
  uint64_t allocated = 0;
  std::string target;                         // symlinks
  std::map<std::string, std::string> xattrs;  // user.* and system.posix_acl_*
};
// Relative path ("" for the root) -> node.
using Tree = std::map<std::string, Node>;

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

Tree ScanTree(const std::string& root) {
  Tree tree;
  ScanInto(root, "", &tree);
  return tree;
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

// "" when the two files hold the same bytes. Fast on holes: only the union
// of both files' data ranges is read (holes read as zeros on both sides).
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

struct CompareOptions {
  // Compare only these source paths (the restored tree must hold exactly
  // them); all when unset.
  const std::set<std::string>* only = nullptr;
  bool root_metadata = true;  // compare the root directory's mode and mtime
  bool content = true;
};

// "" when the tree at `dst` equals the tree at `src` in everything a
// restore must keep; else a list of the differences (the first 40).
std::string CompareTrees(const std::string& src, const std::string& dst,
                         const CompareOptions& options = {}) {
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

// The paths of a tree (root left out), sorted.
std::set<std::string> PathsOf(const Tree& tree) {
  std::set<std::string> paths;
  for (const auto& [p, n] : tree) {
    if (!p.empty()) paths.insert(p);
  }
  return paths;
}

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

// The set a restore with `patterns` must produce: included entries, their
// ancestors, and the root.
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

// --- the metadata stream, read and rewritten -----------------------------------

std::string ChunkPathFor(const std::string& store, const std::string& hex) {
  return store + "/.chunks/" + hex.substr(0, 3) + "/" + hex;
}


// The dynamic index at `path`, or a failed test.
std::optional<index::DynamicIndex> ReadDidx(const std::string& path) {
  std::string data = ReadFile(path);
  auto idx = index::DynamicIndex::Decode(AsBytes(data));
  if (!idx.ok()) {
    ADD_FAILURE() << path << ": " << idx.status().ToString();
    return std::nullopt;
  }
  return std::move(*idx);
}

// The whole stream a dynamic index describes, read from the chunk store.
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

// Stores `stream` as the metadata stream of archive `kArchive` of the
// snapshot in `snap_dir`: one chunk, a new dynamic index, and the manifest's
// meta_size and meta_csum to match.
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

// --- the fixture ---------------------------------------------------------------

class TreeTest : public CliTest {
 protected:
  // Directories without write permission (modes/locked) would keep their
  // contents from being removed with the temporary directory when the tests
  // do not run as root.
  void TearDown() override {
    std::error_code ec;
    for (auto it = std::filesystem::recursive_directory_iterator(tmp_.path(), ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
      if (it->is_directory(ec) && !it->is_symlink(ec)) {
        std::filesystem::permissions(it->path(), std::filesystem::perms::owner_all,
                                     std::filesystem::perm_options::add, ec);
      }
    }
    CliTest::TearDown();
  }

  // Backs up `src` as root.tree of host/tree at time `t` (extra arguments
  // appended); returns the JSON report.
  nlohmann::json BackupTree(const std::string& src, int t, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {std::string(kArchive) + "=" + src};
    args.insert(args.end(), extra.begin(), extra.end());
    return Backup(kGroup, t, args);
  }
  static std::string TreeSnap(int t) { return Snap(kGroup, t); }

  RunResult Restore(const std::string& snap, const std::string& target,
                    std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {snap, kArchive, target};
    args.insert(args.end(), extra.begin(), extra.end());
    return OnStore("restore", args);
  }

  // Restores `snap` into a new directory and compares it with `src`.
  void ExpectRestoresEqual(const std::string& snap, const std::string& src,
                           const std::string& target_name, std::vector<std::string> extra = {}) {
    SCOPED_TRACE("restore of " + snap + " into " + target_name);
    const std::string target = Path(target_name);
    RunResult r = Restore(snap, target, extra);
    ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
    EXPECT_EQ(CompareTrees(src, target), "");
  }

  // A directory holding only the restore target "t": whatever a hostile
  // archive makes a restore write next to its target shows up here.
  std::string Jail(const std::string& name) {
    const std::string jail = Path(name);
    MakeDir(jail);
    return jail;
  }
  void ExpectJailClean(const std::string& jail) {
    for (const auto& n : ListDir(jail)) {
      EXPECT_EQ(n, "t") << "a restore created " << jail << "/" << n << " outside its target";
    }
  }

  std::string SnapDirOf(int t) const { return SnapshotDir(store(), TreeSnap(t)); }

  std::optional<index::DynamicIndex> MetaIndex(int t) {
    return ReadDidx(SnapDirOf(t) + "/" + kArchive + ".meta.didx");
  }
  std::optional<index::DynamicIndex> DataIndex(int t) {
    return ReadDidx(SnapDirOf(t) + "/" + kArchive + ".data.didx");
  }
  std::string MetaStream(int t) {
    auto idx = MetaIndex(t);
    return idx ? ReadStream(store(), *idx) : "";
  }
};

// Parses "restore tree complete (files=N, dirs=N, bytes=N, ...)".
struct RestoreLine {
  bool found = false;
  uint64_t files = 0, dirs = 0, bytes = 0;
};
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

// The paths `cairn ls` printed, one per line, normalized: no leading "/" or
// "./", no trailing "/" (directories), the root ("" or "/") left out.
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

// The paths of `cairn ls --json` (an array of entries with "path", or an
// object holding one under "entries"), normalized as LsPaths does.
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

std::string Join(const std::set<std::string>& s, size_t max = 30) {
  std::string out;
  size_t n = 0;
  for (const auto& x : s) {
    if (n++ == max) return out + " ...";
    out += " '" + x + "'";
  }
  return out;
}

// Elements of `a` missing from `b`.
std::set<std::string> Minus(const std::set<std::string>& a, const std::set<std::string>& b) {
  std::set<std::string> out;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::inserter(out, out.end()));
  return out;
}

// --- 1. round trip ---------------------------------------------------------------

TEST_F(TreeTest, RoundTripKeepsEverything) {
  const std::string src = Path("src");
  TreeFeatures f = BuildRichTree(src, 1);
  ASSERT_FALSE(HasFailure());
  if (!f.xattrs) std::fprintf(stderr, "note: the filesystem refuses user xattrs; none tested\n");
  if (!f.owners) std::fprintf(stderr, "note: not root; other owners not tested\n");
  if (!f.acls) std::fprintf(stderr, "note: the filesystem refuses POSIX ACLs; none tested\n");

  nlohmann::json j = BackupTree(src, 1);
  ASSERT_TRUE(j.is_object());
  const Tree source = ScanTree(src);

  // To a directory that does not exist yet.
  const std::string target = Path("restored");
  RunResult r = Restore(TreeSnap(1), target);
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(CompareTrees(src, target), "");

  RestoreLine line = ParseRestoreLine(r.out + r.err);
  EXPECT_TRUE(line.found) << "no 'restore tree complete (...)' line:\n" << r.Describe();
  if (line.found) {
    uint64_t dirs = 0, bytes = 0;
    std::set<uint64_t> inodes;
    for (const auto& [p, n] : source) {
      if (n.kind == 'd') ++dirs;
      if (n.kind == 'f' && inodes.insert(n.ino).second) bytes += n.size;
    }
    EXPECT_TRUE(line.dirs == dirs || line.dirs + 1 == dirs) << "dirs=" << line.dirs << ", tree has "
                                                            << dirs << " with the root";
    EXPECT_GE(line.files, static_cast<uint64_t>(f.regular_files));
    EXPECT_EQ(line.bytes, bytes) << "bytes= should count each file's content once";
  }

  // Into an existing empty directory, one read at a time.
  const std::string empty = Path("empty-target");
  MakeDir(empty);
  r = Restore(TreeSnap(1), empty, {"--jobs", "1"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(CompareTrees(src, empty, {.root_metadata = false}), "");

  // The JSON form.
  r = Restore(TreeSnap(1), Path("restored-json"), {"--json"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_TRUE(ParseJson(r.out).is_object()) << r.out;
  EXPECT_EQ(CompareTrees(src, Path("restored-json")), "");

  // "latest" names the same snapshot.
  ExpectRestoresEqual(std::string(kGroup) + "/latest", src, "restored-latest");

  // The comparer is not blind: small changes to a restored copy show.
  {
    const std::string copy = Path("restored-json");
    Chmod(copy + "/etc/hosts", 0640);
    struct stat st;
    ASSERT_EQ(::lstat((copy + "/big/random.bin").c_str(), &st), 0);
    SetMtime(copy + "/big/random.bin", st.st_mtim.tv_sec, (st.st_mtim.tv_nsec + 1) % 1000000000);
    ASSERT_EQ(::unlink((copy + "/links/rel").c_str()), 0);
    Symlink("../etc/hostz", copy + "/links/rel");
    // One byte inside the zero run of mixed.bin (a hole or zeros on either side).
    WriteRandomAt(copy + "/big/mixed.bin", 2 * kMiB + kMiB / 2, 1, 3);
    // hard/link2 becomes a copy instead of a link.
    const std::string content = ReadFile(copy + "/hard/link2");
    ASSERT_EQ(::unlink((copy + "/hard/link2").c_str()), 0);
    WriteFile(copy + "/hard/link2", content);
    std::string diff = CompareTrees(src, copy);
    for (const char* p : {"etc/hosts: mode", "big/random.bin: mtime", "links/rel: symlink target",
                          "big/mixed.bin: content", "hardlink groups"}) {
      EXPECT_NE(diff.find(p), std::string::npos) << p << " not reported:\n" << diff;
    }
    if (f.xattrs) {
      EXPECT_TRUE(SetXattr(copy + "/etc/app.conf", "user.comment", "main confiG"));
      EXPECT_NE(CompareTrees(src, copy).find("etc/app.conf: xattrs"), std::string::npos);
    }
  }

  r = OnStore("verify", {});
  EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
}

// --- 2. incremental backups ------------------------------------------------------

TEST_F(TreeTest, SecondBackupReusesUnchangedFilesAndThirdSeesChanges) {
  const std::string src = Path("src");
  BuildRichTree(src, 2);
  ASSERT_FALSE(HasFailure());
  nlohmann::json first = BackupTree(src, 1);
  ASSERT_TRUE(first.is_object());

  // Unchanged: every file is reused, nothing is read.
  nlohmann::json second = BackupTree(src, 2);
  ASSERT_TRUE(second.is_object());
  ASSERT_TRUE(second["archives"].is_array() && second["archives"].size() == 1) << second.dump();
  const nlohmann::json& a2 = second["archives"][0];
  ASSERT_TRUE(a2.contains("reused_files") && a2.contains("read_bytes")) << a2.dump();
  uint64_t non_empty = 0;
  std::set<uint64_t> inodes;
  for (const auto& [p, n] : ScanTree(src)) {
    if (n.kind == 'f' && n.size > 0 && inodes.insert(n.ino).second) ++non_empty;
  }
  EXPECT_GE(a2["reused_files"].get<uint64_t>(), non_empty) << a2.dump();
  EXPECT_EQ(a2["read_bytes"].get<uint64_t>(), 0u) << a2.dump();
  if (a2.contains("new_chunks")) {
    // Only the metadata stream may differ (it holds nothing time-dependent
    // that changed, so even that should be reused; allow its chunks).
    EXPECT_LE(a2["new_chunks"].get<uint64_t>(), 2u) << a2.dump();
  }
  ExpectRestoresEqual(TreeSnap(2), src, "restored-2");

  // Change one file without changing its size or mtime (only ctime tells),
  // rewrite another one, add one, delete one.
  const std::string changed = src + "/many/d4/f3.dat";
  struct stat before;
  ASSERT_EQ(::lstat(changed.c_str(), &before), 0);
  ASSERT_GT(before.st_size, 100);
  WriteRandomAt(changed, 10, 50, 99);
  SetMtime(changed, before.st_mtim.tv_sec, before.st_mtim.tv_nsec);
  const std::string rewritten = src + "/big/repeat.bin";
  const uint64_t rewritten_size = 2 * kMiB + 5;
  {
    std::mt19937_64 rng(5);
    WriteFile(rewritten, RandomString(rng, rewritten_size));
  }
  WriteFile(src + "/many/d5/new-file", "a new file\n");
  ASSERT_EQ(::unlink((src + "/many/d6/f7.dat").c_str()), 0);
  nlohmann::json third = BackupTree(src, 3);
  ASSERT_TRUE(third.is_object());
  const nlohmann::json& a3 = third["archives"][0];
  EXPECT_GE(a3["read_bytes"].get<uint64_t>(), static_cast<uint64_t>(before.st_size) + rewritten_size + 11)
      << a3.dump();
  EXPECT_LE(a3["read_bytes"].get<uint64_t>(), static_cast<uint64_t>(before.st_size) + rewritten_size + 11)
      << "only the changed and new files should be read: " << a3.dump();
  EXPECT_LT(a3["reused_files"].get<uint64_t>(), a2["reused_files"].get<uint64_t>()) << a3.dump();
  EXPECT_GE(a3["reused_files"].get<uint64_t>() + 3, a2["reused_files"].get<uint64_t>()) << a3.dump();
  ExpectRestoresEqual(TreeSnap(3), src, "restored-3");

  // The older snapshots still restore their own state.
  RunResult r = Restore(TreeSnap(1), Path("restored-1"));
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(CompareContent(Path("restored-1/big/repeat.bin"), Path("restored-2/big/repeat.bin")), "");
  EXPECT_NE(CompareContent(Path("restored-1/many/d4/f3.dat"), changed), "")
      << "snapshot 1 must hold the old content of the file changed in place";
  EXPECT_TRUE(Exists(Path("restored-1/many/d6/f7.dat")));
  EXPECT_FALSE(Exists(Path("restored-1/many/d5/new-file")));

  r = OnStore("verify", {});
  EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
}

// --- 3. many empty files ----------------------------------------------------------

TEST_F(TreeTest, ManyEmptyFiles) {
  const int count = LargeTestsEnabled() && !CairnSanitized() ? 100000 : 10000;
  const int per_dir = count / 5;
  const std::string src = Path("src");
  MakeDir(src);
  for (int d = 0; d < 5; ++d) {
    const std::string dir = src + "/dir" + std::to_string(d);
    MakeDir(dir);
    for (int i = 0; i < per_dir; ++i) {
      const std::string p = dir + "/e" + std::to_string(i);
      int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      ASSERT_GE(fd, 0) << p << ": " << std::strerror(errno);
      ::close(fd);
    }
  }
  nlohmann::json j = BackupTree(src, 1);
  ASSERT_TRUE(j.is_object());
  const std::string target = Path("restored");
  RunResult r = Restore(TreeSnap(1), target);
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  Tree restored = ScanTree(target);
  size_t files = 0;
  for (const auto& [p, n] : restored) files += n.kind == 'f' && n.size == 0;
  EXPECT_EQ(files, static_cast<size_t>(per_dir * 5));
  EXPECT_EQ(restored.size(), static_cast<size_t>(per_dir * 5 + 6));
  EXPECT_EQ(CompareTrees(src, target, {.content = false}), "");
  RestoreLine line = ParseRestoreLine(r.out + r.err);
  EXPECT_TRUE(line.found) << r.Describe();
  if (line.found) {
    EXPECT_EQ(line.files, static_cast<uint64_t>(per_dir * 5));
  }
}

// --- 4. a large sparse file ---------------------------------------------------------

TEST_F(TreeTest, LargeSparseFile) {
  const uint64_t size = LargeTestsEnabled() ? 4 * kGiB : 256 * kMiB;
  const std::string src = Path("src");
  MakeDir(src);
  const std::string file = src + "/sparse.img";
  ImageWriter(file, size, 44)
      .Random(0, 2 * kMiB)
      .Text(size / 2 - kMiB + 4321, 2 * kMiB)
      .Random(size - 3 * kMiB - 1, 3 * kMiB + 1);
  WriteFile(src + "/small", "next to a sparse file\n");
  if (AllocatedBytes(file) > 64 * kMiB) GTEST_SKIP() << "the filesystem does not keep holes";
  nlohmann::json j = BackupTree(src, 1);
  ASSERT_TRUE(j.is_object());
  const std::string target = Path("restored");
  RunResult r = Restore(TreeSnap(1), target);
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(CompareTrees(src, target), "");
  EXPECT_EQ(FileSize(target + "/sparse.img"), size);
  EXPECT_LT(AllocatedBytes(target + "/sparse.img"), 64 * kMiB)
      << "zero ranges of the file should be restored as holes";
  // cat of a range past the holes streams the right bytes too (only where
  // the file is small enough to hold in a test).
  if (!LargeTestsEnabled()) {
    StreamComparer stream(file);
    RunOptions sink;
    sink.stdout_sink = [&](std::string_view piece) { stream.Feed(piece); };
    r = OnStore("cat", {TreeSnap(1), kArchive, "sparse.img"}, sink);
    EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
    EXPECT_EQ(stream.Result(), "");
  }
}

// --- 5. ls and cat --------------------------------------------------------------------

TEST_F(TreeTest, LsAndCat) {
  const std::string src = Path("src");
  BuildRichTree(src, 5);
  ASSERT_FALSE(HasFailure());
  BackupTree(src, 1);
  const Tree source = ScanTree(src);
  const std::set<std::string> all = PathsOf(source);
  const std::string snap = TreeSnap(1);

  // Every path.
  RunResult r = OnStore("ls", {snap, kArchive});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  std::set<std::string> listed = LsPaths(r.out);
  EXPECT_EQ(listed, all) << "missing:" << Join(Minus(all, listed)) << "\nextra:"
                         << Join(Minus(listed, all));

  // A subtree: the paths under "etc" (as full paths, or relative to "etc").
  r = OnStore("ls", {snap, kArchive, "etc"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  std::set<std::string> want_full, want_rel;
  for (const auto& p : all) {
    if (p == "etc" || p.starts_with("etc/")) want_full.insert(p);
    if (p.starts_with("etc/")) want_rel.insert(p.substr(4));
  }
  std::set<std::string> sub = LsPaths(r.out);
  sub.erase("etc");
  std::set<std::string> want_full_children = want_full;
  want_full_children.erase("etc");
  EXPECT_TRUE(sub == want_full_children || sub == want_rel)
      << "ls etc listed:" << Join(sub) << "\nexpected:" << Join(want_full_children);

  // A path that does not exist.
  r = OnStore("ls", {snap, kArchive, "no/such/dir"});
  EXPECT_NE(r.exit_code, kExitOk) << r.Describe();
  EXPECT_NE(r.err.find("no/such/dir"), std::string::npos) << r.Describe();

  // -l shows symlink targets, modes and sizes.
  r = OnStore("ls", {snap, kArchive, "-l"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  {
    bool abs_found = false, rel_found = false;
    size_t start = 0;
    while (start < r.out.size()) {
      size_t nl = r.out.find('\n', start);
      std::string line = r.out.substr(start, nl - start);
      start = nl == std::string::npos ? r.out.size() : nl + 1;
      if (line.find("links/abs") != std::string::npos) {
        abs_found = line.find("-> /etc/hostname") != std::string::npos;
      }
      if (line.find("links/rel") != std::string::npos) {
        rel_found = line.find("-> ../etc/hosts") != std::string::npos;
      }
      if (line.find("big/random.bin") != std::string::npos) {
        EXPECT_NE(line.find(std::to_string(3 * kMiB + 17)), std::string::npos)
            << "ls -l should show the size: " << line;
      }
      if (line.find("modes/suid") != std::string::npos) {
        EXPECT_TRUE(line.find("rwsr-xr-x") != std::string::npos ||
                    line.find("4755") != std::string::npos)
            << "ls -l should show the mode: " << line;
      }
    }
    EXPECT_TRUE(abs_found) << "ls -l: no 'links/abs -> /etc/hostname' line:\n"
                           << r.out.substr(0, 3000);
    EXPECT_TRUE(rel_found) << "ls -l: no 'links/rel -> ../etc/hosts' line";
  }

  // --json parses and lists the same paths.
  r = OnStore("ls", {snap, kArchive, "--json"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  nlohmann::json j = ParseJson(r.out);
  std::set<std::string> json_paths = LsJsonPaths(j);
  EXPECT_EQ(json_paths, all) << "missing:" << Join(Minus(all, json_paths)) << "\nextra:"
                             << Join(Minus(json_paths, all));

  // cat: small, big, binary, empty, through a hardlink, a name with a space.
  for (const char* p : {"etc/app.conf", "big/random.bin", "big/mixed.bin", "data/a/b/c/d/e/f/g/leaf.bin",
                        "hard/empty", "hard/link2", "many/d3/private.link", "names/with space",
                        "many/d0/f7.dat"}) {
    SCOPED_TRACE(std::string("cat ") + p);
    r = OnStore("cat", {snap, kArchive, p});
    EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
    EXPECT_TRUE(r.out == ReadFile(src + "/" + p))
        << "cat printed " << r.out.size() << " bytes, the file has " << FileSize(src + "/" + p);
  }

  // cat of what is not a file fails clearly.
  r = OnStore("cat", {snap, kArchive, "etc/missing.conf"});
  EXPECT_NE(r.exit_code, kExitOk) << r.Describe();
  EXPECT_TRUE(r.out.empty()) << r.Describe();
  EXPECT_NE(r.err.find("etc/missing.conf"), std::string::npos) << r.Describe();
  r = OnStore("cat", {snap, kArchive, "etc"});
  EXPECT_NE(r.exit_code, kExitOk) << r.Describe();
  EXPECT_TRUE(r.out.empty()) << r.Describe();
  EXPECT_NE(r.err.find("director"), std::string::npos) << "should say it is a directory: "
                                                       << r.Describe();
  r = OnStore("cat", {snap, kArchive, "special/fifo"});
  EXPECT_NE(r.exit_code, kExitOk) << r.Describe();
}

// --- 6. --include ---------------------------------------------------------------------

TEST_F(TreeTest, IncludeRestoresOnlyMatchesAndTheirAncestors) {
  const std::string src = Path("src");
  BuildRichTree(src, 6);
  ASSERT_FALSE(HasFailure());
  BackupTree(src, 1);
  const Tree source = ScanTree(src);

  struct Case {
    std::string name;
    std::vector<std::string> patterns;
  };
  const std::vector<Case> cases = {
      {"subdir", {"data/a/b"}},
      {"conf", {"*.conf"}},
      {"both", {"data/a/b/c", "*.txt"}},
      // A second name of a file whose first name (etc/orig.hard) is not
      // restored: the restore must still give it the content.
      {"hardlink", {"hard/link1"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE("--include " + c.name);
    std::vector<std::string> args;
    for (const auto& p : c.patterns) {
      args.push_back("--include");
      args.push_back(p);
    }
    const std::string target = Path("restored-" + c.name);
    RunResult r = Restore(TreeSnap(1), target, args);
    ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
    const std::set<std::string> expected = ExpectedIncluded(source, c.patterns);
    ASSERT_GE(expected.size(), 3u);
    EXPECT_EQ(CompareTrees(src, target, {.only = &expected}), "");
  }
  // The *.conf case picked up the directory etc/legacy.conf whole, and not
  // etc/conf.d/y.conf.bak.
  EXPECT_TRUE(Exists(Path("restored-conf/etc/legacy.conf/readme")));
  EXPECT_TRUE(Exists(Path("restored-conf/etc/conf.d/x.conf")));
  EXPECT_FALSE(Exists(Path("restored-conf/etc/conf.d/y.conf.bak")));
  EXPECT_FALSE(Exists(Path("restored-conf/etc/hosts")));

  // A pattern that matches nothing restores an empty tree (or says so), and
  // never fails to leave the target a directory.
  RunResult r = Restore(TreeSnap(1), Path("restored-none"), {"--include", "no-such-*"});
  if (r.exit_code == kExitOk) {
    EXPECT_TRUE(ListDir(Path("restored-none")).empty());
  }
}

// --- 7. excludes and sockets ------------------------------------------------------------

TEST_F(TreeTest, ExcludesAndSocketsAreLeftOut) {
  const std::string src = Path("src");
  MakeDir(src);
  MakeDir(src + "/a");
  MakeDir(src + "/a/cache");
  MakeDir(src + "/b");
  MakeDir(src + "/b/logs");
  WriteFile(src + "/keep.txt", "keep\n");
  WriteFile(src + "/drop.tmp", "drop\n");
  WriteFile(src + "/a/keep.dat", "keep\n");
  WriteFile(src + "/a/also.tmp", "drop\n");
  WriteFile(src + "/a/cache/blob", "drop (excluded directory)\n");
  WriteFile(src + "/b/logs/today.log", "drop (path pattern)\n");
  WriteFile(src + "/b/logs/keep.me", "keep\n");
  WriteFile(src + "/b/x.log", "keep: b/logs/*.log is anchored\n");
  WriteFile(src + "/b/logs/deep.tmp", "drop: *.tmp matches names at any depth\n");
  // A unix socket: skipped with a note.
  // (Bound through /proc/self/fd, so a long temporary directory does not
  // run into the 108-byte limit of socket paths.)
  int dirfd = ::open((src + "/b").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(dirfd, 0);
  const std::string sock_path = "/proc/self/fd/" + std::to_string(dirfd) + "/control.sock";
  int sock = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(sock, 0);
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, sock_path.c_str(), sock_path.size() + 1);
  ASSERT_EQ(::bind(sock, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << std::strerror(errno);
  ::close(dirfd);
  struct stat sock_st;
  ASSERT_EQ(::lstat((src + "/b/control.sock").c_str(), &sock_st), 0);
  ASSERT_TRUE(S_ISSOCK(sock_st.st_mode));

  const std::string exclude_file = Path("excludes");
  WriteFile(exclude_file, "cache\nb/logs/*.log\n");
  std::vector<std::string> args = {"--id",      kGroup,       "--time",         SnapTime(1),
                                    "--json",    std::string(kArchive) + "=" + src,
                                    "--exclude", "*.tmp",      "--exclude-file", exclude_file};
  RunResult r = OnStore("backup", args);
  ::close(sock);
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_NE(r.err.find("control.sock"), std::string::npos)
      << "the skipped socket should be named on stderr: " << r.Describe();
  EXPECT_TRUE(ParseJson(r.out).is_object());

  const std::set<std::string> expected = {"a",       "a/keep.dat",     "b",       "b/logs",
                                          "b/x.log", "b/logs/keep.me", "keep.txt"};
  r = OnStore("ls", {TreeSnap(1), kArchive});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  std::set<std::string> listed = LsPaths(r.out);
  EXPECT_EQ(listed, expected) << "missing:" << Join(Minus(expected, listed)) << "\nextra:"
                              << Join(Minus(listed, expected));

  const std::string target = Path("restored");
  r = Restore(TreeSnap(1), target);
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  std::set<std::string> only = expected;
  only.insert("");
  EXPECT_EQ(CompareTrees(src, target, {.only = &only}), "");
  EXPECT_EQ(PathsOf(ScanTree(target)), expected);
}

// --- 8. bad input ------------------------------------------------------------------------

TEST_F(TreeTest, BadInputFailsClearly) {
  const std::string src = Path("src");
  MakeDir(src);
  MakeDir(src + "/d");
  WriteFile(src + "/d/f", "content\n");
  BackupTree(src, 1);

  // Restore into a non-empty directory: refused, the directory untouched.
  const std::string busy = Path("busy");
  MakeDir(busy);
  WriteFile(busy + "/mine", "do not touch\n");
  RunResult r = Restore(TreeSnap(1), busy);
  EXPECT_NE(r.exit_code, kExitOk) << r.Describe();
  EXPECT_NE(r.err.find(busy), std::string::npos) << "should name the target: " << r.Describe();
  EXPECT_EQ(ListDir(busy), std::vector<std::string>{"mine"});
  EXPECT_EQ(ReadFile(busy + "/mine"), "do not touch\n");

  // Restore onto an existing file: refused.
  WriteFile(Path("a-file"), "x");
  r = Restore(TreeSnap(1), Path("a-file"));
  EXPECT_NE(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(ReadFile(Path("a-file")), "x");

  // To stdout: a tree is not a byte stream.
  r = Restore(TreeSnap(1), "-");
  EXPECT_NE(r.exit_code, kExitOk) << r.Describe();
  EXPECT_FALSE(r.err.empty());
  EXPECT_TRUE(r.out.empty()) << r.Describe();

  // Backup of a directory that does not exist: names it.
  const std::string missing = Path("no-such-dir");
  r = OnStore("backup", {"--id", kGroup, "--time", SnapTime(2), std::string(kArchive) + "=" + missing});
  EXPECT_NE(r.exit_code, kExitOk) << r.Describe();
  EXPECT_NE(r.err.find(missing), std::string::npos) << r.Describe();
  // Of a regular file as a tree.
  r = OnStore("backup",
              {"--id", kGroup, "--time", SnapTime(3), std::string(kArchive) + "=" + src + "/d/f"});
  EXPECT_NE(r.exit_code, kExitOk) << r.Describe();
  EXPECT_NE(r.err.find(src + "/d/f"), std::string::npos) << r.Describe();
  // Neither left a snapshot behind.
  EXPECT_EQ(ListedSnapshots(), std::vector<std::string>{TreeSnap(1)});

  // ls / cat of an archive that does not exist, or of an image archive.
  r = OnStore("ls", {TreeSnap(1), "other.tree"});
  EXPECT_NE(r.exit_code, kExitOk) << r.Describe();
  WriteFile(Path("img.raw"), std::string(5000, 'i'));
  Backup("vm/1", 4, {"disk0.img=" + Path("img.raw")});
  r = OnStore("ls", {Snap("vm/1", 4), "disk0.img"});
  EXPECT_NE(r.exit_code, kExitOk) << r.Describe();
}

TEST_F(TreeTest, CorruptPayloadChunkFailsRestoreAndVerify) {
  const std::string src = Path("src");
  MakeDir(src);
  std::mt19937_64 rng(8);
  WriteFile(src + "/random.bin", RandomString(rng, 3 * kMiB));
  WriteFile(src + "/text.txt", TextString(rng, 200000));
  BackupTree(src, 1);
  auto data = DataIndex(1);
  ASSERT_TRUE(data.has_value());
  ASSERT_GE(data->chunk_count(), 1u);
  const std::string id = crypto::DigestHex(data->digest(0));
  const std::string chunk = ChunkPathFor(store(), id);
  ASSERT_TRUE(Exists(chunk));
  FlipBit(chunk, blob::kHeaderSize + 1000, 3);

  const std::string target = Path("restored");
  RunResult r = Restore(TreeSnap(1), target);
  EXPECT_NE(r.exit_code, kExitOk) << r.Describe();
  EXPECT_NE(r.err.find(id), std::string::npos) << "should name the chunk: " << r.Describe();

  r = OnStore("cat", {TreeSnap(1), kArchive, "random.bin"});
  EXPECT_NE(r.exit_code, kExitOk) << "cat of a file in a damaged chunk must fail";

  r = OnStore("verify", {});
  EXPECT_EQ(r.exit_code, kExitCorruption) << r.Describe();
  EXPECT_NE((r.out + r.err).find(id), std::string::npos) << r.Describe();
}

TEST_F(TreeTest, CorruptMetadataChunkFailsVerifyAndLs) {
  const std::string src = Path("src");
  BuildRichTree(src, 9);
  ASSERT_FALSE(HasFailure());
  BackupTree(src, 1);
  auto meta = MetaIndex(1);
  ASSERT_TRUE(meta.has_value());
  ASSERT_GE(meta->chunk_count(), 1u);
  const std::string id = crypto::DigestHex(meta->digest(0));
  const std::string chunk = ChunkPathFor(store(), id);
  ASSERT_GT(FileSize(chunk), blob::kHeaderSize + 10);
  FlipBit(chunk, blob::kHeaderSize + 5, 0);
  RunResult r = OnStore("ls", {TreeSnap(1), kArchive});
  EXPECT_NE(r.exit_code, kExitOk) << r.Describe();
  EXPECT_NE(r.err.find(id), std::string::npos) << r.Describe();
  r = Restore(TreeSnap(1), Path("restored"));
  EXPECT_NE(r.exit_code, kExitOk) << r.Describe();
  r = OnStore("verify", {});
  EXPECT_EQ(r.exit_code, kExitCorruption) << r.Describe();
  EXPECT_NE((r.out + r.err).find(id), std::string::npos) << r.Describe();
}

// --- 9. hostile archives -------------------------------------------------------------------

// The bytes of a string field of the metadata stream (src/tree/tree_format.cc,
// docs/FORMAT.md): LEB128 length, then the bytes.
std::string Field(const std::string& s) {
  std::string out;
  uint64_t v = s.size();
  while (v >= 0x80) {
    out += static_cast<char>(static_cast<uint8_t>(v) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
  return out + s;
}
// A record's start: kind byte and name.
constexpr char kDirKind = 1, kFileKind = 2, kSymlinkKind = 3;
std::string Named(char kind, const std::string& name) { return std::string(1, kind) + Field(name); }

class HostileTreeTest : public TreeTest {
 protected:
  void SetUp() override {
    TreeTest::SetUp();
    if (HasFatalFailure()) return;
    outside_ = Path("outside");
    MakeDir(outside_);
    victim_ = Path("victim");
    WriteFile(victim_, "outside the target\n");
    Chmod(victim_, 0640);
    SetMtime(victim_, 1500000000, 5);
  }

  // Backs up the tree `build` makes at time `t`, then replaces each `from`
  // in its metadata stream by `to` (lengths may differ: the stream is stored
  // again whole). Each `from` must occur exactly once.
  void MakeHostile(int t, const std::function<void(const std::string&)>& build,
                   const std::vector<std::pair<std::string, std::string>>& patches) {
    const std::string src = Path("src" + std::to_string(t));
    MakeDir(src);
    build(src);
    BackupTree(src, t);
    std::string stream = MetaStream(t);
    ASSERT_FALSE(stream.empty());
    for (const auto& [from, to] : patches) {
      ASSERT_EQ(CountOccurrences(stream, from), 1u)
          << "'" << from << "' in the metadata stream";
      stream.replace(stream.find(from), from.size(), to);
    }
    ReplaceMetaStream(store(), SnapDirOf(t), stream);
  }

  // Restores snapshot `t` into JAIL/t: fails saying `needle`, and nothing
  // appears outside the target. ls fails too.
  void ExpectRefused(int t, const std::string& needle) {
    const std::string jail = Jail("jail" + std::to_string(t));
    RunResult r = Restore(TreeSnap(t), jail + "/t");
    EXPECT_NE(r.exit_code, kExitOk) << r.Describe();
    EXPECT_FALSE(r.killed()) << r.Describe();
    EXPECT_NE(r.err.find(needle), std::string::npos)
        << "the error should say what is wrong (" << needle << "): " << r.Describe();
    ExpectNothingOutside(jail);
    r = OnStore("ls", {TreeSnap(t), kArchive});
    EXPECT_NE(r.exit_code, kExitOk) << r.Describe();
    EXPECT_FALSE(r.killed()) << r.Describe();
    // A restore limited to the entries before the bad one stops too (the
    // stream is checked as a whole), or at least writes nothing outside.
    const std::string jail2 = Jail("jail" + std::to_string(t) + "-include");
    r = Restore(TreeSnap(t), jail2 + "/t", {"--include", "*"});
    EXPECT_NE(r.exit_code, kExitOk) << r.Describe();
    ExpectNothingOutside(jail2);
  }

  void ExpectNothingOutside(const std::string& jail) {
    ExpectJailClean(jail);
    EXPECT_TRUE(ListDir(outside_).empty()) << "a restore wrote into " << outside_;
    EXPECT_EQ(ReadFile(victim_), "outside the target\n");
    struct stat st;
    ASSERT_EQ(::stat(victim_.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0640u) << "a restore changed the mode of " << victim_;
    EXPECT_EQ(st.st_mtim.tv_sec, 1500000000) << "a restore changed the mtime of " << victim_;
    EXPECT_EQ(st.st_nlink, 1u) << "a restore linked to " << victim_;
  }

  std::string outside_, victim_;
};

TEST_F(HostileTreeTest, NameDotDot) {
  // A directory "..", holding a file: restored naively, the file would land
  // next to the target.
  MakeHostile(
      1,
      [](const std::string& src) {
        MakeDir(src + "/zQ");
        WriteFile(src + "/zQ/escaped-dotdot", "x");
      },
      {{Named(kDirKind, "zQ"), Named(kDirKind, "..")}});
  ExpectRefused(1, "'..'");
}

TEST_F(HostileTreeTest, NameDot) {
  MakeHostile(
      2,
      [](const std::string& src) {
        MakeDir(src + "/Q");
        WriteFile(src + "/Q/escaped-dot", "x");
      },
      {{Named(kDirKind, "Q"), Named(kDirKind, ".")}});
  ExpectRefused(2, "'.'");
}

TEST_F(HostileTreeTest, NameWithSlash) {
  // "sub" is a symlink to a directory outside; "subXpasswd" becomes
  // "sub/passwd": created by path, it would land in the outside directory.
  const std::string outside = outside_;
  MakeHostile(
      3,
      [outside](const std::string& src) {
        Symlink(outside, src + "/sub");
        WriteFile(src + "/subXpasswd", "root::0:0::/:/bin/sh\n");
      },
      {{Named(kFileKind, "subXpasswd"), Named(kFileKind, "sub/passwd")}});
  ExpectRefused(3, "'/'");
}

TEST_F(HostileTreeTest, AbsoluteName) {
  // A file named like an absolute path into the outside directory.
  const std::string outside = outside_;
  const std::string evil = outside + "/abs";
  MakeHostile(
      9,
      [](const std::string& src) { WriteFile(src + "/abs-name", "x"); },
      {{Named(kFileKind, "abs-name"), Named(kFileKind, evil)}});
  ExpectRefused(9, "'/'");
}

TEST_F(HostileTreeTest, EmptyAndNulNames) {
  MakeHostile(
      10,
      [](const std::string& src) { WriteFile(src + "/emptyname", "x"); },
      {{Named(kFileKind, "emptyname"), Named(kFileKind, "")}});
  ExpectRefused(10, "empty name");
  MakeHostile(
      11,
      [](const std::string& src) { WriteFile(src + "/nulXname", "x"); },
      {{Named(kFileKind, "nulXname"), Named(kFileKind, std::string("nul\0name", 8))}});
  ExpectRefused(11, "NUL");
}

TEST_F(HostileTreeTest, DuplicateNames) {
  // A symlink "dupA1" to a directory outside, then a directory "dupA2"
  // holding a file, renamed "dupA1": a restore that tolerated the duplicate
  // could follow the symlink.
  const std::string outside = outside_;
  MakeHostile(
      4,
      [outside](const std::string& src) {
        Symlink(outside, src + "/dupA1");
        MakeDir(src + "/dupA2");
        WriteFile(src + "/dupA2/through-symlink", "x");
      },
      {{Named(kDirKind, "dupA2"), Named(kDirKind, "dupA1")}});
  ExpectRefused(4, "dupA1");
}

TEST_F(HostileTreeTest, DuplicateFileNames) {
  MakeHostile(
      5,
      [](const std::string& src) {
        WriteFile(src + "/fileB1", "first");
        WriteFile(src + "/fileB2", "second");
      },
      {{Named(kFileKind, "fileB2"), Named(kFileKind, "fileB1")}});
  ExpectRefused(5, "fileB1");
}

TEST_F(HostileTreeTest, HardlinkOutOfTheTree) {
  // The hardlink d/zlink -> d/origxyz is pointed at "../victim", a file next
  // to the target.
  MakeHostile(
      6,
      [](const std::string& src) {
        MakeDir(src + "/d");
        WriteFile(src + "/d/origxyz", "linked");
        Hardlink(src + "/d/origxyz", src + "/d/zlink");
      },
      {{Field("d/origxyz"), Field("../victim")}});
  ExpectRefused(6, "../victim");
}

TEST_F(HostileTreeTest, HardlinkToAbsolutePath) {
  const std::string victim = victim_;
  MakeHostile(
      7,
      [](const std::string& src) {
        MakeDir(src + "/d");
        WriteFile(src + "/d/origxyz", "linked");
        Hardlink(src + "/d/origxyz", src + "/d/zlink");
      },
      {{Field("d/origxyz"), Field(victim)}});
  ExpectRefused(7, victim);
}

TEST_F(HostileTreeTest, HardlinkToADirectoryOrALaterFile) {
  MakeHostile(
      12,
      [](const std::string& src) {
        MakeDir(src + "/d");
        WriteFile(src + "/d/origxyz", "linked");
        Hardlink(src + "/d/origxyz", src + "/d/zlink");
      },
      {{Field("d/origxyz"), Field("d")}});
  ExpectRefused(12, "hardlink");
  // A hardlink to itself.
  MakeHostile(
      13,
      [](const std::string& src) {
        MakeDir(src + "/d");
        WriteFile(src + "/d/origxyz", "linked");
        Hardlink(src + "/d/origxyz", src + "/d/zlink");
      },
      {{Field("d/origxyz"), Field("d/zlink")}});
  ExpectRefused(13, "hardlink");
}

TEST_F(HostileTreeTest, SymlinkNamedLikeAnEarlierDirectory) {
  // A directory "lnk1" with a file, then a symlink "lnk2" to the outside
  // directory renamed "lnk1": duplicate, refused; had it replaced the
  // directory, later writes could go through it.
  const std::string outside = outside_;
  MakeHostile(
      14,
      [outside](const std::string& src) {
        MakeDir(src + "/lnk1");
        WriteFile(src + "/lnk1/f", "x");
        Symlink(outside, src + "/lnk2");
        WriteFile(src + "/zfile", "after");
      },
      {{Named(kSymlinkKind, "lnk2"), Named(kSymlinkKind, "lnk1")}});
  ExpectRefused(14, "lnk1");
}

TEST_F(HostileTreeTest, SymlinksPointingOutsideAreRestoredAsLinksOnly) {
  // Not hostile in itself: symlinks to outside are restored as symlinks and
  // never followed, even when later entries would go "through" them if
  // followed (a file named like the link's target's content).
  const std::string src = Path("src8");
  MakeDir(src);
  Symlink(outside_, src + "/a");
  Symlink(outside_ + "/x", src + "/b");
  Symlink("../../outside", src + "/c");
  MakeDir(src + "/d");
  Symlink("../a", src + "/d/e");
  WriteFile(src + "/z", "after the links\n");
  BackupTree(src, 8);
  const std::string jail = Jail("jail8");
  RunResult r = Restore(TreeSnap(8), jail + "/t");
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(CompareTrees(src, jail + "/t"), "");
  ExpectNothingOutside(jail);
  // A second restore into the same (now non-empty) target is refused and
  // does not write through its symlinks either.
  r = Restore(TreeSnap(8), jail + "/t");
  EXPECT_NE(r.exit_code, kExitOk) << r.Describe();
  ExpectNothingOutside(jail);
}

}  // namespace
}  // namespace cairn::cli_test
