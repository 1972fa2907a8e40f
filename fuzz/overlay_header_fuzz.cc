// Fuzz target for the overlay file's header decoder
// (access::DecodeOverlayHeader, docs/FORMAT.md "Overlay"): a file a user
// hands `cairn nbd --overlay`, so hostile. A header that decodes must encode
// back to the same bytes (every field is checked, reserved bytes are zero).
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "access/overlay_device.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto h = cairn::access::DecodeOverlayHeader(cairn::ByteSpan(data, size));
  if (!h.ok()) return 0;
  cairn::Bytes again = cairn::access::EncodeOverlayHeader(*h);
  if (again.size() > size || std::memcmp(again.data(), data, again.size()) != 0) {
    __builtin_fprintf(stderr, "overlay_header_fuzz: a decoded header does not encode back\n");
    std::abort();
  }
  return 0;
}
