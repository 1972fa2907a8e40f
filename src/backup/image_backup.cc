#include "backup/image_backup.h"

#include <atomic>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "blob/blob.h"
#include "pipeline/bounded_queue.h"
#include "pipeline/buffer_pool.h"
#include "pipeline/worker_group.h"

namespace cairn::backup {
namespace {

struct WorkItem {
  size_t index;
  Bytes data;
};

// Shared state of one image backup. Workers write disjoint digests[i].
class ImageJob {
 public:
  ImageJob(store::ChunkSink& sink, const ImageBackupOptions& options, size_t count)
      : sink_(sink), options_(options), digests_(count),
        zero_digest_(index::ZeroChunkDigest(options.chunk_size)) {}

  Status Process(WorkItem& item) {
    crypto::Digest id;
    bool zero = IsAllZero(item.data);
    if (zero && item.data.size() == options_.chunk_size) {
      id = zero_digest_;
    } else {
      id = crypto::Sha256(item.data);
    }
    digests_[item.index] = id;
    chunks_.fetch_add(1, std::memory_order_relaxed);
    if (zero) zero_chunks_.fetch_add(1, std::memory_order_relaxed);
    if (!Claim(id)) return CountReused(item.data.size());
    if (options_.known != nullptr && options_.known->contains(id)) {
      return CountReused(item.data.size());
    }
    CAIRN_ASSIGN_OR_RETURN(bool present, sink_.Contains(id));
    if (present) return CountReused(item.data.size());
    thread_local Bytes stored;
    CAIRN_RETURN_IF_ERROR(blob::EncodeInto(item.data, {}, &stored));
    CAIRN_ASSIGN_OR_RETURN(store::InsertResult r, sink_.Insert(id, stored));
    if (!r.inserted) return CountReused(item.data.size());  // raced with another writer
    new_chunks_.fetch_add(1, std::memory_order_relaxed);
    new_bytes_.fetch_add(item.data.size(), std::memory_order_relaxed);
    stored_bytes_.fetch_add(r.stored_bytes, std::memory_order_relaxed);
    return Status::Ok();
  }

  void FillStats(ImageStats* s) const {
    s->chunks = chunks_;
    s->zero_chunks = zero_chunks_;
    s->new_chunks = new_chunks_;
    s->new_bytes = new_bytes_;
    s->stored_bytes = stored_bytes_;
    s->reused_chunks = reused_chunks_;
    s->reused_bytes = reused_bytes_;
  }

  std::vector<crypto::Digest> TakeDigests() { return std::move(digests_); }

 private:
  // True for the first worker to meet `id` in this run.
  bool Claim(const crypto::Digest& id) {
    std::lock_guard lock(claimed_mu_);
    return claimed_.insert(id).second;
  }
  Status CountReused(size_t bytes) {
    reused_chunks_.fetch_add(1, std::memory_order_relaxed);
    reused_bytes_.fetch_add(bytes, std::memory_order_relaxed);
    return Status::Ok();
  }

  store::ChunkSink& sink_;
  const ImageBackupOptions& options_;
  std::vector<crypto::Digest> digests_;
  const crypto::Digest zero_digest_;
  std::mutex claimed_mu_;
  DigestSet claimed_;  // GUARDED_BY(claimed_mu_)
  std::atomic<uint64_t> chunks_{0}, zero_chunks_{0}, new_chunks_{0}, new_bytes_{0},
      stored_bytes_{0}, reused_chunks_{0}, reused_bytes_{0};
};

}  // namespace

Result<index::FixedIndex> BackupImage(ReadableFile& source, uint64_t size, store::ChunkSink& sink,
                                      const ImageBackupOptions& options, ImageStats* stats) {
  CAIRN_RETURN_IF_ERROR(index::FixedIndex::ValidateChunkSize(options.chunk_size));
  if (size > index::kMaxImageSize) {
    return InvalidArgumentError(fmt::format("{}: {} bytes is larger than the supported maximum",
                                            source.path(), size));
  }
  const size_t count = index::FixedIndex::ChunkCount(size, options.chunk_size);
  const int workers = options.workers > 0
                          ? options.workers
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  ImageJob job(sink, options, count);
  pipeline::BoundedQueue<WorkItem> queue(static_cast<size_t>(workers) * 2);
  // Chunk buffers go round: reader → worker → pool → reader.
  pipeline::BufferPool pool(static_cast<size_t>(workers) * 3 + 2);
  pipeline::WorkerGroup group([&] { queue.Cancel(); });
  group.Start(workers, [&](int) -> Status {
    while (auto item = queue.Pop()) {
      Status s = job.Process(*item);
      pool.Give(std::move(item->data));
      CAIRN_RETURN_IF_ERROR(s);
    }
    return Status::Ok();
  });

  // Reader: this thread.
  Status read_status;
  for (size_t i = 0; i < count && !group.failed(); ++i) {
    uint64_t offset = uint64_t{i} * options.chunk_size;
    size_t len = static_cast<size_t>(std::min<uint64_t>(options.chunk_size, size - offset));
    Bytes data = pool.Take();
    data.resize(len);
    auto n = source.ReadAt(offset, data);
    if (!n.ok()) {
      read_status = n.status();
      break;
    }
    if (*n != len) {
      read_status = FailedPreconditionError(fmt::format(
          "{} shrank while being read (expected {} bytes, ended at {})", source.path(), size,
          offset + *n));
      break;
    }
    if (!queue.Push(WorkItem{i, std::move(data)})) break;  // cancelled by a worker error
  }
  if (read_status.ok()) {
    queue.Close();
  } else {
    group.Fail(read_status);
  }
  CAIRN_RETURN_IF_ERROR(group.Wait());

  CAIRN_ASSIGN_OR_RETURN(uint64_t end_size, source.Size());
  if (end_size != size) {
    return FailedPreconditionError(fmt::format(
        "{} changed size while being read ({} → {} bytes); back up a stable copy or snapshot",
        source.path(), size, end_size));
  }
  job.FillStats(stats);
  stats->bytes = size;
  return index::FixedIndex(size, options.chunk_size, job.TakeDigests());
}

}  // namespace cairn::backup
