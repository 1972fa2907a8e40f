// What `cairn snapshots` shows of one snapshot (size, archives, verify
// state, protection, encryption, notes), read from a datastore. The CLI's
// listing and the server's dashboard (GET …/snapshots?details=1) both
// print it, with SnapshotInfoJson, so the two cannot drift apart.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "datastore/datastore.h"

namespace cairn::maintenance {

struct SnapshotInfo {
  datastore::SnapshotRef snap;
  bool manifest_ok = false;  // false: the manifest does not decode (run verify)
  uint64_t size = 0;         // sum of the archive sizes
  std::vector<std::pair<std::string, uint64_t>> archives;  // name, size
  std::optional<datastore::VerifyState> verify;
  bool is_protected = false;
  bool encrypted = false;
  std::string key_print;  // the key's fingerprint text when encrypted
  std::string notes;
};

// A listing shows what it can: an unreadable manifest, flag or notes file
// reads as none rather than hiding the snapshot.
SnapshotInfo ReadSnapshotInfo(const datastore::Datastore& store, const datastore::SnapshotRef& snap);

// One element of `cairn snapshots --json`: snapshot, ns, type, id, time,
// size, archives [{name, size}], verify {state, time, errors} or null,
// protected, encrypted, key_fingerprint, notes.
nlohmann::json SnapshotInfoJson(const SnapshotInfo& info);

}  // namespace cairn::maintenance
