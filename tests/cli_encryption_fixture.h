// The fixture of the encryption tests (cli_encryption_test.cc,
// cli_encryption_refusal_test.cc): keys, trees and files to back up, the
// datastore's layout read back to look for plaintext and to tamper with, and
// EncryptionTest.
#pragma once

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
#include "scoped_env.h"
#include "crypto/crypt_config.h"
#include "crypto/key_file.h"
#include "crypto/sha256.h"
#include "format/coding.h"
#include "format/crc32c.h"
#include "index/manifest.h"


namespace cairn::cli_test::encryption_test {

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

inline void MakeDir(const std::string& path, mode_t mode = 0755) {
  if (::mkdir(path.c_str(), mode) != 0 && errno != EEXIST) {
    ADD_FAILURE() << "mkdir " << path << ": " << std::strerror(errno);
  }
  ::chmod(path.c_str(), mode);  // umask
}

inline void MakeSymlink(const std::string& target, const std::string& path) {
  if (::symlink(target.c_str(), path.c_str()) != 0) {
    ADD_FAILURE() << "symlink " << path << ": " << std::strerror(errno);
  }
}

inline void WriteFileMode(const std::string& path, std::string_view data, mode_t mode = 0644) {
  WriteFile(path, data);
  ::chmod(path.c_str(), mode);
}

// Writes `data` at `offset` of an existing file.
inline void WriteAt(const std::string& path, uint64_t offset, std::string_view data) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0) << path << ": " << std::strerror(errno);
  ASSERT_EQ(::pwrite(fd, data.data(), data.size(), static_cast<off_t>(offset)),
            static_cast<ssize_t>(data.size()));
  ::close(fd);
}

inline std::string RandomString(size_t len, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(len, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

inline std::string Text(size_t len, uint64_t seed) {
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
inline void WriteTree(const std::string& root, uint64_t seed) {
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
inline std::map<std::string, std::string> DescribeTree(const std::string& root) {
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
inline std::vector<std::string> DidxDigests(const std::string& path) {
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
inline void FixBlobCrc(std::string* blob) {
  ASSERT_GE(blob->size(), blob::kHeaderSize);
  ByteSpan bytes = AsBytes(*blob);
  uint32_t crc = format::Crc32cExtend(0, bytes.first(60));
  crc = format::Crc32cExtend(crc, bytes.subspan(blob::kHeaderSize));
  format::PutU32(reinterpret_cast<uint8_t*>(blob->data()) + 60, crc);
}

// The header of a stored blob; fails the test when its CRC or layout is bad.
inline std::optional<blob::Header> BlobHeader(const std::string& path) {
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
inline std::vector<std::pair<std::string, std::string>> StoreContents(const std::string& root) {
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

inline std::vector<std::string> FilesContaining(
    const std::vector<std::pair<std::string, std::string>>& contents, std::string_view needle) {
  std::vector<std::string> hits;
  for (const auto& [label, data] : contents) {
    if (data.find(needle) != std::string::npos) hits.push_back(label);
  }
  return hits;
}

// The CryptConfig of a key file, unwrapped here (weak KDF: fast).
inline std::shared_ptr<const crypto::CryptConfig> Unwrap(const Key& key) {
  auto master = crypto::UnwrapKey(ReadFile(key.path), key.pass);
  if (!master.ok()) {
    ADD_FAILURE() << "unwrap " << key.path << ": " << master.status().ToString();
    return nullptr;
  }
  return crypto::CryptConfig::FromMasterKey(*master);
}

// The chunks of an image file, cut at the 4 MiB chunk size.
inline std::vector<std::string> ImageChunks(const std::string& path) {
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
    env_.Scrub(kEnvNames);
    ::setenv("CAIRN_TEST_WEAK_KDF", "1", 1);
    CliTest::SetUp();
  }
  void TearDown() override {
    env_.Restore();
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

  ScopedEnv env_;
  int restores_ = 0;
};

}  // namespace cairn::cli_test::encryption_test
