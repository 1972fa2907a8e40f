// Chunk uploads of a backup session (server/backup_session.h, "The rules"):
// each frame is proved as far as the server can, stored without ever
// letting an unproven copy stand over a proved one, and recorded as a chunk
// the session may reference.
//
// A plain frame: the server decodes it and hashes the plaintext, which
// must be the frame's digest; the frame is then "proven". If a chunk of
// that digest is stored already, it is kept when it is a plain chunk that
// passes its CRC (every plain chunk was proved when it was stored), and
// replaced otherwise: a fake "encrypted" blob planted under a plain
// chunk's digest, or a damaged copy, gives way to the verified upload.
// An encrypted frame: the server has no key; it checks the CRC and stores
// the blob only where nothing is stored (Insert never replaces). It is
// "unproven": referenced, never read.
//
// Cost: a frame for a digest the session already holds (its base, a
// frame proved before) is skipped without any work, so repeating one
// small frame that expands to 16 MiB costs one decode; a stored chunk
// byte-identical to the upload needs no decode either. What plain frames
// decode to is charged against the request's and the session's caps
// before the work is done.
#include <fmt/format.h>

#include <chrono>
#include <cstring>

#include "base/read_buffer.h"
#include "blob/blob.h"
#include "protocol/chunk_frames.h"
#include "server/backup_session.h"
#include "server/backup_session_state.h"

namespace cairn::server {
namespace {

// The largest stored chunk accepted: a blob of kMaxRawSize that did not
// compress, plus its header and the AEAD overhead.
constexpr uint32_t kMaxStoredChunk = blob::kMaxRawSize + 4096;

Status Refused(const crypto::Digest& id, std::string_view why) {
  return InvalidArgumentError(fmt::format("chunk {} refused: {}", crypto::DigestHex(id), why));
}

// The proof of a plain upload: its plaintext hashes to `id`. Decoded into
// the worker's own recycled buffer (never zero-filled, in huge pages), and
// an uncompressed chunk is hashed where it lies: a fresh Bytes per chunk
// cost a zero fill (a compressed chunk) or a copy (an uncompressed one)
// and a page fault per 4 KiB, which was a third of the server's page
// faults during a backup through it.
Status Prove(ByteSpan blob, const crypto::Digest& id) {
  thread_local ReadBuffer scratch;
  if (Status v = blob::DecodeChunkView(blob, id, &scratch).status(); !v.ok()) {
    return Refused(id, v.message());
  }
  return Status::Ok();
}

}  // namespace

Result<UploadResult> SessionRegistry::UploadChunks(
    BackupSession& s, ByteSpan frames,
    const std::function<void(uint64_t bytes, double seconds)>& on_chunk) {
  UploadResult result;
  uint64_t request_decoded = 0;
  protocol::UploadFrameReader reader(frames, kMaxStoredChunk);
  crypto::Digest id;
  ByteSpan blob;
  for (;;) {
    CAIRN_ASSIGN_OR_RETURN(bool more, reader.Next(&id, &blob));
    if (!more) break;
    const auto start = std::chrono::steady_clock::now();
    CAIRN_RETURN_IF_ERROR(AdmitChunk(s, id, blob, &request_decoded));
    if (on_chunk) {
      on_chunk(blob.size(),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    ++result.chunks;
    result.bytes += blob.size();
  }
  return result;
}

Status SessionRegistry::Charge(BackupSession& s, uint64_t raw_size, uint64_t* request_decoded) {
  *request_decoded += raw_size;
  if (*request_decoded > limits_.max_decoded_per_request) {
    return OutOfRangeError(
        fmt::format("chunk upload: the plain chunks of one request may decode to at most {} MiB "
                    "(limits.max_decoded_mib_per_request); send fewer chunks per request",
                    limits_.max_decoded_per_request >> 20));
  }
  std::lock_guard lock(s.mu);
  s.decoded_bytes += raw_size;
  if (s.decoded_bytes > limits_.max_decoded_per_session) {
    return OutOfRangeError(
        fmt::format("backup session: the plain chunks of one session may decode to at most {} GiB "
                    "(limits.max_decoded_gib_per_session)",
                    limits_.max_decoded_per_session >> 30));
  }
  return Status::Ok();
}

Status SessionRegistry::AdmitChunk(BackupSession& s, const crypto::Digest& id, ByteSpan blob,
                                   uint64_t* request_decoded) {
  const datastore::Datastore& store = *s.store;
  bool in_base = false;
  {
    std::lock_guard lock(s.mu);
    // Held already (a repeat): nothing to do.
    if (s.proven.contains(id)) return Status::Ok();
    in_base = s.base.contains(id);
  }
  // A chunk of the base is held too, unless a verify quarantined it since
  // the base was written (it is no longer present): a client re-reading
  // its data after a failed verify uploads it again, and this stores the
  // good copy, which heals the store (issue 29: the soak found backups
  // through the server that listed the quarantined chunk instead). A
  // client sends a base chunk only then, so the check costs nothing else.
  if (in_base) {
    CAIRN_ASSIGN_OR_RETURN(bool present, store.sink().Contains(id));
    if (present) return Status::Ok();
  }
  auto header = blob::Check(blob);
  if (!header.ok()) return Refused(id, header.status().message());
  if (header->encryption != blob::Encryption::kNone) {
    ChunkMode mode{true, header->key_print};
    {
      std::lock_guard lock(s.mu);
      if (s.unproven.contains(id)) return Status::Ok();
      if (s.upload_key && *s.upload_key != mode) {
        return Refused(id, fmt::format("encrypted with key print {}, while this session's chunks "
                                       "are encrypted with {}: one key per backup",
                                       ToHex(mode.key_print), ToHex(s.upload_key->key_print)));
      }
      s.upload_key = mode;
    }
    // Never over a stored chunk: the server cannot tell a real encrypted
    // chunk from a fake one, so what is there stays.
    CAIRN_ASSIGN_OR_RETURN(bool present, store.sink().Contains(id));
    if (!present) CAIRN_RETURN_IF_ERROR(store.sink().InsertAbsent(id, blob).status());
    std::lock_guard lock(s.mu);
    s.unproven.insert(id);
    return Status::Ok();
  }

  // Plain: proved by decoding, unless a valid stored copy is byte-identical.
  CAIRN_ASSIGN_OR_RETURN(bool present, store.sink().Contains(id));
  bool inserted = false;
  bool decoded = false;
  for (int round = 0; round < 2 && !inserted; ++round) {
    std::string why_replaced;
    if (present) {
      auto stored = store.source().Read(id);
      auto stored_header =
          stored.ok() ? blob::Check(*stored) : Result<blob::Header>(stored.status());
      if (stored_header.ok() && stored_header->encryption == blob::Encryption::kNone) {
        if (!decoded && !std::equal(blob.begin(), blob.end(), stored->begin(), stored->end())) {
          CAIRN_RETURN_IF_ERROR(Charge(s, header->raw_size, request_decoded));
          CAIRN_RETURN_IF_ERROR(Prove(blob, id));
        }
        break;  // the stored copy stays: it was proved when it was stored
      }
      why_replaced = stored_header.ok() ? "encrypted (an unproven upload)"
                                        : std::string(stored_header.status().message());
    }
    if (!decoded) {
      CAIRN_RETURN_IF_ERROR(Charge(s, header->raw_size, request_decoded));
      CAIRN_RETURN_IF_ERROR(Prove(blob, id));
      decoded = true;
    }
    if (present) {
      CAIRN_RETURN_IF_ERROR(store.sink().Replace(id, blob).status());
      logger_.Warn(
          "chunk {} in datastore '{}': the stored copy was {}; replaced by the verified "
          "upload of token '{}'",
          crypto::DigestHex(id), s.store_name, why_replaced, s.token);
      inserted = true;
    } else {
      // Absent when asked above: the store need not ask again.
      CAIRN_ASSIGN_OR_RETURN(store::InsertResult r, store.sink().InsertAbsent(id, blob));
      inserted = r.inserted;
      present = !inserted;  // another writer got there first: check its copy
    }
  }
  std::lock_guard lock(s.mu);
  s.proven.insert(id);
  return Status::Ok();
}

}  // namespace cairn::server
