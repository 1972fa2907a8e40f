// RateLimiter: a token bucket that caps the bytes per second moved by every
// connection of a run together (--limit-upload, --limit-download): the
// remote client's requests and responses, the S3 client's bodies.
//
// Algorithm: the bucket holds up to `burst` bytes of credit and refills at
// `bytes_per_second`. Acquire(n) takes n bytes at once, letting the credit
// go negative (a debt), then sleeps until the debt is paid. So a caller may
// move a large body in one piece, and over any interval the bytes acquired
// are at most rate × interval + burst: a transfer of N bytes started with a
// full bucket never finishes before (N - burst) / rate. The wait happens on
// the caller's thread, before (upload) or after (download) the bytes move;
// callers that share one limiter share the rate, first come first served.
//
// Thread safety: Acquire may be called from any number of threads at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string_view>

#include "base/mutex.h"
#include "base/status.h"

namespace cairn {

class RateLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  // REQUIRES: bytes_per_second > 0. `burst` 0 means a default of an eighth
  // of a second of transfer, at least 64 KiB.
  explicit RateLimiter(uint64_t bytes_per_second, uint64_t burst = 0);

  uint64_t bytes_per_second() const { return rate_; }
  uint64_t burst() const { return burst_; }

  // Takes `bytes` from the bucket and sleeps until the bucket is out of
  // debt again. Returns how long it slept (for tests and logs).
  Clock::duration Acquire(uint64_t bytes);

  // The wait Acquire(bytes) would need at `now`, taking the bytes (no
  // sleep): the arithmetic, exposed for tests.
  Clock::duration Reserve(uint64_t bytes, Clock::time_point now);

  // Bytes acquired so far.
  uint64_t total() const;

 private:
  const uint64_t rate_;
  const uint64_t burst_;
  mutable Mutex mu_;
  double credit_ GUARDED_BY(mu_);  // bytes; negative = debt
  Clock::time_point last_ GUARDED_BY(mu_);  // when credit_ was last refilled
  uint64_t total_ GUARDED_BY(mu_) = 0;
};

// Parses a rate as given on the command line: bytes per second, with an
// optional binary suffix K, M, G (KiB, MiB, GiB; "KiB" and "K/s" spellings
// accepted too): "500K", "20M", "1.5G", "1048576". InvalidArgument naming
// `what` (the option) otherwise; 0 is refused (leave the option out for no
// limit).
Result<uint64_t> ParseByteRate(std::string_view text, std::string_view what);

}  // namespace cairn
