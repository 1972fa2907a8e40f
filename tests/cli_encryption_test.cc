// Encrypted backups end to end, through the real binary, as a user runs
// them: `cairn key create`, then backup, restore, ls, cat, verify and
// snapshots with --keyfile / CAIRN_KEYFILE and the passphrase from
// CAIRN_PASSPHRASE or --passphrase-file.
//
// What must hold (docs/FORMAT.md, "Blob" and "Encryption"):
//   - round trips of images (random, zero and tail chunks), trees (nested
//     directories, symlinks, odd modes) and blob archives are byte exact,
//     and a second backup with the same key deduplicates against the first;
//   - nothing the user backed up appears in plaintext anywhere under the
//     datastore: not image data, file contents, file or directory names,
//     symlink targets, nor blob archives (a plain store made from the same
//     sources is the control that proves the scan finds them);
//   - chunk ids are HMAC-SHA256 under the key's id key: another key gives
//     other ids for the same data, and plain (SHA-256) and encrypted
//     snapshots live side by side in one store;
//   - a restore without the key, with another key, a wrong passphrase, a
//     truncated or group-readable key file fails with a message that says
//     why, and writes nothing at its target;
//   - tampering is caught: a chunk whose payload was changed and its CRC
//     fixed (only the AES-GCM tag can tell), a chunk swapped for another of
//     the same key (only the keyed id can tell), a plain chunk planted in an
//     encrypted snapshot, an index rewritten consistently (only the signed
//     manifest's checksum can tell), an edited manifest with a valid CRC
//     (only the signature can tell), a manifest stripped of its encryption;
//     verify without the key checks the stored checksums only and says so;
//   - a backup never takes a snapshot made without its key (plain, or
//     another key) as its dedup base.
//
// The test links cairn_index (blob, manifest, crypto) to fix CRCs, re-encode
// manifests and compute the expected keyed chunk ids. Every key is created
// with CAIRN_TEST_WEAK_KDF=1, so unwrapping one takes a millisecond.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "blob/blob.h"
#include "cli_fixture.h"
#include "crypto/crypt_config.h"
#include "crypto/key_file.h"
#include "crypto/sha256.h"
#include "format/coding.h"
#include "format/crc32c.h"
#include "index/manifest.h"

namespace cairn::cli_test {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr char kImg[] = "disk0.img";
constexpr char kTree[] = "root.tree";
constexpr char kBlob[] = "vm.conf.blob";

// A key file made by `cairn key create`, and what it said about the key.
struct Key {
  std::string path;
  std::string pass;
  std::string fingerprint;      // "3f:a2:…" (the first 8 bytes)
  std::string fingerprint_hex;  // all 32 bytes
};

// --- files and trees ---------------------------------------------------------

void MakeDir(const std::string& path, mode_t mode = 0755) {
  if (::mkdir(path.c_str(), mode) != 0 && errno != EEXIST) {
    ADD_FAILURE() << "mkdir " << path << ": " << std::strerror(errno);
  }
  ::chmod(path.c_str(), mode);  // umask
}

void MakeSymlink(const std::string& target, const std::string& path) {
  if (::symlink(target.c_str(), path.c_str()) != 0) {
    ADD_FAILURE() << "symlink " << path << ": " << std::strerror(errno);
  }
}

void WriteFileMode(const std::string& path, std::string_view data, mode_t mode = 0644) {
  WriteFile(path, data);
  ::chmod(path.c_str(), mode);
}

// Writes `data` at `offset` of an existing file.
void WriteAt(const std::string& path, uint64_t offset, std::string_view data) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0) << path << ": " << std::strerror(errno);
  ASSERT_EQ(::pwrite(fd, data.data(), data.size(), static_cast<off_t>(offset)),
            static_cast<ssize_t>(data.size()));
  ::close(fd);
}

std::string RandomString(size_t len, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(len, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

std::string Text(size_t len, uint64_t seed) {
  static constexpr const char* kWords[] = {"alpha ", "bravo ", "charlie ", "delta\n", "echo ",
                                           "foxtrot ", "golf ", "hotel\n"};
  std::mt19937_64 rng(seed);
  std::string s;
  while (s.size() < len) s += kWords[rng() % 8];
  s.resize(len);
  return s;
}

// A small tree: nested directories, text and random files, an empty file,
// a private file, a directory with another mode, relative, absolute and
// dangling symlinks.
void WriteTree(const std::string& root, uint64_t seed) {
  MakeDir(root);
  MakeDir(root + "/etc");
  WriteFileMode(root + "/etc/hosts", "127.0.0.1 localhost\n::1 localhost\n");
  WriteFileMode(root + "/etc/secret.conf", Text(3000, seed), 0600);
  MakeDir(root + "/data");
  WriteFileMode(root + "/data/random.bin", RandomString(300 * kKiB + 7, seed + 1));
  WriteFileMode(root + "/data/text.txt", Text(200 * kKiB, seed + 2));
  WriteFileMode(root + "/data/empty", "");
  WriteFileMode(root + "/data/run.sh", "#!/bin/sh\necho hi\n", 0755);
  MakeDir(root + "/a");
  MakeDir(root + "/a/b", 0750);
  MakeDir(root + "/a/b/c");
  WriteFileMode(root + "/a/b/c/deep.txt", "deep down\n");
  MakeDir(root + "/a/empty-dir", 0700);
  MakeSymlink("etc/hosts", root + "/link");
  MakeSymlink("../../data", root + "/a/b/up");
  MakeSymlink("/nonexistent/absolute/target", root + "/dangling");
}

// Path inside the tree → "d MODE", "f MODE SIZE SHA256" or "l TARGET"; the
// root itself is left out.
std::map<std::string, std::string> DescribeTree(const std::string& root) {
  std::map<std::string, std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const std::string path = it->path().string();
    const std::string rel = path.substr(root.size() + 1);
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) {
      ADD_FAILURE() << "lstat " << path << ": " << std::strerror(errno);
      continue;
    }
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", st.st_mode & 07777);
    if (S_ISDIR(st.st_mode)) {
      out[rel] = std::string("d ") + mode;
    } else if (S_ISREG(st.st_mode)) {
      out[rel] = std::string("f ") + mode + " " + std::to_string(st.st_size) + " " +
                 Sha256Hex(ReadFile(path));
    } else if (S_ISLNK(st.st_mode)) {
      out[rel] = "l " + fs::read_symlink(it->path(), ec).string();
    } else {
      out[rel] = "other";
    }
  }
  if (ec) ADD_FAILURE() << "walk " << root << ": " << ec.message();
  return out;
}

// --- datastore layout ----------------------------------------------------------

// The chunk ids a dynamic index (NAME.tree.*.didx) lists, in order, as hex.
std::vector<std::string> DidxDigests(const std::string& path) {
  constexpr size_t kHeader = 4096, kEntry = 40;
  std::string data = ReadFile(path);
  std::vector<std::string> ids;
  if (data.size() < kHeader || (data.size() - kHeader) % kEntry != 0) {
    ADD_FAILURE() << path << ": not a dynamic index of " << data.size() << " bytes";
    return ids;
  }
  for (size_t off = kHeader; off < data.size(); off += kEntry) {
    ids.push_back(ToHex(AsBytes(std::string_view(data).substr(off + 8, 32))));
  }
  return ids;
}

// Recomputes a blob's CRC32C (header bytes [0, 60), then the payload) after
// the blob was edited, so that only what the CRC does not cover can tell.
void FixBlobCrc(std::string* blob) {
  ASSERT_GE(blob->size(), blob::kHeaderSize);
  ByteSpan bytes = AsBytes(*blob);
  uint32_t crc = format::Crc32cExtend(0, bytes.first(60));
  crc = format::Crc32cExtend(crc, bytes.subspan(blob::kHeaderSize));
  format::PutU32(reinterpret_cast<uint8_t*>(blob->data()) + 60, crc);
}

// The header of a stored blob; fails the test when its CRC or layout is bad.
std::optional<blob::Header> BlobHeader(const std::string& path) {
  std::string data = ReadFile(path);
  auto h = blob::Check(AsBytes(data));
  if (!h.ok()) {
    ADD_FAILURE() << path << ": " << h.status().ToString();
    return std::nullopt;
  }
  return *h;
}

// Every regular file under `root` as (label, bytes); for a file that is an
// unencrypted blob, its decoded plaintext too, labelled "PATH (decoded)", so
// that zstd cannot hide a plaintext from a scan.
std::vector<std::pair<std::string, std::string>> StoreContents(const std::string& root) {
  std::vector<std::pair<std::string, std::string>> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const std::string path = it->path().string();
    std::string data = ReadFile(path);
    auto header = blob::Check(AsBytes(data));
    if (header.ok() && header->encryption == blob::Encryption::kNone) {
      auto plain = blob::Decode(AsBytes(data));
      if (plain.ok()) out.emplace_back(path + " (decoded)", std::string(AsStringView(*plain)));
    }
    out.emplace_back(path, std::move(data));
  }
  if (ec) ADD_FAILURE() << "walk " << root << ": " << ec.message();
  return out;
}

std::vector<std::string> FilesContaining(
    const std::vector<std::pair<std::string, std::string>>& contents, std::string_view needle) {
  std::vector<std::string> hits;
  for (const auto& [label, data] : contents) {
    if (data.find(needle) != std::string::npos) hits.push_back(label);
  }
  return hits;
}

// The CryptConfig of a key file, unwrapped here (weak KDF: fast).
std::shared_ptr<const crypto::CryptConfig> Unwrap(const Key& key) {
  auto master = crypto::UnwrapKey(ReadFile(key.path), key.pass);
  if (!master.ok()) {
    ADD_FAILURE() << "unwrap " << key.path << ": " << master.status().ToString();
    return nullptr;
  }
  return crypto::CryptConfig::FromMasterKey(*master);
}

// The chunks of an image file, cut at the 4 MiB chunk size.
std::vector<std::string> ImageChunks(const std::string& path) {
  std::string data = ReadFile(path);
  std::vector<std::string> chunks;
  for (size_t off = 0; off < data.size(); off += kChunk) chunks.push_back(data.substr(off, kChunk));
  return chunks;
}

class EncryptionTest : public CliTest {
 protected:
  static constexpr const char* kEnvNames[] = {"CAIRN_PASSPHRASE", "CAIRN_PASSPHRASE_FILE",
                                              "CAIRN_NEW_PASSPHRASE", "CAIRN_KEYFILE",
                                              "CAIRN_TEST_WEAK_KDF"};

  void SetUp() override {
    // The developer's shell must not leak a key or passphrase into cairn
    // (the harness passes our environment on, and getenv finds the first).
    for (const char* name : kEnvNames) {
      if (const char* v = std::getenv(name)) saved_env_[name] = v;
      ::unsetenv(name);
    }
    ::setenv("CAIRN_TEST_WEAK_KDF", "1", 1);
    CliTest::SetUp();
  }
  void TearDown() override {
    for (const char* name : kEnvNames) ::unsetenv(name);
    for (const auto& [name, value] : saved_env_) ::setenv(name.c_str(), value.c_str(), 1);
  }

  // `cairn key create` of a new key file NAME (in the test directory).
  Key CreateKey(const std::string& name, const std::string& pass) {
    Key key{Path(name), pass, "", ""};
    RunOptions o;
    o.env = {"CAIRN_PASSPHRASE=" + pass};
    RunResult r = Cairn({"key", "create", key.path, "--json"}, o);
    EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
    if (r.exit_code != kExitOk) return key;
    Json j = ParseJson(r.out);
    key.fingerprint = j.value("fingerprint", "");
    key.fingerprint_hex = j.value("fingerprint_hex", "");
    EXPECT_EQ(key.fingerprint_hex.size(), 64u) << r.out;
    struct stat st;
    EXPECT_EQ(::stat(key.path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0600u) << "a new key file must be private";
    return key;
  }

  // cairn VERB -r STORE ARGS… --keyfile KEY with the passphrase in
  // CAIRN_PASSPHRASE; no key at all when `key` is null.
  RunResult Keyed(const Key* key, const std::string& verb, std::vector<std::string> args,
                  RunOptions options = {}) const {
    if (key != nullptr) {
      args.insert(args.end(), {"--keyfile", key->path});
      options.env.push_back("CAIRN_PASSPHRASE=" + key->pass);
    }
    return OnStore(verb, args, options);
  }

  // A backup of ARCHIVES as group ID at SnapTime(t); the JSON report, or null
  // (and a test failure) when it does not exit 0.
  Json BackupWith(const Key* key, const std::string& id, int t,
                  std::vector<std::string> archives) const {
    std::vector<std::string> args = {"--id", id, "--time", SnapTime(t), "--json"};
    args.insert(args.end(), archives.begin(), archives.end());
    RunResult r = Keyed(key, "backup", args);
    EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
    return r.exit_code == kExitOk ? ParseJson(r.out) : Json();
  }

  static Json ArchiveReport(const Json& report, const std::string& name) {
    if (report.is_object() && report.contains("archives")) {
      for (const auto& a : report["archives"]) {
        if (a.value("name", "") == name) return a;
      }
    }
    ADD_FAILURE() << "no archive " << name << " in " << report.dump();
    return Json::object();
  }

  RunResult Restore(const Key* key, const std::string& snap, const std::string& archive,
                    const std::string& target, std::vector<std::string> extra = {}) const {
    std::vector<std::string> args = {snap, archive, target};
    args.insert(args.end(), extra.begin(), extra.end());
    return Keyed(key, "restore", args);
  }

  // Restores a file archive (image or blob) to a new file and compares it.
  void ExpectFileRestores(const Key* key, const std::string& snap, const std::string& archive,
                          const std::string& source) {
    SCOPED_TRACE("restore " + snap + " " + archive);
    const std::string target = Path("restored-" + std::to_string(restores_++) + "-" + archive);
    RunResult r = Restore(key, snap, archive, target);
    ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
    EXPECT_EQ(CompareFiles(source, target), "");
  }

  // Restores a tree archive to a new directory and compares it.
  void ExpectTreeRestores(const Key* key, const std::string& snap, const std::string& source) {
    SCOPED_TRACE("restore " + snap + " " + kTree);
    const std::string target = Path("restored-tree-" + std::to_string(restores_++));
    RunResult r = Restore(key, snap, kTree, target);
    ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
    auto want = DescribeTree(source);
    EXPECT_FALSE(want.empty());
    EXPECT_EQ(DescribeTree(target), want);
  }

  // A restore that must fail: exit `code` (or any failure when -1), stderr
  // containing each of `words`, and nothing at the target.
  void ExpectRestoreRefused(const Key* key, const std::string& snap, const std::string& archive,
                            int code, const std::vector<std::string>& words,
                            RunOptions options = {}, std::vector<std::string> extra = {}) {
    const std::string target = Path("refused-" + std::to_string(restores_++) + "-" + archive);
    std::vector<std::string> args = {snap, archive, target};
    args.insert(args.end(), extra.begin(), extra.end());
    RunResult r = Keyed(key, "restore", args, options);
    SCOPED_TRACE(r.Describe());
    EXPECT_FALSE(r.killed());
    if (code >= 0) {
      EXPECT_EQ(r.exit_code, code);
    } else {
      EXPECT_NE(r.exit_code, kExitOk);
    }
    for (const auto& w : words) EXPECT_NE(r.err.find(w), std::string::npos) << "missing: " << w;
    EXPECT_FALSE(Exists(target)) << "a refused restore left " << target;
    EXPECT_FALSE(Exists(target + ".partial")) << "a refused restore left " << target << ".partial";
  }

  // The verify report (--json) of the whole store; `code` is the exit wanted.
  Json VerifyJson(const Key* key, int code, std::vector<std::string> extra = {}) const {
    std::vector<std::string> args = {"--json", "--no-ledger"};
    args.insert(args.end(), extra.begin(), extra.end());
    RunResult r = Keyed(key, "verify", args);
    EXPECT_EQ(r.exit_code, code) << r.Describe();
    return ParseJson(r.out);
  }

  // The snapshots --json entry of `snap` (null when not listed).
  Json SnapshotEntry(const std::string& snap) const {
    Json all = SnapshotsJson();
    if (all.is_array()) {
      for (const auto& s : all) {
        if (s.value("snapshot", "") == snap) return s;
      }
    }
    ADD_FAILURE() << snap << " not listed: " << all.dump();
    return Json();
  }

  std::string SnapDir(const std::string& snap) const { return SnapshotDir(store(), snap); }
  std::string ManifestPath(const std::string& snap) const {
    return SnapDir(snap) + "/index.json.blob";
  }
  // Chunk ids every index of `snap` lists (image and tree archives).
  std::set<std::string> ReferencedChunks(const std::string& snap) const {
    std::set<std::string> ids;
    for (const auto& name : ListDir(SnapDir(snap))) {
      std::vector<std::string> d;
      if (name.ends_with(".fidx")) d = IndexDigests(SnapDir(snap) + "/" + name);
      if (name.ends_with(".didx")) d = DidxDigests(SnapDir(snap) + "/" + name);
      ids.insert(d.begin(), d.end());
    }
    return ids;
  }

  // Every chunk of `snap` is stored encrypted (AES-256-GCM, header byte 11 =
  // 1) under `key` (its fingerprint's first 8 bytes in the header).
  void ExpectChunksEncrypted(const std::string& snap, const Key& key) {
    auto chunks = ChunkFiles(store());
    auto ids = ReferencedChunks(snap);
    EXPECT_FALSE(ids.empty());
    for (const auto& id : ids) {
      ASSERT_TRUE(chunks.count(id)) << "chunk " << id << " of " << snap << " is missing";
      std::string data = ReadFile(chunks[id]);
      ASSERT_GT(data.size(), 11u);
      EXPECT_EQ(static_cast<uint8_t>(data[11]), 1) << "chunk " << id << " is not encrypted";
      auto h = BlobHeader(chunks[id]);
      ASSERT_TRUE(h);
      EXPECT_EQ(h->encryption, blob::Encryption::kAes256Gcm);
      EXPECT_EQ(ToHex(h->key_print), key.fingerprint_hex.substr(0, 16)) << "chunk " << id;
    }
  }

  // The manifest of `snap`: its JSON (the blob is not encrypted).
  Json ManifestJson(const std::string& snap) const {
    std::string stored = ReadFile(ManifestPath(snap));
    auto plain = blob::Decode(AsBytes(stored));
    if (!plain.ok()) {
      ADD_FAILURE() << ManifestPath(snap) << ": " << plain.status().ToString();
      return Json();
    }
    return ParseJson(std::string(AsStringView(*plain)));
  }
  // Replaces the manifest of `snap` with `j`, in a blob with a valid CRC.
  void WriteManifestJson(const std::string& snap, const Json& j) const {
    std::string text = j.dump(2);
    auto stored = blob::Encode(AsBytes(text));
    ASSERT_TRUE(stored.ok()) << stored.status().ToString();
    WriteFile(ManifestPath(snap), AsStringView(*stored));
  }

  // An image of `chunks` full chunks plus a tail of random data; with
  // `zero_chunk` (and two chunks or more), the last full chunk and the last
  // MiB before it are zeros instead.
  std::string MakeImage(const std::string& name, uint64_t chunks, uint64_t tail, uint64_t seed,
                        bool zero_chunk = false) {
    const std::string path = Path(name);
    ImageWriter w(path, chunks * kChunk + tail, seed);
    w.Random(0, chunks * kChunk + tail);
    if (zero_chunk && chunks >= 2) w.Zeros((chunks - 1) * kChunk - kMiB, kChunk + kMiB);
    return path;
  }

  std::map<std::string, std::string> saved_env_;
  int restores_ = 0;
};

// --- 1. round trips --------------------------------------------------------------

// An image (random, partly zero and all-zero chunks, a short tail), a tree
// and a blob archive back up encrypted and restore byte for byte (the image
// also to stdout; ls and cat work with the key); every stored chunk and the
// blob archive are encrypted under the key; the manifest is signed and names
// the key; verify with the key checks everything; a second backup with the
// same key stores only the changed chunk and restores.
TEST_F(EncryptionTest, RoundTripOfImageTreeAndBlobWithDedup) {
  Key key = CreateKey("keys/main.json", "correct horse battery staple");
  const std::string img = MakeImage("disk.raw", 3, 12345, 11, /*zero_chunk=*/true);
  const std::string tree = Path("tree");
  WriteTree(tree, 12);
  const std::string conf = Path("vm.conf");
  WriteFile(conf, "name: test-vm\nmemory: 2048\ncores: 4\n");

  Json j = BackupWith(&key, "vm/100", 1,
                      {std::string(kImg) + "=" + img, std::string(kTree) + "=" + tree,
                       std::string(kBlob) + "=" + conf});
  ASSERT_TRUE(j.is_object());
  Json img_report = ArchiveReport(j, kImg);
  EXPECT_EQ(img_report.value("chunks", 0), 4);
  EXPECT_EQ(img_report.value("zero_chunks", 0), 1);
  EXPECT_FALSE(img_report.value("dedup_base", true));
  const std::string snap1 = Snap("vm/100", 1);

  // Stored encrypted, under ids that are not the plain SHA-256 ones.
  ExpectChunksEncrypted(snap1, key);
  auto ids = IndexDigests(SnapDir(snap1) + "/" + kImg + ".fidx");
  ASSERT_EQ(ids.size(), 4u);
  auto chunks = ImageChunks(img);
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_NE(ids[i], Sha256Hex(chunks[i])) << "chunk " << i << " is named by its plain SHA-256";
  }
  EXPECT_NE(ids[2], ZeroChunkId()) << "the zero chunk has its plain SHA-256 id";
  EXPECT_EQ(ChunkFiles(store()).count(ZeroChunkId()), 0u);
  auto blob_header = BlobHeader(SnapDir(snap1) + "/" + kBlob);
  ASSERT_TRUE(blob_header);
  EXPECT_EQ(blob_header->encryption, blob::Encryption::kAes256Gcm) << "blob archive not encrypted";

  // The manifest: readable without the key, signed, naming the key.
  auto manifest_header = BlobHeader(ManifestPath(snap1));
  ASSERT_TRUE(manifest_header);
  EXPECT_EQ(manifest_header->encryption, blob::Encryption::kNone);
  Json m = ManifestJson(snap1);
  ASSERT_TRUE(m.is_object());
  ASSERT_TRUE(m.contains("crypt")) << m.dump();
  EXPECT_EQ(m["crypt"].value("mode", ""), "encrypt");
  EXPECT_EQ(m["crypt"].value("key_fingerprint", ""), key.fingerprint_hex);
  EXPECT_EQ(m.value("signature", "").size(), 64u) << m.dump();

  // snapshots, without a key, shows the snapshot encrypted and its key.
  Json entry = SnapshotEntry(snap1);
  EXPECT_EQ(entry.value("encrypted", false), true) << entry.dump();
  EXPECT_EQ(entry.value("key_fingerprint", Json()), Json(key.fingerprint)) << entry.dump();

  ExpectFileRestores(&key, snap1, kImg, img);
  ExpectFileRestores(&key, snap1, kBlob, conf);
  ExpectTreeRestores(&key, snap1, tree);
  {
    // The image to stdout, with the key from CAIRN_KEYFILE and the
    // passphrase from --passphrase-file.
    const std::string pass_file = Path("pass.txt");
    WriteFileMode(pass_file, key.pass + "\n", 0600);
    StreamComparer stream(img);
    RunOptions o;
    o.stdout_sink = [&](std::string_view piece) { stream.Feed(piece); };
    o.env = {"CAIRN_KEYFILE=" + key.path};
    RunResult r = OnStore("restore", {snap1, kImg, "-", "--passphrase-file", pass_file}, o);
    ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
    EXPECT_EQ(stream.Result(), "") << "restore to stdout";
  }
  {
    RunResult r = Keyed(&key, "ls", {snap1, kTree});
    ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
    EXPECT_NE(r.out.find("deep.txt"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("secret.conf"), std::string::npos) << r.out;
    r = Keyed(&key, "cat", {snap1, kTree, "etc/secret.conf"});
    ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
    EXPECT_EQ(r.out, ReadFile(tree + "/etc/secret.conf"));
  }
  {
    Json v = VerifyJson(&key, kExitOk);
    EXPECT_EQ(v.value("ok", false), true) << v.dump();
    EXPECT_EQ(v.value("content_checked", false), true) << v.dump();
    EXPECT_EQ(v.value("keyless_chunks", -1), 0) << v.dump();
    EXPECT_GT(v.value("checked_chunks", 0), 4) << v.dump();
  }

  // A second backup with the same key: one image chunk changed (the tail),
  // the tree and blob unchanged.
  const std::string img2 = Path("disk2.raw");
  fs::copy_file(img, img2);
  WriteRandomAt(img2, 3 * kChunk + 100, 50, 13);
  const size_t chunks_before = ChunkFiles(store()).size();
  Json j2 = BackupWith(&key, "vm/100", 2,
                       {std::string(kImg) + "=" + img2, std::string(kTree) + "=" + tree,
                        std::string(kBlob) + "=" + conf});
  ASSERT_TRUE(j2.is_object());
  Json img2_report = ArchiveReport(j2, kImg);
  EXPECT_EQ(img2_report.value("dedup_base", false), true) << img2_report.dump();
  EXPECT_EQ(img2_report.value("new_chunks", -1), 1) << img2_report.dump();
  Json tree2_report = ArchiveReport(j2, kTree);
  EXPECT_EQ(tree2_report.value("new_chunks", -1), 0) << tree2_report.dump();
  EXPECT_GT(tree2_report.value("reused_files", 0), 0) << tree2_report.dump();
  EXPECT_EQ(ChunkFiles(store()).size(), chunks_before + 1);

  const std::string snap2 = Snap("vm/100", 2);
  ExpectChunksEncrypted(snap2, key);
  ExpectFileRestores(&key, snap2, kImg, img2);
  ExpectFileRestores(&key, snap2, kBlob, conf);
  ExpectTreeRestores(&key, snap2, tree);
  ExpectFileRestores(&key, snap1, kImg, img);  // the first is still whole
}

// --- 2. no plaintext on disk ----------------------------------------------------

// Unique markers in image data (inside incompressible random data), a file's
// content, a file name, a directory name, a symlink target and a blob
// archive. Backed up with a key, no file anywhere under the store contains
// any of them, raw or (for an unencrypted blob) decoded. The same sources in
// a plain store show every marker: the scan would have found them.
TEST_F(EncryptionTest, NoPlaintextAnywhereInTheStore) {
  const std::string marker = "qX7-cairn-secret-9Zt4";
  const std::map<std::string, std::string> where = {
      {"image", marker + "-img"},   {"file content", marker + "-content"},
      {"file name", marker + "-fname"}, {"directory name", marker + "-dname"},
      {"symlink target", marker + "-link"}, {"blob archive", marker + "-blob"}};

  const std::string img = Path("disk.raw");
  ImageWriter(img, 2 * kChunk + 777, 21).Random(0, 2 * kChunk + 777);
  WriteAt(img, kChunk + 4000, where.at("image"));

  const std::string tree = Path("tree");
  WriteTree(tree, 22);
  std::string content = RandomString(100 * kKiB, 23);
  content.replace(50 * kKiB, where.at("file content").size(), where.at("file content"));
  WriteFile(tree + "/data/payload.bin", content);
  WriteFile(tree + "/note-" + where.at("file name") + ".txt", "hello\n");
  MakeDir(tree + "/dir-" + where.at("directory name"));
  WriteFile(tree + "/dir-" + where.at("directory name") + "/inner.txt", "inner\n");
  MakeSymlink("target-" + where.at("symlink target"), tree + "/pointer");

  const std::string conf = Path("vm.conf");
  std::string conf_data = RandomString(8 * kKiB, 24);
  conf_data.replace(4 * kKiB, where.at("blob archive").size(), where.at("blob archive"));
  WriteFile(conf, conf_data);

  const std::vector<std::string> archives = {std::string(kImg) + "=" + img,
                                             std::string(kTree) + "=" + tree,
                                             std::string(kBlob) + "=" + conf};
  Key key = CreateKey("key.json", "no plaintext please");
  ASSERT_TRUE(BackupWith(&key, "vm/100", 1, archives).is_object());
  // And a second one on top (a backup with a base writes the same way).
  ASSERT_TRUE(BackupWith(&key, "vm/100", 2, archives).is_object());
  // Verify with the key, so the ledger and verify state are on disk too.
  {
    RunResult r = Keyed(&key, "verify", {});
    EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
  }

  // The backup holds the names (decrypted with the key).
  RunResult ls = Keyed(&key, "ls", {Snap("vm/100", 1), kTree});
  ASSERT_EQ(ls.exit_code, kExitOk) << ls.Describe();
  EXPECT_NE(ls.out.find(where.at("file name")), std::string::npos) << ls.out;
  EXPECT_NE(ls.out.find(where.at("directory name")), std::string::npos) << ls.out;

  auto contents = StoreContents(store());
  EXPECT_GT(contents.size(), ChunkFiles(store()).size()) << "the scan missed files";
  for (const auto& [label, data] : contents) {
    EXPECT_EQ(data.find(marker), std::string::npos) << label << " holds a plaintext marker";
  }
  for (const auto& [id, path] : ChunkFiles(store())) {
    auto h = BlobHeader(path);
    ASSERT_TRUE(h);
    EXPECT_EQ(h->encryption, blob::Encryption::kAes256Gcm) << path;
  }

  // Control: the same sources into a plain store.
  const std::string plain_store = Path("plain-store");
  ASSERT_EQ(Cairn({"init", plain_store}).exit_code, kExitOk);
  RunResult r = Cairn({"backup", "-r", plain_store, "--id", "vm/100", "--time", SnapTime(1),
                       archives[0], archives[1], archives[2]});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  auto plain_contents = StoreContents(plain_store);
  for (const auto& [what, m] : where) {
    EXPECT_FALSE(FilesContaining(plain_contents, m).empty())
        << "the scan does not find the " << what << " marker in a plain store";
  }
  // Image data, file content and blob sit raw on disk in a plain store (the
  // random data around them defeats compression).
  for (const char* what : {"image", "file content", "blob archive"}) {
    bool raw = false;
    for (const auto& label : FilesContaining(plain_contents, where.at(what))) {
      raw = raw || !label.ends_with("(decoded)");
    }
    EXPECT_TRUE(raw) << "the " << what << " marker is not on disk raw in a plain store";
  }
}

// --- 3. ids per key; plain and encrypted side by side -------------------------------

// The same image backed up plain, with key A and with key B into one store:
// three disjoint sets of chunk ids (plain: SHA-256 of the data; keyed: the
// HMAC under that key's id key, computed here from the unwrapped key), all
// stored. Each snapshot restores (the plain one without a key, and with
// one); snapshots lists all three without a key and tells which is which;
// verify with key A checks A and the plain one and says B's content was not
// checked.
TEST_F(EncryptionTest, KeysGiveDistinctIdsAndPlainAndEncryptedLiveSideBySide) {
  Key a = CreateKey("a.json", "passphrase A");
  Key b = CreateKey("b.json", "passphrase B");
  ASSERT_NE(a.fingerprint_hex, b.fingerprint_hex);
  const std::string img = MakeImage("disk.raw", 2, 4321, 31, /*zero_chunk=*/true);
  const std::string tree = Path("tree");
  WriteTree(tree, 32);
  const std::vector<std::string> archives = {std::string(kImg) + "=" + img,
                                             std::string(kTree) + "=" + tree};
  ASSERT_TRUE(BackupWith(nullptr, "vm/1", 1, archives).is_object());
  ASSERT_TRUE(BackupWith(&a, "vm/2", 1, archives).is_object());
  ASSERT_TRUE(BackupWith(&b, "vm/3", 1, archives).is_object());
  const std::string plain_snap = Snap("vm/1", 1), a_snap = Snap("vm/2", 1),
                    b_snap = Snap("vm/3", 1);

  auto fidx = [&](const std::string& snap) {
    return IndexDigests(SnapDir(snap) + "/" + kImg + ".fidx");
  };
  auto plain_ids = fidx(plain_snap), a_ids = fidx(a_snap), b_ids = fidx(b_snap);
  auto chunks = ImageChunks(img);
  ASSERT_EQ(chunks.size(), 3u);
  ASSERT_EQ(plain_ids.size(), 3u);
  ASSERT_EQ(a_ids.size(), 3u);
  ASSERT_EQ(b_ids.size(), 3u);
  auto a_crypt = Unwrap(a), b_crypt = Unwrap(b);
  ASSERT_TRUE(a_crypt && b_crypt);
  EXPECT_EQ(ToHex(a_crypt->fingerprint()), a.fingerprint_hex);
  for (size_t i = 0; i < chunks.size(); ++i) {
    SCOPED_TRACE("chunk " + std::to_string(i));
    EXPECT_EQ(plain_ids[i], Sha256Hex(chunks[i]));
    EXPECT_EQ(a_ids[i], crypto::DigestHex(a_crypt->ChunkId(AsBytes(chunks[i]))));
    EXPECT_EQ(b_ids[i], crypto::DigestHex(b_crypt->ChunkId(AsBytes(chunks[i]))));
  }
  EXPECT_EQ(plain_ids[1], ZeroChunkId());
  // Tree chunks too: three disjoint sets.
  std::set<std::string> all;
  size_t total = 0;
  for (const auto& snap : {plain_snap, a_snap, b_snap}) {
    auto ids = ReferencedChunks(snap);
    total += ids.size();
    all.insert(ids.begin(), ids.end());
  }
  EXPECT_EQ(all.size(), total) << "snapshots under different keys share chunk ids";
  auto stored = ChunkFiles(store());
  for (const auto& id : all) EXPECT_TRUE(stored.count(id)) << "chunk " << id << " missing";
  ExpectChunksEncrypted(a_snap, a);
  ExpectChunksEncrypted(b_snap, b);
  for (const auto& id : ReferencedChunks(plain_snap)) {
    auto h = BlobHeader(stored[id]);
    ASSERT_TRUE(h);
    EXPECT_EQ(h->encryption, blob::Encryption::kNone) << "plain chunk " << id;
  }

  // Listing needs no key.
  EXPECT_EQ(ListedSnapshots().size(), 3u);
  Json pe = SnapshotEntry(plain_snap), ae = SnapshotEntry(a_snap), be = SnapshotEntry(b_snap);
  EXPECT_EQ(pe.value("encrypted", true), false) << pe.dump();
  EXPECT_TRUE(pe.contains("key_fingerprint") && pe["key_fingerprint"].is_null()) << pe.dump();
  EXPECT_EQ(ae.value("encrypted", false), true) << ae.dump();
  EXPECT_EQ(ae.value("key_fingerprint", Json()), Json(a.fingerprint)) << ae.dump();
  EXPECT_EQ(be.value("encrypted", false), true) << be.dump();
  EXPECT_EQ(be.value("key_fingerprint", Json()), Json(b.fingerprint)) << be.dump();

  ExpectFileRestores(nullptr, plain_snap, kImg, img);
  ExpectTreeRestores(nullptr, plain_snap, tree);
  ExpectFileRestores(&a, plain_snap, kImg, img);  // a key does not get in the way
  ExpectTreeRestores(&b, plain_snap, tree);
  ExpectFileRestores(&a, a_snap, kImg, img);
  ExpectTreeRestores(&a, a_snap, tree);
  ExpectFileRestores(&b, b_snap, kImg, img);
  ExpectTreeRestores(&b, b_snap, tree);
  RunResult ls = Keyed(nullptr, "ls", {plain_snap, kTree});
  EXPECT_EQ(ls.exit_code, kExitOk) << ls.Describe();
  EXPECT_NE(ls.out.find("deep.txt"), std::string::npos) << ls.out;

  // verify with key A: A and plain checked, B by its stored checksums only.
  Json v = VerifyJson(&a, kExitOk);
  ASSERT_TRUE(v.is_object());
  EXPECT_EQ(v.value("ok", false), true) << v.dump();
  EXPECT_EQ(v.value("content_checked", true), false) << v.dump();
  EXPECT_EQ(v.value("keyless_chunks", 0u), ReferencedChunks(b_snap).size()) << v.dump();
  std::map<std::string, bool> checked;
  for (const auto& s : v["snapshots"]) {
    checked[s.value("snapshot", "")] = s.value("content_checked", false);
  }
  EXPECT_EQ(checked, (std::map<std::string, bool>{
                         {plain_snap, true}, {a_snap, true}, {b_snap, false}}));
}

// --- 4. refused keys -----------------------------------------------------------------

// An encrypted snapshot restored without its key, with another key, with a
// wrong passphrase, a missing, truncated or group-readable key file: each
// fails with a message saying why and writes nothing at the target (image,
// tree and blob archives alike). ls and cat refuse too. A backup with a
// wrong passphrase makes no snapshot and stores nothing.
TEST_F(EncryptionTest, RestoreRefusedWithoutTheRightKey) {
  Key key = CreateKey("key.json", "the right one");
  Key other = CreateKey("other.json", "the right one");  // same passphrase, another key
  const std::string img = MakeImage("disk.raw", 1, 999, 41);
  const std::string tree = Path("tree");
  WriteTree(tree, 42);
  const std::string conf = Path("vm.conf");
  WriteFile(conf, "cores: 2\n");
  ASSERT_TRUE(BackupWith(&key, "vm/100", 1,
                         {std::string(kImg) + "=" + img, std::string(kTree) + "=" + tree,
                          std::string(kBlob) + "=" + conf})
                  .is_object());
  const std::string snap = Snap("vm/100", 1);
  const std::vector<std::string> all_archives = {kImg, kTree, kBlob};

  {
    SCOPED_TRACE("no key");
    for (const auto& a : all_archives) {
      // 12: the snapshot needs a key that was not given (README, "Exit codes").
      ExpectRestoreRefused(nullptr, snap, a, kExitWrongKey, {snap, "encrypted", "--keyfile"});
    }
    RunResult r = Keyed(nullptr, "ls", {snap, kTree});
    EXPECT_NE(r.exit_code, kExitOk) << r.Describe();
    EXPECT_NE(r.err.find("--keyfile"), std::string::npos) << r.Describe();
    r = Keyed(nullptr, "cat", {snap, kTree, "etc/hosts"});
    EXPECT_NE(r.exit_code, kExitOk) << r.Describe();
    EXPECT_EQ(r.out, "") << "cat without the key printed something";
  }
  {
    SCOPED_TRACE("another key");
    for (const auto& a : all_archives) {
      ExpectRestoreRefused(&other, snap, a, kExitWrongKey, {snap, "another key"});
    }
    // The same from CAIRN_KEYFILE.
    RunOptions o;
    o.env = {"CAIRN_KEYFILE=" + other.path, "CAIRN_PASSPHRASE=" + other.pass};
    ExpectRestoreRefused(nullptr, snap, kImg, kExitWrongKey, {snap, "another key"}, o);
    RunResult r = Keyed(&other, "cat", {snap, kTree, "etc/hosts"});
    EXPECT_NE(r.exit_code, kExitOk) << r.Describe();
    EXPECT_EQ(r.out, "");
  }
  {
    SCOPED_TRACE("wrong passphrase");
    Key wrong = key;
    wrong.pass = "the wrong one";
    for (const auto& a : all_archives) {
      ExpectRestoreRefused(&wrong, snap, a, kExitWrongKey, {"wrong passphrase", key.path});
    }
  }
  {
    SCOPED_TRACE("truncated key file");
    Key cut = key;
    cut.path = Path("cut.json");
    std::string text = ReadFile(key.path);
    WriteFileMode(cut.path, text.substr(0, text.size() / 2), 0600);
    for (const auto& a : all_archives) ExpectRestoreRefused(&cut, snap, a, -1, {cut.path});
  }
  {
    SCOPED_TRACE("group-readable key file");
    Key open = key;
    open.path = Path("open.json");
    WriteFileMode(open.path, ReadFile(key.path), 0644);
    for (const auto& a : all_archives) {
      ExpectRestoreRefused(&open, snap, a, -1, {open.path, "unsafe permissions"});
    }
  }
  {
    SCOPED_TRACE("missing key file");
    Key gone = key;
    gone.path = Path("gone.json");
    ExpectRestoreRefused(&gone, snap, kImg, -1, {gone.path, "does not exist"});
  }
  // The right key still works after all that.
  ExpectFileRestores(&key, snap, kImg, img);
  {
    SCOPED_TRACE("after key change-passphrase");
    Key renewed = key;
    renewed.path = Path("renewed.json");
    WriteFileMode(renewed.path, ReadFile(key.path), 0600);
    RunOptions o;
    o.env = {"CAIRN_PASSPHRASE=" + key.pass, "CAIRN_NEW_PASSPHRASE=a brand new one"};
    RunResult r = Cairn({"key", "change-passphrase", renewed.path}, o);
    ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
    ExpectRestoreRefused(&renewed, snap, kTree, -1, {"wrong passphrase"});
    renewed.pass = "a brand new one";
    ExpectTreeRestores(&renewed, snap, tree);
  }

  // A backup with a wrong passphrase: refused before anything is written.
  const size_t chunks_before = ChunkFiles(store()).size();
  Key wrong = key;
  wrong.pass = "nope";
  RunResult r = Keyed(&wrong, "backup",
                      {"--id", "vm/100", "--time", SnapTime(2), std::string(kImg) + "=" + img});
  EXPECT_NE(r.exit_code, kExitOk) << r.Describe();
  EXPECT_NE(r.err.find("wrong passphrase"), std::string::npos) << r.Describe();
  EXPECT_EQ(ListedSnapshots(), std::vector<std::string>{snap});
  EXPECT_FALSE(Exists(SnapDir(Snap("vm/100", 2))));
  EXPECT_EQ(ChunkFiles(store()).size(), chunks_before);
}

// --- 5. tampering ----------------------------------------------------------------------

// A byte of an encrypted chunk's payload flipped and the blob CRC fixed:
// only AES-GCM authentication can tell. Verify without the key does not see
// it and says the content was not checked; restore with the key fails with
// exit 3 and writes nothing; verify with the key reports the chunk BAD.
TEST_F(EncryptionTest, TamperedChunkCaughtOnlyWithTheKey) {
  Key key = CreateKey("key.json", "tamper");
  const std::string img = MakeImage("disk.raw", 2, 5000, 51);
  ASSERT_TRUE(BackupWith(&key, "vm/100", 1, {std::string(kImg) + "=" + img}).is_object());
  const std::string snap = Snap("vm/100", 1);
  auto ids = IndexDigests(SnapDir(snap) + "/" + kImg + ".fidx");
  ASSERT_EQ(ids.size(), 3u);
  const std::string victim = ids[1];
  const std::string victim_path = ChunkFiles(store())[victim];
  ASSERT_FALSE(victim_path.empty());

  std::string stored = ReadFile(victim_path);
  ASSERT_GT(stored.size(), blob::kHeaderSize + 2000);
  stored[blob::kHeaderSize + 1000] ^= 0x10;
  FixBlobCrc(&stored);
  WriteFile(victim_path, stored);
  auto h = BlobHeader(victim_path);  // the CRC is fine
  ASSERT_TRUE(h);
  EXPECT_EQ(h->encryption, blob::Encryption::kAes256Gcm);

  {
    SCOPED_TRACE("verify without the key");
    RunResult r = OnStore("verify", {"--no-ledger"});
    EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
    EXPECT_NE(r.out.find("content was NOT checked"), std::string::npos) << r.Describe();
    Json v = VerifyJson(nullptr, kExitOk);
    EXPECT_EQ(v.value("content_checked", true), false) << v.dump();
    EXPECT_EQ(v.value("keyless_chunks", 0), 3) << v.dump();
    EXPECT_EQ(v.value("ok", false), true) << v.dump();
    // Without --no-ledger: a keyless pass must not vouch for the chunk later.
    r = OnStore("verify", {});
    EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
  }
  ExpectRestoreRefused(&key, snap, kImg, kExitCorruption, {});
  {
    SCOPED_TRACE("verify with the key");
    RunResult r = Keyed(&key, "verify", {});
    EXPECT_EQ(r.exit_code, kExitCorruption) << r.Describe();
    EXPECT_NE(r.out.find("BAD chunk " + victim), std::string::npos) << r.Describe();
    EXPECT_EQ(r.out.find("NOT checked"), std::string::npos) << r.Describe();
  }
}

// A fixed index edited: a flipped byte (its own checksum catches it), then
// rewritten consistently, digest 0 replaced by digest 1 with the index
// checksum and header CRC recomputed (only the signed manifest's checksum
// can tell; the chunk itself is genuine).
TEST_F(EncryptionTest, TamperedIndexCaught) {
  Key key = CreateKey("key.json", "tamper");
  const std::string img = MakeImage("disk.raw", 2, 5000, 52);
  ASSERT_TRUE(BackupWith(&key, "vm/100", 1, {std::string(kImg) + "=" + img}).is_object());
  const std::string snap = Snap("vm/100", 1);
  const std::string fidx = SnapDir(snap) + "/" + kImg + ".fidx";
  const std::string original = ReadFile(fidx);
  ASSERT_EQ(original.size(), 4096u + 3 * 32);

  FlipBit(fidx, 4096 + 40, 2);
  ExpectRestoreRefused(&key, snap, kImg, kExitCorruption, {});
  WriteFile(fidx, original);
  ExpectFileRestores(&key, snap, kImg, img);

  std::string edited = original;
  edited.replace(4096, 32, original.substr(4096 + 32, 32));
  uint8_t* p = reinterpret_cast<uint8_t*>(edited.data());
  crypto::Digest csum = crypto::Sha256(AsBytes(std::string_view(edited).substr(4096)));
  std::memcpy(p + 32, csum.data(), csum.size());
  format::PutU32(p + 64, format::Crc32c(ByteSpan(p, 64)));
  WriteFile(fidx, edited);
  ExpectRestoreRefused(&key, snap, kImg, kExitCorruption, {"does not match the manifest"});
  RunResult r = Keyed(&key, "verify", {"--no-ledger"});
  EXPECT_EQ(r.exit_code, kExitCorruption) << r.Describe();
}

// The manifest edited: a flipped byte (the CRC catches it); an archive size
// and, separately, created_by changed with the blob CRC fixed (only the
// signature can tell); the fingerprint swapped for another key's; "crypt"
// and "signature" stripped so the snapshot poses as plain. Each restore
// fails and writes nothing; verify with the key reports the signature.
TEST_F(EncryptionTest, TamperedManifestCaught) {
  Key key = CreateKey("key.json", "tamper");
  Key other = CreateKey("other.json", "tamper");
  const std::string img = MakeImage("disk.raw", 2, 5000, 53);
  const std::string tree = Path("tree");
  WriteTree(tree, 54);
  ASSERT_TRUE(BackupWith(&key, "vm/100", 1,
                         {std::string(kImg) + "=" + img, std::string(kTree) + "=" + tree})
                  .is_object());
  const std::string snap = Snap("vm/100", 1);
  const std::string path = ManifestPath(snap);
  const std::string original = ReadFile(path);
  const Json m = ManifestJson(snap);
  ASSERT_TRUE(m.is_object() && m.contains("archives") && m.contains("crypt")) << m.dump();

  {
    SCOPED_TRACE("a flipped byte");
    FlipBit(path, original.size() - 3, 0);
    ExpectRestoreRefused(&key, snap, kImg, kExitCorruption, {});
    WriteFile(path, original);
  }
  {
    SCOPED_TRACE("an archive size changed, CRC fixed");
    Json e = m;
    bool changed = false;
    for (auto& a : e["archives"]) {
      if (a.value("name", "") == kImg) {
        a["size"] = a.value("size", uint64_t{0}) - 4096;
        changed = true;
      }
    }
    ASSERT_TRUE(changed);
    WriteManifestJson(snap, e);
    ExpectRestoreRefused(&key, snap, kImg, kExitCorruption, {"signature"});
    ExpectRestoreRefused(&key, snap, kTree, kExitCorruption, {"signature"});
    RunResult r = Keyed(&key, "verify", {"--no-ledger"});
    EXPECT_EQ(r.exit_code, kExitCorruption) << r.Describe();
    EXPECT_NE(r.out.find("signature"), std::string::npos) << r.Describe();
    WriteFile(path, original);
  }
  {
    SCOPED_TRACE("created_by changed, CRC fixed");
    Json e = m;
    e["created_by"] = "someone else";
    WriteManifestJson(snap, e);
    ExpectRestoreRefused(&key, snap, kImg, kExitCorruption, {"signature"});
    WriteFile(path, original);
  }
  {
    SCOPED_TRACE("fingerprint of another key");
    Json e = m;
    e["crypt"]["key_fingerprint"] = other.fingerprint_hex;
    WriteManifestJson(snap, e);
    ExpectRestoreRefused(&key, snap, kImg, -1, {});
    ExpectRestoreRefused(&other, snap, kImg, -1, {});
    WriteFile(path, original);
  }
  {
    SCOPED_TRACE("crypt and signature stripped");
    Json e = m;
    e.erase("crypt");
    e.erase("signature");
    WriteManifestJson(snap, e);
    ExpectRestoreRefused(&key, snap, kImg, -1, {});
    ExpectRestoreRefused(&key, snap, kTree, -1, {});
    ExpectRestoreRefused(nullptr, snap, kImg, -1, {});
    ExpectRestoreRefused(nullptr, snap, kTree, -1, {});
    RunResult r = Keyed(&key, "verify", {"--no-ledger"});
    EXPECT_NE(r.exit_code, kExitOk) << r.Describe();
    WriteFile(path, original);
  }
  ExpectFileRestores(&key, snap, kImg, img);
  ExpectTreeRestores(&key, snap, tree);
}

// A genuine chunk of the same key copied over another chunk's file: its CRC
// and its tag are fine; only the keyed id (HMAC of the plaintext vs the file
// name) can tell. The other snapshot, which owns the copied chunk, still
// restores.
TEST_F(EncryptionTest, SwappedChunkOfTheSameKeyCaught) {
  Key key = CreateKey("key.json", "swap");
  const std::string img_a = MakeImage("a.raw", 2, 100, 61);
  const std::string img_b = MakeImage("b.raw", 2, 100, 62);
  ASSERT_TRUE(BackupWith(&key, "vm/1", 1, {std::string(kImg) + "=" + img_a}).is_object());
  ASSERT_TRUE(BackupWith(&key, "vm/2", 1, {std::string(kImg) + "=" + img_b}).is_object());
  const std::string snap_a = Snap("vm/1", 1), snap_b = Snap("vm/2", 1);
  auto a_ids = IndexDigests(SnapDir(snap_a) + "/" + kImg + ".fidx");
  auto b_ids = IndexDigests(SnapDir(snap_b) + "/" + kImg + ".fidx");
  ASSERT_EQ(a_ids.size(), 3u);
  ASSERT_EQ(b_ids.size(), 3u);
  auto chunks = ChunkFiles(store());
  const std::string a_path = chunks[a_ids[0]], b_path = chunks[b_ids[0]];
  ASSERT_FALSE(a_path.empty());
  ASSERT_FALSE(b_path.empty());
  WriteFile(a_path, ReadFile(b_path));
  ASSERT_TRUE(BlobHeader(a_path));  // a valid blob of this key

  ExpectRestoreRefused(&key, snap_a, kImg, kExitCorruption, {"does not match its id"});
  RunResult r = Keyed(&key, "verify", {"--no-ledger", snap_a});
  EXPECT_EQ(r.exit_code, kExitCorruption) << r.Describe();
  EXPECT_NE(r.out.find("BAD chunk " + a_ids[0]), std::string::npos) << r.Describe();
  ExpectFileRestores(&key, snap_b, kImg, img_b);
}

// A plain (unencrypted) blob of attacker-chosen data planted under an
// encrypted snapshot's chunk id: refused with the key ("not encrypted"),
// and caught even by a verify without the key, which checks that every
// chunk of an encrypted snapshot is encrypted.
TEST_F(EncryptionTest, PlainChunkPlantedInEncryptedSnapshotCaught) {
  Key key = CreateKey("key.json", "plant");
  const std::string img = MakeImage("disk.raw", 2, 100, 71);
  ASSERT_TRUE(BackupWith(&key, "vm/1", 1, {std::string(kImg) + "=" + img}).is_object());
  const std::string snap = Snap("vm/1", 1);
  auto ids = IndexDigests(SnapDir(snap) + "/" + kImg + ".fidx");
  ASSERT_EQ(ids.size(), 3u);
  const std::string path = ChunkFiles(store())[ids[0]];
  ASSERT_FALSE(path.empty());
  auto planted = blob::Encode(AsBytes(std::string(kChunk, 'A')));
  ASSERT_TRUE(planted.ok());
  WriteFile(path, AsStringView(*planted));

  ExpectRestoreRefused(&key, snap, kImg, kExitCorruption, {"not encrypted"});
  Json v = VerifyJson(nullptr, kExitCorruption);
  EXPECT_EQ(v.value("ok", true), false) << v.dump();
  EXPECT_NE(v.dump().find(ids[0]), std::string::npos) << v.dump();
}

// --- 6. dedup base only with the same key -------------------------------------------

// In one group, alternately plain, key A, key B: a backup takes the previous
// snapshot as its dedup base (image base, tree file reuse) only when it was
// made with the same key (or both plain); every snapshot restores, and every
// chunk an encrypted snapshot references is encrypted under its key.
TEST_F(EncryptionTest, DedupBaseOnlyFromTheSameKey) {
  Key a = CreateKey("a.json", "A");
  Key b = CreateKey("b.json", "B");
  const std::string img = MakeImage("disk.raw", 1, 3000, 81);
  const std::string tree = Path("tree");
  WriteTree(tree, 82);
  const std::vector<std::string> archives = {std::string(kImg) + "=" + img,
                                             std::string(kTree) + "=" + tree};
  struct Step {
    int t;
    const Key* key;
    bool base;  // expected to use the previous snapshot as base
  };
  const std::vector<Step> steps = {
      {1, nullptr, false},  // first
      {2, &a, false},       // previous is plain
      {3, &a, true},        // previous is A: the control
      {4, &b, false},       // previous is another key
      {5, nullptr, false},  // previous is encrypted, this one is not
      {6, nullptr, true},   // both plain
      {7, &a, false},       // previous is plain again
  };
  for (const auto& step : steps) {
    SCOPED_TRACE("backup at t=" + std::to_string(step.t));
    Json j = BackupWith(step.key, "vm/100", step.t, archives);
    ASSERT_TRUE(j.is_object());
    Json ir = ArchiveReport(j, kImg), tr = ArchiveReport(j, kTree);
    EXPECT_EQ(ir.value("dedup_base", !step.base), step.base) << ir.dump();
    EXPECT_EQ(tr.value("dedup_base", !step.base), step.base) << tr.dump();
    if (step.base) {
      EXPECT_GT(tr.value("reused_files", 0), 0) << tr.dump();
      EXPECT_EQ(ir.value("new_chunks", -1), 0) << ir.dump();
    } else {
      EXPECT_EQ(tr.value("reused_files", -1), 0) << tr.dump();
    }
    const std::string snap = Snap("vm/100", step.t);
    if (step.key != nullptr) ExpectChunksEncrypted(snap, *step.key);
    ExpectFileRestores(step.key, snap, kImg, img);
    ExpectTreeRestores(step.key, snap, tree);
  }
  EXPECT_EQ(ListedSnapshots().size(), steps.size());
}

}  // namespace
}  // namespace cairn::cli_test
