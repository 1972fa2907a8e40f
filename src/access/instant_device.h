// InstantDevice: the export of `restore --instant`, an image that is being
// restored to its target while a client (a VM booting from it, qemu-img,
// nbdcopy) already uses it.
//
// Each chunk of the image is in one of three states:
//   store     not restored yet: reads come from the store (StreamReader,
//             through the shared cache), ahead of the restore;
//   restored  the restore wrote it (or it is a zero chunk of a new target,
//             a hole already): reads come from the target;
//   client    a client wrote to it first: the chunk was read from the store,
//             the write merged in, and the whole chunk written to the target;
//             the restore skips it when it gets there.
// Writes always land in the target, never in the store. A chunk's state
// changes under its stripe's lock, and the restore's write of a chunk (the
// RestoreGate) takes the same lock, so a client's write and the restore's
// never interleave: the client's bytes win whatever the order.
//
// Client writes that arrive before the restore has created the target wait
// for it (a moment: the target is opened before any chunk is fetched).
//
// Thread safety: Read, Write and Flush concurrently; the gate's Write from
// the restore's workers at the same time.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "access/stream_reader.h"
#include "base/env.h"
#include "base/mutex.h"
#include "nbd/block_device.h"
#include "restore/image_restore.h"

namespace cairn::access {

class InstantDevice final : public nbd::BlockDevice {
 public:
  // REQUIRES: env and reader outlive the device.
  InstantDevice(Env& env, StreamReader& reader);
  ~InstantDevice() override;

  uint64_t size() const override { return reader_.size(); }
  bool writable() const override { return true; }
  Status Read(uint64_t offset, MutableByteSpan out) override;
  Status Write(uint64_t offset, ByteSpan data) override;
  Status Flush() override;
  // Zero chunks nobody has written to read as zeros.
  Result<std::vector<nbd::Extent>> Extents(uint64_t offset, uint64_t length) override;
  // Flushes and closes the target.
  Status Close();

  // What RestoreRequest::gate takes.
  restore::RestoreGate& gate() { return gate_; }

  uint64_t restored_chunks() const;  // written by the restore (or zero holes)
  uint64_t client_chunks() const;    // written by a client first

 private:
  enum : uint8_t { kInStore = 0, kRestored = 1, kClient = 2 };
  class Gate final : public restore::RestoreGate {
   public:
    explicit Gate(InstantDevice* d) : d_(d) {}
    Status Opened(uint32_t target, const std::string& path, bool fresh) override;
    Status Write(uint32_t target, uint64_t offset, ByteSpan data,
                 const std::function<Status()>& write) override;

   private:
    InstantDevice* d_;
  };
  static constexpr size_t kStripes = 64;

  Status WaitOpened();
  Status WriteChunk(size_t c, uint64_t offset, ByteSpan data);

  Env& env_;
  StreamReader& reader_;
  const ChunkMap& map_;
  Gate gate_{this};
  std::vector<std::atomic<uint8_t>> state_;  // per chunk
  std::array<Mutex, kStripes> stripes_;
  Mutex open_mu_;
  CondVar opened_cv_;
  bool opened_ GUARDED_BY(open_mu_) = false;
  bool closed_ GUARDED_BY(open_mu_) = false;
  std::unique_ptr<ReadableFile> in_;      // set once opened
  std::unique_ptr<WritableFile> out_;     // set once opened
};

}  // namespace cairn::access
