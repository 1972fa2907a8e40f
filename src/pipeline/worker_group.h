// WorkerGroup: N threads running one stage function, with first-error
// semantics: the first non-OK Status a worker returns is kept, and the
// `on_error` hook (typically cancelling the stage's queues) runs once so
// every other stage stops promptly. Wait() joins and returns that error.
//
// Exceptions never escape a worker: they become an Internal status.
//
// Thread safety: Start/Wait from one thread; Fail() from any thread.
#pragma once

#include <algorithm>
#include <atomic>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"

namespace cairn::pipeline {

class WorkerGroup {
 public:
  explicit WorkerGroup(std::function<void()> on_error = {}) : on_error_(std::move(on_error)) {}
  ~WorkerGroup() { Join(); }
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;

  // Starts `count` threads, each running fn(worker_index).
  void Start(int count, std::function<Status(int)> fn) {
    for (int i = 0; i < count; ++i) {
      threads_.emplace_back([this, fn, i] {
        Status s;
        try {
          s = fn(i);
        } catch (const std::exception& e) {
          s = InternalError(std::string("uncaught exception in worker: ") + e.what());
        }
        if (!s.ok()) Fail(std::move(s));
      });
    }
  }

  // Records `s` if it is the first error and runs the on_error hook once.
  void Fail(Status s) {
    bool first = false;
    {
      MutexLock lock(mu_);
      if (first_error_.ok()) {
        first_error_ = std::move(s);
        first = true;
      }
    }
    if (first && on_error_) on_error_();
  }

  bool failed() {
    MutexLock lock(mu_);
    return !first_error_.ok();
  }

  // Joins all threads; returns the first error (OK if none).
  Status Wait() {
    Join();
    MutexLock lock(mu_);
    return first_error_;
  }

 private:
  void Join() {
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
    threads_.clear();
  }

  std::function<void()> on_error_;
  std::vector<std::jthread> threads_;
  Mutex mu_;
  Status first_error_ GUARDED_BY(mu_);
};

// Runs fn(i) for every i in [0, n) on up to `threads` threads, each taking
// the next index; stops handing out indexes after the first error, which it
// returns. For batches of independent items (gc's prefix directories).
inline Status ParallelFor(int threads, size_t n, const std::function<Status(size_t)>& fn) {
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  WorkerGroup group([&failed] { failed = true; });
  group.Start(std::max(1, static_cast<int>(std::min<size_t>(threads, n))), [&](int) -> Status {
    for (size_t i; !failed && (i = next.fetch_add(1)) < n;) CAIRN_RETURN_IF_ERROR(fn(i));
    return Status::Ok();
  });
  return group.Wait();
}

}  // namespace cairn::pipeline
