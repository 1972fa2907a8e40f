// cairn benchmark: every row is there with a positive figure, --json has
// the documented shape, -r adds the store rows and leaves the datastore
// exactly as it was. Figures are checked for presence and sign only: a slow
// or busy machine must never fail these tests.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "cli_fixture.h"

namespace cairn::cli_test {
namespace {

const std::vector<std::string> kCpuRows = {
    "tls",        "sha256",   "hmac_sha256",        "compress",         "compress_encrypted",
    "decompress", "aes256_gcm", "aes256_gcm_decrypt", "verify",         "verify_encrypted",
    "crc32c",     "chunker"};
// The rows of client-side encryption (issue 7), each beside its plain sibling.
const std::vector<std::string> kCryptRows = {"hmac_sha256", "compress_encrypted", "aes256_gcm",
                                             "aes256_gcm_decrypt", "verify_encrypted"};
const std::vector<std::string> kStoreRows = {"chunk_insert", "chunk_read", "restore_rehearsal"};

std::vector<std::string> RowNames(const nlohmann::json& j) {
  std::vector<std::string> names;
  for (const auto& row : j["rows"]) names.push_back(row["name"].get<std::string>());
  return names;
}

const nlohmann::json& Row(const nlohmann::json& j, const std::string& name) {
  static const nlohmann::json kNone;
  for (const auto& row : j["rows"]) {
    if (row["name"] == name) return row;
  }
  ADD_FAILURE() << "no row " << name << " in " << j.dump();
  return kNone;
}

void ExpectPositive(const nlohmann::json& row) {
  for (const char* key : {"per_core_mb_s", "all_cores_mb_s"}) {
    ASSERT_TRUE(row[key].is_number()) << key << " of " << row.dump();
    EXPECT_GT(row[key].get<double>(), 0) << key << " of " << row.dump();
  }
}

// Every path under `dir` with its size (directories as -1): what a run that
// "leaves nothing behind" must not change.
std::vector<std::string> TreeOf(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    std::string size = e.is_regular_file() ? std::to_string(e.file_size()) : "-1";
    out.push_back(e.path().string() + " " + size);
  }
  std::sort(out.begin(), out.end());
  return out;
}

class BenchmarkTest : public CliTest {};

TEST_F(BenchmarkTest, JsonHasEveryRow) {
  RunResult r = Cairn({"benchmark", "--seconds", "0.05", "--json"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  nlohmann::json j = ParseJson(r.out);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(RowNames(j), kCpuRows);
  EXPECT_GE(j["machine"]["cores"].get<int>(), 1);
  EXPECT_TRUE(j["machine"]["cpu_model"].is_string());
  EXPECT_TRUE(j["machine"]["date"].is_string());
  EXPECT_TRUE(j["repo"].is_null());
  EXPECT_DOUBLE_EQ(j["seconds_per_measurement"].get<double>(), 0.05);
  for (const auto& row : j["rows"]) {
    for (const char* key :
         {"name", "what", "per_core_mb_s", "all_cores_mb_s", "pbs_reference_mb_s", "note"}) {
      EXPECT_TRUE(row.contains(key)) << key << " in " << row.dump();
    }
    if (row["name"] == "tls") {
      EXPECT_TRUE(row["per_core_mb_s"].is_null());
      EXPECT_EQ(row["note"], "n/a (no server: -r https://HOST:PORT/STORE)");
    } else {
      ExpectPositive(row);
    }
  }
  // PBS's columns carry its reference; cairn's own stages have none.
  for (const char* name : {"tls", "sha256", "compress", "decompress", "aes256_gcm", "verify"}) {
    EXPECT_TRUE(Row(j, name)["pbs_reference_mb_s"].is_number()) << name;
  }
  for (const char* name : {"hmac_sha256", "compress_encrypted", "aes256_gcm_decrypt",
                           "verify_encrypted", "crc32c", "chunker"}) {
    EXPECT_TRUE(Row(j, name)["pbs_reference_mb_s"].is_null()) << name;
  }
  // PBS's aes256_gcm reference (../shared/prior-art/pbs.md §10).
  EXPECT_DOUBLE_EQ(Row(j, "aes256_gcm")["pbs_reference_mb_s"].get<double>(), 3645);
  // Every encryption row is measured, on one core and on all.
  for (const std::string& name : kCryptRows) {
    ExpectPositive(Row(j, name));
    EXPECT_FALSE(Row(j, name)["what"].get<std::string>().empty()) << name;
  }
}

TEST_F(BenchmarkTest, TableNamesEveryRowAndTheUnit) {
  RunResult r = Cairn({"benchmark", "--seconds", "0.02"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  for (const std::string& name : kCpuRows) {
    EXPECT_NE(r.out.find("\n" + name + " "), std::string::npos) << name << " in\n" << r.out;
  }
  EXPECT_NE(r.out.find("10^6 bytes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("PBS (1 core)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("n/a (no server: -r https://HOST:PORT/STORE)"), std::string::npos) << r.out;
  // The encrypted decode row follows the plain one, as restore with and
  // without a key would be read side by side.
  size_t plain = r.out.find("\nverify ");
  size_t encrypted = r.out.find("\nverify_encrypted ");
  ASSERT_NE(encrypted, std::string::npos) << r.out;
  EXPECT_LT(plain, encrypted) << r.out;
  EXPECT_NE(r.out.find("AES-256-GCM decrypt"), std::string::npos) << r.out;  // the footer
}

TEST_F(BenchmarkTest, RepoRowsLeaveTheDatastoreAsItWas) {
  ImageWriter(Path("d0.raw"), 5 * kChunk + 4096, 61)
      .Random(0, kChunk)
      .Text(kChunk, kChunk)
      .Copy(0, 3 * kChunk, kChunk)       // a duplicate
      .Text(4 * kChunk, kChunk + 4096);  // chunk 2 is a hole
  Backup("vm/100", 1, {"disk0.img=" + Path("d0.raw")});
  const std::vector<std::string> snapshots = ListedSnapshots();
  const std::vector<std::string> before = TreeOf(store());

  RunResult r = OnStore("benchmark", {"--seconds", "0.05", "--json"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  nlohmann::json j = ParseJson(r.out);
  ASSERT_TRUE(j.is_object()) << r.out;
  std::vector<std::string> want = kCpuRows;
  want.insert(want.end(), kStoreRows.begin(), kStoreRows.end());
  EXPECT_EQ(RowNames(j), want);
  EXPECT_EQ(j["repo"], store());
  for (const std::string& name : kStoreRows) ExpectPositive(Row(j, name));
  EXPECT_NE(Row(j, "chunk_read")["note"].get<std::string>().find("newest snapshots"),
            std::string::npos);
  EXPECT_NE(Row(j, "restore_rehearsal")["note"].get<std::string>().find(Snap("vm/100", 1)),
            std::string::npos);

  EXPECT_EQ(TreeOf(store()), before);
  EXPECT_EQ(ListedSnapshots(), snapshots);
  RunResult verify = OnStore("verify", {});
  EXPECT_EQ(verify.exit_code, kExitOk) << verify.Describe();
}

TEST_F(BenchmarkTest, EmptyRepoReadsItsOwnScratchChunks) {
  const std::vector<std::string> before = TreeOf(store());
  RunResult r = OnStore("benchmark", {"--seconds", "0.02", "--json"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  nlohmann::json j = ParseJson(r.out);
  ExpectPositive(Row(j, "chunk_insert"));
  ExpectPositive(Row(j, "chunk_read"));
  const nlohmann::json& rehearsal = Row(j, "restore_rehearsal");
  EXPECT_TRUE(rehearsal["per_core_mb_s"].is_null());
  EXPECT_NE(rehearsal["note"].get<std::string>().find("no image snapshot"), std::string::npos);
  EXPECT_EQ(TreeOf(store()), before);
}

// With a key, -r reads and rehearses encrypted snapshots (AES-256-GCM
// decrypt and HMAC-SHA256 ids); without it they are skipped, the notes say
// so, and the plain snapshots are still measured.
TEST_F(BenchmarkTest, EncryptedSnapshotsAreMeasuredWithTheirKey) {
  // The developer's shell must not leak a key or passphrase into cairn.
  std::map<std::string, std::string> saved;
  for (const char* name : {"CAIRN_KEYFILE", "CAIRN_PASSPHRASE", "CAIRN_PASSPHRASE_FILE"}) {
    if (const char* v = std::getenv(name)) saved[name] = v;
    ::unsetenv(name);
  }
  RunOptions keyed;
  keyed.env = {"CAIRN_PASSPHRASE=bench pass", "CAIRN_TEST_WEAK_KDF=1"};
  const std::string key = Path("key.json");
  RunResult created = Cairn({"key", "create", key}, keyed);
  ASSERT_EQ(created.exit_code, kExitOk) << created.Describe();

  ImageWriter(Path("d0.raw"), 3 * kChunk + 4096, 62)
      .Random(0, kChunk)
      .Text(kChunk, kChunk)  // chunk 2 is a hole
      .Text(3 * kChunk, 4096);
  Backup("vm/100", 1, {"disk0.img=" + Path("d0.raw")});
  RunResult enc = OnStore("backup",
                          {"--id", "vm/200", "--time", SnapTime(2), "--keyfile", key,
                           "disk0.img=" + Path("d0.raw")},
                          keyed);
  ASSERT_EQ(enc.exit_code, kExitOk) << enc.Describe();
  const std::vector<std::string> before = TreeOf(store());

  // No key: the newer encrypted snapshot is skipped, the plain one measured.
  RunResult r = OnStore("benchmark", {"--seconds", "0.02", "--json"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  nlohmann::json j = ParseJson(r.out);
  ExpectPositive(Row(j, "chunk_read"));
  ExpectPositive(Row(j, "restore_rehearsal"));
  std::string read_note = Row(j, "chunk_read")["note"].get<std::string>();
  EXPECT_NE(read_note.find("1 encrypted snapshots skipped"), std::string::npos) << read_note;
  EXPECT_NE(read_note.find("--keyfile"), std::string::npos) << read_note;
  std::string rehearsal_note = Row(j, "restore_rehearsal")["note"].get<std::string>();
  EXPECT_NE(rehearsal_note.find(Snap("vm/100", 1)), std::string::npos) << rehearsal_note;
  EXPECT_NE(rehearsal_note.find("skipped"), std::string::npos) << rehearsal_note;

  // With the key: the encrypted chunks are read and the newest image, the
  // encrypted one, is rehearsed.
  r = OnStore("benchmark", {"--seconds", "0.02", "--json", "--keyfile", key}, keyed);
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  j = ParseJson(r.out);
  ExpectPositive(Row(j, "chunk_read"));
  ExpectPositive(Row(j, "restore_rehearsal"));
  read_note = Row(j, "chunk_read")["note"].get<std::string>();
  EXPECT_NE(read_note.find(" encrypted)"), std::string::npos) << read_note;
  EXPECT_EQ(read_note.find("skipped"), std::string::npos) << read_note;
  rehearsal_note = Row(j, "restore_rehearsal")["note"].get<std::string>();
  EXPECT_NE(rehearsal_note.find(Snap("vm/200", 2)), std::string::npos) << rehearsal_note;
  EXPECT_NE(rehearsal_note.find(", encrypted"), std::string::npos) << rehearsal_note;

  // A wrong passphrase fails before measuring anything.
  RunOptions wrong;
  wrong.env = {"CAIRN_PASSPHRASE=not it"};
  r = OnStore("benchmark", {"--seconds", "0.02", "--json", "--keyfile", key}, wrong);
  EXPECT_NE(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(r.out, "");

  EXPECT_EQ(TreeOf(store()), before);
  for (const auto& [name, value] : saved) ::setenv(name.c_str(), value.c_str(), 1);
}

TEST_F(BenchmarkTest, BadRepoIsAClearError) {
  RunResult r = Cairn({"benchmark", "-r", Path("nowhere"), "--seconds", "0.02", "--json"});
  EXPECT_NE(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(r.out, "");  // it fails before measuring anything
  EXPECT_NE(r.err.find(Path("nowhere")), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.err;

  WriteFile(Path("plain"), "not a datastore");
  r = Cairn({"benchmark", "-r", Path("plain"), "--seconds", "0.02"});
  EXPECT_NE(r.exit_code, kExitOk) << r.Describe();
  EXPECT_NE(r.err.find("is not a directory"), std::string::npos) << r.err;

  std::filesystem::create_directory(Path("dir"));
  r = Cairn({"benchmark", "-r", Path("dir"), "--seconds", "0.02"});
  EXPECT_NE(r.exit_code, kExitOk) << r.Describe();
  EXPECT_NE(r.err.find("not a cairn datastore"), std::string::npos) << r.err;
  EXPECT_TRUE(ListDir(Path("dir")).empty());
}

TEST_F(BenchmarkTest, SecondsMustBePositive) {
  RunResult r = Cairn({"benchmark", "--seconds", "0"});
  EXPECT_EQ(r.exit_code, kExitUsage) << r.Describe();
}

}  // namespace
}  // namespace cairn::cli_test
