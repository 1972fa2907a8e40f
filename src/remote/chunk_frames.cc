#include "remote/chunk_frames.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "format/coding.h"
#include "server/api.h"

namespace cairn::remote {

// The header as the server writes it.
static_assert(32 + 1 + 4 == server::kFrameHeaderSize);

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
  target_ = buffer_for_ ? buffer_for_(index_, status_) : nullptr;
  if (target_ == nullptr) target_ = &own_;
  target_->clear();
  target_->reserve(want_);
  in_payload_ = true;
  return Status::Ok();
}

void ChunkFrameParser::EndFrame() {
  answered_[index_] = true;
  ++frames_;
  in_payload_ = false;
  header_size_ = 0;
  Bytes* payload = target_;
  target_ = nullptr;
  on_frame_(index_, status_, *payload);
}

Status ChunkFrameParser::Feed(ByteSpan piece) {
  if (!error_.ok()) return error_;
  while (!piece.empty()) {
    if (!in_payload_) {
      size_t n = std::min(piece.size(), header_.size() - header_size_);
      std::memcpy(header_.data() + header_size_, piece.data(), n);
      header_size_ += n;
      piece = piece.subspan(n);
      if (header_size_ < header_.size()) break;
      if (Status s = BeginFrame(); !s.ok()) {
        error_ = s;
        return s;
      }
      if (want_ == 0) {
        EndFrame();
        continue;
      }
    }
    size_t n = std::min<size_t>(piece.size(), want_ - target_->size());
    target_->insert(target_->end(), piece.begin(), piece.begin() + static_cast<ptrdiff_t>(n));
    piece = piece.subspan(n);
    if (target_->size() == want_) EndFrame();
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
  if (!in_payload_ && unanswered() == 0) {
    return DataLossError(fmt::format("sent {} bytes after the last frame", header_size_));
  }
  std::string cut;
  if (in_payload_) {
    crypto::Digest id;
    std::memcpy(id.data(), header_.data(), 32);
    cut = fmt::format("{} of {} bytes into the frame of chunk {}", target_->size(), want_,
                      crypto::DigestHex(id));
  } else {
    cut = fmt::format("{} bytes into a frame header", header_size_);
  }
  return UnavailableError(fmt::format("the answer ended with {} of {} chunks unsent, cut off {}",
                                      unanswered(), answered_.size(), cut));
}

}  // namespace cairn::remote
