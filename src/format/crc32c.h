// CRC32C (Castagnoli), the checksum on every stored byte.
//
// Uses the SSE4.2 crc32 instruction (8 bytes per instruction, ~8 GB/s per
// core: five times SHA-256's speed, so never the bottleneck) when the CPU
// has it, a slicing-by-8 table otherwise. Debian 12
// packages no CRC32C library for C++ (google/crc32c is not packaged), hence
// this small implementation; see docs/ARCHITECTURE.md.
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/bytes.h"

namespace cairn::format {

// Extends `crc` (0 to start) over `data`. Extend(Extend(0,a),b) == Crc32c(a||b).
uint32_t Crc32cExtend(uint32_t crc, ByteSpan data);
inline uint32_t Crc32c(ByteSpan data) { return Crc32cExtend(0, data); }

// The portable implementation, exposed so tests can compare both paths.
uint32_t Crc32cExtendPortable(uint32_t crc, ByteSpan data);
// True when the hardware path is in use.
bool Crc32cHardwareAvailable();

}  // namespace cairn::format
