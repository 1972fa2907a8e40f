#include "format/crc32c.h"

#include <isa-l/crc.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstring>

namespace cairn::format {
namespace {

constexpr uint32_t kPoly = 0x82f63b78;  // reflected Castagnoli polynomial

struct Tables {
  std::array<std::array<uint32_t, 256>, 8> t{};
  constexpr Tables() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i) {
      for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xff];
    }
  }
};
constexpr Tables kTables;

bool DetectHardware() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("sse4.2");
#else
  return false;
#endif
}

}  // namespace

uint32_t Crc32cExtendPortable(uint32_t crc, ByteSpan data) {
  const auto& t = kTables.t;
  uint32_t c = ~crc;
  const uint8_t* p = data.data();
  size_t n = data.size();
  while (n >= 8) {
    uint32_t lo;
    uint32_t hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    lo ^= c;  // little-endian host assumed for the table walk (x86-64, arm64)
    c = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^ t[4][lo >> 24] ^
        t[3][hi & 0xff] ^ t[2][(hi >> 8) & 0xff] ^ t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n-- > 0) c = (c >> 8) ^ t[0][(c ^ *p++) & 0xff];
  return ~c;
}

bool Crc32cHardwareAvailable() {
  static const bool available = DetectHardware();
  return available;
}

uint32_t Crc32cExtend(uint32_t crc, ByteSpan data) {
  // ISA-L leaves the pre- and post-inversion to the caller, and takes an int
  // length.
  uint32_t c = ~crc;
  const uint8_t* p = data.data();
  size_t n = data.size();
  while (n > 0) {
    const size_t piece = std::min<size_t>(n, size_t{1} << 30);
    c = crc32_iscsi(const_cast<unsigned char*>(p), static_cast<int>(piece), c);
    p += piece;
    n -= piece;
  }
  return ~c;
}

}  // namespace cairn::format
