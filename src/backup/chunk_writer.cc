#include "backup/chunk_writer.h"

#include "blob/blob.h"
#include "index/fixed_index.h"

namespace cairn::backup {

using pipeline::Stage;
using pipeline::StageTimer;

ChunkWriter::ChunkWriter(store::ChunkSink& sink, const Options& options)
    : sink_(sink),
      options_(options),
      usual_zero_(options.usual_length > 0
                      ? index::ZeroChunkDigest(options.usual_length, options.crypt)
                      : crypto::Digest{}) {}

Result<crypto::Digest> ChunkWriter::Store(ByteSpan data) {
  bool zero = false;
  const crypto::Digest id = Id(data, &zero);
  chunks_.fetch_add(1, std::memory_order_relaxed);
  if (zero) zero_chunks_.fetch_add(1, std::memory_order_relaxed);
  if (!Claim(id) || (options_.known != nullptr && options_.known->contains(id))) {
    CountReused(data.size());
    return id;
  }
  Result<bool> contains = [&] {
    StageTimer timer(options_.meter, Stage::kMetadata);  // a stat, or a question to the server
    return sink_.Contains(id);
  }();
  CAIRN_ASSIGN_OR_RETURN(bool present, std::move(contains));
  if (present) {
    CountReused(data.size());
    return id;
  }
  thread_local Bytes stored;
  {
    StageTimer timer(options_.meter, Stage::kCompress);
    blob::EncodeOptions encode;
    encode.crypt = options_.crypt;
    CAIRN_RETURN_IF_ERROR(blob::EncodeInto(data, encode, &stored));
  }
  Result<store::InsertResult> inserted = [&] {
    StageTimer timer(options_.meter, Stage::kTargetWrites);
    return sink_.InsertAbsent(id, stored);
  }();
  CAIRN_ASSIGN_OR_RETURN(store::InsertResult r, std::move(inserted));
  if (!r.inserted) {  // raced with another writer
    CountReused(data.size());
    return id;
  }
  new_chunks_.fetch_add(1, std::memory_order_relaxed);
  new_bytes_.fetch_add(data.size(), std::memory_order_relaxed);
  stored_bytes_.fetch_add(r.stored_bytes, std::memory_order_relaxed);
  return id;
}

ChunkWriterStats ChunkWriter::stats() const {
  ChunkWriterStats s;
  s.chunks = chunks_;
  s.zero_chunks = zero_chunks_;
  s.new_chunks = new_chunks_;
  s.new_bytes = new_bytes_;
  s.stored_bytes = stored_bytes_;
  s.reused_chunks = reused_chunks_;
  s.reused_bytes = reused_bytes_;
  return s;
}

crypto::Digest ChunkWriter::Id(ByteSpan data, bool* zero) {
  StageTimer timer(options_.meter, Stage::kHash);
  *zero = IsAllZero(data);
  if (!*zero) return blob::ChunkId(data, options_.crypt);
  if (options_.usual_length > 0 && data.size() == options_.usual_length) return usual_zero_;
  return ZeroId(data.size());
}

crypto::Digest ChunkWriter::ZeroId(size_t length) {
  {
    MutexLock lock(mu_);
    auto it = zero_ids_.find(length);
    if (it != zero_ids_.end()) return it->second;
  }
  const crypto::Digest id = blob::ChunkId(Bytes(length, 0), options_.crypt);
  MutexLock lock(mu_);
  zero_ids_.emplace(length, id);
  return id;
}

bool ChunkWriter::Claim(const crypto::Digest& id) {
  MutexLock lock(mu_);
  return claimed_.insert(id).second;
}

void ChunkWriter::CountReused(size_t bytes) {
  reused_chunks_.fetch_add(1, std::memory_order_relaxed);
  reused_bytes_.fetch_add(bytes, std::memory_order_relaxed);
}

}  // namespace cairn::backup
