// The chunk references of the selected snapshots (verify_detail.h).
#include <fmt/format.h>

#include <algorithm>

#include "verify/verify_detail.h"

namespace cairn::verify::detail {

void AddProblem(VerifyReport* report, std::string what, const Status& s,
                std::vector<std::string> affected) {
  report->problems.push_back(Problem{std::move(what),
                                     std::string(s.message()),
                                     s.code() == StatusCode::kNotFound,
                                     std::move(affected),
                                     {}});
}

std::optional<index::Manifest> ReadManifestOf(const datastore::Datastore& store, size_t snap_idx,
                                              VerifyReport* report) {
  SnapshotResult& result = report->snapshots[snap_idx];
  const datastore::SnapshotRef& snap = result.snapshot;
  auto manifest = store.ReadManifest(snap);
  if (!manifest.ok() && manifest.status().code() == StatusCode::kNotFound) {
    result.vanished = true;  // forgotten since the listing: not our business
    return std::nullopt;
  }
  if (!manifest.ok()) {
    result.ok = false;
    ++result.errors;
    AddProblem(report, "manifest of " + snap.ToString(), manifest.status(), {snap.ToString()});
    return std::nullopt;
  }
  return std::move(*manifest);
}

void CollectSnapshot(const datastore::Datastore& store, size_t snap_idx,
                     const index::Manifest& manifest, VerifyReport* report, Collected* c) {
  SnapshotResult& result = report->snapshots[snap_idx];
  const datastore::SnapshotRef& snap = result.snapshot;
  ArchiveCrypt crypt;
  if (auto key = store.CryptFor(manifest); key.ok()) {
    crypt.key = *key;
  } else {
    crypt.keyless = true;  // encrypted, and its key is not at hand
    result.content_checked = false;
  }
  for (const auto& entry : manifest.archives) {
    std::string label = fmt::format("{} {}", snap.ToString(), entry.name);
    if (entry.kind == index::ArchiveKind::kBlob) {
      auto data = store.ReadBlobArchive(snap, entry, crypt.key);
      // Keyless, the checksum against the manifest is all that can be checked.
      bool keyless_ok = crypt.keyless && !data.ok() &&
                        data.status().code() == StatusCode::kUnauthenticated;
      if (!data.ok() && !keyless_ok) {
        result.ok = false;
        ++result.errors;
        AddProblem(report, "blob " + entry.name, data.status(), {label});
      }
      continue;
    }
    if (entry.kind == index::ArchiveKind::kTree) {
      auto idx = store.ReadTreeIndexes(snap, entry);
      if (!idx.ok()) {
        result.ok = false;
        ++result.errors;
        AddProblem(report, "indexes of " + entry.name, idx.status(), {label});
        continue;
      }
      for (const auto* stream : {&idx->meta, &idx->data}) {
        uint32_t archive = static_cast<uint32_t>(c->archives.size());
        c->archives.push_back(
            fmt::format("{} ({})", label, stream == &idx->meta ? "metadata" : "payload"));
        c->archive_snapshot.push_back(snap_idx);
        c->archive_chunk_size.push_back(0);
        c->archive_crypt.push_back(crypt);
        std::vector<uint64_t> ends;
        ends.reserve(stream->chunk_count());
        for (size_t i = 0; i < stream->chunk_count(); ++i) {
          ends.push_back(stream->entry(i).end);
          c->uses.push_back(ChunkUse{stream->digest(i), stream->ChunkLength(i), archive,
                                     static_cast<uint32_t>(i)});
        }
        c->archive_ends.resize(c->archives.size());
        c->archive_ends.back() = std::move(ends);
        result.chunks += stream->chunk_count();
      }
      continue;
    }
    // Streamed, not read whole: the digests go straight into `uses`, so an
    // index costs no memory of its own (32 bytes a chunk otherwise).
    const uint32_t archive = static_cast<uint32_t>(c->archives.size());
    const size_t first = c->uses.size();
    const uint32_t chunk_size = entry.chunk_size;
    Status scanned = index::FixedIndex::ValidateChunkSize(chunk_size);
    if (!scanned.ok()) {
      scanned = DataLossError(fmt::format("manifest entry: {}", scanned.message()));
    } else {
      scanned = store.ScanImageIndex(snap, entry, [&](size_t i, const crypto::Digest& d) {
        const uint64_t offset = uint64_t{i} * chunk_size;
        const auto length = static_cast<uint32_t>(
            std::min<uint64_t>(chunk_size, entry.size - std::min(entry.size, offset)));
        c->uses.push_back(ChunkUse{d, length, archive, static_cast<uint32_t>(i)});
      });
    }
    if (!scanned.ok()) {
      c->uses.resize(first);  // nothing of a damaged index is checked
      result.ok = false;
      ++result.errors;
      AddProblem(report, "index " + entry.FileName(), scanned, {label});
      continue;
    }
    c->archives.push_back(label);
    c->archive_snapshot.push_back(snap_idx);
    c->archive_chunk_size.push_back(chunk_size);
    c->archive_crypt.push_back(crypt);
    c->archive_ends.resize(c->archives.size());
    result.chunks += c->uses.size() - first;
  }
}

}  // namespace cairn::verify::detail
