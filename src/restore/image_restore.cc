#include "restore/image_restore.h"

#include <unordered_map>

#include <fmt/format.h>

#include "blob/blob.h"

namespace cairn::restore {
namespace {

// Reads and fully checks one chunk.
Result<Bytes> FetchChunk(store::ChunkSource& source, const crypto::Digest& id, uint32_t length,
                         ImageRestoreStats* stats) {
  auto read = source.Read(id);
  if (!read.ok()) {
    // A chunk the index needs but the store lacks is damage, not a usage error.
    if (read.status().code() == StatusCode::kNotFound) {
      return DataLossError(std::string(read.status().message()));
    }
    return read.status();
  }
  Bytes stored = std::move(read).value();
  stats->stored_bytes += stored.size();
  ++stats->chunks_fetched;
  auto plain = blob::DecodeChunk(stored, id);
  if (!plain.ok()) {
    return plain.status().WithContext(fmt::format("chunk {}", crypto::DigestHex(id)));
  }
  if (plain->size() != length) {
    return DataLossError(fmt::format("chunk {}: {} bytes, the index needs {}",
                                     crypto::DigestHex(id), plain->size(), length));
  }
  return plain;
}

// Knows the ids of all-zero chunks: the full-size one and the short tail's.
class ZeroIds {
 public:
  explicit ZeroIds(const index::FixedIndex& idx)
      : full_(index::ZeroChunkDigest(idx.chunk_size())), chunk_size_(idx.chunk_size()) {
    if (idx.chunk_count() > 0 && idx.ChunkLength(idx.chunk_count() - 1) != idx.chunk_size()) {
      tail_len_ = idx.ChunkLength(idx.chunk_count() - 1);
      tail_ = index::ZeroChunkDigest(tail_len_);
    }
  }
  bool IsZero(const crypto::Digest& id, uint32_t length) const {
    return (length == chunk_size_ && id == full_) || (length == tail_len_ && id == tail_);
  }

 private:
  crypto::Digest full_;
  uint32_t chunk_size_;
  crypto::Digest tail_{};
  uint32_t tail_len_ = 0;
};

Status WriteZeros(WritableFile& out, uint64_t offset, uint32_t length, const Bytes& zeros) {
  return out.WriteAt(offset, ByteSpan(zeros.data(), length));
}

// In-order restore to a stream; decoded chunks are not cached beyond the
// last one (the parallel engine brings a bounded reorder buffer).
Status RestoreToStream(const index::FixedIndex& idx, store::ChunkSource& source, WritableFile& out,
                       ImageRestoreStats* stats) {
  const ZeroIds zero(idx);
  Bytes zeros(idx.chunk_size(), 0);
  crypto::Digest last_id{};
  Bytes last;
  for (size_t i = 0; i < idx.chunk_count(); ++i) {
    const crypto::Digest& id = idx.digest(i);
    uint32_t len = idx.ChunkLength(i);
    if (zero.IsZero(id, len)) {
      ++stats->zero_chunks;
      CAIRN_RETURN_IF_ERROR(out.Append(ByteSpan(zeros.data(), len)));
      continue;
    }
    if (last.empty() || id != last_id) {
      CAIRN_ASSIGN_OR_RETURN(last, FetchChunk(source, id, len, stats));
      last_id = id;
    }
    CAIRN_RETURN_IF_ERROR(out.Append(last));
  }
  return Status::Ok();
}

Status RestoreToFile(const index::FixedIndex& idx, store::ChunkSource& source, WritableFile& out,
                     bool write_zeros, ImageRestoreStats* stats) {
  RestorePlan plan = PlanImageRestore(idx);
  if (write_zeros) {
    Bytes zeros(idx.chunk_size(), 0);
    for (const auto& [offset, length] : plan.zero_ranges) {
      CAIRN_RETURN_IF_ERROR(WriteZeros(out, offset, length, zeros));
    }
  }
  stats->zero_chunks = plan.zero_ranges.size();
  for (const PlanItem& item : plan.items) {
    CAIRN_ASSIGN_OR_RETURN(Bytes plain, FetchChunk(source, item.id, item.length, stats));
    for (uint64_t offset : item.offsets) CAIRN_RETURN_IF_ERROR(out.WriteAt(offset, plain));
  }
  return Status::Ok();
}

}  // namespace

RestorePlan PlanImageRestore(const index::FixedIndex& idx) {
  RestorePlan plan;
  const ZeroIds zero(idx);
  std::unordered_map<crypto::Digest, size_t, crypto::DigestHash> slot;
  for (size_t i = 0; i < idx.chunk_count(); ++i) {
    const crypto::Digest& id = idx.digest(i);
    uint32_t len = idx.ChunkLength(i);
    if (zero.IsZero(id, len)) {
      plan.zero_ranges.emplace_back(idx.ChunkOffset(i), len);
      continue;
    }
    auto [it, fresh] = slot.try_emplace(id, plan.items.size());
    if (fresh) plan.items.push_back(PlanItem{id, len, {}});
    plan.items[it->second].offsets.push_back(idx.ChunkOffset(i));
  }
  return plan;
}

Status RestoreImage(Env& env, const index::FixedIndex& idx, store::ChunkSource& source,
                    const std::string& target, const ImageRestoreOptions& options,
                    ImageRestoreStats* stats) {
  stats->bytes = idx.image_size();
  if (target == "-") {
    CAIRN_ASSIGN_OR_RETURN(auto out, env.OpenStdout());
    return RestoreToStream(idx, source, *out, stats);
  }
  auto existing = env.Stat(target);
  if (existing.ok()) {
    if (!options.overwrite) {
      return AlreadyExistsError(fmt::format(
          "target {} exists; pass --overwrite to write over it (only differing data matters)",
          target));
    }
    if (existing->is_dir) return InvalidArgumentError(fmt::format("target {} is a directory", target));
    CAIRN_ASSIGN_OR_RETURN(auto out, env.OpenWritable(target, OpenMode::kExisting));
    if (existing->is_block_device) {
      if (existing->size < idx.image_size()) {
        return InvalidArgumentError(fmt::format("device {} holds {} bytes, the image needs {}",
                                                target, existing->size, idx.image_size()));
      }
    } else {
      CAIRN_RETURN_IF_ERROR(out->Truncate(idx.image_size()));
    }
    CAIRN_RETURN_IF_ERROR(RestoreToFile(idx, source, *out, /*write_zeros=*/true, stats));
    CAIRN_RETURN_IF_ERROR(out->Sync());
    return out->Close();
  }
  if (existing.status().code() != StatusCode::kNotFound) return existing.status();

  std::string partial = target + ".partial";
  CAIRN_ASSIGN_OR_RETURN(auto out, env.OpenWritable(partial, OpenMode::kTruncate));
  Status s = out->Truncate(idx.image_size());
  if (s.ok()) s = RestoreToFile(idx, source, *out, /*write_zeros=*/false, stats);
  if (s.ok()) s = out->Sync();
  if (s.ok()) s = out->Close();
  if (s.ok()) s = env.Rename(partial, target);
  if (!s.ok()) {
    out.reset();
    env.RemoveFile(partial).IgnoreError();
    return s;
  }
  return env.SyncDir(DirName(target));
}

}  // namespace cairn::restore
