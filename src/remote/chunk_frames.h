// ChunkFrameParser: the client's parser of a batched chunk download answer
// (docs/SERVER.md, "Batched chunk download"), a stream of frames
//   digest[32] | status u8 | length u32 LE | payload[length]
// one per digest asked. Bytes are fed in pieces of any size, as they come
// off the connection; each frame is handed out once its payload is complete.
//
// What the server sends is checked, not trusted: a frame for a digest that
// was not asked for (or answered more often than asked) and a payload over
// the maximum are DataLoss errors, after which the parser stays failed; a
// stream that ends early leaves digests unanswered (Finish() says which).
// The status byte is passed on as sent: the caller decides what an unknown
// one means. Chunk contents are not checked here (the pipeline does that).
//
// Thread safety: none; one parser per answer.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "base/bytes.h"
#include "base/status.h"
#include "crypto/sha256.h"

namespace cairn::remote {

// The largest frame payload accepted: far above the largest chunk.
inline constexpr uint32_t kMaxChunkFramePayload = 64u << 20;

class ChunkFrameParser {
 public:
  // Where the payload of the frame answering asked[index] goes, called when
  // its header is complete: a buffer of the caller's (cleared, its capacity
  // reused, so a chunk can land in a reader's buffer without a copy), or
  // nullptr for the parser's own buffer.
  using BufferFor = std::function<Bytes*(size_t index, uint8_t status)>;
  // A frame is complete: it answers asked[index]; `payload` is the buffer its
  // bytes went to (the callee may move from it).
  using OnFrame = std::function<void(size_t index, uint8_t status, Bytes& payload)>;

  // `asked`: the digests of the request, in its order; a digest asked twice
  // may be answered twice.
  ChunkFrameParser(const std::vector<crypto::Digest>& asked, OnFrame on_frame,
                   BufferFor buffer_for = nullptr, uint32_t max_payload = kMaxChunkFramePayload);

  // Consumes `piece`, calling on_frame for every frame it completes. After
  // an error every later call returns it again.
  Status Feed(ByteSpan piece);

  // Once the stream ended: OK when every digest asked was answered, else
  // Unavailable saying how many were not and whether a frame was cut off
  // (the answer was cut short: worth asking again for what is missing).
  // The first Feed() error instead, if there was one.
  Status Finish() const;

  bool answered(size_t index) const { return answered_[index]; }
  size_t frames() const { return frames_; }  // complete frames so far
  size_t unanswered() const { return answered_.size() - frames_; }
  // True when the bytes fed so far end between two frames.
  bool at_boundary() const { return !in_payload_ && header_size_ == 0; }

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

  std::array<uint8_t, 32 + 1 + 4> header_{};
  size_t header_size_ = 0;
  bool in_payload_ = false;
  size_t index_ = 0;   // in_payload_: which digest the frame answers
  uint8_t status_ = 0;
  uint32_t want_ = 0;  // in_payload_: the payload's length
  Bytes* target_ = nullptr;
  Bytes own_;
};

}  // namespace cairn::remote
