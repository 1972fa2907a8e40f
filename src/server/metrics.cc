#include "server/metrics.h"

#include <algorithm>
#include <ctime>

#include <fmt/format.h>

#include "protocol/routes.h"

namespace cairn::server {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

// --- Histogram ---------------------------------------------------------------

void Histogram::Observe(double seconds) {
  size_t i = 0;
  while (i < kBounds.size() && seconds > kBounds[i]) ++i;
  if (i < kBounds.size()) buckets_[i].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_ns_.fetch_add(static_cast<uint64_t>(std::max(0.0, seconds) * 1e9), std::memory_order_relaxed);
}

void Histogram::Write(std::string* out, std::string_view name, std::string_view labels) const {
  const std::string sep = labels.empty() ? "" : ",";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < kBounds.size(); ++i) {
    cumulative += buckets_[i].load(std::memory_order_relaxed);
    WriteSample(out, fmt::format("{}_bucket", name),
                fmt::format("{}{}le=\"{}\"", labels, sep, kBounds[i]), cumulative);
  }
  const uint64_t count = count_.load(std::memory_order_relaxed);
  WriteSample(out, fmt::format("{}_bucket", name), fmt::format("{}{}le=\"+Inf\"", labels, sep),
       std::max(count, cumulative));
  WriteSample(out, fmt::format("{}_sum", name), labels,
       static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) / 1e9);
  WriteSample(out, fmt::format("{}_count", name), labels, std::max(count, cumulative));
}

// --- exposition ---------------------------------------------------------------

void WriteFamily(std::string* out, std::string_view name, std::string_view type,
                 std::string_view help) {
  *out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

namespace {
template <typename T>
void Sample(std::string* out, std::string_view name, std::string_view labels, T value) {
  if (labels.empty()) {
    *out += fmt::format("{} {}\n", name, value);
  } else {
    *out += fmt::format("{}{{{}}} {}\n", name, labels, value);
  }
}
}  // namespace

void WriteSample(std::string* out, std::string_view name, std::string_view labels, double value) {
  Sample(out, name, labels, value);
}
void WriteSample(std::string* out, std::string_view name, std::string_view labels, uint64_t value) {
  Sample(out, name, labels, value);
}
void WriteSample(std::string* out, std::string_view name, std::string_view labels, int64_t value) {
  Sample(out, name, labels, value);
}

std::string StoreLabel(const std::string& store) {
  return fmt::format("store=\"{}\"", EscapeLabel(store));
}

// --- labels ------------------------------------------------------------------

std::string RouteLabel(std::string_view path) {
  using protocol::RouteKind;
  const protocol::Route r = protocol::ParseRoute(path);
  switch (r.kind) {
    case RouteKind::kNotFound: return "other";
    case RouteKind::kVersion: return "version";
    case RouteKind::kSpeedTest: return "speedtest";
    case RouteKind::kStores: return "stores";
    case RouteKind::kStoreOther: return "other";
    case RouteKind::kSnapshots: return "snapshots";
    case RouteKind::kFile: return "file";
    case RouteKind::kGrant: return "grant";
    case RouteKind::kChunk: return "chunk";
    case RouteKind::kChunks: return "chunks";
    case RouteKind::kBackupStart: return "backup_start";
    case RouteKind::kBackupSession: return "backup_abort";
    case RouteKind::kBackupStep:
      for (std::string_view step : {"base", "chunks", "file", "finish"}) {
        if (r.step == step) return fmt::format("backup_{}", step);
      }
      return "other";
    case RouteKind::kStatus: return "status";
    case RouteKind::kPrune: return "prune";
    case RouteKind::kSnapshot: return "forget";
    case RouteKind::kProtected: return "protected";
    case RouteKind::kNotes: return "notes";
    case RouteKind::kTree: return "tree";
    case RouteKind::kThroughput: return "throughput";
    case RouteKind::kStoreTask: return r.step == "gc" ? "gc" : r.step == "sync" ? "sync" : "verify";
    case RouteKind::kSyncJobs: return "sync_jobs";
    case RouteKind::kTasks: return "tasks";
    case RouteKind::kTask: return "task";
    case RouteKind::kTaskSub: return "task_log";
  }
  return "other";
}

std::string ErrorKind(int status) {
  switch (status) {
    case 400: return "bad_request";
    case 401: return "unauthorized";
    case 403: return "forbidden";
    case 404: return "not_found";
    case 405: return "method_not_allowed";
    case 409: return "conflict";
    case 413: return "too_large";
    case 429: return "rate_limited";
    case 503: return "unavailable";
    default: break;
  }
  if (status >= 500) return "server_error";
  if (status >= 400) return "client_error";
  return "";
}

std::string EscapeLabel(std::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// --- ServerMetrics -----------------------------------------------------------

ServerMetrics::ServerMetrics() : start_(Clock::now()) {}

double ServerMetrics::UptimeSeconds() const { return Seconds(Clock::now() - start_); }

void ServerMetrics::ObserveRequest(const std::string& route, const std::string& method, int status,
                                   double seconds, uint64_t bytes_in, uint64_t bytes_out) {
  const std::string kind = ErrorKind(status);
  MutexLock lock(mu_);
  ++requests_[RequestKey{route, method, status}];
  auto& figures = routes_[route];
  if (!figures) figures = std::make_unique<RouteFigures>();
  figures->latency.Observe(seconds);
  figures->bytes_in += bytes_in;
  figures->bytes_out += bytes_out;
  if (!kind.empty()) ++errors_[kind];
}

void ServerMetrics::ObserveRefusal(int status) {
  const std::string kind = ErrorKind(status);
  if (kind.empty()) return;
  MutexLock lock(mu_);
  ++errors_[kind];
}

void ServerMetrics::ObserveChunkRead(const std::string& store, double seconds, uint64_t bytes,
                                     bool ok) {
  MutexLock lock(mu_);
  auto& c = chunks_[store];
  if (!c) c = std::make_unique<ChunkFigures>();
  ++c->reads;
  if (ok) {
    c->read_bytes += bytes;
    c->Now().out_bytes += bytes;
    c->read_latency.Observe(seconds);
  } else {
    ++c->read_errors;
  }
}

ServerMetrics::ChunkFigures::Interval& ServerMetrics::ChunkFigures::Now() {
  const int64_t index = static_cast<int64_t>(std::time(nullptr)) / kThroughputBucketSeconds;
  Interval& slot = recent[static_cast<size_t>(index % kThroughputBuckets)];
  if (slot.index != index) slot = Interval{index, 0, 0};
  return slot;
}

std::vector<ServerMetrics::ThroughputPoint> ServerMetrics::Throughput(const std::string& store,
                                                                      int64_t now_unix) const {
  const int64_t last = now_unix / kThroughputBucketSeconds;
  std::vector<ThroughputPoint> points(kThroughputBuckets);
  for (int i = 0; i < kThroughputBuckets; ++i) {
    points[i].start_unix = (last - kThroughputBuckets + 1 + i) * kThroughputBucketSeconds;
  }
  MutexLock lock(mu_);
  auto it = chunks_.find(store);
  if (it == chunks_.end()) return points;
  for (const ChunkFigures::Interval& slot : it->second->recent) {
    const int64_t age = last - slot.index;
    if (slot.index < 0 || age < 0 || age >= kThroughputBuckets) continue;
    ThroughputPoint& p = points[static_cast<size_t>(kThroughputBuckets - 1 - age)];
    p.in_bytes = slot.in_bytes;
    p.out_bytes = slot.out_bytes;
  }
  return points;
}

void ServerMetrics::ObserveChunkWrite(const std::string& store, double seconds, uint64_t bytes) {
  MutexLock lock(mu_);
  auto& c = chunks_[store];
  if (!c) c = std::make_unique<ChunkFigures>();
  ++c->writes;
  c->write_bytes += bytes;
  c->Now().in_bytes += bytes;
  c->write_latency.Observe(seconds);
}

void ServerMetrics::AddError(const std::string& kind) {
  MutexLock lock(mu_);
  ++errors_[kind];
}

void ServerMetrics::Write(std::string* out) const {
  MutexLock lock(mu_);
  WriteFamily(out, "cairn_http_requests_total", "counter",
         "Requests answered, by route, method and HTTP status.");
  for (const auto& [k, n] : requests_) {
    WriteSample(out, "cairn_http_requests_total",
         fmt::format("route=\"{}\",method=\"{}\",code=\"{}\"", k.route, EscapeLabel(k.method),
                     k.status),
         n);
  }
  WriteFamily(out, "cairn_http_request_duration_seconds", "histogram",
         "Time from a request's body read to its answer's last byte produced, by route.");
  for (const auto& [route, f] : routes_) {
    f->latency.Write(out, "cairn_http_request_duration_seconds", fmt::format("route=\"{}\"", route));
  }
  WriteFamily(out, "cairn_http_received_bytes_total", "counter", "Request body bytes, by route.");
  for (const auto& [route, f] : routes_) {
    WriteSample(out, "cairn_http_received_bytes_total", fmt::format("route=\"{}\"", route), f->bytes_in);
  }
  WriteFamily(out, "cairn_http_sent_bytes_total", "counter", "Response body bytes, by route.");
  for (const auto& [route, f] : routes_) {
    WriteSample(out, "cairn_http_sent_bytes_total", fmt::format("route=\"{}\"", route), f->bytes_out);
  }
  WriteFamily(out, "cairn_errors_total", "counter",
         "Error answers and refusals by kind (not_found, unauthorized, rate_limited, …).");
  for (const auto& [kind, n] : errors_) {
    WriteSample(out, "cairn_errors_total", fmt::format("kind=\"{}\"", kind), n);
  }
  WriteFamily(out, "cairn_chunk_reads_total", "counter", "Chunks read for clients, by datastore.");
  for (const auto& [store, c] : chunks_) WriteSample(out, "cairn_chunk_reads_total", StoreLabel(store), c->reads);
  WriteFamily(out, "cairn_chunk_read_errors_total", "counter",
         "Chunk reads that failed (missing, refused or unreadable), by datastore.");
  for (const auto& [store, c] : chunks_) {
    WriteSample(out, "cairn_chunk_read_errors_total", StoreLabel(store), c->read_errors);
  }
  WriteFamily(out, "cairn_chunk_read_bytes_total", "counter", "Stored bytes of the chunks read.");
  for (const auto& [store, c] : chunks_) {
    WriteSample(out, "cairn_chunk_read_bytes_total", StoreLabel(store), c->read_bytes);
  }
  WriteFamily(out, "cairn_chunk_read_duration_seconds", "histogram", "Time to read one chunk.");
  for (const auto& [store, c] : chunks_) {
    c->read_latency.Write(out, "cairn_chunk_read_duration_seconds", StoreLabel(store));
  }
  WriteFamily(out, "cairn_chunk_writes_total", "counter",
         "Chunks received from backups (checked, stored unless already there).");
  for (const auto& [store, c] : chunks_) WriteSample(out, "cairn_chunk_writes_total", StoreLabel(store), c->writes);
  WriteFamily(out, "cairn_chunk_write_bytes_total", "counter", "Stored bytes of the chunks received.");
  for (const auto& [store, c] : chunks_) {
    WriteSample(out, "cairn_chunk_write_bytes_total", StoreLabel(store), c->write_bytes);
  }
  WriteFamily(out, "cairn_chunk_write_duration_seconds", "histogram",
         "Time to check and store one received chunk.");
  for (const auto& [store, c] : chunks_) {
    c->write_latency.Write(out, "cairn_chunk_write_duration_seconds", StoreLabel(store));
  }
}

// --- MeteredWriter -------------------------------------------------------------

MeteredWriter::MeteredWriter(net::ResponseWriter& inner, ServerMetrics& metrics,
                             const net::HttpRequest& request)
    : inner_(inner),
      metrics_(metrics),
      route_(RouteLabel(request.path)),
      method_(request.method),
      bytes_in_(request.body.size()),
      start_(Clock::now()) {}

MeteredWriter::~MeteredWriter() {
  if (streamed_) return;  // the stream records itself
  // No answer: the server sends 500 for the handler.
  metrics_.ObserveRequest(route_, method_, status_ == 0 ? 500 : status_,
                          Seconds(Clock::now() - start_), bytes_in_, bytes_out_);
}

void MeteredWriter::Send(int status, std::string_view content_type, Bytes body,
                         const Headers& headers) {
  status_ = status;
  bytes_out_ = body.size();
  inner_.Send(status, content_type, std::move(body), headers);
}

void MeteredWriter::Stream(int status, std::string_view content_type, Producer next) {
  streamed_ = true;
  // Owned by the producer, which outlives this writer: records the request
  // once, when the stream is done or dropped.
  struct Record {
    ServerMetrics& metrics;
    std::string route, method;
    int status;
    uint64_t bytes_in, bytes_out = 0;
    Clock::time_point start;
    bool recorded = false;
    void Done() {
      if (recorded) return;
      recorded = true;
      metrics.ObserveRequest(route, method, status, Seconds(Clock::now() - start), bytes_in,
                             bytes_out);
    }
    ~Record() { Done(); }
  };
  std::shared_ptr<Record> record(new Record{metrics_, route_, method_, status, bytes_in_, 0, start_});
  auto size = [](const StreamPieces& p) {
    uint64_t n = 0;
    for (const ReadBuffer& b : p.pieces) n += b.size();
    return n;
  };
  inner_.Stream(status, content_type,
                [record, size, next = std::move(next)](StreamPieces* out, bool* done) -> Status {
                  const uint64_t before = size(*out);
                  Status s = next(out, done);
                  record->bytes_out += size(*out) - before;
                  if (!s.ok()) record->metrics.AddError("stream_cut");  // the answer is cut off
                  if (!s.ok() || *done) record->Done();
                  return s;
                });
}

std::string MetricsForStore(std::string_view exposition, std::string_view store) {
  const std::string own = StoreLabel(std::string(store));
  std::string out;
  out.reserve(exposition.size());
  while (!exposition.empty()) {
    const size_t end = exposition.find('\n');
    const std::string_view line =
        exposition.substr(0, end == std::string_view::npos ? end : end + 1);
    exposition.remove_prefix(line.size());
    // Labels are written by this file only: store="…" first, or after a
    // comma; a value cannot hold a quote unescaped.
    const size_t brace = line.find('{');
    bool keep = true;
    if (!line.starts_with('#') && brace != std::string_view::npos) {
      const std::string_view labels = line.substr(brace + 1);
      size_t at = labels.starts_with("store=\"") ? 0 : labels.find(",store=\"");
      if (at != std::string_view::npos) {
        if (at > 0) ++at;  // past the comma
        keep = labels.substr(at).starts_with(own) &&
               (labels.size() == at + own.size() || labels[at + own.size()] == ',' ||
                labels[at + own.size()] == '}');
      }
    }
    if (keep) out += line;
  }
  return out;
}

}  // namespace cairn::server
