#include "access/archive_open.h"

#include <algorithm>

#include <fmt/format.h>

namespace cairn::access {

ReadaheadOptions ReadaheadFor(uint64_t cache_bytes, int jobs) {
  ReadaheadOptions o;
  o.max_window_bytes = std::clamp<uint64_t>(cache_bytes / 4, uint64_t{8} << 20, uint64_t{256} << 20);
  o.jobs = jobs;
  return o;
}

std::string DescribeArchive(const datastore::SnapshotRef& snap, const std::string& archive) {
  return fmt::format("archive {} of {}", archive, snap.ToString());
}

Result<std::unique_ptr<StreamReader>> OpenImageReader(const datastore::Datastore& store,
                                                      const datastore::SnapshotRef& snap,
                                                      const index::ArchiveEntry& entry,
                                                      const ReaderSettings& settings) {
  if (entry.kind != index::ArchiveKind::kImage) {
    return InvalidArgumentError(fmt::format("archive {} of {} is a {} archive, not an image",
                                            entry.name, snap.ToString(),
                                            index::ArchiveKindName(entry.kind)));
  }
  CAIRN_ASSIGN_OR_RETURN(index::Manifest manifest, store.ReadManifest(snap));
  CAIRN_ASSIGN_OR_RETURN(const crypto::CryptConfig* crypt, store.CryptFor(manifest));
  CAIRN_ASSIGN_OR_RETURN(index::FixedIndex idx, store.ReadImageIndex(snap, entry));
  StreamReaderOptions o;
  o.cache = settings.cache;
  o.source = settings.source;
  o.crypt = crypt;
  o.description = DescribeArchive(snap, entry.name);
  o.readahead = settings.readahead;
  return std::make_unique<StreamReader>(MapImage(std::move(idx), crypt), o);
}

}  // namespace cairn::access
