// BufferPool: recycles byte buffers between pipeline stages, so chunk-sized
// buffers are allocated (and page-faulted) once per run instead of once per
// chunk. A buffer taken from the pool keeps its capacity. The fetch
// pipeline pools ReadBuffers, which also never zero-fill a size they held
// before; tree backup pools Bytes.
//
// Thread safety: Take/Give may be called concurrently from any thread.
#pragma once

#include <vector>

#include "base/bytes.h"
#include "base/mutex.h"
#include "base/read_buffer.h"

namespace cairn::pipeline {

template <typename Buffer>
class BasicBufferPool {
 public:
  // Keeps at most `max_buffers` idle buffers; extras are freed.
  explicit BasicBufferPool(size_t max_buffers) : max_buffers_(max_buffers) {}

  // A recycled buffer (any size, any content) or an empty new one.
  Buffer Take() {
    MutexLock lock(mu_);
    if (free_.empty()) return Buffer();
    Buffer b = std::move(free_.back());
    free_.pop_back();
    return b;
  }

  void Give(Buffer buffer) {
    MutexLock lock(mu_);
    if (free_.size() < max_buffers_ && buffer.capacity() > 0) free_.push_back(std::move(buffer));
  }

 private:
  const size_t max_buffers_;
  Mutex mu_;
  std::vector<Buffer> free_ GUARDED_BY(mu_);
};

using BufferPool = BasicBufferPool<Bytes>;
using ReadBufferPool = BasicBufferPool<ReadBuffer>;

}  // namespace cairn::pipeline
