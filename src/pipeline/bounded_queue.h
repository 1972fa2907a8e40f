// BoundedQueue: the one blocking queue between pipeline stages. Push blocks
// while the queue is full (back-pressure), Pop blocks while it is empty.
// Close() lets consumers drain what is queued and then see the end;
// Cancel() drops everything and wakes every waiter at once (first error
// cancels the pipeline).
//
// Thread safety: all methods may be called concurrently.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>

namespace cairn::pipeline {

template <typename T>
class BoundedQueue {
 public:
  explicit BoundedQueue(size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}
  BoundedQueue(const BoundedQueue&) = delete;
  BoundedQueue& operator=(const BoundedQueue&) = delete;

  // Blocks while full. False (item dropped) when closed or cancelled.
  bool Push(T item) {
    std::unique_lock lock(mu_);
    not_full_.wait(lock, [&] { return items_.size() < capacity_ || closed_; });
    if (closed_) return false;
    items_.push_back(std::move(item));
    not_empty_.notify_one();
    return true;
  }

  // Blocks while empty. nullopt once closed and drained, or cancelled.
  std::optional<T> Pop() {
    std::unique_lock lock(mu_);
    not_empty_.wait(lock, [&] { return !items_.empty() || closed_; });
    if (items_.empty() || cancelled_) return std::nullopt;
    T item = std::move(items_.front());
    items_.pop_front();
    not_full_.notify_one();
    return item;
  }

  // No more pushes; consumers drain what is queued.
  void Close() {
    std::lock_guard lock(mu_);
    closed_ = true;
    not_empty_.notify_all();
    not_full_.notify_all();
  }

  // Drops queued items and wakes every waiter.
  void Cancel() {
    std::lock_guard lock(mu_);
    closed_ = true;
    cancelled_ = true;
    items_.clear();
    not_empty_.notify_all();
    not_full_.notify_all();
  }

 private:
  const size_t capacity_;
  std::mutex mu_;
  std::condition_variable not_empty_;
  std::condition_variable not_full_;
  std::deque<T> items_;     // GUARDED_BY(mu_)
  bool closed_ = false;     // GUARDED_BY(mu_)
  bool cancelled_ = false;  // GUARDED_BY(mu_)
};

}  // namespace cairn::pipeline
