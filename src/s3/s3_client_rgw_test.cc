// Integration test against a real S3 server (Ceph RGW). Runs only when
// S3_ENDPOINT, S3_ACCESS_KEY and S3_SECRET_KEY are set (S3_REGION optional):
//   bash /work/shared/tools/s3/start-ceph-rgw.sh      # ~10 s, loopback only
//   set -a; . /tmp/ceph-s3/s3.env; set +a
//   ./tests/cairn_unit_tests --gtest_filter='S3RgwTest*'
//   bash /work/shared/tools/s3/stop-ceph-rgw.sh
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <latch>
#include <mutex>
#include <random>

#include <curl/curl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "s3/s3_client.h"
#include "s3/sigv4.h"
#include "tests/unit_test_util.h"

namespace cairn::s3 {
namespace {

std::string EnvOr(const char* name, std::string fallback = "") {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

class S3RgwTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (EnvOr("S3_ENDPOINT").empty() || EnvOr("S3_ACCESS_KEY").empty() ||
        EnvOr("S3_SECRET_KEY").empty()) {
      GTEST_SKIP() << "S3_ENDPOINT/S3_ACCESS_KEY/S3_SECRET_KEY not set; start a Ceph RGW with "
                      "`bash /work/shared/tools/s3/start-ceph-rgw.sh` and "
                      "`set -a; . /tmp/ceph-s3/s3.env; set +a`";
    }
    config_.endpoint = EnvOr("S3_ENDPOINT");
    config_.region = EnvOr("S3_REGION", "us-east-1");
    config_.credentials = {EnvOr("S3_ACCESS_KEY"), EnvOr("S3_SECRET_KEY"), ""};
    config_.bucket = fmt::format("cairn-test-{:x}", std::random_device{}() ^
                                                        static_cast<uint64_t>(::getpid()) << 20);
    auto client = S3Client::Open(config_);
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = std::move(*client);
    ASSERT_TRUE(client_->CreateBucket().ok());
  }

  void TearDown() override {
    if (!client_) return;
    auto all = client_->ListObjectsV2({});
    if (all.ok()) {
      std::vector<std::string> keys;
      for (auto& o : all->objects) keys.push_back(o.key);
      auto report = client_->DeleteObjects(keys);
      EXPECT_TRUE(report.ok()) << report.status().ToString();
    }
    Status s = client_->DeleteBucket();
    EXPECT_TRUE(s.ok()) << s.ToString();
  }

  S3Config config_;
  std::unique_ptr<S3Client> client_;
};

// cairn sends no Content-MD5 with a signed payload once a probe has shown
// that the server refuses a body that does not match the signed
// x-amz-content-sha256 (S3Client::ProbePayloadHashCheck). Checked here on
// the real server, by hand and by the probe.
TEST_F(S3RgwTest, RefusesABodyThatDoesNotMatchItsSignedHash) {
  const std::string endpoint = config_.endpoint;
  const std::string host = endpoint.substr(endpoint.find("://") + 3);
  auto put = [&](const std::string& key, const std::string& body, const std::string& signed_for) {
    const std::string date = AmzDate(std::chrono::duration_cast<std::chrono::seconds>(
                                         std::chrono::system_clock::now().time_since_epoch())
                                         .count());
    const std::string hash = Sha256Hex(AsBytes(std::string_view(signed_for)));
    const std::string path = "/" + config_.bucket + "/" + key;
    Pairs headers = {{"host", host}, {"x-amz-date", date}, {"x-amz-content-sha256", hash}};
    SigningRequest req{"PUT", path, {}, headers, hash};
    SigningParams params{config_.credentials.access_key, config_.credentials.secret_key,
                         config_.region, date};
    curl_slist* list = nullptr;
    for (const auto& [n, v] : headers) list = curl_slist_append(list, (n + ": " + v).c_str());
    list = curl_slist_append(list, ("Authorization: " + AuthorizationHeader(req, params)).c_str());
    list = curl_slist_append(list, "Expect:");
    list = curl_slist_append(list, "Content-Type:");
    CURL* e = curl_easy_init();
    const std::string url = endpoint + path;
    curl_easy_setopt(e, CURLOPT_URL, url.c_str());
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "PUT");
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, list);
    std::string answer;
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, +[](char* p, size_t, size_t n, void* out) {
      static_cast<std::string*>(out)->append(p, n);
      return n;
    });
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &answer);
    long status = 0;
    EXPECT_EQ(curl_easy_perform(e), CURLE_OK);
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(e);
    curl_slist_free_all(list);
    return std::make_pair(status, answer);
  };
  auto good = put("hashed", "the bytes that were hashed", "the bytes that were hashed");
  EXPECT_EQ(good.first, 200) << good.second;
  auto bad = put("altered", "the bytes that were hashed, changed", "the bytes that were hashed");
  EXPECT_EQ(bad.first, 400) << bad.second;
  EXPECT_NE(bad.second.find("XAmzContentSHA256Mismatch"), std::string::npos) << bad.second;
  EXPECT_EQ(client_->HeadObject("altered").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(client_->HeadObject("hashed").ok());
  // The client's own probe says the same and leaves nothing behind.
  EXPECT_TRUE(client_->ProbePayloadHashCheck(".probe/payload-hash-check"));
  EXPECT_EQ(client_->HeadObject(".probe/payload-hash-check").status().code(), StatusCode::kNotFound);
}

TEST_F(S3RgwTest, ObjectsRangesCreateOnlyListDeleteAndErrors) {
  using Clock = std::chrono::steady_clock;
  ASSERT_TRUE(client_->HeadBucket().ok());

  // PUT / GET / HEAD / ranged GET, byte for byte.
  Bytes big = test_util::RandomBytes(3 * 1024 * 1024 + 17, 1);
  ASSERT_TRUE(client_->PutObject("blobs/big & <odd> key", big).ok());
  auto got = client_->GetObject("blobs/big & <odd> key");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(*got == big);
  auto info = client_->HeadObject("blobs/big & <odd> key");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->size, big.size());
  auto part = client_->GetObject("blobs/big & <odd> key", ByteRange{1000, 1000});
  ASSERT_TRUE(part.ok()) << part.status().ToString();
  EXPECT_TRUE(*part == Bytes(big.begin() + 1000, big.begin() + 2000));
  auto tail = client_->GetObject("blobs/big & <odd> key", ByteRange{big.size() - 10, 100});
  ASSERT_TRUE(tail.ok()) << tail.status().ToString();
  EXPECT_TRUE(*tail == Bytes(big.end() - 10, big.end()));

  // Missing key: NotFound from HEAD and GET.
  EXPECT_EQ(client_->HeadObject("no/such/key").status().code(), StatusCode::kNotFound);
  Status missing = client_->GetObject("no/such/key").status();
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_NE(missing.message().find("NoSuchKey"), std::string::npos) << missing.ToString();

  // Create-only PUT twice: the second is AlreadyExists, content kept.
  PutOptions create_only;
  create_only.create_only = true;
  Bytes first = {'o', 'n', 'e'};
  ASSERT_TRUE(client_->PutObject("lock", first, create_only).ok());
  Status again = client_->PutObject("lock", Bytes{'t', 'w', 'o'}, create_only);
  EXPECT_EQ(again.code(), StatusCode::kAlreadyExists) << again.ToString();
  EXPECT_TRUE(*client_->GetObject("lock") == first);

  // 300 small objects, 64 in flight.
  constexpr int kObjects = 300;
  {
    S3Config c = config_;
    c.max_connections = 64;
    auto wide = S3Client::Open(c);
    ASSERT_TRUE(wide.ok());
    std::latch done(kObjects);
    std::mutex mu;
    std::vector<Status> errors;
    auto start = Clock::now();
    for (int i = 0; i < kObjects; ++i) {
      (*wide)->PutObjectAsync(fmt::format("small/{:04d}", i), test_util::RandomBytes(1000 + i, 100 + i),
                              {}, [&](Status s) {
                                if (!s.ok()) {
                                  std::lock_guard lock(mu);
                                  errors.push_back(s);
                                }
                                done.count_down();
                              });
    }
    done.wait();
    double secs = std::chrono::duration<double>(Clock::now() - start).count();
    auto stats = (*wide)->stats();
    std::printf("[ S3 RGW ] %d PUTs, 64 in flight: %.3f s (%.0f/s), %llu connections, %llu retries\n",
                kObjects, secs, kObjects / secs, static_cast<unsigned long long>(stats.connections_opened),
                static_cast<unsigned long long>(stats.retries));
    ASSERT_TRUE(errors.empty()) << errors.front().ToString();
    // And read them back, 64 in flight.
    std::latch read(kObjects);
    std::atomic<int> good{0};
    start = Clock::now();
    for (int i = 0; i < kObjects; ++i) {
      (*wide)->GetObjectAsync(fmt::format("small/{:04d}", i), std::nullopt, [&, i](Result<Bytes> r) {
        if (r.ok() && *r == test_util::RandomBytes(1000 + i, 100 + i)) ++good;
        read.count_down();
      });
    }
    read.wait();
    secs = std::chrono::duration<double>(Clock::now() - start).count();
    std::printf("[ S3 RGW ] %d GETs, 64 in flight: %.3f s (%.0f/s)\n", kObjects, secs, kObjects / secs);
    EXPECT_EQ(good.load(), kObjects);
  }

  // List with paging: 300 keys at 70 a page = 5 pages; delimiter folds.
  auto listed = client_->ListObjectsV2({"small/", "", 70});
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ(listed->pages, 5);
  ASSERT_EQ(listed->objects.size(), static_cast<size_t>(kObjects));
  for (int i = 0; i < kObjects; ++i) {
    EXPECT_EQ(listed->objects[i].key, fmt::format("small/{:04d}", i));
    EXPECT_EQ(listed->objects[i].size, static_cast<uint64_t>(1000 + i));
  }
  auto top = client_->ListObjectsV2({"", "/", 1});
  ASSERT_TRUE(top.ok()) << top.status().ToString();
  EXPECT_EQ(top->common_prefixes, (std::vector<std::string>{"blobs/", "small/"}));
  ASSERT_EQ(top->objects.size(), 1u);
  EXPECT_EQ(top->objects[0].key, "lock");
  auto odd = client_->ListObjectsV2({"blobs/", "", 1000});
  ASSERT_TRUE(odd.ok());
  ASSERT_EQ(odd->objects.size(), 1u);
  EXPECT_EQ(odd->objects[0].key, "blobs/big & <odd> key");  // entities decoded

  // DeleteObjects in batches: 300 keys + 1 missing, as 2 batches of 200-ish.
  std::vector<std::string> keys;
  for (const auto& o : listed->objects) keys.push_back(o.key);
  keys.push_back("small/never-written");
  auto report = client_->DeleteObjects(std::span(keys).first(151));
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->failures.empty());
  report = client_->DeleteObjects(std::span(keys).subspan(151));
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->failures.empty());
  auto after = client_->ListObjectsV2({"small/", "", 1000});
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(after->objects.empty());

  // Wrong secret: the credentials error, not retried.
  {
    S3Config c = config_;
    c.credentials.secret_key += "x";
    auto bad = S3Client::Open(c);
    ASSERT_TRUE(bad.ok());
    Status s = (*bad)->GetObject("lock").status();
    EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << s.ToString();
    EXPECT_NE(s.message().find("bad credentials"), std::string::npos) << s.ToString();
    EXPECT_EQ((*bad)->stats().retries, 0u);
    EXPECT_EQ((*bad)->HeadBucket().code(), StatusCode::kPermissionDenied);
    std::printf("[ S3 RGW ] wrong secret: %s\n", s.ToString().c_str());
    c = config_;
    c.credentials.access_key = "NOSUCHACCESSKEY00000";
    bad = S3Client::Open(c);
    ASSERT_TRUE(bad.ok());
    s = (*bad)->PutObject("k", Bytes{1});
    EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << s.ToString();
    EXPECT_NE(s.message().find("InvalidAccessKeyId"), std::string::npos) << s.ToString();
    std::printf("[ S3 RGW ] unknown key: %s\n", s.ToString().c_str());
  }
  // Missing bucket: NoSuchBucket (FailedPrecondition), never NotFound.
  {
    S3Config c = config_;
    c.bucket = config_.bucket + "-missing";
    auto nb = S3Client::Open(c);
    ASSERT_TRUE(nb.ok());
    Status s = (*nb)->GetObject("k").status();
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
    EXPECT_NE(s.message().find("NoSuchBucket"), std::string::npos) << s.ToString();
    EXPECT_EQ((*nb)->HeadBucket().code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ((*nb)->ListObjectsV2({}).status().code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ((*nb)->PutObject("k", Bytes{1}).code(), StatusCode::kFailedPrecondition);
    std::printf("[ S3 RGW ] missing bucket: %s\n", s.ToString().c_str());
  }
  std::printf("[ S3 RGW ] missing key: %s\n[ S3 RGW ] create-only again: %s\n",
              missing.ToString().c_str(), again.ToString().c_str());
}

}  // namespace
}  // namespace cairn::s3
