// The one "fetch checked" step for a chunk that an index names: image and
// tree restore, the tree reader (`ls`/`cat`), verify's reads and the
// instant-access readers (access/) all fetch a chunk's stored bytes and
// check them (CRC, decryption, decompression, id, length) through these
// functions, so a damaged chunk is found and described the same way
// everywhere.
//
// And the one rule for how many reads of a source are in flight
// (ReadConcurrency, ReadPipelineOptions): the concurrency controller starts
// at the source's suggestion (or --jobs N, pinned), may grow to the
// source's ceiling (64; 128 for an object store) or N when that is larger,
// and the fetch pipeline keeps as many I/O threads as the controller may
// ask for, so the ceiling is reachable.
//
// Thread safety: all functions are thread-safe (the source is).
#pragma once

#include <cstdint>
#include <functional>

#include "base/read_buffer.h"
#include "base/status.h"
#include "crypto/crypt_config.h"
#include "pipeline/concurrency_controller.h"
#include "pipeline/fetch_pipeline.h"
#include "pipeline/stage_meter.h"
#include "store/chunk_source.h"

namespace cairn::chunkio {

// Reads the stored bytes of `id` from `source`. A chunk an index needs but
// the source lacks is damage: NotFound becomes DataLoss.
Status ReadStoredChunk(store::ChunkSource& source, const crypto::Digest& id, ReadBuffer* out);

// Fully checks a stored chunk (CRC, decryption with `crypt` when set,
// decompression, id against `id`, `length`) and returns a view of its
// plaintext, in `stored` or `scratch`. Errors name the chunk.
Result<ByteSpan> DecodeCheckedChunk(ByteSpan stored, const crypto::Digest& id,
                                    uint32_t length, ReadBuffer* scratch,
                                    const crypto::CryptConfig* crypt);

// DecodeCheckedChunk for a pipeline's CPU worker: into this thread's
// scratch buffer (the view lives until this thread's next call), timed as
// decode in `meter` (null: not timed).
Result<ByteSpan> CheckFetchedChunk(ByteSpan stored, const crypto::Digest& id, uint32_t length,
                                   const crypto::CryptConfig* crypt, pipeline::StageMeter* meter);

// ReadStoredChunk without waiting, for a fetch pipeline whose item k is
// chunk id_of(k): the pipeline's options.fetch_async when `source` reads
// asynchronously (an object store), empty otherwise (the pipeline then
// reads on its I/O threads, with ReadStoredChunk). `source` and `id_of`
// must outlive the pipeline run.
pipeline::AsyncFetchFn AsyncChunkReads(store::ChunkSource& source,
                                       std::function<crypto::Digest(size_t)> id_of);

// The controller's options for reads of a source with `traits` under
// --jobs `jobs` (0: adaptive). See the file comment.
pipeline::ConcurrencyController::Options ReadConcurrency(const store::SourceTraits& traits,
                                                         int jobs);

// Fetch pipeline options for reads of that source under `controller` (made
// from ReadConcurrency(traits, jobs)): its I/O threads are the controller's
// ceiling. The caller sets CPU workers, byte budget and progress.
pipeline::FetchPipelineOptions ReadPipelineOptions(const store::SourceTraits& traits, int jobs,
                                                   pipeline::ConcurrencyController* controller);

}  // namespace cairn::chunkio
