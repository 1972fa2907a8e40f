// One client connection of an NBD export: the handshake, then the
// transmission phase (docs/ARCHITECTURE.md, "NBD export").
//
// Handshake: fixed newstyle with NO_ZEROES. cairn serves one export; it
// answers to its name or to the empty name (the default export), lists it
// for NBD_OPT_LIST, gives size, flags and, when asked, name, description
// and block sizes for NBD_OPT_INFO and NBD_OPT_GO, agrees to structured
// replies and to the base:allocation context (which zero chunks are), and
// refuses every other option with an error reply the client can read (TLS
// with ERR_POLICY).
//
// Structured replies matter beyond BLOCK_STATUS: QEMU reads the tail of an
// export whose size is not a multiple of 512 into a padded buffer, and with
// simple replies waits for the padding to arrive.
//
// Transmission: requests are read in order by the connection's thread and
// served by `workers` threads (several reads of one client in flight at
// once, as nbdcopy and QEMU send them), each answered with a simple reply
// as soon as it is done, in any order (the handle tells the client which).
// Bytes held by requests being served are bounded (max_bytes_in_flight):
// the reader waits before taking another. A read error answers EIO for
// that request only. A malformed request (bad magic, a write longer than
// the maximum) ends the connection; a request outside the export, or a
// write to a read-only export, is answered EINVAL / EPERM and the
// connection goes on.
//
// Thread safety: a session belongs to the thread that runs it; the device
// is called from its workers.
#pragma once

#include <cstdint>
#include <string>

#include "base/bytes.h"
#include "base/logging.h"
#include "base/status.h"
#include "nbd/block_device.h"

namespace cairn::nbd {

// A byte stream to one client: a socket, or memory (tests, fuzzing).
class Channel {
 public:
  virtual ~Channel() = default;
  // Exactly out.size() bytes. OutOfRange when the stream ends first.
  virtual Status ReadExact(MutableByteSpan out) = 0;
  virtual Status WriteAll(ByteSpan data) = 0;
  // `head` then `body`, in one write where the channel can (a reply and
  // its data).
  virtual Status WriteAll(ByteSpan head, ByteSpan body) {
    CAIRN_RETURN_IF_ERROR(WriteAll(head));
    return WriteAll(body);
  }
};

struct ExportInfo {
  std::string name;         // the export's name ("disk0.img")
  std::string description;  // "archive disk0.img of vm/100/…" (NBD_INFO_DESCRIPTION)
  uint32_t max_request = 32u << 20;  // the largest read or write accepted
  bool multi_conn = true;   // NBD_FLAG_CAN_MULTI_CONN: flush is global, reads consistent
};

struct SessionOptions {
  int workers = 4;  // 0: serve each request on the reading thread (fuzzing)
  uint64_t max_bytes_in_flight = uint64_t{64} << 20;
  Logger* logger = nullptr;  // may be null
};

struct SessionStats {
  uint64_t requests = 0;
  uint64_t bytes_read = 0;
  uint64_t bytes_written = 0;
  uint64_t errors = 0;  // requests answered with an error
};

// What the handshake agreed on.
struct Negotiated {
  bool structured = false;       // NBD_OPT_STRUCTURED_REPLY
  bool base_allocation = false;  // NBD_OPT_SET_META_CONTEXT base:allocation
};

// Runs the handshake. true: the client asked for transmission (GO or
// EXPORT_NAME); false: it ended the handshake (ABORT, or hung up).
Result<bool> Handshake(Channel& channel, const BlockDevice& device, const ExportInfo& info,
                       Negotiated* negotiated);

// Serves requests until NBD_CMD_DISC or the end of the stream, then waits
// for the requests in progress. An error ends the connection.
Status Transmission(Channel& channel, BlockDevice& device, const ExportInfo& info,
                    const Negotiated& negotiated, const SessionOptions& options,
                    SessionStats* stats);

// The NBD errno for a device Status.
uint32_t NbdError(const Status& s);

}  // namespace cairn::nbd
