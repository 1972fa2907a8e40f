#include "backup/image_backup.h"

#include <atomic>
#include <mutex>

#include <fmt/format.h>

#include "blob/blob.h"
#include "pipeline/fetch_pipeline.h"

namespace cairn::backup {
namespace {

// Shared state of one image backup. Workers write disjoint digests[i].
class ImageJob {
 public:
  ImageJob(store::ChunkSink& sink, const ImageBackupOptions& options, size_t count)
      : sink_(sink), options_(options), digests_(count),
        zero_digest_(index::ZeroChunkDigest(options.chunk_size, options.crypt)) {}

  Status Process(size_t index, ByteSpan data) {
    using pipeline::Stage;
    using pipeline::StageTimer;
    pipeline::StageMeter* meter = pipeline::MeterOf(options_.progress);
    crypto::Digest id;
    bool zero;
    {
      StageTimer timer(meter, Stage::kHash);
      zero = IsAllZero(data);
      if (zero && data.size() == options_.chunk_size) {
        id = zero_digest_;
      } else {
        id = blob::ChunkId(data, options_.crypt);
      }
    }
    digests_[index] = id;
    chunks_.fetch_add(1, std::memory_order_relaxed);
    if (zero) zero_chunks_.fetch_add(1, std::memory_order_relaxed);
    if (!Claim(id)) return CountReused(data.size());
    if (options_.known != nullptr && options_.known->contains(id)) {
      return CountReused(data.size());
    }
    Result<bool> contains = [&] {
      StageTimer timer(meter, Stage::kMetadata);  // a stat, or a question to the server
      return sink_.Contains(id);
    }();
    CAIRN_ASSIGN_OR_RETURN(bool present, std::move(contains));
    if (present) return CountReused(data.size());
    thread_local Bytes stored;
    blob::EncodeOptions encode;
    encode.crypt = options_.crypt;
    {
      StageTimer timer(meter, Stage::kCompress);
      CAIRN_RETURN_IF_ERROR(blob::EncodeInto(data, encode, &stored));
    }
    Result<store::InsertResult> inserted = [&] {
      StageTimer timer(meter, Stage::kTargetWrites);
      return sink_.Insert(id, stored);
    }();
    CAIRN_ASSIGN_OR_RETURN(store::InsertResult r, std::move(inserted));
    if (!r.inserted) return CountReused(data.size());  // raced with another writer
    new_chunks_.fetch_add(1, std::memory_order_relaxed);
    new_bytes_.fetch_add(data.size(), std::memory_order_relaxed);
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
  ImageJob job(sink, options, count);
  // The restore pipeline, run the other way: reads of the source in
  // flight (tuned by the controller, as a restore tunes its fetches), then
  // hash, compress and insert on all cores.
  pipeline::ConcurrencyController controller(
      pipeline::ConcurrencyController::Options::ForJobs(options.reads, 2));
  pipeline::FetchPipelineOptions popts;
  popts.cpu_workers = options.workers;
  popts.max_bytes_in_flight = options.max_bytes_in_flight;
  popts.controller = &controller;
  popts.progress = options.progress;
  pipeline::FetchPipelineStats ps;
  auto length = [&](size_t i) {
    uint64_t offset = uint64_t{i} * options.chunk_size;
    return static_cast<size_t>(std::min<uint64_t>(options.chunk_size, size - offset));
  };
  CAIRN_RETURN_IF_ERROR(pipeline::RunFetchPipeline(
      count,
      [&](size_t i, ReadBuffer* data) -> Status {
        const uint64_t offset = uint64_t{i} * options.chunk_size;
        const size_t len = length(i);
        data->Resize(len);
        CAIRN_ASSIGN_OR_RETURN(size_t n, source.ReadAt(offset, data->mutable_span()));
        if (n != len) {
          return FailedPreconditionError(
              fmt::format("{} shrank while being read (expected {} bytes, ended at {})",
                          source.path(), size, offset + n));
        }
        return Status::Ok();
      },
      [&](size_t i, ReadBuffer& data) -> Status {
        CAIRN_RETURN_IF_ERROR(job.Process(i, data));
        if (options.progress != nullptr) options.progress->Add(data.size());
        return Status::Ok();
      },
      // The read buffer and the compressed copy.
      [&](size_t i) { return uint64_t{length(i)} * 2; }, popts, &ps));
  const pipeline::ConcurrencyController::Summary reads = controller.summary();
  stats->reads_final = reads.final_limit;
  stats->reads_max = reads.max_limit;
  stats->reads_mean = reads.mean_limit;

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
