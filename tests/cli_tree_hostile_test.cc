// Hostile tree archives through the real binary: the metadata stream of a
// real backup is read back, records in it are patched to what the decoder
// must refuse ("..", ".", names with '/', empty names, NUL, duplicates,
// hardlinks out of the tree or to directories), and the stream is stored
// again as a chunk with a matching dynamic index and manifest (the record
// layout is in src/tree/tree_format.cc). Every restore of such an archive
// must fail and create nothing outside its target directory.
#include "cli_tree_fixture.h"

namespace cairn::cli_test {
namespace {

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
