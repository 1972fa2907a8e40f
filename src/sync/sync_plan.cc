// Which snapshots a sync covers, and one snapshot read as stored.
#include "sync/sync_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "blob/blob.h"
#include "index/dynamic_index.h"
#include "index/fixed_index.h"

namespace cairn::sync::detail {
namespace {

using datastore::GroupRef;
using datastore::SnapshotRef;

// Index files are 32 bytes per chunk: 1 GiB covers far more than any image.
constexpr uint64_t kMaxIndexFile = uint64_t{1} << 30;
constexpr uint64_t kMaxStoredFile = blob::kHeaderSize + (uint64_t{1} << 26);

bool InNamespace(const std::string& ns, const std::string& scope) {
  return scope.empty() || ns == scope || ns.starts_with(scope + "/");
}

// Levels of `ns` below `scope` (which holds it): "a/b/c" below "a" is 2.
int DepthBelow(const std::string& ns, const std::string& scope) {
  if (ns.size() == scope.size()) return 0;
  std::string_view rest = std::string_view(ns).substr(scope.empty() ? 0 : scope.size() + 1);
  return 1 + static_cast<int>(std::count(rest.begin(), rest.end(), '/'));
}

auto GroupKey(const GroupRef& g) { return std::tie(g.ns, g.type, g.id); }

struct Named {
  std::vector<GroupRef> groups;
  std::vector<SnapshotRef> snapshots;
  bool Any() const { return !groups.empty() || !snapshots.empty(); }
  bool Covers(const SnapshotRef& s) const {
    return std::find(groups.begin(), groups.end(), s.group) != groups.end() ||
           std::find(snapshots.begin(), snapshots.end(), s) != snapshots.end();
  }
};

Result<Named> ParseSelection(const datastore::Datastore& src, const SyncOptions& options,
                             const std::vector<SnapshotRef>& all) {
  Named named;
  for (const std::string& arg : options.selection) {
    if (std::count(arg.begin(), arg.end(), '/') == 1) {
      CAIRN_ASSIGN_OR_RETURN(GroupRef g, datastore::ParseGroup(options.ns, arg));
      bool any = std::any_of(all.begin(), all.end(), [&](const auto& s) { return s.group == g; });
      if (!any) {
        return NotFoundError(
            fmt::format("group {} has no snapshots in {}", arg, src.DisplayName()));
      }
      named.groups.push_back(std::move(g));
    } else {
      CAIRN_ASSIGN_OR_RETURN(auto spec, datastore::ParseSnapshotSpec(options.ns, arg));
      auto snap = src.Resolve(spec);
      if (!snap.ok()) return snap.status().WithContext(fmt::format("in {}", src.DisplayName()));
      named.snapshots.push_back(*snap);
    }
  }
  return named;
}

// The checks that need the manifest (encrypted_only) or the verify state.
Result<bool> PassesContentFilters(const datastore::Datastore& src, const SnapshotRef& s,
                                  const SyncOptions& options) {
  if (options.verified_only) {
    auto state = src.ReadVerifyState(s);
    if (!state || state->outcome != datastore::VerifyOutcome::kOk) return false;
  }
  if (options.encrypted_only) {
    auto manifest = src.ReadManifest(s);
    if (!manifest.ok()) {
      if (manifest.status().code() == StatusCode::kNotFound) return false;  // forgotten meanwhile
      return manifest.status();
    }
    if (!manifest->encrypted) return false;
  }
  return true;
}

}  // namespace

bool InScope(const std::string& ns, const SyncOptions& options) {
  if (!InNamespace(ns, options.ns)) return false;
  return options.max_depth < 0 || DepthBelow(ns, options.ns) <= options.max_depth;
}


GroupRef ToDst(const GroupRef& group, const SyncOptions& options) {
  if (options.target_ns == options.ns) return group;
  GroupRef out = group;
  std::string rest = group.ns.substr(options.ns.size());  // "" or "/x/y" (or "x/y" from the root)
  if (!rest.empty() && rest[0] == '/') rest.erase(0, 1);
  out.ns = options.target_ns.empty() ? rest
           : rest.empty()            ? options.target_ns
                                     : options.target_ns + "/" + rest;
  return out;
}

SnapshotRef ToDst(const SnapshotRef& snap, const SyncOptions& options) {
  return SnapshotRef{ToDst(snap.group, options), snap.time};
}

std::string DisplayName(const SnapshotRef& snap) {
  return snap.group.ns.empty() ? snap.ToString() : snap.group.ns + ":" + snap.ToString();
}

Result<Selection> Select(const datastore::Datastore& src, const SyncOptions& options) {
  CAIRN_RETURN_IF_ERROR(datastore::ValidateNamespace(options.ns));
  CAIRN_RETURN_IF_ERROR(datastore::ValidateNamespace(options.target_ns));
  Selection sel;
  CAIRN_ASSIGN_OR_RETURN(sel.src_all, src.ListAllSnapshots());
  std::sort(sel.src_all.begin(), sel.src_all.end(), [](const auto& a, const auto& b) {
    return std::tuple(GroupKey(a.group), a.time) < std::tuple(GroupKey(b.group), b.time);
  });
  CAIRN_ASSIGN_OR_RETURN(Named named, ParseSelection(src, options, sel.src_all));
  std::map<std::tuple<std::string, std::string, std::string>, std::vector<SnapshotRef>> by_group;
  for (const SnapshotRef& s : sel.src_all) {
    if (!InScope(s.group.ns, options) || !options.filter.Matches(s.group)) continue;
    if (named.Any() && !named.Covers(s)) continue;
    CAIRN_ASSIGN_OR_RETURN(bool pass, PassesContentFilters(src, s, options));
    if (pass) by_group[GroupKey(s.group)].push_back(s);
  }
  for (auto& [key, snaps] : by_group) {
    size_t first = 0;
    if (options.transfer_last > 0 && snaps.size() > static_cast<size_t>(options.transfer_last)) {
      first = snaps.size() - static_cast<size_t>(options.transfer_last);
    }
    sel.snapshots.insert(sel.snapshots.end(), snaps.begin() + first, snaps.end());
  }
  // The groups remove_vanished may touch: named groups, or every group that
  // passes the filters when nothing is named (never one named by snapshot).
  if (named.Any()) {
    sel.groups = named.groups;
  } else {
    for (const SnapshotRef& s : sel.src_all) {
      if (!InScope(s.group.ns, options) || !options.filter.Matches(s.group)) continue;
      if (sel.groups.empty() || !(sel.groups.back() == s.group)) sel.groups.push_back(s.group);
    }
  }
  return sel;
}

Result<SnapshotFiles> ReadSnapshotFiles(const datastore::Datastore& store, const SnapshotRef& snap,
                                        bool keep_bytes) {
  SnapshotFiles out;
  const std::string dir = store.SnapshotDir(snap);
  auto where = [&](const std::string& file) {
    return fmt::format("snapshot {} in {} ({})", DisplayName(snap), store.DisplayName(), file);
  };
  auto read = [&](const std::string& file, uint64_t max) -> Result<Bytes> {
    auto data = ReadWholeFile(store.env(), JoinPath(dir, file), max);
    if (!data.ok()) return data.status().WithContext(where(file));
    return data;
  };
  CAIRN_ASSIGN_OR_RETURN(out.manifest, store.ReadManifest(snap));
  if (keep_bytes) {
    CAIRN_ASSIGN_OR_RETURN(out.manifest_stored, read(index::kManifestFileName, kMaxStoredFile));
    auto again = index::DecodeManifest(out.manifest_stored);
    if (!again.ok() || again->signed_content != out.manifest.signed_content ||
        again->archives.size() != out.manifest.archives.size()) {
      return DataLossError(fmt::format("{}: the manifest changed while it was read",
                                       where(index::kManifestFileName)));
    }
  }
  IdSet seen;
  auto add = [&](const crypto::Digest& id, uint32_t length) {
    if (seen.insert(id).second) out.chunks.push_back({id, length});
  };
  // Keeps the stored bytes of an index whose checked digests are `csum`.
  auto keep_index = [&](const std::string& file, auto decode,
                        const crypto::Digest& csum) -> Status {
    if (!keep_bytes) return Status::Ok();
    CAIRN_ASSIGN_OR_RETURN(Bytes data, read(file, kMaxIndexFile));
    auto idx = decode(data);
    if (!idx.ok() || idx->csum() != csum) {
      return DataLossError(fmt::format("{}: the index changed while it was read", where(file)));
    }
    out.files.emplace_back(file, std::move(data));
    return Status::Ok();
  };
  for (const index::ArchiveEntry& e : out.manifest.archives) {
    switch (e.kind) {
      case index::ArchiveKind::kImage: {
        CAIRN_ASSIGN_OR_RETURN(auto idx, store.ReadImageIndex(snap, e));
        for (size_t i = 0; i < idx.chunk_count(); ++i) add(idx.digest(i), idx.ChunkLength(i));
        CAIRN_RETURN_IF_ERROR(keep_index(e.FileName(), index::FixedIndex::Decode, idx.csum()));
        break;
      }
      case index::ArchiveKind::kTree: {
        CAIRN_ASSIGN_OR_RETURN(auto t, store.ReadTreeIndexes(snap, e));
        for (const auto* idx : {&t.meta, &t.data}) {
          for (size_t i = 0; i < idx->chunk_count(); ++i) add(idx->digest(i), idx->ChunkLength(i));
        }
        CAIRN_RETURN_IF_ERROR(
            keep_index(e.MetaFileName(), index::DynamicIndex::Decode, t.meta.csum()));
        CAIRN_RETURN_IF_ERROR(keep_index(e.FileName(), index::DynamicIndex::Decode, t.data.csum()));
        break;
      }
      case index::ArchiveKind::kBlob: {
        if (!keep_bytes) break;
        CAIRN_ASSIGN_OR_RETURN(Bytes data, read(e.FileName(), kMaxStoredFile));
        auto header = blob::Check(data);
        if (!header.ok()) return header.status().WithContext(where(e.FileName()));
        if (crypto::Sha256(data) != e.csum) {
          return DataLossError(
              fmt::format("{}: blob checksum does not match the manifest", where(e.FileName())));
        }
        out.files.emplace_back(e.FileName(), std::move(data));
        break;
      }
    }
  }
  return out;
}

}  // namespace cairn::sync::detail
