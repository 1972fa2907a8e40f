#include "backup/backup.h"

#include <fmt/format.h>

#include <chrono>
#include <thread>

#include "backup/dedup_base.h"
#include "blob/blob.h"
#include "datastore/snapshot_writer.h"

namespace cairn::backup {
namespace {

double SecondsSince(Env& env, int64_t start_ns) {
  return static_cast<double>(env.NowMonotonicNanos() - start_ns) / 1e9;
}

// The snapshot time: as given, or now; when now is not later than the
// group's latest snapshot (two backups in one second), waits for the clock.
Result<int64_t> PickTime(const datastore::Datastore& store, const BackupOptions& options) {
  if (options.time) return *options.time;
  Env& env = store.env();
  CAIRN_ASSIGN_OR_RETURN(auto snaps, store.ListSnapshots(options.group));
  int64_t now = env.NowUnixSeconds();
  if (!snaps.empty() && snaps.back().time >= now && snaps.back().time - now < 2) {
    std::this_thread::sleep_for(std::chrono::seconds(snaps.back().time - now + 1));
    now = env.NowUnixSeconds();
  }
  return now;
}

Status BackupOneImage(const datastore::Datastore& store, datastore::SnapshotWriter& writer,
                      const std::optional<DedupBase>& base, const ArchiveSpec& spec,
                      const BackupOptions& options, ArchiveReport* report) {
  Env& env = store.env();
  CAIRN_ASSIGN_OR_RETURN(FileInfo info, env.Stat(spec.source));
  if (!info.is_regular && !info.is_block_device) {
    return InvalidArgumentError(
        fmt::format("{} is neither a regular file nor a block device", spec.source));
  }
  CAIRN_ASSIGN_OR_RETURN(auto source, env.OpenReadable(spec.source));
  CAIRN_ASSIGN_OR_RETURN(uint64_t size, source->Size());
  DigestSet known;
  report->had_base = base && base->AddImageIds(store, spec.name, *options.logger, &known);
  ImageBackupOptions image = options.image;
  image.known = &known;
  image.crypt = store.key();
  if (image.progress != nullptr) image.progress->StartPhase("backup", size);
  CAIRN_ASSIGN_OR_RETURN(index::FixedIndex idx,
                         BackupImage(*source, size, store.sink(), image, &report->stats));
  return writer.AddImage(spec.name, idx);
}

Status BackupOneTree(const datastore::Datastore& store, datastore::SnapshotWriter& writer,
                     const std::optional<DedupBase>& base, const ArchiveSpec& spec,
                     const BackupOptions& options, ArchiveReport* report) {
  TreeBackupOptions tree = options.tree;
  tree.logger = options.logger;
  tree.progress = options.image.progress;
  if (tree.workers == 0) tree.workers = options.image.workers;
  CAIRN_RETURN_IF_ERROR(
      BackupTree(store, writer, base ? &*base : nullptr, spec.name, spec.source, tree,
                 &report->tree));
  report->had_base = report->tree.reused_files > 0;
  report->stats.bytes = report->tree.bytes;
  report->stats.chunks = report->tree.chunks;
  report->stats.new_chunks = report->tree.new_chunks;
  report->stats.new_bytes = report->tree.new_bytes;
  report->stats.stored_bytes = report->tree.stored_bytes;
  return Status::Ok();
}

Status BackupOneBlob(const datastore::Datastore& store, datastore::SnapshotWriter& writer,
                     const ArchiveSpec& spec, ArchiveReport* report) {
  auto data = ReadWholeFile(store.env(), spec.source, blob::kMaxRawSize);
  if (!data.ok()) {
    if (data.status().code() == StatusCode::kInvalidArgument) {
      return InvalidArgumentError(
          fmt::format("{}; .blob archives hold small files whole, use NAME.img for large ones",
                      data.status().message()));
    }
    return data.status();
  }
  report->stats.bytes = data->size();
  report->stats.new_bytes = data->size();
  return writer.AddBlob(spec.name, *data);
}

}  // namespace

Result<ArchiveSpec> ParseArchiveSpec(std::string_view text) {
  size_t eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == text.size()) {
    return InvalidArgumentError(
        fmt::format("archive '{}' must be NAME=SOURCE, like disk0.img=/dev/sdb, root.tree=/srv or "
                    "vm.conf.blob=/etc/vm.conf",
                    text));
  }
  ArchiveSpec spec{std::string(text.substr(0, eq)), std::string(text.substr(eq + 1))};
  CAIRN_RETURN_IF_ERROR(index::ParseArchiveName(spec.name).status());
  return spec;
}

Result<BackupReport> RunBackup(const datastore::Datastore& store, const BackupOptions& options) {
  Env& env = store.env();
  if (options.archives.empty())
    return InvalidArgumentError("nothing to back up: no archives given");
  int64_t start = env.NowMonotonicNanos();
  CAIRN_ASSIGN_OR_RETURN(int64_t time, PickTime(store, options));
  datastore::SnapshotRef snap{options.group, time};
  CAIRN_ASSIGN_OR_RETURN(auto writer, datastore::SnapshotWriter::Begin(store, snap));

  // Under the group lock no snapshot is added to the group, but forget and
  // prune may remove one: the base is locked (shared) for the whole run, so
  // the chunks reused from it without being read stay referenced, and gc
  // keeps them (docs/ARCHITECTURE.md, "Garbage collection").
  std::optional<datastore::SnapshotRef> prev;
  std::unique_ptr<FileLock> base_lock;
  CAIRN_ASSIGN_OR_RETURN(auto snaps, store.ListSnapshots(options.group));
  while (!snaps.empty()) {
    auto lock = store.LockSnapshotShared(snaps.back());
    if (lock.ok()) {
      prev = snaps.back();
      base_lock = std::move(*lock);
      break;
    }
    StatusCode code = lock.status().code();
    if (code != StatusCode::kNotFound && code != StatusCode::kUnavailable) return lock.status();
    snaps.pop_back();  // being forgotten: the one before is the base
  }
  // Its manifest and verify state are read once, here, for every archive.
  std::optional<DedupBase> base;
  if (prev) {
    auto manifest = store.ReadManifest(*prev);
    if (DedupBase::SameKey(store, *prev, manifest, *options.logger)) {
      CAIRN_RETURN_IF_ERROR(writer->UseBase(*prev));
      base = DedupBase::Open(store, *prev, std::move(manifest), *options.logger);
    }
  }

  BackupReport report;
  report.snapshot = snap;
  for (const auto& spec : options.archives) {
    ArchiveReport ar;
    ar.name = spec.name;
    ar.source = spec.source;
    CAIRN_ASSIGN_OR_RETURN(ar.kind, index::ParseArchiveName(spec.name));
    int64_t t0 = env.NowMonotonicNanos();
    Status s;
    switch (ar.kind) {
      case index::ArchiveKind::kImage:
        s = BackupOneImage(store, *writer, base, spec, options, &ar);
        break;
      case index::ArchiveKind::kTree:
        s = BackupOneTree(store, *writer, base, spec, options, &ar);
        break;
      case index::ArchiveKind::kBlob:
        s = BackupOneBlob(store, *writer, spec, &ar);
        break;
    }
    if (!s.ok()) return s.WithContext(fmt::format("archive {} from {}", spec.name, spec.source));
    ar.seconds = SecondsSince(env, t0);
    if (options.on_archive_done) options.on_archive_done(ar);
    report.archives.push_back(std::move(ar));
  }
  CAIRN_RETURN_IF_ERROR(writer->Commit(options.created_by));
  report.seconds = SecondsSince(env, start);
  return report;
}

}  // namespace cairn::backup
