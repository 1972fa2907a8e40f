// BoundedQueue: the one blocking queue between pipeline stages. Push blocks
// while the queue is full (back-pressure), Pop blocks while it is empty.
// Close() lets consumers drain what is queued and then see the end;
// Cancel() drops everything and wakes every waiter at once (first error
// cancels the pipeline).
//
// Thread safety: all methods may be called concurrently.
#pragma once

#include <cstddef>
#include <deque>
#include <optional>

#include "base/mutex.h"

namespace cairn::pipeline {

template <typename T>
class BoundedQueue {
 public:
  explicit BoundedQueue(size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}
  BoundedQueue(const BoundedQueue&) = delete;
  BoundedQueue& operator=(const BoundedQueue&) = delete;

  // Blocks while full. False (item dropped) when closed or cancelled.
  bool Push(T item) {
    MutexLock lock(mu_);
    while (items_.size() >= capacity_ && !closed_) not_full_.Wait(mu_);
    if (closed_) return false;
    items_.push_back(std::move(item));
    not_empty_.NotifyOne();
    return true;
  }

  // Blocks while empty. nullopt once closed and drained, or cancelled.
  std::optional<T> Pop() {
    MutexLock lock(mu_);
    while (items_.empty() && !closed_) not_empty_.Wait(mu_);
    if (items_.empty() || cancelled_) return std::nullopt;
    T item = std::move(items_.front());
    items_.pop_front();
    not_full_.NotifyOne();
    return item;
  }

  // No more pushes; consumers drain what is queued.
  void Close() {
    MutexLock lock(mu_);
    closed_ = true;
    not_empty_.NotifyAll();
    not_full_.NotifyAll();
  }

  // Drops queued items and wakes every waiter.
  void Cancel() {
    MutexLock lock(mu_);
    closed_ = true;
    cancelled_ = true;
    items_.clear();
    not_empty_.NotifyAll();
    not_full_.NotifyAll();
  }

 private:
  const size_t capacity_;
  Mutex mu_;
  CondVar not_empty_;
  CondVar not_full_;
  std::deque<T> items_ GUARDED_BY(mu_);
  bool closed_ GUARDED_BY(mu_) = false;
  bool cancelled_ GUARDED_BY(mu_) = false;
};

}  // namespace cairn::pipeline
