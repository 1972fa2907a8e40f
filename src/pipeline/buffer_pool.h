// BufferPool: recycles byte buffers between pipeline stages, so chunk-sized
// buffers are allocated (and page-faulted, and zero-filled by the vector)
// once per run instead of once per chunk. A buffer taken from the pool
// keeps its capacity; resizing it within that capacity costs nothing, and
// growing it fills only the new part.
//
// Thread safety: Take/Give may be called concurrently from any thread.
#pragma once

#include <mutex>
#include <vector>

#include "base/bytes.h"

namespace cairn::pipeline {

class BufferPool {
 public:
  // Keeps at most `max_buffers` idle buffers; extras are freed.
  explicit BufferPool(size_t max_buffers) : max_buffers_(max_buffers) {}

  // A recycled buffer (any size, any content) or an empty new one.
  Bytes Take() {
    std::lock_guard lock(mu_);
    if (free_.empty()) return Bytes();
    Bytes b = std::move(free_.back());
    free_.pop_back();
    return b;
  }

  void Give(Bytes buffer) {
    std::lock_guard lock(mu_);
    if (free_.size() < max_buffers_ && buffer.capacity() > 0) free_.push_back(std::move(buffer));
  }

 private:
  const size_t max_buffers_;
  std::mutex mu_;
  std::vector<Bytes> free_;  // GUARDED_BY(mu_)
};

}  // namespace cairn::pipeline
