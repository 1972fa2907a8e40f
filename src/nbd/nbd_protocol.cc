#include "nbd/nbd_protocol.h"

#include <fmt/format.h>

namespace cairn::nbd {

Result<InfoRequest> ParseInfoRequest(ByteSpan data) {
  if (data.size() < 6) {
    return InvalidArgumentError(fmt::format("{} bytes of option data, at least 6 needed", data.size()));
  }
  const uint32_t name_len = GetBe32(data.data());
  if (name_len > data.size() - 6) {
    return InvalidArgumentError(fmt::format("export name of {} bytes in {} bytes of option data",
                                            name_len, data.size()));
  }
  InfoRequest r;
  r.name.assign(reinterpret_cast<const char*>(data.data() + 4), name_len);
  const uint8_t* p = data.data() + 4 + name_len;
  const uint16_t count = GetBe16(p);
  p += 2;
  const size_t rest = data.size() - 6 - name_len;
  if (rest != size_t{count} * 2) {
    return InvalidArgumentError(
        fmt::format("{} information requests in {} bytes", count, rest));
  }
  for (uint16_t i = 0; i < count; ++i) r.info.push_back(GetBe16(p + 2 * i));
  return r;
}

Result<Request> ParseRequest(const uint8_t* header) {
  const uint32_t magic = GetBe32(header);
  if (magic != kRequestMagic) {
    return InvalidArgumentError(fmt::format("request magic {:#010x}, expected {:#010x}", magic,
                                            kRequestMagic));
  }
  Request r;
  r.flags = GetBe16(header + 4);
  r.type = GetBe16(header + 6);
  r.handle = GetBe64(header + 8);
  r.offset = GetBe64(header + 16);
  r.length = GetBe32(header + 24);
  return r;
}

Bytes OptionReply(uint32_t option, uint32_t type, ByteSpan data) {
  Bytes out(20 + data.size());
  PutBe64(out.data(), kRepMagic);
  PutBe32(out.data() + 8, option);
  PutBe32(out.data() + 12, type);
  PutBe32(out.data() + 16, static_cast<uint32_t>(data.size()));
  std::copy(data.begin(), data.end(), out.begin() + 20);
  return out;
}

void PutSimpleReply(uint8_t* out, uint32_t error, uint64_t handle) {
  PutBe32(out, kSimpleReplyMagic);
  PutBe32(out + 4, error);
  PutBe64(out + 8, handle);
}

}  // namespace cairn::nbd
