// Encrypted backups end to end, through the real binary, as a user runs
// them (this file: round trips, no plaintext on disk, ids per key;
// cli_encryption_refusal_test.cc: refused keys, tampering, the dedup base;
// the fixture: cli_encryption_fixture.h): `cairn key create`, then backup, restore, ls, cat, verify and
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

#include "cli_encryption_fixture.h"

namespace cairn::cli_test::encryption_test {
namespace {

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

}  // namespace
}  // namespace cairn::cli_test::encryption_test
