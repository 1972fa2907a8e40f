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

double SecondsSince(Env& env, int64_t start_ns) {
  return static_cast<double>(env.NowMonotonicNanos() - start_ns) / 1e9;
}

// One restore: what goes where (`entries` and report->archives, one each,
// in order), and what was read for it.
struct ArchivePlan {
  ArchivePlan(const datastore::Datastore& s, const RestoreRequest& r,
              const datastore::SnapshotRef& snapshot, RestoreReport* rep)
      : store(s), request(r), snap(snapshot), report(rep) {}

  const datastore::Datastore& store;
  const RestoreRequest& request;
  const datastore::SnapshotRef& snap;
  RestoreReport* report;
  const crypto::CryptConfig* crypt = nullptr;
  std::vector<const index::ArchiveEntry*> entries;
  bool created_dir = false;  // by this restore (--all): removed again on failure
  std::vector<index::FixedIndex> indexes;   // of the image archives
  std::vector<size_t> image_results;        // report->archives position of indexes[k]
  std::vector<size_t> trees;                // report->archives positions
  std::vector<std::pair<size_t, Bytes>> blobs;  // read and checked, written last

  store::ChunkSource& source() const {
    return request.source ? *request.source : store.source();
  }
  std::string Context(const ArchiveResult& r) const {
    return fmt::format("restore {} of {} to {}", r.archive, snap.ToString(), r.target);
  }
};

// What image and tree restore options share, from the request.
template <typename Options>
Options PipelineOptionsOf(const RestoreRequest& request) {
  Options options;
  options.rehearse = request.rehearse;
  options.jobs = request.jobs;
  options.cpu_workers = request.cpu_workers;
  options.max_bytes_in_flight = request.max_bytes_in_flight;
  options.progress = request.progress;
  return options;
}

// The archives the request names: all of them, or the one it names.
Result<std::vector<const index::ArchiveEntry*>> SelectArchives(const index::Manifest& manifest,
                                                               const RestoreRequest& request,
                                                               const datastore::SnapshotRef& snap) {
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
  return entries;
}

// --all restores into a directory: an existing one, or one made now (true).
Result<bool> PrepareAllTarget(Env& env, const RestoreRequest& request) {
  if (!request.all || request.target.empty()) return false;
  if (request.target == "-") {
    return InvalidArgumentError("--all restores into a directory, not to standard output");
  }
  auto info = env.Stat(request.target);
  if (info.ok() && !info->is_dir) {
    return InvalidArgumentError(
        fmt::format("--all wants a directory; {} is not one", request.target));
  }
  if (info.ok() || request.rehearse) return false;
  CAIRN_RETURN_IF_ERROR(CreateDirs(env, request.target));
  return true;
}

// Names each archive's target in the report, checks the targets, and reads
// the image indexes and the blobs (small: read and checked whole).
Status ReadArchives(ArchivePlan* plan) {
  const RestoreRequest& request = plan->request;
  Env& env = plan->store.env();
  for (const index::ArchiveEntry* e : plan->entries) {
    ArchiveResult r;
    r.archive = e->name;
    r.kind = e->kind;
    r.target = !request.all             ? request.target
               : request.target.empty() ? std::string()
                                        : AllTargetPath(request.target, *e);
    plan->report->archives.push_back(std::move(r));
  }
  plan->indexes.reserve(plan->entries.size());
  for (size_t i = 0; i < plan->entries.size(); ++i) {
    const index::ArchiveEntry& entry = *plan->entries[i];
    ArchiveResult& r = plan->report->archives[i];
    if (entry.kind == index::ArchiveKind::kTree) {
      Status s = CheckTreeTarget(env, r.target, request);
      if (!s.ok()) return s.WithContext(plan->Context(r));
      plan->trees.push_back(i);
    } else if (entry.kind == index::ArchiveKind::kImage) {
      auto idx = plan->store.ReadImageIndex(plan->snap, entry);
      if (!idx.ok()) return idx.status().WithContext(plan->Context(r));
      plan->indexes.push_back(std::move(*idx));
      plan->image_results.push_back(i);
    } else {
      auto data = plan->store.ReadBlobArchive(plan->snap, entry, plan->crypt);
      if (!data.ok()) return data.status().WithContext(plan->Context(r));
      Status s = CheckBlobTarget(env, r.target, request);
      if (!s.ok()) return s.WithContext(plan->Context(r));
      r.stats.bytes = data->size();
      plan->blobs.emplace_back(i, std::move(*data));
    }
  }
  return Status::Ok();
}

// Every image archive in one pipeline (restore/image_restore.h).
Status RestoreImageArchives(ArchivePlan* plan) {
  if (plan->indexes.empty()) return Status::Ok();
  const RestoreRequest& request = plan->request;
  std::vector<ImageTarget> targets;
  for (size_t k = 0; k < plan->image_results.size(); ++k) {
    targets.push_back(
        ImageTarget{&plan->indexes[k], plan->report->archives[plan->image_results[k]].target});
  }
  auto options = PipelineOptionsOf<ImageRestoreOptions>(request);
  options.overwrite = request.overwrite;
  options.in_place = request.in_place;
  options.crypt = plan->crypt;
  options.gate = request.gate;
  std::vector<ImageRestoreStats> stats;
  Env& target_env = request.target_env != nullptr ? *request.target_env : plan->store.env();
  Status s = RestoreImages(target_env, targets, plan->source(), options, &stats);
  if (!s.ok()) {
    if (targets.size() == 1 && !request.all) {
      return s.WithContext(plan->Context(plan->report->archives[plan->image_results[0]]));
    }
    return s.WithContext(fmt::format("restore {} to {}", plan->snap.ToString(), request.target));
  }
  for (size_t k = 0; k < targets.size(); ++k) {
    plan->report->archives[plan->image_results[k]].stats = stats[k];
  }
  return Status::Ok();
}

// Each tree archive (restore/tree_restore.h).
Status RestoreTreeArchives(ArchivePlan* plan) {
  const RestoreRequest& request = plan->request;
  for (size_t i : plan->trees) {
    ArchiveResult& r = plan->report->archives[i];
    auto options = PipelineOptionsOf<TreeRestoreOptions>(request);
    options.includes = request.includes;
    options.env = request.target_env;
    // RestoreTree's errors name the snapshot, archive and target already.
    CAIRN_ASSIGN_OR_RETURN(r.tree, RestoreTree(plan->store, plan->source(), plan->snap,
                                               *plan->entries[i], r.target, options));
    CopyTreeStats(&r);
  }
  return Status::Ok();
}

// The blobs, once everything else is restored.
Status WriteBlobs(ArchivePlan* plan, int64_t start_ns) {
  Env& env = plan->store.env();
  for (auto& [i, data] : plan->blobs) {
    ArchiveResult& r = plan->report->archives[i];
    if (!plan->request.rehearse) {
      Status s = WriteBlob(env, data, r.target);
      if (!s.ok()) return s.WithContext(plan->Context(r));
      r.stats.written_bytes = data.size();
    }
    r.stats.seconds = SecondsSince(env, start_ns);
  }
  return Status::Ok();
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
  CAIRN_ASSIGN_OR_RETURN(datastore::SnapshotRef snap, store.Resolve(request.snapshot));
  // Held to the end: forget and prune leave a snapshot being restored alone.
  CAIRN_ASSIGN_OR_RETURN(auto snapshot_lock, store.LockSnapshotShared(snap));
  RestoreReport report;
  report.snapshot = snap;
  CAIRN_ASSIGN_OR_RETURN(index::Manifest manifest, store.ReadManifest(snap));

  // Plan: what goes where, every index and blob read and every target
  // checked before anything is written.
  ArchivePlan plan(store, request, snap, &report);
  CAIRN_ASSIGN_OR_RETURN(plan.crypt, store.CryptFor(manifest));
  report.encrypted = plan.crypt != nullptr;
  CAIRN_ASSIGN_OR_RETURN(plan.entries, SelectArchives(manifest, request, snap));
  CAIRN_ASSIGN_OR_RETURN(plan.created_dir, PrepareAllTarget(env, request));
  // Execute. A failed restore leaves no new file: nothing new stays behind,
  // not even the directory --all created. Blobs are written last, so a
  // failed image or tree leaves no blob behind either.
  Status s = ReadArchives(&plan);
  if (s.ok()) s = RestoreImageArchives(&plan);
  if (s.ok()) s = RestoreTreeArchives(&plan);
  if (!s.ok()) {
    if (plan.created_dir) env.RemoveDir(request.target).IgnoreError();  // only when empty
    return s;
  }
  CAIRN_RETURN_IF_ERROR(WriteBlobs(&plan, start));
  // Report.
  report.seconds = SecondsSince(env, start);
  return report;
}

}  // namespace cairn::restore
