// server::Api: chunk downloads (one chunk, batches streamed from a
// producer) and the backup-session routes (api_request.h has the split).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>

#include "blob/blob.h"
#include "format/coding.h"
#include "server/api_request.h"
#include "server/metrics.h"

namespace cairn::server {

using nlohmann::json;

namespace {

Status NoChunk(const crypto::Digest& id) {
  return NotFoundError(fmt::format("no chunk {}", crypto::DigestHex(id)));
}

// Whether a backup token may have `stored`: its mode is one of `modes`.
Status CheckMode(const crypto::Digest& id, ByteSpan stored, const std::vector<ChunkMode>& modes) {
  auto header = blob::Check(stored);
  if (header.ok()) {
    ChunkMode mode;
    mode.encrypted = header->encryption != blob::Encryption::kNone;
    if (mode.encrypted) mode.key_print = header->key_print;
    if (std::find(modes.begin(), modes.end(), mode) != modes.end()) return Status::Ok();
  }
  return NoChunk(id);
}

// Whether `token` may read `id` at all, before reading it; for a backup
// token also the modes the stored chunk must be in.
bool MayRead(ApiShared& api, const Token& token, const std::string& store_name,
             const crypto::Digest& id, std::vector<ChunkMode>* modes) {
  switch (token.role) {
    case Role::kAdmin:
      return true;
    case Role::kReader:
    case Role::kVerify:
      return api.grants.MayRead(token.name, store_name, id);
    case Role::kBackup:
      *modes = api.sessions.ReadableModes(token.name, store_name, id);
      return !modes->empty();
    case Role::kMetrics:
      return false;
  }
  return false;
}

// A batched download (POST …/chunks), produced piece by piece on workers
// while the client takes it (net::ResponseWriter::Stream): each call
// appends frames until about a megabyte is ready.
class ChunkBatch {
 public:
  ChunkBatch(ApiShared& api, Token token, std::string store_name, datastore::Datastore& store,
             std::vector<crypto::Digest> ids)
      : api_(api),
        token_(std::move(token)),
        store_name_(std::move(store_name)),
        store_(store),
        ids_(std::move(ids)),
        // From an object store, each read waits a round trip: keep a few
        // going ahead of the one being sent (in order).
        ahead_(store.source().Traits().medium == store::MediumKind::kNetwork) {}

  // Each call sends about a megabyte or at least one chunk: a frame
  // header, then the chunk from the buffer it was read into (or a message).
  Status Next(net::ResponseWriter::StreamPieces* out, bool* done) {
    constexpr size_t kPiece = 1 << 20;
    size_t produced = 0;
    while (produced < kPiece && next_ < ids_.size()) {
      const crypto::Digest& id = ids_[next_++];
      ReadBuffer data = out->Take();
      Status s;
      if (ahead_) {
        s = ReadAhead(id);
        if (s.ok()) data.Adopt(std::move(ahead_data_));
      } else {
        s = ReadChunkAs(api_, token_, store_name_, store_, id, &data);
      }
      std::string message;
      ByteSpan payload = data.span();
      uint8_t status = protocol::kFrameOk;
      if (!s.ok()) {
        status = s.code() == StatusCode::kNotFound ? protocol::kFrameNotFound
                                                   : protocol::kFrameError;
        message = api_.scrubber.Scrub(s.message());
        payload = AsBytes(message);
      }
      const auto header =
          protocol::EncodeFrameHeader(id, status, static_cast<uint32_t>(payload.size()));
      out->Append(header);
      produced += header.size() + payload.size();
      if (s.ok()) {
        out->Push(std::move(data));
      } else {
        out->Append(payload);
        out->spare.push_back(std::move(data));
      }
    }
    *done = next_ == ids_.size();
    return Status::Ok();
  }

 private:
  static constexpr size_t kReadsAhead = 8;
  struct PendingRead {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    Status status;
    Bytes data;
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  };

  // Reads `id` (the front of the window), keeping kReadsAhead going.
  Status ReadAhead(const crypto::Digest& id) {
    for (; started_ < ids_.size() && window_.size() < kReadsAhead; ++started_) {
      window_.push_back(StartRead(ids_[started_]));
    }
    std::shared_ptr<PendingRead> read = std::move(window_.front());
    window_.pop_front();
    std::unique_lock<std::mutex> lock(read->mu);
    read->cv.wait(lock, [&] { return read->done; });
    if (ServerMetrics* m = api_.options.metrics; m != nullptr) {
      m->ObserveChunkRead(
          store_name_,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - read->start).count(),
          read->data.size(), read->status.ok());
    }
    if (!read->status.ok()) return read->status;
    ahead_data_ = std::move(read->data);
    return CheckChunkAs(api_, token_, store_name_, id, ahead_data_);
  }

  // Starts reading `id` (the callback owns its share of the result, so a
  // batch abandoned midway leaves nothing dangling).
  std::shared_ptr<PendingRead> StartRead(const crypto::Digest& id) {
    auto read = std::make_shared<PendingRead>();
    std::vector<ChunkMode> modes;
    if (!MayRead(api_, token_, store_name_, id, &modes)) {
      read->done = true;
      read->status = NoChunk(id);
      return read;
    }
    store_.source().ReadAsync(id, [read](Result<Bytes> r) {
      std::lock_guard<std::mutex> lock(read->mu);
      if (r.ok()) {
        read->data = std::move(*r);
      } else {
        read->status = r.status();
      }
      read->done = true;
      read->cv.notify_all();
    });
    return read;
  }

  ApiShared& api_;
  const Token token_;
  const std::string store_name_;
  datastore::Datastore& store_;
  const std::vector<crypto::Digest> ids_;
  const bool ahead_;
  size_t next_ = 0;     // the next frame to produce
  size_t started_ = 0;  // ahead_: the next read to start
  std::deque<std::shared_ptr<PendingRead>> window_;
  Bytes ahead_data_;  // the chunk ReadAhead read
};

}  // namespace

Status ReadChunkAs(ApiShared& api, const Token& token, const std::string& store_name,
                   datastore::Datastore& store, const crypto::Digest& id, ReadBuffer* out) {
  std::vector<ChunkMode> modes;
  if (!MayRead(api, token, store_name, id, &modes)) return NoChunk(id);
  const auto start = std::chrono::steady_clock::now();
  Status read = store.source().ReadInto(id, out);
  if (api.options.metrics != nullptr) {
    api.options.metrics->ObserveChunkRead(
        store_name, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
        out->size(), read.ok());
  }
  CAIRN_RETURN_IF_ERROR(read);
  if (token.role != Role::kBackup) return Status::Ok();
  return CheckMode(id, out->span(), modes);
}

Status CheckChunkAs(ApiShared& api, const Token& token, const std::string& store_name,
                    const crypto::Digest& id, ByteSpan stored) {
  if (token.role != Role::kBackup) return Status::Ok();
  return CheckMode(id, stored, api.sessions.ReadableModes(token.name, store_name, id));
}

// Chunks are served to tokens that may read the datastore. A backup token
// reads only during one of its backup sessions, and only the chunks of
// that session's base; a reader only those of indexes it read.
bool Request::MayReadChunks() {
  if (!Allowed(Action::kRead, "read chunks")) return false;
  if (token_.role == Role::kBackup && !api_.sessions.HasSession(token_.name, store_name_)) {
    SendError(403, fmt::format("token '{}' (role backup) may read chunks only of its backup's "
                               "base, during the backup; use a reader token to restore",
                               token_.name));
    return false;
  }
  return true;
}

void Request::GetChunk(std::string_view hex) {
  if (!Method("GET") || !MayReadChunks()) return;
  auto id = crypto::ParseDigestHex(hex);
  if (!id.ok()) return SendError(400, fmt::format("'{}' is not a chunk digest", hex));
  ReadBuffer data;
  Status read = ReadChunkAs(api_, token_, store_name_, *store_, *id, &data);
  if (!read.ok()) return SendStatus(read);
  res_.Send(200, "application/octet-stream", data.span());
}

void Request::GetChunks() {
  if (!Method("POST") || !MayReadChunks()) return;
  auto decoded = protocol::DecodeDigestList(req_.body);
  if (!decoded.ok()) return SendError(400, decoded.status().message());
  std::vector<crypto::Digest> ids = std::move(*decoded);
  // Read in digest order: the chunk directories are laid out by digest,
  // so neighbours share a directory.
  std::sort(ids.begin(), ids.end());
  auto batch = std::make_shared<ChunkBatch>(api_, token_, store_name_, *store_, std::move(ids));
  res_.Stream(200, "application/x-cairn-chunks",
              [batch](net::ResponseWriter::StreamPieces* out, bool* done) {
                return batch->Next(out, done);
              });
}

// Backup sessions (server/backup_session.h): …/backup, …/backup/ID and
// …/backup/ID/{base,chunks,file,finish}.
void Request::Backup(const protocol::Route& route) {
  if (route.kind == protocol::RouteKind::kBackupStart) {
    if (!Method("POST") || !Allowed(Action::kBackup, "create snapshots")) return;
    auto start = protocol::DecodeBackupStart(req_.body);
    if (!start.ok()) return SendError(400, start.status().message());
    auto spec = datastore::ParseSnapshotSpec(
        start->ns, fmt::format("{}/{}/{}", start->type, start->id, start->time));
    if (!spec.ok()) return SendError(400, spec.status().message());
    if (spec->latest) return SendError(400, "a new snapshot needs a time, not 'latest'");
    datastore::SnapshotRef snap{spec->group, spec->time};
    auto id =
        api_.sessions.Begin(token_.name, store_name_, *store_, snap, token_.role == Role::kBackup,
                            req_.connection, start->repair);
    if (!id.ok()) {
      // A quota of the token (sessions, groups): 429, not "disk full".
      const int status =
          id.status().code() == StatusCode::kResourceExhausted ? 429 : HttpStatusFor(id.status());
      return SendError(status, id.status().message());
    }
    return SendJson(201, json{{"session", *id}, {"snapshot", snap.ToString()}});
  }
  std::string id(route.id);
  if (route.kind == protocol::RouteKind::kBackupSession) {
    if (!Method("DELETE") || !Allowed(Action::kBackup, "create snapshots")) return;
    auto session = api_.sessions.Find(id, token_.name, store_name_, req_.connection);
    if (!session.ok()) return SendError(404, session.status().message());
    api_.sessions.Abort(id);
    return SendJson(200, json{{"aborted", id}});
  }
  if (!Method("POST") || !Allowed(Action::kBackup, "create snapshots")) return;
  BackupStep(id, route.step);
}

void Request::BackupStep(const std::string& id, std::string_view what) {
  auto session = api_.sessions.Find(id, token_.name, store_name_, req_.connection);
  if (!session.ok()) return SendError(404, session.status().message());
  Status s;
  if (what == "base") {
    auto time = protocol::DecodeBase(req_.body);
    if (!time.ok()) return SendError(400, time.status().message());
    s = api_.sessions.UseBase(**session, *time);
  } else if (what == "chunks") {
    std::function<void(uint64_t, double)> on_chunk;
    if (ServerMetrics* m = api_.options.metrics; m != nullptr) {
      on_chunk = [m, store = store_name_](uint64_t bytes, double seconds) {
        m->ObserveChunkWrite(store, seconds, bytes);
      };
    }
    auto r = api_.sessions.UploadChunks(**session, req_.body, on_chunk);
    // What was received: the same whether the chunks were new or not.
    if (r.ok()) return SendJson(200, json{{"chunks", r->chunks}, {"bytes", r->bytes}});
    // Past the decoded-bytes caps: 413.
    if (r.status().code() == StatusCode::kOutOfRange) return SendError(413, r.status().message());
    s = r.status();
  } else if (what == "file") {
    s = api_.sessions.PutFile(**session, Query("name"), req_.body);
  } else if (what == "finish") {
    session->reset();  // Finish takes the session out of the registry
    auto snap = api_.sessions.Finish(id, req_.body);
    if (snap.ok()) return SendJson(200, json{{"snapshot", snap->ToString()}});
    s = snap.status();
  } else {
    return SendError(404, fmt::format("no such resource: {}", req_.path));
  }
  if (!s.ok()) return SendStatus(s);
  SendJson(200, json::object());
}

}  // namespace cairn::server
