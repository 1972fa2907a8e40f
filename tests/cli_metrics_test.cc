// `cairn serve --metrics-listen`: Prometheus' GET /metrics on its own
// plain-HTTP address (docs/SERVER.md, "Metrics"). A server is started, a
// backup and a restore run through it, and the exposition is scraped before
// and after: it must parse with a real Prometheus parser (the Python
// client's, python3-prometheus-client, from scripts/setup-deps.sh) and its
// counters must have moved; the per-datastore figures, read in the
// background, must come to show the new snapshot.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <regex>
#include <string>
#include <thread>
#include <tuple>

#include "cli_server_fixture.h"
#include "net/http_client.h"

namespace cairn::cli_test {
namespace {

// GET `path` from 127.0.0.1:port over plain HTTP: (status, body).
std::pair<int, std::string> HttpGet(int port, const std::string& path,
                                    const std::string& method = "GET") {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  if (connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    std::string request = method + " " + path + " HTTP/1.1\r\nHost: localhost\r\n\r\n";
    if (write(s, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buf[65536];
      ssize_t n;
      while ((n = read(s, buf, sizeof buf)) > 0) response.append(buf, static_cast<size_t>(n));
    }
  }
  close(s);
  std::smatch m;
  if (!std::regex_search(response, m, std::regex(R"(^HTTP/1\.1 (\d+) )"))) return {0, response};
  size_t body = response.find("\r\n\r\n");
  return {std::stoi(m[1]), body == std::string::npos ? "" : response.substr(body + 4)};
}

// Parses an exposition with prometheus_client's parser; each sample as
// "name{label="value",…}" (labels sorted) → value. Fails the test when the
// text does not parse.
std::map<std::string, double> Parse(const std::string& text, const std::string& dir) {
  const std::string file = dir + "/scrape.txt";
  WriteFile(file, text);
  const std::string script = dir + "/parse.py";
  WriteFile(script,
            "import sys\n"
            "from prometheus_client.parser import text_string_to_metric_families\n"
            "for f in text_string_to_metric_families(open(sys.argv[1]).read()):\n"
            "    for s in f.samples:\n"
            "        labels = ','.join('%s=\"%s\"' % (k, v) for k, v in sorted(s.labels.items()))\n"
            "        print('%s{%s} %r' % (s.name, labels, s.value))\n");
  // Debian's interpreter, where python3-prometheus-client is installed (a
  // python3 earlier on PATH may be another one).
  const std::string python = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
  FILE* p = popen((python + " " + script + " " + file + " 2>&1").c_str(), "r");
  std::map<std::string, double> samples;
  if (p == nullptr) {
    ADD_FAILURE() << "cannot run " << python;
    return samples;
  }
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int rc = pclose(p);
  EXPECT_EQ(rc, 0) << "the Prometheus parser refused the exposition:\n" << out << "\n" << text;
  size_t at = 0;
  while (at < out.size()) {
    size_t end = out.find('\n', at);
    std::string line = out.substr(at, end - at);
    at = end == std::string::npos ? out.size() : end + 1;
    size_t sp = line.rfind(' ');
    if (sp == std::string::npos) continue;
    samples[line.substr(0, sp)] = std::stod(line.substr(sp + 1));
  }
  return samples;
}

// The sum of every sample of `name` (any labels).
double Sum(const std::map<std::string, double>& samples, const std::string& name) {
  double total = 0;
  for (const auto& [key, value] : samples) {
    if (key.rfind(name + "{", 0) == 0) total += value;
  }
  return total;
}

double At(const std::map<std::string, double>& samples, const std::string& key) {
  auto it = samples.find(key);
  return it == samples.end() ? -1 : it->second;
}

class MetricsTest : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    if (HasFatalFailure()) return;
    state_ = Path("state");
    ImageWriter(Path("d0.raw"), 2 * kChunk + 4096, 3).Random(0, 2 * kChunk + 4096);
    RunResult r = Cairn({"token", "create", "admin1", "--state-dir", state_, "--store", "main",
                         "--role", "admin"});
    ASSERT_EQ(r.exit_code, 0) << r.Describe();
    token_ = r.out.substr(0, r.out.find('\n'));
    server_ = std::make_unique<ServerProcess>(
        std::vector<std::string>{"serve", "--listen", "127.0.0.1:0", "--store", "main=" + store(),
                                 "--state-dir", state_, "--metrics-listen", "127.0.0.1:0",
                                 "--metrics-refresh", "1"},
        Path("server.err"));
    ASSERT_GT(server_->port(), 0);
    // The log (before the line ServerProcess waits for) says where.
    const std::string log = ReadFile(Path("server.err"));
    std::smatch m;
    ASSERT_TRUE(std::regex_search(log, m, std::regex(R"(metrics on http://127\.0\.0\.1:(\d+)/metrics)")))
        << log;
    metrics_port_ = std::stoi(m[1]);
  }

  RunResult Remote(const std::string& verb, std::vector<std::string> args,
                   const std::string& token) {
    std::vector<std::string> full = {verb, "-r",
                                     "https://127.0.0.1:" + std::to_string(server_->port()) + "/main"};
    full.insert(full.end(), args.begin(), args.end());
    RunOptions o;
    o.env = {"CAIRN_CACHE_DIR=" + Path("cache"), "CAIRN_TRUSTED_SERVERS=" + Path("servers"),
             "CAIRN_TOKEN=" + token, "CAIRN_FINGERPRINT=" + server_->fingerprint()};
    return RunCairn(full, o);
  }

  std::map<std::string, double> Scrape() {
    auto [status, body] = HttpGet(metrics_port_, "/metrics");
    EXPECT_EQ(status, 200) << body;
    return Parse(body, tmp_.path());
  }

  std::string state_;
  std::string token_;
  std::unique_ptr<ServerProcess> server_;
  int metrics_port_ = 0;
};

TEST_F(MetricsTest, CountersMoveAsOperationsRunAndTheExpositionParses) {
  auto before = Scrape();
  EXPECT_GE(At(before, "cairn_up_seconds{}"), 0);
  EXPECT_EQ(Sum(before, "cairn_chunk_writes_total"), 0);

  RunResult r = Remote("backup", {"--id", "vm/200", "--time", SnapTime(1),
                                  "disk0.img=" + Path("d0.raw")}, token_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  r = Remote("restore", {"vm/200/" + SnapTime(1), "disk0.img", Path("out.img")}, token_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(CompareFiles(Path("d0.raw"), Path("out.img")), "");
  r = Remote("snapshots", {}, "admin1:wrong-secret");  // refused: 401
  EXPECT_NE(r.exit_code, 0);

  auto after = Scrape();
  // Three chunks went up and came back down.
  EXPECT_GE(At(after, R"(cairn_chunk_writes_total{store="main"})"), 3);
  EXPECT_GE(At(after, R"(cairn_chunk_reads_total{store="main"})"), 3);
  EXPECT_GT(At(after, R"(cairn_chunk_write_bytes_total{store="main"})"), 2.0 * kChunk);
  EXPECT_GE(At(after, R"(cairn_chunk_read_duration_seconds_count{store="main"})"), 3);
  EXPECT_GT(Sum(after, "cairn_http_requests_total"), Sum(before, "cairn_http_requests_total"));
  EXPECT_GE(At(after, R"(cairn_http_requests_total{code="200",method="POST",route="backup_finish"})"),
            1);
  EXPECT_GT(Sum(after, "cairn_http_sent_bytes_total"), 2.0 * kChunk);
  EXPECT_GT(Sum(after, "cairn_http_received_bytes_total"), 2.0 * kChunk);
  EXPECT_GT(Sum(after, "cairn_http_request_duration_seconds_count"),
            Sum(before, "cairn_http_request_duration_seconds_count"));
  EXPECT_GT(At(after, "cairn_http_connections_accepted_total{}"),
            At(before, "cairn_http_connections_accepted_total{}"));
  EXPECT_GE(At(after, R"(cairn_errors_total{kind="unauthorized"})"), 1);
  EXPECT_EQ(At(after, "cairn_backup_sessions_open{}"), 0);
  EXPECT_EQ(At(after, R"(cairn_tasks_running{kind="verify"})"), 0);

  // The datastore's figures are refreshed every second here: they come to
  // show the snapshot (a loaded machine may take a few rounds).
  std::map<std::string, double> figures;
  for (int i = 0; i < 120; ++i) {
    figures = Scrape();
    if (At(figures, R"(cairn_store_snapshots{group="vm/200",ns="",store="main"})") == 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  EXPECT_EQ(At(figures, R"(cairn_store_snapshots{group="vm/200",ns="",store="main"})"), 1);
  EXPECT_EQ(At(figures, R"(cairn_store_chunks{store="main"})"), 3);
  EXPECT_GT(At(figures, R"(cairn_store_fs_free_bytes{store="main"})"), 0);
  EXPECT_GT(At(figures, R"(cairn_store_dedup_factor{store="main"})"), 0);
  EXPECT_EQ(At(figures, R"(cairn_store_figures_ok{store="main"})"), 1);
}

TEST_F(MetricsTest, OnlyMetricsIsServed) {
  EXPECT_EQ(HttpGet(metrics_port_, "/").first, 404);
  EXPECT_EQ(HttpGet(metrics_port_, "/api/v1/stores").first, 404);
  EXPECT_EQ(HttpGet(metrics_port_, "/metrics", "POST").first, 405);
  EXPECT_EQ(HttpGet(metrics_port_, "/metrics?x=1").first, 200);
  EXPECT_TRUE(server_->alive());
}

// /metrics on the API port: tokens with the metrics role.
class ApiMetricsTest : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    if (HasFatalFailure()) return;
    state_ = Path("state");
    other_ = Path("other");
    ASSERT_EQ(Cairn({"init", other_}).exit_code, 0);
    ImageWriter(Path("d0.raw"), 3 * kChunk, 5).Random(0, 3 * kChunk);
    Backup("vm/100", 1, {"disk0.img=" + Path("d0.raw")});
    for (const auto& [name, store, role] :
         std::vector<std::tuple<std::string, std::string, std::string>>{
             {"scraper", "*", "metrics"}, {"scoped", "main", "metrics"},
             {"reader1", "main", "reader"}, {"admin1", "*", "admin"}}) {
      RunResult r = Cairn({"token", "create", name, "--state-dir", state_, "--store", store,
                           "--role", role});
      ASSERT_EQ(r.exit_code, 0) << r.Describe();
      tokens_[name] = r.out.substr(0, r.out.find('\n'));
    }
    // No --metrics-listen: the API port alone. Each chunk read of a verify
    // task sleeps 700 ms, one read at a time, so one is seen running.
    server_ = std::make_unique<ServerProcess>(
        std::vector<std::string>{"serve", "--listen", "127.0.0.1:0", "--store", "main=" + store(),
                                 "--store", "other=" + other_, "--state-dir", state_,
                                 "--metrics-refresh", "1", "--inject-task-latency", "700"},
        Path("server.err"));
    ASSERT_GT(server_->port(), 0);
  }

  net::HttpResponse Call(const std::string& token, std::string_view method,
                         const std::string& target, std::string_view body = {}) {
    net::ClientOptions o;
    o.host = "127.0.0.1";
    o.port = static_cast<uint16_t>(server_->port());
    o.fingerprint = server_->fingerprint();
    if (!token.empty()) o.authorization = "Bearer " + tokens_.at(token);
    auto c = net::HttpConnection::Connect(o);
    if (!c.ok()) {
      ADD_FAILURE() << c.status().ToString();
      return {};
    }
    auto r = (*c)->Request(method, target,
                           ByteSpan(reinterpret_cast<const uint8_t*>(body.data()), body.size()),
                           "application/json");
    if (!r.ok()) {
      ADD_FAILURE() << method << " " << target << ": " << r.status().ToString();
      return {};
    }
    return std::move(*r);
  }
  static std::string Text(const net::HttpResponse& r) { return std::string(AsStringView(r.body)); }

  std::string Scrape(const std::string& token) {
    net::HttpResponse r = Call(token, "GET", "/metrics");
    EXPECT_EQ(r.status, 200) << Text(r);
    return Text(r);
  }

  std::string state_, other_;
  std::map<std::string, std::string> tokens_;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(ApiMetricsTest, AMetricsTokenScrapesTheApiPortAndNothingElse) {
  // Store figures are read from the first scrape on, every second.
  std::map<std::string, double> all;
  for (int i = 0; i < 120; ++i) {
    all = Parse(Scrape("scraper"), tmp_.path());
    if (At(all, R"(cairn_store_figures_ok{store="other"})") == 1 &&
        At(all, R"(cairn_store_figures_ok{store="main"})") == 1) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  EXPECT_GE(At(all, "cairn_up_seconds{}"), 0);
  EXPECT_EQ(At(all, R"(cairn_store_chunks{store="main"})"), 3);
  EXPECT_EQ(At(all, R"(cairn_store_figures_ok{store="other"})"), 1);
  // An admin token reads them too.
  EXPECT_NE(Scrape("admin1").find("cairn_store_chunks{store=\"main\"}"), std::string::npos);

  // A metrics token of one datastore: its series and the server's, no other's.
  const std::string scoped = Scrape("scoped");
  auto samples = Parse(scoped, tmp_.path());
  EXPECT_EQ(At(samples, R"(cairn_store_chunks{store="main"})"), 3);
  EXPECT_EQ(scoped.find("store=\"other\""), std::string::npos) << scoped;
  EXPECT_GE(At(samples, "cairn_up_seconds{}"), 0);

  // Nothing but /metrics for a metrics token; no /metrics for a reader.
  EXPECT_EQ(Call("scraper", "GET", "/api/v1/stores").status, 403);
  EXPECT_EQ(Call("scraper", "GET", "/api/v1/stores/main/snapshots").status, 403);
  EXPECT_EQ(Call("scraper", "POST", "/api/v1/stores/main/verify", "{}").status, 403);
  EXPECT_EQ(Call("reader1", "GET", "/metrics").status, 403);
  EXPECT_EQ(Call("", "GET", "/metrics").status, 401);
  EXPECT_EQ(Call("scraper", "POST", "/metrics").status, 405);
}

TEST_F(ApiMetricsTest, VerifyCoverageAndARunningTasksStages) {
  auto figures_read = [&](const std::map<std::string, double>& m) {
    return At(m, R"(cairn_store_figures_ok{store="main"})") == 1;
  };
  std::map<std::string, double> m;
  for (int i = 0; i < 120 && !figures_read(m); ++i) {
    m = Parse(Scrape("scraper"), tmp_.path());
    if (!figures_read(m)) std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  // Never verified: nothing covered; an empty store is covered.
  EXPECT_EQ(At(m, R"(cairn_store_verify_coverage_ratio{store="main",within_days="30"})"), 0);
  EXPECT_EQ(At(m, R"(cairn_store_verify_coverage_ratio{store="other",within_days="1"})"), 1);

  net::HttpResponse started = Call("admin1", "POST", "/api/v1/stores/main/verify", "{}");
  ASSERT_EQ(started.status, 202) << Text(started);
  // While it runs (three reads of 700 ms, one after the other): its stages,
  // by store and kind.
  std::string running;
  for (int i = 0; i < 200; ++i) {
    std::string text = Scrape("scraper");
    if (text.find("cairn_task_stage_busy_ratio{store=\"main\",kind=\"verify\",stage=\"read_wait\"}") !=
        std::string::npos) {
      running = text;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_FALSE(running.empty()) << "no stage shares of the running verify were exported";
  m = Parse(running, tmp_.path());
  EXPECT_EQ(At(m, R"(cairn_tasks_running{kind="verify"})"), 1);
  // Its reads are what it waited for.
  EXPECT_GT(At(m, R"(cairn_task_stage_busy_ratio{kind="verify",stage="read_wait",store="main"})"),
            0);
  EXPECT_GE(At(m, R"(cairn_task_stage_busy_ratio{kind="verify",stage="decode",store="main"})"), 0);
  EXPECT_GE(At(m, R"(cairn_task_cpu_ratio{kind="verify",store="main"})"), 0);
  EXPECT_EQ(Sum(m, "cairn_task_bottleneck"), 1);

  // Once it has ended, every chunk was found ok today: covered.
  for (int i = 0; i < 200; ++i) {
    m = Parse(Scrape("scraper"), tmp_.path());
    if (At(m, R"(cairn_store_verify_coverage_ratio{store="main",within_days="1"})") == 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(At(m, R"(cairn_tasks_running{kind="verify"})"), 0);
  EXPECT_EQ(Sum(m, "cairn_task_stage_busy_ratio"), 0);
  EXPECT_EQ(At(m, R"(cairn_store_verify_coverage_ratio{store="main",within_days="1"})"), 1);
  EXPECT_EQ(At(m, R"(cairn_store_verify_coverage_ratio{store="main",within_days="30"})"), 1);
}

}  // namespace
}  // namespace cairn::cli_test
