// --json output of every verb: one JSON document on stdout with the fields
// scripts rely on, consistent with itself and with what was stored.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "cli_fixture.h"

namespace cairn::cli_test {
namespace {

// Fails the test for each of `fields` that `j` lacks.
void ExpectFields(const nlohmann::json& j, std::initializer_list<const char*> fields) {
  ASSERT_TRUE(j.is_object()) << j.dump();
  for (const char* f : fields)
    EXPECT_TRUE(j.contains(f)) << "missing \"" << f << "\" in " << j.dump();
}

class JsonTest : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    if (HasFatalFailure()) return;
    ImageWriter(Path("d0.raw"), 3 * kChunk + 999, 51)
        .Random(0, kChunk)
        .Copy(0, kChunk, kChunk)  // a duplicate
        .Text(3 * kChunk, 999);   // chunk 2 is a hole
    WriteFile(Path("vm.conf"), "cores: 8\n");
  }
};

TEST_F(JsonTest, Init) {
  const std::string path = Path("store2");
  RunResult r = Cairn({"init", path, "--json"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  nlohmann::json j = ParseJson(r.out);
  ExpectFields(j, {"datastore", "created"});
  EXPECT_EQ(j["datastore"], path);
  EXPECT_EQ(j["created"], true);
}

TEST_F(JsonTest, Backup) {
  nlohmann::json j =
      Backup("vm/100", 1, {"disk0.img=" + Path("d0.raw"), "vm.conf.blob=" + Path("vm.conf")});
  ExpectFields(j, {"snapshot", "ns", "bytes", "seconds", "archives"});
  EXPECT_EQ(j["snapshot"], Snap("vm/100", 1));
  EXPECT_EQ(j["ns"], "");
  EXPECT_EQ(j["bytes"], 3 * kChunk + 999 + 9);
  EXPECT_GE(j["seconds"].get<double>(), 0);
  ASSERT_EQ(j["archives"].size(), 2u);
  const auto& img = j["archives"][0];
  ExpectFields(img, {"name", "source", "kind", "bytes", "seconds", "mib_per_s", "chunks",
                     "new_chunks", "new_bytes", "stored_bytes", "reused_chunks", "reused_bytes",
                     "zero_chunks", "dedup_base"});
  EXPECT_EQ(img["name"], "disk0.img");
  EXPECT_EQ(img["source"], Path("d0.raw"));
  EXPECT_EQ(img["kind"], "img");
  EXPECT_EQ(img["bytes"], 3 * kChunk + 999);
  EXPECT_EQ(img["chunks"], 4);
  EXPECT_EQ(img["zero_chunks"], 1);
  EXPECT_EQ(img["new_chunks"], 3);  // random, text tail, zero
  EXPECT_EQ(img["reused_chunks"], 1);
  EXPECT_EQ(img["new_bytes"], 2 * kChunk + 999);
  EXPECT_EQ(img["reused_bytes"], kChunk);
  EXPECT_GT(img["stored_bytes"].get<uint64_t>(), 0u);
  EXPECT_EQ(img["dedup_base"], false);
  const auto& blob = j["archives"][1];
  EXPECT_EQ(blob["name"], "vm.conf.blob");
  EXPECT_EQ(blob["kind"], "blob");
  EXPECT_EQ(blob["bytes"], 9);

  // An error prints no JSON on stdout, only the message on stderr.
  RunResult r = OnStore("backup", {"--id", "vm/100", "--json", "disk0.img=" + Path("none")});
  EXPECT_EQ(r.exit_code, kExitFailure) << r.Describe();
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err, "");
}

TEST_F(JsonTest, Snapshots) {
  nlohmann::json empty = SnapshotsJson();
  EXPECT_EQ(empty, nlohmann::json::array());
  Backup("vm/100", 1, {"disk0.img=" + Path("d0.raw"), "vm.conf.blob=" + Path("vm.conf")});
  Backup("ct/7", 2, {"vm.conf.blob=" + Path("vm.conf")});
  nlohmann::json j = SnapshotsJson();
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 2u);
  std::set<std::string> names;
  for (const auto& s : j) {
    ExpectFields(s, {"snapshot", "ns", "type", "id", "time", "size", "archives", "verify"});
    names.insert(s["snapshot"].get<std::string>());
    EXPECT_EQ(s["snapshot"], s["type"].get<std::string>() + "/" + s["id"].get<std::string>() + "/" +
                                 s["time"].get<std::string>());
    EXPECT_TRUE(s["verify"].is_null()) << "never verified: " << s.dump();
    uint64_t sum = 0;
    for (const auto& a : s["archives"]) {
      ExpectFields(a, {"name", "size"});
      sum += a["size"].get<uint64_t>();
    }
    EXPECT_EQ(s["size"], sum);
  }
  EXPECT_EQ(names, (std::set<std::string>{Snap("vm/100", 1), Snap("ct/7", 2)}));

  // After a verify, each snapshot carries its state.
  ASSERT_EQ(OnStore("verify", {}).exit_code, kExitOk);
  j = SnapshotsJson();
  for (const auto& s : j) {
    ASSERT_TRUE(s["verify"].is_object()) << s.dump();
    ExpectFields(s["verify"], {"state", "time", "errors"});
    EXPECT_EQ(s["verify"]["state"], "ok");
    EXPECT_EQ(s["verify"]["errors"], 0);
  }

  // One group only.
  RunResult r = OnStore("snapshots", {"ct/7", "--json"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  nlohmann::json group = ParseJson(r.out);
  ASSERT_EQ(group.size(), 1u);
  EXPECT_EQ(group[0]["snapshot"], Snap("ct/7", 2));
}

TEST_F(JsonTest, Verify) {
  Backup("vm/100", 1, {"disk0.img=" + Path("d0.raw"), "vm.conf.blob=" + Path("vm.conf")});
  Backup("vm/100", 2, {"disk0.img=" + Path("d0.raw")});
  RunResult r = OnStore("verify", {"--json"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  nlohmann::json j = ParseJson(r.out);
  ExpectFields(j, {"ok", "snapshots", "problems", "unique_chunks", "stored_bytes", "raw_bytes",
                   "seconds", "mib_per_s"});
  EXPECT_EQ(j["ok"], true);
  EXPECT_EQ(j["problems"], nlohmann::json::array());
  // Each distinct chunk read once, however many snapshots use it: the
  // random chunk, the text tail and the zero chunk.
  EXPECT_EQ(j["unique_chunks"], 3);
  EXPECT_EQ(j["raw_bytes"], 2 * kChunk + 999);
  ASSERT_EQ(j["snapshots"].size(), 2u);
  for (const auto& s : j["snapshots"]) {
    ExpectFields(s, {"snapshot", "ns", "state", "chunks"});
    EXPECT_EQ(s["state"], "ok");
    EXPECT_EQ(s["chunks"], 4);
  }
}

TEST_F(JsonTest, Restore) {
  Backup("vm/100", 1, {"disk0.img=" + Path("d0.raw")});
  const std::string target = Path("back.raw");
  RunResult r = OnStore("restore", {"vm/100/latest", "disk0.img", target, "--json"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  nlohmann::json j = ParseJson(r.out);
  ExpectFields(j, {"snapshot", "archive", "target", "bytes", "seconds", "mib_per_s",
                   "chunks_fetched", "zero_chunks", "jobs"});
  EXPECT_EQ(j["snapshot"], Snap("vm/100", 1));
  EXPECT_EQ(j["archive"], "disk0.img");
  EXPECT_EQ(j["target"], target);
  EXPECT_EQ(j["bytes"], 3 * kChunk + 999);
  EXPECT_EQ(j["chunks_fetched"], 2);  // each distinct non-zero chunk once
  EXPECT_EQ(j["zero_chunks"], 1);
  EXPECT_EQ(CompareFiles(Path("d0.raw"), target), "");

  // To stdout, the data is all that stdout carries, --json or not.
  StreamComparer stream(Path("d0.raw"));
  RunOptions sink;
  sink.stdout_sink = [&](std::string_view piece) { stream.Feed(piece); };
  r = OnStore("restore", {"vm/100/latest", "disk0.img", "-", "--json"}, sink);
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(stream.Result(), "");
}

}  // namespace
}  // namespace cairn::cli_test
