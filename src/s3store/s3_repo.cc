#include "s3store/s3_repo.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "datastore/snapshot_writer.h"
#include "format/magic.h"

namespace cairn::s3store {
namespace {

// Small files are compared by content (their MD5 against the ETag): they
// are the ones that change in place (verify state, notes, protection,
// owner). Larger ones (indexes) never change once written: size suffices.
constexpr uint64_t kCompareContentBelow = 64 << 10;
// Fetched at once during a sync.
constexpr size_t kFetchWave = 64;
// Local files newer than the sync's start minus this are not removed even
// when the listing lacks them: another command may have just written them.
constexpr int64_t kFreshNs = int64_t{10} * 1000000000;
constexpr uint64_t kMaxMetadataFile = uint64_t{1} << 30;

bool SyncedRel(std::string_view rel) {
  if (rel.empty() || rel.front() == '.') return false;
  std::string_view base = rel.substr(rel.rfind('/') + 1);
  return base != ".lock" && base.find(".tmp") == std::string_view::npos;
}

bool IsMd5Hex(std::string_view s) {
  return s.size() == 32 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

std::string MarkerText(int64_t now) {
  nlohmann::json marker = {{"format", "cairn-datastore"},
                           {"version", format::kDatastoreVersion},
                           {"created_unix", now}};
  return marker.dump(2) + "\n";
}


// A file in the cache that is uploaded when closed.
class UploadOnClose final : public WritableFile {
 public:
  UploadOnClose(std::unique_ptr<WritableFile> file, S3Env* env, std::string key)
      : file_(std::move(file)), env_(env), key_(std::move(key)) {}

  Status WriteAt(uint64_t offset, ByteSpan data) override { return file_->WriteAt(offset, data); }
  Status Append(ByteSpan data) override { return file_->Append(data); }
  Status Truncate(uint64_t size) override { return file_->Truncate(size); }
  Status Sync() override { return file_->Sync(); }
  Status Close() override {
    if (closed_) return Status::Ok();
    closed_ = true;
    CAIRN_RETURN_IF_ERROR(file_->Close());
    return env_->Upload(file_->path(), key_);
  }
  Result<FileInfo> Stat() override { return file_->Stat(); }
  const std::string& path() const override { return file_->path(); }

 private:
  std::unique_ptr<WritableFile> file_;
  S3Env* env_;
  std::string key_;
  bool closed_ = false;
};

class S3Backend final : public datastore::RemoteBackend {
 public:
  S3Backend(std::shared_ptr<S3ChunkStore> chunks, S3Location location,
            const datastore::Datastore* store)
      : chunks_(std::move(chunks)), location_(std::move(location)), store_(store) {}

  store::ChunkSource& Source() override { return *chunks_; }
  store::ChunkSink& Sink() override { return *chunks_; }
  Result<std::unique_ptr<datastore::SnapshotTarget>> BeginSnapshot(
      const datastore::SnapshotRef& snap) override {
    CAIRN_ASSIGN_OR_RETURN(auto target, datastore::LocalSnapshotTarget::Begin(*store_, snap));
    return std::unique_ptr<datastore::SnapshotTarget>(std::move(target));
  }
  bool OwnsChunks() const override { return true; }
  Status ListChunks(const ChunkVisitor& each) override { return chunks_->List(each); }
  Status RemoveChunks(std::span<const std::string> names) override {
    return chunks_->Remove(names);
  }
  Result<std::string> Quarantine(const crypto::Digest& id) override {
    return chunks_->Quarantine(id);
  }
  std::string Describe() const override { return location_.Display(); }

 private:
  std::shared_ptr<S3ChunkStore> chunks_;
  S3Location location_;
  const datastore::Datastore* store_;
};

struct RemoteFile {
  uint64_t size = 0;
  std::string etag;
};

// Every metadata object under the prefix, by path relative to it: one
// listing of the top level (with a delimiter, so the chunks are not
// listed), then one of each top-level directory but .chunks, in parallel.
Result<std::map<std::string, RemoteFile>> ListMetadata(s3::S3Client& client,
                                                       const S3Location& location) {
  const std::string root = location.Key("");
  s3::ListOptions top;
  top.prefix = root;
  top.delimiter = std::string(1, '/');
  CAIRN_ASSIGN_OR_RETURN(s3::ListResult listed, client.ListObjectsV2(top));
  std::vector<std::string> dirs;
  for (const std::string& p : listed.common_prefixes) {
    std::string_view rel = std::string_view(p).substr(std::min(root.size(), p.size()));
    if (!rel.empty() && rel.front() != '.') dirs.push_back(p);
  }
  std::vector<Result<s3::ListResult>> results(dirs.size(), UnavailableError("not listed"));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < dirs.size(); ++i) {
    threads.emplace_back([&, i] {
      s3::ListOptions options;
      options.prefix = dirs[i];
      results[i] = client.ListObjectsV2(options);
    });
  }
  for (auto& t : threads) t.join();
  std::map<std::string, RemoteFile> out;
  for (auto& r : results) {
    if (!r.ok()) return r.status();
    for (auto& o : r->objects) {
      std::string_view rel = std::string_view(o.key).substr(std::min(root.size(), o.key.size()));
      if (SyncedRel(rel)) out[std::string(rel)] = RemoteFile{o.size, o.etag};
    }
  }
  return out;
}

// The cache's metadata files, by relative path.
Status WalkCache(Env& env, const std::string& dir, const std::string& rel,
                 std::map<std::string, FileInfo>* out) {
  auto names = env.ListDir(dir);
  if (!names.ok()) return names.status().code() == StatusCode::kNotFound ? Status::Ok() : names.status();
  for (const std::string& name : *names) {
    if (rel.empty() && name.starts_with('.')) continue;
    std::string child_rel = rel.empty() ? name : rel + "/" + name;
    std::string child = JoinPath(dir, name);
    auto info = env.Stat(child);
    if (!info.ok()) continue;  // removed meanwhile
    if (info->is_dir) {
      CAIRN_RETURN_IF_ERROR(WalkCache(env, child, child_rel, out));
    } else if (info->is_regular && SyncedRel(child_rel)) {
      out->emplace(child_rel, *info);
    }
  }
  return Status::Ok();
}

// Fetches `rels` (many GETs in flight) and writes each into the cache.
Status Fetch(Env& env, s3::S3Client& client, const S3Location& location, const std::string& cache,
             const std::vector<std::string>& rels) {
  for (size_t start = 0; start < rels.size(); start += kFetchWave) {
    size_t n = std::min(kFetchWave, rels.size() - start);
    std::vector<Result<Bytes>> got(n, UnavailableError("not fetched"));
    std::mutex mu;
    std::condition_variable cv;
    size_t pending = n;
    for (size_t i = 0; i < n; ++i) {
      client.GetObjectAsync(location.Key(rels[start + i]), std::nullopt, [&, i](Result<Bytes> r) {
        std::lock_guard<std::mutex> lock(mu);
        got[i] = std::move(r);
        if (--pending == 0) cv.notify_one();
      });
    }
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return pending == 0; });
    }
    for (size_t i = 0; i < n; ++i) {
      if (!got[i].ok()) {
        // Deleted since the listing (a snapshot forgotten meanwhile).
        if (got[i].status().code() == StatusCode::kNotFound) continue;
        return got[i].status().WithContext("syncing the local cache");
      }
      const std::string path = JoinPath(cache, rels[start + i]);
      CAIRN_RETURN_IF_ERROR(CreateDirs(env, DirName(path)));
      CAIRN_RETURN_IF_ERROR(WriteFileReplacing(env, path, *got[i]));
    }
  }
  return Status::Ok();
}

Status SyncCache(Env& env, s3::S3Client& client, const S3Location& location,
                 const std::string& cache) {
  const int64_t t0 = env.NowUnixNanos();
  CAIRN_ASSIGN_OR_RETURN(auto remote, ListMetadata(client, location));
  std::map<std::string, FileInfo> local;
  CAIRN_RETURN_IF_ERROR(WalkCache(env, cache, "", &local));
  std::vector<std::string> fetch;
  for (const auto& [rel, file] : remote) {
    auto it = local.find(rel);
    if (it == local.end() || it->second.size != file.size) {
      fetch.push_back(rel);
    } else if (file.size < kCompareContentBelow && IsMd5Hex(file.etag)) {
      auto content = ReadWholeFile(env, JoinPath(cache, rel), kCompareContentBelow);
      if (!content.ok() || s3::Md5Hex(*content) != file.etag) fetch.push_back(rel);
    }
  }
  for (const auto& [rel, info] : local) {
    if (!remote.contains(rel) && info.mtime_ns < t0 - kFreshNs) {
      env.RemoveFile(JoinPath(cache, rel)).IgnoreError();
    }
  }
  return Fetch(env, client, location, cache, fetch);
}

Result<std::shared_ptr<s3::S3Client>> Connect(const S3Location& location) {
  CAIRN_ASSIGN_OR_RETURN(auto client, s3::S3Client::Open(location.config));
  return std::shared_ptr<s3::S3Client>(std::move(client));
}

}  // namespace

std::string CacheDirFor(const std::string& cache_root, const S3Location& location) {
  std::string host = location.config.endpoint;
  if (auto e = s3::ParseEndpoint(location.config.endpoint); e.ok()) host = e->host;
  std::replace(host.begin(), host.end(), ':', '_');
  std::replace(host.begin(), host.end(), '/', '_');
  std::string dir = JoinPath(JoinPath(JoinPath(cache_root, "s3"), host), location.config.bucket);
  return location.prefix.empty() ? dir : JoinPath(dir, location.prefix);
}

S3Env::S3Env(std::unique_ptr<Env> base, std::shared_ptr<s3::S3Client> client, S3Location location,
             std::string cache_dir)
    : EnvWrapper(base.get()), base_(std::move(base)), client_(std::move(client)),
      location_(std::move(location)), cache_dir_(std::move(cache_dir)) {}

std::optional<std::string> S3Env::SyncedKey(const std::string& path) const {
  if (path.size() <= cache_dir_.size() + 1 || !path.starts_with(cache_dir_) ||
      path[cache_dir_.size()] != '/') {
    return std::nullopt;
  }
  std::string_view rel = std::string_view(path).substr(cache_dir_.size() + 1);
  if (!SyncedRel(rel) || rel.find("/../") != std::string_view::npos) return std::nullopt;
  return location_.Key(rel);
}

Status S3Env::Upload(const std::string& path, const std::string& key) {
  CAIRN_ASSIGN_OR_RETURN(Bytes data, ReadWholeFile(*base_, path, kMaxMetadataFile));
  return client_->PutObject(key, std::move(data))
      .WithContext(fmt::format("writing {} to {}", path.substr(cache_dir_.size() + 1),
                               location_.Display()));
}

Result<std::unique_ptr<WritableFile>> S3Env::OpenWritable(const std::string& path, OpenMode mode) {
  CAIRN_ASSIGN_OR_RETURN(auto file, base_->OpenWritable(path, mode));
  auto key = SyncedKey(path);
  if (!key) return file;
  return std::unique_ptr<WritableFile>(new UploadOnClose(std::move(file), this, *key));
}

Status S3Env::Rename(const std::string& from, const std::string& to) {
  auto to_key = SyncedKey(to);
  // Into the bucket first: a file shows locally only once it is stored.
  if (to_key) CAIRN_RETURN_IF_ERROR(Upload(from, *to_key));
  CAIRN_RETURN_IF_ERROR(base_->Rename(from, to));
  if (auto from_key = SyncedKey(from)) {
    std::string k = *from_key;
    CAIRN_RETURN_IF_ERROR(client_->DeleteObjects(std::span<const std::string>(&k, 1)).status());
  }
  return Status::Ok();
}

Status S3Env::RemoveFile(const std::string& path) {
  if (auto key = SyncedKey(path)) {
    std::string k = *key;
    CAIRN_ASSIGN_OR_RETURN(s3::DeleteReport report,
                           client_->DeleteObjects(std::span<const std::string>(&k, 1)));
    if (!report.failures.empty()) {
      return UnavailableError(fmt::format("deleting {} from {}: {} {}", k, location_.Display(),
                                          report.failures[0].code, report.failures[0].message));
    }
  }
  return base_->RemoveFile(path);
}

Status InitS3Datastore(const S3Location& location) {
  CAIRN_ASSIGN_OR_RETURN(auto client, Connect(location));
  Status bucket = client->HeadBucket();
  if (bucket.code() == StatusCode::kFailedPrecondition) {
    Status created = client->CreateBucket();
    if (!created.ok() && created.code() != StatusCode::kAlreadyExists) return created;
  } else if (!bucket.ok()) {
    return bucket;
  }
  const std::string marker_key = location.Key(datastore::kDatastoreMarker);
  auto head = client->HeadObject(marker_key);
  if (head.ok()) {
    return AlreadyExistsError(fmt::format("{} is already a cairn datastore", location.Display()));
  }
  if (head.status().code() != StatusCode::kNotFound) return head.status();
  std::string text = MarkerText(static_cast<int64_t>(::time(nullptr)));
  s3::PutOptions create_only;
  create_only.create_only = true;
  Status put = client->PutObject(marker_key, Bytes(text.begin(), text.end()), create_only);
  if (put.code() == StatusCode::kUnimplemented) {
    put = client->PutObject(marker_key, Bytes(text.begin(), text.end()));
  } else if (put.code() == StatusCode::kAlreadyExists) {
    return AlreadyExistsError(fmt::format("{} is already a cairn datastore", location.Display()));
  }
  return put;
}

Result<S3Datastore> OpenS3Datastore(std::unique_ptr<Env> base, const S3Location& location,
                                    const std::string& cache_root) {
  CAIRN_ASSIGN_OR_RETURN(auto client, Connect(location));
  auto marker = client->GetObject(location.Key(datastore::kDatastoreMarker));
  if (!marker.ok()) {
    if (marker.status().code() == StatusCode::kNotFound) {
      return NotFoundError(fmt::format(
          "{} is not a cairn datastore (no {} object at {}; create one with: cairn init '{}?endpoint={}')",
          location.Display(), datastore::kDatastoreMarker, location.config.endpoint,
          location.Display(), location.config.endpoint));
    }
    // A missing bucket answers NoSuchBucket (FailedPrecondition): for the
    // user, as for a missing directory, the datastore does not exist.
    if (marker.status().code() == StatusCode::kFailedPrecondition &&
        client->HeadBucket().code() == StatusCode::kFailedPrecondition) {
      return NotFoundError(fmt::format("datastore {} does not exist: {}", location.Display(),
                                       marker.status().message()));
    }
    return marker.status();
  }
  const std::string cache = CacheDirFor(cache_root, location);
  CAIRN_RETURN_IF_ERROR(CreateDirs(*base, JoinPath(cache, store::kChunksDirName))
                            .WithContext(fmt::format("creating the local cache {}", cache)));
  const std::string marker_path = JoinPath(cache, datastore::kDatastoreMarker);
  auto local_marker = ReadWholeFile(*base, marker_path, 64 << 10);
  if (!local_marker.ok() || *local_marker != *marker) {
    CAIRN_RETURN_IF_ERROR(WriteFileReplacing(*base, marker_path, *marker));
  }
  auto env = std::make_unique<S3Env>(std::move(base), client, location, cache);
  CAIRN_RETURN_IF_ERROR(SyncCache(env->base(), *client, location, cache)
                            .WithContext(fmt::format("opening {}", location.Display())));
  CAIRN_ASSIGN_OR_RETURN(auto store, datastore::Datastore::Open(*env, cache));
  auto chunks = std::make_shared<S3ChunkStore>(client, location);
  store->SetRemote(std::make_shared<S3Backend>(std::move(chunks), location, store.get()));
  return S3Datastore{std::move(env), std::move(store)};
}

}  // namespace cairn::s3store
