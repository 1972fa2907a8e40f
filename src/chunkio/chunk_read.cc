#include "chunkio/chunk_read.h"

#include <string>

#include <fmt/format.h>

#include "blob/blob.h"

namespace cairn::chunkio {

namespace {

// A chunk that an index lists and the store lacks is lost data (exit 3),
// whichever way it was read.
Status MissingIsDataLoss(Status s) {
  if (s.code() == StatusCode::kNotFound) return DataLossError(std::string(s.message()));
  return s;
}

}  // namespace

Status ReadStoredChunk(store::ChunkSource& source, const crypto::Digest& id, ReadBuffer* out) {
  return MissingIsDataLoss(source.ReadInto(id, out));
}

pipeline::AsyncFetchFn AsyncChunkReads(store::ChunkSource& source,
                                       std::function<crypto::Digest(size_t)> id_of) {
  if (!source.ReadsAsync()) return {};
  return [&source, id_of = std::move(id_of)](size_t k, ReadBuffer* out,
                                             pipeline::FetchDoneFn done) {
    source.ReadIntoAsync(id_of(k), out, [done = std::move(done)](Status s) {
      done(MissingIsDataLoss(std::move(s)));
    });
  };
}

Result<ByteSpan> DecodeCheckedChunk(ByteSpan stored, const crypto::Digest& id,
                                    uint32_t length, ReadBuffer* scratch,
                                    const crypto::CryptConfig* crypt) {
  auto plain = blob::DecodeChunkView(stored, id, scratch, crypt);
  if (!plain.ok()) {
    return plain.status().WithContext(fmt::format("chunk {}", crypto::DigestHex(id)));
  }
  if (plain->size() != length) {
    return DataLossError(fmt::format("chunk {}: {} bytes, the index needs {}",
                                     crypto::DigestHex(id), plain->size(), length));
  }
  return plain;
}

Result<ByteSpan> CheckFetchedChunk(ByteSpan stored, const crypto::Digest& id, uint32_t length,
                                   const crypto::CryptConfig* crypt, pipeline::StageMeter* meter) {
  pipeline::StageTimer timer(meter, pipeline::Stage::kDecode);
  thread_local ReadBuffer scratch;
  return DecodeCheckedChunk(stored, id, length, &scratch, crypt);
}

pipeline::ConcurrencyController::Options ReadConcurrency(const store::SourceTraits& traits,
                                                         int jobs) {
  return pipeline::ConcurrencyController::Options::ForJobs(jobs, traits.initial_reads_in_flight,
                                                           traits.max_reads_in_flight);
}

pipeline::FetchPipelineOptions ReadPipelineOptions(const store::SourceTraits& traits, int jobs,
                                                   pipeline::ConcurrencyController* controller) {
  pipeline::FetchPipelineOptions p;
  p.controller = controller;
  p.max_io_threads = ReadConcurrency(traits, jobs).max;
  return p;
}

}  // namespace cairn::chunkio
