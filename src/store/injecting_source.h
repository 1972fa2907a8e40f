// InjectingSource: a ChunkSource wrapper for tests and benchmarks that adds
// latency to every read (fixed plus uniform jitter, as a network or a busy
// disk would) and faults (a read error, or flipped bytes) at a given rate.
// This machine cannot shape its network, so latency sweeps run through it:
// `cairn restore|verify --inject-latency MS[:JITTER_MS]` (docs/BENCHMARKS.md).
//
// Thread safety: all methods may be called concurrently (sleeps happen on the
// calling thread, as a blocking read would).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "store/chunk_source.h"

namespace cairn::store {

struct InjectionOptions {
  int64_t latency_us = 0;  // added to every read
  int64_t jitter_us = 0;   // plus uniform [0, jitter_us)
  double error_rate = 0;   // share of reads that fail with Unavailable
  double corrupt_rate = 0; // share of reads whose bytes get one bit flipped
  uint64_t seed = 1;
};

// Parses "MS[:JITTER_MS]" (fractions allowed, e.g. "0.5:0.2").
Result<InjectionOptions> ParseLatencySpec(std::string_view spec);

class InjectingSource final : public ChunkSource {
 public:
  // REQUIRES: `base` outlives this wrapper.
  // A source that sends its reads in network requests takes the latency
  // per request instead (ChunkSource::InjectRequestLatency): a round trip
  // is paid per request, whatever it carries.
  InjectingSource(ChunkSource& base, const InjectionOptions& options)
      : base_(base),
        options_(options),
        per_request_((options.latency_us > 0 || options.jitter_us > 0) &&
                     base.InjectRequestLatency(options.latency_us, options.jitter_us)) {}

  Result<Bytes> Read(const ChunkId& id) override;
  Status ReadInto(const ChunkId& id, ReadBuffer* out) override;
  SourceTraits Traits() const override;
  ConnectionSummary Connections() const override { return base_.Connections(); }

  uint64_t reads() const { return reads_.load(); }

 private:
  // A deterministic pseudo-random value in [0, 1) for the n-th read.
  double Uniform(uint64_t n, uint64_t stream) const;

  ChunkSource& base_;
  const InjectionOptions options_;
  const bool per_request_;  // the base adds the latency to its requests
  std::atomic<uint64_t> reads_{0};
};

}  // namespace cairn::store
