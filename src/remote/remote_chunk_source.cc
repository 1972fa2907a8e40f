#include "remote/remote_chunk_source.h"

#include <algorithm>
#include <future>
#include <random>

#include <fmt/format.h>

#include "base/io_error.h"
#include "protocol/chunk_frames.h"

namespace cairn::remote {
namespace {

constexpr size_t kMaxBatch = 64;
// An error answer's body kept for the message.
constexpr size_t kMaxErrorBody = 64 << 10;

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
  for (Pending& p : queue_) p.done(CancelledError("the remote chunk source was closed"), p.out);
}

store::SourceTraits RemoteChunkSource::Traits() const {
  store::SourceTraits t;
  t.medium = store::MediumKind::kNetwork;
  t.initial_reads_in_flight = store::kNetworkInitialReads;
  t.max_reads_in_flight = kReadsPerConnection * max_connections_;
  t.description = "server " + client_->url().ToString();
  return t;
}

bool RemoteChunkSource::InjectRequestLatency(int64_t latency_us, int64_t jitter_us) {
  std::lock_guard lock(mu_);
  latency_us_ = std::max<int64_t>(0, latency_us);
  jitter_us_ = std::max<int64_t>(0, jitter_us);
  return true;
}

RemoteChunkSource::Stats RemoteChunkSource::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

store::ConnectionSummary RemoteChunkSource::Connections() const {
  std::lock_guard lock(mu_);
  return active_.Summary(last_active_, max_connections_);
}

int RemoteChunkSource::TargetConnections() const {
  size_t outstanding = queue_.size() + in_batches_;
  size_t want = (outstanding + kReadsPerConnection - 1) / kReadsPerConnection;
  return static_cast<int>(std::clamp<size_t>(want, 1, static_cast<size_t>(max_connections_)));
}

Result<Bytes> RemoteChunkSource::Read(const store::ChunkId& id) {
  ReadBuffer out;
  CAIRN_RETURN_IF_ERROR(ReadInto(id, &out));
  return out.Release();
}

Status RemoteChunkSource::ReadInto(const store::ChunkId& id, ReadBuffer* out) {
  std::promise<Status> promise;
  std::future<Status> future = promise.get_future();
  Pending p;
  p.id = id;
  p.out = out;
  p.done = [&promise](Status s, ReadBuffer*) { promise.set_value(std::move(s)); };
  Enqueue(std::move(p));
  return future.get();
}

void RemoteChunkSource::ReadAsync(const store::ChunkId& id, store::ReadCallback done) {
  Pending p;
  p.id = id;
  p.own = std::make_unique<ReadBuffer>();
  p.out = p.own.get();
  p.done = [done = std::move(done)](Status s, ReadBuffer* out) {
    if (!s.ok()) return done(std::move(s));
    done(out->Release());
  };
  Enqueue(std::move(p));
}

void RemoteChunkSource::ReadIntoAsync(const store::ChunkId& id, ReadBuffer* out,
                                      std::function<void(Status)> done) {
  Pending p;
  p.id = id;
  p.out = out;
  p.done = [done = std::move(done)](Status s, ReadBuffer*) { done(std::move(s)); };
  Enqueue(std::move(p));
}

void RemoteChunkSource::Enqueue(Pending pending) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back(std::move(pending));
    // Another connection when none is free and the reads waiting call for one.
    if (idle_workers_ == 0 && active_.count() < TargetConnections() &&
        static_cast<int>(workers_.size()) < max_connections_) {
      workers_.emplace_back([this] { Worker(); });
      ++stats_.connections;
    }
  }
  cv_.notify_one();
}

void RemoteChunkSource::SleepForLatency() {
  int64_t delay = latency_us_;
  if (jitter_us_ > 0) {
    thread_local std::minstd_rand rng(std::random_device{}());
    delay += static_cast<int64_t>(rng() % static_cast<uint64_t>(jitter_us_));
  }
  if (delay > 0) std::this_thread::sleep_for(std::chrono::microseconds(delay));
}

void RemoteChunkSource::Worker() {
  std::unique_ptr<net::HttpConnection> connection;  // this worker's own
  std::unique_lock lock(mu_);
  while (true) {
    ++idle_workers_;
    cv_.wait(lock, [&] {
      return stop_ || (!queue_.empty() && active_.count() < TargetConnections());
    });
    --idle_workers_;
    if (stop_) return;
    // Share what waits among the connections that will take it.
    const int target = TargetConnections();
    size_t takers = static_cast<size_t>(std::max(1, target - active_.count()));
    size_t take = std::clamp<size_t>((queue_.size() + takers - 1) / takers, 1, kMaxBatch);
    std::vector<Pending> batch;
    for (size_t i = 0; i < take && !queue_.empty(); ++i) {
      batch.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    const size_t taken = batch.size();
    in_batches_ += taken;
    ++stats_.batches;
    active_.Change(+1);
    last_active_ = target;
    if (!queue_.empty()) cv_.notify_one();  // more for another connection
    lock.unlock();
    SleepForLatency();
    const uint64_t generation = client_->session_generation();
    Status s = FetchBatch(&connection, &batch);
    lock.lock();
    active_.Change(-1);
    in_batches_ -= batch.size();  // the answered ones left as they came
    if (batch.empty()) continue;
    // Not answered: back to the front of the queue (after a re-grant for
    // the refused), or failed for good.
    std::vector<Pending> failed, refused;
    const auto now = std::chrono::steady_clock::now();
    int attempts = 0;
    for (auto it = batch.rbegin(); it != batch.rend(); ++it) {
      if (it->refused) {
        refused.push_back(std::move(*it));
        continue;
      }
      if (it->attempts++ == 0) it->failed_at = now;
      attempts = std::max(attempts, it->attempts);
      if (s.code() != StatusCode::kUnavailable || !client_->KeepTrying(it->attempts, it->failed_at)) {
        failed.push_back(std::move(*it));
      } else {
        ++stats_.retries;
        queue_.push_front(std::move(*it));
      }
    }
    if (!refused.empty()) {
      lock.unlock();
      Status regrant = client_->RestoreSession(generation);
      lock.lock();
      for (Pending& p : refused) {
        p.refused = false;
        p.regranted = true;
        if (regrant.ok()) {
          queue_.push_front(std::move(p));
        } else {
          p.regrant_error = regrant;
          failed.push_back(std::move(p));
        }
      }
    }
    if (!queue_.empty()) cv_.notify_all();
    if (!failed.empty()) {
      lock.unlock();
      for (Pending& p : failed) {
        Status why = !p.regrant_error.ok()                     ? p.regrant_error
                     : s.code() == StatusCode::kUnavailable ? client_->GaveUp(s, p.attempts, p.failed_at)
                                                            : s;
        p.done(why.WithContext(fmt::format("chunk {}", crypto::DigestHex(p.id))), p.out);
      }
      lock.lock();
    } else if (s.code() == StatusCode::kUnavailable) {
      lock.unlock();
      std::this_thread::sleep_for(RemoteClient::RetryBackoff(attempts));
      lock.lock();
    }
  }
}

Status RemoteChunkSource::FetchBatch(std::unique_ptr<net::HttpConnection>* connection,
                                     std::vector<Pending>* batch) {
  std::vector<crypto::Digest> asked(batch->size());
  for (size_t i = 0; i < batch->size(); ++i) asked[i] = (*batch)[i].id;
  const Bytes body = protocol::EncodeDigestList(asked);
  const std::string path = client_->StorePath("/chunks");
  const std::string where_from = "server " + client_->url().ToString();
  if (*connection == nullptr || !(*connection)->open()) {
    auto c = client_->Acquire();
    if (!c.ok()) return c.status();
    *connection = std::move(*c);
  }
  net::HttpConnection& conn = **connection;
  // The run's bandwidth limits (--limit-upload/--limit-download): the
  // request body before it goes, every body byte as it arrives, as
  // RemoteClient::Call charges its own.
  client_->ChargeUpload(body);
  const ByteSpan pieces[] = {body};
  auto response = conn.Send("POST", path, pieces);
  if (!response.ok()) {
    connection->reset();
    return response.status();
  }
  if (response->status != 200) {
    Bytes text(kMaxErrorBody);
    size_t got = 0;
    Status read = conn.ReadBody(text.data(), text.size(), &got);
    client_->ChargeDownload(got);
    text.resize(got);
    response->body = std::move(text);
    if (!read.ok() || !conn.open()) connection->reset();
    return client_->ErrorFor(*response, "POST", path);
  }

  // Each good chunk is decrypted into the buffer of the read it answers;
  // an error message into the parser's own.
  std::vector<bool> delivered(batch->size(), false);
  protocol::ChunkFrameParser parser(
      asked,
      [&](size_t index, uint8_t status, ReadBuffer& payload) {
        Pending& p = (*batch)[index];
        if (status == protocol::kFrameNotFound && !p.regranted) {
          // Perhaps a server that restarted and forgot our grants: the
          // worker re-grants and asks again (the read stays in the batch).
          p.refused = true;
          return;
        }
        delivered[index] = true;
        {
          std::lock_guard lock(mu_);
          --in_batches_;
          ++stats_.chunks;
        }
        if (status == protocol::kFrameOk) return p.done(Status::Ok(), p.out);
        const std::string hex = crypto::DigestHex(p.id);
        const std::string_view text = AsStringView(payload.span());
        std::string where = text.starts_with("chunk " + hex)
                                ? fmt::format("{}: {}", where_from, text)
                                : fmt::format("{}: chunk {}: {}", where_from, hex, text);
        // The server's disk could not read it (EIO): what a local read of
        // it gives (DataLoss, exit 3), not a failure of the connection.
        const bool io_error = text.find(kIoErrorText) != std::string_view::npos;
        p.done(status == protocol::kFrameNotFound ? NotFoundError(where)
               : io_error                          ? DataLossError(where)
                                                   : UnavailableError(where),
               p.out);
      },
      [&](size_t index, uint8_t status) -> ReadBuffer* {
        return status == protocol::kFrameOk ? (*batch)[index].out : nullptr;
      });
  Status s;
  for (MutableByteSpan want = parser.Want(); !want.empty(); want = parser.Want()) {
    size_t got = 0;
    s = conn.ReadBody(want.data(), want.size(), &got);
    client_->ChargeDownload(got);
    if (!s.ok() || got == 0) break;
    s = parser.Got(got);
    if (!s.ok()) break;
  }
  if (s.ok() && parser.unanswered() == 0) {
    // The body must end with the last frame.
    uint8_t extra = 0;
    size_t got = 0;
    s = conn.ReadBody(&extra, 1, &got);
    client_->ChargeDownload(got);
    if (s.ok() && got > 0) s = DataLossError("sent bytes after the last frame");
  }
  if (s.ok()) s = parser.Finish();
  if (!s.ok()) {
    conn.Close();  // a body read halfway cannot carry another request
    connection->reset();
    if (s.code() != StatusCode::kUnavailable) s = s.WithContext(where_from);
  }
  // Keep only what is still unanswered.
  std::vector<Pending> left;
  for (size_t i = 0; i < batch->size(); ++i) {
    if (!delivered[i]) left.push_back(std::move((*batch)[i]));
  }
  *batch = std::move(left);
  return s;
}

}  // namespace cairn::remote
