#include "restore/image_restore.h"

#include <algorithm>
#include <atomic>
#include <unordered_map>

#include <fmt/format.h>

#include "blob/blob.h"
#include "pipeline/fetch_pipeline.h"

namespace cairn::restore {
namespace {

// Knows the ids of all-zero chunks: the full-size one and the short tail's.
class ZeroIds {
 public:
  explicit ZeroIds(const index::FixedIndex& idx)
      : full_(index::ZeroChunkDigest(idx.chunk_size())), chunk_size_(idx.chunk_size()) {
    if (idx.chunk_count() > 0 && idx.ChunkLength(idx.chunk_count() - 1) != idx.chunk_size()) {
      tail_len_ = idx.ChunkLength(idx.chunk_count() - 1);
      tail_ = index::ZeroChunkDigest(tail_len_);
    }
  }
  bool IsZero(const crypto::Digest& id, uint32_t length) const {
    return (length == chunk_size_ && id == full_) || (length == tail_len_ && id == tail_);
  }

 private:
  crypto::Digest full_;
  uint32_t chunk_size_;
  crypto::Digest tail_{};
  uint32_t tail_len_ = 0;
};

// Counters shared by the pipeline threads.
struct Counters {
  std::atomic<uint64_t> chunks{0};
  std::atomic<uint64_t> stored{0};
  std::atomic<uint64_t> written{0};
};

// Reads the stored bytes of `id`. A chunk the index needs but the store
// lacks is damage (DataLoss), not a usage error.
Status ReadStored(store::ChunkSource& source, const crypto::Digest& id, Bytes* out) {
  Status s = source.ReadInto(id, out);
  if (s.code() == StatusCode::kNotFound) return DataLossError(std::string(s.message()));
  return s;
}

// Fully checks one stored chunk and returns a view of its plaintext (in
// `stored` or in this thread's decompression buffer).
Result<ByteSpan> DecodeChecked(const Bytes& stored, const crypto::Digest& id, uint32_t length) {
  thread_local Bytes scratch;
  auto plain = blob::DecodeChunkView(stored, id, &scratch);
  if (!plain.ok()) {
    return plain.status().WithContext(fmt::format("chunk {}", crypto::DigestHex(id)));
  }
  if (plain->size() != length) {
    return DataLossError(fmt::format("chunk {}: {} bytes, the index needs {}",
                                     crypto::DigestHex(id), plain->size(), length));
  }
  return plain;
}

pipeline::ConcurrencyController::Options ControllerOptions(const ImageRestoreOptions& options,
                                                           const store::ChunkSource& source) {
  return pipeline::ConcurrencyController::Options::ForJobs(
      options.jobs, source.Traits().initial_reads_in_flight);
}

void RecordController(const pipeline::ConcurrencyController& controller,
                      const pipeline::FetchPipelineStats& ps, ImageRestoreStats* stats) {
  auto summary = controller.summary();
  stats->jobs_final = summary.final_limit;
  stats->jobs_max = std::max(stats->jobs_max, summary.max_limit);
  stats->jobs_mean = summary.mean_limit;
  stats->peak_bytes_in_flight = std::max(stats->peak_bytes_in_flight, ps.peak_bytes_in_flight);
}

pipeline::FetchPipelineOptions PipelineOptions(const ImageRestoreOptions& options,
                                               pipeline::ConcurrencyController& controller) {
  pipeline::FetchPipelineOptions p;
  p.cpu_workers = options.cpu_workers;
  p.max_io_threads = std::max(64, options.jobs);
  p.max_bytes_in_flight = options.max_bytes_in_flight;
  p.controller = &controller;
  return p;
}

// In-order restore to a stream: windows of positions that fit the memory
// budget are fetched in parallel into slots, then written in order.
Status RestoreToStream(const index::FixedIndex& idx, store::ChunkSource& source, WritableFile& out,
                       const ImageRestoreOptions& options, ImageRestoreStats* stats) {
  const ZeroIds zero(idx);
  const Bytes zeros(idx.chunk_size(), 0);
  pipeline::ConcurrencyController controller(ControllerOptions(options, source));
  const size_t window =
      std::max<size_t>(1, options.max_bytes_in_flight / std::max<uint32_t>(1, idx.chunk_size()));
  Counters counters;
  for (size_t begin = 0; begin < idx.chunk_count(); begin += window) {
    size_t end = std::min(idx.chunk_count(), begin + window);
    // Distinct non-zero ids of the window, each fetched once.
    std::vector<size_t> fetch_positions;
    std::unordered_map<crypto::Digest, size_t, crypto::DigestHash> slot_of;
    for (size_t i = begin; i < end; ++i) {
      if (zero.IsZero(idx.digest(i), idx.ChunkLength(i))) continue;
      if (slot_of.try_emplace(idx.digest(i), fetch_positions.size()).second) {
        fetch_positions.push_back(i);
      }
    }
    std::vector<Bytes> slots(fetch_positions.size());
    pipeline::FetchPipelineStats ps;
    CAIRN_RETURN_IF_ERROR(pipeline::RunFetchPipeline(
        fetch_positions.size(),
        [&](size_t k, Bytes* out) {
          return ReadStored(source, idx.digest(fetch_positions[k]), out);
        },
        [&](size_t k, Bytes& stored) -> Status {
          size_t pos = fetch_positions[k];
          counters.stored.fetch_add(stored.size(), std::memory_order_relaxed);
          counters.chunks.fetch_add(1, std::memory_order_relaxed);
          CAIRN_ASSIGN_OR_RETURN(ByteSpan plain,
                                 DecodeChecked(stored, idx.digest(pos), idx.ChunkLength(pos)));
          slots[k].assign(plain.begin(), plain.end());
          return Status::Ok();
        },
        [&](size_t k) { return uint64_t{idx.ChunkLength(fetch_positions[k])} * 2; },
        PipelineOptions(options, controller), &ps));
    RecordController(controller, ps, stats);
    for (size_t i = begin; i < end; ++i) {
      uint32_t len = idx.ChunkLength(i);
      if (zero.IsZero(idx.digest(i), len)) {
        ++stats->zero_chunks;
        CAIRN_RETURN_IF_ERROR(out.Append(ByteSpan(zeros.data(), len)));
      } else {
        const Bytes& plain = slots[slot_of.at(idx.digest(i))];
        if (plain.size() != len) {  // one id at two lengths: see PlanImageRestore
          return DataLossError(fmt::format("chunk {}: {} bytes, the index needs {}",
                                           crypto::DigestHex(idx.digest(i)), plain.size(), len));
        }
        CAIRN_RETURN_IF_ERROR(out.Append(plain));
      }
      stats->written_bytes += len;
    }
  }
  stats->chunks_fetched = counters.chunks;
  stats->stored_bytes = counters.stored;
  return Status::Ok();
}

Status RestoreToFile(const index::FixedIndex& idx, store::ChunkSource& source, WritableFile& out,
                     bool write_zeros, const ImageRestoreOptions& options,
                     ImageRestoreStats* stats) {
  const RestorePlan plan = PlanImageRestore(idx);
  stats->zero_chunks = plan.zero_ranges.size();
  if (write_zeros) {
    const Bytes zeros(idx.chunk_size(), 0);
    for (const auto& [offset, length] : plan.zero_ranges) {
      CAIRN_RETURN_IF_ERROR(out.WriteAt(offset, ByteSpan(zeros.data(), length)));
      stats->written_bytes += length;
    }
  }
  pipeline::ConcurrencyController controller(ControllerOptions(options, source));
  Counters counters;
  pipeline::FetchPipelineStats ps;
  Status s = pipeline::RunFetchPipeline(
      plan.items.size(),
      [&](size_t k, Bytes* out) { return ReadStored(source, plan.items[k].id, out); },
      [&](size_t k, Bytes& stored) -> Status {
        const PlanItem& item = plan.items[k];
        counters.stored.fetch_add(stored.size(), std::memory_order_relaxed);
        counters.chunks.fetch_add(1, std::memory_order_relaxed);
        CAIRN_ASSIGN_OR_RETURN(ByteSpan plain, DecodeChecked(stored, item.id, item.length));
        for (uint64_t offset : item.offsets) {
          CAIRN_RETURN_IF_ERROR(out.WriteAt(offset, plain));
          counters.written.fetch_add(plain.size(), std::memory_order_relaxed);
        }
        return Status::Ok();
      },
      // Stored and decoded copies may both be alive while a chunk is processed.
      [&](size_t k) { return uint64_t{plan.items[k].length} * 2; },
      PipelineOptions(options, controller), &ps);
  RecordController(controller, ps, stats);
  stats->chunks_fetched = counters.chunks;
  stats->stored_bytes = counters.stored;
  stats->written_bytes += counters.written;
  return s;
}

}  // namespace

RestorePlan PlanImageRestore(const index::FixedIndex& idx) {
  RestorePlan plan;
  const ZeroIds zero(idx);
  std::unordered_map<crypto::Digest, size_t, crypto::DigestHash> slot;
  for (size_t i = 0; i < idx.chunk_count(); ++i) {
    const crypto::Digest& id = idx.digest(i);
    uint32_t len = idx.ChunkLength(i);
    if (zero.IsZero(id, len)) {
      plan.zero_ranges.emplace_back(idx.ChunkOffset(i), len);
      continue;
    }
    auto [it, fresh] = slot.try_emplace(id, plan.items.size());
    if (!fresh && plan.items[it->second].length != len) {
      // One id at two lengths: the index is inconsistent (an id is the
      // SHA-256 of the plaintext). An item of its own fails its length check
      // (DataLoss) instead of writing past the short tail.
      plan.items.push_back(PlanItem{id, len, {idx.ChunkOffset(i)}});
      continue;
    }
    if (fresh) plan.items.push_back(PlanItem{id, len, {}});
    plan.items[it->second].offsets.push_back(idx.ChunkOffset(i));
  }
  return plan;
}

Status RestoreImage(Env& env, const index::FixedIndex& idx, store::ChunkSource& source,
                    const std::string& target, const ImageRestoreOptions& options,
                    ImageRestoreStats* stats) {
  stats->bytes = idx.image_size();
  if (target == "-") {
    CAIRN_ASSIGN_OR_RETURN(auto out, env.OpenStdout());
    return RestoreToStream(idx, source, *out, options, stats);
  }
  auto existing = env.Stat(target);
  if (existing.ok()) {
    if (!options.overwrite) {
      return AlreadyExistsError(fmt::format(
          "target {} exists; pass --overwrite to write over it (only differing data matters)",
          target));
    }
    if (existing->is_dir) return InvalidArgumentError(fmt::format("target {} is a directory", target));
    CAIRN_ASSIGN_OR_RETURN(auto out, env.OpenWritable(target, OpenMode::kExisting));
    if (existing->is_block_device) {
      if (existing->size < idx.image_size()) {
        return InvalidArgumentError(fmt::format("device {} holds {} bytes, the image needs {}",
                                                target, existing->size, idx.image_size()));
      }
    } else {
      CAIRN_RETURN_IF_ERROR(out->Truncate(idx.image_size()));
    }
    CAIRN_RETURN_IF_ERROR(RestoreToFile(idx, source, *out, /*write_zeros=*/true, options, stats));
    CAIRN_RETURN_IF_ERROR(out->Sync());
    return out->Close();
  }
  if (existing.status().code() != StatusCode::kNotFound) return existing.status();

  std::string partial = target + ".partial";
  CAIRN_ASSIGN_OR_RETURN(auto out, env.OpenWritable(partial, OpenMode::kTruncate));
  Status s = out->Truncate(idx.image_size());
  if (s.ok()) s = RestoreToFile(idx, source, *out, /*write_zeros=*/false, options, stats);
  if (s.ok()) s = out->Sync();
  if (s.ok()) s = out->Close();
  if (s.ok()) s = env.Rename(partial, target);
  if (!s.ok()) {
    out.reset();
    env.RemoveFile(partial).IgnoreError();
    return s;
  }
  return env.SyncDir(DirName(target));
}

}  // namespace cairn::restore
