#include "remote/remote_chunk_source.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <future>

#include <fmt/format.h>

#include "remote/chunk_frames.h"
#include "server/api.h"

namespace cairn::remote {
namespace {

constexpr size_t kMaxBatch = 64;
constexpr int kMaxAttempts = 4;
constexpr uint32_t kMaxFramePayload = kMaxChunkFramePayload;

}  // namespace

RemoteChunkSource::RemoteChunkSource(std::shared_ptr<RemoteClient> client, int max_connections)
    : client_(std::move(client)), max_connections_(std::max(1, max_connections)) {}

RemoteChunkSource::~RemoteChunkSource() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : workers_) t.join();
  for (Pending& p : queue_) p.Finish(CancelledError("the remote chunk source was closed"));
}

store::SourceTraits RemoteChunkSource::Traits() const {
  store::SourceTraits t;
  t.medium = store::MediumKind::kNetwork;
  t.initial_reads_in_flight = store::kNetworkInitialReads;
  t.description = "server " + client_->url().ToString();
  return t;
}

RemoteChunkSource::Stats RemoteChunkSource::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

Result<Bytes> RemoteChunkSource::Read(const store::ChunkId& id) {
  Bytes out;
  CAIRN_RETURN_IF_ERROR(ReadIntoBytes(id, &out));
  return out;
}

Status RemoteChunkSource::ReadInto(const store::ChunkId& id, ReadBuffer* out) {
  // The frame parser fills a Bytes (clear, then append: no zero fill), so
  // the buffer lends it its storage.
  Bytes storage = out->Release();
  Status s = ReadIntoBytes(id, &storage);
  out->Adopt(std::move(storage));
  return s;
}

Status RemoteChunkSource::ReadIntoBytes(const store::ChunkId& id, Bytes* out) {
  std::promise<Status> promise;
  std::future<Status> future = promise.get_future();
  Pending p;
  p.id = id;
  p.out = out;
  p.done_into = [&promise](Status s) { promise.set_value(std::move(s)); };
  Enqueue(std::move(p));
  return future.get();
}

void RemoteChunkSource::ReadAsync(const store::ChunkId& id, store::ReadCallback done) {
  Pending p;
  p.id = id;
  p.done = std::move(done);
  Enqueue(std::move(p));
}

void RemoteChunkSource::Enqueue(Pending pending) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back(std::move(pending));
    // A new connection when every worker is busy: the reads in flight the
    // pipeline keeps decide how many connections work at once.
    if (idle_workers_ == 0 && static_cast<int>(workers_.size()) < max_connections_) {
      workers_.emplace_back([this] { Worker(); });
      ++stats_.connections;
    }
  }
  cv_.notify_one();
}

void RemoteChunkSource::Worker() {
  std::unique_lock lock(mu_);
  while (true) {
    ++idle_workers_;
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    --idle_workers_;
    if (stop_) return;
    // Share what is queued among the workers, at most kMaxBatch each.
    size_t workers = std::max<size_t>(1, workers_.size());
    size_t take = std::clamp<size_t>((queue_.size() + workers - 1) / workers, 1, kMaxBatch);
    std::vector<Pending> batch;
    for (size_t i = 0; i < take && !queue_.empty(); ++i) {
      batch.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    ++stats_.batches;
    lock.unlock();
    Status s = FetchBatch(&batch);
    lock.lock();
    if (batch.empty()) continue;
    // Not answered: back to the front of the queue, or failed for good.
    std::vector<Pending> failed;
    for (auto it = batch.rbegin(); it != batch.rend(); ++it) {
      if (++it->attempts >= kMaxAttempts || s.code() != StatusCode::kUnavailable) {
        failed.push_back(std::move(*it));
      } else {
        ++stats_.retries;
        queue_.push_front(std::move(*it));
      }
    }
    if (!failed.empty() || !queue_.empty()) cv_.notify_all();
    if (!failed.empty()) {
      lock.unlock();
      for (Pending& p : failed) {
        p.Finish(s.WithContext(fmt::format("chunk {}", crypto::DigestHex(p.id))));
      }
      lock.lock();
    } else if (s.code() == StatusCode::kUnavailable) {
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::milliseconds(100 << (2 * std::min(2, batch.front().attempts - 1))));
      lock.lock();
    }
  }
}

Status RemoteChunkSource::FetchBatch(std::vector<Pending>* batch) {
  Bytes body(batch->size() * 32);
  std::vector<crypto::Digest> asked(batch->size());
  for (size_t i = 0; i < batch->size(); ++i) {
    asked[i] = (*batch)[i].id;
    std::memcpy(&body[i * 32], asked[i].data(), 32);
  }
  const std::string where_from = "server " + client_->url().ToString();
  // The payload of a good chunk goes straight into the reader's buffer
  // when it gave one; an error message or a ReadAsync chunk into the
  // parser's own.
  ChunkFrameParser parser(
      asked,
      [&](size_t index, uint8_t status, Bytes& payload) {
        Pending& p = (*batch)[index];
        if (status == server::kFrameOk) {
          if (&payload == p.out) {
            p.done_into(Status::Ok());
          } else {
            p.Finish(std::move(payload));
            payload = Bytes();
          }
        } else {
          std::string where = fmt::format("{}: chunk {}: {}", where_from, crypto::DigestHex(p.id),
                                          AsStringView(payload));
          p.Finish(status == server::kFrameNotFound ? NotFoundError(where)
                                                    : UnavailableError(where));
        }
      },
      [&](size_t index, uint8_t status) -> Bytes* {
        return status == server::kFrameOk ? (*batch)[index].out : nullptr;
      },
      kMaxFramePayload);
  Status s = client_->CallStreaming("POST", client_->StorePath("/chunks"), body,
                                    [&](ByteSpan piece) -> Status {
                                      Status fed = parser.Feed(piece);
                                      return fed.ok() ? fed : fed.WithContext(where_from);
                                    });
  {
    std::lock_guard lock(mu_);
    stats_.chunks += parser.frames();
  }
  // Keep only what is still unanswered.
  std::vector<Pending> left;
  for (size_t i = 0; i < batch->size(); ++i) {
    if (!parser.answered(i)) left.push_back(std::move((*batch)[i]));
  }
  *batch = std::move(left);
  if (s.ok() && !batch->empty()) return parser.Finish().WithContext(where_from);
  return s;
}

}  // namespace cairn::remote
