// Small text codings used by the network, S3 and URL code: hex digits,
// ASCII lower-casing (header names, schemes) and RFC 3986 percent-encoding.
// One copy each here instead of one per module.
//
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace cairn {

// The value of a hex digit ('0'-'9', 'a'-'f', 'A'-'F'), else -1.
int HexDigitValue(char c);

// `s` with 'A'-'Z' folded to 'a'-'z' and every other byte kept (no locale).
std::string AsciiLower(std::string_view s);

// Percent-encodes `text`: the RFC 3986 unreserved characters (A-Z a-z 0-9
// - . _ ~) are kept, every other byte becomes %XY (upper-case hex); '/'
// is kept too when `keep_slash` (a path rather than one segment or value).
// This is also AWS SigV4's URI encoding.
std::string PercentEncode(std::string_view text, bool keep_slash = false);

// Percent-decodes `text` ('+' as a space too when `plus_is_space`, as in a
// query string). nullopt on a broken escape ("%4", "%zz") or a decoded NUL
// byte, which no path or parameter may hold.
std::optional<std::string> PercentDecode(std::string_view text, bool plus_is_space = false);

}  // namespace cairn
