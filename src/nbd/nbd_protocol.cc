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

Result<MetaContextRequest> ParseMetaContextRequest(ByteSpan data) {
  auto take = [&](size_t n, size_t* at) -> bool {
    if (n > data.size() - *at) return false;
    *at += n;
    return true;
  };
  size_t at = 0;
  if (!take(4, &at)) return InvalidArgumentError("no export name length");
  const uint32_t name_len = GetBe32(data.data());
  if (!take(name_len, &at)) return InvalidArgumentError("export name longer than the data");
  MetaContextRequest r;
  r.name.assign(reinterpret_cast<const char*>(data.data() + 4), name_len);
  if (!take(4, &at)) return InvalidArgumentError("no query count");
  const uint32_t count = GetBe32(data.data() + at - 4);
  for (uint32_t i = 0; i < count; ++i) {
    if (!take(4, &at)) return InvalidArgumentError(fmt::format("query {}: no length", i));
    const uint32_t len = GetBe32(data.data() + at - 4);
    if (!take(len, &at)) return InvalidArgumentError(fmt::format("query {}: longer than the data", i));
    r.queries.emplace_back(reinterpret_cast<const char*>(data.data() + at - len), len);
  }
  if (at != data.size()) return InvalidArgumentError("bytes after the last query");
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

void PutStructuredReply(uint8_t* out, uint16_t flags, uint16_t type, uint64_t handle,
                        uint32_t length) {
  PutBe32(out, kStructuredReplyMagic);
  PutBe16(out + 4, flags);
  PutBe16(out + 6, type);
  PutBe64(out + 8, handle);
  PutBe32(out + 16, length);
}

void PutSimpleReply(uint8_t* out, uint32_t error, uint64_t handle) {
  PutBe32(out, kSimpleReplyMagic);
  PutBe32(out + 4, error);
  PutBe64(out + 8, handle);
}

}  // namespace cairn::nbd
