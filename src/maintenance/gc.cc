#include "maintenance/gc.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstring>
#include <functional>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "pipeline/bottleneck_json.h"
#include "pipeline/stage_meter.h"
#include "pipeline/worker_group.h"
#include "store/local_chunk_store.h"

namespace cairn::maintenance {

// --- PrefixSet ---------------------------------------------------------------

namespace {
constexpr int kShardBits = 8;
constexpr int kShards = 1 << kShardBits;
}  // namespace

// Open addressing with linear probing; 0 marks an empty slot (key 0 is
// stored as 1: a collision that can only keep a chunk).
struct PrefixSet::Shard {
  Mutex mu;
  std::vector<uint64_t> slots GUARDED_BY(mu) = std::vector<uint64_t>(64, 0);
  uint64_t count GUARDED_BY(mu) = 0;

  static size_t Slot(uint64_t key, size_t mask) {
    // The top bits chose the shard; mix the rest.
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 20) & mask;
  }
  void InsertLocked(uint64_t key) REQUIRES(mu) {
    size_t mask = slots.size() - 1;
    for (size_t i = Slot(key, mask);; i = (i + 1) & mask) {
      if (slots[i] == key) return;
      if (slots[i] == 0) {
        slots[i] = key;
        ++count;
        return;
      }
    }
  }
  void Grow() REQUIRES(mu) {
    std::vector<uint64_t> old(slots.size() * 2, 0);
    old.swap(slots);
    count = 0;
    for (uint64_t k : old) {
      if (k != 0) InsertLocked(k);
    }
  }
};

PrefixSet::PrefixSet() : shards_(new Shard[kShards]) {}
PrefixSet::~PrefixSet() { delete[] shards_; }

void PrefixSet::Insert(uint64_t key) {
  if (key == 0) key = 1;
  Shard& s = shards_[key >> (64 - kShardBits)];
  MutexLock lock(s.mu);
  if ((s.count + 1) * 10 > s.slots.size() * 7) s.Grow();  // load ≤ 0.7
  s.InsertLocked(key);
}

// Contains, size and memory_bytes read without the shards' locks: by
// PrefixSet's contract they never run beside an Insert (gc's mark phase has
// ended), and a lock per lookup would cost the sweep's every chunk.
bool PrefixSet::Contains(uint64_t key) const NO_THREAD_SAFETY_ANALYSIS {
  if (key == 0) key = 1;
  const Shard& s = shards_[key >> (64 - kShardBits)];
  size_t mask = s.slots.size() - 1;
  for (size_t i = Shard::Slot(key, mask);; i = (i + 1) & mask) {
    if (s.slots[i] == key) return true;
    if (s.slots[i] == 0) return false;
  }
}

uint64_t PrefixSet::size() const NO_THREAD_SAFETY_ANALYSIS {
  uint64_t n = 0;
  for (int i = 0; i < kShards; ++i) n += shards_[i].count;
  return n;
}

uint64_t PrefixSet::memory_bytes() const NO_THREAD_SAFETY_ANALYSIS {
  uint64_t n = 0;
  for (int i = 0; i < kShards; ++i) n += shards_[i].slots.size() * sizeof(uint64_t);
  return n;
}

uint64_t IdPrefix(const uint8_t* digest) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | digest[i];
  return v;
}

std::optional<uint64_t> HexIdPrefix(std::string_view name) {
  if (name.size() < 16) return std::nullopt;
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(name.data(), name.data() + 16, v, 16);
  if (ec != std::errc() || ptr != name.data() + 16) return std::nullopt;
  return v;
}

// --- the run -----------------------------------------------------------------

namespace {

using nlohmann::json;

constexpr char kLockFile[] = "lock";
constexpr char kRunningFile[] = "running";
constexpr char kLastFile[] = "last.json";
constexpr size_t kChunkNameLength = 64;
// File times come from the kernel's coarse clock (and, on a network file
// system, from the server's): a chunk a backup inserted just after it
// registered may carry an earlier time than the registration. PBS allows
// the same 300 s below its oldest writer.
constexpr int64_t kWriterMarginNs = int64_t{300} * 1000000000;

bool IsHex(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

struct Writer {
  std::string name;
  int64_t start_ns = 0;
  bool live = false;
};

// The backups registered in .writers/ and whether each still runs.
Result<std::vector<Writer>> ReadWriters(const datastore::Datastore& store, int64_t now_ns) {
  Env& env = store.env();
  std::string dir = JoinPath(store.path(), datastore::kWritersDirName);
  std::vector<Writer> out;
  if (!env.Stat(dir).ok()) return out;
  CAIRN_ASSIGN_OR_RETURN(auto names, env.ListDir(dir));
  for (auto& name : names) {
    Writer w;
    w.name = name;
    std::string_view digits = name;
    if (digits.starts_with(".tmp-")) digits.remove_prefix(5);
    int64_t start = 0;
    auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), start);
    w.start_ns = ec == std::errc() ? start : 0;  // unparsable: oldest possible
    if (name.starts_with(".tmp-")) {
      // Being registered (it is renamed once locked), or left by a writer
      // killed in that instant: a writer registering now starts after us.
      if (now_ns - w.start_ns > 3600 * int64_t{1000000000}) out.push_back(std::move(w));
      continue;
    }
    auto lock = env.TryLockExisting(JoinPath(dir, name), /*exclusive=*/true);
    if (!lock.ok()) {
      if (lock.status().code() == StatusCode::kNotFound) continue;  // removed meanwhile
      w.live = true;  // locked by its writer (or unreadable: assume the worst)
    }
    out.push_back(std::move(w));
  }
  return out;
}

json ReportToJson(const GcReport& r) {
  return json{{"start_unix_ns", r.start_unix_ns},
              {"end_unix_ns", r.end_unix_ns},
              {"cutoff_unix_ns", r.cutoff_unix_ns},
              {"snapshots", r.snapshots},
              {"referenced_chunks", r.referenced_chunks},
              {"chunk_files", r.chunk_files},
              {"in_use_chunks", r.in_use_chunks},
              {"removed_chunks", r.removed_chunks},
              {"removed_bytes", r.removed_bytes},
              {"pending_chunks", r.pending_chunks},
              {"pending_bytes", r.pending_bytes},
              {"restored_chunks", r.restored_chunks},
              {"bad_chunks", r.bad_chunks},
              {"deferred", r.deferred}};
}

using pipeline::ParallelFor;
using pipeline::Stage;
using pipeline::StageTimer;

class GcRun {
 public:
  GcRun(const datastore::Datastore& store, const GcOptions& options)
      : store_(store),
        env_(store.env()),
        options_(options),
        progress_(options.progress != nullptr ? options.progress : &own_progress_),
        meter_(&progress_->stages) {
    unsigned hw = std::max(1u, std::thread::hardware_concurrency());
    threads_ = options.threads > 0 ? options.threads : static_cast<int>(std::max(16u, hw));
  }

  // What limited the run so far (the stage meter's verdict).
  pipeline::Bottleneck Analyze() const { return meter_->Analyze(); }

  Result<GcReport> Run() {
    std::string gc_dir = JoinPath(store_.path(), datastore::kGcDirName);
    CAIRN_RETURN_IF_ERROR(CreateDirs(env_, gc_dir));
    auto lock = env_.TryLock(JoinPath(gc_dir, kLockFile), /*exclusive=*/true);
    if (!lock.ok()) {
      if (lock.status().code() == StatusCode::kUnavailable) {
        return AbortedError(
            fmt::format("another gc is running on datastore {}; try again when it has finished",
                        store_.path()));
      }
      return lock.status();
    }
    report_.threads = threads_;
    report_.dry_run = options_.dry_run;
    report_.start_unix_ns = env_.NowUnixNanos();
    const int64_t t0 = report_.start_unix_ns;
    if (store_.chunks_in_object_store()) return RunOnObjectStore(gc_dir);

    // Trash of earlier runs may go when every backup running now started
    // after the last run ended (a killed run's end is unknown: then only
    // when none runs).
    std::string running = JoinPath(gc_dir, kRunningFile);
    bool previous_killed = env_.Stat(running).ok();
    int64_t previous_end = std::numeric_limits<int64_t>::max();
    if (!previous_killed) {
      if (auto last = ReadLastGc(store_)) previous_end = last->end_unix_ns;
    }
    if (!options_.dry_run) {
      CAIRN_RETURN_IF_ERROR(WriteFileAtomic(env_, running, AsBytes(std::to_string(t0))));
    }

    CAIRN_ASSIGN_OR_RETURN(writers_at_start_, ReadWriters(store_, t0));
    int64_t oldest_writer = std::numeric_limits<int64_t>::max();
    for (const auto& w : writers_at_start_) {
      if (w.live && w.start_ns < oldest_writer) {
        oldest_writer = w.start_ns;
        report_.held_back_by = w.name;
      }
    }
    cutoff_ = t0 - options_.grace_seconds * int64_t{1000000000};
    if (oldest_writer != std::numeric_limits<int64_t>::max() &&
        oldest_writer - kWriterMarginNs < cutoff_) {
      cutoff_ = oldest_writer - kWriterMarginNs;
    } else {
      report_.held_back_by.clear();
    }
    report_.cutoff_unix_ns = cutoff_;
    trash_deletable_ = oldest_writer > previous_end;

    int64_t m0 = env_.NowMonotonicNanos();
    CAIRN_RETURN_IF_ERROR(Mark());
    report_.referenced_chunks = marked_.size();
    int64_t s0 = env_.NowMonotonicNanos();
    report_.mark_seconds = static_cast<double>(s0 - m0) / 1e9;
    CAIRN_RETURN_IF_ERROR(Sweep());

    // Was any backup running at any moment of the run? If not, nothing can
    // have been referenced between our look at a chunk and its rename, and
    // what we set aside can go now.
    CAIRN_ASSIGN_OR_RETURN(auto writers_at_end, ReadWriters(store_, env_.NowUnixNanos()));
    bool writer_ran = false;
    for (const auto& w : writers_at_start_) writer_ran |= w.live;
    for (const auto& w : writers_at_end) {
      bool seen = std::any_of(writers_at_start_.begin(), writers_at_start_.end(),
                              [&](const Writer& s) { return s.name == w.name; });
      writer_ran |= w.live || !seen;
    }
    if (options_.dry_run) {
      report_.removed_chunks += set_aside_chunks_;
      report_.removed_bytes += set_aside_bytes_;
    } else if (writer_ran) {
      report_.deferred = set_aside_chunks_ > 0;
      report_.pending_chunks += set_aside_chunks_;
      report_.pending_bytes += set_aside_bytes_;
    } else {
      CAIRN_RETURN_IF_ERROR(EmptyTrash());
      RemoveDeadWriters(writers_at_start_);
    }
    report_.sweep_seconds = static_cast<double>(env_.NowMonotonicNanos() - s0) / 1e9;
    report_.end_unix_ns = env_.NowUnixNanos();
    if (!options_.dry_run) {
      std::string text = ReportToJson(report_).dump(2) + "\n";
      CAIRN_RETURN_IF_ERROR(WriteFileAtomic(env_, JoinPath(gc_dir, kLastFile), AsBytes(text)));
      CAIRN_RETURN_IF_ERROR(env_.RemoveFile(running));
    }
    return report_;
  }

 private:
  // An object store has neither access times nor renames. Chunks go only
  // while no backup runs (Datastore::LockChunkRemoval: backups hold the
  // barrier shared for their whole run), and only when no snapshot that
  // exists at that moment names them: the snapshots are marked once
  // before the listing and again, under the barrier, before deleting.
  Result<GcReport> RunOnObjectStore(const std::string& gc_dir) {
    int64_t m0 = env_.NowMonotonicNanos();
    CAIRN_RETURN_IF_ERROR(Mark());
    int64_t s0 = env_.NowMonotonicNanos();
    report_.mark_seconds = static_cast<double>(s0 - m0) / 1e9;
    report_.cutoff_unix_ns = report_.start_unix_ns;

    std::mutex mu;
    std::vector<std::pair<std::string, uint64_t>> unused;
    progress_->StartPhase("sweep", 0);
    auto listed = [&] {
      StageTimer list_timer(meter_, Stage::kMetadata);  // the listing, on this thread
      return store_.remote()->ListChunks([&](std::string_view name, uint64_t size) {
        bool bad = name.size() > kChunkNameLength;  // "<id>.bad"
        auto prefix = HexIdPrefix(name);
        bool used = !bad && prefix && marked_.Contains(*prefix);
        std::lock_guard<std::mutex> lock(mu);
        ++report_.chunk_files;
        if (bad) {
          ++report_.bad_chunks;
        } else if (used) {
          ++report_.in_use_chunks;
        } else {
          unused.emplace_back(std::string(name), size);
        }
      });
    }();
    CAIRN_RETURN_IF_ERROR(listed);
    std::unique_ptr<FileLock> barrier;
    if (!options_.dry_run && !unused.empty()) {
      auto lock = store_.LockChunkRemoval(int64_t{30} * 1000000000);
      if (lock.ok()) {
        barrier = std::move(*lock);
      } else if (lock.status().code() != StatusCode::kAborted) {
        return lock.status();
      }
    }
    if (barrier) {
      // No backup runs now: the registrations left by finished ones can go.
      if (auto writers = ReadWriters(store_, env_.NowUnixNanos()); writers.ok()) {
        RemoveDeadWriters(*writers);
      }
      // Backups that finished since the first mark reference chunks too.
      CAIRN_RETURN_IF_ERROR(Mark());
      report_.referenced_chunks = marked_.size();
      std::vector<std::string> names;
      for (auto& [name, size] : unused) {
        auto prefix = HexIdPrefix(name);
        if (prefix && marked_.Contains(*prefix)) {
          ++report_.in_use_chunks;
          continue;
        }
        names.push_back(name);
        ++report_.removed_chunks;
        report_.removed_bytes += size;
      }
      StageTimer remove_timer(meter_, Stage::kTargetWrites);
      CAIRN_RETURN_IF_ERROR(store_.remote()->RemoveChunks(names));
    } else {
      report_.referenced_chunks = marked_.size();
      for (auto& [name, size] : unused) {
        if (options_.dry_run) {
          ++report_.removed_chunks;
          report_.removed_bytes += size;
        } else {
          ++report_.pending_chunks;
          report_.pending_bytes += size;
        }
      }
      if (!options_.dry_run && !unused.empty()) {
        report_.deferred = true;
        report_.held_back_by = "backups running for 30 s and more";
      }
    }
    report_.sweep_seconds = static_cast<double>(env_.NowMonotonicNanos() - s0) / 1e9;
    report_.end_unix_ns = env_.NowUnixNanos();
    if (!options_.dry_run) {
      std::string text = ReportToJson(report_).dump(2) + "\n";
      CAIRN_RETURN_IF_ERROR(WriteFileAtomic(env_, JoinPath(gc_dir, kLastFile), AsBytes(text)));
    }
    return report_;
  }

  static ByteSpan AsBytes(const std::string& s) {
    return ByteSpan(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  }

  Status Mark() {
    progress_->StartPhase("mark", 0);
    std::vector<datastore::SnapshotRef> snaps;
    {
      StageTimer list_timer(meter_, Stage::kMetadata);
      CAIRN_ASSIGN_OR_RETURN(snaps, store_.ListAllSnapshots());
    }
    report_.snapshots = snaps.size();
    std::atomic<uint64_t> indexes{0};
    const int lanes =
        static_cast<int>(std::min<size_t>(threads_, std::max<size_t>(1, snaps.size())));
    Status s = ParallelFor(threads_, snaps.size(), [&](size_t i) -> Status {
      // A snapshot's manifest and indexes are read and decoded on this
      // thread: its CPU time is decode, the rest (blocked) source reads.
      pipeline::Lanes lane(lanes);
      pipeline::SplitTimer timer(meter_, Stage::kDecode, Stage::kReadWait);
      const auto& snap = snaps[i];
      auto manifest = store_.ReadManifest(snap);
      if (!manifest.ok()) {
        // Forgotten since we listed it: nothing to keep for it.
        if (manifest.status().code() == StatusCode::kNotFound) return Status::Ok();
        return manifest.status();
      }
      for (const auto& entry : manifest->archives) {
        if (entry.kind == index::ArchiveKind::kImage) {
          // Streamed: an index costs a 1 MiB window, not 32 bytes a chunk.
          // A damaged one stops gc, so what it marked before failing is moot.
          Status scanned = store_.ScanImageIndex(snap, entry, [&](size_t, const crypto::Digest& d) {
            marked_.Insert(IdPrefix(d.data()));
          });
          if (!scanned.ok()) return Gone(snap) ? Status::Ok() : IndexError(snap, entry, scanned);
          indexes.fetch_add(1);
        } else if (entry.kind == index::ArchiveKind::kTree) {
          auto idx = store_.ReadTreeIndexes(snap, entry);
          if (!idx.ok()) return Gone(snap) ? Status::Ok() : IndexError(snap, entry, idx.status());
          for (const auto& e : idx->meta.entries()) marked_.Insert(IdPrefix(e.digest.data()));
          for (const auto& e : idx->data.entries()) marked_.Insert(IdPrefix(e.digest.data()));
          indexes.fetch_add(2);
        }
      }
      return Status::Ok();
    });
    report_.indexes = indexes.load();
    return s;
  }

  bool Gone(const datastore::SnapshotRef& snap) const {
    return !env_.Stat(JoinPath(store_.SnapshotDir(snap), index::kManifestFileName)).ok();
  }

  Status IndexError(const datastore::SnapshotRef& snap, const index::ArchiveEntry& entry,
                    const Status& s) const {
    return Status(s.code(),
                  fmt::format("gc stopped before removing anything: cannot read archive {} of "
                              "snapshot {} ({}), so the chunks it needs are unknown; run "
                              "`cairn verify` on it, and forget it if it cannot be repaired",
                              entry.name, snap.ToString(), s.message()));
  }

  struct Counts {
    uint64_t files = 0, in_use = 0, removed = 0, removed_bytes = 0, pending = 0, pending_bytes = 0,
             restored = 0, temp = 0, bad = 0, set_aside = 0, set_aside_bytes = 0;
  };

  Status Sweep() {
    progress_->StartPhase("sweep", 0);
    std::mutex mu;
    Counts total;
    Status s = ParallelFor(threads_, store::kChunkPrefixDirs, [&](size_t p) -> Status {
      pipeline::Lanes lane(threads_);
      Counts c;
      CAIRN_RETURN_IF_ERROR(SweepDir(static_cast<unsigned>(p), &c));
      std::lock_guard<std::mutex> lock(mu);
      total.files += c.files;
      total.in_use += c.in_use;
      total.removed += c.removed;
      total.removed_bytes += c.removed_bytes;
      total.pending += c.pending;
      total.pending_bytes += c.pending_bytes;
      total.restored += c.restored;
      total.temp += c.temp;
      total.bad += c.bad;
      total.set_aside += c.set_aside;
      total.set_aside_bytes += c.set_aside_bytes;
      return Status::Ok();
    });
    report_.chunk_files = total.files;
    report_.in_use_chunks = total.in_use;
    report_.removed_chunks = total.removed;
    report_.removed_bytes = total.removed_bytes;
    report_.pending_chunks = total.pending;
    report_.pending_bytes = total.pending_bytes;
    report_.restored_chunks = total.restored;
    report_.removed_temp_files = total.temp;
    report_.bad_chunks = total.bad;
    set_aside_chunks_ = total.set_aside;
    set_aside_bytes_ = total.set_aside_bytes;
    return s;
  }

  Status SweepDir(unsigned prefix, Counts* c) {
    std::string dir = store_.chunks().PrefixDirPath(prefix);
    auto names = TimedList(dir);
    if (!names.ok()) {
      if (names.status().code() == StatusCode::kNotFound) return Status::Ok();
      return names.status();
    }
    const bool dry = options_.dry_run;
    for (const auto& name : *names) {
      std::string path = JoinPath(dir, name);
      std::string_view id =
          std::string_view(name).substr(0, std::min(name.size(), kChunkNameLength));
      std::string_view suffix = std::string_view(name).substr(id.size());
      if (id.size() != kChunkNameLength || !IsHex(id)) continue;  // not ours
      if (suffix.starts_with(".tmp-")) {
        // An insert in progress, or left by a killed backup.
        auto info = TimedStat(path);
        if (info.ok() && info->mtime_ns < cutoff_) {
          if (!dry) CAIRN_RETURN_IF_ERROR(IgnoreNotFound(TimedRemove(path)));
          ++c->temp;
        }
        continue;
      }
      if (suffix == ".bad") {
        ++c->bad;
        continue;
      }
      bool trash = suffix == store::kTrashSuffix;
      if (!trash && !suffix.empty()) continue;
      ++c->files;
      bool used = marked_.Contains(*HexIdPrefix(id));
      if (trash) {
        if (used) {
          // Referenced again (a backup found it in the instant before we set
          // it aside, or a snapshot that names it appeared): put it back.
          // If a backup has stored it again meanwhile, the copy in place will do.
          std::string live = JoinPath(dir, id);
          if (TimedStat(live).ok()) {
            if (!dry) CAIRN_RETURN_IF_ERROR(IgnoreNotFound(TimedRemove(path)));
            continue;
          }
          if (!dry) CAIRN_RETURN_IF_ERROR(IgnoreNotFound(TimedRename(path, live)));
          ++c->restored;
          ++c->in_use;
          continue;
        }
        auto info = TimedStat(path);
        if (!info.ok()) continue;
        if (trash_deletable_) {
          if (!dry) CAIRN_RETURN_IF_ERROR(IgnoreNotFound(TimedRemove(path)));
          ++c->removed;
          c->removed_bytes += info->size;
        } else {
          ++c->pending;
          c->pending_bytes += info->size;
          has_trash_[prefix] = true;
        }
        continue;
      }
      if (used) {
        ++c->in_use;
        continue;
      }
      auto info = TimedStat(path);
      if (!info.ok()) continue;  // removed meanwhile (quarantined by a verify)
      if (std::max(info->atime_ns, info->mtime_ns) >= cutoff_) {
        ++c->pending;  // used recently: a backup may be about to reference it
        c->pending_bytes += info->size;
        continue;
      }
      if (!dry) {
        Status s = TimedRename(path, path + store::kTrashSuffix);
        if (s.code() == StatusCode::kNotFound) continue;
        CAIRN_RETURN_IF_ERROR(s);
      }
      has_trash_[prefix] = true;
      ++c->set_aside;
      c->set_aside_bytes += info->size;
    }
    return Status::Ok();
  }

  // Deletes every unreferenced "<id>.trash" (called when no backup ran
  // during the run, so none can need one).
  Status EmptyTrash() {
    std::atomic<uint64_t> removed{0}, bytes{0};
    Status s = ParallelFor(threads_, store::kChunkPrefixDirs, [&](size_t p) -> Status {
      if (!has_trash_[p]) return Status::Ok();  // the sweep left no trash there
      pipeline::Lanes lane(threads_);
      std::string dir = store_.chunks().PrefixDirPath(static_cast<unsigned>(p));
      auto names = TimedList(dir);
      if (!names.ok()) return Status::Ok();
      for (const auto& name : *names) {
        if (name.size() != kChunkNameLength + std::strlen(store::kTrashSuffix) ||
            !std::string_view(name).ends_with(store::kTrashSuffix)) {
          continue;
        }
        auto prefix = HexIdPrefix(name);
        if (!prefix || marked_.Contains(*prefix)) continue;
        std::string path = JoinPath(dir, name);
        auto info = TimedStat(path);
        CAIRN_RETURN_IF_ERROR(IgnoreNotFound(TimedRemove(path)));
        removed.fetch_add(1);
        if (info.ok()) bytes.fetch_add(info->size);
      }
      return Status::Ok();
    });
    // Earlier runs' trash deleted now was counted as pending by the sweep.
    uint64_t extra = removed.load() > set_aside_chunks_ ? removed.load() - set_aside_chunks_ : 0;
    uint64_t extra_bytes = bytes.load() > set_aside_bytes_ ? bytes.load() - set_aside_bytes_ : 0;
    report_.removed_chunks += removed.load();
    report_.removed_bytes += bytes.load();
    report_.pending_chunks -= std::min(report_.pending_chunks, extra);
    report_.pending_bytes -= std::min(report_.pending_bytes, extra_bytes);
    return s;
  }

  void RemoveDeadWriters(const std::vector<Writer>& writers) {
    std::string dir = JoinPath(store_.path(), datastore::kWritersDirName);
    for (const auto& w : writers) {
      if (w.live) continue;
      std::string path = JoinPath(dir, w.name);
      // Hold its lock while removing it, so a writer cannot be using it.
      auto lock = env_.TryLockExisting(path, /*exclusive=*/true);
      if (lock.ok()) env_.RemoveFile(path).IgnoreError();
    }
  }

  // The sweep's file-system calls, timed into the stage meter: listings
  // and stats are metadata, renames and unlinks the target's writes.
  Result<std::vector<std::string>> TimedList(const std::string& dir) {
    StageTimer timer(meter_, Stage::kMetadata);
    return env_.ListDir(dir);
  }
  Result<FileInfo> TimedStat(const std::string& path) {
    StageTimer timer(meter_, Stage::kMetadata);
    return env_.Stat(path);
  }
  Status TimedRename(const std::string& from, const std::string& to) {
    StageTimer timer(meter_, Stage::kTargetWrites);
    return env_.Rename(from, to);
  }
  Status TimedRemove(const std::string& path) {
    StageTimer timer(meter_, Stage::kTargetWrites);
    return env_.RemoveFile(path);
  }

  static Status IgnoreNotFound(Status s) {
    return s.code() == StatusCode::kNotFound ? Status::Ok() : s;
  }

  const datastore::Datastore& store_;
  Env& env_;
  const GcOptions& options_;
  pipeline::Progress own_progress_;  // when the caller gave none
  pipeline::Progress* const progress_;
  pipeline::StageMeter* const meter_;
  int threads_ = 1;
  int64_t cutoff_ = 0;
  bool trash_deletable_ = false;
  std::vector<Writer> writers_at_start_;
  // Prefix directories where the sweep set chunks aside or left trash: the
  // only ones EmptyTrash lists again (one thread writes each entry).
  std::vector<uint8_t> has_trash_ = std::vector<uint8_t>(store::kChunkPrefixDirs, 0);
  PrefixSet marked_;
  GcReport report_;
  uint64_t set_aside_chunks_ = 0;
  uint64_t set_aside_bytes_ = 0;
};

}  // namespace

Result<GcReport> RunGc(const datastore::Datastore& store, const GcOptions& options) {
  GcRun run(store, options);
  auto report = run.Run();
  if (report.ok()) report->bottleneck = run.Analyze();
  return report;
}

std::optional<GcReport> ReadLastGc(const datastore::Datastore& store) {
  std::string path = JoinPath(JoinPath(store.path(), datastore::kGcDirName), kLastFile);
  auto data = ReadWholeFile(store.env(), path, 1 << 20);
  if (!data.ok()) return std::nullopt;
  json j = json::parse(data->begin(), data->end(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  GcReport r;
  auto get = [&](const char* key, auto* out) {
    auto it = j.find(key);
    if (it != j.end() && it->is_number()) *out = it->get<std::decay_t<decltype(*out)>>();
  };
  get("start_unix_ns", &r.start_unix_ns);
  get("end_unix_ns", &r.end_unix_ns);
  if (r.end_unix_ns == 0) return std::nullopt;
  get("cutoff_unix_ns", &r.cutoff_unix_ns);
  get("snapshots", &r.snapshots);
  get("referenced_chunks", &r.referenced_chunks);
  get("chunk_files", &r.chunk_files);
  get("in_use_chunks", &r.in_use_chunks);
  get("removed_chunks", &r.removed_chunks);
  get("removed_bytes", &r.removed_bytes);
  get("pending_chunks", &r.pending_chunks);
  get("pending_bytes", &r.pending_bytes);
  get("restored_chunks", &r.restored_chunks);
  get("bad_chunks", &r.bad_chunks);
  if (auto it = j.find("deferred"); it != j.end() && it->is_boolean()) r.deferred = *it;
  return r;
}

nlohmann::json GcReportJson(const GcReport& r) {
  return {{"dry_run", r.dry_run},
          {"snapshots", r.snapshots},
          {"indexes", r.indexes},
          {"referenced_chunks", r.referenced_chunks},
          {"chunk_files", r.chunk_files},
          {"in_use_chunks", r.in_use_chunks},
          {"removed_chunks", r.removed_chunks},
          {"removed_bytes", r.removed_bytes},
          {"pending_chunks", r.pending_chunks},
          {"pending_bytes", r.pending_bytes},
          {"restored_chunks", r.restored_chunks},
          {"removed_temp_files", r.removed_temp_files},
          {"bad_chunks", r.bad_chunks},
          {"deferred", r.deferred},
          {"held_back_by_backup",
           r.held_back_by.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.held_back_by)},
          {"cutoff", datastore::FormatRfc3339(r.cutoff_unix_ns / 1000000000)},
          {"threads", r.threads},
          {"mark_seconds", r.mark_seconds},
          {"sweep_seconds", r.sweep_seconds},
          {"bottleneck", pipeline::BottleneckJson(r.bottleneck)}};
}

}  // namespace cairn::maintenance
