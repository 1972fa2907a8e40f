#include "protocol/chunk_frames.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "format/coding.h"

namespace cairn::protocol {

Bytes EncodeDigestList(const std::vector<crypto::Digest>& ids) {
  Bytes body(ids.size() * 32);
  for (size_t i = 0; i < ids.size(); ++i) std::memcpy(&body[i * 32], ids[i].data(), 32);
  return body;
}

Result<std::vector<crypto::Digest>> DecodeDigestList(ByteSpan body) {
  if (body.empty() || body.size() % 32 != 0 || body.size() / 32 > kMaxBatchDigests) {
    return InvalidArgumentError(
        fmt::format("the body must be 1 to {} digests of 32 bytes (got {} bytes)",
                    kMaxBatchDigests, body.size()));
  }
  std::vector<crypto::Digest> ids(body.size() / 32);
  for (size_t i = 0; i < ids.size(); ++i) std::memcpy(ids[i].data(), &body[i * 32], 32);
  return ids;
}

std::array<uint8_t, kFrameHeaderSize> EncodeFrameHeader(const crypto::Digest& id, uint8_t status,
                                                         uint32_t length) {
  std::array<uint8_t, kFrameHeaderSize> h;
  std::memcpy(h.data(), id.data(), 32);
  h[32] = status;
  format::PutU32(&h[33], length);
  return h;
}

ChunkFrameParser::ChunkFrameParser(const std::vector<crypto::Digest>& asked, OnFrame on_frame,
                                   BufferFor buffer_for, uint32_t max_payload)
    : on_frame_(std::move(on_frame)),
      buffer_for_(std::move(buffer_for)),
      max_payload_(max_payload),
      answered_(asked.size(), false) {
  for (size_t i = 0; i < asked.size(); ++i) waiting_.emplace(asked[i], i);
}

Status ChunkFrameParser::BeginFrame() {
  crypto::Digest id;
  std::memcpy(id.data(), header_.data(), 32);
  auto it = waiting_.find(id);
  if (it == waiting_.end()) {
    return DataLossError(fmt::format("sent chunk {} that was not asked for{}",
                                     crypto::DigestHex(id),
                                     answered_.size() > waiting_.size() ? " (or already sent)"
                                                                        : ""));
  }
  uint32_t want = format::GetU32(&header_[33]);
  if (want > max_payload_) {
    return DataLossError(fmt::format("sent a frame of {} bytes for chunk {} (at most {})", want,
                                     crypto::DigestHex(id), max_payload_));
  }
  index_ = it->second;
  waiting_.erase(it);
  status_ = header_[32];
  want_ = want;
  have_ = 0;
  target_ = buffer_for_ ? buffer_for_(index_, status_) : nullptr;
  if (target_ == nullptr) target_ = &own_;
  target_->Resize(want_);
  in_payload_ = true;
  return Status::Ok();
}

void ChunkFrameParser::EndFrame() {
  answered_[index_] = true;
  ++frames_;
  in_payload_ = false;
  header_size_ = 0;
  ReadBuffer* payload = target_;
  target_ = nullptr;
  on_frame_(index_, status_, *payload);
}

MutableByteSpan ChunkFrameParser::Want() {
  if (!error_.ok() || (waiting_.empty() && at_boundary())) return {};
  if (in_payload_) return MutableByteSpan(target_->data() + have_, want_ - have_);
  return MutableByteSpan(header_.data() + header_size_, header_.size() - header_size_);
}

Status ChunkFrameParser::Got(size_t n) {
  if (!error_.ok()) return error_;
  if (in_payload_) {
    have_ += n;
  } else {
    header_size_ += n;
    if (header_size_ < header_.size()) return Status::Ok();
    if (Status s = BeginFrame(); !s.ok()) {
      error_ = s;
      return s;
    }
  }
  if (have_ == want_) EndFrame();
  return Status::Ok();
}

Status ChunkFrameParser::Feed(ByteSpan piece) {
  if (!error_.ok()) return error_;
  while (!piece.empty()) {
    MutableByteSpan want = Want();
    if (want.empty()) {
      if (!error_.ok()) return error_;
      error_ = DataLossError(fmt::format("sent {} bytes after the last frame", piece.size()));
      return error_;
    }
    size_t n = std::min(want.size(), piece.size());
    std::memcpy(want.data(), piece.data(), n);
    piece = piece.subspan(n);
    CAIRN_RETURN_IF_ERROR(Got(n));
  }
  return Status::Ok();
}

Status ChunkFrameParser::Finish() const {
  if (!error_.ok()) return error_;
  if (at_boundary()) {
    if (unanswered() == 0) return Status::Ok();
    return UnavailableError(fmt::format("the answer ended with {} of {} chunks unsent",
                                        unanswered(), answered_.size()));
  }
  std::string cut;
  if (in_payload_) {
    crypto::Digest id;
    std::memcpy(id.data(), header_.data(), 32);
    cut = fmt::format("{} of {} bytes into the frame of chunk {}", have_, want_,
                      crypto::DigestHex(id));
  } else {
    cut = fmt::format("{} bytes into a frame header", header_size_);
  }
  return UnavailableError(fmt::format("the answer ended with {} of {} chunks unsent, cut off {}",
                                      unanswered(), answered_.size(), cut));
}

void AppendUploadFrame(Bytes* out, const crypto::Digest& id, ByteSpan blob) {
  size_t at = out->size();
  out->resize(at + kUploadFrameHeaderSize);
  std::memcpy(&(*out)[at], id.data(), 32);
  format::PutU32(&(*out)[at + 32], static_cast<uint32_t>(blob.size()));
  out->insert(out->end(), blob.begin(), blob.end());
}

Result<bool> UploadFrameReader::Next(crypto::Digest* id, ByteSpan* blob) {
  if (rest_.empty()) return false;
  if (rest_.size() < kUploadFrameHeaderSize) {
    return InvalidArgumentError(
        fmt::format("chunk upload: {} bytes left after {} chunks, less than a frame header",
                    rest_.size(), frames_));
  }
  std::memcpy(id->data(), rest_.data(), 32);
  uint32_t length = format::GetU32(&rest_[32]);
  if (length > max_blob_ || length > rest_.size() - kUploadFrameHeaderSize) {
    return InvalidArgumentError(fmt::format(
        "chunk upload: chunk {} claims {} bytes, {} are left (at most {} per chunk)",
        crypto::DigestHex(*id), length, rest_.size() - kUploadFrameHeaderSize, max_blob_));
  }
  *blob = rest_.subspan(kUploadFrameHeaderSize, length);
  rest_ = rest_.subspan(kUploadFrameHeaderSize + length);
  ++frames_;
  return true;
}

}  // namespace cairn::protocol
