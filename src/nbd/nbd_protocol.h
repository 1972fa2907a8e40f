// The Network Block Device protocol, as far as cairn serves it: the fixed
// newstyle handshake (NBD_OPT_EXPORT_NAME, LIST, INFO, GO, ABORT,
// STRUCTURED_REPLY, LIST_META_CONTEXT and SET_META_CONTEXT for
// "base:allocation"; anything else is refused with NBD_REP_ERR_UNSUP) and
// simple or structured replies in the transmission phase (READ, WRITE,
// FLUSH, TRIM, WRITE_ZEROES, CACHE, BLOCK_STATUS, DISC).
// Numbers and layouts follow the protocol document,
// https://github.com/NetworkBlockDevice/nbd/blob/master/doc/proto.md ;
// every integer on the wire is big-endian. docs/FORMAT.md, "NBD", lists
// what cairn sends and accepts.
//
// Only pure encoding and decoding lives here (the fuzz target drives it
// through nbd_session.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/bytes.h"
#include "base/status.h"

namespace cairn::nbd {

inline constexpr uint64_t kMagic = 0x4e42444d41474943;       // "NBDMAGIC"
inline constexpr uint64_t kOptMagic = 0x49484156454F5054;    // "IHAVEOPT"
inline constexpr uint64_t kRepMagic = 0x0003e889045565a9;    // option replies
inline constexpr uint32_t kRequestMagic = 0x25609513;
inline constexpr uint32_t kSimpleReplyMagic = 0x67446698;

// Handshake flags (server) and client flags.
inline constexpr uint16_t kFlagFixedNewstyle = 1 << 0;
inline constexpr uint16_t kFlagNoZeroes = 1 << 1;
inline constexpr uint32_t kClientFixedNewstyle = 1 << 0;
inline constexpr uint32_t kClientNoZeroes = 1 << 1;

// Options.
inline constexpr uint32_t kOptExportName = 1;
inline constexpr uint32_t kOptAbort = 2;
inline constexpr uint32_t kOptList = 3;
inline constexpr uint32_t kOptStartTls = 5;
inline constexpr uint32_t kOptInfo = 6;
inline constexpr uint32_t kOptGo = 7;
inline constexpr uint32_t kOptStructuredReply = 8;
inline constexpr uint32_t kOptListMetaContext = 9;
inline constexpr uint32_t kOptSetMetaContext = 10;

// Option reply types.
inline constexpr uint32_t kRepAck = 1;
inline constexpr uint32_t kRepServer = 2;
inline constexpr uint32_t kRepInfo = 3;
inline constexpr uint32_t kRepMetaContext = 4;
inline constexpr uint32_t kRepErrUnsup = 0x80000001;
inline constexpr uint32_t kRepErrPolicy = 0x80000002;
inline constexpr uint32_t kRepErrInvalid = 0x80000003;
inline constexpr uint32_t kRepErrUnknown = 0x80000006;
inline constexpr uint32_t kRepErrTooBig = 0x80000009;

// NBD_OPT_INFO / NBD_OPT_GO information types.
inline constexpr uint16_t kInfoExport = 0;
inline constexpr uint16_t kInfoName = 1;
inline constexpr uint16_t kInfoDescription = 2;
inline constexpr uint16_t kInfoBlockSize = 3;

// Transmission flags.
inline constexpr uint16_t kTransHasFlags = 1 << 0;
inline constexpr uint16_t kTransReadOnly = 1 << 1;
inline constexpr uint16_t kTransSendFlush = 1 << 2;
inline constexpr uint16_t kTransSendFua = 1 << 3;
inline constexpr uint16_t kTransSendTrim = 1 << 5;
inline constexpr uint16_t kTransSendWriteZeroes = 1 << 6;
inline constexpr uint16_t kTransCanMultiConn = 1 << 8;
inline constexpr uint16_t kTransSendCache = 1 << 10;

// Commands and command flags.
inline constexpr uint16_t kCmdRead = 0;
inline constexpr uint16_t kCmdWrite = 1;
inline constexpr uint16_t kCmdDisc = 2;
inline constexpr uint16_t kCmdFlush = 3;
inline constexpr uint16_t kCmdTrim = 4;
inline constexpr uint16_t kCmdCache = 5;
inline constexpr uint16_t kCmdWriteZeroes = 6;
inline constexpr uint16_t kCmdBlockStatus = 7;
inline constexpr uint16_t kCmdFlagFua = 1 << 0;
inline constexpr uint16_t kCmdFlagNoHole = 1 << 1;
inline constexpr uint16_t kCmdFlagReqOne = 1 << 3;

// Structured replies.
inline constexpr uint32_t kStructuredReplyMagic = 0x668e33ef;
inline constexpr uint16_t kReplyFlagDone = 1 << 0;
inline constexpr uint16_t kReplyTypeNone = 0;
inline constexpr uint16_t kReplyTypeOffsetData = 1;
inline constexpr uint16_t kReplyTypeBlockStatus = 5;
inline constexpr uint16_t kReplyTypeError = (1 << 15) | 1;
inline constexpr size_t kStructuredHeaderSize = 20;

// The one metadata context: base:allocation, whose states are these bits.
inline constexpr char kBaseAllocation[] = "base:allocation";
inline constexpr uint32_t kBaseAllocationId = 1;
inline constexpr uint32_t kStateHole = 1 << 0;
inline constexpr uint32_t kStateZero = 1 << 1;

// Errors in replies (the protocol's errno values).
inline constexpr uint32_t kEperm = 1;
inline constexpr uint32_t kEio = 5;
inline constexpr uint32_t kEnomem = 12;
inline constexpr uint32_t kEinval = 22;
inline constexpr uint32_t kEnospc = 28;
inline constexpr uint32_t kEnotsup = 95;
inline constexpr uint32_t kEshutdown = 108;

inline constexpr size_t kOptionHeaderSize = 16;   // magic, option, length
inline constexpr size_t kRequestHeaderSize = 28;
inline constexpr size_t kSimpleReplySize = 16;
// Option data cairn accepts (a name is at most 4096 bytes).
inline constexpr uint32_t kMaxOptionLength = 64u << 10;

inline void PutBe16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
inline void PutBe32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (24 - 8 * i));
}
inline void PutBe64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (56 - 8 * i));
}
inline uint16_t GetBe16(const uint8_t* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }
inline uint32_t GetBe32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | p[i];
  return v;
}
inline uint64_t GetBe64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return v;
}

// The data of NBD_OPT_INFO and NBD_OPT_GO: the export name and the
// information types asked for. InvalidArgument when the lengths inside do
// not add up to the option's length.
struct InfoRequest {
  std::string name;
  std::vector<uint16_t> info;
};
Result<InfoRequest> ParseInfoRequest(ByteSpan data);

// The data of NBD_OPT_LIST_META_CONTEXT and NBD_OPT_SET_META_CONTEXT: the
// export name and the context queries. InvalidArgument when the lengths
// inside do not add up.
struct MetaContextRequest {
  std::string name;
  std::vector<std::string> queries;
};
Result<MetaContextRequest> ParseMetaContextRequest(ByteSpan data);

// A transmission request header (kRequestHeaderSize bytes). InvalidArgument
// on a wrong magic.
struct Request {
  uint16_t flags = 0;
  uint16_t type = 0;
  uint64_t handle = 0;
  uint64_t offset = 0;
  uint32_t length = 0;
};
Result<Request> ParseRequest(const uint8_t* header);

// An option reply header (20 bytes) followed by `data`.
Bytes OptionReply(uint32_t option, uint32_t type, ByteSpan data = {});
// A simple reply header (16 bytes).
void PutSimpleReply(uint8_t* out, uint32_t error, uint64_t handle);
// A structured reply chunk header (20 bytes); `length` bytes follow.
void PutStructuredReply(uint8_t* out, uint16_t flags, uint16_t type, uint64_t handle,
                        uint32_t length);

}  // namespace cairn::nbd
