// The metadata stream of a tree archive: every entry of a directory tree in
// depth-first order (a directory, then its children sorted by name bytes,
// then an end-of-directory record), with its metadata and, for regular
// files, the byte range of its content in the payload stream. The two
// streams are chunked and indexed separately (NAME.tree.meta.didx and
// NAME.tree.data.didx), so listing and single-file restore read only the
// metadata plus the chunks they need. docs/FORMAT.md has the byte layout.
//
// The decoder treats the stream as hostile: it refuses names that are empty,
// ".", "..", contain '/' or NUL, or are longer than 255 bytes; names not in
// strictly increasing order within a directory (which includes duplicates);
// paths deeper than kMaxDepth or longer than kMaxPathLength; hardlinks to
// anything but an earlier regular file marked as linked; file ranges outside
// the payload stream or out of stream order; oversized records; truncation
// and trailing bytes. Every failure is a DataLoss naming the entry's path.
//
// Thread safety: encoder and decoder are used by one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "base/bytes.h"
#include "base/env.h"
#include "base/status.h"

namespace cairn::tree {

enum class EntryKind : uint8_t {
  kDirectory = 1,
  kFile = 2,
  kSymlink = 3,
  kHardlink = 4,  // another name for an earlier kFile entry
  kCharDevice = 5,
  kBlockDevice = 6,
  kFifo = 7,
};

inline constexpr size_t kMaxNameLength = 255;
inline constexpr size_t kMaxPathLength = 4095;  // relative path, bytes
inline constexpr size_t kMaxDepth = 1024;
inline constexpr size_t kMaxXattrValue = 64u << 10;
inline constexpr size_t kMaxXattrs = 1024;
inline constexpr size_t kMaxRecordSize = 4u << 20;

using Xattr = cairn::Xattr;  // base/env.h: name and raw value

struct Entry {
  EntryKind kind = EntryKind::kFile;
  // Last path component; "" only for the root directory. Set by the
  // producer when encoding.
  std::string name;
  // Relative path from the archive root ("" for the root, "etc/hosts").
  // Filled in by the decoder; ignored by the encoder.
  std::string path;
  uint32_t mode = 0;  // permission bits and setuid/setgid/sticky (07777)
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::string user;           // owner name at backup time, "" when unknown
  std::string group;          // group name at backup time, "" when unknown
  int64_t mtime_ns = 0;       // nanoseconds since the Unix epoch
  std::vector<Xattr> xattrs;  // sorted by name, names unique; ACLs are here

  // kFile: content is payload[payload_offset, payload_offset + size).
  uint64_t size = 0;
  uint64_t payload_offset = 0;
  bool linked = false;  // kFile: other kHardlink entries may name it
  // kFile, for the next backup's change detection only (never restored):
  // the source's inode number and ctime when it was read (encoded after
  // the flags byte: varint inode, zigzag ctime_ns).
  uint64_t inode = 0;
  int64_t ctime_ns = 0;

  // kSymlink: the link's target, as stored (may be absolute; it is never
  // followed by restore). kHardlink: path of the earlier linked kFile.
  std::string link_target;

  uint64_t rdev = 0;  // kCharDevice, kBlockDevice

  bool operator==(const Entry&) const = default;
};

// Writes the metadata stream. Call order: BeginDirectory(root), then for each
// directory BeginDirectory(dir) ... EndDirectory(), other entries with Add(),
// names strictly increasing within each directory, and EndDirectory() for
// the root last; then Finish().
class TreeEncoder {
 public:
  // `sink` receives the stream in pieces, in order.
  using Sink = std::function<Status(ByteSpan piece)>;
  explicit TreeEncoder(Sink sink);

  Status BeginDirectory(const Entry& dir);  // REQUIRES: dir.kind == kDirectory
  Status Add(const Entry& entry);           // REQUIRES: entry.kind != kDirectory
  Status EndDirectory();
  // FailedPrecondition unless every directory was ended. Flushes the sink.
  Status Finish();

  uint64_t bytes_written() const { return bytes_written_; }

 private:
  struct OpenDir {
    std::string path;
    std::string last_child;
    bool has_child = false;
  };
  // Checks `e` as the next entry; sets `path` to its relative path.
  Status CheckNext(const Entry& e, std::string* path);
  Status Emit(const Entry& e);
  Status Flush(bool force);

  Sink sink_;
  Bytes buf_;
  uint64_t bytes_written_ = 0;
  std::vector<OpenDir> open_;  // root first
  std::unordered_set<std::string> linked_files_;
  uint64_t next_payload_ = 0;  // files start at or after this offset
  bool finished_ = false;
  bool started_ = false;  // the header and root record are written
};

// Reads the metadata stream, pulling pieces from `source` as needed.
class TreeDecoder {
 public:
  // Returns the next piece of the stream, or an empty piece at its end.
  // The piece stays valid until the next call.
  using Source = std::function<Result<ByteSpan>()>;
  // `payload_size`: bytes in the payload stream, for range checks.
  TreeDecoder(Source source, uint64_t payload_size);

  // The next entry in stream order (the root directory first), or nullopt
  // after the root's end with the stream exhausted. Directory ends are not
  // returned. DataLoss on any malformed input (see file comment).
  // After an error every later call returns the same error.
  Result<std::optional<Entry>> Next();

  // Depth of the last returned entry (root 0).
  size_t depth() const { return depth_; }

 private:
  Result<std::optional<Entry>> NextImpl();
  // Reads pieces until `want` unconsumed bytes are buffered or the source
  // ends, dropping consumed bytes first.
  Status Fill(size_t want);
  Status ReadHeader();
  // Checks a parsed entry against the stream state and records it.
  Status Accept(const Entry& e);
  Status CheckStreamEnd();
  Status Corrupt(std::string_view what) const;  // DataLoss with the offset

  Source source_;
  uint64_t payload_size_;
  Bytes buf_;  // unconsumed bytes start at pos_
  size_t pos_ = 0;
  uint64_t consumed_ = 0;      // stream bytes dropped from the front of buf_
  uint64_t record_start_ = 0;  // stream offset of the record being decoded
  Status error_;
  bool source_done_ = false;
  bool done_ = false;
  bool started_ = false;
  uint64_t next_payload_ = 0;  // files start at or after this offset
  size_t depth_ = 0;
  struct Open {
    std::string path;
    std::string last_child;
    bool has_child = false;
  };
  std::vector<Open> stack_;
  std::unordered_set<std::string> linked_files_;  // paths of kFile with linked
};

// Decodes a whole stream held in memory (tests, fuzzing).
Result<std::vector<Entry>> DecodeTree(ByteSpan stream, uint64_t payload_size);
// Encodes a whole tree given as a pre-order list with paths: each entry's
// `path` decides its parent; directory ends are inferred. For tests and
// fuzz seeds. InvalidArgument when the list is not a valid pre-order.
Result<Bytes> EncodeTree(const std::vector<Entry>& entries);

// Orders relative paths as the metadata stream does (depth-first, children
// sorted by name bytes): component by component, so a directory comes before
// everything below it and "a/b" < "a.b" (since "a" < "a.b"). <0, 0, >0.
// Allocation-free: '/' compares below every byte a name may hold.
int CompareTreePaths(std::string_view a, std::string_view b);

// True when `name` is a valid entry name (not the root's "").
bool IsValidName(std::string_view name);

}  // namespace cairn::tree
