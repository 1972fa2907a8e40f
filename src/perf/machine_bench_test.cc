#include "perf/machine_bench.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "base/fault_injection_env.h"
#include "blob/blob.h"
#include "tests/unit_test_util.h"

namespace cairn::perf {
namespace {

TEST(MachineBenchDataTest, StreamIsDeterministic) {
  const uint64_t size = (uint64_t{12} << 20) + 123;  // not a multiple of a page
  DataMix mix_a, mix_b;
  Bytes a = GenerateImageStream(7, size, &mix_a);
  Bytes b = GenerateImageStream(7, size, &mix_b);
  ASSERT_EQ(a.size(), size);
  EXPECT_TRUE(a == b);
  EXPECT_EQ(mix_a.total(), size);
  EXPECT_EQ(mix_a.zero, mix_b.zero);
  EXPECT_EQ(mix_a.text, mix_b.text);
  Bytes c = GenerateImageStream(8, size, nullptr);
  EXPECT_FALSE(a == c);
}

TEST(MachineBenchDataTest, StreamHasTheImageGeneratorsMix) {
  const uint64_t size = uint64_t{256} << 20;
  DataMix mix;
  Bytes stream = GenerateImageStream(1, size, &mix);
  ASSERT_EQ(mix.total(), size);
  auto share = [&](uint64_t n) { return static_cast<double>(n) / static_cast<double>(size); };
  // Target 35/25/30/10; regions of up to 8 MiB keep a 256 MiB stream within
  // a few percent of it.
  EXPECT_NEAR(share(mix.zero), 0.35, 0.05);
  EXPECT_NEAR(share(mix.random), 0.25, 0.05);
  EXPECT_NEAR(share(mix.text), 0.30, 0.05);
  EXPECT_NEAR(share(mix.dup), 0.10, 0.05);
  // Zero regions are zeros; the rest are not (text, random) or copies of them.
  uint64_t zero_pages = 0;
  for (uint64_t off = 0; off < size; off += 4096) {
    zero_pages += IsAllZero(ByteSpan(stream).subspan(off, 4096)) ? 1 : 0;
  }
  EXPECT_NEAR(static_cast<double>(zero_pages * 4096) / static_cast<double>(size), share(mix.zero),
              0.01);
}

TEST(MachineBenchDataTest, ChunksAreEncodedLikeBackupAndNotAllZero) {
  auto data = MakeBenchData(1, uint64_t{32} << 20);
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  ASSERT_FALSE(data->chunks.empty());
  EXPECT_EQ(data->chunks.size() + data->zero_chunks, 8u);
  ASSERT_EQ(data->stored.size(), data->chunks.size());
  ASSERT_EQ(data->ids.size(), data->chunks.size());
  uint64_t plain = 0;
  for (size_t i = 0; i < data->chunks.size(); ++i) {
    EXPECT_FALSE(IsAllZero(data->chunks[i]));
    EXPECT_EQ(data->ids[i], crypto::Sha256(data->chunks[i]));
    auto decoded = blob::DecodeChunk(data->stored[i], data->ids[i]);
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    EXPECT_TRUE(*decoded == data->chunks[i]);
    plain += data->chunks[i].size();
  }
  EXPECT_EQ(data->plain_bytes, plain);
  // Text and zeros compress, random does not: stored is smaller, not tiny.
  EXPECT_LT(data->stored_bytes, data->plain_bytes);
  EXPECT_GT(data->stored_bytes, data->plain_bytes / 10);
}

TEST(MachineBenchDataTest, EncryptedChunksDecodeOnlyWithTheirKey) {
  auto data = MakeBenchData(1, uint64_t{32} << 20);
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  ASSERT_NE(data->crypt, nullptr);
  ASSERT_EQ(data->enc_stored.size(), data->chunks.size());
  ASSERT_EQ(data->enc_ids.size(), data->chunks.size());
  uint64_t stored = 0;
  for (size_t i = 0; i < data->chunks.size(); ++i) {
    EXPECT_EQ(data->enc_ids[i], data->crypt->ChunkId(data->chunks[i]));
    EXPECT_NE(data->enc_ids[i], data->ids[i]);  // keyed ids differ from SHA-256
    auto header = blob::Check(data->enc_stored[i]);
    ASSERT_TRUE(header.ok()) << header.status().ToString();
    EXPECT_EQ(header->encryption, blob::Encryption::kAes256Gcm);
    auto decoded = blob::DecodeChunk(data->enc_stored[i], data->enc_ids[i], data->crypt.get());
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    EXPECT_TRUE(*decoded == data->chunks[i]);
    EXPECT_EQ(blob::DecodeChunk(data->enc_stored[i], data->enc_ids[i]).status().code(),
              StatusCode::kUnauthenticated);  // no key
    stored += data->enc_stored[i].size();
  }
  EXPECT_EQ(data->enc_stored_bytes, stored);
  // Encryption adds no bytes beyond the header: the payloads compress alike.
  EXPECT_EQ(data->enc_stored_bytes, data->stored_bytes);
}

TEST(MachineBenchDataTest, AStreamOfNothingHasNoChunks) {
  auto data = MakeBenchData(1, 0);
  EXPECT_EQ(data.status().code(), StatusCode::kFailedPrecondition);
}

TEST(MachineBenchMeasureTest, TinyDurationStillRunsEveryThreadOnce) {
  std::vector<std::atomic<int>> calls(3);
  for (auto& c : calls) c = 0;
  auto make = [&](int index) -> Result<WorkFn> {
    return WorkFn([&calls, index]() -> Result<uint64_t> {
      ++calls[index];
      return 1000;
    });
  };
  for (double seconds : {0.0, 0.01}) {
    auto rate = MeasureRate({3, seconds, 0}, make);
    ASSERT_TRUE(rate.ok()) << rate.status().ToString();
    EXPECT_GE(rate->bytes, 3000u);
    EXPECT_GT(rate->seconds, 0);
    EXPECT_GT(rate->MBPerSecond(), 0);
    for (auto& c : calls) EXPECT_GE(c.load(), 1);
  }
}

TEST(MachineBenchMeasureTest, RateIsBytesOverWallTime) {
  auto make = [](int) -> Result<WorkFn> {
    return WorkFn([]() -> Result<uint64_t> {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      return 2000;  // 1 MB/s per thread, less the loop's overhead
    });
  };
  auto rate = MeasureRate({2, 0.05, 0}, make);
  ASSERT_TRUE(rate.ok()) << rate.status().ToString();
  EXPECT_GE(rate->seconds, 0.05);
  EXPECT_EQ(rate->bytes % 2000, 0u);
  // Two threads at most 1 MB/s each (a slow machine only lowers it).
  EXPECT_GT(rate->MBPerSecond(), 0);
  EXPECT_LE(rate->MBPerSecond(), 2.0);
}

TEST(MachineBenchMeasureTest, ByteLimitStopsEarly) {
  auto make = [](int) -> Result<WorkFn> {
    return WorkFn([]() -> Result<uint64_t> { return 1000; });
  };
  auto rate = MeasureRate({2, 60, 5000}, make);  // would run a minute without the limit
  ASSERT_TRUE(rate.ok()) << rate.status().ToString();
  EXPECT_GE(rate->bytes, 5000u);
  EXPECT_LE(rate->bytes, 7000u);
  EXPECT_LT(rate->seconds, 30);
}

TEST(MachineBenchMeasureTest, FirstErrorStopsAllThreads) {
  auto make = [](int index) -> Result<WorkFn> {
    return WorkFn([index]() -> Result<uint64_t> {
      if (index == 1) return DataLossError("chunk 3f2a: CRC mismatch");
      return 1000;
    });
  };
  auto rate = MeasureRate({3, 60, 0}, make);  // the error ends it, not the minute
  EXPECT_EQ(rate.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(rate.status().message().find("CRC mismatch"), std::string::npos);

  // A thread whose work cannot be built does not leave the others waiting.
  auto unbuildable = [](int index) -> Result<WorkFn> {
    if (index == 0) return ResourceExhaustedError("no memory for buffers");
    return WorkFn([]() -> Result<uint64_t> { return 1; });
  };
  EXPECT_EQ(MeasureRate({2, 60, 0}, unbuildable).status().code(), StatusCode::kResourceExhausted);
}

const std::vector<std::string> kCpuRows = {
    "tls",        "sha256",   "hmac_sha256",        "compress",         "compress_encrypted",
    "decompress", "aes256_gcm", "aes256_gcm_decrypt", "verify",         "verify_encrypted",
    "crc32c",     "chunker"};

std::vector<std::string> Names(const std::vector<BenchRow>& rows) {
  std::vector<std::string> names;
  for (const BenchRow& r : rows) names.push_back(r.name);
  return names;
}

MachineBenchOptions Quick() {
  MachineBenchOptions options;
  options.seconds = 0.005;
  options.threads = 2;
  options.stream_bytes = uint64_t{16} << 20;
  return options;
}

TEST(MachineBenchRunTest, EveryCpuRowHasPositiveFigures) {
  auto env = NewPosixEnv();
  MachineBenchOptions options = Quick();
  int starts = 0;
  std::vector<std::string> streamed;
  options.on_start = [&](const MachineBenchReport& r) {
    ++starts;
    EXPECT_TRUE(r.rows.empty());
    EXPECT_GT(r.chunks, 0u);
  };
  options.on_row = [&](const BenchRow& row) { streamed.push_back(row.name); };
  auto report = RunMachineBenchmark(*env, options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(starts, 1);
  EXPECT_EQ(Names(report->rows), kCpuRows);
  EXPECT_EQ(streamed, kCpuRows);
  EXPECT_EQ(report->threads, 2);
  EXPECT_GE(report->machine.cores, 1);
  EXPECT_FALSE(report->machine.cpu_model.empty());
  EXPECT_EQ(report->machine.date.size(), 20u);  // 2026-11-30T05:00:00Z
  for (const BenchRow& r : report->rows) {
    if (r.name == "tls") {
      EXPECT_FALSE(r.per_core_mb_s.has_value());
      EXPECT_EQ(r.note, "n/a (no server: -r https://HOST:PORT/STORE)");
      continue;
    }
    ASSERT_TRUE(r.per_core_mb_s && r.all_cores_mb_s) << r.name;
    EXPECT_GT(*r.per_core_mb_s, 0) << r.name;
    EXPECT_GT(*r.all_cores_mb_s, 0) << r.name;
  }
}

TEST(MachineBenchRunTest, JsonShape) {
  MachineBenchReport report;
  report.machine = {2, "AMD EPYC", "2026-11-30T05:00:00Z"};
  report.threads = 2;
  report.seconds = 1;
  report.mix = {35, 25, 30, 10};
  report.rows.push_back({"tls", "upload", {}, {}, 1235, "n/a (no server: -r https://HOST:PORT/STORE)"});
  report.rows.push_back({"sha256", "hash", 1500.04, 2999.96, 2022, ""});
  nlohmann::json j = ReportJson(report);
  for (const char* key : {"machine", "threads", "seconds_per_measurement", "unit", "data", "repo",
                          "pbs_reference", "rows"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["machine"]["cores"], 2);
  EXPECT_EQ(j["machine"]["cpu_model"], "AMD EPYC");
  EXPECT_EQ(j["machine"]["date"], "2026-11-30T05:00:00Z");
  EXPECT_TRUE(j["repo"].is_null());
  EXPECT_DOUBLE_EQ(j["data"]["fractions"]["zero"].get<double>(), 0.35);
  ASSERT_EQ(j["rows"].size(), 2u);
  for (const auto& row : j["rows"]) {
    for (const char* key :
         {"name", "what", "per_core_mb_s", "all_cores_mb_s", "pbs_reference_mb_s", "note"}) {
      EXPECT_TRUE(row.contains(key)) << key << " in " << row.dump();
    }
  }
  EXPECT_TRUE(j["rows"][0]["per_core_mb_s"].is_null());
  EXPECT_EQ(j["rows"][0]["pbs_reference_mb_s"], 1235);
  EXPECT_DOUBLE_EQ(j["rows"][1]["per_core_mb_s"].get<double>(), 1500.0);
  EXPECT_DOUBLE_EQ(j["rows"][1]["all_cores_mb_s"].get<double>(), 3000.0);
}

TEST(MachineBenchRunTest, TableRowsComparePerCoreWithPbs) {
  std::string row = FormatRow({"sha256", "hash", 1011, 2000, 2022, ""});
  EXPECT_NE(row.find("1011"), std::string::npos) << row;
  EXPECT_NE(row.find("2022 (50%)"), std::string::npos) << row;
  std::string tls = FormatRow({"tls", "upload", {}, {}, 1235, "n/a (no server: -r https://HOST:PORT/STORE)"});
  EXPECT_NE(tls.find("n/a (no server: -r https://HOST:PORT/STORE)"), std::string::npos) << tls;
  EXPECT_EQ(tls.find("%"), std::string::npos) << tls;
}

std::vector<std::string> TreeOf(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(MachineBenchRunTest, StoreRowsLeaveAnEmptyDatastoreAsItWas) {
  test_util::TempDir tmp;
  auto env = NewPosixEnv();
  const std::string path = tmp.Join("store");
  ASSERT_TRUE(datastore::Datastore::Init(*env, path).ok());
  auto store = datastore::Datastore::Open(*env, path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const std::vector<std::string> before = TreeOf(path);

  MachineBenchOptions options = Quick();
  options.store = store->get();
  auto report = RunMachineBenchmark(*env, options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  std::vector<std::string> want = kCpuRows;
  want.insert(want.end(), {"chunk_insert", "chunk_read", "restore_rehearsal"});
  EXPECT_EQ(Names(report->rows), want);
  EXPECT_EQ(report->repo, path);
  for (const BenchRow& r : report->rows) {
    if (r.name == "chunk_insert" || r.name == "chunk_read") {
      ASSERT_TRUE(r.per_core_mb_s && r.all_cores_mb_s) << r.name;
      EXPECT_GT(*r.per_core_mb_s, 0) << r.name;
      EXPECT_GT(*r.all_cores_mb_s, 0) << r.name;
    }
    if (r.name == "chunk_read") {
      EXPECT_NE(r.note.find("scratch store"), std::string::npos) << r.note;
    }
    if (r.name == "restore_rehearsal") {
      EXPECT_FALSE(r.per_core_mb_s.has_value());
      EXPECT_NE(r.note.find("no image snapshot"), std::string::npos) << r.note;
    }
  }
  EXPECT_EQ(TreeOf(path), before);
}

TEST(MachineBenchRunTest, ScratchStoreOfAKilledRunIsRemoved) {
  test_util::TempDir tmp;
  auto env = NewPosixEnv();
  const std::string path = tmp.Join("store");
  ASSERT_TRUE(datastore::Datastore::Init(*env, path).ok());
  auto store = datastore::Datastore::Open(*env, path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const std::vector<std::string> before = TreeOf(path);
  // No process has pid 2^22 + 1 (above Linux's pid_max limit).
  const std::string stale = path + "/.bench-tmp-4194305";
  std::filesystem::create_directories(stale + "/.chunks/abc");
  test_util::WriteFileOrFail(stale + "/.chunks/abc/x", AsBytes("leftover"));

  MachineBenchOptions options = Quick();
  options.store = store->get();
  ASSERT_TRUE(RunMachineBenchmark(*env, options).ok());
  EXPECT_EQ(TreeOf(path), before);
}

// A datastore this user can read but not write to.
class NoScratchEnv : public EnvWrapper {
 public:
  using EnvWrapper::EnvWrapper;
  Status CreateDir(const std::string& path) override {
    if (path.find(".bench-tmp-") != std::string::npos) {
      return PermissionDeniedError("mkdir " + path + ": Read-only file system");
    }
    return EnvWrapper::CreateDir(path);
  }
};

TEST(MachineBenchRunTest, ReadOnlyDatastoreGetsTheReadRowsOnly) {
  test_util::TempDir tmp;
  auto posix = NewPosixEnv();
  NoScratchEnv env(posix.get());
  const std::string path = tmp.Join("store");
  ASSERT_TRUE(datastore::Datastore::Init(env, path).ok());
  auto store = datastore::Datastore::Open(env, path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  MachineBenchOptions options = Quick();
  options.store = store->get();
  auto report = RunMachineBenchmark(env, options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_EQ(report->rows.size(), kCpuRows.size() + 3);
  const BenchRow& insert = report->rows[kCpuRows.size()];
  EXPECT_EQ(insert.name, "chunk_insert");
  EXPECT_FALSE(insert.per_core_mb_s.has_value());
  EXPECT_NE(insert.note.find("Read-only file system"), std::string::npos) << insert.note;
  const BenchRow& read = report->rows[kCpuRows.size() + 1];
  EXPECT_EQ(read.name, "chunk_read");
  EXPECT_FALSE(read.per_core_mb_s.has_value());  // no snapshots, nowhere to write test chunks
}

TEST(MachineBenchRunTest, FullDiskFailsAndLeavesNothingBehind) {
  test_util::TempDir tmp;
  auto posix = NewPosixEnv();
  FaultInjectionEnv env(posix.get());
  const std::string path = tmp.Join("store");
  ASSERT_TRUE(datastore::Datastore::Init(env, path).ok());
  auto store = datastore::Datastore::Open(env, path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const std::vector<std::string> before = TreeOf(path);
  env.SetWriteBudget(int64_t{5} << 20);  // room for a chunk or two
  MachineBenchOptions options = Quick();
  options.store = store->get();
  auto report = RunMachineBenchmark(env, options);
  EXPECT_EQ(report.status().code(), StatusCode::kResourceExhausted) << report.status().ToString();
  EXPECT_EQ(TreeOf(path), before);
}

}  // namespace
}  // namespace cairn::perf
