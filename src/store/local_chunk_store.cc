#include "store/local_chunk_store.h"

#include <fmt/format.h>
#include <unistd.h>

#include "base/io_error.h"
#include "blob/blob.h"

namespace cairn::store {
namespace {

constexpr const char* kChunksDir = kChunksDirName;
constexpr int kPrefixDirs = kChunkPrefixDirs;
constexpr uint64_t kMaxStoredSize = blob::kHeaderSize + blob::kMaxRawSize;

std::string PrefixName(unsigned prefix) { return fmt::format("{:03x}", prefix); }

}  // namespace

Status LocalChunkStore::Create(Env& env, const std::string& dir) {
  std::string chunks = JoinPath(dir, kChunksDir);
  CAIRN_RETURN_IF_ERROR(env.CreateDir(chunks));
  for (unsigned p = 0; p < kPrefixDirs; ++p) {
    CAIRN_RETURN_IF_ERROR(env.CreateDir(JoinPath(chunks, PrefixName(p))));
  }
  return env.SyncDir(chunks);
}

Result<std::unique_ptr<LocalChunkStore>> LocalChunkStore::Open(Env& env, const std::string& dir) {
  std::string chunks = JoinPath(dir, kChunksDir);
  auto info = env.Stat(chunks);
  if (!info.ok() || !info->is_dir) {
    return NotFoundError(
        fmt::format("{}: no chunk directory .chunks (not a cairn datastore, or "
                    "damaged)",
                    dir));
  }
  return std::unique_ptr<LocalChunkStore>(new LocalChunkStore(env, dir));
}

std::string LocalChunkStore::ChunkPath(const ChunkId& id) const {
  std::string hex = crypto::DigestHex(id);
  return fmt::format("{}/{}/{}/{}", dir_, kChunksDir, hex.substr(0, 3), hex);
}

std::string LocalChunkStore::PrefixDirPath(unsigned prefix) const {
  return fmt::format("{}/{}/{}", dir_, kChunksDir, PrefixName(prefix));
}

// Read (a Bytes of its own, for ReadAsync and the server) and ReadInto (a
// recycled ReadBuffer) each read straight into their buffer.
Result<Bytes> LocalChunkStore::Read(const ChunkId& id) {
  Bytes data;
  CAIRN_RETURN_IF_ERROR(ReadChunkFile(id, [&](const std::string& path) -> Status {
    CAIRN_ASSIGN_OR_RETURN(data, ReadWholeFile(env_, path, kMaxStoredSize));
    return Status::Ok();
  }));
  return data;
}

Status LocalChunkStore::ReadInto(const ChunkId& id, ReadBuffer* out) {
  return ReadChunkFile(id, [&](const std::string& path) {
    return ReadWholeFileInto(env_, path, kMaxStoredSize, out);
  });
}

Status LocalChunkStore::ReadChunkFile(
    const ChunkId& id, const std::function<Status(const std::string& path)>& read) const {
  std::string path = ChunkPath(id);
  Status s = read(path);
  if (s.ok()) return s;
  if (s.code() == StatusCode::kNotFound) {
    // Garbage collection may have set it aside in the instant a backup
    // found and referenced it (docs/ARCHITECTURE.md, "Garbage collection");
    // the next gc puts it back.
    Status t = read(path + kTrashSuffix);
    if (t.ok() || t.code() != StatusCode::kNotFound) s = t;
    if (s.ok()) return s;
  }
  if (s.code() == StatusCode::kNotFound) {
    return NotFoundError(
        fmt::format("chunk {} missing from store {}", crypto::DigestHex(id), dir_));
  }
  if (s.code() == StatusCode::kInvalidArgument) {  // over the size limit
    return DataLossError(fmt::format("chunk {}: {}", crypto::DigestHex(id), s.message()));
  }
  return s.WithContext(fmt::format("chunk {}", crypto::DigestHex(id)));
}

SourceTraits LocalChunkStore::Traits() const {
  // Two reads in flight cover a page-cached or flash store; slow start
  // grows it quickly when reads are what limits the run.
  return SourceTraits{MediumKind::kFlash, 2, fmt::format("local store {}", dir_)};
}

Result<bool> LocalChunkStore::Contains(const ChunkId& id) {
  std::string path = ChunkPath(id);
  auto info = env_.Stat(path);
  if (!info.ok()) {
    if (info.status().code() == StatusCode::kNotFound) return false;
    return info.status();
  }
  if (info->size == 0) return false;  // an empty file is a torn insert: not present
  // So is one cut short by a power cut (reusing it would make the new
  // snapshot reference a damaged chunk): one header read tells.
  CAIRN_ASSIGN_OR_RETURN(bool whole, IsWhole(path, info->size));
  if (!whole) return false;
  // The caller is about to reference the chunk: mark it as used now, so
  // garbage collection leaves it alone. The touch is also the final
  // existence check (a chunk gc set aside meanwhile is simply absent).
  Status s = env_.SetAccessTime(path, env_.NowUnixNanos());
  if (s.ok()) return true;
  if (s.code() == StatusCode::kNotFound) return false;
  return s;
}

Result<InsertResult> LocalChunkStore::Insert(const ChunkId& id, ByteSpan stored) {
  CAIRN_ASSIGN_OR_RETURN(bool present, Contains(id));
  if (present) return InsertResult{false, 0};
  return InsertAbsent(id, stored);
}

Result<InsertResult> LocalChunkStore::InsertAbsent(const ChunkId& id, ByteSpan stored) {
  return InsertNew(id, stored, /*direct=*/false);
}

Result<InsertResult> LocalChunkStore::InsertAbsentDirect(const ChunkId& id, ByteSpan stored) {
  return InsertNew(id, stored, /*direct=*/true);
}

Result<InsertResult> LocalChunkStore::InsertNew(const ChunkId& id, ByteSpan stored, bool direct) {
  Status s = WriteChunkFile(id, stored, /*replace=*/false, direct);
  // Another writer got there first: its chunk stays (same id, and for a
  // plain chunk the same bytes).
  if (s.code() == StatusCode::kAlreadyExists) return InsertResult{false, 0};
  CAIRN_RETURN_IF_ERROR(s);
  return InsertResult{true, stored.size()};
}

Result<InsertResult> LocalChunkStore::Replace(const ChunkId& id, ByteSpan stored) {
  CAIRN_RETURN_IF_ERROR(WriteChunkFile(id, stored, /*replace=*/true));
  return InsertResult{true, stored.size()};
}

Status LocalChunkStore::WriteChunkFile(const ChunkId& id, ByteSpan stored, bool replace,
                                       bool direct) {
  std::string path = ChunkPath(id);
  // A temporary name left by a crashed writer that had our pid (pids repeat
  // after a reboot, and a container's server is often pid 1) is skipped,
  // never taken for "the chunk is already there".
  std::string tmp;
  std::unique_ptr<WritableFile> file;
  for (int attempt = 0;; ++attempt) {
    tmp = fmt::format("{}.tmp-{}-{}", path, ::getpid(), tmp_counter_.fetch_add(1));
    auto opened = env_.OpenWritable(tmp, OpenMode::kCreateNew);
    if (opened.ok()) {
      file = std::move(*opened);
      break;
    }
    if (opened.status().code() != StatusCode::kAlreadyExists) {
      return opened.status().WithContext(fmt::format("insert chunk {}", crypto::DigestHex(id)));
    }
    if (attempt >= 100) {
      return InternalError(fmt::format("insert chunk {}: {}", crypto::DigestHex(id),
                                       opened.status().message()));
    }
  }
  {
    Status s = WriteChunkData(*file, stored, direct);
    if (s.ok()) s = file->Close();
    if (!s.ok()) {
      env_.RemoveFile(tmp).IgnoreError();
      return s.WithContext(fmt::format("insert chunk {}", crypto::DigestHex(id)));
    }
  }
  Status s = replace ? env_.Rename(tmp, path) : env_.RenameNoReplace(tmp, path);
  if (s.code() == StatusCode::kAlreadyExists) {
    // A torn insert (empty, or cut short by a power cut) is never a chunk:
    // it gives way.
    auto there = env_.Stat(path);
    if (there.ok()) {
      auto whole = IsWhole(path, there->size);
      if (whole.ok() && !*whole) s = env_.Rename(tmp, path);
    }
  }
  if (!s.ok()) {
    env_.RemoveFile(tmp).IgnoreError();
    if (s.code() == StatusCode::kAlreadyExists) return s;
    return s.WithContext(fmt::format("insert chunk {}", crypto::DigestHex(id)));
  }
  return Status::Ok();
}

Status LocalChunkStore::WriteChunkData(WritableFile& file, ByteSpan stored, bool direct) {
  constexpr size_t kPage = 4096;  // WritableFile::EnableDirectWrites: whole pages only
  const size_t aligned = stored.size() / kPage * kPage;
  if (!direct || aligned < kDirectWriteMinBytes ||
      !file.EnableDirectWrites()) {
    return file.WriteAt(0, stored);
  }
  CAIRN_RETURN_IF_ERROR(file.WriteAt(0, stored.first(aligned)));
  if (aligned == stored.size()) return Status::Ok();
  return file.WriteAt(aligned, stored.subspan(aligned));
}

Result<bool> LocalChunkStore::IsWhole(const std::string& path, uint64_t size) const {
  if (size < blob::kHeaderSize) return false;
  auto file = env_.OpenReadable(path);
  if (!file.ok()) {
    if (file.status().code() == StatusCode::kNotFound) return false;
    return file.status();
  }
  uint8_t header[blob::kHeaderSize];
  auto n = (*file)->ReadAt(0, header);
  // A file the disk cannot read (EIO) is no usable chunk either: an insert
  // of the chunk writes a good copy over it (a bad sector heals with the
  // next backup, while verify leaves an unreadable chunk where it is).
  if (!n.ok() && IsIoError(n.status())) return false;
  CAIRN_RETURN_IF_ERROR(n.status());
  auto declared = blob::DeclaredLength(ByteSpan(header, *n));
  return declared.ok() && *declared == size;
}

Result<std::string> LocalChunkStore::Quarantine(const ChunkId& id) {
  std::string path = ChunkPath(id);
  std::string bad = path + ".bad";
  CAIRN_RETURN_IF_ERROR(env_.Rename(path, bad));
  return bad;
}

Status LocalChunkStore::Flush() { return env_.SyncFilesystem(JoinPath(dir_, kChunksDir)); }

}  // namespace cairn::store
