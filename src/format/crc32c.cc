#include "format/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

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

#if defined(__x86_64__)
// The hardware instruction has a latency of three cycles and a throughput of
// one, so one dependent chain of CRCs runs at a third of its speed. Long
// inputs are cut into blocks of three stripes whose CRCs run as three
// independent chains and are then joined: the CRC register after a stripe
// is shifted over the next stripe's length of zero bytes (a linear map over
// GF(2), one table per byte of the register) and XORed with that stripe's
// CRC from zero. The same technique as Intel's crc_pcl and Mark Adler's
// crc32c.c; written here because it is 40 lines and no Debian package
// offers CRC32C (docs/ARCHITECTURE.md, "Choices made in code rather than a library").
constexpr size_t kStripe = 4096;

struct ShiftTable {
  std::array<std::array<uint32_t, 256>, 4> t{};
};

// Shifting a CRC register over kStripe zero bytes.
const ShiftTable& StripeShift() {
  static const ShiftTable table = [] {
    std::array<uint32_t, 32> basis{};
    for (int bit = 0; bit < 32; ++bit) {
      uint32_t c = uint32_t{1} << bit;
      for (size_t i = 0; i < kStripe; ++i) c = (c >> 8) ^ kTables.t[0][c & 0xff];
      basis[bit] = c;
    }
    ShiftTable s;
    for (int byte = 0; byte < 4; ++byte) {
      for (uint32_t v = 0; v < 256; ++v) {
        uint32_t r = 0;
        for (int bit = 0; bit < 8; ++bit) {
          if ((v >> bit) & 1) r ^= basis[8 * byte + bit];
        }
        s.t[byte][v] = r;
      }
    }
    return s;
  }();
  return table;
}

uint32_t ShiftOverStripe(const ShiftTable& s, uint32_t c) {
  return s.t[0][c & 0xff] ^ s.t[1][(c >> 8) & 0xff] ^ s.t[2][(c >> 16) & 0xff] ^ s.t[3][c >> 24];
}

__attribute__((target("sse4.2"))) uint32_t ExtendHardware(uint32_t crc, const uint8_t* p,
                                                           size_t n) {
  uint64_t c = ~crc;
  while (n > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0) {
    c = _mm_crc32_u8(static_cast<uint32_t>(c), *p++);
    --n;
  }
  if (n >= 3 * kStripe) {
    const ShiftTable& shift = StripeShift();
    do {
      uint64_t c1 = 0;
      uint64_t c2 = 0;
      for (size_t i = 0; i < kStripe; i += 8) {
        uint64_t w0;
        uint64_t w1;
        uint64_t w2;
        std::memcpy(&w0, p + i, 8);
        std::memcpy(&w1, p + kStripe + i, 8);
        std::memcpy(&w2, p + 2 * kStripe + i, 8);
        c = _mm_crc32_u64(c, w0);
        c1 = _mm_crc32_u64(c1, w1);
        c2 = _mm_crc32_u64(c2, w2);
      }
      c = ShiftOverStripe(shift, static_cast<uint32_t>(c)) ^ static_cast<uint32_t>(c1);
      c = ShiftOverStripe(shift, static_cast<uint32_t>(c)) ^ static_cast<uint32_t>(c2);
      p += 3 * kStripe;
      n -= 3 * kStripe;
    } while (n >= 3 * kStripe);
  }
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    c = _mm_crc32_u64(c, w);
    p += 8;
    n -= 8;
  }
  while (n > 0) {
    c = _mm_crc32_u8(static_cast<uint32_t>(c), *p++);
    --n;
  }
  return ~static_cast<uint32_t>(c);
}

bool DetectHardware() { return __builtin_cpu_supports("sse4.2"); }
#else
uint32_t ExtendHardware(uint32_t crc, const uint8_t* p, size_t n) {
  return Crc32cExtendPortable(crc, ByteSpan(p, n));
}
bool DetectHardware() { return false; }
#endif

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
  if (Crc32cHardwareAvailable()) return ExtendHardware(crc, data.data(), data.size());
  return Crc32cExtendPortable(crc, data);
}

}  // namespace cairn::format
