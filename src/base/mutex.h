// Mutex and MutexLock: std::mutex and std::lock_guard with Clang's
// thread-safety annotations (base/thread_annotations.h), so that members
// marked GUARDED_BY(mu_) are checked at compile time in the clang tree.
//
//   mutable Mutex mu_;
//   int count_ GUARDED_BY(mu_) = 0;
//   ...
//   MutexLock lock(mu_);
//   ++count_;
//
// Thread safety: a Mutex is what it is for; a MutexLock belongs to the
// thread that made it.
#pragma once

#include <mutex>

#include "base/thread_annotations.h"

namespace cairn {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  bool try_lock() TRY_ACQUIRE(true) { return mu_.try_lock(); }

 private:
  std::mutex mu_;
};

// Holds `mu` from construction to destruction.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() RELEASE() { mu_.unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex& mu_;
};

}  // namespace cairn
