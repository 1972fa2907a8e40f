#include "restore/restore.h"

#include <fmt/format.h>

namespace cairn::restore {
namespace {

Status RestoreBlob(Env& env, ByteSpan data, const std::string& target,
                   const RestoreRequest& request) {
  if (request.rehearse) return Status::Ok();  // read and checked: that is the rehearsal
  if (target == "-") {
    CAIRN_ASSIGN_OR_RETURN(auto out, env.OpenStdout());
    return out->Append(data);
  }
  if (env.Stat(target).ok() && !request.overwrite && !request.in_place) {
    return AlreadyExistsError(
        fmt::format("target {} exists; pass --overwrite to write over it", target));
  }
  return WriteFileAtomic(env, target, data);
}

}  // namespace

std::string AllTargetPath(const std::string& dir, const index::ArchiveEntry& entry) {
  std::string name = entry.name;
  constexpr std::string_view kBlob = ".blob";
  if (entry.kind == index::ArchiveKind::kBlob && name.size() > kBlob.size() &&
      name.ends_with(kBlob)) {
    name.resize(name.size() - kBlob.size());
  }
  return JoinPath(dir, name);
}

Result<RestoreReport> RunRestore(const datastore::Datastore& store, const RestoreRequest& request) {
  Env& env = store.env();
  const int64_t start = env.NowMonotonicNanos();
  auto elapsed = [&] { return static_cast<double>(env.NowMonotonicNanos() - start) / 1e9; };
  CAIRN_ASSIGN_OR_RETURN(datastore::SnapshotRef snap, store.Resolve(request.snapshot));
  RestoreReport report{snap, {}, 0};
  CAIRN_ASSIGN_OR_RETURN(index::Manifest manifest, store.ReadManifest(snap));

  // What to restore where.
  std::vector<const index::ArchiveEntry*> entries;
  if (request.all) {
    for (const auto& a : manifest.archives) entries.push_back(&a);
  } else {
    const index::ArchiveEntry* entry = manifest.Find(request.archive);
    if (entry == nullptr) {
      std::string names;
      for (const auto& a : manifest.archives) names += (names.empty() ? "" : ", ") + a.name;
      return NotFoundError(fmt::format("snapshot {} has no archive {} (it has: {})",
                                       snap.ToString(), request.archive, names));
    }
    entries.push_back(entry);
  }
  if (request.all && !request.rehearse) {
    if (request.target == "-") {
      return InvalidArgumentError("--all restores into a directory, not to standard output");
    }
    auto info = env.Stat(request.target);
    if (info.ok() && !info->is_dir) {
      return InvalidArgumentError(
          fmt::format("--all wants a directory; {} is not one", request.target));
    }
    if (!info.ok()) CAIRN_RETURN_IF_ERROR(CreateDirs(env, request.target));
  }
  for (const index::ArchiveEntry* e : entries) {
    ArchiveResult r;
    r.archive = e->name;
    r.kind = e->kind;
    r.target = request.all ? AllTargetPath(request.target, *e) : request.target;
    report.archives.push_back(std::move(r));
  }
  auto context = [&](const ArchiveResult& r) {
    return fmt::format("restore {} of {} to {}", r.archive, snap.ToString(), r.target);
  };

  // Blobs are small: read, check and write them first, one by one.
  std::vector<index::FixedIndex> indexes;
  indexes.reserve(entries.size());
  std::vector<ImageTarget> targets;
  std::vector<size_t> image_results;  // report.archives position of targets[i]
  for (size_t i = 0; i < entries.size(); ++i) {
    ArchiveResult& r = report.archives[i];
    if (entries[i]->kind == index::ArchiveKind::kImage) {
      auto idx = store.ReadImageIndex(snap, *entries[i]);
      if (!idx.ok()) return idx.status().WithContext(context(r));
      indexes.push_back(std::move(*idx));
      image_results.push_back(i);
      continue;
    }
    auto data = store.ReadBlobArchive(snap, *entries[i]);
    if (!data.ok()) return data.status().WithContext(context(r));
    Status s = RestoreBlob(env, *data, r.target, request);
    if (!s.ok()) return s.WithContext(context(r));
    r.stats.bytes = data->size();
    r.stats.written_bytes = request.rehearse ? 0 : data->size();
    r.stats.seconds = elapsed();
  }
  for (size_t k = 0; k < image_results.size(); ++k) {
    targets.push_back(ImageTarget{&indexes[k], report.archives[image_results[k]].target});
  }

  if (!targets.empty()) {
    ImageRestoreOptions options;
    options.overwrite = request.overwrite;
    options.in_place = request.in_place;
    options.rehearse = request.rehearse;
    options.jobs = request.jobs;
    options.cpu_workers = request.cpu_workers;
    options.max_bytes_in_flight = request.max_bytes_in_flight;
    options.progress = request.progress;
    store::ChunkSource& source = request.source ? *request.source : store.chunks();
    std::vector<ImageRestoreStats> stats;
    Status s = RestoreImages(env, targets, source, options, &stats);
    if (!s.ok()) {
      if (targets.size() == 1) return s.WithContext(context(report.archives[image_results[0]]));
      return s.WithContext(fmt::format("restore {} to {}", snap.ToString(), request.target));
    }
    for (size_t k = 0; k < targets.size(); ++k) {
      ArchiveResult& r = report.archives[image_results[k]];
      r.stats = stats[k];
    }
  }
  report.seconds = elapsed();
  return report;
}

}  // namespace cairn::restore
