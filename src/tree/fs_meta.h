// Reading and applying the metadata of filesystem objects for tree archives:
// lstat, xattrs (POSIX ACLs are the system.posix_acl_* xattrs), owner and
// group names; and on restore creating entries and applying mode, owner,
// times and xattrs, never following a symlink (every call is relative to a
// directory fd and uses AT_SYMLINK_NOFOLLOW / O_NOFOLLOW).
//
// Thread safety: functions are thread-safe (name lookups are cached under a
// mutex).
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "tree/tree_format.h"

namespace cairn::tree {

// Fills kind, mode, uid, gid, user, group, mtime_ns, size (regular files),
// rdev (devices) and the symlink target of the object `name` in directory
// `dirfd`, from `st` (an lstat result). Sockets and unknown types are
// InvalidArgument ("socket, skipped"). `name` and `path` are copied in.
// Xattrs are read when `with_xattrs`; filesystems without xattr support
// give none (not an error).
Result<Entry> CaptureEntry(int dirfd, const std::string& name, const std::string& path,
                           const struct stat& st, bool with_xattrs);

// Reads the xattrs of `name` in `dirfd` (without following symlinks), sorted
// by name. ENOTSUP gives an empty list.
Result<std::vector<Xattr>> ReadXattrs(int dirfd, const std::string& name);

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

// Applies owner, mode, xattrs and mtime to `name` in `dirfd` (an entry that
// already exists), in that order (chown clears setuid bits, so mode after
// owner; times last). Symlinks get owner and times only. Errors name `path`.
// Xattrs that the filesystem refuses (ENOTSUP, EPERM for trusted.*/security.*
// as non-root) are reported via `warnings` and skipped, not fatal.
Status ApplyMetadata(int dirfd, const std::string& name, const Entry& e,
                     const ApplyOptions& options, std::vector<std::string>* warnings);

// Creates the non-regular, non-directory entry `e` (symlink, fifo, device)
// as `name` in `dirfd`; fails (AlreadyExists) when something is there.
// Device nodes need root: PermissionDenied otherwise, with the path.
Status CreateSpecial(int dirfd, const std::string& name, const Entry& e);

}  // namespace cairn::tree
