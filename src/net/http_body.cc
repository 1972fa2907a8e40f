#include "net/http_body.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>

namespace cairn::net {

Status BufferedReader::Fill() {
  if (!buf_) buf_ = std::make_unique_for_overwrite<uint8_t[]>(kLookahead);
  if (start_ == end_) start_ = end_ = 0;
  if (end_ == kLookahead) {
    std::memmove(buf_.get(), buf_.get() + start_, end_ - start_);
    end_ -= start_;
    start_ = 0;
  }
  size_t got = 0;
  CAIRN_RETURN_IF_ERROR(source_->ReadSome(buf_.get() + end_, kLookahead - end_, &got));
  if (got == 0) eof_ = true;
  end_ += got;
  return Status::Ok();
}

Status BufferedReader::Read(uint8_t* dest, size_t n, size_t* got) {
  *got = 0;
  if (n == 0) return Status::Ok();
  if (start_ == end_) {
    if (eof_) return Status::Ok();
    if (n >= kDirectRead) {
      CAIRN_RETURN_IF_ERROR(source_->ReadSome(dest, n, got));
      if (*got == 0) eof_ = true;
      return Status::Ok();
    }
    CAIRN_RETURN_IF_ERROR(Fill());
    if (start_ == end_) return Status::Ok();
  }
  size_t take = std::min(n, end_ - start_);
  std::memcpy(dest, buf_.get() + start_, take);
  start_ += take;
  *got = take;
  return Status::Ok();
}

Status BufferedReader::ReadExactly(uint8_t* dest, size_t n, std::string_view what) {
  size_t done = 0;
  while (done < n) {
    size_t got = 0;
    CAIRN_RETURN_IF_ERROR(Read(dest + done, n - done, &got));
    if (got == 0) {
      return UnavailableError(
          fmt::format("the connection ended {} of {} bytes into {}", done, n, what));
    }
    done += got;
  }
  return Status::Ok();
}

Status BufferedReader::ReadLine(std::string* line, size_t max, std::string_view what) {
  line->clear();
  for (;;) {
    const uint8_t* begin = buf_ ? buf_.get() + start_ : nullptr;
    const size_t have = end_ - start_;
    const void* lf = have > 0 ? std::memchr(begin, '\n', have) : nullptr;
    if (lf != nullptr) {
      size_t len = static_cast<size_t>(static_cast<const uint8_t*>(lf) - begin);
      if (line->size() + len > max + 1) {
        return DataLossError(fmt::format("{}: a line longer than {} bytes", what, max));
      }
      line->append(reinterpret_cast<const char*>(begin), len);
      start_ += len + 1;
      if (line->empty() || line->back() != '\r') {
        return DataLossError(fmt::format("{}: a line ends in a bare LF", what));
      }
      line->pop_back();
      return Status::Ok();
    }
    if (line->size() + have > max + 1) {
      return DataLossError(fmt::format("{}: a line longer than {} bytes", what, max));
    }
    if (have > 0) line->append(reinterpret_cast<const char*>(begin), have);
    start_ = end_;
    if (eof_) return UnavailableError(fmt::format("the connection ended inside {}", what));
    CAIRN_RETURN_IF_ERROR(Fill());
  }
}

Status BufferedReader::ReadHeaderBlock(std::string* out, size_t max, bool* empty_stream) {
  out->clear();
  *empty_stream = false;
  for (;;) {
    // Look for the blank line in what is buffered, together with the last
    // three bytes already taken (CR LF CR may end the previous piece).
    size_t have = end_ - start_;
    size_t before = out->size();
    if (have > 0) out->append(reinterpret_cast<const char*>(buf_.get() + start_), have);
    size_t from = before >= 3 ? before - 3 : 0;
    size_t at = out->find("\r\n\r\n", from);
    if (at != std::string::npos) {
      size_t end = at + 4;
      if (end > max) break;
      start_ += end - before;
      out->resize(end);
      return Status::Ok();
    }
    start_ = end_;
    if (out->size() > max) break;
    if (eof_) {
      if (out->empty()) {
        *empty_stream = true;
        return UnavailableError("the server closed the connection before answering");
      }
      return UnavailableError(
          fmt::format("the connection ended {} bytes into the response header", out->size()));
    }
    CAIRN_RETURN_IF_ERROR(Fill());
  }
  return DataLossError(fmt::format("a response header longer than {} bytes", max));
}

void BodyReader::Start(Mode mode, uint64_t length) {
  mode_ = mode;
  left_ = 0;
  switch (mode) {
    case Mode::kNone: state_ = State::kDone; break;
    case Mode::kLength:
      left_ = length;
      state_ = length == 0 ? State::kDone : State::kData;
      break;
    case Mode::kChunked: state_ = State::kChunkSize; break;
    case Mode::kUntilClose:
      left_ = std::numeric_limits<uint64_t>::max();
      state_ = State::kData;
      break;
  }
}

Status BodyReader::NextChunk(BufferedReader& in) {
  std::string line;
  CAIRN_RETURN_IF_ERROR(in.ReadLine(&line, kMaxChunkLine, "a chunk-size line"));
  // HEX [; extensions]: extensions are ignored.
  size_t end = line.find(';');
  std::string_view hex = std::string_view(line).substr(0, end);
  while (!hex.empty() && (hex.back() == ' ' || hex.back() == '\t')) hex.remove_suffix(1);
  if (hex.empty() || hex.size() > 15) {
    return DataLossError(fmt::format("a malformed chunk-size line ({} bytes)", line.size()));
  }
  uint64_t size = 0;
  for (char c : hex) {
    int v = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : -1;
    if (v < 0) return DataLossError("a chunk size that is not hexadecimal");
    size = size * 16 + static_cast<uint64_t>(v);
  }
  if (size == 0) return ReadTrailers(in);
  left_ = size;
  state_ = State::kData;
  return Status::Ok();
}

Status BodyReader::ReadTrailers(BufferedReader& in) {
  state_ = State::kTrailers;
  size_t total = 0;
  std::string line;
  for (;;) {
    CAIRN_RETURN_IF_ERROR(in.ReadLine(&line, kMaxChunkLine, "the trailers of a chunked body"));
    if (line.empty()) break;
    total += line.size() + 2;
    if (total > kMaxTrailers) {
      return DataLossError(fmt::format("trailers longer than {} bytes", kMaxTrailers));
    }
  }
  state_ = State::kDone;
  return Status::Ok();
}

Status BodyReader::Read(BufferedReader& in, uint8_t* dest, size_t n, size_t* got) {
  *got = 0;
  for (;;) {
    switch (state_) {
      case State::kDone: return Status::Ok();
      case State::kChunkSize: CAIRN_RETURN_IF_ERROR(NextChunk(in)); continue;
      case State::kChunkEnd: {
        std::string line;
        CAIRN_RETURN_IF_ERROR(in.ReadLine(&line, 0, "the end of a chunk"));
        if (!line.empty()) return DataLossError("a chunk longer than its size");
        state_ = State::kChunkSize;
        continue;
      }
      case State::kTrailers: CAIRN_RETURN_IF_ERROR(ReadTrailers(in)); continue;
      case State::kData: break;
    }
    if (n == 0) return Status::Ok();
    size_t want = static_cast<size_t>(std::min<uint64_t>(n, left_));
    CAIRN_RETURN_IF_ERROR(in.Read(dest, want, got));
    if (*got == 0) {
      if (mode_ == Mode::kUntilClose) {
        state_ = State::kDone;
        return Status::Ok();
      }
      return UnavailableError(mode_ == Mode::kLength
                                  ? fmt::format("the connection ended {} bytes before the end of "
                                                "the response body",
                                                left_)
                                  : std::string("the connection ended inside a chunked body"));
    }
    if (mode_ != Mode::kUntilClose) left_ -= *got;
    if (left_ == 0) state_ = mode_ == Mode::kChunked ? State::kChunkEnd : State::kDone;
    return Status::Ok();
  }
}

Status BodyReader::ReadExactly(BufferedReader& in, uint8_t* dest, size_t n,
                               std::string_view what) {
  size_t done = 0;
  while (done < n) {
    size_t got = 0;
    CAIRN_RETURN_IF_ERROR(Read(in, dest + done, n - done, &got));
    if (got == 0) {
      return UnavailableError(
          fmt::format("the response body ended {} of {} bytes into {}", done, n, what));
    }
    done += got;
  }
  return Status::Ok();
}

Status BodyReader::Drain(BufferedReader& in, uint64_t max) {
  uint8_t scratch[16 << 10];
  uint64_t total = 0;
  for (;;) {
    size_t got = 0;
    CAIRN_RETURN_IF_ERROR(Read(in, scratch, sizeof(scratch), &got));
    if (got == 0) return Status::Ok();
    total += got;
    if (total > max) return DataLossError(fmt::format("a response body over {} bytes", max));
  }
}

}  // namespace cairn::net
