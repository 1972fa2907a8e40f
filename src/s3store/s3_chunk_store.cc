#include "s3store/s3_chunk_store.h"

#include <fmt/format.h>

#include <thread>
#include <vector>

namespace cairn::s3store {
namespace {

constexpr std::string_view kChunksDir = ".chunks/";
constexpr std::string_view kBadSuffix = ".bad";

bool IsChunkName(std::string_view name) {
  if (name.ends_with(kBadSuffix)) name.remove_suffix(kBadSuffix.size());
  if (name.size() != 64) return false;
  for (char c : name) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

S3ChunkStore::S3ChunkStore(std::shared_ptr<s3::S3Client> client, S3Location location)
    : client_(std::move(client)), location_(std::move(location)) {}

S3ChunkStore::~S3ChunkStore() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return uploads_ == 0; });
}

std::string S3ChunkStore::ChunkKey(const store::ChunkId& id) const {
  std::string hex = crypto::DigestHex(id);
  return KeyOfName(hex);
}

std::string S3ChunkStore::KeyOfName(std::string_view name) const {
  return location_.Key(fmt::format("{}{}/{}", kChunksDir, name.substr(0, 3), name));
}

Result<Bytes> S3ChunkStore::Read(const store::ChunkId& id) {
  auto data = client_->GetObject(ChunkKey(id));
  if (!data.ok()) {
    return Status(data.status().code(), fmt::format("chunk {}: {}", crypto::DigestHex(id),
                                                    data.status().message()));
  }
  return data;
}

void S3ChunkStore::ReadAsync(const store::ChunkId& id, store::ReadCallback done) {
  client_->GetObjectAsync(ChunkKey(id), std::nullopt,
                          [id, done = std::move(done)](Result<Bytes> data) {
                            if (data.ok()) return done(std::move(data));
                            done(Status(data.status().code(),
                                        fmt::format("chunk {}: {}", crypto::DigestHex(id),
                                                    data.status().message())));
                          });
}

void S3ChunkStore::ReadIntoAsync(const store::ChunkId& id, ReadBuffer* out,
                                 std::function<void(Status)> done) {
  ReadAsync(id, [out, done = std::move(done)](Result<Bytes> data) {
    if (!data.ok()) return done(data.status());
    out->Adopt(std::move(*data));
    done(Status::Ok());
  });
}

store::SourceTraits S3ChunkStore::Traits() const {
  store::SourceTraits t;
  t.medium = store::MediumKind::kNetwork;
  t.initial_reads_in_flight = 32;
  t.max_reads_in_flight = 128;
  t.description = fmt::format("object store {} at {}", location_.Display(), client_->config().endpoint);
  return t;
}

// Before the first upload: whether the server checks the signed payload
// hash, so that chunk PUTs can go without Content-MD5 (S3Client). Under
// a dot directory, which neither the metadata listing nor gc reads.
void S3ChunkStore::ProbeOnce() {
  client_->ProbePayloadHashCheck(location_.Key(".probe/payload-hash-check"));
}

Result<store::InsertResult> S3ChunkStore::Insert(const store::ChunkId& id, ByteSpan stored) {
  ProbeOnce();
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return uploads_ < kMaxUploads; });
    if (!first_error_.ok()) return first_error_;
    ++uploads_;
  }
  Upload(ChunkKey(id), Bytes(stored.begin(), stored.end()));
  return store::InsertResult{true, stored.size()};
}

Result<store::InsertResult> S3ChunkStore::Replace(const store::ChunkId& id, ByteSpan stored) {
  ProbeOnce();
  Status s = client_->PutObject(ChunkKey(id), Bytes(stored.begin(), stored.end()));
  if (!s.ok()) return s.WithContext(fmt::format("storing chunk {}", crypto::DigestHex(id)));
  return store::InsertResult{true, stored.size()};
}

void S3ChunkStore::Upload(std::string key, Bytes body) {
  const int mode = create_only_.load(std::memory_order_relaxed);
  s3::PutOptions options;
  options.create_only = mode >= 0;
  // Until the server has shown it honours create-only PUTs, keep the bytes
  // to send again without the condition.
  std::shared_ptr<Bytes> again = mode == 0 ? std::make_shared<Bytes>(body) : nullptr;
  client_->PutObjectAsync(key, std::move(body), options,
                          [this, key, create_only = options.create_only, again](Status s) {
                            if (s.code() == StatusCode::kUnimplemented && create_only && again) {
                              create_only_.store(-1, std::memory_order_relaxed);
                              return Upload(key, std::move(*again));
                            }
                            // Stored before (by another backup, or by our own
                            // attempt whose answer was lost): the same bytes.
                            if (s.code() == StatusCode::kAlreadyExists) s = Status::Ok();
                            if (s.ok() && create_only) {
                              int unknown = 0;
                              create_only_.compare_exchange_strong(unknown, 1);
                            }
                            UploadDone(key, s);
                          });
}

void S3ChunkStore::UploadDone(const std::string& key, Status s) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!s.ok() && first_error_.ok()) {
    first_error_ = Status(s.code(), fmt::format("storing chunk {}: {}",
                                                key.substr(key.rfind('/') + 1), s.message()));
  }
  --uploads_;
  cv_.notify_all();
}

Result<bool> S3ChunkStore::Contains(const store::ChunkId& id) {
  auto info = client_->HeadObject(ChunkKey(id));
  if (info.ok()) return true;
  if (info.status().code() == StatusCode::kNotFound) return false;
  return info.status();
}

Status S3ChunkStore::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return uploads_ == 0; });
  return first_error_;
}

Result<std::string> S3ChunkStore::Quarantine(const store::ChunkId& id) {
  std::string key = ChunkKey(id);
  CAIRN_ASSIGN_OR_RETURN(Bytes data, client_->GetObject(key));
  std::string bad = key + std::string(kBadSuffix);
  CAIRN_RETURN_IF_ERROR(client_->PutObject(bad, std::move(data)));
  CAIRN_RETURN_IF_ERROR(Remove(std::span<const std::string>(&key, 1)));
  return fmt::format("s3://{}/{}", client_->config().bucket, bad);
}

Status S3ChunkStore::List(const std::function<void(std::string_view, uint64_t)>& each) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::vector<Status> results(16);
  std::vector<std::thread> threads;
  for (int d = 0; d < 16; ++d) {
    threads.emplace_back([&, d] {
      s3::ListOptions options;
      options.prefix = location_.Key(fmt::format("{}{}", kChunksDir, kHex[d]));
      auto listed = client_->ListObjectsV2(options);
      if (!listed.ok()) {
        results[d] = listed.status();
        return;
      }
      for (const auto& o : listed->objects) {
        std::string_view name = o.key;
        name = name.substr(name.rfind('/') + 1);
        if (IsChunkName(name)) each(name, o.size);
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const Status& s : results) CAIRN_RETURN_IF_ERROR(s);
  return Status::Ok();
}

Status S3ChunkStore::Remove(std::span<const std::string> names_or_keys) {
  std::vector<std::string> keys;
  keys.reserve(names_or_keys.size());
  for (const std::string& n : names_or_keys) {
    keys.push_back(n.find('/') == std::string::npos ? KeyOfName(n) : n);
  }
  CAIRN_ASSIGN_OR_RETURN(s3::DeleteReport report, client_->DeleteObjects(keys, kDeleteBatch));
  if (!report.failures.empty()) {
    const auto& f = report.failures.front();
    return UnavailableError(fmt::format("S3 DeleteObjects at {}: {} of {} keys not deleted, "
                                        "first {}: {} {}",
                                        client_->config().endpoint, report.failures.size(),
                                        keys.size(), f.key, f.code, f.message));
  }
  return Status::Ok();
}

}  // namespace cairn::s3store
