// The binary frames of the chunk routes (docs/FORMAT.md, "Wire frames";
// docs/SERVER.md, "Batched chunk download" and "Backup sessions").
//
// Download (POST …/chunks): the request body is 1 to kMaxBatchDigests
// digests of 32 bytes; the answer is one frame per digest asked, in the
// order the server read them:
//
//   digest[32] | status u8 | length u32 LE | payload[length]
//
// status kFrameOk: the payload is the stored chunk (a blob, not decoded);
// kFrameNotFound: no such chunk, or not the token's to read; kFrameError: a
// read error, the payload a UTF-8 message.
//
// Upload (POST …/backup/ID/chunks): the request body is frames
//
//   digest[32] | length u32 LE | blob[length]
//
// ChunkFrameParser reads a download answer as it arrives, in pieces of any
// size, and can hand the caller the very memory each payload goes to (so a
// chunk is decrypted straight into a pipeline's buffer). UploadFrameReader
// walks an upload body. Both treat their input as hostile.
//
// Thread safety: none; one parser or reader per body.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "base/bytes.h"
#include "base/read_buffer.h"
#include "base/status.h"
#include "crypto/sha256.h"

namespace cairn::protocol {

enum FrameStatus : uint8_t { kFrameOk = 0, kFrameNotFound = 1, kFrameError = 2 };
inline constexpr size_t kFrameHeaderSize = 32 + 1 + 4;
inline constexpr size_t kUploadFrameHeaderSize = 32 + 4;
// The most digests one batched download may name.
inline constexpr size_t kMaxBatchDigests = 1024;
// The largest frame payload a client accepts: far above the largest chunk.
inline constexpr uint32_t kMaxChunkFramePayload = 64u << 20;

// --- download ------------------------------------------------------------

// The request body for `ids`.
Bytes EncodeDigestList(const std::vector<crypto::Digest>& ids);
// The digests of a request body; InvalidArgument unless it holds 1 to
// kMaxBatchDigests whole digests.
Result<std::vector<crypto::Digest>> DecodeDigestList(ByteSpan body);

// A frame's header.
std::array<uint8_t, kFrameHeaderSize> EncodeFrameHeader(const crypto::Digest& id, uint8_t status,
                                                         uint32_t length);

class ChunkFrameParser {
 public:
  // Where the payload of the frame answering asked[index] goes, called when
  // its header is complete: a buffer of the caller's (its content replaced,
  // its capacity reused), or nullptr for the parser's own buffer.
  using BufferFor = std::function<ReadBuffer*(size_t index, uint8_t status)>;
  // A frame is complete: it answers asked[index]; `payload` is the buffer its
  // bytes went to (the callee may move from it).
  using OnFrame = std::function<void(size_t index, uint8_t status, ReadBuffer& payload)>;

  // `asked`: the digests of the request, in its order; a digest asked twice
  // may be answered twice.
  ChunkFrameParser(const std::vector<crypto::Digest>& asked, OnFrame on_frame,
                   BufferFor buffer_for = nullptr, uint32_t max_payload = kMaxChunkFramePayload);

  // Filling in place: Want() is where the next bytes of the stream go (the
  // rest of a frame header, or of a payload, inside the buffer BufferFor
  // gave); after writing n ≤ Want().size() bytes there, Got(n) takes them,
  // calling on_frame for a frame it completes. Want() is empty after an
  // error, and once every digest asked was answered.
  MutableByteSpan Want();
  Status Got(size_t n);

  // Copying: consumes `piece` through Want()/Got(). After an error every
  // later call returns it again; bytes past the last frame expected are
  // DataLoss.
  Status Feed(ByteSpan piece);

  // Once the stream ended: OK when every digest asked was answered, else
  // Unavailable saying how many were not and whether a frame was cut off
  // (the answer was cut short: worth asking again for what is missing).
  // The first error instead, if there was one.
  Status Finish() const;

  bool answered(size_t index) const { return answered_[index]; }
  size_t frames() const { return frames_; }  // complete frames so far
  size_t unanswered() const { return answered_.size() - frames_; }
  // True when the bytes so far end between two frames.
  bool at_boundary() const { return !in_payload_ && header_size_ == 0; }
  const Status& error() const { return error_; }

 private:
  Status BeginFrame();
  void EndFrame();

  const OnFrame on_frame_;
  const BufferFor buffer_for_;
  const uint32_t max_payload_;
  std::multimap<crypto::Digest, size_t> waiting_;  // digest → index, not yet begun
  std::vector<bool> answered_;
  size_t frames_ = 0;
  Status error_;

  std::array<uint8_t, kFrameHeaderSize> header_{};
  size_t header_size_ = 0;
  bool in_payload_ = false;
  size_t index_ = 0;  // in_payload_: which digest the frame answers
  uint8_t status_ = 0;
  uint32_t want_ = 0;  // in_payload_: the payload's length
  size_t have_ = 0;    // in_payload_: payload bytes so far
  ReadBuffer* target_ = nullptr;
  ReadBuffer own_;
};

// --- upload --------------------------------------------------------------

// Appends one upload frame for `id` and `blob` to `out`.
void AppendUploadFrame(Bytes* out, const crypto::Digest& id, ByteSpan blob);

class UploadFrameReader {
 public:
  // `max_blob`: the largest blob a frame may carry.
  UploadFrameReader(ByteSpan body, uint32_t max_blob) : rest_(body), max_blob_(max_blob) {}
  // The next frame: true and its digest and blob; false at the end of the
  // body. InvalidArgument for a frame that is cut short or too large.
  Result<bool> Next(crypto::Digest* id, ByteSpan* blob);
  size_t frames() const { return frames_; }

 private:
  ByteSpan rest_;
  const uint32_t max_blob_;
  size_t frames_ = 0;
};

}  // namespace cairn::protocol
