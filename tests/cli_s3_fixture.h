// The fixture of the S3 datastore tests (cli_s3_test.cc, cli_s3_fault_test.cc):
// a bucket of its own per test on the server of S3_ENDPOINT (skipped without
// one), cairn run on `-r s3://…`, and the bucket looked at and damaged with
// cairn's own S3 client.
#pragma once

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cli_background.h"
#include "cli_kill.h"
#include "cli_server_fixture.h"
#include "scoped_env.h"
#include "s3/s3_client.h"

namespace cairn::cli_test::s3_test {

namespace fs = std::filesystem;

constexpr char kPrefix[] = "backups/site1";

inline std::string EnvOr(const char* name, std::string fallback = "") {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

// A bucket name no other test (nor an earlier run) uses.
inline std::string NewBucketName() {
  static int counter = 0;
  std::random_device rd;
  char suffix[16];
  std::snprintf(suffix, sizeof suffix, "%06x", rd() & 0xffffff);
  return "cairn-it-" + std::to_string(::getpid()) + "-" + std::to_string(++counter) + "-" + suffix;
}

// A small tree: nested directories, small and larger files, a symlink.
inline void WriteTree(const std::string& root, uint64_t seed) {
  fs::create_directories(root + "/etc/app");
  fs::create_directories(root + "/var/lib/data");
  WriteFile(root + "/etc/app/config", "port = 8007\nname = cairn\n");
  WriteFile(root + "/README", std::string(300000, 'r'));
  ImageWriter(root + "/var/lib/data/blob.bin", 3 * kMiB + 17, seed).Random(0, 3 * kMiB + 17);
  ImageWriter(root + "/var/lib/data/log.txt", 700000, seed + 1).Text(0, 700000);
  fs::create_symlink("etc/app/config", root + "/link");
}

// "" when the restored tree has the files and the symlink of WriteTree.
inline std::string CompareTrees(const std::string& a, const std::string& b) {
  for (const char* f :
       {"etc/app/config", "README", "var/lib/data/blob.bin", "var/lib/data/log.txt"}) {
    std::string diff = CompareFiles(a + "/" + f, b + "/" + f);
    if (!diff.empty()) return diff;
  }
  std::error_code ec;
  if (fs::read_symlink(b + "/link", ec) != "etc/app/config") return b + "/link is not the symlink";
  return "";
}

inline bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

inline std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}


// --- the fixture -----------------------------------------------------------------

class S3Test : public ::testing::Test {
 protected:
  // Variables the cairn children must not inherit from this process: a
  // child's environment is this one's plus RunOptions::env, and the first
  // entry of a name wins.
  static constexpr const char* kScrubbed[] = {"CAIRN_CACHE_DIR",
                                              "AWS_ACCESS_KEY_ID",
                                              "AWS_SECRET_ACCESS_KEY",
                                              "AWS_SESSION_TOKEN",
                                              "AWS_REGION",
                                              "AWS_DEFAULT_REGION",
                                              "AWS_PROFILE",
                                              "AWS_SHARED_CREDENTIALS_FILE"};

  void SetUp() override {
    endpoint_ = EnvOr("S3_ENDPOINT");
    access_key_ = EnvOr("S3_ACCESS_KEY");
    secret_key_ = EnvOr("S3_SECRET_KEY");
    region_ = EnvOr("S3_REGION", "us-east-1");
    if (endpoint_.empty() || access_key_.empty() || secret_key_.empty()) {
      GTEST_SKIP() << "S3_ENDPOINT/S3_ACCESS_KEY/S3_SECRET_KEY not set; start an S3 server with "
                      "`bash scripts/s3-server.sh start` and `set -a; . /tmp/cairn-s3/s3.env; "
                      "set +a`";
    }
    env_.Scrub(kScrubbed);
    bucket_ = NewBucketName();
    url_ = UrlFor(bucket_, kPrefix);
    cache_ = tmp_.Join("cache");

    s3::S3Config config;
    config.endpoint = endpoint_;
    config.region = region_;
    config.bucket = bucket_;
    config.credentials = {access_key_, secret_key_, ""};
    auto client = s3::S3Client::Open(config);
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = std::move(*client);
  }

  void TearDown() override {
    env_.Restore();
    if (!client_) return;
    // Empty and remove the bucket (it may never have been made).
    auto all = client_->ListObjectsV2({});
    if (!all.ok()) return;
    std::vector<std::string> keys;
    for (const auto& o : all->objects) keys.push_back(o.key);
    if (!keys.empty()) {
      auto report = client_->DeleteObjects(keys);
      EXPECT_TRUE(report.ok()) << report.status().ToString();
    }
    Status s = client_->DeleteBucket();
    EXPECT_TRUE(s.ok()) << s.ToString();
  }

  std::string UrlFor(const std::string& bucket, const std::string& prefix,
                     const std::string& endpoint = "") const {
    return "s3://" + bucket + "/" + prefix +
           "?endpoint=" + (endpoint.empty() ? endpoint_ : endpoint);
  }

  std::string Path(std::string_view name) const { return tmp_.Join(name); }

  // The environment of a cairn child: the S3 credentials and a cache of its own.
  std::vector<std::string> Env(const std::string& cache = "") const {
    return {"CAIRN_CACHE_DIR=" + (cache.empty() ? cache_ : cache),
            "AWS_ACCESS_KEY_ID=" + access_key_, "AWS_SECRET_ACCESS_KEY=" + secret_key_,
            "AWS_REGION=" + region_};
  }

  // cairn ARGS… with `env`.
  RunResult Run(const std::vector<std::string>& args, std::vector<std::string> env) const {
    RunOptions options;
    options.env = std::move(env);
    return RunCairn(args, options);
  }
  RunResult Run(const std::vector<std::string>& args) const { return Run(args, Env()); }

  // cairn VERB -r URL ARGS…
  RunResult OnS3(const std::string& verb, std::vector<std::string> args,
                 const std::string& url = "", const std::string& cache = "") const {
    args.insert(args.begin(), {verb, "-r", url.empty() ? url_ : url});
    return Run(args, Env(cache));
  }

  void Init() {
    RunResult r = Run({"init", url_});
    ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  }

  // cairn backup -r URL --id ID --time SnapTime(t) ARCHIVES… --json; fails the
  // test unless it exits 0.
  nlohmann::json Backup(const std::string& id, int t, std::vector<std::string> archives,
                        const std::string& cache = "") const {
    std::vector<std::string> args = {"--id", id, "--time", SnapTime(t), "--json"};
    args.insert(args.end(), archives.begin(), archives.end());
    RunResult r = OnS3("backup", args, "", cache);
    EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
    if (r.exit_code != kExitOk) return nullptr;
    return ParseJson(r.out);
  }

  static std::string Snap(const std::string& id, int t) { return id + "/" + SnapTime(t); }

  std::vector<std::string> ListedSnapshots(const std::string& cache = "") const {
    std::vector<std::string> names;
    RunResult r = OnS3("snapshots", {"--json"}, "", cache);
    EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
    if (r.exit_code != kExitOk) return names;
    nlohmann::json j = ParseJson(r.out);
    if (!j.is_array()) {
      ADD_FAILURE() << "snapshots --json is not an array: " << r.out;
      return names;
    }
    for (const auto& s : j) names.push_back(s.value("snapshot", ""));
    return names;
  }

  // Restores ARCHIVE of SNAP to a new path; "" when it equals `source`
  // (a file, or a WriteTree tree), else what went wrong.
  std::string RestoreDiff(const std::string& snap, const std::string& archive,
                          const std::string& source, const std::string& cache = "") {
    const std::string out = Path("restored-" + std::to_string(++restores_));
    RunResult r = OnS3("restore", {snap, archive, out}, "", cache);
    if (r.exit_code != kExitOk) return r.Describe();
    std::string diff =
        Contains(archive, ".tree") ? CompareTrees(source, out) : CompareFiles(source, out);
    fs::remove_all(out);
    return diff;
  }

  // --- objects -----------------------------------------------------------

  std::string Key(const std::string& rel) const { return std::string(kPrefix) + "/" + rel; }

  // Keys under PREFIX/`under`, relative to PREFIX/.
  std::set<std::string> ObjectKeys(const std::string& under = "") const {
    std::set<std::string> keys;
    s3::ListOptions options;
    options.prefix = Key(under);
    auto list = client_->ListObjectsV2(options);
    EXPECT_TRUE(list.ok()) << list.status().ToString();
    if (!list.ok()) return keys;
    const size_t skip = std::string(kPrefix).size() + 1;
    for (const auto& o : list->objects) keys.insert(o.key.substr(skip));
    return keys;
  }

  // The chunk objects' names ("<id>" or "<id>.bad") → key relative to PREFIX/.
  // Fails the test for a key under .chunks/ that is not where a chunk goes.
  std::map<std::string, std::string> ChunkObjects() const {
    static const std::regex re(R"(\.chunks/([0-9a-f]{3})/(([0-9a-f]{64})(\.bad)?))");
    std::map<std::string, std::string> chunks;
    for (const auto& key : ObjectKeys(".chunks/")) {
      std::smatch m;
      if (!std::regex_match(key, m, re) || m[3].str().substr(0, 3) != m[1].str()) {
        ADD_FAILURE() << "not a chunk object: " << key;
        continue;
      }
      chunks[m[2]] = key;
    }
    return chunks;
  }

  std::set<std::string> ChunkIds() const {
    std::set<std::string> ids;
    for (const auto& [name, key] : ChunkObjects()) {
      if (name.size() == 64) ids.insert(name);
    }
    return ids;
  }

  std::string ChunkKey(const std::string& id) const {
    return ".chunks/" + id.substr(0, 3) + "/" + id;
  }

  bool ObjectExists(const std::string& rel) const {
    auto info = client_->HeadObject(Key(rel));
    if (!info.ok() && info.status().code() != StatusCode::kNotFound) {
      ADD_FAILURE() << info.status().ToString();
    }
    return info.ok();
  }

  std::string GetObject(const std::string& rel) const {
    auto got = client_->GetObject(Key(rel));
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    if (!got.ok()) return "";
    return std::string(got->begin(), got->end());
  }

  void PutObject(const std::string& rel, const std::string& data) const {
    Status s = client_->PutObject(Key(rel), Bytes(data.begin(), data.end()));
    EXPECT_TRUE(s.ok()) << s.ToString();
  }

  // The chunk ids SNAP's NAME.img.fidx object lists, in image order.
  std::vector<std::string> ImageIds(const std::string& snap, const std::string& name) {
    const std::string local = Path("index-" + std::to_string(++restores_) + ".fidx");
    WriteFile(local, GetObject(snap + "/" + name + ".fidx"));
    return IndexDigests(local);
  }

  TempDir tmp_;
  std::string endpoint_, access_key_, secret_key_, region_;
  std::string bucket_, url_, cache_;
  std::unique_ptr<s3::S3Client> client_;
  ScopedEnv env_;
  int restores_ = 0;
};

}  // namespace cairn::cli_test::s3_test
