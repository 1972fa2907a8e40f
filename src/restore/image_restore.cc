#include "restore/image_restore.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>

#include "blob/blob.h"
#include "chunkio/chunk_read.h"
#include "crypto/sha256.h"
#include "pipeline/fetch_pipeline.h"

namespace cairn::restore {
namespace {

// Knows the ids of all-zero chunks: the full-size one and the short tail's.
class ZeroIds {
 public:
  ZeroIds(const index::FixedIndex& idx, const crypto::CryptConfig* crypt)
      : full_(index::ZeroChunkDigest(idx.chunk_size(), crypt)), chunk_size_(idx.chunk_size()) {
    if (idx.chunk_count() > 0 && idx.ChunkLength(idx.chunk_count() - 1) != idx.chunk_size()) {
      tail_len_ = idx.ChunkLength(idx.chunk_count() - 1);
      tail_ = index::ZeroChunkDigest(tail_len_, crypt);
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

pipeline::StageMeter* MeterOf(const ImageRestoreOptions& options) {
  return pipeline::MeterOf(options.progress);
}

// Times a write to the target (or its sync).
pipeline::StageTimer TimeWrite(const ImageRestoreOptions& options) {
  return pipeline::StageTimer(MeterOf(options), pipeline::Stage::kTargetWrites);
}

// Reads of `traits`' source under `controller` (made by ReadConcurrency).
pipeline::FetchPipelineOptions PipelineOptions(const ImageRestoreOptions& options,
                                               const store::SourceTraits& traits,
                                               pipeline::ConcurrencyController& controller) {
  pipeline::FetchPipelineOptions p =
      chunkio::ReadPipelineOptions(traits, options.jobs, &controller);
  p.cpu_workers = options.cpu_workers;
  p.max_bytes_in_flight = options.max_bytes_in_flight;
  p.progress = options.progress;
  return p;
}

// The pipeline's figures, the same for every target of one restore.
void RecordController(const pipeline::ConcurrencyController& controller,
                      const pipeline::FetchPipelineStats& ps, ImageRestoreStats* stats) {
  auto summary = controller.summary();
  stats->jobs_final = summary.final_limit;
  stats->jobs_max = std::max(stats->jobs_max, summary.max_limit);
  stats->jobs_mean = summary.mean_limit;
  stats->peak_bytes_in_flight = std::max(stats->peak_bytes_in_flight, ps.peak_bytes_in_flight);
}

void StartPhase(const ImageRestoreOptions& options, const char* name, uint64_t total) {
  if (options.progress != nullptr) options.progress->StartPhase(name, total);
}
void AddProgress(const ImageRestoreOptions& options, uint64_t bytes) {
  if (options.progress != nullptr) options.progress->Add(bytes);
}

// In-order restore to a stream: windows of positions that fit the memory
// budget are fetched in parallel into slots, then written in order.
Status RestoreToStream(const index::FixedIndex& idx, store::ChunkSource& source, WritableFile& out,
                       const ImageRestoreOptions& options, ImageRestoreStats* stats) {
  const ZeroIds zero(idx, options.crypt);
  const Bytes zeros(idx.chunk_size(), 0);
  const store::SourceTraits traits = source.Traits();
  pipeline::ConcurrencyController controller(chunkio::ReadConcurrency(traits, options.jobs));
  const size_t window =
      std::max<size_t>(1, options.max_bytes_in_flight / std::max<uint32_t>(1, idx.chunk_size()));
  std::atomic<uint64_t> stored{0};
  StartPhase(options, "restore", idx.image_size());
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
    pipeline::FetchPipelineOptions popts = PipelineOptions(options, traits, controller);
    popts.fetch_async =
        chunkio::AsyncChunkReads(source, [&](size_t k) { return idx.digest(fetch_positions[k]); });
    pipeline::FetchPipelineStats ps;
    CAIRN_RETURN_IF_ERROR(pipeline::RunFetchPipeline(
        fetch_positions.size(),
        [&](size_t k, ReadBuffer* out) {
          return chunkio::ReadStoredChunk(source, idx.digest(fetch_positions[k]), out);
        },
        [&](size_t k, ReadBuffer& data) -> Status {
          size_t pos = fetch_positions[k];
          stored.fetch_add(data.size(), std::memory_order_relaxed);
          CAIRN_ASSIGN_OR_RETURN(ByteSpan plain, chunkio::CheckFetchedChunk(
                                                     data, idx.digest(pos), idx.ChunkLength(pos),
                                                     options.crypt, MeterOf(options)));
          slots[k].assign(plain.begin(), plain.end());
          return Status::Ok();
        },
        [&](size_t k) { return uint64_t{idx.ChunkLength(fetch_positions[k])} * 2; }, popts, &ps));
    RecordController(controller, ps, stats);
    for (size_t pos : fetch_positions) {
      stats->fetched_bytes += idx.ChunkLength(pos);
      ++stats->chunks_fetched;
    }
    for (size_t i = begin; i < end; ++i) {
      uint32_t len = idx.ChunkLength(i);
      if (zero.IsZero(idx.digest(i), len)) {
        ++stats->zero_chunks;
        stats->zero_bytes += len;
        auto timer = TimeWrite(options);
        CAIRN_RETURN_IF_ERROR(out.Append(ByteSpan(zeros.data(), len)));
      } else {
        const Bytes& plain = slots[slot_of.at(idx.digest(i))];
        if (plain.size() != len) {  // one id at two lengths: see PlanImageRestore
          return DataLossError(fmt::format("chunk {}: {} bytes, the index needs {}",
                                           crypto::DigestHex(idx.digest(i)), plain.size(), len));
        }
        auto timer = TimeWrite(options);
        CAIRN_RETURN_IF_ERROR(out.Append(plain));
      }
      stats->written_bytes += len;
      AddProgress(options, len);
    }
  }
  stats->stored_bytes = stored;
  stats->dedup_bytes = idx.image_size() - stats->fetched_bytes - stats->zero_bytes;
  return Status::Ok();
}

// One target, opened for the run.
struct OpenTarget {
  std::string partial;  // set: a new file written under this name, renamed at the end
  std::unique_ptr<WritableFile> out;  // null when rehearsing
  bool existing = false;
  bool direct = false;  // aligned writes bypass the page cache (and block the worker)
};

Status Open(Env& env, const ImageTarget& target, const ImageRestoreOptions& options,
            OpenTarget* open) {
  const uint64_t size = target.index->image_size();
  auto info = env.Stat(target.path);
  if (!info.ok() && info.status().code() != StatusCode::kNotFound) return info.status();
  if (!info.ok()) {
    if (options.in_place) {
      return NotFoundError(fmt::format(
          "target {} does not exist; --in-place rewrites an existing image or device "
          "(drop it to restore to a new file)",
          target.path));
    }
    if (options.rehearse) return Status::Ok();
    open->partial = target.path + ".partial";
    CAIRN_ASSIGN_OR_RETURN(open->out, env.OpenWritable(open->partial, OpenMode::kTruncate));
    open->direct = open->out->EnableDirectWrites();
    return open->out->Truncate(size);
  }
  if (options.rehearse && !options.in_place) return Status::Ok();  // never touched
  if (!options.overwrite && !options.in_place) {
    return AlreadyExistsError(
        fmt::format("target {} exists; pass --overwrite to write over it, or --in-place to "
                    "rewrite only the chunks that differ",
                    target.path));
  }
  if (info->is_dir) {
    return InvalidArgumentError(fmt::format("target {} is a directory", target.path));
  }
  if (info->is_block_device && info->size < size) {
    return InvalidArgumentError(fmt::format("device {} holds {} bytes, the image needs {}",
                                            target.path, info->size, size));
  }
  open->existing = true;
  if (options.rehearse) return Status::Ok();  // scanned, never written
  CAIRN_ASSIGN_OR_RETURN(open->out, env.OpenWritable(target.path, OpenMode::kExisting));
  open->direct = open->out->EnableDirectWrites();
  if (!info->is_block_device) CAIRN_RETURN_IF_ERROR(open->out->Truncate(size));
  return Status::Ok();
}

// The in-place scan: reads every chunk of every existing target on many
// threads, hashes it on all cores and clears wanted[t][p] where the target
// already holds the right bytes.
Status ScanTargets(Env& env, std::span<const ImageTarget> targets,
                   const ImageRestoreOptions& options, std::vector<std::vector<uint8_t>>* wanted,
                   std::vector<ImageRestoreStats>* stats) {
  std::vector<std::unique_ptr<ReadableFile>> files(targets.size());
  std::vector<ZeroIds> zero;
  std::vector<std::pair<uint32_t, uint32_t>> work;  // (target, position)
  uint64_t total = 0;
  for (uint32_t t = 0; t < targets.size(); ++t) {
    const index::FixedIndex& idx = *targets[t].index;
    CAIRN_ASSIGN_OR_RETURN(files[t], env.OpenReadable(targets[t].path));
    zero.emplace_back(idx, options.crypt);
    for (uint32_t p = 0; p < idx.chunk_count(); ++p) work.emplace_back(t, p);
    total += idx.image_size();
  }
  std::vector<std::atomic<uint64_t>> scanned(targets.size());
  StartPhase(options, "scan", total);
  // The target is local storage: start shallow, let the controller deepen.
  const store::SourceTraits target_traits{store::MediumKind::kFlash, 2, "the restore target"};
  pipeline::ConcurrencyController controller(chunkio::ReadConcurrency(target_traits, options.jobs));
  pipeline::FetchPipelineStats ps;
  Status s = pipeline::RunFetchPipeline(
      work.size(),
      [&](size_t k, ReadBuffer* out) -> Status {
        auto [t, p] = work[k];
        const index::FixedIndex& idx = *targets[t].index;
        out->Resize(idx.ChunkLength(p));
        CAIRN_ASSIGN_OR_RETURN(size_t n, files[t]->ReadAt(idx.ChunkOffset(p), out->mutable_span()));
        out->Resize(n);  // short: past the end of a smaller target, so it differs
        scanned[t].fetch_add(n, std::memory_order_relaxed);
        return Status::Ok();
      },
      [&](size_t k, ReadBuffer& data) -> Status {
        auto [t, p] = work[k];
        const index::FixedIndex& idx = *targets[t].index;
        const uint32_t len = idx.ChunkLength(p);
        const crypto::Digest& id = idx.digest(p);
        pipeline::StageTimer timer(pipeline::MeterOf(options.progress), pipeline::Stage::kHash);
        bool same = data.size() == len &&
                    (zero[t].IsZero(id, len) ? IsAllZero(data)
                                             : blob::ChunkId(data, options.crypt) == id);
        if (same) (*wanted)[t][p] = 0;
        AddProgress(options, len);
        return Status::Ok();
      },
      [&](size_t k) { return uint64_t{targets[work[k].first].index->ChunkLength(work[k].second)}; },
      PipelineOptions(options, target_traits, controller), &ps);
  for (size_t t = 0; t < targets.size(); ++t) (*stats)[t].scanned_bytes = scanned[t];
  return s;
}

// Fills the per-target byte accounts that follow from the plan.
void Account(std::span<const ImageTarget> targets, const RestorePlan& plan,
             const std::vector<OpenTarget>& open, const ImageRestoreOptions& options,
             std::vector<ImageRestoreStats>* stats) {
  for (const ZeroRange& z : plan.zero_ranges) {
    ImageRestoreStats& s = (*stats)[z.target];
    s.zero_bytes += z.length;
    ++s.zero_chunks;
    if (open[z.target].existing && !options.rehearse) s.written_bytes += z.length;
  }
  for (const PlanItem& item : plan.items) {
    ImageRestoreStats& first = (*stats)[item.uses[0].target];
    first.fetched_bytes += item.length;
    ++first.chunks_fetched;
    for (size_t u = 1; u < item.uses.size(); ++u) (*stats)[item.uses[u].target].dedup_bytes += item.length;
    if (!options.rehearse) {
      for (const Use& use : item.uses) (*stats)[use.target].written_bytes += item.length;
    }
  }
  for (size_t t = 0; t < targets.size(); ++t) {
    ImageRestoreStats& s = (*stats)[t];
    s.bytes = targets[t].index->image_size();
    s.in_place_bytes = s.bytes - s.fetched_bytes - s.dedup_bytes - s.zero_bytes;
  }
}

Status RunPlan(Env& env, std::span<const ImageTarget> targets, store::ChunkSource& source,
               const RestorePlan& plan, std::vector<OpenTarget>& open,
               const ImageRestoreOptions& options, int64_t start,
               std::vector<ImageRestoreStats>* stats) {
  uint64_t total = 0;
  for (const ImageRestoreStats& s : *stats) total += s.bytes - s.in_place_bytes;
  StartPhase(options, options.rehearse ? "rehearse" : "restore", total);

  // Zero ranges: holes in new files (nothing to do), zeros elsewhere.
  uint32_t chunk_size = 0;
  for (const ImageTarget& t : targets) chunk_size = std::max(chunk_size, t.index->chunk_size());
  const Bytes zeros(options.rehearse ? 0 : chunk_size, 0);
  for (const ZeroRange& z : plan.zero_ranges) {
    if (open[z.target].existing && !options.rehearse) {
      const ByteSpan data(zeros.data(), z.length);
      auto write = [&] {
        auto timer = TimeWrite(options);
        return open[z.target].out->WriteAt(z.offset, data);
      };
      CAIRN_RETURN_IF_ERROR(options.gate ? options.gate->Write(z.target, z.offset, data, write)
                                         : write());
    }
    AddProgress(options, z.length);
  }

  // A target is done when its last use is written.
  std::vector<std::atomic<uint64_t>> remaining(targets.size());
  std::vector<std::atomic<int64_t>> done_at(targets.size());
  std::vector<std::atomic<uint64_t>> stored(targets.size());
  for (const PlanItem& item : plan.items) {
    for (const Use& use : item.uses) remaining[use.target].fetch_add(1, std::memory_order_relaxed);
  }
  for (size_t t = 0; t < targets.size(); ++t) done_at[t] = env.NowMonotonicNanos();

  const store::SourceTraits traits = source.Traits();
  pipeline::ConcurrencyController controller(chunkio::ReadConcurrency(traits, options.jobs));
  pipeline::FetchPipelineOptions popts = PipelineOptions(options, traits, controller);
  popts.fetch_async = chunkio::AsyncChunkReads(source, [&](size_t k) { return plan.items[k].id; });
  // A direct write blocks its worker until the device has the data: twice
  // as many workers as cores keep the cores busy meanwhile.
  const bool direct = std::any_of(open.begin(), open.end(), [](const OpenTarget& o) { return o.direct; });
  if (direct && popts.cpu_workers == 0) {
    popts.cpu_workers = 2 * std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }
  pipeline::FetchPipelineStats ps;
  Status s = pipeline::RunFetchPipeline(
      plan.items.size(),
      [&](size_t k, ReadBuffer* out) {
        return chunkio::ReadStoredChunk(source, plan.items[k].id, out);
      },
      [&](size_t k, ReadBuffer& data) -> Status {
        const PlanItem& item = plan.items[k];
        stored[item.uses[0].target].fetch_add(data.size(), std::memory_order_relaxed);
        CAIRN_ASSIGN_OR_RETURN(ByteSpan plain,
                               chunkio::CheckFetchedChunk(data, item.id, item.length, options.crypt,
                                                          MeterOf(options)));
        for (const Use& use : item.uses) {
          if (!options.rehearse) {
            auto write = [&] {
              auto timer = TimeWrite(options);
              return open[use.target].out->WriteAt(use.offset, plain);
            };
            CAIRN_RETURN_IF_ERROR(options.gate
                                      ? options.gate->Write(use.target, use.offset, plain, write)
                                      : write());
          }
          AddProgress(options, plain.size());
          if (remaining[use.target].fetch_sub(1, std::memory_order_acq_rel) == 1) {
            done_at[use.target].store(env.NowMonotonicNanos(), std::memory_order_relaxed);
          }
        }
        return Status::Ok();
      },
      // Stored and decoded copies may both be alive while a chunk is processed.
      [&](size_t k) { return uint64_t{plan.items[k].length} * 2; }, popts, &ps);
  for (size_t t = 0; t < targets.size(); ++t) {
    ImageRestoreStats& st = (*stats)[t];
    RecordController(controller, ps, &st);
    st.stored_bytes = stored[t];
    st.seconds = static_cast<double>(done_at[t] - start) / 1e9;
  }
  return s;
}

}  // namespace

RestorePlan PlanImageRestore(std::span<const index::FixedIndex* const> indexes,
                             const std::vector<std::vector<uint8_t>>* wanted,
                             const crypto::CryptConfig* crypt) {
  RestorePlan plan;
  std::unordered_map<crypto::Digest, size_t, crypto::DigestHash> slot;
  for (uint32_t t = 0; t < indexes.size(); ++t) {
    const index::FixedIndex& idx = *indexes[t];
    const ZeroIds zero(idx, crypt);
    for (size_t i = 0; i < idx.chunk_count(); ++i) {
      if (wanted != nullptr && !(*wanted)[t][i]) continue;
      const crypto::Digest& id = idx.digest(i);
      uint32_t len = idx.ChunkLength(i);
      Use use{t, idx.ChunkOffset(i)};
      if (zero.IsZero(id, len)) {
        plan.zero_ranges.push_back(ZeroRange{t, use.offset, len});
        continue;
      }
      auto [it, fresh] = slot.try_emplace(id, plan.items.size());
      if (!fresh && plan.items[it->second].length != len) {
        // One id at two lengths: the index is inconsistent (an id is the
        // SHA-256 of the plaintext). An item of its own fails its length
        // check (DataLoss) instead of writing past the short tail.
        plan.items.push_back(PlanItem{id, len, {use}});
        continue;
      }
      if (fresh) plan.items.push_back(PlanItem{id, len, {}});
      plan.items[it->second].uses.push_back(use);
    }
  }
  return plan;
}

RestorePlan PlanImageRestore(const index::FixedIndex& idx, const crypto::CryptConfig* crypt) {
  const index::FixedIndex* one[] = {&idx};
  return PlanImageRestore(one, nullptr, crypt);
}

Status RestoreImages(Env& env, std::span<const ImageTarget> targets, store::ChunkSource& source,
                     const ImageRestoreOptions& options, std::vector<ImageRestoreStats>* stats) {
  const int64_t start = env.NowMonotonicNanos();
  stats->assign(targets.size(), ImageRestoreStats{});
  for (const ImageTarget& t : targets) {
    if (t.path == "-" && !options.rehearse && (targets.size() > 1 || options.in_place)) {
      return InvalidArgumentError("standard output takes one image, restored whole (not in place)");
    }
  }
  if (targets.size() == 1 && targets[0].path == "-" && !options.rehearse) {
    (*stats)[0].bytes = targets[0].index->image_size();
    CAIRN_ASSIGN_OR_RETURN(auto out, env.OpenStdout());
    CAIRN_RETURN_IF_ERROR(RestoreToStream(*targets[0].index, source, *out, options, &(*stats)[0]));
    (*stats)[0].seconds = static_cast<double>(env.NowMonotonicNanos() - start) / 1e9;
    return Status::Ok();
  }

  std::vector<OpenTarget> open(targets.size());
  // On any failure: close everything and remove the new files.
  auto abandon = [&](Status s) {
    for (OpenTarget& o : open) {
      o.out.reset();
      if (!o.partial.empty()) env.RemoveFile(o.partial).IgnoreError();
    }
    return s;
  };
  for (size_t t = 0; t < targets.size(); ++t) {
    Status s = Open(env, targets[t], options, &open[t]);
    if (s.ok() && options.gate != nullptr && open[t].out != nullptr) {
      const bool fresh = !open[t].partial.empty();
      s = options.gate->Opened(static_cast<uint32_t>(t), fresh ? open[t].partial : targets[t].path,
                               fresh);
    }
    if (!s.ok()) return abandon(s);
  }

  std::vector<std::vector<uint8_t>> wanted;
  if (options.in_place) {
    for (const ImageTarget& t : targets) wanted.emplace_back(t.index->chunk_count(), 1);
    Status s = ScanTargets(env, targets, options, &wanted, stats);
    if (!s.ok()) return abandon(s);
  }
  std::vector<const index::FixedIndex*> indexes;
  for (const ImageTarget& t : targets) indexes.push_back(t.index);
  const RestorePlan plan = PlanImageRestore(indexes, options.in_place ? &wanted : nullptr, options.crypt);
  Account(targets, plan, open, options, stats);

  Status s = RunPlan(env, targets, source, plan, open, options, start, stats);
  if (!s.ok()) return abandon(s);
  // Durable before reported: data, then the rename into place.
  for (size_t t = 0; t < targets.size(); ++t) {
    OpenTarget& o = open[t];
    if (o.out == nullptr) continue;
    {
      auto timer = TimeWrite(options);  // the writes the page cache held back
      s = o.out->Sync();
    }
    if (s.ok()) s = o.out->Close();
    if (s.ok() && !o.partial.empty()) {
      s = env.Rename(o.partial, targets[t].path);
      if (s.ok()) {
        o.partial.clear();
        s = env.SyncDir(DirName(targets[t].path));
      }
    }
    if (!s.ok()) return abandon(s.WithContext(targets[t].path));
    (*stats)[t].seconds = static_cast<double>(env.NowMonotonicNanos() - start) / 1e9;
  }
  return Status::Ok();
}

Status RestoreImage(Env& env, const index::FixedIndex& idx, store::ChunkSource& source,
                    const std::string& target, const ImageRestoreOptions& options,
                    ImageRestoreStats* stats) {
  const ImageTarget one[] = {{&idx, target}};
  std::vector<ImageRestoreStats> all;
  Status s = RestoreImages(env, one, source, options, &all);
  if (!all.empty()) *stats = all[0];
  return s;
}

}  // namespace cairn::restore
