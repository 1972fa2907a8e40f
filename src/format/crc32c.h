// CRC32C (Castagnoli), the checksum on every stored byte.
//
// ISA-L's crc32_iscsi (libisal, Debian's libisal-dev), which picks its
// fastest path at run time (PCLMULQDQ folding, AVX-512 where the CPU has
// it): 20 GiB/s per core here against 11 for the three-chain SSE4.2
// loop cairn had before (cairn-micro-bench at 3c0779a, BM_Crc32c against
// BM_Crc32cIsal; docs/BENCHMARKS.md). A slicing-by-8 table stays as the
// reference the tests compare it with.
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
// True when the CPU has SSE4.2 (ISA-L's fast paths need it and more).
bool Crc32cHardwareAvailable();

}  // namespace cairn::format
