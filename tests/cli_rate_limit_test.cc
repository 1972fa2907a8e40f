// --limit-upload and --limit-download: a transfer at a limit never finishes
// before its bytes allow. The case: 200 MiB at 20 MiB/s, to and from
// a cairn server (and an S3 endpoint when S3_ENDPOINT is set), must take at
// least (200 MiB - burst) / 20 MiB/s = 9.875 s (the limiter's burst is an
// eighth of a second of transfer); unlimited, the same transfer on loopback
// takes about a second. Under a sanitizer (CairnSanitized()) the case
// shrinks to 8 MiB at 4 MiB/s (1.875 s): same arithmetic, less disk and
// time. Only a lower bound is asserted, so a slow machine never fails it;
// how close to the limit a run lands is measured by
// bench/ratelimit_bench.sh (docs/BENCHMARKS.md, "Bandwidth limits").
#include <chrono>
#include <cstdlib>
#include <random>

#include "cli_server_fixture.h"
#include "s3/s3_client.h"

namespace cairn::cli_test {
namespace {

struct Case {
  uint64_t bytes;
  uint64_t rate;      // bytes per second
  std::string flag;   // the same rate as --limit-* writes it
  // (bytes - burst) / rate: the least time a limited transfer may take.
  double least_seconds() const { return (bytes - rate / 8.0) / rate; }
};

Case TheCase() {
  if (CairnSanitized()) return {8 * kMiB, 4 * kMiB, "4M"};
  return {200 * kMiB, 20 * kMiB, "20M"};
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

class RateLimitTest : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    image_ = Path("disk.img");
    ImageWriter(image_, case_.bytes, 11).Random(0, case_.bytes);  // incompressible: every byte goes
  }

  // Backs up the image to `repo` at the case's rate up, then restores it at
  // the same rate down; checks both times and the restored bytes.
  void RoundTrip(const std::string& repo, const std::vector<std::string>& env) {
    RunOptions o;
    o.env = env;
    auto t0 = std::chrono::steady_clock::now();
    RunResult r = Cairn({"backup", "-r", repo, "--id", "vm/1", "--limit-upload", case_.flag,
                         "disk.img=" + image_},
                        o);
    const double up = Seconds(t0);
    ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
    EXPECT_GE(up, case_.least_seconds())
        << case_.bytes << " bytes uploaded at --limit-upload " << case_.flag << " in " << up << " s";
    // The limit from the environment this time.
    o.env.push_back("CAIRN_LIMIT_DOWNLOAD=" + case_.flag);
    t0 = std::chrono::steady_clock::now();
    r = Cairn({"restore", "-r", repo, "vm/1/latest", "disk.img", Path("out.img")}, o);
    const double down = Seconds(t0);
    ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
    EXPECT_GE(down, case_.least_seconds())
        << case_.bytes << " bytes downloaded at CAIRN_LIMIT_DOWNLOAD=" << case_.flag << " in "
        << down << " s";
    EXPECT_EQ(CompareFiles(image_, Path("out.img")), "");
  }

  const Case case_ = TheCase();
  std::string image_;
};

TEST_F(RateLimitTest, TransfersToAndFromAServerNeverFinishEarly) {
  const std::string state = Path("state");
  RunResult t = Cairn({"token", "create", "admin", "--state-dir", state, "--store", "main",
                       "--role", "admin"});
  ASSERT_EQ(t.exit_code, kExitOk) << t.Describe();
  const std::string token = t.out.substr(0, t.out.find('\n'));
  ServerProcess server({"serve", "--listen", "127.0.0.1:0", "--store", "main=" + store(),
                        "--state-dir", state},
                       Path("server.err"));
  ASSERT_GT(server.port(), 0);
  RoundTrip("https://127.0.0.1:" + std::to_string(server.port()) + "/main",
            {"CAIRN_CACHE_DIR=" + Path("cache"), "CAIRN_TRUSTED_SERVERS=" + Path("servers"),
             "CAIRN_TOKEN=" + token, "CAIRN_FINGERPRINT=" + server.fingerprint()});
}

TEST_F(RateLimitTest, TransfersToAndFromObjectStorageNeverFinishEarly) {
  auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(v ? v : "");
  };
  const std::string endpoint = env("S3_ENDPOINT"), key = env("S3_ACCESS_KEY"),
                    secret = env("S3_SECRET_KEY");
  if (endpoint.empty() || key.empty() || secret.empty()) {
    GTEST_SKIP() << "S3_ENDPOINT/S3_ACCESS_KEY/S3_SECRET_KEY not set (scripts/s3-server.sh)";
  }
  const std::string region = env("S3_REGION").empty() ? "us-east-1" : env("S3_REGION");
  const std::string bucket =
      "cairn-limit-" + std::to_string(::getpid()) + "-" + std::to_string(std::random_device()() & 0xffff);
  const std::string url = "s3://" + bucket + "/x?endpoint=" + endpoint;
  const std::vector<std::string> s3_env = {"CAIRN_CACHE_DIR=" + Path("cache"),
                                           "AWS_ACCESS_KEY_ID=" + key,
                                           "AWS_SECRET_ACCESS_KEY=" + secret, "AWS_REGION=" + region};
  RunOptions o;
  o.env = s3_env;
  RunResult r = Cairn({"init", url}, o);
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  RoundTrip(url, s3_env);
  // Empty and remove the bucket.
  s3::S3Config config;
  config.endpoint = endpoint;
  config.region = region;
  config.bucket = bucket;
  config.credentials = {key, secret, ""};
  auto client = s3::S3Client::Open(config);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto all = (*client)->ListObjectsV2({});
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  std::vector<std::string> keys;
  for (const auto& object : all->objects) keys.push_back(object.key);
  if (!keys.empty()) {
    EXPECT_TRUE((*client)->DeleteObjects(keys).ok());
  }
  EXPECT_TRUE((*client)->DeleteBucket().ok());
}

}  // namespace
}  // namespace cairn::cli_test
