// Datastore status: what `cairn status` prints. Walks the chunk store (on
// several threads, one stat per chunk file), reads every manifest and the
// verify and gc state; holds nothing but counters.
#pragma once

#include <cstdint>
#include <optional>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "datastore/datastore.h"
#include "maintenance/gc.h"

namespace cairn::maintenance {

struct StoreStatus {
  uint64_t namespaces = 0;  // below the root
  uint64_t groups = 0;
  uint64_t snapshots = 0;
  uint64_t logical_bytes = 0;  // sum of the archive sizes of all snapshots
  uint64_t chunks = 0;         // chunk files (set-aside "*.trash" ones not counted)
  uint64_t chunk_bytes = 0;    // their size on disk (compressed)
  uint64_t trash_chunks = 0;   // set aside by gc, waiting for a later run
  uint64_t trash_bytes = 0;
  uint64_t bad_chunks = 0;       // quarantined by verify
  uint64_t never_verified = 0;   // snapshots without a verify result
  uint64_t failed_verify = 0;    // snapshots whose last verify failed
  int64_t last_verify_unix = 0;  // newest verify of any snapshot; 0 = none
  std::optional<GcReport> last_gc;
  uint64_t fs_total_bytes = 0;  // the file system holding the datastore
  uint64_t fs_free_bytes = 0;

  // logical / on disk: how much deduplication and compression save.
  double DedupFactor() const {
    return chunk_bytes == 0 ? 0 : static_cast<double>(logical_bytes) / chunk_bytes;
  }
};

Result<StoreStatus> ReadStoreStatus(const datastore::Datastore& store, int threads = 0);

// The status as `cairn status --json` prints it, "datastore" being
// `datastore` (the path locally; the server's GET …/status puts the store's
// name there and the client its URL), times as RFC 3339 or null.
nlohmann::json StoreStatusJson(const StoreStatus& status, const std::string& datastore);

}  // namespace cairn::maintenance
