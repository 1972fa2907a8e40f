// ReadErrors: the failed reads of one fetch pipeline run, by item, for a
// flow whose read errors are verdicts rather than the run's end (verify
// records them and goes on; read-ahead fails the readers waiting for that
// chunk). The I/O stage, or an asynchronous read's completion (which must
// not do the CPU stage's work), notes the error and leaves the item's
// buffer empty; the CPU stage takes it. Sparse, since errors are rare: a
// slot per item would cost every chunk of a run its size however healthy
// the store.
//
// Thread safety: all methods may be called concurrently.
#pragma once

#include <cstddef>
#include <unordered_map>

#include "base/mutex.h"
#include "base/read_buffer.h"
#include "base/status.h"

namespace cairn::pipeline {

class ReadErrors {
 public:
  // Records a failed `read` of `item` and empties `data`; nothing when ok.
  void Note(size_t item, Status read, ReadBuffer* data) {
    if (read.ok()) return;
    data->Clear();
    MutexLock lock(mu_);
    errors_.emplace(item, std::move(read));
  }

  // The error noted for `item` (and forgets it), or Ok.
  Status Take(size_t item) {
    MutexLock lock(mu_);
    auto it = errors_.find(item);
    if (it == errors_.end()) return Status::Ok();
    Status error = std::move(it->second);
    errors_.erase(it);
    return error;
  }

 private:
  Mutex mu_;
  std::unordered_map<size_t, Status> errors_ GUARDED_BY(mu_);
};

}  // namespace cairn::pipeline
