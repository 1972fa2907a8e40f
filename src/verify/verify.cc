#include "verify/verify.h"

#include <algorithm>
#include <atomic>
#include <map>

#include <fmt/format.h>

#include "blob/blob.h"
#include "pipeline/fetch_pipeline.h"

namespace cairn::verify {
namespace {

// One distinct chunk and the archives that use it.
struct ChunkUse {
  crypto::Digest id;
  uint32_t length;
  uint32_t archive;  // index into Collected::archives
};

struct Collected {
  std::vector<std::string> archives;      // "vm/100/… disk0.img"
  std::vector<size_t> archive_snapshot;   // archive → index into snapshots
  std::vector<ChunkUse> uses;
};

void AddProblem(VerifyReport* report, std::string what, const Status& s,
                std::vector<std::string> affected) {
  report->problems.push_back(Problem{std::move(what), std::string(s.message()),
                                     s.code() == StatusCode::kNotFound, std::move(affected)});
}

// Reads the manifest and every index of one snapshot, adding its chunk uses.
void CollectSnapshot(const datastore::Datastore& store, size_t snap_idx, VerifyReport* report,
                     Collected* c) {
  SnapshotResult& result = report->snapshots[snap_idx];
  const datastore::SnapshotRef& snap = result.snapshot;
  auto manifest = store.ReadManifest(snap);
  if (!manifest.ok()) {
    result.ok = false;
    ++result.errors;
    AddProblem(report, "manifest of " + snap.ToString(), manifest.status(), {snap.ToString()});
    return;
  }
  for (const auto& entry : manifest->archives) {
    std::string label = fmt::format("{} {}", snap.ToString(), entry.name);
    if (entry.kind == index::ArchiveKind::kBlob) {
      auto data = store.ReadBlobArchive(snap, entry);
      if (!data.ok()) {
        result.ok = false;
        ++result.errors;
        AddProblem(report, "blob " + entry.name, data.status(), {label});
      }
      continue;
    }
    auto idx = store.ReadImageIndex(snap, entry);
    if (!idx.ok()) {
      result.ok = false;
      ++result.errors;
      AddProblem(report, "index " + entry.FileName(), idx.status(), {label});
      continue;
    }
    uint32_t archive = static_cast<uint32_t>(c->archives.size());
    c->archives.push_back(label);
    c->archive_snapshot.push_back(snap_idx);
    for (size_t i = 0; i < idx->chunk_count(); ++i) {
      c->uses.push_back(ChunkUse{idx->digest(i), idx->ChunkLength(i), archive});
    }
    result.chunks += idx->chunk_count();
  }
}

// Checks one stored chunk: CRC, decompression, SHA-256 against its id, length.
Status CheckStored(const Bytes& stored, const ChunkUse& use, uint64_t* raw_bytes) {
  thread_local Bytes scratch;
  CAIRN_ASSIGN_OR_RETURN(ByteSpan plain, blob::DecodeChunkView(stored, use.id, &scratch));
  *raw_bytes = plain.size();
  if (plain.size() != use.length) {
    return DataLossError(fmt::format("{} bytes, the index needs {}", plain.size(), use.length));
  }
  return Status::Ok();
}

// Reads and checks every distinct chunk once on the fetch pipeline. Damage
// does not stop the run: each item's outcome lands in `results`.
Status CheckChunks(store::ChunkSource& source, const std::vector<ChunkUse>& unique,
                   const VerifyOptions& options, std::vector<Status>* results,
                   VerifyReport* report) {
  auto copts = pipeline::ConcurrencyController::Options::ForJobs(
      options.jobs, source.Traits().initial_reads_in_flight);
  pipeline::ConcurrencyController controller(copts);
  pipeline::FetchPipelineOptions popts;
  popts.controller = &controller;
  popts.max_io_threads = copts.max;
  popts.cpu_workers = options.cpu_workers;
  popts.progress = options.progress;
  if (options.progress != nullptr) {
    uint64_t total = 0;
    for (const ChunkUse& use : unique) total += use.length;
    options.progress->StartPhase("verify", total);
  }
  std::atomic<uint64_t> stored_bytes{0}, raw_bytes{0};
  results->assign(unique.size(), Status::Ok());
  Status s = pipeline::RunFetchPipeline(
      unique.size(),
      [&](size_t k, Bytes* out) -> Status {
        Status read = source.ReadInto(unique[k].id, out);
        if (!read.ok()) {
          (*results)[k] = read;  // recorded, not fatal: the run goes on
          out->clear();
        }
        return Status::Ok();
      },
      [&](size_t k, Bytes& stored) -> Status {
        if (!(*results)[k].ok()) return Status::Ok();
        stored_bytes.fetch_add(stored.size(), std::memory_order_relaxed);
        uint64_t raw = 0;
        (*results)[k] = CheckStored(stored, unique[k], &raw);
        raw_bytes.fetch_add(raw, std::memory_order_relaxed);
        if (options.progress != nullptr) options.progress->Add(unique[k].length);
        return Status::Ok();
      },
      [&](size_t k) { return uint64_t{unique[k].length} * 2; }, popts, nullptr);
  report->stored_bytes = stored_bytes;
  report->raw_bytes = raw_bytes;
  auto summary = controller.summary();
  report->jobs_final = summary.final_limit;
  report->jobs_max = summary.max_limit;
  return s;
}

}  // namespace

Result<VerifyReport> RunVerify(const datastore::Datastore& store, const VerifyOptions& options) {
  Env& env = store.env();
  int64_t start_ns = env.NowMonotonicNanos();
  int64_t start_unix = env.NowUnixSeconds();
  VerifyReport report;
  std::vector<datastore::SnapshotRef> snaps = options.snapshots;
  if (snaps.empty()) {
    CAIRN_ASSIGN_OR_RETURN(snaps, store.ListAllSnapshots());
  }
  for (const auto& s : snaps) report.snapshots.push_back(SnapshotResult{s, true, 0});

  Collected c;
  for (size_t i = 0; i < report.snapshots.size(); ++i) CollectSnapshot(store, i, &report, &c);

  // Sorted by id: each distinct chunk once, and a local store's files are
  // visited in directory order. Keyed by (id, length): an index that uses one
  // id at two lengths is damaged, and only checking each length catches it.
  auto same = [](const ChunkUse& a, const ChunkUse& b) {
    return a.id == b.id && a.length == b.length;
  };
  std::sort(c.uses.begin(), c.uses.end(), [](const ChunkUse& a, const ChunkUse& b) {
    return a.id != b.id ? a.id < b.id : a.length < b.length;
  });
  std::vector<ChunkUse> unique;
  for (size_t i = 0; i < c.uses.size(); ++i) {
    if (i == 0 || !same(c.uses[i], c.uses[i - 1])) unique.push_back(c.uses[i]);
  }
  report.unique_chunks = unique.size();
  std::vector<Status> results;
  store::ChunkSource& source = options.source ? *options.source : store.chunks();
  CAIRN_RETURN_IF_ERROR(CheckChunks(source, unique, options, &results, &report));

  for (size_t i = 0, u = 0; i < c.uses.size(); ++u) {
    size_t j = i;
    while (j < c.uses.size() && same(c.uses[j], c.uses[i])) ++j;
    Status s = results[u];
    if (!s.ok()) {
      std::vector<std::string> affected;
      std::vector<size_t> snaps;
      for (size_t k = i; k < j; ++k) {
        affected.push_back(c.archives[c.uses[k].archive]);
        snaps.push_back(c.archive_snapshot[c.uses[k].archive]);
      }
      std::sort(affected.begin(), affected.end());
      affected.erase(std::unique(affected.begin(), affected.end()), affected.end());
      std::sort(snaps.begin(), snaps.end());
      snaps.erase(std::unique(snaps.begin(), snaps.end()), snaps.end());
      for (size_t snap : snaps) {
        report.snapshots[snap].ok = false;
        ++report.snapshots[snap].errors;
      }
      if (s.code() == StatusCode::kDataLoss && options.quarantine && options.source == nullptr) {
        auto moved = store.chunks().Quarantine(c.uses[i].id);
        if (moved.ok()) {
          s = Status(s.code(), fmt::format("{}; quarantined as {}", s.message(), *moved));
        } else {
          options.logger->Warn("could not quarantine chunk {}: {}",
                               crypto::DigestHex(c.uses[i].id), moved.status().ToString());
        }
      }
      AddProblem(&report, "chunk " + crypto::DigestHex(c.uses[i].id), s, std::move(affected));
    }
    i = j;
  }

  if (options.record_state) {
    for (const auto& r : report.snapshots) {
      datastore::VerifyState state{
          r.ok ? datastore::VerifyOutcome::kOk : datastore::VerifyOutcome::kFailed, start_unix,
          r.errors};
      Status s = store.WriteVerifyState(r.snapshot, state);
      if (!s.ok()) {
        options.logger->Warn("could not record verify state of {}: {}", r.snapshot.ToString(),
                             s.ToString());
      }
    }
  }
  report.seconds = static_cast<double>(env.NowMonotonicNanos() - start_ns) / 1e9;
  return report;
}

}  // namespace cairn::verify
