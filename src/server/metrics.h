// Metrics of `cairn serve` for Prometheus (docs/SERVER.md, "Metrics"):
// counters and latency histograms the request path updates, gauges read
// when scraped, and per-datastore figures a background thread refreshes
// (walking a chunk store takes a while: never on the scrape's time).
//
//   ServerMetrics   the registry: requests by route, method and code; their
//                   latency; bytes in and out; errors by kind; chunk reads
//                   and writes per datastore with their latency;
//   MeteredWriter   a net::ResponseWriter decorator that records one
//                   request (status, bytes out, duration; a streamed
//                   answer when its last piece is produced);
//   StoreFigures    the per-datastore figures (maintenance::ReadStoreStatus
//                   and the snapshots per group), refreshed every interval;
//   RenderMetrics   everything in the text exposition format 0.0.4.
//
// Names follow Prometheus' conventions: cairn_ prefix, counters end in
// _total, units in the name (_bytes, _seconds), labels of bounded
// cardinality only (routes, stores, groups; never ids or tokens).
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "datastore/datastore.h"
#include "maintenance/store_status.h"
#include "net/http_server.h"
#include "server/tasks.h"
#include "verify/coverage.h"

namespace cairn::server {

// A latency histogram with fixed bucket bounds (seconds): lock-free.
class Histogram {
 public:
  static constexpr std::array<double, 14> kBounds = {
      0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
  void Observe(double seconds);
  // The _bucket, _sum and _count lines of `name` with `labels` ("" or
  // `a="x",b="y"`).
  void Write(std::string* out, std::string_view name, std::string_view labels) const;
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }

 private:
  std::array<std::atomic<uint64_t>, kBounds.size()> buckets_{};  // not cumulative
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> sum_ns_{0};
};

// The route label of a request path: "chunks", "backup_chunks", "status",
// … (protocol::ParseRoute), "other" for anything else.
std::string RouteLabel(std::string_view path);
// The kind of error an HTTP status stands for ("not_found", "unauthorized",
// "rate_limited", "server_error", …); empty below 400.
std::string ErrorKind(int status);
// A label value with \, " and newline escaped.
std::string EscapeLabel(std::string_view value);
// The exposition's pieces: a family's # HELP and # TYPE lines, and one
// sample (`labels` "" or `a="x",b="y"`); `store="NAME"`.
void WriteFamily(std::string* out, std::string_view name, std::string_view type,
                 std::string_view help);
void WriteSample(std::string* out, std::string_view name, std::string_view labels, double value);
void WriteSample(std::string* out, std::string_view name, std::string_view labels, uint64_t value);
void WriteSample(std::string* out, std::string_view name, std::string_view labels, int64_t value);
std::string StoreLabel(const std::string& store);

class ServerMetrics {
 public:
  ServerMetrics();

  // One finished request.
  void ObserveRequest(const std::string& route, const std::string& method, int status,
                      double seconds, uint64_t bytes_in, uint64_t bytes_out);
  // A request the header step refused (401, 403, 429, 413) before its body.
  void ObserveRefusal(int status);
  void ObserveChunkRead(const std::string& store, double seconds, uint64_t bytes, bool ok);
  void ObserveChunkWrite(const std::string& store, double seconds, uint64_t bytes);
  void AddError(const std::string& kind);

  // The dashboard's throughput chart: chunk bytes received from backups
  // (in) and read by clients (out) of one datastore, per
  // kThroughputBucketSeconds, the last kThroughputBuckets intervals, oldest
  // first (quiet ones as zeros).
  static constexpr int kThroughputBucketSeconds = 10;
  static constexpr int kThroughputBuckets = 360;  // an hour
  struct ThroughputPoint {
    int64_t start_unix = 0;
    uint64_t in_bytes = 0, out_bytes = 0;
  };
  std::vector<ThroughputPoint> Throughput(const std::string& store, int64_t now_unix) const;

  // The lines of everything above.
  void Write(std::string* out) const;
  // Seconds since the metrics were made (the server started).
  double UptimeSeconds() const;

 private:
  struct RequestKey {
    std::string route, method;
    int status;
    auto operator<=>(const RequestKey&) const = default;
  };
  struct RouteFigures {
    Histogram latency;
    uint64_t bytes_in = 0, bytes_out = 0;
  };
  struct ChunkFigures {
    uint64_t reads = 0, read_errors = 0, read_bytes = 0;
    uint64_t writes = 0, write_bytes = 0;
    Histogram read_latency, write_latency;
    // A ring of intervals: slot i holds interval `index` (unix time /
    // kThroughputBucketSeconds) when index % kThroughputBuckets == i.
    struct Interval {
      int64_t index = -1;
      uint64_t in_bytes = 0, out_bytes = 0;
    };
    std::array<Interval, kThroughputBuckets> recent;
    Interval& Now();
  };

  const std::chrono::steady_clock::time_point start_;
  mutable Mutex mu_;
  std::map<RequestKey, uint64_t> requests_ GUARDED_BY(mu_);
  std::map<std::string, std::unique_ptr<RouteFigures>> routes_ GUARDED_BY(mu_);
  std::map<std::string, std::unique_ptr<ChunkFigures>> chunks_ GUARDED_BY(mu_);
  std::map<std::string, uint64_t> errors_ GUARDED_BY(mu_);
};

// Records one request into `metrics` as it is answered: the status and
// bytes the handler gives `inner`; a streamed answer is recorded when its
// producer says done (or fails, or the connection goes).
//
// Thread safety: as net::ResponseWriter (one handler); the stream's
// producer runs later on another worker, with its own copy of the state.
class MeteredWriter final : public net::ResponseWriter {
 public:
  MeteredWriter(net::ResponseWriter& inner, ServerMetrics& metrics, const net::HttpRequest& request);
  ~MeteredWriter() override;  // records a request answered with Send (or not at all)

  void Send(int status, std::string_view content_type, Bytes body, const Headers& headers) override;
  using net::ResponseWriter::Send;
  void Stream(int status, std::string_view content_type, Producer next) override;
  bool responded() const override { return inner_.responded(); }

 private:
  net::ResponseWriter& inner_;
  ServerMetrics& metrics_;
  const std::string route_;
  const std::string method_;
  const uint64_t bytes_in_;
  const std::chrono::steady_clock::time_point start_;
  int status_ = 0;
  uint64_t bytes_out_ = 0;
  bool streamed_ = false;
};

// The per-datastore figures: ReadStoreStatus (chunks, bytes, dedup, disk
// space, verify and gc state) and the snapshots of each group, read for
// every store once at Start and then every `interval`.
class StoreFigures {
 public:
  // REQUIRES: `stores` outlive this object.
  StoreFigures(const std::map<std::string, datastore::Datastore*>& stores,
               std::chrono::seconds interval, Logger& logger);
  ~StoreFigures();  // stops the thread
  void Start();

  void Write(std::string* out) const;

 private:
  struct Figures {
    maintenance::StoreStatus status;
    std::map<std::pair<std::string, std::string>, uint64_t> snapshots_per_group;  // (ns, group)
    verify::VerifyCoverage coverage;  // empty when the ledger could not be read
    int64_t read_unix = 0;  // when (0: never read)
    double read_seconds = 0;
    bool ok = false;
  };
  void Loop(std::stop_token stop);
  Figures Read(const datastore::Datastore& store) const;

  const std::map<std::string, datastore::Datastore*> stores_;
  const std::chrono::seconds interval_;
  Logger& logger_;
  mutable Mutex mu_;
  std::condition_variable_any cv_;
  std::map<std::string, Figures> figures_ GUARDED_BY(mu_);
  std::jthread thread_;
};

// Gauges read when scraped: the HTTP server's counters, the backup
// sessions open, the tasks.
struct ScrapeInputs {
  net::ServerStats http;
  size_t open_sessions = 0;
  std::vector<TaskInfo> tasks;
};

// The whole exposition (text format 0.0.4).
std::string RenderMetrics(const ServerMetrics& metrics, const StoreFigures* stores,
                          const ScrapeInputs& inputs);

// The exposition as a token bound to datastore `store` may see it: every
// sample labelled with another store="…" left out (the # HELP and # TYPE
// lines stay; a family may then have no sample, which is valid).
std::string MetricsForStore(std::string_view exposition, std::string_view store);

// Content-Type of the exposition.
inline constexpr std::string_view kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace cairn::server
