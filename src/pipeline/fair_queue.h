// FairQueue: a work queue shared by several clients ("lanes", by key), so
// that no client's backlog delays another's work. Pop takes the lanes in
// turn (round robin), and never from a lane that already has
// `per_lane_running` items being worked on (the consumer calls Done(key)
// when it finishes one): a client with a hundred queued requests holds at
// most that many workers, and the next request of any other client goes
// to the next free worker.
//
// Push never blocks (the producer bounds what it queues); Close() lets
// consumers drain what is queued and then see the end.
//
// Thread safety: all methods may be called concurrently.
#pragma once

#include <cstddef>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "base/mutex.h"

namespace cairn::pipeline {

template <typename T>
class FairQueue {
 public:
  explicit FairQueue(size_t per_lane_running)
      : per_lane_running_(per_lane_running == 0 ? 1 : per_lane_running) {}
  FairQueue(const FairQueue&) = delete;
  FairQueue& operator=(const FairQueue&) = delete;

  // False (item dropped) once closed.
  bool Push(const std::string& key, T item) {
    MutexLock lock(mu_);
    if (closed_) return false;
    lanes_[key].items.push_back(std::move(item));
    ++queued_;
    ready_.NotifyOne();
    return true;
  }

  // Blocks until a lane has an item and room to run it; returns it with its
  // key (the caller must call Done(key) once it is finished). nullopt once
  // closed and drained.
  std::optional<std::pair<std::string, T>> Pop() {
    MutexLock lock(mu_);
    for (;;) {
      if (auto it = NextLaneLocked(); it != lanes_.end()) {
        Lane& lane = it->second;
        std::pair<std::string, T> out(it->first, std::move(lane.items.front()));
        lane.items.pop_front();
        ++lane.running;
        --queued_;
        last_ = it->first;
        return out;
      }
      if (closed_ && queued_ == 0) return std::nullopt;
      ready_.Wait(mu_);
    }
  }

  // One item of lane `key` is finished: the lane may run another.
  void Done(const std::string& key) {
    MutexLock lock(mu_);
    auto it = lanes_.find(key);
    if (it == lanes_.end()) return;
    if (it->second.running > 0) --it->second.running;
    if (it->second.running == 0 && it->second.items.empty()) lanes_.erase(it);
    ready_.NotifyAll();
  }

  // No more pushes; consumers drain what is queued.
  void Close() {
    MutexLock lock(mu_);
    closed_ = true;
    ready_.NotifyAll();
  }

  size_t queued() const {
    MutexLock lock(mu_);
    return queued_;
  }

 private:
  struct Lane {
    std::deque<T> items;
    size_t running = 0;
  };

  // The first lane after last_ (in key order, wrapping) with an item and
  // room to run it.
  typename std::map<std::string, Lane>::iterator NextLaneLocked() REQUIRES(mu_) {
    if (queued_ == 0) return lanes_.end();
    auto eligible = [&](const Lane& l) { return !l.items.empty() && l.running < per_lane_running_; };
    for (auto it = lanes_.upper_bound(last_); it != lanes_.end(); ++it) {
      if (eligible(it->second)) return it;
    }
    for (auto it = lanes_.begin(); it != lanes_.end() && it->first <= last_; ++it) {
      if (eligible(it->second)) return it;
    }
    return lanes_.end();
  }

  const size_t per_lane_running_;
  mutable Mutex mu_;
  CondVar ready_;
  std::map<std::string, Lane> lanes_ GUARDED_BY(mu_);
  std::string last_ GUARDED_BY(mu_);  // the lane served last
  size_t queued_ GUARDED_BY(mu_) = 0;
  bool closed_ GUARDED_BY(mu_) = false;
};

}  // namespace cairn::pipeline
