// Encrypted backups, part 2 (what must hold: cli_encryption_test.cc):
// restores refused without the right key, with a wrong passphrase or a bad
// key file; tampering caught (payload, swapped chunk, planted plain chunk,
// rewritten index, edited or stripped manifest); the dedup base only with
// the same key.
#include "cli_encryption_fixture.h"

namespace cairn::cli_test::encryption_test {
namespace {

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
}  // namespace cairn::cli_test::encryption_test
