#include "remote/remote_backend.h"

#include <algorithm>

#include <fmt/format.h>

#include "format/coding.h"
#include "protocol/chunk_frames.h"
#include "protocol/messages.h"

namespace cairn::remote {
namespace {

// A batch is sent when it holds this many bytes, or when its chunks decode
// to this many (the server decodes and hashes plain chunks, and caps what
// one request may decode to: limits.max_decoded_mib_per_request, 1 GiB by
// default; a batch ends at most one chunk, 16 MiB, past this).
constexpr size_t kBatchBytes = 4 << 20;
constexpr uint64_t kBatchRawBytes = uint64_t{256} << 20;
// Batches waiting per upload thread before Insert() waits.
constexpr size_t kQueuedPerThread = 2;

// One backup session on the server as a snapshot target.
class RemoteSnapshotTarget final : public datastore::SnapshotTarget {
 public:
  RemoteSnapshotTarget(std::shared_ptr<RemoteClient> client, RemoteChunkSink& sink,
                       std::string path)
      : client_(std::move(client)), sink_(sink), path_(std::move(path)) {
    sink_.StartSession(path_);
  }

  ~RemoteSnapshotTarget() override {
    sink_.EndSession();
    if (!committed_) {
      // Best effort: the server aborts an idle session by itself anyway.
      client_->Call("DELETE", path_).status().IgnoreError();
    }
  }

  Status UseBase(const datastore::SnapshotRef& base) override {
    std::string body = protocol::EncodeBase(base.TimeString());
    return client_->Call("POST", path_ + "/base", AsBytes(body)).status();
  }

  Status WriteFile(const std::string& name, ByteSpan data) override {
    // The indexes reference chunks: those must be on the server first.
    CAIRN_RETURN_IF_ERROR(sink_.Flush());
    return client_->Call("POST", path_ + "/file" + QueryString({{"name", name}}), data).status();
  }

  Status Commit(ByteSpan manifest) override {
    CAIRN_RETURN_IF_ERROR(sink_.Flush());
    CAIRN_RETURN_IF_ERROR(client_->Call("POST", path_ + "/finish", manifest).status());
    committed_ = true;
    return Status::Ok();
  }

 private:
  std::shared_ptr<RemoteClient> client_;
  RemoteChunkSink& sink_;
  std::string path_;
  bool committed_ = false;
};

}  // namespace

int RemoteChunkSink::DefaultMaxConnections() {
  return std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 4, 8);
}

RemoteChunkSink::RemoteChunkSink(std::shared_ptr<RemoteClient> client, int max_connections)
    : client_(std::move(client)),
      max_connections_(max_connections > 0 ? max_connections : DefaultMaxConnections()) {}

RemoteChunkSink::~RemoteChunkSink() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
  for (auto& t : workers_) t.join();
}

void RemoteChunkSink::StartSession(std::string session_path) {
  MutexLock lock(mu_);
  path_ = std::move(session_path);
  uploaded_.clear();
  current_.clear();
  current_chunks_ = 0;
  current_raw_ = 0;
  error_ = Status::Ok();
}

void RemoteChunkSink::EndSession() {
  MutexLock lock(mu_);
  while (!queue_.empty() || in_flight_.count() != 0) idle_cv_.Wait(mu_);
  path_.clear();
  uploaded_.clear();
  current_.clear();
  current_chunks_ = 0;
  current_raw_ = 0;
}

Result<store::InsertResult> RemoteChunkSink::Insert(const store::ChunkId& id, ByteSpan stored) {
  MutexLock lock(mu_);
  if (!error_.ok()) return error_;
  if (path_.empty()) return FailedPreconditionError("chunk upload outside a backup session");
  if (!uploaded_.insert(id).second) return store::InsertResult{false, 0};
  if (current_.capacity() == 0 && !spare_.empty()) {
    current_ = std::move(spare_.back());  // a sent batch's memory, already faulted in
    spare_.pop_back();
  }
  protocol::AppendUploadFrame(&current_, id, stored);
  ++current_chunks_;
  // The blob header's raw_size (docs/FORMAT.md, "Blob"): what it decodes to.
  if (stored.size() >= 20) current_raw_ += format::GetU32(&stored[16]);
  stats_.chunks++;
  stats_.bytes += stored.size();
  if (current_.size() >= kBatchBytes || current_raw_ >= kBatchRawBytes) QueueCurrent();
  if (!error_.ok()) return error_;
  return store::InsertResult{true, stored.size()};
}

void RemoteChunkSink::QueueCurrent() {
  if (current_.empty()) return;
  size_t room = kQueuedPerThread * static_cast<size_t>(max_connections_);
  while (queue_.size() >= room && error_.ok()) cv_.Wait(mu_);
  if (!error_.ok()) return;
  queue_.push_back(std::move(current_));
  current_ = Bytes();
  current_chunks_ = 0;
  current_raw_ = 0;
  stats_.batches++;
  // One more thread while the queue grows, up to the limit.
  if (static_cast<int>(workers_.size()) < max_connections_ &&
      queue_.size() + in_flight_.count() > workers_.size()) {
    workers_.emplace_back([this] { Worker(); });
  }
  cv_.NotifyAll();
}

Result<bool> RemoteChunkSink::Contains(const store::ChunkId& id) {
  MutexLock lock(mu_);
  return uploaded_.contains(id);
}

Status RemoteChunkSink::Flush() {
  MutexLock lock(mu_);
  QueueCurrent();
  while (!queue_.empty() || in_flight_.count() != 0) idle_cv_.Wait(mu_);
  return error_;
}

store::ConnectionSummary RemoteChunkSink::Connections() const {
  MutexLock lock(mu_);
  return in_flight_.Summary(last_in_flight_, max_connections_);
}

RemoteChunkSink::Stats RemoteChunkSink::stats() const {
  MutexLock lock(mu_);
  return stats_;
}

void RemoteChunkSink::Worker() {
  MutexLock lock(mu_);
  while (true) {
    while (!stopping_ && queue_.empty()) cv_.Wait(mu_);
    if (queue_.empty()) return;  // stopping
    Bytes batch = std::move(queue_.front());
    queue_.pop_front();
    std::string path = path_ + "/chunks";
    bool failed = !error_.ok();
    in_flight_.Change(+1);
    last_in_flight_ = in_flight_.count();
    cv_.NotifyAll();  // room for a producer
    lock.Unlock();
    // A retried upload is harmless: the server keeps a chunk it has.
    Status s = failed ? Status::Ok() : client_->Call("POST", path, batch).status();
    lock.Lock();
    if (spare_.size() < kQueuedPerThread * static_cast<size_t>(max_connections_)) {
      batch.clear();
      spare_.push_back(std::move(batch));
    }
    in_flight_.Change(-1);
    if (!s.ok() && error_.ok()) error_ = s.WithContext("uploading chunks");
    if (queue_.empty() && in_flight_.count() == 0) idle_cv_.NotifyAll();
    cv_.NotifyAll();
  }
}

RemoteStoreBackend::RemoteStoreBackend(std::shared_ptr<RemoteClient> client)
    : client_(client), source_(client), sink_(client) {}

Result<std::unique_ptr<datastore::SnapshotTarget>> RemoteStoreBackend::BeginSnapshot(
    const datastore::SnapshotRef& snap) {
  return Begin(snap, false);
}

Result<std::unique_ptr<datastore::SnapshotTarget>> RemoteStoreBackend::BeginRepair(
    const datastore::SnapshotRef& snap) {
  return Begin(snap, true);
}

Result<std::unique_ptr<datastore::SnapshotTarget>> RemoteStoreBackend::Begin(
    const datastore::SnapshotRef& snap, bool repair) {
  protocol::BackupStart start{snap.group.ns, snap.group.type, snap.group.id, snap.TimeString(),
                              repair};
  std::string text = protocol::Encode(start);
  CAIRN_ASSIGN_OR_RETURN(Bytes answer, client_->Call("POST", client_->StorePath("/backup"),
                                                     AsBytes(text)));
  auto session = protocol::DecodeSessionId(answer);
  if (!session.ok()) {
    return session.status().WithContext(fmt::format("server {}", client_->url().ToString()));
  }
  std::string path = client_->StorePath("/backup/" + protocol::UrlEncode(*session));
  return std::unique_ptr<datastore::SnapshotTarget>(
      std::make_unique<RemoteSnapshotTarget>(client_, sink_, path));
}

}  // namespace cairn::remote
