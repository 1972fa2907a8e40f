// Mutex, MutexLock and CondVar: std::mutex, a relockable std::lock_guard and
// std::condition_variable with Clang's thread-safety annotations
// (base/thread_annotations.h), so that members marked GUARDED_BY(mu_) are
// checked at compile time in the clang tree.
//
//   mutable Mutex mu_;
//   CondVar cv_;
//   int count_ GUARDED_BY(mu_) = 0;
//   ...
//   MutexLock lock(mu_);
//   while (count_ == 0) cv_.Wait(mu_);
//   --count_;
//
// Waits are written as loops over the condition rather than with a
// predicate: the analysis checks a lambda as a function of its own, which
// would not know that `mu_` is held. A wait that a std::stop_token ends
// uses std::condition_variable_any on the Mutex itself, with its predicate
// marked: `cv_.wait(mu_, stop, [&]() REQUIRES(mu_) { return ready_; })`.
//
// Thread safety: a Mutex and a CondVar are what they are for; a MutexLock
// belongs to the thread that made it.
#pragma once

#include <chrono>
#include <condition_variable>
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
  friend class CondVar;
  std::mutex mu_;
};

// Holds `mu` from construction to destruction, except between Unlock() and
// the next Lock().
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() RELEASE() {
    if (held_) mu_.unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() RELEASE() {
    mu_.unlock();
    held_ = false;
  }
  void Lock() ACQUIRE() {
    mu_.lock();
    held_ = true;
  }

 private:
  Mutex& mu_;
  bool held_ = true;
};

// A condition variable waited on with a Mutex held (std::condition_variable
// underneath, so no cost over it). Each Wait releases `mu` while it sleeps
// and holds it again when it returns; wake-ups may be spurious.
class CondVar {
 public:
  void Wait(Mutex& mu) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  // False when `deadline` passed.
  template <class Clock, class Duration>
  bool WaitUntil(Mutex& mu, const std::chrono::time_point<Clock, Duration>& deadline) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    bool woken = cv_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    lock.release();
    return woken;
  }
  // False when `timeout` passed.
  template <class Rep, class Period>
  bool WaitFor(Mutex& mu, const std::chrono::duration<Rep, Period>& timeout) REQUIRES(mu) {
    return WaitUntil(mu, std::chrono::steady_clock::now() + timeout);
  }
  void NotifyOne() noexcept { cv_.notify_one(); }
  void NotifyAll() noexcept { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace cairn
