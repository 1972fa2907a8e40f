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
// Hostile archives: cli_tree_hostile_test.cc; the writer, scanner and
// comparer: cli_tree_fixture.h.
//
// CAIRN_TEST_LARGE=0 (sanitizer builds) shrinks the 100k-file and the 4 GiB
// sparse cases.
#include "cli_tree_fixture.h"

namespace cairn::cli_test {
namespace {

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

}  // namespace
}  // namespace cairn::cli_test
