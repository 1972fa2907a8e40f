// The gauges of server/metrics.h: per-datastore figures (refreshed in the
// background), the HTTP server's counters, sessions and tasks, and the
// whole exposition.
#include <ctime>

#include <fmt/format.h>

#include "server/metrics.h"
#include "base/mutex.h"
#include "verify/coverage.h"

namespace cairn::server {
namespace {

using Clock = std::chrono::steady_clock;

// The windows of cairn_store_verify_coverage_ratio, in days.
const std::vector<int> kCoverageDays = {1, 7, 30};

// One gauge or counter with a single unlabelled value.
void Single(std::string* out, std::string_view name, std::string_view type, std::string_view help,
            double value) {
  WriteFamily(out, name, type, help);
  WriteSample(out, name, "", value);
}
}  // namespace

StoreFigures::StoreFigures(const std::map<std::string, datastore::Datastore*>& stores,
                           std::chrono::seconds interval, Logger& logger)
    : stores_(stores), interval_(interval), logger_(logger) {}

StoreFigures::~StoreFigures() {
  if (thread_.joinable()) {
    thread_.request_stop();
    cv_.notify_all();
    thread_.join();
  }
}

void StoreFigures::Start() {
  thread_ = std::jthread([this](std::stop_token stop) { Loop(stop); });
}

StoreFigures::Figures StoreFigures::Read(const datastore::Datastore& store) const {
  Figures f;
  const auto start = Clock::now();
  // Two threads: the figures are for a graph, not worth the server's cores.
  auto status = maintenance::ReadStoreStatus(store, 2);
  auto snapshots = store.ListAllSnapshots();
  f.read_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  f.read_unix = static_cast<int64_t>(std::time(nullptr));
  if (!status.ok() || !snapshots.ok()) {
    logger_.Warn("metrics: cannot read the figures of datastore {}: {}", store.path(),
                 (!status.ok() ? status.status() : snapshots.status()).ToString());
    return f;
  }
  f.status = *status;
  for (const datastore::SnapshotRef& s : *snapshots) {
    ++f.snapshots_per_group[{s.group.ns, s.group.ToString()}];
  }
  f.ok = true;
  // What share the ledger found ok lately: a second listing of the chunk
  // names (no stat). A store never verified has an empty ledger: 0.
  auto coverage = verify::ReadVerifyCoverage(store, f.read_unix, kCoverageDays);
  if (coverage.ok()) {
    f.coverage = std::move(*coverage);
  } else {
    logger_.Warn("metrics: cannot read the verify ledger of datastore {}: {}", store.path(),
                 coverage.status().ToString());
  }
  f.read_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return f;
}

void StoreFigures::Loop(std::stop_token stop) {
  while (!stop.stop_requested()) {
    for (const auto& [name, store] : stores_) {
      if (stop.stop_requested()) return;
      Figures f = Read(*store);
      MutexLock lock(mu_);
      figures_[name] = std::move(f);
    }
    MutexLock lock(mu_);
    cv_.wait_for(mu_, stop, interval_, [] { return false; });
  }
}

void StoreFigures::Write(std::string* out) const {
  MutexLock lock(mu_);
  using maintenance::StoreStatus;
  struct Gauge {
    const char* name;
    const char* help;
    double (*value)(const StoreStatus&);
  };
  static const Gauge kGauges[] = {
      {"cairn_store_chunks", "Chunk files in the datastore (set-aside ones not counted).",
       [](const StoreStatus& s) { return double(s.chunks); }},
      {"cairn_store_chunk_bytes", "Bytes of the chunk files on disk (compressed).",
       [](const StoreStatus& s) { return double(s.chunk_bytes); }},
      {"cairn_store_logical_bytes", "Sum of the archive sizes of all snapshots.",
       [](const StoreStatus& s) { return double(s.logical_bytes); }},
      {"cairn_store_dedup_factor",
       "Logical bytes over bytes on disk: what deduplication and compression save.",
       [](const StoreStatus& s) { return s.DedupFactor(); }},
      {"cairn_store_trash_chunks", "Chunks gc set aside, removed by a later run.",
       [](const StoreStatus& s) { return double(s.trash_chunks); }},
      {"cairn_store_bad_chunks", "Chunks verify found damaged and quarantined.",
       [](const StoreStatus& s) { return double(s.bad_chunks); }},
      {"cairn_store_groups", "Backup groups.", [](const StoreStatus& s) { return double(s.groups); }},
      {"cairn_store_snapshots_never_verified", "Snapshots without a verify result.",
       [](const StoreStatus& s) { return double(s.never_verified); }},
      {"cairn_store_snapshots_failed_verify", "Snapshots whose last verify failed.",
       [](const StoreStatus& s) { return double(s.failed_verify); }},
      {"cairn_store_last_verify_timestamp_seconds",
       "Unix time of the newest verify of any snapshot (0: none).",
       [](const StoreStatus& s) { return double(s.last_verify_unix); }},
      {"cairn_store_fs_free_bytes", "Free bytes of the file system holding the datastore.",
       [](const StoreStatus& s) { return double(s.fs_free_bytes); }},
      {"cairn_store_fs_size_bytes", "Size of the file system holding the datastore.",
       [](const StoreStatus& s) { return double(s.fs_total_bytes); }},
  };
  for (const Gauge& g : kGauges) {
    WriteFamily(out, g.name, "gauge", g.help);
    for (const auto& [name, f] : figures_) {
      if (f.ok) WriteSample(out, g.name, StoreLabel(name), g.value(f.status));
    }
  }
  // The last gc, when there was one.
  struct GcGauge {
    const char* name;
    const char* help;
    double (*value)(const maintenance::GcReport&);
  };
  static const GcGauge kGc[] = {
      {"cairn_store_last_gc_timestamp_seconds", "Unix time the last gc ended.",
       [](const maintenance::GcReport& r) { return double(r.end_unix_ns) / 1e9; }},
      {"cairn_store_last_gc_duration_seconds", "How long the last gc took.",
       [](const maintenance::GcReport& r) {
         return double(r.end_unix_ns - r.start_unix_ns) / 1e9;
       }},
      {"cairn_store_last_gc_removed_chunks", "Chunks the last gc removed.",
       [](const maintenance::GcReport& r) { return double(r.removed_chunks); }},
      {"cairn_store_last_gc_removed_bytes", "Bytes the last gc freed.",
       [](const maintenance::GcReport& r) { return double(r.removed_bytes); }},
  };
  for (const GcGauge& g : kGc) {
    WriteFamily(out, g.name, "gauge", g.help);
    for (const auto& [name, f] : figures_) {
      if (f.ok && f.status.last_gc) WriteSample(out, g.name, StoreLabel(name), g.value(*f.status.last_gc));
    }
  }
  WriteFamily(out, "cairn_store_verify_coverage_ratio", "gauge",
              "Share of the datastore's chunks the verify ledger found ok within the last "
              "within_days days (1 when it holds no chunk).");
  for (const auto& [name, f] : figures_) {
    const verify::VerifyCoverage& c = f.coverage;
    for (size_t i = 0; i < c.days.size(); ++i) {
      WriteSample(out, "cairn_store_verify_coverage_ratio",
                  fmt::format("{},within_days=\"{}\"", StoreLabel(name), c.days[i]),
                  c.chunks == 0 ? 1.0 : static_cast<double>(c.checked[i]) / c.chunks);
    }
  }
  WriteFamily(out, "cairn_store_snapshots", "gauge", "Snapshots per backup group (ns \"\": the root).");
  for (const auto& [name, f] : figures_) {
    for (const auto& [group, n] : f.snapshots_per_group) {
      WriteSample(out, "cairn_store_snapshots",
           fmt::format("{},ns=\"{}\",group=\"{}\"", StoreLabel(name), EscapeLabel(group.first),
                       EscapeLabel(group.second)),
           n);
    }
  }
  WriteFamily(out, "cairn_store_figures_timestamp_seconds", "gauge",
         "Unix time the datastore's figures above were read (they are refreshed in the "
         "background).");
  for (const auto& [name, f] : figures_) {
    WriteSample(out, "cairn_store_figures_timestamp_seconds", StoreLabel(name), f.read_unix);
  }
  WriteFamily(out, "cairn_store_figures_read_seconds", "gauge", "How long reading them took.");
  for (const auto& [name, f] : figures_) {
    WriteSample(out, "cairn_store_figures_read_seconds", StoreLabel(name), f.read_seconds);
  }
  WriteFamily(out, "cairn_store_figures_ok", "gauge", "1 when the figures could be read, else 0.");
  for (const auto& [name, f] : figures_) {
    WriteSample(out, "cairn_store_figures_ok", StoreLabel(name), f.ok ? 1.0 : 0.0);
  }
}

namespace {

// Where the time of each running task went so far (its stage meter,
// pipeline/stage_meter.h): series per store, kind and stage. At most one
// task runs per store, so the labels stay bounded.
void WriteTaskStages(std::string* out, const std::vector<TaskInfo>& tasks) {
  std::vector<const TaskInfo*> running;
  for (const TaskInfo& t : tasks) {
    if (t.state == TaskState::kRunning && t.bottleneck.is_object()) running.push_back(&t);
  }
  auto labels = [](const TaskInfo& t) {
    return fmt::format("{},kind=\"{}\"", StoreLabel(t.store), EscapeLabel(t.kind));
  };
  WriteFamily(out, "cairn_task_stage_busy_ratio", "gauge",
              "Share of a running task's wall time each stage of its pipeline was busy "
              "(wall-equivalent: all workers busy is 1), from its start until now.");
  for (const TaskInfo* t : running) {
    for (const auto& [stage, v] : t->bottleneck["stages"].items()) {
      if (!v.contains("share")) continue;  // source reads: reads in flight, not a share
      WriteSample(out, "cairn_task_stage_busy_ratio",
                  fmt::format("{},stage=\"{}\"", labels(*t), EscapeLabel(stage)),
                  v["share"].get<double>());
    }
  }
  WriteFamily(out, "cairn_task_cpu_ratio", "gauge",
              "The server's CPU time over wall time times its cores, since the running task "
              "started.");
  for (const TaskInfo* t : running) {
    WriteSample(out, "cairn_task_cpu_ratio", labels(*t),
                t->bottleneck["cpu"]["share"].get<double>());
  }
  WriteFamily(out, "cairn_task_bottleneck", "gauge",
              "1 for the stage that limits a running task so far (its bottleneck line).");
  for (const TaskInfo* t : running) {
    WriteSample(out, "cairn_task_bottleneck",
                fmt::format("{},stage=\"{}\"", labels(*t),
                            EscapeLabel(t->bottleneck["stage"].get<std::string>())),
                1.0);
  }
}

}  // namespace

std::string RenderMetrics(const ServerMetrics& metrics, const StoreFigures* stores,
                          const ScrapeInputs& in) {
  std::string out;
  Single(&out, "cairn_up_seconds", "gauge", "Seconds since the server started.",
         metrics.UptimeSeconds());
  metrics.Write(&out);
  const net::ServerStats& h = in.http;
  Single(&out, "cairn_http_connections_accepted_total", "counter", "TLS connections accepted.",
         h.connections_accepted);
  Single(&out, "cairn_http_connections_refused_total", "counter",
         "Connections refused: over max_connections or the per-address limit.",
         h.connections_refused);
  Single(&out, "cairn_http_connections_evicted_total", "counter",
         "Unauthenticated connections closed to make room.", h.connections_evicted);
  Single(&out, "cairn_http_connections_open", "gauge", "Connections open now.",
         h.connections_open);
  Single(&out, "cairn_http_requests_refused_total", "counter",
         "Requests refused before their body was read (bad token, role, rate limits).",
         h.requests_refused);
  Single(&out, "cairn_http_bad_requests_total", "counter",
         "Malformed requests, oversized headers or bodies, and timeouts.", h.bad_requests);
  Single(&out, "cairn_backup_sessions_open", "gauge", "Backup sessions open now.",
         in.open_sessions);
  // Tasks: running ones by kind, and the last finished one of each store
  // and kind (its end time and whether it succeeded).
  std::map<std::string, uint64_t> running{{"verify", 0}, {"gc", 0}};
  std::map<std::pair<std::string, std::string>, const TaskInfo*> last;
  for (const TaskInfo& t : in.tasks) {
    if (t.state == TaskState::kRunning) {
      ++running[t.kind];
      continue;
    }
    const TaskInfo*& l = last[{t.store, t.kind}];
    if (l == nullptr || t.ended > l->ended) l = &t;
  }
  WriteFamily(&out, "cairn_tasks_running", "gauge", "Server tasks running now, by kind.");
  for (const auto& [kind, n] : running) {
    WriteSample(&out, "cairn_tasks_running", fmt::format("kind=\"{}\"", EscapeLabel(kind)), n);
  }
  WriteFamily(&out, "cairn_task_last_end_timestamp_seconds", "gauge",
         "Unix time the last finished task of this store and kind ended.");
  for (const auto& [key, t] : last) {
    WriteSample(&out, "cairn_task_last_end_timestamp_seconds",
         fmt::format("{},kind=\"{}\"", StoreLabel(key.first), EscapeLabel(key.second)), t->ended);
  }
  WriteFamily(&out, "cairn_task_last_success", "gauge",
         "1 when the last finished task of this store and kind succeeded (verify: no damage "
         "found), else 0.");
  for (const auto& [key, t] : last) {
    WriteSample(&out, "cairn_task_last_success",
         fmt::format("{},kind=\"{}\"", StoreLabel(key.first), EscapeLabel(key.second)),
         t->state == TaskState::kOk ? 1.0 : 0.0);
  }
  WriteFamily(&out, "cairn_task_last_problems", "gauge",
         "Problems the last finished verify task of this store found.");
  for (const auto& [key, t] : last) {
    if (key.second != "verify") continue;
    WriteSample(&out, "cairn_task_last_problems", StoreLabel(key.first), t->problems);
  }
  WriteTaskStages(&out, in.tasks);
  if (stores != nullptr) stores->Write(&out);
  return out;
}

}  // namespace cairn::server
