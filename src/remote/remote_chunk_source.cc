#include "remote/remote_chunk_source.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <future>
#include <map>

#include <fmt/format.h>

#include "format/coding.h"
#include "server/api.h"

namespace cairn::remote {
namespace {

constexpr size_t kMaxBatch = 64;
constexpr int kMaxAttempts = 4;
constexpr uint32_t kMaxFramePayload = 64u << 20;  // far above the largest chunk

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
  t.initial_reads_in_flight = 16;
  t.description = "server " + client_->url().ToString();
  return t;
}

RemoteChunkSource::Stats RemoteChunkSource::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

Result<Bytes> RemoteChunkSource::Read(const store::ChunkId& id) {
  Bytes out;
  CAIRN_RETURN_IF_ERROR(ReadInto(id, &out));
  return out;
}

Status RemoteChunkSource::ReadInto(const store::ChunkId& id, Bytes* out) {
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
  std::multimap<store::ChunkId, size_t> waiting;
  for (size_t i = 0; i < batch->size(); ++i) {
    std::memcpy(&body[i * 32], (*batch)[i].id.data(), 32);
    waiting.emplace((*batch)[i].id, i);
  }
  std::vector<bool> answered(batch->size(), false);
  size_t answered_count = 0;
  // Frames arrive in pieces of any size: header, then payload. The payload
  // of a good chunk goes straight into the reader's buffer when it gave one.
  Bytes header;
  Bytes message;  // payload of an error frame, or of a ReadAsync read
  Bytes* target = nullptr;
  size_t index = 0;
  uint32_t want = 0;
  bool in_payload = false;
  auto begin_frame = [&]() -> Status {
    store::ChunkId id;
    std::memcpy(id.data(), header.data(), 32);
    auto it = waiting.find(id);
    if (it == waiting.end()) {
      return DataLossError(fmt::format("server {} sent chunk {} that was not asked for",
                                       client_->url().ToString(), crypto::DigestHex(id)));
    }
    want = format::GetU32(&header[33]);
    if (want > kMaxFramePayload) {
      return DataLossError(fmt::format("server {} sent a frame of {} bytes",
                                       client_->url().ToString(), want));
    }
    index = it->second;
    waiting.erase(it);
    Pending& p = (*batch)[index];
    target = header[32] == server::kFrameOk && p.out != nullptr ? p.out : &message;
    target->clear();
    target->reserve(want);
    return Status::Ok();
  };
  auto end_frame = [&] {
    answered[index] = true;
    ++answered_count;
    Pending& p = (*batch)[index];
    uint8_t status = header[32];
    if (status == server::kFrameOk) {
      if (target == p.out) {
        p.done_into(Status::Ok());
      } else {
        p.Finish(std::move(message));
        message = Bytes();
      }
    } else {
      std::string where = fmt::format("server {}: chunk {}: {}", client_->url().ToString(),
                                      crypto::DigestHex(p.id), AsStringView(message));
      p.Finish(status == server::kFrameNotFound ? NotFoundError(where) : UnavailableError(where));
    }
  };
  Status s = client_->CallStreaming(
      "POST", client_->StorePath("/chunks"), body, [&](ByteSpan piece) -> Status {
        while (!piece.empty() || (in_payload && target->size() == want)) {
          if (!in_payload) {
            size_t n = std::min(piece.size(), server::kFrameHeaderSize - header.size());
            header.insert(header.end(), piece.begin(), piece.begin() + n);
            piece = piece.subspan(n);
            if (header.size() < server::kFrameHeaderSize) break;
            CAIRN_RETURN_IF_ERROR(begin_frame());
            in_payload = true;
          }
          size_t n = std::min<size_t>(piece.size(), want - target->size());
          target->insert(target->end(), piece.begin(), piece.begin() + n);
          piece = piece.subspan(n);
          if (target->size() == want) {
            end_frame();
            header.clear();
            in_payload = false;
          }
        }
        return Status::Ok();
      });
  {
    std::lock_guard lock(mu_);
    stats_.chunks += answered_count;
  }
  // Keep only what is still unanswered.
  std::vector<Pending> left;
  for (size_t i = 0; i < batch->size(); ++i) {
    if (!answered[i]) left.push_back(std::move((*batch)[i]));
  }
  *batch = std::move(left);
  if (s.ok() && !batch->empty()) {
    return UnavailableError(fmt::format("server {} ended a batch with {} chunks unsent",
                                        client_->url().ToString(), batch->size()));
  }
  return s;
}

}  // namespace cairn::remote
