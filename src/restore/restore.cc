#include "restore/restore.h"

#include <fmt/format.h>

#include <algorithm>

namespace cairn::restore {
namespace {

// Checks that a blob may be written to `target` (before any image work).
Status CheckBlobTarget(Env& env, const std::string& target, const RestoreRequest& request) {
  if (request.rehearse || target == "-") return Status::Ok();
  auto info = env.Stat(target);
  if (!info.ok() && info.status().code() != StatusCode::kNotFound) return info.status();
  if (!info.ok() && request.in_place) {
    return NotFoundError(fmt::format(
        "target {} does not exist; --in-place rewrites an existing file (drop it to restore "
        "to a new one)",
        target));
  }
  if (info.ok() && !request.overwrite && !request.in_place) {
    return AlreadyExistsError(
        fmt::format("target {} exists; pass --overwrite to write over it", target));
  }
  if (info.ok() && info->is_dir) {
    return InvalidArgumentError(fmt::format("target {} is a directory", target));
  }
  return Status::Ok();
}

// Checks a tree's target before any work: a tree restores into a new or
// empty directory only (RestoreTree checks again when it opens it).
Status CheckTreeTarget(Env& env, const std::string& target, const RestoreRequest& request) {
  if (request.rehearse) return Status::Ok();
  if (target == "-") {
    return InvalidArgumentError(
        "a tree archive restores into a directory, not to standard output (use `cairn cat` for "
        "one file)");
  }
  if (request.overwrite || request.in_place) {
    return InvalidArgumentError(
        "--overwrite and --in-place are for images and blobs; a tree restores into a new or "
        "empty directory");
  }
  if (target.empty()) return InvalidArgumentError("name the directory to restore the tree into");
  auto info = env.Stat(target);
  if (!info.ok()) {
    return info.status().code() == StatusCode::kNotFound ? Status::Ok() : info.status();
  }
  if (!info->is_dir) {
    return AlreadyExistsError(fmt::format(
        "target {} exists and is not a directory; a tree restores into a new or empty directory",
        target));
  }
  CAIRN_ASSIGN_OR_RETURN(std::vector<std::string> names, env.ListDir(target));
  if (!names.empty()) {
    return AlreadyExistsError(fmt::format(
        "target {} is not empty; a tree restores into a new or empty directory only", target));
  }
  return Status::Ok();
}

void CopyTreeStats(ArchiveResult* r) {
  r->stats.bytes = r->tree.bytes;
  r->stats.fetched_bytes = r->tree.fetched_bytes;
  r->stats.chunks_fetched = r->tree.chunks;
  r->stats.zero_bytes = r->tree.zero_bytes;
  r->stats.seconds = r->tree.seconds;
  r->stats.jobs_final = r->tree.jobs_final;
}

Status WriteBlob(Env& env, ByteSpan data, const std::string& target) {
  if (target == "-") {
    CAIRN_ASSIGN_OR_RETURN(auto out, env.OpenStdout());
    return out->Append(data);
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
  constexpr std::string_view kTree = ".tree";
  if (entry.kind == index::ArchiveKind::kTree && name.size() > kTree.size() &&
      name.ends_with(kTree)) {
    name.resize(name.size() - kTree.size());
  }
  return JoinPath(dir, name);
}

Result<RestoreReport> RunRestore(const datastore::Datastore& store, const RestoreRequest& request) {
  Env& env = store.env();
  const int64_t start = env.NowMonotonicNanos();
  auto elapsed = [&] { return static_cast<double>(env.NowMonotonicNanos() - start) / 1e9; };
  CAIRN_ASSIGN_OR_RETURN(datastore::SnapshotRef snap, store.Resolve(request.snapshot));
  // Held to the end: forget and prune leave a snapshot being restored alone.
  CAIRN_ASSIGN_OR_RETURN(auto snapshot_lock, store.LockSnapshotShared(snap));
  RestoreReport report;
  report.snapshot = snap;
  CAIRN_ASSIGN_OR_RETURN(index::Manifest manifest, store.ReadManifest(snap));
  CAIRN_ASSIGN_OR_RETURN(const crypto::CryptConfig* crypt, store.CryptFor(manifest));
  report.encrypted = crypt != nullptr;

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
  if (!request.includes.empty() &&
      std::none_of(entries.begin(), entries.end(), [](const index::ArchiveEntry* e) {
        return e->kind == index::ArchiveKind::kTree;
      })) {
    return InvalidArgumentError(
        fmt::format("--include selects entries of tree archives; {} has none to restore",
                    request.all ? "snapshot " + snap.ToString() : "archive " + request.archive));
  }
  bool created_dir = false;
  if (request.all && !request.target.empty()) {
    if (request.target == "-") {
      return InvalidArgumentError("--all restores into a directory, not to standard output");
    }
    auto info = env.Stat(request.target);
    if (info.ok() && !info->is_dir) {
      return InvalidArgumentError(
          fmt::format("--all wants a directory; {} is not one", request.target));
    }
    if (!info.ok() && !request.rehearse) {
      CAIRN_RETURN_IF_ERROR(CreateDirs(env, request.target));
      created_dir = true;
    }
  }
  for (const index::ArchiveEntry* e : entries) {
    ArchiveResult r;
    r.archive = e->name;
    r.kind = e->kind;
    r.target = !request.all             ? request.target
               : request.target.empty() ? std::string()
                                        : AllTargetPath(request.target, *e);
    report.archives.push_back(std::move(r));
  }
  auto context = [&](const ArchiveResult& r) {
    return fmt::format("restore {} of {} to {}", r.archive, snap.ToString(), r.target);
  };

  // A failed restore leaves no new file: nothing new stays behind, not
  // even the directory --all created.
  auto fail = [&](Status s) {
    if (created_dir) env.RemoveDir(request.target).IgnoreError();  // only when empty
    return s;
  };
  // Blobs are small: read and check them first, write them once the images
  // are done, so a failed image leaves no blob behind either.
  std::vector<index::FixedIndex> indexes;
  indexes.reserve(entries.size());
  std::vector<ImageTarget> targets;
  std::vector<size_t> image_results;  // report.archives position of targets[i]
  std::vector<std::pair<size_t, Bytes>> blobs;
  std::vector<size_t> trees;  // report.archives positions
  for (size_t i = 0; i < entries.size(); ++i) {
    ArchiveResult& r = report.archives[i];
    if (entries[i]->kind == index::ArchiveKind::kTree) {
      Status s = CheckTreeTarget(env, r.target, request);
      if (!s.ok()) return fail(s.WithContext(context(r)));
      trees.push_back(i);
      continue;
    }
    if (entries[i]->kind == index::ArchiveKind::kImage) {
      auto idx = store.ReadImageIndex(snap, *entries[i]);
      if (!idx.ok()) return fail(idx.status().WithContext(context(r)));
      indexes.push_back(std::move(*idx));
      image_results.push_back(i);
      continue;
    }
    auto data = store.ReadBlobArchive(snap, *entries[i], crypt);
    if (!data.ok()) return fail(data.status().WithContext(context(r)));
    Status s = CheckBlobTarget(env, r.target, request);
    if (!s.ok()) return fail(s.WithContext(context(r)));
    r.stats.bytes = data->size();
    blobs.emplace_back(i, std::move(*data));
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
    options.crypt = crypt;
    options.gate = request.gate;
    store::ChunkSource& source = request.source ? *request.source : store.source();
    std::vector<ImageRestoreStats> stats;
    Env& target_env = request.target_env != nullptr ? *request.target_env : env;
    Status s = RestoreImages(target_env, targets, source, options, &stats);
    if (!s.ok()) {
      if (targets.size() == 1 && !request.all) {
        return fail(s.WithContext(context(report.archives[image_results[0]])));
      }
      return fail(s.WithContext(fmt::format("restore {} to {}", snap.ToString(), request.target)));
    }
    for (size_t k = 0; k < targets.size(); ++k) {
      report.archives[image_results[k]].stats = stats[k];
    }
  }
  for (size_t i : trees) {
    ArchiveResult& r = report.archives[i];
    TreeRestoreOptions options;
    options.includes = request.includes;
    options.rehearse = request.rehearse;
    options.jobs = request.jobs;
    options.cpu_workers = request.cpu_workers;
    options.max_bytes_in_flight = request.max_bytes_in_flight;
    options.progress = request.progress;
    store::ChunkSource& source = request.source ? *request.source : store.source();
    // RestoreTree's errors name the snapshot, archive and target already.
    auto stats = RestoreTree(store, source, snap, *entries[i], r.target, options);
    if (!stats.ok()) return fail(stats.status());
    r.tree = std::move(*stats);
    CopyTreeStats(&r);
  }
  for (auto& [i, data] : blobs) {
    ArchiveResult& r = report.archives[i];
    if (!request.rehearse) {
      Status s = WriteBlob(env, data, r.target);
      if (!s.ok()) return s.WithContext(context(r));
      r.stats.written_bytes = data.size();
    }
    r.stats.seconds = elapsed();
  }
  report.seconds = elapsed();
  return report;
}

}  // namespace cairn::restore
