#include "access/readahead.h"

#include <algorithm>
#include <optional>

#include "chunkio/chunk_read.h"
#include "pipeline/fetch_pipeline.h"
#include "pipeline/read_errors.h"

namespace cairn::access {
namespace {

// An unconfirmed stream (read once or twice) is continued only by a read
// this close to where it reached: a random reader almost never lands there.
constexpr uint64_t kStartSlack = uint64_t{256} << 10;
// Reads a stream needs before the bytes ahead of it are fetched.
constexpr int kSequentialReads = 3;
// Items "without end": a run lasts while the queue has chunks (see Run).
constexpr size_t kEndless = SIZE_MAX / 2;
constexpr uint64_t kMaxChunk = uint64_t{16} << 20;  // blob::kMaxRawSize
// A run whose feed stayed empty this long ends, and its threads with it.
constexpr int64_t kRunIdleTimeoutNs = 2'000'000'000;

}  // namespace

Readahead::Readahead(const ChunkMap& map, ChunkCache& cache, store::ChunkSource& source,
                     const crypto::CryptConfig* crypt, std::string description,
                     const ReadaheadOptions& options)
    : map_(map), cache_(cache), source_(source), crypt_(crypt),
      description_(std::move(description)), options_(options),
      controller_(pipeline::ConcurrencyController::Options::ForJobs(
          options.jobs, source.Traits().initial_reads_in_flight,
          source.Traits().max_reads_in_flight)),
      streams_(static_cast<size_t>(std::max(1, options.max_streams))) {}

Readahead::~Readahead() {
  stopping_.store(true);
  if (thread_.joinable()) {
    thread_.request_stop();
    std::shared_ptr<pipeline::ItemFeed> feed;
    {
      MutexLock lock(mu_);
      feed = feed_;
    }
    if (feed != nullptr) feed->Close();  // wakes a run waiting for items
    cv_.notify_all();
    thread_.join();
  }
}

void Readahead::OnRead(uint64_t offset, uint64_t length) {
  if (!options_.enabled || length == 0 || offset >= map_.size()) return;
  std::shared_ptr<pipeline::ItemFeed> feed;
  size_t added = 0;
  {
    MutexLock lock(mu_);
    added = DetectLocked(offset, length);
    if (added > 0) feed = feed_;
  }
  // The running pipeline learns of them outside mu_ (the feed takes the
  // pipeline's lock, which never waits for mu_ while held).
  if (feed != nullptr) feed->Add(added);
}

size_t Readahead::DetectLocked(uint64_t offset, uint64_t length) {
  const uint64_t end = std::min(offset + length, map_.size());
  ++clock_;
  Stream* s = nullptr;
  for (Stream& st : streams_) {
    if (st.reads == 0) continue;
    // A sequential stream tolerates reordering within its window.
    const uint64_t slack = st.reads >= kSequentialReads
                               ? std::clamp(st.window, kStartSlack, kSlack)
                               : kStartSlack;
    if (offset + slack >= st.end && offset <= st.end + slack) {
      s = &st;
      break;
    }
  }
  if (s == nullptr) {  // a new stream, in the least recently used slot
    s = &*std::min_element(streams_.begin(), streams_.end(), [](const Stream& a, const Stream& b) {
      return a.last_use < b.last_use;
    });
    *s = Stream{end, end, std::min(kInitialWindow, options_.max_window_bytes), clock_, 1};
    return 0;
  }
  s->last_use = clock_;
  s->end = std::max(s->end, end);
  if (++s->reads < kSequentialReads) return 0;
  if (s->reads == kSequentialReads) ++stats_.streams;
  s->ahead = std::max(s->ahead, s->end);
  if (s->ahead >= map_.size() || s->ahead - s->end >= s->window / 2) return 0;
  const uint64_t to = std::min(map_.size(), s->end + s->window);
  size_t added = 0;
  if (s->ahead < to) {
    added = QueueLocked(s->ahead, to);
    s->ahead = map_.End(map_.Find(to - 1));
  }
  s->window = std::min(2 * s->window, options_.max_window_bytes);
  return added;
}

size_t Readahead::QueueLocked(uint64_t from, uint64_t to) {
  const size_t queued_before = queue_.size();
  for (size_t pos = map_.Find(from), last = map_.Find(to - 1); pos <= last; ++pos) {
    if (map_.IsZero(pos) || cache_.Contains(map_.Id(pos))) continue;
    queue_.push_back(pos);
  }
  const size_t added = queue_.size() - queued_before;
  stats_.queued_chunks += added;
  if (added == 0) return 0;
  if (!thread_.joinable()) {
    thread_ = std::jthread([this](std::stop_token stop) { Run(stop); });
  }
  cv_.notify_one();
  return added;
}

void Readahead::Run(std::stop_token stop) {
  while (true) {
    auto feed = std::make_shared<pipeline::ItemFeed>(kRunIdleTimeoutNs);
    size_t queued;
    {
      MutexLock lock(mu_);
      cv_.wait(mu_, stop, [&]() REQUIRES(mu_) { return !queue_.empty(); });
      if (stop.stop_requested()) return;
      // A run takes the queue from its start; what OnRead queues from now
      // on reaches it through the feed.
      queued = queue_.size();
      feed_ = feed;
    }
    // Outside mu_: the lock order is the pipeline's, then mu_ (size_hint).
    feed->Add(queued);
    RunPipeline(*feed);
  }
}

Result<DecodedChunk> Readahead::Decode(size_t pos, ReadBuffer& stored) {
  ReadBuffer scratch = cache_.buffers().Take(map_.Length(pos));
  auto plain =
      chunkio::DecodeCheckedChunk(stored, map_.Id(pos), map_.Length(pos), &scratch, crypt_);
  if (!plain.ok()) {
    cache_.buffers().Give(std::move(scratch));
    return plain.status();
  }
  DecodedChunk out;
  if (plain->data() == scratch.data()) {
    out.buffer = std::move(scratch);
    cache_.buffers().Give(std::move(stored));
  } else {
    out.buffer = std::move(stored);
    cache_.buffers().Give(std::move(scratch));
  }
  out.data = *plain;
  return out;
}

Status Readahead::ContextFor(size_t pos, const Status& s) const {
  return s.WithContext(DescribeChunk(description_, map_, pos));
}

// One run of the fetch pipeline over the queue: item k is queue_[k]; the
// feed admits items as they are queued, and the run ends when none came
// for kRunIdleTimeoutNs (or the readahead stops). Neither stage ever fails
// the pipeline: errors go to the claims.
void Readahead::RunPipeline(pipeline::ItemFeed& feed) {
  auto position = [&](size_t k) {
    MutexLock lock(mu_);
    return queue_[k];
  };
  pipeline::FetchPipelineOptions popts;
  popts.cpu_workers = options_.cpu_workers;
  // No more reads in flight than a window has chunks (2 MiB and up).
  popts.max_io_threads = static_cast<int>(std::clamp<uint64_t>(
      options_.max_window_bytes >> 21, 4, static_cast<uint64_t>(std::max(4, source_.Traits().max_reads_in_flight))));
  popts.max_bytes_in_flight = 2 * options_.max_window_bytes + (uint64_t{32} << 20);
  popts.controller = &controller_;
  popts.feed = &feed;
  popts.stop = [&](size_t) { return stopping_.load(); };
  // Item k claims its chunk in the cache (none: cached meanwhile, or
  // another reader loads it) and is read into one of the cache's buffers
  // (the pipeline's own live only as long as a run); false: nothing to read.
  auto claim_and_take = [&](size_t k, ReadBuffer* out) {
    const size_t pos = position(k);
    std::optional<ChunkCache::Claim> claim = cache_.TryClaim(map_.Id(pos));
    if (!claim.has_value()) {
      out->Clear();
      MutexLock lock(mu_);
      ++stats_.skipped_chunks;
      return false;
    }
    *out = cache_.buffers().Take(map_.Length(pos));
    MutexLock lock(mu_);
    claims_.emplace(k, std::move(*claim));
    return true;
  };
  // A failed read travels to the CPU stage, which fails the claim with it
  // (an asynchronous read's completion must not do that work).
  pipeline::ReadErrors read_errors;
  pipeline::AsyncFetchFn read_async =
      chunkio::AsyncChunkReads(source_, [&](size_t k) { return map_.Id(position(k)); });
  if (read_async) {
    popts.fetch_async = [&](size_t k, ReadBuffer* out, pipeline::FetchDoneFn done) {
      if (!claim_and_take(k, out)) return done(Status::Ok());
      read_async(k, out, [&read_errors, k, out, done = std::move(done)](Status read) {
        read_errors.Note(k, std::move(read), out);
        done(Status::Ok());
      });
    };
  }
  pipeline::FetchPipelineStats ps;
  Status s = pipeline::RunFetchPipeline(
      kEndless,
      [&](size_t k, ReadBuffer* out) -> Status {
        if (claim_and_take(k, out)) {
          read_errors.Note(k, chunkio::ReadStoredChunk(source_, map_.Id(position(k)), out), out);
        }
        return Status::Ok();
      },
      [&](size_t k, ReadBuffer& stored) -> Status {
        std::optional<ChunkCache::Claim> claim;
        size_t pos;
        {
          MutexLock lock(mu_);
          auto it = claims_.find(k);
          if (it == claims_.end()) return Status::Ok();
          claim.emplace(std::move(it->second));
          claims_.erase(it);
          pos = queue_[k];
        }
        const Status read = read_errors.Take(k);
        if (!read.ok()) {
          claim->Fulfil(ContextFor(pos, read));
          return Status::Ok();
        }
        Result<DecodedChunk> decoded = Decode(pos, stored);
        if (!decoded.ok()) {
          claim->Fulfil(ContextFor(pos, decoded.status()));
          return Status::Ok();
        }
        {
          MutexLock lock(mu_);
          ++stats_.fetched_chunks;
          stats_.fetched_bytes += map_.Length(pos);
        }
        claim->Fulfil(std::move(decoded));
        return Status::Ok();
      },
      // Also asked for the item after the last one admitted, which may not
      // be queued yet: then the largest chunk's size.
      [&](size_t k) {
        MutexLock lock(mu_);
        return 2 * (k < queue_.size() ? uint64_t{map_.Length(queue_[k])} : kMaxChunk);
      },
      popts, &ps);
  s.IgnoreError();  // neither stage fails; a cancelled run would only leave claims
  MutexLock lock(mu_);
  claims_.clear();  // none left after a clean run; any other is abandoned here
  // Every item admitted was processed (nothing fails the run): those leave.
  const size_t taken = std::min<size_t>(ps.items, queue_.size());
  queue_.erase(queue_.begin(), queue_.begin() + static_cast<ptrdiff_t>(taken));
  feed_.reset();
  ++stats_.runs;
  stats_.jobs_final = controller_.limit();
}

ReadaheadStats Readahead::stats() const {
  MutexLock lock(mu_);
  ReadaheadStats s = stats_;
  s.jobs_final = controller_.limit();
  return s;
}

}  // namespace cairn::access
