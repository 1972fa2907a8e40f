#include "maintenance/snapshot_info.h"

#include "crypto/crypt_config.h"
#include "maintenance/prune.h"

namespace cairn::maintenance {

SnapshotInfo ReadSnapshotInfo(const datastore::Datastore& store, const datastore::SnapshotRef& snap) {
  SnapshotInfo info;
  info.snap = snap;
  auto manifest = store.ReadManifest(snap);
  info.verify = store.ReadVerifyState(snap);
  auto is_protected = IsProtected(store, snap);
  info.is_protected = is_protected.ok() && *is_protected;
  auto notes = ReadNotes(store, snap);
  if (notes.ok()) info.notes = std::move(*notes);
  if (manifest.ok()) {
    info.manifest_ok = true;
    info.encrypted = manifest->encrypted;
    if (info.encrypted) info.key_print = crypto::FingerprintText(manifest->key_fingerprint);
    for (const auto& a : manifest->archives) {
      info.size += a.size;
      info.archives.emplace_back(a.name, a.size);
    }
  }
  return info;
}

nlohmann::json SnapshotInfoJson(const SnapshotInfo& info) {
  nlohmann::json archives = nlohmann::json::array();
  for (const auto& [name, size] : info.archives) archives.push_back({{"name", name}, {"size", size}});
  nlohmann::json v = nullptr;
  if (info.verify) {
    v = {{"state", info.verify->outcome == datastore::VerifyOutcome::kOk ? "ok" : "failed"},
         {"time", datastore::FormatRfc3339(info.verify->time)},
         {"errors", info.verify->errors}};
  }
  const datastore::SnapshotRef& snap = info.snap;
  return {{"snapshot", snap.ToString()},
          {"ns", snap.group.ns},
          {"type", snap.group.type},
          {"id", snap.group.id},
          {"time", snap.TimeString()},
          {"size", info.size},
          {"archives", archives},
          {"verify", v},
          {"protected", info.is_protected},
          {"encrypted", info.encrypted},
          {"key_fingerprint", info.encrypted ? nlohmann::json(info.key_print) : nlohmann::json(nullptr)},
          {"notes", info.notes}};
}

}  // namespace cairn::maintenance
