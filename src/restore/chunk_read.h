// The one "read, decode, check" path for a chunk that an index names: image
// and tree restore, `ls`/`cat` and the instant-access readers (access/) all
// fetch a chunk's stored bytes and check them through these two functions,
// so a damaged chunk is found and described the same way everywhere.
//
// Thread safety: both functions are thread-safe (the source is).
#pragma once

#include <cstdint>

#include "base/read_buffer.h"
#include "base/status.h"
#include "crypto/crypt_config.h"
#include "store/chunk_source.h"

namespace cairn::restore {

// Reads the stored bytes of `id` from `source`. A chunk an index needs but
// the source lacks is damage: NotFound becomes DataLoss.
Status ReadStoredChunk(store::ChunkSource& source, const crypto::Digest& id, ReadBuffer* out);

// Fully checks a stored chunk (CRC, decryption with `crypt` when set,
// decompression, id against `id`, `length`) and returns a view of its
// plaintext, in `stored` or `scratch`. Errors name the chunk.
Result<ByteSpan> DecodeCheckedChunk(ByteSpan stored, const crypto::Digest& id,
                                    uint32_t length, ReadBuffer* scratch,
                                    const crypto::CryptConfig* crypt);

}  // namespace cairn::restore
