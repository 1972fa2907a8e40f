// Reading and applying the metadata of filesystem objects for tree archives:
// lstat, xattrs (POSIX ACLs are the system.posix_acl_* xattrs), owner and
// group names; and on restore creating entries and applying mode, owner,
// times and xattrs, never following a symlink. Every call goes through an
// Env's Dir (base/env.h: relative to a directory descriptor, no symlink
// followed), so fault injection reaches it.
//
// Thread safety: functions are thread-safe (name lookups are cached under a
// mutex).
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/env.h"
#include "base/status.h"
#include "tree/tree_format.h"

namespace cairn::tree {

// Fills kind, mode, uid, gid, user, group, mtime_ns, size (regular files),
// rdev (devices) and the symlink target of the object `name` in `dir` (""
// for `dir` itself), from `st` (an lstat result). Sockets and unknown types are
// InvalidArgument ("socket, skipped"). `name` and `path` are copied in.
// Xattrs are read when `with_xattrs`; filesystems without xattr support
// give none (not an error).
Result<Entry> CaptureEntry(Dir& dir, const std::string& name, const std::string& path,
                           const struct stat& st, bool with_xattrs);

// Reads the xattrs of `name` in `dir` (without following symlinks), sorted
// by name. ENOTSUP gives an empty list.
Result<std::vector<Xattr>> ReadXattrs(Dir& dir, const std::string& name);

// Name lookups, cached: "" when the id has no name.
std::string UserName(uint32_t uid);
std::string GroupName(uint32_t gid);

struct ApplyOptions {
  // Set owner (chown) only when running as root; otherwise ownership is
  // left to the restoring user, silently (as tar does).
  bool owner = true;
  // Prefer the recorded user/group *names* when they exist on this machine
  // (as tar and PBS do), else the numeric ids.
  bool by_name = true;
};

// Applies owner, mode, xattrs and mtime to `name` in `dir` (an entry that
// already exists; "" for `dir` itself), in that order (chown clears setuid
// bits, so mode after owner; times last). Symlinks get owner, xattrs and
// times only. Errors name the path. Xattrs that the filesystem refuses
// (ENOTSUP, EPERM for trusted.*/security.* as non-root) are reported via
// `warnings` and skipped, not fatal.
Status ApplyMetadata(Dir& dir, const std::string& name, const Entry& e,
                     const ApplyOptions& options, std::vector<std::string>* warnings);
// The same through an open file (a regular file tree restore created).
Status ApplyMetadata(WritableFile& file, const Entry& e, const ApplyOptions& options,
                     std::vector<std::string>* warnings);

// Creates the non-regular, non-directory entry `e` (symlink, fifo, device)
// as `name` in `dir`; fails (AlreadyExists) when something is there.
// Device nodes need root: PermissionDenied otherwise, with the path.
Status CreateSpecial(Dir& dir, const std::string& name, const Entry& e);

}  // namespace cairn::tree
