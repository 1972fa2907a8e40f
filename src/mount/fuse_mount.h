// The FUSE 3 glue of `cairn mount` (libfuse3's low-level API): SnapshotFs's
// answers as FUSE replies, a multi-threaded session loop, clean unmounting.
//
// The kernel may keep what a snapshot holds for a long time (entry and
// attribute timeouts of an hour, page cache kept across opens, cached
// directory listings): nothing inside a snapshot ever changes. What does
// change (namespace and group listings, `latest`) times out after a second.
// Directory listings come with their attributes (READDIRPLUS), so `find`
// and `ls -l` need no lookup per entry.
//
// The session ends on SIGINT, SIGTERM or SIGHUP (libfuse's handlers, run
// in the thread that runs the loop: every other thread must block these
// signals), or when the file system is unmounted (`fusermount3 -u`); either
// way it is unmounted before RunFuseMount returns.
//
// Thread safety: RunFuseMount blocks the calling thread; SnapshotFs is
// called from the loop's threads.
#pragma once

#include <functional>
#include <string>

#include "base/logging.h"
#include "base/status.h"
#include "mount/snapshot_fs.h"

namespace cairn::mount {

struct FuseMountOptions {
  std::string mountpoint;
  bool allow_other = false;         // others than the mounting user may look
  bool default_permissions = true;  // the kernel checks modes and owners as stored
  int max_threads = 32;             // requests served at once
  bool debug = false;               // libfuse's request trace on stderr
  Logger* logger = nullptr;
};

struct FuseMountResult {
  int signal = 0;  // the signal that ended it; 0: unmounted from outside (fusermount3 -u)
};

// Mounts `fs` and serves it until the session ends (see the file comment).
// `ready` runs once the mount is in place, before the first request is
// served. FailedPrecondition when the mountpoint is a stale mount (a killed
// cairn mount: `fusermount3 -u MOUNTPOINT` clears it).
Result<FuseMountResult> RunFuseMount(SnapshotFs& fs, const FuseMountOptions& options,
                                     const std::function<void()>& ready);

}  // namespace cairn::mount
