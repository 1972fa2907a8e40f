// ConnectionMeter: how many connections a client kept at work over a run
// (RemoteChunkSource's downloads, RemoteChunkSink's uploads): the most at
// once and the time-weighted mean, from the first change on, for
// store::ConnectionSummary.
//
// Thread safety: none; its owner calls it under its own lock.
#pragma once

#include <algorithm>
#include <chrono>

#include "store/chunk_source.h"

namespace cairn::remote {

class ConnectionMeter {
 public:
  // Changes the count by `delta`, accounting the time spent at the old
  // count first.
  void Change(int delta) {
    const Clock::time_point now = Clock::now();
    if (since_ != Clock::time_point{}) {
      const double dt = std::chrono::duration<double>(now - since_).count();
      count_time_ += count_ * dt;
      total_time_ += dt;
    }
    since_ = now;
    count_ += delta;
    max_ = std::max(max_, count_);
  }

  int count() const { return count_; }

  // `final_count`: what the owner calls the count at the end; `cap`: the
  // most it may open.
  store::ConnectionSummary Summary(int final_count, int cap) const {
    store::ConnectionSummary c;
    c.final_count = final_count;
    c.max_count = max_;
    c.mean_count = total_time_ > 0 ? count_time_ / total_time_ : final_count;
    c.cap = cap;
    return c;
  }

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point since_{};
  int count_ = 0;
  int max_ = 0;
  double count_time_ = 0;  // sum of count × seconds
  double total_time_ = 0;
};

}  // namespace cairn::remote
