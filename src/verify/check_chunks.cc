// Reading and checking the chunks of a verify run (verify_detail.h,
// CheckChunks): on the fetch pipeline, stretch by stretch, each verdict
// into the run's outcomes and the ledger.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <span>

#include "base/io_error.h"
#include "base/mutex.h"
#include "blob/blob.h"
#include "chunkio/chunk_read.h"
#include "pipeline/fetch_pipeline.h"
#include "pipeline/read_errors.h"
#include "verify/ledger.h"
#include "verify/verify_detail.h"

namespace cairn::verify::detail {
namespace {

// Checks one stored chunk: CRC, decryption, decompression, id, length.
// Keyless (an encrypted chunk without its key): the CRC over the stored
// bytes, that it is encrypted, and the length its header claims.
Status CheckStored(ByteSpan stored, const ChunkUse& use, const ArchiveCrypt& crypt,
                   uint64_t* raw_bytes) {
  if (crypt.keyless) {
    CAIRN_ASSIGN_OR_RETURN(blob::Header header, blob::Check(stored));
    if (header.encryption == blob::Encryption::kNone) {
      return DataLossError("chunk is not encrypted, but its snapshot is");
    }
    *raw_bytes = header.raw_size;
    if (header.raw_size != use.length) {
      return DataLossError(
          fmt::format("{} bytes, the index needs {}", header.raw_size, use.length));
    }
    return Status::Ok();
  }
  thread_local ReadBuffer scratch;
  CAIRN_ASSIGN_OR_RETURN(ByteSpan plain,
                         blob::DecodeChunkView(stored, use.id, &scratch, crypt.key));
  *raw_bytes = plain.size();
  if (plain.size() != use.length) {
    return DataLossError(fmt::format("{} bytes, the index needs {}", plain.size(), use.length));
  }
  return Status::Ok();
}

// Results of this run on their way to the ledger, appended in batches.
class LedgerWriter {
 public:
  LedgerWriter(Ledger* ledger, Logger& logger) : ledger_(ledger), logger_(logger) {}
  ~LedgerWriter() { Flush(); }

  void Add(const crypto::Digest& id, int64_t time, const Status& s) {
    if (ledger_ == nullptr) return;
    ChunkVerdict verdict = s.ok()                              ? ChunkVerdict::kOk
                           : IsIoError(s)                      ? ChunkVerdict::kError
                           : s.code() == StatusCode::kDataLoss ? ChunkVerdict::kCorrupt
                           : s.code() == StatusCode::kNotFound ? ChunkVerdict::kMissing
                                                               : ChunkVerdict::kError;
    std::vector<LedgerEntry> full;
    {
      MutexLock lock(mu_);
      pending_.push_back(LedgerEntry{id, time, verdict});
      const auto now = std::chrono::steady_clock::now();
      if (pending_.size() < kBatch && now - last_write_ < kInterval) return;
      last_write_ = now;
      full.swap(pending_);
    }
    Write(full);
  }

  void Flush() {
    std::vector<LedgerEntry> rest;
    {
      MutexLock lock(mu_);
      rest.swap(pending_);
    }
    if (!rest.empty()) Write(rest);
  }

 private:
  // Whichever comes first: a killed run loses at most a quarter second of
  // work (and four fsyncs a second cost nothing next to the reads).
  static constexpr size_t kBatch = 256;
  static constexpr std::chrono::milliseconds kInterval{250};

  void Write(const std::vector<LedgerEntry>& batch) {
    Status s = ledger_->Append(batch);
    if (!s.ok() && !warned_.exchange(true)) {
      logger_.Warn("could not record verify results in the ledger (the next run redoes them): {}",
                   s.ToString());
    }
  }

  Ledger* ledger_;
  Logger& logger_;
  Mutex mu_;
  std::vector<LedgerEntry> pending_ GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point last_write_ GUARDED_BY(mu_) =
      std::chrono::steady_clock::now();
  std::atomic<bool> warned_{false};
};

// Reads and checks chunks (indexes into `unique`, which indexes `uses`) on
// the fetch pipeline, one stretch after another, with one concurrency
// controller (what it learnt carries over). Damage does not stop the run:
// each outcome lands in `out`, and its verdict in the ledger at `now_unix`.
//
// Thread safety: one Check() at a time; it calls the pipeline's stages in
// parallel. Every reference passed must outlive the checker.
class ChunkChecker {
 public:
  ChunkChecker(Env& env, store::ChunkSource& source, const std::vector<ChunkUse>& uses,
               const std::vector<ArchiveCrypt>& crypts, const std::vector<uint32_t>& unique,
               const VerifyOptions& options, int64_t now_unix, LedgerWriter& ledger, Outcomes* out)
      : env_(env),
        source_(source),
        uses_(uses),
        crypts_(crypts),
        unique_(unique),
        options_(options),
        now_unix_(now_unix),
        ledger_(ledger),
        out_(out),
        controller_(chunkio::ReadConcurrency(source.Traits(), options.jobs)) {}

  // Reads `stretch` in order. At `deadline_ns` (monotonic; 0: none) no
  // further chunk starts, except the first one of the run (`first`), the
  // ones started are checked, and Cancelled is returned; the chunks not
  // reached stay kNotReached.
  Status Check(std::span<const uint32_t> stretch, int64_t deadline_ns, bool first) {
    pipeline::FetchPipelineOptions popts =
        chunkio::ReadPipelineOptions(source_.Traits(), options_.jobs, &controller_);
    popts.cpu_workers = options_.cpu_workers;
    popts.progress = options_.progress;
    // Chunks already started when the slice ends (or the task is
    // cancelled) are still checked and recorded. Without either, nothing
    // is asked under the pipeline's admission lock.
    if (deadline_ns > 0 || options_.cancel != nullptr) {
      popts.stop = [&](size_t k) {
        if (options_.cancel != nullptr && options_.cancel->load(std::memory_order_relaxed)) {
          return true;
        }
        return deadline_ns > 0 && !(first && k == 0) && env_.NowMonotonicNanos() >= deadline_ns;
      };
    }
    auto use_of = [&](size_t k) -> const ChunkUse& { return uses_[unique_[stretch[k]]]; };
    // Read errors travel to the CPU stage with the item (its buffer left
    // empty: a stored chunk never is) and are recorded there: not fatal,
    // the run goes on.
    pipeline::ReadErrors read_errors;
    if (source_.ReadsAsync()) {
      popts.fetch_async = [&](size_t k, ReadBuffer* data, pipeline::FetchDoneFn done) {
        source_.ReadIntoAsync(use_of(k).id, data,
                              [&read_errors, k, data, done = std::move(done)](Status read) {
                                read_errors.Note(k, std::move(read), data);
                                done(Status::Ok());
                              });
      };
    }
    pipeline::FetchPipelineStats stats;
    Status s = pipeline::RunFetchPipeline(
        stretch.size(),
        [&](size_t k, ReadBuffer* data) -> Status {
          read_errors.Note(k, source_.ReadInto(use_of(k).id, data), data);
          return Status::Ok();
        },
        [&](size_t k, ReadBuffer& stored) -> Status {
          const ChunkUse& use = use_of(k);
          if (Status read = stored.empty() ? read_errors.Take(k) : Status::Ok(); !read.ok()) {
            out_->SetError(stretch[k], read);
            ledger_.Add(use.id, now_unix_, read);
            checked_.fetch_add(1, std::memory_order_relaxed);
            return Status::Ok();
          }
          stored_bytes_.fetch_add(stored.size(), std::memory_order_relaxed);
          uint64_t raw = 0;
          const ArchiveCrypt& crypt = crypts_[use.archive];
          pipeline::StageMeter* meter = pipeline::MeterOf(options_.progress);
          Status check = [&] {
            pipeline::StageTimer timer(meter, pipeline::Stage::kDecode);
            return CheckStored(stored, use, crypt, &raw);
          }();
          if (check.code() == StatusCode::kDataLoss &&
              source_.Traits().medium == store::MediumKind::kNetwork) {
            // Bytes can be damaged on the way: a chunk from over a network
            // is judged (and quarantined) only if a second read fails too.
            ReadBuffer again;
            uint64_t raw_again = 0;
            if (source_.ReadInto(use.id, &again).ok() &&
                CheckStored(again, use, crypt, &raw_again).ok()) {
              options_.logger->Warn("chunk {} failed its check once ({}) and passed on a second "
                                    "read: damaged on the way, not in the store",
                                    crypto::DigestHex(use.id), check.message());
              check = Status::Ok();
              raw = raw_again;
            }
          }
          raw_bytes_.fetch_add(raw, std::memory_order_relaxed);
          checked_.fetch_add(1, std::memory_order_relaxed);
          // A keyless check proves less than the ledger's "ok" promises.
          pipeline::StageTimer ledger_timer(meter, pipeline::Stage::kMetadata);
          if (crypt.keyless) {
            keyless_.fetch_add(1, std::memory_order_relaxed);
            if (!check.ok()) ledger_.Add(use.id, now_unix_, check);
          } else {
            ledger_.Add(use.id, now_unix_, check);
          }
          if (check.ok()) {
            out_->SetOk(stretch[k]);
          } else {
            out_->SetError(stretch[k], std::move(check));
          }
          if (options_.progress != nullptr) options_.progress->Add(use.length);
          return Status::Ok();
        },
        [&](size_t k) { return uint64_t{use_of(k).length} * 2; }, popts, &stats);
    if (s.ok() && stats.stopped) return CancelledError("verify slice: time is up, or cancelled");
    return s;
  }

  // Bytes, chunks checked and reads in flight, into `report`.
  void Summarize(VerifyReport* report) const {
    report->stored_bytes = stored_bytes_;
    report->raw_bytes = raw_bytes_;
    report->checked_chunks = checked_;
    report->keyless_chunks = keyless_;
    auto summary = controller_.summary();
    report->jobs_final = summary.final_limit;
    report->jobs_max = summary.max_limit;
    report->jobs_mean = summary.mean_limit;
  }

 private:
  Env& env_;
  store::ChunkSource& source_;
  const std::vector<ChunkUse>& uses_;
  const std::vector<ArchiveCrypt>& crypts_;
  const std::vector<uint32_t>& unique_;
  const VerifyOptions& options_;
  const int64_t now_unix_;
  LedgerWriter& ledger_;
  Outcomes* out_;
  pipeline::ConcurrencyController controller_;
  std::atomic<uint64_t> stored_bytes_{0}, raw_bytes_{0}, checked_{0}, keyless_{0};
};

}  // namespace

// Reads and checks the chunks `todo` (indexes into `unique`, which indexes
// `uses`) in order; each outcome lands in `out`. The first `due` chunks are
// read whatever the time; past max_duration no other chunk starts, and the
// ones not reached stay kNotReached. With `by_inode` (a local store), `todo`
// is reordered by inode, stretch by stretch: the due chunks, then the rest,
// in windows of kInodeWindow chunks when a deadline may cut them, so a time
// slice stays stalest-first to within one window and stats only what it
// may read.
Status CheckChunks(Env& env, store::ChunkSource& source, const store::LocalChunkStore* by_inode,
                   const std::vector<ChunkUse>& uses, const std::vector<ArchiveCrypt>& crypts,
                   const std::vector<uint32_t>& unique,
                   std::vector<uint32_t>& todo, size_t due, const VerifyOptions& options,
                   int64_t stamp, Ledger* ledger, Outcomes* out, VerifyReport* report) {
  static constexpr size_t kInodeWindow = 4096;
  LedgerWriter ledger_writer(ledger, *options.logger);
  if (options.progress != nullptr) {
    uint64_t total = 0;
    for (uint32_t u : todo) total += uses[unique[u]].length;
    options.progress->StartPhase("verify", total);
  }
  for (uint32_t u : todo) out->SetNotReached(u);
  ChunkChecker checker(env, source, uses, crypts, unique, options,
                       std::max(env.NowUnixSeconds(), stamp),
                       ledger_writer, out);
  // A slice's time counts from the first chunk (setup may be long on a big
  // store), and every slice checks at least one chunk, so slices progress.
  // Only a deadline tells the due chunks apart: without one, all are read.
  const bool timed = options.max_duration_ns > 0;
  const size_t due_end = timed ? due : 0;
  int64_t deadline_ns = 0;
  Status s;
  for (size_t begin = 0; begin < todo.size() && s.ok();) {
    const bool due_stretch = begin < due_end;
    size_t end = due_stretch ? due_end : todo.size();
    if (!due_stretch && timed && by_inode != nullptr) end = std::min(end, begin + kInodeWindow);
    if (!due_stretch && deadline_ns > 0 && env.NowMonotonicNanos() >= deadline_ns) break;
    if (options.cancel != nullptr && options.cancel->load(std::memory_order_relaxed)) break;
    std::span<uint32_t> stretch(todo.data() + begin, end - begin);
    if (by_inode != nullptr) SortByInode(env, *by_inode, uses, unique, stretch);
    if (options.planned_reads != nullptr) {
      for (uint32_t u : stretch) options.planned_reads->push_back(uses[unique[u]].id);
    }
    if (begin == 0 && timed) deadline_ns = env.NowMonotonicNanos() + options.max_duration_ns;
    s = checker.Check(stretch, due_stretch ? 0 : deadline_ns, begin == 0);
    if (due_stretch && env.NowMonotonicNanos() > deadline_ns) {
      report->due_over_limit = true;  // the due chunks alone took longer than the slice
    }
    begin = end;
  }
  ledger_writer.Flush();
  checker.Summarize(report);
  if (s.code() == StatusCode::kCancelled) return Status::Ok();  // the slice's end
  return s;
}

}  // namespace cairn::verify::detail
