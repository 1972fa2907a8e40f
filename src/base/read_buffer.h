// ReadBuffer: a reusable byte buffer for reads (the chunk buffers the
// pipelines recycle, the per-thread decompression buffers).
//
// Two costs of a Bytes (std::vector) that a ReadBuffer does not have:
//   - it zero-fills whatever it grows by, even within its capacity, and
//     copies its old content when it outgrows the capacity; a recycled
//     chunk buffer shrinks to a small chunk and grows back to a 4 MiB one
//     all the time, and the read overwrites those zeros at once;
//   - its memory comes in 4 KiB pages, each faulted in on first touch. On a
//     virtual machine with shadow page tables a fault costs ~40 us: 4 MiB
//     took 35 ms to touch, against 1 ms in 2 MiB pages.
// A ReadBuffer never initialises its bytes; at 1 MiB or more its memory is
// an anonymous mapping aligned to 2 MiB and advised for transparent huge
// pages (docs/ARCHITECTURE.md, "Chunk buffers").
//
// It can also hold a Bytes it was given (Adopt), without a copy, for
// sources that fill a Bytes themselves; Release hands such a Bytes back.
//
// Thread safety: none; one owner at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "base/bytes.h"

namespace cairn {

class ReadBuffer {
 public:
  ReadBuffer() = default;
  ~ReadBuffer() { Free(); }
  ReadBuffer(ReadBuffer&& other) noexcept { *this = std::move(other); }
  ReadBuffer& operator=(ReadBuffer&& other) noexcept;
  ReadBuffer(const ReadBuffer&) = delete;
  ReadBuffer& operator=(const ReadBuffer&) = delete;

  // Makes the size `n`: the first min(n, old size) bytes are kept, the rest
  // are unspecified until written.
  void Resize(size_t n) {
    if (adopted_ || n > capacity_) return ResizeSlow(n);
    size_ = n;
  }
  void Clear() { size_ = 0; }

  // Takes `bytes` as the content, without a copy.
  void Adopt(Bytes&& bytes);
  // The content as a Bytes: without a copy when it was adopted, else
  // copied. The buffer is left empty.
  Bytes Release();

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // What it can hold without allocating.
  size_t capacity() const { return adopted_ ? adopted_bytes_.size() : capacity_; }
  uint8_t* begin() { return data_; }
  uint8_t* end() { return data_ + size_; }
  const uint8_t* begin() const { return data_; }
  const uint8_t* end() const { return data_ + size_; }

  ByteSpan span() const { return ByteSpan(data_, size_); }
  MutableByteSpan mutable_span() { return MutableByteSpan(data_, size_); }
  operator ByteSpan() const { return span(); }  // NOLINT: a view, as a Bytes gives

 private:
  // Within an adopted Bytes's size, or else onto fresh memory of our own.
  void ResizeSlow(size_t n);
  // Fresh memory for `n` bytes and 1/8 to spare; the content is copied.
  void Grow(size_t n);
  void Free();

  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;   // of our own memory (not adopted)
  bool mapped_ = false;   // our memory is a mapping (else new[])
  bool adopted_ = false;  // data_ is adopted_bytes_'s
  Bytes adopted_bytes_;
};

// Sizes a buffer that a read or a decoder fills next: code that serves
// both kinds (a Bytes zero-fills what it grows by, a ReadBuffer does not).
inline void ResizeForWrite(Bytes* b, size_t n) { b->resize(n); }
inline void ResizeForWrite(ReadBuffer* b, size_t n) { b->Resize(n); }

}  // namespace cairn
