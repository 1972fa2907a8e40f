#include "base/text.h"

namespace cairn {
namespace {

constexpr char kUpperHex[] = "0123456789ABCDEF";

bool IsUnreserved(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~';
}

}  // namespace

int HexDigitValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string AsciiLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::string PercentEncode(std::string_view text, bool keep_slash) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (IsUnreserved(c) || (keep_slash && c == '/')) {
      out += c;
      continue;
    }
    auto u = static_cast<unsigned char>(c);
    out += '%';
    out += kUpperHex[u >> 4];
    out += kUpperHex[u & 0xf];
  }
  return out;
}

std::optional<std::string> PercentDecode(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '%') {
      if (i + 2 >= text.size()) return std::nullopt;
      int hi = HexDigitValue(text[i + 1]);
      int lo = HexDigitValue(text[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      c = static_cast<char>(hi * 16 + lo);
      i += 2;
    } else if (c == '+' && plus_is_space) {
      c = ' ';
    }
    if (c == '\0') return std::nullopt;
    out += c;
  }
  return out;
}

}  // namespace cairn
