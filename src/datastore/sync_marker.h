// The marker in a snapshot directory that `cairn sync` created
// (docs/FORMAT.md, "Sync marker"): JSON {"source": "<SRC as the user named
// it>", "synced_unix": N}. sync writes it (a server takes it within a backup
// session, server/backup_session.cc), a server lists its source, and
// --remove-vanished forgets only what names its source.
#pragma once

#include <cstddef>

namespace cairn::datastore {

inline constexpr char kSyncMarkerFileName[] = ".sync-source";
inline constexpr size_t kMaxSyncMarkerBytes = 4096;

}  // namespace cairn::datastore
