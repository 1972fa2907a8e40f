#include "access/instant_device.h"

#include <cstring>

#include <fmt/format.h>

namespace cairn::access {

InstantDevice::InstantDevice(Env& env, StreamReader& reader)
    : env_(env), reader_(reader), map_(reader.map()), state_(reader.map().count()) {}

InstantDevice::~InstantDevice() { Close().IgnoreError(); }

Status InstantDevice::Gate::Opened(uint32_t target, const std::string& path, bool fresh) {
  if (target != 0) return InvalidArgumentError("an instant restore has one target");
  CAIRN_ASSIGN_OR_RETURN(auto in, d_->env_.OpenReadable(path));
  CAIRN_ASSIGN_OR_RETURN(auto out, d_->env_.OpenWritable(path, OpenMode::kExisting));
  if (fresh) {  // a new target is all holes: its zero chunks are restored already
    for (size_t c = 0; c < d_->map_.count(); ++c) {
      if (d_->map_.IsZero(c)) d_->state_[c].store(kRestored, std::memory_order_release);
    }
  }
  {
    MutexLock lock(d_->open_mu_);
    d_->in_ = std::move(in);
    d_->out_ = std::move(out);
    d_->opened_ = true;
  }
  d_->opened_cv_.NotifyAll();
  return Status::Ok();
}

Status InstantDevice::Gate::Write(uint32_t, uint64_t offset, ByteSpan data,
                                  const std::function<Status()>& write) {
  const size_t c = d_->map_.Find(offset);
  MutexLock lock(d_->stripes_[c % kStripes]);
  if (d_->state_[c].load(std::memory_order_acquire) != kInStore) return Status::Ok();  // a client's
  (void)data;
  CAIRN_RETURN_IF_ERROR(write());
  d_->state_[c].store(kRestored, std::memory_order_release);
  return Status::Ok();
}

Status InstantDevice::WaitOpened() {
  MutexLock lock(open_mu_);
  while (!opened_ && !closed_) opened_cv_.Wait(open_mu_);
  if (!opened_) return FailedPreconditionError("the restore's target is not open");
  return Status::Ok();
}

Status InstantDevice::Read(uint64_t offset, MutableByteSpan out) {
  const uint64_t end = offset + out.size();
  for (uint64_t pos = offset; pos < end;) {
    const size_t c = map_.Find(pos);
    const uint64_t to = std::min(end, map_.End(c));
    MutableByteSpan part = out.subspan(pos - offset, to - pos);
    if (state_[c].load(std::memory_order_acquire) != kInStore) {
      CAIRN_ASSIGN_OR_RETURN(size_t n, in_->ReadAt(pos, part));
      if (n != part.size()) {
        return DataLossError(fmt::format("target {}: short read at {}", in_->path(), pos));
      }
    } else {
      CAIRN_RETURN_IF_ERROR(reader_.Read(pos, part));
    }
    pos = to;
  }
  return Status::Ok();
}

// Writes `data` (at `offset`, within chunk c) to the target; a chunk still
// in the store is completed from it first and written whole.
Status InstantDevice::WriteChunk(size_t c, uint64_t offset, ByteSpan data) {
  MutexLock lock(stripes_[c % kStripes]);
  if (state_[c].load(std::memory_order_acquire) != kInStore) return out_->WriteAt(offset, data);
  const uint64_t start = map_.Start(c);
  Bytes whole(map_.Length(c), 0);
  if (!map_.IsZero(c)) {
    CAIRN_ASSIGN_OR_RETURN(ChunkRef chunk, reader_.GetChunk(c));
    std::memcpy(whole.data(), chunk->data.data(), whole.size());
  }
  std::memcpy(whole.data() + (offset - start), data.data(), data.size());
  CAIRN_RETURN_IF_ERROR(out_->WriteAt(start, whole));
  state_[c].store(kClient, std::memory_order_release);
  return Status::Ok();
}

Status InstantDevice::Write(uint64_t offset, ByteSpan data) {
  CAIRN_RETURN_IF_ERROR(WaitOpened());
  const uint64_t end = offset + data.size();
  for (uint64_t pos = offset; pos < end;) {
    const size_t c = map_.Find(pos);
    const uint64_t to = std::min(end, map_.End(c));
    CAIRN_RETURN_IF_ERROR(WriteChunk(c, pos, data.subspan(pos - offset, to - pos)));
    pos = to;
  }
  return Status::Ok();
}

Result<std::vector<nbd::Extent>> InstantDevice::Extents(uint64_t offset, uint64_t length) {
  return ChunkExtents(map_, offset, length, [&](size_t c) {
    return map_.IsZero(c) && state_[c].load(std::memory_order_acquire) != kClient;
  });
}

Status InstantDevice::Flush() {
  {
    MutexLock lock(open_mu_);
    if (!opened_ || closed_) return Status::Ok();
  }
  return out_->Sync();
}

Status InstantDevice::Close() {
  Status s = Flush();
  MutexLock lock(open_mu_);
  if (closed_) return s;
  closed_ = true;
  opened_cv_.NotifyAll();
  if (out_ != nullptr) {
    Status c = out_->Close();
    if (s.ok()) s = c;
  }
  return s;
}

uint64_t InstantDevice::restored_chunks() const {
  uint64_t n = 0;
  for (const auto& s : state_) n += s.load() == kRestored ? 1 : 0;
  return n;
}

uint64_t InstantDevice::client_chunks() const {
  uint64_t n = 0;
  for (const auto& s : state_) n += s.load() == kClient ? 1 : 0;
  return n;
}

}  // namespace cairn::access
