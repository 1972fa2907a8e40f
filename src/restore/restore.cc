#include "restore/restore.h"

#include <fmt/format.h>

namespace cairn::restore {
namespace {

Status RestoreBlob(Env& env, ByteSpan data, const std::string& target, bool overwrite) {
  if (target == "-") {
    CAIRN_ASSIGN_OR_RETURN(auto out, env.OpenStdout());
    return out->Append(data);
  }
  if (env.Stat(target).ok() && !overwrite) {
    return AlreadyExistsError(
        fmt::format("target {} exists; pass --overwrite to write over it", target));
  }
  return WriteFileAtomic(env, target, data);
}

}  // namespace

Result<RestoreReport> RunRestore(const datastore::Datastore& store, const RestoreRequest& request) {
  Env& env = store.env();
  int64_t start = env.NowMonotonicNanos();
  CAIRN_ASSIGN_OR_RETURN(datastore::SnapshotRef snap, store.Resolve(request.snapshot));
  RestoreReport report{snap, request.archive, request.target, {}, 0};
  auto context = [&] {
    return fmt::format("restore {} of {} to {}", request.archive, snap.ToString(), request.target);
  };
  CAIRN_ASSIGN_OR_RETURN(index::Manifest manifest, store.ReadManifest(snap));
  const index::ArchiveEntry* entry = manifest.Find(request.archive);
  if (entry == nullptr) {
    std::string names;
    for (const auto& a : manifest.archives) names += (names.empty() ? "" : ", ") + a.name;
    return NotFoundError(fmt::format("snapshot {} has no archive {} (it has: {})", snap.ToString(),
                                     request.archive, names));
  }
  Status s;
  if (entry->kind == index::ArchiveKind::kImage) {
    auto idx = store.ReadImageIndex(snap, *entry);
    if (!idx.ok()) return idx.status().WithContext(context());
    ImageRestoreOptions options;
    options.overwrite = request.overwrite;
    options.jobs = request.jobs;
    options.cpu_workers = request.cpu_workers;
    store::ChunkSource& source = request.source ? *request.source : store.chunks();
    s = RestoreImage(env, *idx, source, request.target, options, &report.stats);
  } else {
    auto data = store.ReadBlobArchive(snap, *entry);
    if (!data.ok()) return data.status().WithContext(context());
    report.stats.bytes = data->size();
    s = RestoreBlob(env, *data, request.target, request.overwrite);
  }
  if (!s.ok()) return s.WithContext(context());
  report.seconds = static_cast<double>(env.NowMonotonicNanos() - start) / 1e9;
  return report;
}

}  // namespace cairn::restore
