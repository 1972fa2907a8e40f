#include "base/rate_limiter.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <string>
#include <thread>

#include <fmt/format.h>

namespace cairn {

RateLimiter::RateLimiter(uint64_t bytes_per_second, uint64_t burst)
    : rate_(std::max<uint64_t>(bytes_per_second, 1)),
      burst_(burst > 0 ? burst : std::max<uint64_t>(rate_ / 8, 64 << 10)),
      credit_(static_cast<double>(burst_)),
      last_(Clock::now()) {}

RateLimiter::Clock::duration RateLimiter::Reserve(uint64_t bytes, Clock::time_point now) {
  MutexLock lock(mu_);
  if (now > last_) {
    const double secs = std::chrono::duration<double>(now - last_).count();
    credit_ = std::min(static_cast<double>(burst_), credit_ + secs * static_cast<double>(rate_));
    last_ = now;
  }
  credit_ -= static_cast<double>(bytes);
  total_ += bytes;
  if (credit_ >= 0) return Clock::duration::zero();
  return std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(-credit_ / static_cast<double>(rate_)));
}

RateLimiter::Clock::duration RateLimiter::Acquire(uint64_t bytes) {
  if (bytes == 0) return Clock::duration::zero();
  const Clock::duration wait = Reserve(bytes, Clock::now());
  if (wait > Clock::duration::zero()) std::this_thread::sleep_for(wait);
  return wait;
}

uint64_t RateLimiter::total() const {
  MutexLock lock(mu_);
  return total_;
}

Result<uint64_t> ParseByteRate(std::string_view text, std::string_view what) {
  auto bad = [&] {
    return InvalidArgumentError(fmt::format(
        "{} '{}': expected bytes per second, like 500K, 20M or 1G (K, M, G = KiB, MiB, GiB)",
        what, text));
  };
  std::string s(text);
  double value = 0;
  size_t used = 0;
  try {
    value = std::stod(s, &used);
  } catch (const std::exception&) {
    return bad();
  }
  if (used == 0 || s[0] == '-' || s[0] == '+' || !std::isfinite(value)) return bad();
  std::string unit = s.substr(used);
  if (unit.ends_with("/s")) unit.resize(unit.size() - 2);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.ends_with("IB")) unit.resize(unit.size() - 2);
  if (unit.ends_with("B")) unit.resize(unit.size() - 1);
  double scale = unit.empty() ? 1 : unit == "K" ? 1024.0 : unit == "M" ? 1024.0 * 1024
                                 : unit == "G"  ? 1024.0 * 1024 * 1024
                                                : -1;
  if (scale < 0) return bad();
  const double bytes = value * scale;
  if (!(bytes >= 1) || bytes > 1e15) {
    return InvalidArgumentError(fmt::format(
        "{} '{}': must be at least 1 byte per second (leave the option out for no limit)", what,
        text));
  }
  return static_cast<uint64_t>(bytes);
}

}  // namespace cairn
