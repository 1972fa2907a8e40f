// cairn benchmark's rows of a datastore (bench_rows.h): chunk inserts into
// a scratch store on the datastore's file system, chunk reads with the full
// check, and a restore rehearsal of the newest image.
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <set>
#include <string_view>

#include "blob/blob.h"
#include "perf/bench_rows.h"
#include "restore/image_restore.h"
#include "store/local_chunk_store.h"

namespace cairn::perf {
namespace {

constexpr std::string_view kScratchPrefix = ".bench-tmp-";
// Caps what one insert measurement writes (plaintext; stored is less).
constexpr uint64_t kMaxInsertBytes = uint64_t{1} << 30;
constexpr size_t kReadSampleChunks = 256;

// Removes `path` and everything below it (no symlinks are followed: the
// tree holds only what the benchmark created).
Status RemoveTree(Env& env, const std::string& path) {
  CAIRN_ASSIGN_OR_RETURN(FileInfo info, env.Stat(path));
  if (!info.is_dir) return env.RemoveFile(path);
  CAIRN_ASSIGN_OR_RETURN(std::vector<std::string> names, env.ListDir(path));
  for (const std::string& name : names) {
    CAIRN_RETURN_IF_ERROR(RemoveTree(env, JoinPath(path, name)));
  }
  return env.RemoveDir(path);
}

// A chunk store in DATASTORE/.bench-tmp-PID: on the file system the
// datastore's chunks live on, invisible to snapshot listing (which reads
// only ct/, host/, vm/ and ns/), and removed by Remove() or, failing that,
// by the destructor.
class ScratchStore {
 public:
  static Result<std::unique_ptr<ScratchStore>> Create(Env& env, const std::string& datastore) {
    RemoveStale(env, datastore);
    std::string dir = JoinPath(datastore, fmt::format("{}{}", kScratchPrefix, ::getpid()));
    if (Status s = env.CreateDir(dir); !s.ok()) {
      return s.WithContext(fmt::format(
          "creating the benchmark's scratch chunk store {} (it measures the datastore's file "
          "system and is removed afterwards)",
          dir));
    }
    std::unique_ptr<ScratchStore> scratch(new ScratchStore(env, dir));
    CAIRN_RETURN_IF_ERROR(store::LocalChunkStore::Create(env, dir));
    CAIRN_ASSIGN_OR_RETURN(scratch->chunks_, store::LocalChunkStore::Open(env, dir));
    return scratch;
  }
  ~ScratchStore() {
    if (!removed_) Remove().IgnoreError();  // best effort on an error path
  }
  ScratchStore(const ScratchStore&) = delete;
  ScratchStore& operator=(const ScratchStore&) = delete;

  Status Remove() {
    chunks_.reset();
    removed_ = true;
    Status s = RemoveTree(env_, dir_);
    return s.ok() ? s : s.WithContext("removing the benchmark's scratch chunk store " + dir_);
  }
  store::LocalChunkStore& chunks() { return *chunks_; }
  const std::string& dir() const { return dir_; }

 private:
  ScratchStore(Env& env, std::string dir) : env_(env), dir_(std::move(dir)) {}

  // A scratch store whose process is gone was left by a killed run: ours to
  // remove. (A live pid, even one reused by another program, keeps it.)
  static void RemoveStale(Env& env, const std::string& datastore) {
    auto names = env.ListDir(datastore);
    if (!names.ok()) return;
    for (const std::string& name : *names) {
      if (!name.starts_with(kScratchPrefix)) continue;
      long pid = std::strtol(name.c_str() + kScratchPrefix.size(), nullptr, 10);
      if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
        RemoveTree(env, JoinPath(datastore, name)).IgnoreError();  // retried next run
      }
    }
  }

  Env& env_;
  std::string dir_;
  std::unique_ptr<store::LocalChunkStore> chunks_;
  bool removed_ = false;
};

struct SampleChunk {
  crypto::Digest id;
  uint32_t length = 0;
  const crypto::CryptConfig* crypt = nullptr;  // the key of its snapshot; null: plain
};

struct RepoSample {
  std::vector<SampleChunk> chunks;
  size_t encrypted = 0;          // chunks of encrypted snapshots
  size_t skipped_snapshots = 0;  // encrypted without the key given (or with another)
};

// The key a snapshot's chunks decode with (Datastore::CryptFor); nullopt for
// an encrypted snapshot this run has no key for (it is skipped).
Result<std::optional<const crypto::CryptConfig*>> KeyFor(const datastore::Datastore& store,
                                                         const index::Manifest& manifest) {
  auto crypt = store.CryptFor(manifest);
  if (crypt.ok()) return std::optional<const crypto::CryptConfig*>(*crypt);
  if (crypt.status().code() == StatusCode::kUnauthenticated) {
    return std::optional<const crypto::CryptConfig*>();
  }
  return crypt.status();
}

// Up to `max` distinct chunks of the newest snapshots (newest first),
// without the all-zero chunks restore never fetches. A snapshot removed
// meanwhile is skipped, and so is an encrypted one without its key.
Result<RepoSample> SampleRepoChunks(const datastore::Datastore& store, size_t max) {
  CAIRN_ASSIGN_OR_RETURN(std::vector<datastore::SnapshotRef> snaps, store.ListAllSnapshots());
  std::stable_sort(snaps.begin(), snaps.end(),
                   [](const auto& a, const auto& b) { return a.time > b.time; });
  RepoSample out;
  std::set<crypto::Digest> seen;
  auto add = [&](const crypto::Digest& id, uint32_t length, const crypto::CryptConfig* crypt) {
    if (out.chunks.size() < max && seen.insert(id).second) {
      out.chunks.push_back({id, length, crypt});
      out.encrypted += crypt != nullptr ? 1 : 0;
    }
  };
  for (const auto& snap : snaps) {
    if (out.chunks.size() >= max) break;
    auto manifest = store.ReadManifest(snap);
    if (!manifest.ok() && manifest.status().code() == StatusCode::kNotFound) continue;
    if (!manifest.ok()) return manifest.status();
    CAIRN_ASSIGN_OR_RETURN(auto key, KeyFor(store, *manifest));
    if (!key) {
      ++out.skipped_snapshots;
      continue;
    }
    const crypto::CryptConfig* crypt = *key;
    for (const auto& entry : manifest->archives) {
      if (entry.kind == index::ArchiveKind::kImage) {
        CAIRN_ASSIGN_OR_RETURN(index::FixedIndex idx, store.ReadImageIndex(snap, entry));
        const crypto::Digest zero = index::ZeroChunkDigest(idx.chunk_size(), crypt);
        for (size_t i = 0; i < idx.chunk_count(); ++i) {
          if (idx.digest(i) != zero) add(idx.digest(i), idx.ChunkLength(i), crypt);
        }
      } else if (entry.kind == index::ArchiveKind::kTree) {
        CAIRN_ASSIGN_OR_RETURN(auto idx, store.ReadTreeIndexes(snap, entry));
        for (const auto* stream : {&idx.meta, &idx.data}) {
          for (size_t i = 0; i < stream->chunk_count(); ++i) {
            add(stream->digest(i), static_cast<uint32_t>(stream->ChunkLength(i)), crypt);
          }
        }
      }
    }
  }
  return out;
}

// Inserts every chunk of the data set under a fresh id (the store stores
// bytes under a name and checks neither; the ids are SHA-256 of a serial,
// so they spread over the prefix directories as real ids do).
WorkFactory InsertWork(const BenchData& data, store::LocalChunkStore& chunks,
                       std::atomic<uint64_t>& serial) {
  return [&data, &chunks, &serial](int index) -> Result<WorkFn> {
    size_t next = static_cast<size_t>(index) % data.chunks.size();
    return WorkFn([&data, &chunks, &serial, next]() mutable -> Result<uint64_t> {
      size_t i = next;
      next = (next + 1) % data.chunks.size();
      uint64_t n = serial.fetch_add(1, std::memory_order_relaxed);
      std::array<uint8_t, 16> name{};
      std::memcpy(name.data(), &n, sizeof(n));
      std::memcpy(name.data() + 8, &data.seed, sizeof(data.seed));
      CAIRN_ASSIGN_OR_RETURN(store::InsertResult r,
                             chunks.Insert(crypto::Sha256(name), data.stored[i]));
      if (!r.inserted) return InternalError("scratch chunk store: an id was used twice");
      return data.chunks[i].size();
    });
  };
}

WorkFactory ReadWork(const std::vector<SampleChunk>& sample, store::ChunkSource& source) {
  return [&sample, &source](int index) -> Result<WorkFn> {
    auto buffers = std::make_shared<std::pair<ReadBuffer, Bytes>>();  // stored, scratch
    size_t next = static_cast<size_t>(index) * 7 % sample.size();
    return WorkFn([&sample, &source, buffers, next]() mutable -> Result<uint64_t> {
      const SampleChunk& c = sample[next];
      next = (next + 1) % sample.size();
      CAIRN_RETURN_IF_ERROR(source.ReadInto(c.id, &buffers->first));
      CAIRN_ASSIGN_OR_RETURN(ByteSpan plain, blob::DecodeChunkView(buffers->first, c.id,
                                                                   &buffers->second, c.crypt));
      CAIRN_RETURN_IF_ERROR(CheckLength(plain.size(), c.length, c.id));
      return plain.size();
    });
  };
}

// Insert (with the syncfs a backup ends with) and read rows. Without a
// scratch store (`unwritable` says why), only the read row is measured.
Status MeasureStoreRows(Env& env, const MachineBenchOptions& options, int threads,
                        const BenchData& data, ScratchStore* scratch, const std::string& unwritable,
                        std::vector<BenchRow>* rows) {
  const datastore::Datastore& store = *options.store;
  BenchRow insert;
  insert.name = "chunk_insert";
  insert.what =
      "insert of a stored chunk into a chunk store on the datastore's file system (temp file + "
      "rename), then one syncfs";
  if (scratch == nullptr) {
    insert.note = "n/a (" + unwritable + ")";
  } else {
    insert.note = "into the scratch store " + scratch->dir() + " (removed)";
    std::atomic<uint64_t> serial{0};
    double* figures[] = {&insert.per_core_mb_s.emplace(), &insert.all_cores_mb_s.emplace()};
    for (int pass = 0; pass < 2; ++pass) {
      CAIRN_ASSIGN_OR_RETURN(
          Rate rate, MeasureRate({pass == 0 ? 1 : threads, options.seconds, kMaxInsertBytes},
                                 InsertWork(data, scratch->chunks(), serial)));
      int64_t start = env.NowMonotonicNanos();
      CAIRN_RETURN_IF_ERROR(scratch->chunks().Flush());
      rate.seconds += Seconds(env, start);
      *figures[pass] = rate.MBPerSecond();
    }
  }
  rows->push_back(insert);
  if (options.on_row) options.on_row(rows->back());

  CAIRN_ASSIGN_OR_RETURN(RepoSample repo_sample, SampleRepoChunks(store, kReadSampleChunks));
  std::vector<SampleChunk>& sample = repo_sample.chunks;
  store::ChunkSource* source = &store.chunks();
  BenchRow read;
  read.name = "chunk_read";
  read.what =
      "read of a stored chunk from the datastore + full check (CRC32C, decompress, SHA-256; "
      "encrypted chunks: + AES-256-GCM decrypt, HMAC-SHA256 id)";
  read.note = fmt::format("{} chunks of the newest snapshots{}; page cache warm unless dropped",
                          sample.size(),
                          repo_sample.encrypted == 0
                              ? ""
                              : fmt::format(" ({} encrypted)", repo_sample.encrypted));
  const std::string skipped =
      repo_sample.skipped_snapshots == 0
          ? ""
          : fmt::format("; {} encrypted snapshots skipped (no key for them: give --keyfile)",
                        repo_sample.skipped_snapshots);
  if (sample.empty() && scratch == nullptr) {
    read.note = "n/a (the datastore has no snapshots and no scratch store)" + skipped;
    rows->push_back(read);
    if (options.on_row) options.on_row(rows->back());
    return Status::Ok();
  }
  if (sample.empty()) {
    // An empty datastore: read back the data set from the scratch store.
    for (size_t i = 0; i < data.chunks.size(); ++i) {
      CAIRN_RETURN_IF_ERROR(scratch->chunks().Insert(data.ids[i], data.stored[i]).status());
      sample.push_back({data.ids[i], static_cast<uint32_t>(data.chunks[i].size())});
    }
    source = &scratch->chunks();
    read.note = fmt::format("{} chunks written to the scratch store (the datastore has no {})",
                            sample.size(),
                            repo_sample.skipped_snapshots == 0 ? "snapshots"
                                                               : "snapshots this run can read");
  }
  read.note += skipped;
  return MeasureRow(options, threads, read, ReadWork(sample, *source), 0, rows)
      .WithContext("chunk read benchmark (cairn verify checks the whole datastore)");
}

// The newest snapshot with an image archive that this run can read, that
// archive and its key; `skipped` counts the newer encrypted ones without
// their key.
struct ImageChoice {
  datastore::SnapshotRef snap;
  index::ArchiveEntry entry;
  const crypto::CryptConfig* crypt = nullptr;
};
Result<std::optional<ImageChoice>> NewestImage(const datastore::Datastore& store,
                                               size_t* skipped) {
  CAIRN_ASSIGN_OR_RETURN(std::vector<datastore::SnapshotRef> snaps, store.ListAllSnapshots());
  std::stable_sort(snaps.begin(), snaps.end(),
                   [](const auto& a, const auto& b) { return a.time > b.time; });
  for (const auto& snap : snaps) {
    auto manifest = store.ReadManifest(snap);
    if (!manifest.ok() && manifest.status().code() == StatusCode::kNotFound) continue;
    if (!manifest.ok()) return manifest.status();
    for (const auto& entry : manifest->archives) {
      if (entry.kind != index::ArchiveKind::kImage) continue;
      CAIRN_ASSIGN_OR_RETURN(auto key, KeyFor(store, *manifest));
      if (!key) {
        ++*skipped;
        break;
      }
      return std::optional<ImageChoice>(ImageChoice{snap, entry, *key});
    }
  }
  return std::optional<ImageChoice>();
}

// The first chunks of `idx` that hold at least `budget` non-zero bytes (or
// all of it): a rehearsal of a 500 GB image must not take an hour.
index::FixedIndex IndexPrefix(const index::FixedIndex& idx, uint64_t budget,
                              const crypto::CryptConfig* crypt) {
  const crypto::Digest zero = index::ZeroChunkDigest(idx.chunk_size(), crypt);
  uint64_t data_bytes = 0;
  size_t k = 0;
  while (k < idx.chunk_count() && data_bytes < budget) {
    if (idx.digest(k) != zero) data_bytes += idx.ChunkLength(k);
    ++k;
  }
  if (k == idx.chunk_count()) return idx;
  std::vector<crypto::Digest> digests(idx.digests().begin(), idx.digests().begin() + k);
  return index::FixedIndex(uint64_t{k} * idx.chunk_size(), idx.chunk_size(), std::move(digests));
}

// Restore rehearsals (fetch, decode, check; nothing written) of the start
// of the newest image archive, with one checking thread and with one per
// core, each sized to take about `seconds` at the measured verify rate.
Status MeasureRehearsal(Env& env, const MachineBenchOptions& options, int threads,
                        std::vector<BenchRow>* rows) {
  const datastore::Datastore& store = *options.store;
  BenchRow row;
  row.name = "restore_rehearsal";
  row.what =
      "restore --rehearse: the restore pipeline (reads in flight, decode, check), image bytes "
      "per second, zero chunks skipped as restore skips them";
  size_t skipped = 0;
  CAIRN_ASSIGN_OR_RETURN(std::optional<ImageChoice> choice, NewestImage(store, &skipped));
  const std::string skipped_note =
      skipped == 0 ? ""
                   : fmt::format("; {}{} encrypted image snapshots skipped (no key for them: "
                                 "give --keyfile)",
                                 skipped, choice ? " newer" : "");
  if (!choice) {
    row.note = (skipped == 0 ? "n/a (no image snapshot in the datastore)"
                             : "n/a (no image snapshot this run has the key for)") +
               skipped_note;
  } else {
    // Held like a restore holds it, so prune cannot remove it meanwhile.
    CAIRN_ASSIGN_OR_RETURN(auto lock, store.LockSnapshotShared(choice->snap));
    CAIRN_ASSIGN_OR_RETURN(index::FixedIndex idx,
                           store.ReadImageIndex(choice->snap, choice->entry));
    // Sized by the chunk check of its kind, plain or encrypted.
    const std::string check = choice->crypt != nullptr ? "verify_encrypted" : "verify";
    double verify_one = 0, verify_all = 0;
    for (const BenchRow& r : *rows) {
      if (r.name == check) {
        verify_one = r.per_core_mb_s.value_or(0);
        verify_all = r.all_cores_mb_s.value_or(0);
      }
    }
    uint64_t largest = 0;
    for (int pass = 0; pass < 2; ++pass) {
      double mb_s = pass == 0 ? verify_one : verify_all;
      uint64_t budget = std::max<uint64_t>(static_cast<uint64_t>(mb_s * 1e6 * options.seconds),
                                           uint64_t{4} * idx.chunk_size());
      index::FixedIndex prefix = IndexPrefix(idx, budget, choice->crypt);
      largest = std::max(largest, prefix.image_size());
      restore::ImageRestoreOptions ro;
      ro.rehearse = true;
      ro.cpu_workers = pass == 0 ? 1 : threads;
      ro.crypt = choice->crypt;
      std::vector<restore::ImageRestoreStats> stats;
      const restore::ImageTarget target{&prefix, ""};
      CAIRN_RETURN_IF_ERROR(
          restore::RestoreImages(env, std::span(&target, 1), store.chunks(), ro, &stats)
              .WithContext(fmt::format("restore rehearsal of {} of {}", choice->entry.name,
                                       choice->snap.ToString())));
      double mb =
          stats[0].seconds > 0 ? static_cast<double>(stats[0].bytes) / 1e6 / stats[0].seconds : 0;
      (pass == 0 ? row.per_core_mb_s : row.all_cores_mb_s) = mb;
    }
    row.note = fmt::format("{} of {} ({} of {}{}){}", choice->entry.name,
                           choice->snap.ToString(),
                           largest == idx.image_size() ? "all" : "first " + HumanBytes(largest),
                           HumanBytes(idx.image_size()),
                           choice->crypt != nullptr ? ", encrypted" : "", skipped_note);
  }
  rows->push_back(row);
  if (options.on_row) options.on_row(rows->back());
  return Status::Ok();
}

}  // namespace

Status MeasureDatastoreRows(Env& env, const MachineBenchOptions& options, int threads,
                            const BenchData& data, std::vector<BenchRow>* rows) {
  // A datastore this user may read but not write (a read-only mount,
  // another user's) still gets the read and rehearsal rows.
  auto scratch = ScratchStore::Create(env, options.store->path());
  ScratchStore* scratch_store = scratch.ok() ? scratch->get() : nullptr;
  std::string unwritable(scratch.ok() ? "" : scratch.status().message());
  Status s = MeasureStoreRows(env, options, threads, data, scratch_store, unwritable, rows);
  // Removed before the rehearsal, so its reads do not compete with the
  // scratch store's write-back; on error the destructor tries too.
  Status removed = scratch_store ? scratch_store->Remove() : Status::Ok();
  CAIRN_RETURN_IF_ERROR(s);
  CAIRN_RETURN_IF_ERROR(removed);
  return MeasureRehearsal(env, options, threads, rows);
}

}  // namespace cairn::perf
