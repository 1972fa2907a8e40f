#include "server/backup_session.h"
#include "protocol/chunk_frames.h"

#include <gtest/gtest.h>

#include <thread>

#include "blob/blob.h"
#include "crypto/crypt_config.h"
#include "format/coding.h"
#include "format/crc32c.h"
#include "index/fixed_index.h"
#include "index/manifest.h"
#include "tests/unit_test_util.h"

namespace cairn::server {
namespace {

using datastore::Datastore;
using datastore::GroupRef;
using datastore::SnapshotRef;
using test_util::CodeOf;

constexpr int64_t kT0 = 1796014800;  // 2026-11-30T05:00:00Z
constexpr uint32_t kChunk = index::kMinChunkSize;

struct Chunk {
  crypto::Digest id;
  Bytes stored;
};

Chunk MakeChunk(char fill) {
  Bytes plain(kChunk, static_cast<uint8_t>(fill));
  for (size_t i = 0; i < plain.size(); i += 7) plain[i] = static_cast<uint8_t>(i * 31 + fill);
  auto stored = blob::Encode(plain);
  EXPECT_TRUE(stored.ok());
  return {blob::ChunkId(plain, nullptr), *stored};
}

// An encrypted blob of `content` under a key of its own, claiming `id`:
// what a hostile client uploads (the server cannot tell it from a real
// one). With `key_print`, the header claims that key print instead (CRC
// recomputed).
Chunk FakeEncrypted(const crypto::Digest& id, char content,
                    std::optional<std::array<uint8_t, 8>> key_print = {}) {
  crypto::Key256 master{};
  master.fill(static_cast<uint8_t>(content));
  auto key = crypto::CryptConfig::FromMasterKey(master);
  Bytes plain(80, static_cast<uint8_t>(content));
  blob::EncodeOptions options;
  options.crypt = key.get();
  Bytes stored = blob::Encode(plain, options).value();
  if (key_print) {
    std::memcpy(&stored[48], key_print->data(), 8);
    uint32_t crc = format::Crc32cExtend(format::Crc32c(ByteSpan(stored).first(60)),
                                        ByteSpan(stored).subspan(64));
    format::PutU32(&stored[60], crc);
  }
  return {id, stored};
}

Bytes Frames(const std::vector<Chunk>& chunks) {
  Bytes out;
  for (const Chunk& c : chunks) {
    size_t at = out.size();
    out.resize(at + protocol::kUploadFrameHeaderSize + c.stored.size());
    std::memcpy(&out[at], c.id.data(), 32);
    format::PutU32(&out[at + 32], static_cast<uint32_t>(c.stored.size()));
    std::memcpy(&out[at + protocol::kUploadFrameHeaderSize], c.stored.data(), c.stored.size());
  }
  return out;
}

class BackupSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CAIRN_ASSERT_OK(Datastore::Init(*env_, dir_.path()));
    auto store = Datastore::Open(*env_, dir_.path());
    CAIRN_ASSERT_OK(store);
    store_ = std::move(*store);
  }

  std::string Begin(SessionRegistry& r, const SnapshotRef& snap, const std::string& token = "bk",
                    bool check_owner = true) {
    auto id = r.Begin(token, "main", *store_, snap, check_owner);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    return id.ok() ? *id : "";
  }

  std::shared_ptr<BackupSession> Find(SessionRegistry& r, const std::string& id) {
    auto s = r.Find(id, "bk", "main");
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? *s : nullptr;
  }

  // Uploads chunks, the image index over them and finishes: the snapshot.
  // On an error the session is aborted, as the client does.
  Status BackUp(SessionRegistry& r, const SnapshotRef& snap, const std::vector<Chunk>& upload,
                const std::vector<crypto::Digest>& refs, std::optional<int64_t> base = {}) {
    std::string id = Begin(r, snap);
    Status s = BackUpIn(r, id, snap, upload, refs, base);
    if (!s.ok()) r.Abort(id);
    return s;
  }

  Status BackUpIn(SessionRegistry& r, const std::string& id, const SnapshotRef& snap,
                  const std::vector<Chunk>& upload, const std::vector<crypto::Digest>& refs,
                  std::optional<int64_t> base) {
    auto s = Find(r, id);
    if (!s) return InternalError("no session");
    if (base) {
      CAIRN_RETURN_IF_ERROR(r.UseBase(*s, SnapshotRef{snap.group, *base}.TimeString()));
    }
    if (!upload.empty()) CAIRN_RETURN_IF_ERROR(r.UploadChunks(*s, Frames(upload)).status());
    index::FixedIndex idx(uint64_t{kChunk} * refs.size(), kChunk, refs);
    CAIRN_RETURN_IF_ERROR(r.PutFile(*s, "disk0.img.fidx", idx.Encode()));
    index::Manifest m;
    m.type = snap.group.type;
    m.id = snap.group.id;
    m.time = snap.TimeString();
    m.archives.push_back({"disk0.img", index::ArchiveKind::kImage, idx.image_size(), idx.csum(),
                          kChunk});
    CAIRN_ASSIGN_OR_RETURN(Bytes manifest, index::EncodeManifest(m));
    s.reset();
    return r.Finish(id, manifest).status();
  }

  size_t Listed(const GroupRef& g) {
    auto snaps = store_->ListSnapshots(g);
    return snaps.ok() ? snaps->size() : 0;
  }

  std::unique_ptr<Env> env_ = NewPosixEnv();
  std::unique_ptr<Logger> logger_ = NewNullLogger();
  test_util::TempDir dir_;
  std::unique_ptr<Datastore> store_;
  GroupRef group_{"", "vm", "100"};
};

TEST_F(BackupSessionTest, FinishedSessionIsASnapshotAndTheGroupIsTheTokens) {
  SessionRegistry r(*logger_, std::chrono::seconds(60));
  Chunk a = MakeChunk('a'), b = MakeChunk('b');
  CAIRN_ASSERT_OK(BackUp(r, {group_, kT0}, {a, b}, {a.id, b.id, a.id}));
  EXPECT_EQ(Listed(group_), 1u);
  EXPECT_EQ(ReadGroupOwner(*env_, store_->GroupDir(group_)), "bk");
  EXPECT_TRUE(store_->chunks().Contains(a.id).value());
  EXPECT_EQ(r.open_sessions(), 0u);
  // Another backup token may not add to it.
  EXPECT_EQ(CodeOf(r.Begin("other", "main", *store_, {group_, kT0 + 1}, true)),
            StatusCode::kPermissionDenied);
}

TEST_F(BackupSessionTest, ReferencesOnlyToUploadedOrBaseChunks) {
  SessionRegistry r(*logger_, std::chrono::seconds(60));
  Chunk a = MakeChunk('a'), b = MakeChunk('b'), c = MakeChunk('c');
  CAIRN_ASSERT_OK(BackUp(r, {group_, kT0}, {a, b}, {a.id, b.id}));
  // c is in the datastore (another group's backup stored it) ...
  CAIRN_ASSERT_OK(store_->chunks().Insert(c.id, c.stored).status());
  // ... but a session that neither uploaded it nor has it in its base may
  // not reference it: no probing by digest.
  EXPECT_EQ(CodeOf(BackUp(r, {group_, kT0 + 1}, {}, {a.id, c.id}, kT0)),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(Listed(group_), 1u);
  // With the base, a and b need no upload.
  CAIRN_ASSERT_OK(BackUp(r, {group_, kT0 + 2}, {}, {b.id, a.id}, kT0));
  EXPECT_EQ(Listed(group_), 2u);
}

TEST_F(BackupSessionTest, ChunksAreRehashed) {
  SessionRegistry r(*logger_, std::chrono::seconds(60));
  std::string id = Begin(r, {group_, kT0});
  auto s = Find(r, id);
  Chunk a = MakeChunk('a'), b = MakeChunk('b');
  Chunk liar{b.id, a.stored};  // a valid blob under another chunk's name
  EXPECT_EQ(CodeOf(r.UploadChunks(*s, Frames({liar}))), StatusCode::kInvalidArgument);
  EXPECT_FALSE(store_->chunks().Contains(b.id).value());
  Chunk flipped = a;
  flipped.stored[flipped.stored.size() / 2] ^= 1;
  EXPECT_EQ(CodeOf(r.UploadChunks(*s, Frames({flipped}))), StatusCode::kInvalidArgument);
  Bytes truncated = Frames({a});
  truncated.resize(truncated.size() - 1);
  EXPECT_EQ(CodeOf(r.UploadChunks(*s, truncated)), StatusCode::kInvalidArgument);
  EXPECT_FALSE(store_->chunks().Contains(a.id).value());
}

TEST_F(BackupSessionTest, TheManifestMustDescribeTheUploadedFiles) {
  SessionRegistry r(*logger_, std::chrono::seconds(60));
  Chunk a = MakeChunk('a');
  std::string id = Begin(r, {group_, kT0});
  auto s = Find(r, id);
  CAIRN_ASSERT_OK(r.UploadChunks(*s, Frames({a})).status());
  index::FixedIndex idx(kChunk, kChunk, {a.id});
  CAIRN_ASSERT_OK(r.PutFile(*s, "disk0.img.fidx", idx.Encode()));
  EXPECT_EQ(CodeOf(r.PutFile(*s, "disk0.img.fidx", idx.Encode())), StatusCode::kAlreadyExists);
  EXPECT_EQ(CodeOf(r.PutFile(*s, "index.json.blob", idx.Encode())), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(r.PutFile(*s, "../x.img.fidx", idx.Encode())), StatusCode::kInvalidArgument);
  index::Manifest m;
  m.type = "vm";
  m.id = "100";
  m.time = SnapshotRef{group_, kT0}.TimeString();
  crypto::Digest wrong = idx.csum();
  wrong[0] ^= 1;
  m.archives.push_back({"disk0.img", index::ArchiveKind::kImage, kChunk, wrong, kChunk});
  s.reset();
  EXPECT_EQ(CodeOf(r.Finish(id, index::EncodeManifest(m).value())), StatusCode::kInvalidArgument);
  // A refused finish ends the session and leaves nothing.
  EXPECT_EQ(Listed(group_), 0u);
  EXPECT_FALSE(env_->Stat(store_->SnapshotDir({group_, kT0})).ok());
  EXPECT_EQ(CodeOf(r.Find(id, "bk", "main")), StatusCode::kNotFound);
}

TEST_F(BackupSessionTest, AnIdleSessionIsAbortedAndUnlocksItsGroup) {
  // 3 s: the lock check below must come before the session idles out,
  // even when this thread is descheduled for a while (TSan, a busy machine).
  SessionRegistry r(*logger_, std::chrono::seconds(3));
  std::string id = Begin(r, {group_, kT0});
  EXPECT_TRUE(env_->Stat(store_->SnapshotDir({group_, kT0})).ok());
  // The group is locked while the session is open.
  EXPECT_EQ(CodeOf(r.Begin("bk", "main", *store_, {group_, kT0 + 1}, true)),
            StatusCode::kAborted);
  // The reaper takes the session out of the registry, then (outside the
  // registry's lock) drops it, which removes the unfinished snapshot: wait
  // for both.
  const std::string dir = store_->SnapshotDir({group_, kT0});
  for (int i = 0; i < 300 && (r.open_sessions() > 0 || env_->Stat(dir).ok()); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(r.open_sessions(), 0u);
  EXPECT_FALSE(env_->Stat(dir).ok());
  EXPECT_EQ(CodeOf(r.Find(id, "bk", "main")), StatusCode::kNotFound);
  // The group lock goes last, just after the directory: a backup may find
  // it still held for a moment.
  Chunk a = MakeChunk('a');
  Status backup;
  for (int i = 0; i < 200; ++i) {
    backup = BackUp(r, {group_, kT0 + 1}, {a}, {a.id});
    if (backup.code() != StatusCode::kAborted) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  CAIRN_ASSERT_OK(backup);
}

TEST_F(BackupSessionTest, AKilledClientsSessionIsTakenOverByTheNextBackup) {
  SessionLimits limits;
  limits.takeover_wait = std::chrono::milliseconds(100);
  limits.orphan_grace = std::chrono::hours(1);  // only the takeover acts here
  SessionRegistry r(*logger_, limits);
  auto first = r.Begin("bk", "main", *store_, {group_, kT0}, true, /*connection=*/1);
  CAIRN_ASSERT_OK(first);
  // The server closed the connection for idleness: a slow client, not a
  // dead one. The session keeps its group, and a refusal names it.
  r.ConnectionClosed(1, /*by_client=*/false);
  auto refused = r.Begin("bk", "main", *store_, {group_, kT0 + 1}, true, 2);
  EXPECT_EQ(CodeOf(refused), StatusCode::kAborted);
  EXPECT_NE(refused.status().message().find(*first), std::string::npos)
      << refused.status().ToString();
  // A request on a new connection, which the client then closes (killed):
  // the next backup of the group aborts the orphan and takes the group.
  CAIRN_ASSERT_OK(r.Find(*first, "bk", "main", 3));
  r.ConnectionClosed(3, /*by_client=*/true);
  auto second = r.Begin("bk", "main", *store_, {group_, kT0 + 1}, true, 4);
  CAIRN_ASSERT_OK(second);
  EXPECT_EQ(CodeOf(r.Find(*first, "bk", "main")), StatusCode::kNotFound);
  EXPECT_FALSE(env_->Stat(store_->SnapshotDir({group_, kT0})).ok());
  EXPECT_EQ(r.open_sessions(), 1u);
}

TEST_F(BackupSessionTest, AnOrphanedSessionIsAbortedAfterItsGrace) {
  SessionLimits limits;
  limits.orphan_grace = std::chrono::milliseconds(200);
  SessionRegistry r(*logger_, limits);
  auto id = r.Begin("bk", "main", *store_, {group_, kT0}, true, 7);
  CAIRN_ASSERT_OK(id);
  r.ConnectionClosed(7, /*by_client=*/true);
  const std::string dir = store_->SnapshotDir({group_, kT0});
  for (int i = 0; i < 600 && (r.open_sessions() > 0 || env_->Stat(dir).ok()); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(r.open_sessions(), 0u);
  EXPECT_FALSE(env_->Stat(dir).ok());
}

TEST_F(BackupSessionTest, SessionsBelongToTheirTokenAndReadsToTheirBase) {
  SessionRegistry r(*logger_, std::chrono::seconds(60));
  Chunk a = MakeChunk('a'), b = MakeChunk('b');
  CAIRN_ASSERT_OK(BackUp(r, {group_, kT0}, {a}, {a.id}));
  CAIRN_ASSERT_OK(store_->chunks().Insert(b.id, b.stored).status());
  EXPECT_TRUE(r.ReadableModes("bk", "main", a.id).empty());  // no session open
  std::string id = Begin(r, {group_, kT0 + 1});
  EXPECT_EQ(CodeOf(r.Find(id, "other", "main")), StatusCode::kNotFound);
  EXPECT_EQ(CodeOf(r.Find(id, "bk", "elsewhere")), StatusCode::kNotFound);
  auto s = Find(r, id);
  CAIRN_ASSERT_OK(r.UseBase(*s, SnapshotRef{group_, kT0}.TimeString()));
  // The base's chunks, in the base's mode (plain).
  EXPECT_EQ(r.ReadableModes("bk", "main", a.id), std::vector<ChunkMode>{ChunkMode{}});
  EXPECT_TRUE(r.ReadableModes("bk", "main", b.id).empty());
  EXPECT_TRUE(r.ReadableModes("other", "main", a.id).empty());
  // An upload never makes a chunk readable, proved or not.
  Chunk c = MakeChunk('c');
  CAIRN_ASSERT_OK(r.UploadChunks(*s, Frames({c, FakeEncrypted(b.id, 'x')})).status());
  EXPECT_TRUE(r.ReadableModes("bk", "main", c.id).empty());
  EXPECT_TRUE(r.ReadableModes("bk", "main", b.id).empty());
  r.Abort(id);
  EXPECT_TRUE(r.ReadableModes("bk", "main", a.id).empty());
  EXPECT_EQ(Listed(group_), 1u);
}

TEST_F(BackupSessionTest, AFakeNeverStandsOverAProvedChunk) {
  SessionRegistry r(*logger_, std::chrono::seconds(60));
  Chunk a = MakeChunk('a'), b = MakeChunk('b');
  // A hostile session plants a fake "encrypted" blob under a's digest
  // (a = SHA-256 of a plaintext it can guess), and one under b's once b is
  // stored.
  CAIRN_ASSERT_OK(BackUp(r, {group_, kT0}, {b}, {b.id}));
  GroupRef evil{"", "vm", "666"};
  std::string id = Begin(r, {evil, kT0}, "evil");
  auto s = r.Find(id, "evil", "main").value();
  CAIRN_ASSERT_OK(r.UploadChunks(*s, Frames({FakeEncrypted(a.id, 'x'), FakeEncrypted(b.id, 'x')}))
                      .status());
  r.Abort(id);
  s.reset();
  // b stays as proved; a holds the fake.
  EXPECT_EQ(*store_->chunks().Read(b.id), b.stored);
  EXPECT_NE(*store_->chunks().Read(a.id), a.stored);
  // The owner backs a up: its proved upload replaces the fake, and the
  // snapshot restores.
  CAIRN_ASSERT_OK(BackUp(r, {group_, kT0 + 1}, {a}, {a.id, b.id}, kT0));
  EXPECT_EQ(*store_->chunks().Read(a.id), a.stored);
  auto plain = blob::DecodeChunk(*store_->chunks().Read(a.id), a.id);
  CAIRN_EXPECT_OK(plain);
  // A byte-identical upload of a stored chunk is kept as it is.
  CAIRN_ASSERT_OK(BackUp(r, {group_, kT0 + 2}, {a, b}, {a.id, b.id}));
  EXPECT_EQ(*store_->chunks().Read(a.id), a.stored);
}

TEST_F(BackupSessionTest, ModesAreNeverMixed) {
  SessionRegistry r(*logger_, std::chrono::seconds(60));
  Chunk a = MakeChunk('a');
  CAIRN_ASSERT_OK(store_->chunks().Insert(a.id, a.stored).status());
  // A fake encrypted upload of a plain chunk's digest: referenced, but a
  // plain snapshot may not use it.
  EXPECT_EQ(CodeOf(BackUp(r, {group_, kT0}, {FakeEncrypted(a.id, 'x')}, {a.id})),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Listed(group_), 0u);
  // Chunks of two keys in one session: refused.
  std::string id = Begin(r, {group_, kT0 + 1});
  auto s = Find(r, id);
  Chunk b = MakeChunk('b');
  EXPECT_EQ(CodeOf(r.UploadChunks(*s, Frames({FakeEncrypted(a.id, 'x'), FakeEncrypted(b.id, 'y')}))),
            StatusCode::kInvalidArgument);
  s.reset();
  r.Abort(id);
}

TEST_F(BackupSessionTest, RepeatedFramesAreDecodedOnceAndDecodingIsCapped) {
  SessionLimits limits;
  limits.max_decoded_per_request = 3 * kChunk;
  limits.max_decoded_per_session = 5 * kChunk;
  SessionRegistry r(*logger_, limits);
  std::string id = Begin(r, {group_, kT0});
  auto s = Find(r, id);
  Chunk a = MakeChunk('a'), b = MakeChunk('b'), c = MakeChunk('c'), d = MakeChunk('d');
  // The same chunk 40 times, in two encodings (so that no copy is the
  // stored bytes): decoded once, then skipped as held.
  Bytes plain(kChunk, static_cast<uint8_t>('a'));
  for (size_t i = 0; i < plain.size(); i += 7) plain[i] = static_cast<uint8_t>(i * 31 + 'a');
  blob::EncodeOptions raw;
  raw.compress = false;
  Chunk a_raw{a.id, blob::Encode(plain, raw).value()};
  ASSERT_NE(a_raw.stored, a.stored);
  std::vector<Chunk> repeats;
  for (int i = 0; i < 20; ++i) repeats.insert(repeats.end(), {a, a_raw});
  CAIRN_ASSERT_OK(r.UploadChunks(*s, Frames(repeats)).status());  // a decoded once
  EXPECT_EQ(CodeOf(r.UploadChunks(*s, Frames({b, c, d, MakeChunk('e')}))),
            StatusCode::kOutOfRange);  // 4 decodes in one request
  // The session's cap: a, b, c, d decoded (4 of 5); two more pass no more.
  EXPECT_EQ(CodeOf(r.UploadChunks(*s, Frames({MakeChunk('f'), MakeChunk('g')}))),
            StatusCode::kOutOfRange);
  s.reset();
  r.Abort(id);
}

TEST_F(BackupSessionTest, AnAbortedSessionClaimsNoGroupAndQuotasHold) {
  SessionLimits limits;
  limits.max_sessions_per_token = 2;
  limits.max_groups_per_token = 1;
  SessionRegistry r(*logger_, limits);
  std::string id = Begin(r, {group_, kT0}, "squatter");
  r.Abort(id);
  EXPECT_EQ(ReadGroupOwner(*env_, store_->GroupDir(group_)), "");
  // The group is still free for its real owner.
  Chunk a = MakeChunk('a');
  CAIRN_ASSERT_OK(BackUp(r, {group_, kT0 + 1}, {a}, {a.id}));
  EXPECT_EQ(ReadGroupOwner(*env_, store_->GroupDir(group_)), "bk");
  // bk owns one group: a new one is past its quota, its own is not.
  EXPECT_EQ(CodeOf(r.Begin("bk", "main", *store_, {{"", "vm", "101"}, kT0}, true)),
            StatusCode::kResourceExhausted);
  std::string one = Begin(r, {group_, kT0 + 2});
  // Two sessions at once at most.
  std::string two = Begin(r, {{"", "vm", "102"}, kT0}, "bk", /*check_owner=*/false);
  EXPECT_EQ(CodeOf(r.Begin("bk", "main", *store_, {{"", "vm", "103"}, kT0}, false)),
            StatusCode::kResourceExhausted);
  r.Abort(one);
  r.Abort(two);
}

// A repair session (sync --resync-corrupt): an existing snapshot of the
// token's group only, chunks only; the snapshot stays as it is.
TEST_F(BackupSessionTest, ARepairSessionTakesChunksOfAnExistingSnapshotOnly) {
  SessionRegistry r(*logger_, std::chrono::seconds(60));
  Chunk a = MakeChunk('a');
  CAIRN_ASSERT_OK(BackUp(r, {group_, kT0}, {a}, {a.id}));
  EXPECT_EQ(CodeOf(r.Begin("bk", "main", *store_, {group_, kT0 + 1}, true, 0, true)),
            StatusCode::kNotFound);
  EXPECT_EQ(CodeOf(r.Begin("other", "main", *store_, {group_, kT0}, true, 0, true)),
            StatusCode::kPermissionDenied);
  auto id = r.Begin("bk", "main", *store_, {group_, kT0}, true, 0, true);
  CAIRN_ASSERT_OK(id.status());
  auto s = Find(r, *id);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(r.PutFile(*s, "disk0.img.fidx", ByteSpan()).code(), StatusCode::kFailedPrecondition);
  s.reset();
  EXPECT_EQ(CodeOf(r.Finish(*id, ByteSpan())), StatusCode::kFailedPrecondition);
  EXPECT_EQ(Listed(group_), 1u);
}

}  // namespace
}  // namespace cairn::server
