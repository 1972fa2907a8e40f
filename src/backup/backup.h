// Backup of a snapshot: several archives (NAME.img from files or block
// devices, NAME.blob from small files) into one new snapshot of a group.
//
// For each image archive the dedup base is the same archive in the group's
// latest finished snapshot (unless its last verify failed); its ids are
// never stored again. The snapshot is committed only when every archive
// succeeded; on any error nothing of it remains and the error names the
// archive and source.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "backup/image_backup.h"
#include "backup/tree_backup.h"
#include "base/env.h"
#include "base/logging.h"
#include "datastore/datastore.h"

namespace cairn::backup {

struct ArchiveSpec {
  std::string name;    // "disk0.img"
  std::string source;  // "/dev/vdb"
};

// "NAME=SOURCE". InvalidArgument with a hint when malformed.
Result<ArchiveSpec> ParseArchiveSpec(std::string_view text);

struct ArchiveReport {
  std::string name;
  std::string source;
  index::ArchiveKind kind = index::ArchiveKind::kImage;
  ImageStats stats;  // for blobs: bytes only
  TreeStats tree;    // trees only
  double seconds = 0;
  bool had_base = false;  // a previous snapshot's index served as dedup base
};

struct BackupOptions {
  datastore::GroupRef group;
  std::optional<int64_t> time;  // default: now
  std::vector<ArchiveSpec> archives;
  ImageBackupOptions image;
  TreeBackupOptions tree;  // logger and progress are taken from here and `image`
  std::string created_by = "cairn";
  Logger* logger = nullptr;  // REQUIRED
  std::function<void(const ArchiveReport&)> on_archive_done;
};

struct BackupReport {
  datastore::SnapshotRef snapshot;
  std::vector<ArchiveReport> archives;
  double seconds = 0;
};

Result<BackupReport> RunBackup(const datastore::Datastore& store, const BackupOptions& options);

}  // namespace cairn::backup
