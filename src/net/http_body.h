// The client's reading of an HTTP/1.1 response from a stream of plaintext:
// BufferedReader (a small look-ahead for header lines, large reads straight
// into the caller's memory) and BodyReader (a body delimited by
// Content-Length, by chunked transfer encoding, or by the end of the
// connection), so that a chunk in a batched download is decrypted straight
// into the pipeline's buffer instead of passing through a parser's
// (docs/ARCHITECTURE.md, "The data plane").
//
// What the server sends is treated as hostile: chunk-size lines and trailers
// are bounded, sizes are checked for overflow, and every malformed byte is a
// DataLoss error naming what was wrong; an end of stream inside a body is
// Unavailable (the transfer was cut: worth retrying). fuzz/http_body_fuzz.cc
// feeds it random streams.
//
// Thread safety: none; one reader per connection.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/bytes.h"
#include "base/status.h"

namespace cairn::net {

// Where plaintext comes from (the TLS connection; memory in tests).
class PlainSource {
 public:
  virtual ~PlainSource() = default;
  // Reads 1 to n bytes into `dest` (*got), or *got = 0 at a clean end of
  // stream. Errors are the transport's (Unavailable).
  virtual Status ReadSome(uint8_t* dest, size_t n, size_t* got) = 0;
};

class BufferedReader {
 public:
  // Reads of at least this many bytes skip the look-ahead when it is empty.
  static constexpr size_t kDirectRead = 16 << 10;
  static constexpr size_t kLookahead = 64 << 10;

  explicit BufferedReader(PlainSource* source) : source_(source) {}

  // Up to n bytes: from the look-ahead, else straight from the source into
  // `dest` (large reads) or through the look-ahead (small ones). *got = 0 at
  // the end of the stream.
  Status Read(uint8_t* dest, size_t n, size_t* got);
  // Exactly n bytes; Unavailable naming `what` if the stream ends first.
  Status ReadExactly(uint8_t* dest, size_t n, std::string_view what);
  // One line ending in CRLF, without it. DataLoss when longer than `max`
  // or ending in a bare LF; Unavailable at the end of the stream.
  Status ReadLine(std::string* line, size_t max, std::string_view what);
  // Bytes up to and including the blank line that ends an HTTP header
  // (CRLF CRLF), at most `max`. *empty_stream is set when the stream ended
  // before its first byte (a keep-alive connection the server closed).
  Status ReadHeaderBlock(std::string* out, size_t max, bool* empty_stream);

  // Bytes read ahead and not yet taken (pipelined data after a response).
  size_t buffered() const { return end_ - start_; }
  void Reset() { start_ = end_ = 0; }

 private:
  Status Fill();  // reads more into the look-ahead; Unavailable-free EOF sets eof_

  PlainSource* source_;
  std::unique_ptr<uint8_t[]> buf_;
  size_t start_ = 0;
  size_t end_ = 0;
  bool eof_ = false;
};

class BodyReader {
 public:
  enum class Mode { kNone, kLength, kChunked, kUntilClose };

  BodyReader() = default;
  // A body of `length` bytes, chunked, or up to the end of the connection.
  void Start(Mode mode, uint64_t length = 0);

  // Up to n body bytes into `dest`; *got = 0 once the body is complete.
  Status Read(BufferedReader& in, uint8_t* dest, size_t n, size_t* got);
  // Exactly n body bytes: Unavailable when the body (or the stream) ends
  // first, naming `what`.
  Status ReadExactly(BufferedReader& in, uint8_t* dest, size_t n, std::string_view what);
  // Reads and discards the rest of the body, at most `max` bytes (DataLoss past it).
  Status Drain(BufferedReader& in, uint64_t max);

  bool done() const { return state_ == State::kDone; }
  // The body ran to the end of the connection (kUntilClose): not reusable.
  bool until_close() const { return mode_ == Mode::kUntilClose; }

  static constexpr size_t kMaxChunkLine = 4096;
  static constexpr size_t kMaxTrailers = 16 << 10;

 private:
  enum class State { kDone, kData, kChunkSize, kChunkEnd, kTrailers };
  Status NextChunk(BufferedReader& in);
  Status ReadTrailers(BufferedReader& in);

  Mode mode_ = Mode::kNone;
  State state_ = State::kDone;
  uint64_t left_ = 0;  // kData: bytes left in the body (kLength) or chunk
};

}  // namespace cairn::net
