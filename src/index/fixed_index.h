// FixedIndex: the index of an image archive (NAME.img.fidx). The image is
// cut into chunks of one fixed size (4 MiB by default, the last one may be
// short); the index lists one SHA-256 per chunk, in image order, after a
// 4096-byte header (so the digests are page-aligned for mmap). The header
// holds the image size, the chunk size, a SHA-256 over all digests (the
// index checksum recorded in the manifest) and a CRC32C over itself.
// docs/FORMAT.md has the byte layout.
//
// Thread safety: immutable after construction; share freely.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/bytes.h"
#include "base/env.h"
#include "base/status.h"
#include "crypto/crypt_config.h"
#include "crypto/sha256.h"

namespace cairn::index {

inline constexpr uint32_t kDefaultChunkSize = 4u << 20;
inline constexpr uint32_t kMinChunkSize = 64u << 10;
inline constexpr uint32_t kMaxChunkSize = 16u << 20;
inline constexpr size_t kFixedIndexHeaderSize = 4096;
// 2^50 bytes (1 PiB): far beyond any disk, small enough that counts fit.
inline constexpr uint64_t kMaxImageSize = uint64_t{1} << 50;

class FixedIndex {
 public:
  FixedIndex() = default;
  // REQUIRES: chunk_size valid, digests.size() == ChunkCount(image_size, chunk_size).
  FixedIndex(uint64_t image_size, uint32_t chunk_size, std::vector<crypto::Digest> digests);

  static uint64_t ChunkCount(uint64_t image_size, uint32_t chunk_size) {
    return (image_size + chunk_size - 1) / chunk_size;
  }
  // InvalidArgument unless a power of two in [kMinChunkSize, kMaxChunkSize].
  static Status ValidateChunkSize(uint32_t chunk_size);

  // Decodes an index file held in memory. DataLoss on any inconsistency.
  static Result<FixedIndex> Decode(ByteSpan file);
  Bytes Encode() const;

  uint64_t image_size() const { return image_size_; }
  uint32_t chunk_size() const { return chunk_size_; }
  size_t chunk_count() const { return digests_.size(); }
  const crypto::Digest& digest(size_t i) const { return digests_[i]; }
  const std::vector<crypto::Digest>& digests() const { return digests_; }
  uint64_t ChunkOffset(size_t i) const { return uint64_t{i} * chunk_size_; }
  uint32_t ChunkLength(size_t i) const;
  // SHA-256 over all digests in order: the checksum the manifest records.
  const crypto::Digest& csum() const { return csum_; }

 private:
  uint64_t image_size_ = 0;
  uint32_t chunk_size_ = kDefaultChunkSize;
  std::vector<crypto::Digest> digests_;
  crypto::Digest csum_{};
};

// Reads and decodes the index file at `path`; errors name the path.
Result<FixedIndex> ReadFixedIndex(Env& env, const std::string& path);

// An index file's header: what ScanFixedIndex returns once every digest has
// been read and their checksum (`csum`) matched.
struct FixedIndexInfo {
  uint64_t image_size = 0;
  uint32_t chunk_size = 0;
  uint64_t chunk_count = 0;
  crypto::Digest csum{};
};

// Reads the index file at `path` in 1 MiB windows, calling fn(i, digest) for
// each digest in image order, so its memory stays constant however large
// the image (verify collects millions of digests this way). Checks exactly
// what ReadFixedIndex does; on an error, which names the path, some digests
// may already have been passed to `fn`, and the caller must drop them.
Result<FixedIndexInfo> ScanFixedIndex(Env& env, const std::string& path,
                                      const std::function<void(size_t, const crypto::Digest&)>& fn);

// The id of a chunk of `length` zero bytes (keyed by `crypt` in encrypted
// snapshots, blob::ChunkId). Cached for kDefaultChunkSize.
crypto::Digest ZeroChunkDigest(uint32_t length, const crypto::CryptConfig* crypt = nullptr);

}  // namespace cairn::index
