#include "base/bytes.h"

#include <cctype>
#include <cstdio>
#include <cstring>
#include <exception>
#include <utility>

#include "base/text.h"

namespace cairn {

std::string ToHex(ByteSpan data) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(data.size() * 2, '\0');
  for (size_t i = 0; i < data.size(); ++i) {
    out[2 * i] = kDigits[data[i] >> 4];
    out[2 * i + 1] = kDigits[data[i] & 0xf];
  }
  return out;
}


bool FromHex(std::string_view hex, MutableByteSpan out) {
  if (hex.size() != out.size() * 2) return false;
  for (size_t i = 0; i < out.size(); ++i) {
    int hi = HexDigitValue(hex[2 * i]);
    int lo = HexDigitValue(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

bool IsAllZero(ByteSpan data) {
  const uint8_t* p = data.data();
  size_t n = data.size();
  while (n >= 64) {
    uint64_t w[8];
    std::memcpy(w, p, 64);
    if ((w[0] | w[1] | w[2] | w[3] | w[4] | w[5] | w[6] | w[7]) != 0) return false;
    p += 64;
    n -= 64;
  }
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != 0) return false;
  }
  return true;
}

std::string HumanBytes(uint64_t bytes, int decimals) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  int unit = 0;
  while (v >= 1024 && unit < 5) {
    v /= 1024;
    ++unit;
  }
  if (unit == 0) return std::to_string(bytes) + " B";
  char text[64];
  std::snprintf(text, sizeof text, "%.*f %s", decimals, v, kUnits[unit]);
  return text;
}

Result<uint64_t> ParseByteSize(std::string_view original) {
  std::string text(original);
  for (char& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  static constexpr std::pair<std::string_view, uint64_t> kSuffixes[] = {
      {"TIB", uint64_t{1} << 40}, {"GIB", uint64_t{1} << 30}, {"MIB", uint64_t{1} << 20},
      {"KIB", uint64_t{1} << 10}, {"T", uint64_t{1} << 40},   {"G", uint64_t{1} << 30},
      {"M", uint64_t{1} << 20},   {"K", uint64_t{1} << 10},   {"B", 1}};
  uint64_t mult = 1;
  for (const auto& [suffix, m] : kSuffixes) {
    if (text.size() > suffix.size() && text.ends_with(suffix)) {
      mult = m;
      text.resize(text.size() - suffix.size());
      break;
    }
  }
  size_t used = 0;
  double value = -1;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size() || !(value >= 0) ||
      value * static_cast<double>(mult) > 0x1p62) {
    return InvalidArgumentError("size '" + std::string(original) +
                                "' is not a size like 2G or 512M");
  }
  return static_cast<uint64_t>(value * static_cast<double>(mult));
}

}  // namespace cairn
