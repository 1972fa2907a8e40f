#include "access/stream_reader.h"

#include <cstring>

#include <fmt/format.h>

namespace cairn::access {

StreamReader::StreamReader(std::unique_ptr<ChunkMap> map, const StreamReaderOptions& options)
    : map_(std::move(map)), options_(options),
      readahead_(*map_, *options.cache, *options.source, options.crypt, options.description,
                 options.readahead) {}

StreamReader::~StreamReader() = default;

Result<ChunkRef> StreamReader::GetChunk(size_t i) {
  const crypto::Digest& id = map_->Id(i);
  const uint32_t length = map_->Length(i);
  CAIRN_ASSIGN_OR_RETURN(ChunkRef chunk, options_.cache->Get(id, [&]() -> Result<DecodedChunk> {
    auto loaded = LoadChunk(*options_.source, id, length, options_.crypt,
                            &options_.cache->buffers());
    if (!loaded.ok()) return loaded.status().WithContext(DescribeChunk(options_.description, *map_, i));
    return loaded;
  }));
  if (chunk->data.size() != length) {  // one id at two lengths: the index is inconsistent
    return DataLossError(fmt::format("{}: chunk {} holds {} bytes, the index needs {}",
                                     DescribeChunk(options_.description, *map_, i),
                                     crypto::DigestHex(id), chunk->data.size(), length));
  }
  return chunk;
}

Status StreamReader::Read(uint64_t offset, MutableByteSpan out) {
  const uint64_t size = map_->size();
  if (offset > size || out.size() > size - offset) {
    return OutOfRangeError(fmt::format("{}: bytes [{}, {}) are outside its {} bytes",
                                       options_.description, offset, offset + out.size(), size));
  }
  if (out.empty()) return Status::Ok();
  reads_.fetch_add(1, std::memory_order_relaxed);
  readahead_.OnRead(offset, out.size());
  const uint64_t end = offset + out.size();
  for (size_t i = map_->Find(offset); i < map_->count() && map_->Start(i) < end; ++i) {
    const uint64_t start = map_->Start(i);
    const uint64_t from = std::max(offset, start);
    const uint64_t to = std::min(end, map_->End(i));
    uint8_t* dst = out.data() + (from - offset);
    if (map_->IsZero(i)) {
      std::memset(dst, 0, to - from);
      continue;
    }
    auto chunk = GetChunk(i);
    if (!chunk.ok()) {
      failed_reads_.fetch_add(1, std::memory_order_relaxed);
      return chunk.status();
    }
    std::memcpy(dst, (*chunk)->data.data() + (from - start), to - from);
  }
  bytes_read_.fetch_add(out.size(), std::memory_order_relaxed);
  return Status::Ok();
}

StreamReaderStats StreamReader::stats() const {
  StreamReaderStats s;
  s.reads = reads_.load();
  s.bytes_read = bytes_read_.load();
  s.failed_reads = failed_reads_.load();
  s.readahead = readahead_.stats();
  return s;
}

}  // namespace cairn::access
