// The fixture of the tree archive tests (cli_tree_test.cc,
// cli_tree_hostile_test.cc): trees written in C++ with every feature a
// restore must keep, a recursive comparer of a restored tree with its
// source, and the metadata stream of a backup read back and replaced (for
// hostile archives).
#pragma once

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
inline constexpr char kArchive[] = "root.tree";
inline constexpr char kGroup[] = "host/tree";

void MakeDir(const std::string& path, mode_t mode = 0755);

void Symlink(const std::string& target, const std::string& path);

void Hardlink(const std::string& existing, const std::string& path);

void Chmod(const std::string& path, mode_t mode);

// Sets the mtime (and atime) of `path` itself, never a symlink's target.
void SetMtime(const std::string& path, int64_t sec, long nsec);

// False when the filesystem refuses user xattrs (then the tree has none).
bool SetXattr(const std::string& path, const std::string& name, const std::string& value);

std::string RandomString(std::mt19937_64& rng, size_t len);

std::string TextString(std::mt19937_64& rng, size_t len);

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
TreeFeatures BuildRichTree(const std::string& root, uint64_t seed);

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

Tree ScanTree(const std::string& root);

// "" when the two files hold the same bytes. Fast on holes: only the union
// of both files' data ranges is read (holes read as zeros on both sides).
std::string CompareContent(const std::string& a, const std::string& b);

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
                         const CompareOptions& options = {});

// The paths of a tree (root left out), sorted.
std::set<std::string> PathsOf(const Tree& tree);

// The set a restore with `patterns` must produce: included entries, their
// ancestors, and the root.
std::set<std::string> ExpectedIncluded(const Tree& src, const std::vector<std::string>& patterns);

std::string ChunkPathFor(const std::string& store, const std::string& hex);

// The dynamic index at `path`, or a failed test.
std::optional<index::DynamicIndex> ReadDidx(const std::string& path);

// The whole stream a dynamic index describes, read from the chunk store.
std::string ReadStream(const std::string& store, const index::DynamicIndex& idx);

// Stores `stream` as the metadata stream of archive `kArchive` of the
// snapshot in `snap_dir`: one chunk, a new dynamic index, and the manifest's
// meta_size and meta_csum to match.
void ReplaceMetaStream(const std::string& store, const std::string& snap_dir,
                       const std::string& stream);

size_t CountOccurrences(const std::string& hay, const std::string& needle);

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

RestoreLine ParseRestoreLine(const std::string& out);

// The paths `cairn ls` printed, one per line, normalized: no leading "/" or
// "./", no trailing "/" (directories), the root ("" or "/") left out.
std::set<std::string> LsPaths(const std::string& out);

// The paths of `cairn ls --json` (an array of entries with "path", or an
// object holding one under "entries"), normalized as LsPaths does.
std::set<std::string> LsJsonPaths(const nlohmann::json& j);

std::string Join(const std::set<std::string>& s, size_t max = 30);

// Elements of `a` missing from `b`.
std::set<std::string> Minus(const std::set<std::string>& a, const std::set<std::string>& b);

}  // namespace cairn::cli_test
