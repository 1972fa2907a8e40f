#include "backup/dedup_base.h"

namespace cairn::backup {

bool DedupBase::SameKey(const datastore::Datastore& store, const datastore::SnapshotRef& prev,
                        const Result<index::Manifest>& manifest, Logger& log) {
  if (!manifest.ok()) return true;
  const crypto::CryptConfig* key = store.key();
  if (!manifest->encrypted && key == nullptr) return true;
  if (manifest->encrypted && key != nullptr && manifest->key_fingerprint == key->fingerprint()) {
    return true;
  }
  log.Info("previous snapshot {} is {}; not using it as dedup base", prev.ToString(),
           !manifest->encrypted ? "not encrypted"
           : key == nullptr     ? "encrypted and this backup is not"
                                : "encrypted with another key");
  return false;
}

std::optional<DedupBase> DedupBase::Open(const datastore::Datastore& store,
                                         const datastore::SnapshotRef& prev,
                                         Result<index::Manifest> manifest, Logger& log) {
  auto state = store.ReadVerifyState(prev);
  if (state && state->outcome == datastore::VerifyOutcome::kFailed) {
    log.Warn("previous snapshot {} failed verification; not using it as dedup base (every file "
             "is read again)",
             prev.ToString());
    return std::nullopt;
  }
  if (!manifest.ok()) {
    log.Warn("cannot use {} as dedup base (every file is read again): {}", prev.ToString(),
             manifest.status().ToString());
    return std::nullopt;
  }
  return DedupBase(prev, std::move(*manifest));
}

const index::ArchiveEntry* DedupBase::Find(const std::string& name,
                                           index::ArchiveKind kind) const {
  const index::ArchiveEntry* entry = manifest_.Find(name);
  return entry != nullptr && entry->kind == kind ? entry : nullptr;
}

bool DedupBase::AddImageIds(const datastore::Datastore& store, const std::string& name,
                            Logger& log, DigestSet* known) const {
  const index::ArchiveEntry* entry = Find(name, index::ArchiveKind::kImage);
  if (entry == nullptr) return false;
  auto idx = store.ReadImageIndex(snapshot_, *entry);
  if (!idx.ok()) {
    log.Warn("cannot use {} of {} as dedup base: {}", name, snapshot_.ToString(),
             idx.status().ToString());
    return false;
  }
  known->insert(idx->digests().begin(), idx->digests().end());
  return true;
}

}  // namespace cairn::backup
