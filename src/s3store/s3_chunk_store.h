// S3ChunkStore: the chunks of an object-store datastore, one object per
// chunk at PREFIX/.chunks/XXX/<64-hex id> (XXX: the id's first three hex
// digits, the local store's layout), over one S3Client.
//
// Reads: ReadAsync and ReadIntoAsync are a GET on the client's I/O thread
// (ReadsAsync() is true), so the fetch pipeline keeps as many in flight as
// its controller asks (object stores want 32–128; Traits() suggests 32 to
// start) from one thread, not one parked thread per GET.
//
// Writes: Insert() queues a create-only PUT (If-None-Match: *, Content-MD5)
// and returns; up to kMaxUploads run at once (Insert waits for a free
// slot, which bounds memory to kMaxUploads chunks), and Flush() waits for
// all and returns the first failure. A server without create-only PUTs
// (Swift's s3api answers 501) gets plain PUTs from then on: a chunk's
// content is fixed by its id, so overwriting one is harmless. Contains() is
// a HEAD.
//
// Thread safety: all methods may be called concurrently.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>

#include "s3/s3_client.h"
#include "s3store/s3_location.h"
#include "store/chunk_source.h"

namespace cairn::s3store {

class S3ChunkStore final : public store::ChunkSource, public store::ChunkSink {
 public:
  static constexpr int kMaxUploads = 32;
  // Keys per DeleteObjects request. S3 allows 1000, but Swift's s3api
  // deletes them one by one and answers only at the end: 1000 keys took
  // it 25–48 s, near the client's 30 s stall timeout. Smaller batches,
  // all in flight, take the same total time on any server.
  static constexpr size_t kDeleteBatch = 200;

  S3ChunkStore(std::shared_ptr<s3::S3Client> client, S3Location location);
  ~S3ChunkStore() override;  // waits for uploads in flight

  Result<Bytes> Read(const store::ChunkId& id) override;
  void ReadAsync(const store::ChunkId& id, store::ReadCallback done) override;
  // The GET's body is adopted into *out (no copy).
  void ReadIntoAsync(const store::ChunkId& id, ReadBuffer* out,
                     std::function<void(Status)> done) override;
  bool ReadsAsync() const override { return true; }
  store::SourceTraits Traits() const override;
  Result<store::InsertResult> Insert(const store::ChunkId& id, ByteSpan stored) override;
  // An unconditional PUT, waited for (the server's verified uploads).
  Result<store::InsertResult> Replace(const store::ChunkId& id, ByteSpan stored) override;
  Result<bool> Contains(const store::ChunkId& id) override;
  Status Flush() override;

  // Copies the chunk to "<key>.bad" and deletes it. Returns the new key.
  Result<std::string> Quarantine(const store::ChunkId& id);
  // Every chunk object (16 listings in parallel, one per first hex digit).
  Status List(const std::function<void(std::string_view name, uint64_t size)>& each);
  // Deletes chunk objects by name ("<hex>" or "<hex>.bad"), in batches.
  Status Remove(std::span<const std::string> names);

  std::string ChunkKey(const store::ChunkId& id) const;
  std::string KeyOfName(std::string_view name) const;

 private:
  void Upload(std::string key, Bytes body);
  void UploadDone(const std::string& key, Status s);
  void ProbeOnce();

  std::shared_ptr<s3::S3Client> client_;
  S3Location location_;

  // Whether the server honours If-None-Match: * (unknown until the first
  // answer: 0 unknown, 1 yes, -1 no).
  std::atomic<int> create_only_{0};

  std::mutex mu_;
  std::condition_variable cv_;
  int uploads_ = 0;
  Status first_error_;
};

}  // namespace cairn::s3store
