#include "nbd/nbd_session.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "base/mutex.h"
#include "base/read_buffer.h"
#include "nbd/nbd_protocol.h"
#include "pipeline/bounded_queue.h"
#include "pipeline/worker_group.h"

namespace cairn::nbd {

Status BlockDevice::WriteZeroes(uint64_t offset, uint64_t length) {
  const Bytes zeros(std::min<uint64_t>(length, uint64_t{1} << 20), 0);
  while (length > 0) {
    const uint64_t n = std::min<uint64_t>(length, zeros.size());
    CAIRN_RETURN_IF_ERROR(Write(offset, ByteSpan(zeros.data(), n)));
    offset += n;
    length -= n;
  }
  return Status::Ok();
}

uint32_t NbdError(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk: return 0;
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange: return kEinval;
    case StatusCode::kPermissionDenied: return kEperm;
    case StatusCode::kResourceExhausted: return kEnospc;
    case StatusCode::kUnimplemented: return kEnotsup;
    default: return kEio;
  }
}

namespace {

uint16_t TransmissionFlags(const BlockDevice& device, const ExportInfo& info) {
  uint16_t flags = kTransHasFlags | kTransSendFlush | kTransSendFua;
  flags |= device.writable() ? kTransSendWriteZeroes : kTransReadOnly;
  if (info.multi_conn) flags |= kTransCanMultiConn;
  return flags;
}

bool NameMatches(const std::string& asked, const ExportInfo& info) {
  return asked.empty() || asked == info.name;
}

Status SendReply(Channel& ch, uint32_t option, uint32_t type, ByteSpan data = {}) {
  return ch.WriteAll(OptionReply(option, type, data));
}

Status SendError(Channel& ch, uint32_t option, uint32_t type, const std::string& message) {
  return SendReply(ch, option, type, AsBytes(message));
}

// NBD_REP_INFO replies for NBD_OPT_INFO / NBD_OPT_GO, then the ACK.
Status SendInfo(Channel& ch, uint32_t option, const InfoRequest& req, const BlockDevice& device,
                const ExportInfo& info) {
  uint8_t exp[12];
  PutBe16(exp, kInfoExport);
  PutBe64(exp + 2, device.size());
  PutBe16(exp + 10, TransmissionFlags(device, info));
  CAIRN_RETURN_IF_ERROR(SendReply(ch, option, kRepInfo, ByteSpan(exp, sizeof exp)));
  for (uint16_t type : req.info) {
    Bytes data(2);
    PutBe16(data.data(), type);
    if (type == kInfoName || type == kInfoDescription) {
      const std::string& text = type == kInfoName ? info.name : info.description;
      data.insert(data.end(), text.begin(), text.end());
    } else if (type == kInfoBlockSize) {
      data.resize(14);
      PutBe32(data.data() + 2, 1);                 // minimum: any alignment
      PutBe32(data.data() + 6, 4096);              // preferred
      PutBe32(data.data() + 10, info.max_request); // maximum
    } else {
      continue;  // unknown or already sent (kInfoExport): ignored, as the spec allows
    }
    CAIRN_RETURN_IF_ERROR(SendReply(ch, option, kRepInfo, data));
  }
  return SendReply(ch, option, kRepAck);
}

// NBD_REP_META_CONTEXT for each query base:allocation answers, then ACK.
Status SendMetaContexts(Channel& ch, uint32_t option, const MetaContextRequest& req,
                        bool* chosen) {
  for (const std::string& q : req.queries) {
    // LIST may ask for a namespace ("base:") or everything (no queries).
    const bool match = q == kBaseAllocation || (option == kOptListMetaContext && q == "base:");
    if (!match) continue;
    Bytes data(4);
    PutBe32(data.data(), kBaseAllocationId);
    data.insert(data.end(), kBaseAllocation, kBaseAllocation + std::strlen(kBaseAllocation));
    CAIRN_RETURN_IF_ERROR(SendReply(ch, option, kRepMetaContext, data));
    if (option == kOptSetMetaContext) *chosen = true;
  }
  if (req.queries.empty() && option == kOptListMetaContext) {
    Bytes data(4);
    PutBe32(data.data(), kBaseAllocationId);
    data.insert(data.end(), kBaseAllocation, kBaseAllocation + std::strlen(kBaseAllocation));
    CAIRN_RETURN_IF_ERROR(SendReply(ch, option, kRepMetaContext, data));
  }
  return SendReply(ch, option, kRepAck);
}

}  // namespace

Result<bool> Handshake(Channel& ch, const BlockDevice& device, const ExportInfo& info,
                       Negotiated* negotiated) {
  *negotiated = Negotiated{};
  uint8_t hello[18];
  PutBe64(hello, kMagic);
  PutBe64(hello + 8, kOptMagic);
  PutBe16(hello + 16, kFlagFixedNewstyle | kFlagNoZeroes);
  CAIRN_RETURN_IF_ERROR(ch.WriteAll(ByteSpan(hello, sizeof hello)));
  uint8_t cflags_bytes[4];
  CAIRN_RETURN_IF_ERROR(ch.ReadExact(cflags_bytes));
  const uint32_t cflags = GetBe32(cflags_bytes);
  if ((cflags & ~(kClientFixedNewstyle | kClientNoZeroes)) != 0) {
    return InvalidArgumentError(fmt::format("client flags {:#x}: unknown bits", cflags));
  }
  const bool no_zeroes = (cflags & kClientNoZeroes) != 0;
  while (true) {
    uint8_t head[kOptionHeaderSize];
    Status s = ch.ReadExact(head);
    if (s.code() == StatusCode::kOutOfRange) return false;  // hung up
    CAIRN_RETURN_IF_ERROR(s);
    if (GetBe64(head) != kOptMagic) {
      return InvalidArgumentError(fmt::format("option magic {:#018x}", GetBe64(head)));
    }
    const uint32_t option = GetBe32(head + 8);
    const uint32_t length = GetBe32(head + 12);
    if (length > kMaxOptionLength) {
      return InvalidArgumentError(fmt::format("option {} with {} bytes of data", option, length));
    }
    Bytes data(length);
    CAIRN_RETURN_IF_ERROR(ch.ReadExact(data));
    switch (option) {
      case kOptExportName: {
        const std::string name(data.begin(), data.end());
        if (!NameMatches(name, info)) {
          return NotFoundError(fmt::format("client asked for export '{}'", name));
        }
        Bytes reply(10 + (no_zeroes ? 0 : 124), 0);
        PutBe64(reply.data(), device.size());
        PutBe16(reply.data() + 8, TransmissionFlags(device, info));
        CAIRN_RETURN_IF_ERROR(ch.WriteAll(reply));
        return true;
      }
      case kOptAbort:
        SendReply(ch, option, kRepAck).IgnoreError();  // the client may be gone already
        return false;
      case kOptList: {
        if (length != 0) {
          CAIRN_RETURN_IF_ERROR(SendError(ch, option, kRepErrInvalid, "LIST takes no data"));
          break;
        }
        Bytes entry(4);
        PutBe32(entry.data(), static_cast<uint32_t>(info.name.size()));
        entry.insert(entry.end(), info.name.begin(), info.name.end());
        CAIRN_RETURN_IF_ERROR(SendReply(ch, option, kRepServer, entry));
        CAIRN_RETURN_IF_ERROR(SendReply(ch, option, kRepAck));
        break;
      }
      case kOptInfo:
      case kOptGo: {
        auto req = ParseInfoRequest(data);
        if (!req.ok()) {
          CAIRN_RETURN_IF_ERROR(
              SendError(ch, option, kRepErrInvalid, std::string(req.status().message())));
          break;
        }
        if (!NameMatches(req->name, info)) {
          CAIRN_RETURN_IF_ERROR(SendError(
              ch, option, kRepErrUnknown,
              fmt::format("no export '{}': this server exports '{}'", req->name, info.name)));
          break;
        }
        CAIRN_RETURN_IF_ERROR(SendInfo(ch, option, *req, device, info));
        if (option == kOptGo) return true;
        break;
      }
      case kOptStructuredReply:
        if (length != 0) {
          CAIRN_RETURN_IF_ERROR(SendError(ch, option, kRepErrInvalid, "STRUCTURED_REPLY takes no data"));
          break;
        }
        negotiated->structured = true;
        CAIRN_RETURN_IF_ERROR(SendReply(ch, option, kRepAck));
        break;
      case kOptListMetaContext:
      case kOptSetMetaContext: {
        auto req = ParseMetaContextRequest(data);
        if (!req.ok()) {
          CAIRN_RETURN_IF_ERROR(
              SendError(ch, option, kRepErrInvalid, std::string(req.status().message())));
          break;
        }
        if (option == kOptSetMetaContext && !negotiated->structured) {
          CAIRN_RETURN_IF_ERROR(SendError(ch, option, kRepErrInvalid,
                                          "SET_META_CONTEXT needs structured replies first"));
          break;
        }
        if (!NameMatches(req->name, info)) {
          CAIRN_RETURN_IF_ERROR(SendError(ch, option, kRepErrUnknown,
                                          fmt::format("no export '{}'", req->name)));
          break;
        }
        if (option == kOptSetMetaContext) negotiated->base_allocation = false;
        CAIRN_RETURN_IF_ERROR(SendMetaContexts(ch, option, *req, &negotiated->base_allocation));
        break;
      }
      case kOptStartTls:
        CAIRN_RETURN_IF_ERROR(SendError(ch, option, kRepErrPolicy,
                                        "TLS is not offered: use a Unix socket or a trusted network"));
        break;
      default:
        CAIRN_RETURN_IF_ERROR(SendError(ch, option, kRepErrUnsup,
                                        fmt::format("option {} is not supported", option)));
    }
  }
}

namespace {

struct Work {
  Request req;
  Bytes payload;  // the data of a write
};

// Serves requests: the reading thread admits them under a byte budget, the
// workers (or the reading thread itself) run them and send the replies.
class Server {
 public:
  Server(Channel& ch, BlockDevice& device, const ExportInfo& info, const Negotiated& negotiated,
         const SessionOptions& options, SessionStats* stats)
      : ch_(ch), device_(device), info_(info), negotiated_(negotiated), options_(options),
        stats_(stats) {}

  Status Run() {
    const int workers = std::max(0, options_.workers);
    pipeline::BoundedQueue<Work> queue(static_cast<size_t>(std::max(1, workers)));
    pipeline::WorkerGroup group([&] { queue.Cancel(); });
    if (workers > 0) {
      group.Start(workers, [&](int) -> Status {
        while (auto w = queue.Pop()) CAIRN_RETURN_IF_ERROR(Serve(*w));
        return Status::Ok();
      });
    }
    Status s = ReadRequests(queue, workers, group);
    queue.Close();
    Status w = group.Wait();
    return s.ok() ? w : s;
  }

 private:
  Status ReadRequests(pipeline::BoundedQueue<Work>& queue, int workers,
                      pipeline::WorkerGroup& group) {
    while (!group.failed()) {
      uint8_t head[kRequestHeaderSize];
      Status s = ch_.ReadExact(head);
      if (s.code() == StatusCode::kOutOfRange) return Status::Ok();  // the client left
      CAIRN_RETURN_IF_ERROR(s);
      CAIRN_ASSIGN_OR_RETURN(Request req, ParseRequest(head));
      if (req.type == kCmdDisc) return Status::Ok();
      Work w{req, {}};
      if (req.type == kCmdWrite) {
        if (req.length > info_.max_request) {
          return InvalidArgumentError(fmt::format("write of {} bytes, more than the {} allowed",
                                                  req.length, info_.max_request));
        }
        w.payload.resize(req.length);
        CAIRN_RETURN_IF_ERROR(ch_.ReadExact(w.payload));
      }
      Admit(Cost(req));
      if (workers == 0) {
        CAIRN_RETURN_IF_ERROR(Serve(w));
      } else if (!queue.Push(std::move(w))) {
        break;
      }
    }
    return Status::Ok();
  }

  static uint64_t Cost(const Request& r) {
    return r.type == kCmdRead || r.type == kCmdWrite ? r.length : 0;
  }
  void Admit(uint64_t cost) {
    MutexLock lock(mu_);
    while (in_flight_ != 0 && in_flight_ + cost > options_.max_bytes_in_flight) cv_.Wait(mu_);
    in_flight_ += cost;
  }
  void Done(uint64_t cost) {
    {
      MutexLock lock(mu_);
      in_flight_ -= cost;
    }
    cv_.NotifyAll();
  }

  // The request's error, or 0 when it may run.
  uint32_t Check(const Request& r) const {
    const bool ranged = r.type == kCmdRead || r.type == kCmdWrite || r.type == kCmdWriteZeroes ||
                        r.type == kCmdTrim || r.type == kCmdCache || r.type == kCmdBlockStatus;
    if (!ranged && r.type != kCmdFlush) return kEinval;
    if (r.type == kCmdBlockStatus && (!negotiated_.base_allocation || r.length == 0)) return kEinval;
    if (ranged && (r.offset > device_.size() || r.length > device_.size() - r.offset)) return kEinval;
    if (r.type == kCmdRead && r.length > info_.max_request) return kEinval;
    if ((r.type == kCmdWrite || r.type == kCmdWriteZeroes || r.type == kCmdTrim) &&
        !device_.writable()) {
      return kEperm;
    }
    return 0;
  }

  Status Serve(Work& w) {
    const Request& r = w.req;
    uint32_t error = Check(r);
    // A read's bytes (not zero-filled: the read fills it), or block status;
    // each worker keeps its buffer, so requests do not map fresh memory.
    thread_local ReadBuffer data;
    data.Clear();
    Status s;
    if (error == 0) {
      switch (r.type) {
        case kCmdRead:
          data.Resize(r.length);
          s = device_.Read(r.offset, data);
          break;
        case kCmdBlockStatus:
          s = BlockStatus(r, &data);
          break;
        case kCmdWrite:
          s = device_.Write(r.offset, w.payload);
          if (s.ok() && (r.flags & kCmdFlagFua) != 0) s = device_.Flush();
          break;
        case kCmdWriteZeroes:
          s = device_.WriteZeroes(r.offset, r.length);
          if (s.ok() && (r.flags & kCmdFlagFua) != 0) s = device_.Flush();
          break;
        case kCmdFlush: s = device_.Flush(); break;
        default: break;  // TRIM and CACHE are hints: done when checked
      }
      error = NbdError(s);
      if (!s.ok() && s.code() != StatusCode::kDataLoss && options_.logger != nullptr) {
        // A damaged chunk was reported by the cache already, once.
        options_.logger->Warn("NBD request {} at {} (+{}): {}", r.type, r.offset, r.length,
                              s.message());
      }
    }
    Status sent = Reply(r, error, data);
    Done(Cost(r));
    return sent;
  }

  // base:allocation descriptors (length, flags) from r.offset: the device's
  // extents, each at most 4 GiB - 1 and at most kMaxExtents of them (one
  // with NBD_CMD_FLAG_REQ_ONE), after the context id.
  Status BlockStatus(const Request& r, ReadBuffer* out) {
    constexpr size_t kMaxExtents = 1024;
    CAIRN_ASSIGN_OR_RETURN(std::vector<Extent> extents, device_.Extents(r.offset, r.length));
    const size_t max = (r.flags & kCmdFlagReqOne) != 0 ? 1 : kMaxExtents;
    Bytes b(4);
    PutBe32(b.data(), kBaseAllocationId);
    size_t n = 0;
    for (const Extent& e : extents) {
      for (uint64_t left = e.length; left > 0 && n < max; ++n) {
        const uint32_t len = static_cast<uint32_t>(std::min<uint64_t>(left, 0xFFFFF000u));
        uint8_t d[8];
        PutBe32(d, len);
        PutBe32(d + 4, e.zero ? kStateHole | kStateZero : 0);
        b.insert(b.end(), d, d + 8);
        left -= len;
      }
    }
    if (n == 0) return InternalError("the device gave no extent");
    out->Adopt(std::move(b));
    return Status::Ok();
  }

  Status Reply(const Request& r, uint32_t error, const ReadBuffer& data) {
    MutexLock lock(write_mu_);
    ++stats_->requests;
    if (error != 0) ++stats_->errors;
    if (error == 0 && r.type == kCmdRead) stats_->bytes_read += r.length;
    if (error == 0 && r.type == kCmdWrite) stats_->bytes_written += r.length;
    if (!negotiated_.structured) {
      uint8_t head[kSimpleReplySize];
      PutSimpleReply(head, error, r.handle);
      if (error == 0 && r.type == kCmdRead) return ch_.WriteAll(head, data.span());
      return ch_.WriteAll(head);
    }
    // Structured: one chunk, the last (DONE).
    uint8_t head[kStructuredHeaderSize + 8];
    if (error != 0) {
      PutStructuredReply(head, kReplyFlagDone, kReplyTypeError, r.handle, 6);
      PutBe32(head + kStructuredHeaderSize, error);
      PutBe16(head + kStructuredHeaderSize + 4, 0);  // no message
      return ch_.WriteAll(ByteSpan(head, kStructuredHeaderSize + 6));
    }
    if (r.type == kCmdRead) {
      PutStructuredReply(head, kReplyFlagDone, kReplyTypeOffsetData, r.handle, 8 + r.length);
      PutBe64(head + kStructuredHeaderSize, r.offset);
      return ch_.WriteAll(ByteSpan(head, sizeof head), data.span());
    }
    if (r.type == kCmdBlockStatus) {
      PutStructuredReply(head, kReplyFlagDone, kReplyTypeBlockStatus, r.handle,
                         static_cast<uint32_t>(data.size()));
      return ch_.WriteAll(ByteSpan(head, kStructuredHeaderSize), data.span());
    }
    PutStructuredReply(head, kReplyFlagDone, kReplyTypeNone, r.handle, 0);
    return ch_.WriteAll(ByteSpan(head, kStructuredHeaderSize));
  }

  Channel& ch_;
  BlockDevice& device_;
  const ExportInfo& info_;
  const Negotiated negotiated_;
  const SessionOptions& options_;
  SessionStats* stats_ PT_GUARDED_BY(write_mu_);
  Mutex mu_;
  CondVar cv_;
  uint64_t in_flight_ GUARDED_BY(mu_) = 0;
  Mutex write_mu_;  // one reply at a time on the stream
};

}  // namespace

Status Transmission(Channel& channel, BlockDevice& device, const ExportInfo& info,
                    const Negotiated& negotiated, const SessionOptions& options,
                    SessionStats* stats) {
  SessionStats local;
  Server server(channel, device, info, negotiated, options, stats != nullptr ? stats : &local);
  return server.Run();
}

}  // namespace cairn::nbd
