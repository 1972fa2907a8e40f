// `cairn sync --from SRC --to DST` (src/sync/sync.h) with the real binary:
//   - path → path: snapshots restore byte-identical from DST, DST verifies
//     clean, a second run copies nothing, --dry-run changes nothing and says
//     what it would copy;
//   - encrypted snapshots are copied without the key and restore with it;
//   - group filters and --transfer-last choose what is copied;
//   - a damaged chunk in SRC is refused on arrival (exit 3, the chunk named)
//     and no snapshot appears on DST;
//   - --remove-vanished forgets only what sync copied from this source and
//     the source no longer has, never a protected snapshot;
//   - --resync-corrupt copies again what verify quarantined on DST, and a DST
//     snapshot that failed verification is never the dedup base;
//   - a sync killed (SIGKILL) while it copies chunks leaves no snapshot on
//     DST, and the next run completes;
//   - through a real `cairn serve`: pull (server → path, reader token) and
//     push (path → server, backup token: the notes follow through the API,
//     the group is the token's), a second push uploading nothing; a token
//     that may not write, an unreachable source and a wrong fingerprint fail
//     clearly;
//   - an incremental pull after a one-chunk change fetches that chunk only
//     (the server's /metrics chunk read counters).
#include <filesystem>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "cli_server_fixture.h"
#include "net/http_client.h"

namespace cairn::cli_test {
namespace {

class SyncTest : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    dst_ = Path("dst");
    ASSERT_EQ(Cairn({"init", dst_}).exit_code, 0);
  }

  RunResult Sync(std::vector<std::string> args, const RunOptions& options = {}) const {
    std::vector<std::string> full = {"sync", "--from", store(),        "--to",
                                     dst_,   "--json", "--no-progress"};
    full.insert(full.end(), args.begin(), args.end());
    return Cairn(full, options);
  }

  std::vector<std::string> DstSnapshots() const {
    RunResult r = Cairn({"snapshots", "-r", dst_, "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.Describe();
    std::vector<std::string> out;
    nlohmann::json j = ParseJson(r.out);
    EXPECT_TRUE(j.is_array()) << r.out;
    if (!j.is_array()) return out;
    for (const auto& s : j) out.push_back(s.value("snapshot", ""));
    return out;
  }

  // Restores ARCHIVE of SNAP from `repo` and compares it with `expected`.
  void ExpectRestores(const std::string& repo, const std::string& snap, const std::string& archive,
                      const std::string& expected, std::vector<std::string> extra = {}) {
    std::string out = Path("restored-" + std::to_string(restores_++));
    std::vector<std::string> args = {"restore", "-r", repo, snap, archive, out};
    args.insert(args.end(), extra.begin(), extra.end());
    RunResult r = Cairn(args);
    ASSERT_EQ(r.exit_code, 0) << r.Describe();
    EXPECT_EQ(CompareFiles(expected, out), "");
  }

  std::string dst_;
  int restores_ = 0;
};

TEST_F(SyncTest, PathToPathCopiesOnceAndRestoresByteIdentical) {
  std::string image = Path("disk.img");
  WriteChunkImage(image, {1, 2, 3, 1});
  Backup("vm/100", 1, {"disk0.img=" + image, "vm.conf.blob=" + image}, false);
  WriteChunkImage(image, {1, 2, 4, 5});
  Backup("vm/100", 2, {"disk0.img=" + image}, false);

  // --dry-run: says what it would copy, changes nothing.
  RunResult r = Sync({"--dry-run"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  nlohmann::json j = ParseJson(r.out);
  EXPECT_EQ(j["snapshots"].size(), 2u) << r.out;
  EXPECT_EQ(j["snapshots"][0]["action"], "would copy");
  EXPECT_EQ(j["chunks_copied"], 5u) << r.out;  // 1, 2, 3, 4, 5: each once
  EXPECT_EQ(j["raw_bytes"], 5u * kChunk);
  EXPECT_TRUE(DstSnapshots().empty());
  EXPECT_TRUE(ChunkFiles(dst_).empty());

  r = Sync({});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  j = ParseJson(r.out);
  EXPECT_EQ(j["copied"], 2u) << r.out;
  EXPECT_EQ(j["chunks_copied"], 5u) << r.out;
  EXPECT_GT(j["stored_bytes"].get<uint64_t>(), 0u);
  EXPECT_EQ(DstSnapshots(), (std::vector<std::string>{Snap("vm/100", 1), Snap("vm/100", 2)}));
  // The chunk files are the same bytes (copied as stored, not re-encoded).
  auto src_chunks = ChunkFiles(store());
  auto dst_chunks = ChunkFiles(dst_);
  ASSERT_EQ(dst_chunks.size(), src_chunks.size());
  for (const auto& [id, path] : src_chunks) EXPECT_EQ(ReadFile(path), ReadFile(dst_chunks[id]));
  ExpectRestores(dst_, Snap("vm/100", 2), "disk0.img", image);
  WriteChunkImage(image, {1, 2, 3, 1});
  ExpectRestores(dst_, Snap("vm/100", 1), "disk0.img", image);
  ExpectRestores(dst_, Snap("vm/100", 1), "vm.conf.blob", image);
  r = Cairn({"verify", "-r", dst_});
  EXPECT_EQ(r.exit_code, 0) << r.Describe();

  // A second run finds everything there and copies nothing.
  r = Sync({});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  j = ParseJson(r.out);
  EXPECT_EQ(j["copied"], 0u) << r.out;
  EXPECT_EQ(j["present"], 2u) << r.out;
  EXPECT_EQ(j["chunks_copied"], 0u) << r.out;
}

TEST_F(SyncTest, EncryptedSnapshotsTravelWithoutTheKey) {
  std::string key = Path("key.json");
  RunOptions with_pass;
  with_pass.env = {"CAIRN_PASSPHRASE=correct horse"};
  ASSERT_EQ(Cairn({"key", "create", key}, with_pass).exit_code, 0);
  std::string image = Path("disk.img");
  WriteChunkImage(image, {7, 8});
  RunResult r = Cairn({"backup", "-r", store(), "--id", "vm/9", "--time", SnapTime(1), "--keyfile",
                       key, "disk0.img=" + image},
                      with_pass);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  Backup("vm/10", 1, {"disk0.img=" + image}, false);  // plain

  r = Sync({"--encrypted-only"});  // no key anywhere
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(DstSnapshots(), (std::vector<std::string>{Snap("vm/9", 1)}));
  r = Cairn({"restore", "-r", dst_, Snap("vm/9", 1), "disk0.img", Path("nokey")});
  EXPECT_NE(r.exit_code, 0);  // the copy is still encrypted
  std::string out = Path("withkey");
  r = Cairn({"restore", "-r", dst_, Snap("vm/9", 1), "disk0.img", out, "--keyfile", key},
            with_pass);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(CompareFiles(image, out), "");
}

TEST_F(SyncTest, FiltersAndTransferLastChooseWhatIsCopied) {
  std::string image = Path("disk.img");
  WriteChunkImage(image, {1});
  for (int t = 1; t <= 3; ++t) Backup("vm/100", t, {"disk0.img=" + image}, false);
  Backup("vm/200", 1, {"disk0.img=" + image}, false);
  Backup("ct/7", 1, {"disk0.img=" + image}, false);

  // --verified-only: only what passed a verify on SRC (here: vm/200).
  ASSERT_EQ(OnStore("verify", {"vm/200"}).exit_code, 0);
  RunResult r = Sync({"--verified-only", "--dry-run"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  nlohmann::json j = ParseJson(r.out);
  ASSERT_EQ(j["snapshots"].size(), 1u) << r.out;
  EXPECT_EQ(j["snapshots"][0]["snapshot"], Snap("vm/200", 1));

  r = Sync({"--group-filter", "type:vm", "--group-filter", "exclude:group:vm/200",
            "--transfer-last", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(DstSnapshots(), (std::vector<std::string>{Snap("vm/100", 2), Snap("vm/100", 3)}));
  // Named on the command line: only that group (or snapshot); a filter
  // before the name takes one value.
  r = Sync({"--group-filter", "type:ct", "ct/7"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(DstSnapshots().size(), 3u);
  r = Sync({"vm/200/latest"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(DstSnapshots().size(), 4u);

  r = Sync({"--group-filter", "colour:red"});
  EXPECT_EQ(r.exit_code, kExitUsage) << r.Describe();
  EXPECT_NE(r.err.find("colour:red"), std::string::npos) << r.err;
  r = Sync({"vm/404"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("vm/404"), std::string::npos) << r.err;
}

TEST_F(SyncTest, DamagedChunkIsRefusedOnArrival) {
  std::string image = Path("disk.img");
  WriteChunkImage(image, {1, 2, 3});
  Backup("vm/100", 1, {"disk0.img=" + image}, false);
  auto digests = IndexDigests(SnapshotDir(store(), Snap("vm/100", 1)) + "/disk0.img.fidx");
  ASSERT_EQ(digests.size(), 3u);
  std::string bad = ChunkFiles(store())[digests[1]];
  FlipBit(bad, FileSize(bad) / 2, 3);

  RunResult r = Sync({});
  EXPECT_EQ(r.exit_code, kExitCorruption) << r.Describe();
  EXPECT_NE(r.err.find(digests[1]), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("refused on arrival"), std::string::npos) << r.err;
  EXPECT_TRUE(DstSnapshots().empty());
  EXPECT_EQ(ChunkFiles(dst_).count(digests[1]), 0u);
}

TEST_F(SyncTest, RemoveVanishedForgetsOnlyWhatSyncCopied) {
  std::string image = Path("disk.img");
  WriteChunkImage(image, {1});
  for (int t = 1; t <= 3; ++t) Backup("vm/100", t, {"disk0.img=" + image}, false);
  ASSERT_EQ(OnStore("protect", {Snap("vm/100", 2)}).exit_code, 0);
  ASSERT_EQ(Sync({"--keep-protected"}).exit_code, 0);
  // A snapshot made on DST itself, not by sync.
  ASSERT_EQ(
      Cairn({"backup", "-r", dst_, "--id", "vm/100", "--time", SnapTime(9), "disk0.img=" + image})
          .exit_code,
      0);
  ASSERT_EQ(OnStore("unprotect", {Snap("vm/100", 2)}).exit_code, 0);
  for (int t = 1; t <= 2; ++t) ASSERT_EQ(OnStore("forget", {Snap("vm/100", t)}).exit_code, 0);

  RunResult r = Sync({"--remove-vanished", "--dry-run"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(DstSnapshots().size(), 4u);
  r = Sync({"--remove-vanished"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(ParseJson(r.out)["removed"], 1u) << r.out;
  // vm/100/1 went; 2 is protected on DST (carried over), 3 is on SRC, 9 was
  // not made by sync.
  EXPECT_EQ(DstSnapshots(),
            (std::vector<std::string>{Snap("vm/100", 2), Snap("vm/100", 3), Snap("vm/100", 9)}));
}

TEST_F(SyncTest, ResyncCorruptHealsAChunkVerifyQuarantined) {
  std::string image = Path("disk.img");
  WriteChunkImage(image, {1, 2, 3});
  Backup("vm/100", 1, {"disk0.img=" + image}, false);
  ASSERT_EQ(Sync({}).exit_code, 0);
  auto digests = IndexDigests(SnapshotDir(dst_, Snap("vm/100", 1)) + "/disk0.img.fidx");
  ASSERT_EQ(digests.size(), 3u);
  std::string bad = ChunkFiles(dst_)[digests[2]];
  FlipBit(bad, FileSize(bad) / 2, 5);
  EXPECT_EQ(Cairn({"verify", "-r", dst_}).exit_code, kExitCorruption);

  RunResult r = Sync({});  // without the option: present, nothing copied
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(ParseJson(r.out)["chunks_copied"], 0u) << r.out;
  r = Sync({"--resync-corrupt"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  nlohmann::json j = ParseJson(r.out);
  EXPECT_EQ(j["resynced"], 1u) << r.out;
  EXPECT_EQ(j["chunks_copied"], 1u) << r.out;
  r = Cairn({"verify", "-r", dst_});
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  ExpectRestores(dst_, Snap("vm/100", 1), "disk0.img", image);

  // A snapshot that failed verification on DST is not the next one's dedup
  // base: the chunk verify quarantined is copied again with the new snapshot.
  bad = ChunkFiles(dst_)[digests[0]];
  FlipBit(bad, FileSize(bad) / 2, 1);
  EXPECT_EQ(Cairn({"verify", "-r", dst_}).exit_code, kExitCorruption);
  Backup("vm/100", 2, {"disk0.img=" + image}, false);
  r = Sync({});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  j = ParseJson(r.out);
  EXPECT_EQ(j["copied"], 1u) << r.out;
  EXPECT_EQ(j["chunks_copied"], 1u) << r.out;
  ExpectRestores(dst_, Snap("vm/100", 2), "disk0.img", image);
}

TEST_F(SyncTest, KilledSyncLeavesNoSnapshotAndTheNextRunCompletes) {
  std::string image = Path("disk.img");
  WriteChunkImage(image, {11, 12, 13, 14, 15, 16, 17, 18});
  Backup("vm/100", 1, {"disk0.img=" + image}, false);
  // Killed three times, once 1, 3 and 5 of 8 chunks are on DST; each run
  // skips what the last one stored. Slowed to half a second a chunk, so
  // that a run is still copying (three chunks or more to go) long after the
  // count is reached, however late a loaded machine runs the poll: at 16
  // MB/s and 6 chunks the last run could finish first.
  RunResult r;
  for (size_t at : {1u, 3u, 5u}) {
    RunOptions o;
    int polls = 0;  // the chunk directories are listed every 20th poll (~20 ms)
    o.poll = [&](pid_t) { return ++polls % 20 == 0 && ChunkFiles(dst_).size() >= at; };
    r = Sync({"--limit-rate", "8M", "--jobs", "1"}, o);
    ASSERT_TRUE(r.killed()) << r.Describe();
    EXPECT_TRUE(DstSnapshots().empty()) << "killed at " << at << " chunks";
  }
  size_t before = ChunkFiles(dst_).size();
  EXPECT_GE(before, 5u);

  r = Sync({});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  nlohmann::json j = ParseJson(r.out);
  EXPECT_EQ(j["copied"], 1u);
  EXPECT_LE(j["chunks_copied"].get<uint64_t>(), 8u - before) << r.out;  // what was there stays
  ExpectRestores(dst_, Snap("vm/100", 1), "disk0.img", image);
}

// Pull and push through a real server: the ServerTest fixture serves "main"
// (vm/100, two snapshots) and an empty "other".
TEST_F(SyncTest, NamespacesMapToATargetNamespaceWithinMaxDepth) {
  std::string image = Path("disk.img");
  WriteChunkImage(image, {1, 2});
  for (const auto& [ns, id] : std::vector<std::pair<std::string, std::string>>{
           {"site", "vm/100"}, {"site/a", "vm/101"}, {"site/a/b", "vm/102"}, {"", "vm/103"}}) {
    RunResult r = Cairn({"backup", "-r", store(), "--ns", ns, "--id", id, "--time", SnapTime(1),
                         "disk0.img=" + image});
    ASSERT_EQ(r.exit_code, 0) << r.Describe();
  }
  ASSERT_EQ(Cairn({"backup", "-r", store(), "--ns", "site", "--id", "vm/100", "--time", SnapTime(2),
                   "disk0.img=" + image})
                .exit_code,
            0);
  // site and one level below it, into copies/…; site/a/b and the root stay.
  RunResult r = Sync({"--ns", "site", "--target-ns", "copies", "--max-depth", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(ParseJson(r.out)["copied"], 3u) << r.out;
  EXPECT_TRUE(Exists(dst_ + "/ns/copies/vm/100/" + SnapTime(1)));
  EXPECT_TRUE(Exists(dst_ + "/ns/copies/ns/a/vm/101/" + SnapTime(1)));
  EXPECT_FALSE(Exists(dst_ + "/ns/copies/ns/a/ns/b"));
  EXPECT_FALSE(Exists(dst_ + "/ns/site"));
  EXPECT_FALSE(Exists(dst_ + "/vm/103"));
  ExpectRestores(dst_, Snap("vm/101", 1), "disk0.img", image, {"--ns", "copies/a"});
  // A second run finds both under their new names; --max-depth 0 takes site only.
  r = Sync({"--ns", "site", "--target-ns", "copies", "--max-depth", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(ParseJson(r.out)["present"], 3u) << r.out;
  r = Sync({"--ns", "site/a", "--target-ns", "/", "--max-depth", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(ParseJson(r.out)["copied"], 1u) << r.out;  // site/a's vm/101 at DST's root
  EXPECT_TRUE(Exists(dst_ + "/vm/101/" + SnapTime(1)));
  // --remove-vanished compares the mapped names.
  ASSERT_EQ(Cairn({"forget", "-r", store(), "--ns", "site", Snap("vm/100", 1)}).exit_code, 0);
  r = Sync({"--ns", "site", "--target-ns", "copies", "--max-depth", "1", "--remove-vanished"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(ParseJson(r.out)["removed"], 1u) << r.out;
  EXPECT_FALSE(Exists(dst_ + "/ns/copies/vm/100/" + SnapTime(1)));
  EXPECT_TRUE(Exists(dst_ + "/ns/copies/vm/100/" + SnapTime(2)));
  EXPECT_TRUE(Exists(dst_ + "/ns/copies/ns/a/vm/101/" + SnapTime(1)));
}

class ServerSyncTest : public ServerTest {};

TEST_F(ServerSyncTest, PullAndPushThroughTheServer) {
  std::string local = Path("pulled");
  ASSERT_EQ(Cairn({"init", local}).exit_code, 0);
  RunOptions client;
  client.env = ClientEnv(reader_);
  RunResult r = Cairn({"sync", "--from", url_, "--to", local, "--json"}, client);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(ParseJson(r.out)["copied"], 2u) << r.out;
  std::string out = Path("out.img");
  r = Cairn({"restore", "-r", local, Snap("vm/100", 2), "disk0.img", out});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(CompareFiles(image_, out), "");

  // Push to the server's other store with a backup token of that store.
  std::string other_url = "https://127.0.0.1:" + std::to_string(server_->port()) + "/other";
  ASSERT_EQ(Cairn({"notes", "-r", local, Snap("vm/100", 2), "--set", "pushed off-site"}).exit_code,
            0);
  std::string pusher = Token("pusher", "other", "backup");
  RunOptions push;
  push.env = ClientEnv(pusher);
  r = Cairn({"sync", "--from", local, "--to", other_url, "--json"}, push);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  nlohmann::json j = ParseJson(r.out);
  EXPECT_EQ(j["copied"], 2u) << r.out;
  r = Cairn({"restore", "-r", OtherStore(), Snap("vm/100", 2), "disk0.img", Path("out2.img")});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(CompareFiles(image_, Path("out2.img")), "");
  EXPECT_EQ(Cairn({"verify", "-r", OtherStore()}).exit_code, 0);
  EXPECT_EQ(ReadFile(SnapshotDir(OtherStore(), Snap("vm/100", 2)) + "/notes.txt"),
            "pushed off-site");  // through the server's notes API
  EXPECT_EQ(ReadFile(OtherStore() + "/vm/100/owner"), "pusher\n");
  r = Cairn({"sync", "--from", local, "--to", other_url, "--json"}, push);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(ParseJson(r.out)["chunks_copied"], 0u) << r.out;

  // A token that may not write there is refused, clearly, and nothing changes.
  std::string image2 = Path("disk2.img");
  WriteChunkImage(image2, {42});
  ASSERT_EQ(
      Cairn({"backup", "-r", local, "--id", "vm/100", "--time", SnapTime(3), "disk0.img=" + image2})
          .exit_code,
      0);
  RunOptions reader_of_other;
  reader_of_other.env = ClientEnv(Token("reader2", "other", "reader"));
  r = Cairn({"sync", "--from", local, "--to", other_url}, reader_of_other);
  EXPECT_EQ(r.exit_code, kExitFailure) << r.Describe();
  EXPECT_NE(r.err.find("reader2"), std::string::npos) << r.err;
  EXPECT_FALSE(Exists(OtherStore() + "/vm/100/" + SnapTime(3)));

  // A source that does not answer, and a certificate that is not the pinned
  // one: clear errors naming the side, nothing written.
  r = Cairn({"sync", "--from", "https://127.0.0.1:1/main", "--to", local}, client);
  EXPECT_NE(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.err.find("--from https://127.0.0.1:1/main"), std::string::npos) << r.err;
  RunOptions wrong_pin;
  wrong_pin.env = ClientEnv(reader_, false);
  r = Cairn({"sync", "--from", url_, "--to", local, "--from-fingerprint",
             "00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:ee:ff:00:11:22:33:44:55:66:77:88:99:aa:"
             "bb:cc:dd:ee:ff"},
            wrong_pin);
  EXPECT_NE(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.err.find("--from " + url_), std::string::npos) << r.err;
  r = Cairn({"snapshots", "-r", local, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(ParseJson(r.out).size(), 3u) << r.out;  // the two pulled and the one backed up
}

// --remove-vanished towards a server: the marker travels in the backup
// session, the server lists it, and the forget goes through the server's
// route, which checks the token's rights and the protection.
TEST_F(ServerSyncTest, RemoveVanishedForgetsOnTheServerWithItsRights) {
  const std::string other_url = "https://127.0.0.1:" + std::to_string(server_->port()) + "/other";
  Backup("vm/100", 3, {"disk0.img=" + image_}, false);
  ASSERT_EQ(OnStore("protect", {Snap("vm/100", 2)}).exit_code, 0);
  RunOptions admin;
  admin.env = ClientEnv(Token("admin2", "other", "admin"));
  auto sync = [&](const RunOptions& as, std::vector<std::string> extra) {
    std::vector<std::string> args = {"sync", "--from", store(), "--to", other_url, "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    return Cairn(args, as);
  };
  RunResult r = sync(admin, {"--keep-protected"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(ParseJson(r.out)["copied"], 3u) << r.out;
  for (int t = 1; t <= 3; ++t) {
    EXPECT_TRUE(Exists(SnapshotDir(OtherStore(), Snap("vm/100", t)) + "/.sync-source")) << t;
  }
  EXPECT_TRUE(Exists(SnapshotDir(OtherStore(), Snap("vm/100", 2)) + "/.protected"));
  // A snapshot made on the server's store itself, not by sync.
  ASSERT_EQ(Cairn({"backup", "-r", OtherStore(), "--id", "vm/100", "--time", SnapTime(9),
                   "disk0.img=" + image_})
                .exit_code,
            0);
  ASSERT_EQ(OnStore("unprotect", {Snap("vm/100", 2)}).exit_code, 0);
  for (int t = 1; t <= 2; ++t) ASSERT_EQ(OnStore("forget", {Snap("vm/100", t)}).exit_code, 0);

  // A token without the right to forget (verify): refused, clearly, and nothing goes.
  RunOptions checker;
  checker.env = ClientEnv(Token("checker", "other", "verify"));
  r = sync(checker, {"--remove-vanished"});
  EXPECT_EQ(r.exit_code, kExitFailure) << r.Describe();
  EXPECT_NE(r.err.find("checker"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("forget"), std::string::npos) << r.err;
  EXPECT_TRUE(Exists(SnapshotDir(OtherStore(), Snap("vm/100", 1))));

  r = sync(admin, {"--remove-vanished", "--dry-run"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(ParseJson(r.out)["removed"], 1u) << r.out;
  EXPECT_TRUE(Exists(SnapshotDir(OtherStore(), Snap("vm/100", 1))));
  r = sync(admin, {"--remove-vanished"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(ParseJson(r.out)["removed"], 1u) << r.out;
  // 1 went; 2 is protected on the server, 3 is on SRC, 9 was not made by sync.
  r = Cairn({"snapshots", "-r", OtherStore(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  std::vector<std::string> left;
  for (const auto& s : ParseJson(r.out)) left.push_back(s.value("snapshot", ""));
  EXPECT_EQ(left, (std::vector<std::string>{Snap("vm/100", 2), Snap("vm/100", 3),
                                            Snap("vm/100", 9)}));
}

// --resync-corrupt towards a server: the chunks of a snapshot its verify
// marked bad go again through a repair session; the server stores a proved
// upload where verify quarantined the damaged copy.
TEST_F(ServerSyncTest, ResyncCorruptHealsAChunkOnTheServer) {
  const std::string other_url = "https://127.0.0.1:" + std::to_string(server_->port()) + "/other";
  RunOptions pusher;
  pusher.env = ClientEnv(Token("pusher", "other", "backup"));
  auto sync = [&](const RunOptions& as, std::vector<std::string> extra) {
    std::vector<std::string> args = {"sync", "--from", store(), "--to", other_url, "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    return Cairn(args, as);
  };
  RunResult r = sync(pusher, {});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  auto digests = IndexDigests(SnapshotDir(OtherStore(), Snap("vm/100", 2)) + "/disk0.img.fidx");
  ASSERT_FALSE(digests.empty());
  std::string bad = ChunkFiles(OtherStore())[digests[0]];
  FlipBit(bad, FileSize(bad) / 2, 3);
  EXPECT_EQ(Cairn({"verify", "-r", OtherStore()}).exit_code, kExitCorruption);

  r = sync(pusher, {});  // without the option: present, nothing sent
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(ParseJson(r.out)["chunks_copied"], 0u) << r.out;
  // A token that may not upload (verify) may not repair: refused, naming it.
  RunOptions checker;
  checker.env = ClientEnv(Token("checker", "other", "verify"));
  r = sync(checker, {"--resync-corrupt"});
  EXPECT_EQ(r.exit_code, kExitFailure) << r.Describe();
  EXPECT_NE(r.err.find("checker"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("resync of"), std::string::npos) << r.err;

  r = sync(pusher, {"--resync-corrupt"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  nlohmann::json j = ParseJson(r.out);
  EXPECT_GE(j["resynced"].get<int>(), 1) << r.out;  // every snapshot holding the chunk
  r = Cairn({"verify", "-r", OtherStore()});
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  r = Cairn({"restore", "-r", OtherStore(), Snap("vm/100", 2), "disk0.img", Path("healed.img")});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(CompareFiles(image_, Path("healed.img")), "");
}

// An incremental pull after a small change (one chunk of the image's
// eleven) fetches exactly the new chunk: the sync reports as many chunks
// and stored bytes as the backup added, and the server read no other chunk
// (its /metrics chunk counters, scraped with a metrics token).
TEST_F(ServerSyncTest, IncrementalPullFetchesOnlyTheNewChunks) {
  std::string local = Path("pulled");
  ASSERT_EQ(Cairn({"init", local}).exit_code, 0);
  RunOptions client;
  client.env = ClientEnv(reader_);
  auto pull = [&] {
    return Cairn({"sync", "--from", url_, "--to", local, "--json", "--no-progress"}, client);
  };
  RunResult r = pull();
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  std::string changed = Path("changed.img");
  std::filesystem::copy_file(image_, changed);
  WriteRandomAt(changed, 5 * kChunk + 1000, 4096, 99);
  nlohmann::json b = Backup("vm/100", 3, {"disk0.img=" + changed});
  ASSERT_TRUE(b.is_object());
  const uint64_t new_chunks = b["archives"][0]["new_chunks"].get<uint64_t>();
  const uint64_t new_stored = b["archives"][0]["stored_bytes"].get<uint64_t>();
  ASSERT_EQ(new_chunks, 1u) << b.dump();

  const std::string scraper = Token("scraper", "main", "metrics");
  // cairn_chunk_reads_total and cairn_chunk_read_bytes_total of "main".
  auto reads = [&]() -> std::pair<uint64_t, uint64_t> {
    net::ClientOptions o;
    o.host = "127.0.0.1";
    o.port = static_cast<uint16_t>(server_->port());
    o.fingerprint = server_->fingerprint();
    o.authorization = "Bearer " + scraper;
    auto c = net::HttpConnection::Connect(o);
    if (!c.ok()) {
      ADD_FAILURE() << c.status().ToString();
      return {};
    }
    auto resp = (*c)->Request("GET", "/metrics", ByteSpan(), "");
    if (!resp.ok() || resp->status != 200) {
      ADD_FAILURE() << "GET /metrics: "
                    << (resp.ok() ? std::to_string(resp->status) : resp.status().ToString());
      return {};
    }
    const std::string text(AsStringView(resp->body));
    auto sample = [&](const std::string& name) -> uint64_t {
      std::smatch m;
      if (!std::regex_search(text, m, std::regex(name + R"(\{store="main"\} (\d+))"))) return 0;
      return std::stoull(m[1]);
    };
    return {sample("cairn_chunk_reads_total"), sample("cairn_chunk_read_bytes_total")};
  };
  const auto before = reads();
  r = pull();
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  const auto after = reads();
  nlohmann::json j = ParseJson(r.out);
  EXPECT_EQ(j["copied"], 1u) << r.out;
  EXPECT_EQ(j["chunks_copied"], new_chunks) << r.out;
  EXPECT_EQ(j["stored_bytes"], new_stored) << r.out;
  EXPECT_EQ(after.first - before.first, new_chunks);
  EXPECT_EQ(after.second - before.second, new_stored);
  r = Cairn({"restore", "-r", local, Snap("vm/100", 3), "disk0.img", Path("out3.img")});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(CompareFiles(changed, Path("out3.img")), "");
}

}  // namespace
}  // namespace cairn::cli_test
