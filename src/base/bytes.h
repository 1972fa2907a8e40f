// Byte buffers and views, and hex coding.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace cairn {

using Bytes = std::vector<uint8_t>;
using ByteSpan = std::span<const uint8_t>;
using MutableByteSpan = std::span<uint8_t>;

inline ByteSpan AsBytes(std::string_view s) {
  return ByteSpan(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}
inline std::string_view AsStringView(ByteSpan b) {
  return std::string_view(reinterpret_cast<const char*>(b.data()), b.size());
}

// Lower-case hex of `data`.
std::string ToHex(ByteSpan data);
// Parses lower- or upper-case hex into `out` (size must be half the text);
// false on a wrong length or a non-hex character.
bool FromHex(std::string_view hex, MutableByteSpan out);

// True when every byte of `data` is zero (word-at-a-time).
bool IsAllZero(ByteSpan data);

// 1610612736 → "1.50 GiB" (binary units, `decimals` places; bytes whole).
std::string HumanBytes(uint64_t bytes, int decimals = 2);

// "2G", "512MiB", "1.5g", "4096" → bytes (binary units, any case).
Result<uint64_t> ParseByteSize(std::string_view text);

}  // namespace cairn
