#include "store/injecting_source.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "base/splitmix64.h"

namespace cairn::store {
namespace {

uint64_t SplitMix64(uint64_t x) { return SplitMix64Mix(x + kSplitMix64Gamma); }

Result<double> ParseMillis(std::string_view text, std::string_view whole) {
  double v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || v < 0 || v > 60000) {
    return InvalidArgumentError(fmt::format(
        "latency '{}' must be MS or MS:JITTER_MS with milliseconds from 0 to 60000", whole));
  }
  return v;
}

}  // namespace

Result<InjectionOptions> ParseLatencySpec(std::string_view spec) {
  InjectionOptions options;
  size_t colon = spec.find(':');
  CAIRN_ASSIGN_OR_RETURN(double ms, ParseMillis(spec.substr(0, colon), spec));
  options.latency_us = static_cast<int64_t>(ms * 1000);
  if (colon != std::string_view::npos) {
    CAIRN_ASSIGN_OR_RETURN(double jitter, ParseMillis(spec.substr(colon + 1), spec));
    options.jitter_us = static_cast<int64_t>(jitter * 1000);
  }
  return options;
}

double InjectingSource::Uniform(uint64_t n, uint64_t stream) const {
  uint64_t r = SplitMix64(options_.seed ^ SplitMix64(n * 4 + stream));
  return static_cast<double>(r >> 11) / static_cast<double>(uint64_t{1} << 53);
}

Result<Bytes> InjectingSource::Read(const ChunkId& id) {
  ReadBuffer data;
  CAIRN_RETURN_IF_ERROR(ReadInto(id, &data));
  return data.Release();
}

Status InjectingSource::ReadInto(const ChunkId& id, ReadBuffer* out) {
  uint64_t n = reads_.fetch_add(1);
  int64_t delay = per_request_ ? 0 : options_.latency_us;
  if (options_.jitter_us > 0 && !per_request_) {
    delay += static_cast<int64_t>(Uniform(n, 0) * static_cast<double>(options_.jitter_us));
  }
  if (delay > 0) std::this_thread::sleep_for(std::chrono::microseconds(delay));
  if (options_.error_rate > 0 && Uniform(n, 1) < options_.error_rate) {
    return UnavailableError(fmt::format("chunk {}: injected read error", crypto::DigestHex(id)));
  }
  CAIRN_RETURN_IF_ERROR(base_.ReadInto(id, out));
  if (options_.corrupt_rate > 0 && !out->empty() && Uniform(n, 2) < options_.corrupt_rate) {
    size_t pos = static_cast<size_t>(Uniform(n, 3) * static_cast<double>(out->size()));
    out->data()[std::min(pos, out->size() - 1)] ^= 0x01;
  }
  return Status::Ok();
}

SourceTraits InjectingSource::Traits() const {
  SourceTraits t = base_.Traits();
  if (options_.latency_us > 0) {
    // Latency makes it the network source it stands in for, starting point included.
    t.medium = MediumKind::kNetwork;
    t.initial_reads_in_flight = std::max(t.initial_reads_in_flight, kNetworkInitialReads);
  }
  t.description = fmt::format("{} (+{} us latency, {} us jitter injected per {})", t.description,
                              options_.latency_us, options_.jitter_us,
                              per_request_ ? "request" : "read");
  return t;
}

}  // namespace cairn::store
