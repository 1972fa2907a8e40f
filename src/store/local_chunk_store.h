// LocalChunkStore: one file per chunk under DIR/.chunks/XXX/<64-hex id>,
// where XXX is the first three hex digits of the id (4096 prefix
// directories, created once by Create()). 4096 rather than PBS's 65 536:
// 16 MiB of directory blocks instead of 256 MiB for an empty store, and
// still only ~6000 entries per directory at 100 TiB of 4 MiB chunks.
//
// Inserts are atomic without any store-wide lock: the blob is written to a
// temporary file beside its final name, then renamed into place without
// replacing (RENAME_NOREPLACE): a chunk already present (same id,
// non-empty), or one another writer put there meanwhile, is never
// rewritten by Insert (unless it is torn: empty, or shorter than its header
// says, as a power cut can leave it). Replace() renames over it (a verified copy). Durability is
// batched: chunk files are not fsynced one by one; Flush() runs syncfs(2)
// once on the store's file system before a manifest is written (see the
// fsync policy in docs/ARCHITECTURE.md). Temporary files left by a killed
// writer ("*.tmp-…") are ignored by readers and removed by GC.
//
// Garbage collection (maintenance/gc.h) reads the access time: Contains(),
// and so Insert() of a chunk already present, sets it to now, because the
// caller is about to reference the chunk. A chunk gc has set aside as
// "<id>.trash" is still found by Read (docs/ARCHITECTURE.md explains why).
//
// Thread safety: all methods may be called concurrently.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "base/env.h"
#include "store/chunk_source.h"

namespace cairn::store {

inline constexpr char kTrashSuffix[] = ".trash";
inline constexpr char kChunksDirName[] = ".chunks";
inline constexpr int kChunkPrefixDirs = 4096;

class LocalChunkStore final : public ChunkSource, public ChunkSink {
 public:
  // Creates the .chunks tree under `dir` (which must exist).
  static Status Create(Env& env, const std::string& dir);
  // Opens an existing store. NotFound when `dir`/.chunks is missing.
  // REQUIRES: env outlives the store.
  static Result<std::unique_ptr<LocalChunkStore>> Open(Env& env, const std::string& dir);

  Result<Bytes> Read(const ChunkId& id) override;
  Status ReadInto(const ChunkId& id, ReadBuffer* out) override;
  SourceTraits Traits() const override;
  Result<InsertResult> Insert(const ChunkId& id, ByteSpan stored) override;
  Result<InsertResult> InsertAbsent(const ChunkId& id, ByteSpan stored) override;
  Result<InsertResult> Replace(const ChunkId& id, ByteSpan stored) override;
  Result<bool> Contains(const ChunkId& id) override;
  Status Flush() override;

  // InsertAbsent for a bulk writer of chunks it will not read back soon
  // (sync): the chunk file's page-aligned first part, when at least
  // kDirectWriteMinBytes, is written past the page cache (O_DIRECT, as an
  // image restore writes its target), the rest buffered. It spares the CPU
  // the copy into the page cache and Flush()'s syncfs the writeback of it
  // all at the end; durability is unchanged (Flush() still makes the files
  // and their names durable). Buffered where the file system has no
  // O_DIRECT. Per call, so other writers of the store (a server's backup
  // sessions) keep their buffered writes.
  Result<InsertResult> InsertAbsentDirect(const ChunkId& id, ByteSpan stored);
  static constexpr size_t kDirectWriteMinBytes = 64 << 10;

  // Moves a damaged chunk aside to <path>.bad (replacing an older .bad), so
  // Contains() is false and the next backup of the same data stores it
  // again. Returns the new path.
  Result<std::string> Quarantine(const ChunkId& id);

  // DIR/.chunks/XXX, the directory of the chunks whose ids start with the
  // three hex digits of `prefix` (< kChunkPrefixDirs).
  std::string PrefixDirPath(unsigned prefix) const;
  // Path of the file holding `id`.
  std::string ChunkPath(const ChunkId& id) const;
  const std::string& dir() const { return dir_; }

 private:
  LocalChunkStore(Env& env, std::string dir) : env_(env), dir_(std::move(dir)) {}
  // Runs `read` on the chunk's file (then on its set-aside name, see
  // ReadInto) and turns what fails into an error that names the chunk.
  Status ReadChunkFile(const ChunkId& id,
                       const std::function<Status(const std::string& path)>& read) const;
  // False when the file at `path`, `size` bytes long, is not a whole chunk:
  // shorter than its header says, or no blob at all. A power cut during a
  // backup can leave such a file under a chunk's name (renamed into place,
  // its contents not yet written back); it is not the chunk, and an insert
  // of the chunk replaces it.
  Result<bool> IsWhole(const std::string& path, uint64_t size) const;
  // Writes `stored` to a temporary file beside the chunk's path and moves
  // it there (`replace`: over whatever is there; else AlreadyExists when a
  // chunk is there).
  // InsertAbsent (`direct`: InsertAbsentDirect).
  Result<InsertResult> InsertNew(const ChunkId& id, ByteSpan stored, bool direct);
  // `direct`: see InsertAbsentDirect.
  Status WriteChunkFile(const ChunkId& id, ByteSpan stored, bool replace, bool direct = false);
  // Writes `stored` into the new file (`direct`: see InsertAbsentDirect).
  Status WriteChunkData(WritableFile& file, ByteSpan stored, bool direct);

  Env& env_;
  std::string dir_;
  std::atomic<uint64_t> tmp_counter_{0};
};

}  // namespace cairn::store
