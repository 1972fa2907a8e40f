#include "backup/tree_backup.h"

#include <fnmatch.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <map>
#include <mutex>
#include <optional>

#include <fmt/format.h>

#include "backup/chunk_writer.h"
#include "chunkio/tree_reader.h"
#include "index/chunker.h"
#include "pipeline/bounded_queue.h"
#include "pipeline/buffer_pool.h"
#include "pipeline/worker_group.h"
#include "tree/fs_meta.h"
#include "tree/tree_format.h"

namespace cairn::backup {
namespace {

using tree::Entry;
using tree::EntryKind;

// Bytes read from a file per call, straight into the chunk being built.
constexpr size_t kReadSize = size_t{1} << 20;
// Walked entries queued ahead of the chunker (each regular file to read
// is open with readahead requested (Dir::OpenFile), so the kernel reads
// upcoming files while the chunker works on this one).
constexpr size_t kWalkQueue = 256;

int64_t Nanos(const struct timespec& t) { return int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec; }

// The previous snapshot's archive of the same name: its metadata stream,
// read entry by entry in step with the walk (both are in pre-order) by the
// one tree archive reader (chunkio/tree_reader.h: windows of metadata
// chunks on the fetch pipeline), and its payload index, whose chunks
// unchanged files reuse.
class PreviousTree {
 public:
  static std::unique_ptr<PreviousTree> Open(const datastore::Datastore& store,
                                            const DedupBase& base, const std::string& name,
                                            Logger& log) {
    const index::ArchiveEntry* entry = base.Find(name, index::ArchiveKind::kTree);
    if (entry == nullptr) return nullptr;
    auto crypt = store.CryptFor(base.manifest());
    auto indexes = crypt.ok() ? store.ReadTreeIndexes(base.snapshot(), *entry)
                              : Result<datastore::Datastore::TreeIndexes>(crypt.status());
    if (!indexes.ok()) {
      log.Warn("cannot use {} of {} as base: {}", name, base.snapshot().ToString(),
               indexes.status().ToString());
      return nullptr;
    }
    return std::unique_ptr<PreviousTree>(new PreviousTree(
        chunkio::TreeArchiveReader::FromIndexes(
            store.source(), std::move(*indexes), *crypt,
            fmt::format("archive {} of {}", name, base.snapshot().ToString())),
        log));
  }

  const index::DynamicIndex& data() const { return reader_->data_index(); }
  const index::DynamicIndex& meta() const { return reader_->meta_index(); }

  // The previous regular-file entry at `path`, or null. Calls must come in
  // pre-order (the walk's order); the stream is read forward only.
  const Entry* Seek(std::string_view path) {
    while (!failed_) {
      if (!cur_) {
        auto next = reader_->Next();
        if (!next.ok()) {
          log_.Warn("previous snapshot: {}; reading every remaining file again",
                    next.status().ToString());
          failed_ = true;
          return nullptr;
        }
        if (!next->has_value()) {
          failed_ = true;  // exhausted
          return nullptr;
        }
        cur_ = std::move(**next);
      }
      int c = tree::CompareTreePaths(cur_->path, path);
      if (c > 0) return nullptr;
      if (c == 0) return cur_->kind == EntryKind::kFile ? &*cur_ : nullptr;
      cur_.reset();
    }
    return nullptr;
  }

 private:
  PreviousTree(std::unique_ptr<chunkio::TreeArchiveReader> reader, Logger& log)
      : reader_(std::move(reader)), log_(log) {}

  std::unique_ptr<chunkio::TreeArchiveReader> reader_;
  Logger& log_;
  std::optional<Entry> cur_;
  bool failed_ = false;
};

// What the walker hands the chunker, in stream order.
struct WalkItem {
  enum class Type { kBeginDir, kEndDir, kEntry } type = Type::kEntry;
  Entry entry;
  std::unique_ptr<ReadableFile> file;  // a regular file to read
  struct stat st {};      // as walked, for change detection
  bool reuse = false;     // unchanged: reuse the previous payload range
  uint64_t old_offset = 0;
};

// A chunk on its way to the CPU workers.
struct ChunkWork {
  index::DynamicEntry* slot = nullptr;  // where its digest goes
  Bytes data;
  bool payload = true;
};

// The whole job: walker thread -> chunker (caller's thread) -> CPU workers.
class TreeJob {
 public:
  TreeJob(const datastore::Datastore& store, const TreeBackupOptions& options,
          std::unique_ptr<PreviousTree> prev, TreeStats* stats)
      : options_(options),
        env_(options.env != nullptr ? *options.env : store.env()),
        log_(*options.logger),
        prev_(std::move(prev)),
        stats_(*stats),
        workers_(options.workers > 0
                     ? options.workers
                     : std::max(1, static_cast<int>(std::thread::hardware_concurrency()))),
        walk_queue_(kWalkQueue),
        chunk_queue_(static_cast<size_t>(workers_) * 2),
        pool_(static_cast<size_t>(workers_) * 2 + 4),
        encoder_([this](ByteSpan piece) { return AppendMeta(piece); }),
        meter_(pipeline::MeterOf(options.progress)),
        known_(KnownIds(prev_.get())),
        writer_(store.sink(), {.crypt = store.key(), .known = &known_, .meter = meter_}) {}

  Status Run(const std::string& source_dir, index::DynamicIndex* meta, index::DynamicIndex* data) {
    RaiseFileLimit();
    auto info = env_.Stat(source_dir);
    if (!info.ok()) return info.status().WithContext(fmt::format("cannot back up {}", source_dir));
    if (!info->is_dir) {
      return InvalidArgumentError(fmt::format(
          "{} is not a directory; a .tree archive backs up a directory (use NAME.img for a "
          "file or device)",
          source_dir));
    }
    CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<Dir> root, env_.OpenDir(source_dir));
    CAIRN_ASSIGN_OR_RETURN(struct stat root_st, root->Lstat(""));
    CAIRN_ASSIGN_OR_RETURN(Entry root_entry,
                           tree::CaptureEntry(*root, "", "", root_st, options_.xattrs));
    root_entry.name.clear();
    root_entry.path.clear();

    pipeline::WorkerGroup group([this] {
      walk_queue_.Cancel();
      chunk_queue_.Cancel();
    });
    group.Start(1, [&](int) -> Status {
      Status s = WalkDir(*root, root_entry, root_st.st_dev, 0);
      walk_queue_.Close();
      return s;
    });
    group.Start(workers_, [this](int) { return HashWorker(); });
    Status s = Chunk();
    if (!s.ok()) group.Fail(s);
    chunk_queue_.Close();
    CAIRN_RETURN_IF_ERROR(group.Wait());

    *data = index::DynamicIndex(std::vector<index::DynamicEntry>(data_.entries.begin(),
                                                                 data_.entries.end()));
    *meta = index::DynamicIndex(std::vector<index::DynamicEntry>(meta_.entries.begin(),
                                                                 meta_.entries.end()));
    stats_.chunks = data_.entries.size() + meta_.entries.size();
    const ChunkWriterStats written = writer_.stats();
    stats_.new_chunks = written.new_chunks;
    stats_.new_bytes = written.new_bytes;
    stats_.stored_bytes = written.stored_bytes;
    stats_.meta_bytes = meta->size();
    stats_.padding_bytes = injected_bytes_ - std::min(injected_bytes_, stats_.reused_bytes);
    return Status::Ok();
  }

 private:
  // One stream being cut into chunks (payload or metadata).
  struct Stream {
    explicit Stream(bool is_payload) : payload(is_payload) {}
    bool payload;
    index::Chunker chunker;
    Bytes cur;         // bytes of the unfinished chunk
    uint64_t end = 0;  // stream offset where `cur` starts
    std::deque<index::DynamicEntry> entries;  // references stay valid on push_back
    uint64_t pos() const { return end + cur.size(); }
  };

  static DigestSet KnownIds(const PreviousTree* prev) {
    DigestSet known;
    if (prev == nullptr) return known;
    for (const auto& e : prev->data().entries()) known.insert(e.digest);
    for (const auto& e : prev->meta().entries()) known.insert(e.digest);
    return known;
  }

  static void RaiseFileLimit() {
    struct rlimit rl {};
    if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
      rl.rlim_cur = rl.rlim_max;
      ::setrlimit(RLIMIT_NOFILE, &rl);
    }
  }

  bool Excluded(const std::string& path, const std::string& name) const {
    for (const auto& p : options_.excludes) {
      if (p.find('/') != std::string::npos) {
        std::string_view pat = p;
        while (pat.starts_with('/')) pat.remove_prefix(1);
        std::string anchored(pat);
        if (!anchored.empty() && anchored.back() == '/') anchored.pop_back();
        if (::fnmatch(anchored.c_str(), path.c_str(), FNM_PATHNAME) == 0) return true;
      } else if (::fnmatch(p.c_str(), name.c_str(), 0) == 0) {
        return true;
      }
    }
    return false;
  }

  void Skip(const std::string& what) {
    log_.Warn("{}", what);
    skipped_.fetch_add(1, std::memory_order_relaxed);
  }

  bool Push(WalkItem item) { return walk_queue_.Push(std::move(item)); }

  Status Cancelled() { return CancelledError("tree walk stopped"); }

  // ---- walker thread ----

  // Entry names of `dir`, sorted (the order of the metadata stream).
  static Result<std::vector<std::string>> ReadNames(Dir& dir) {
    CAIRN_ASSIGN_OR_RETURN(std::vector<std::string> names, dir.List());
    std::sort(names.begin(), names.end());
    return names;
  }

  Status WalkDir(Dir& dir, const Entry& dir_entry, dev_t dev, size_t depth) {
    if (depth >= tree::kMaxDepth) {
      return InvalidArgumentError(
          fmt::format("/{}: deeper than {} levels", dir_entry.path, tree::kMaxDepth));
    }
    WalkItem begin;
    begin.type = WalkItem::Type::kBeginDir;
    begin.entry = dir_entry;
    if (!Push(std::move(begin))) return Cancelled();
    auto names = [&] {
      pipeline::StageTimer busy(meter_, pipeline::Stage::kMetadata);
      return ReadNames(dir);
    }();
    if (!names.ok()) {
      Skip(fmt::format("skipped the contents of /{}: {}", dir_entry.path,
                       names.status().message()));
      names = std::vector<std::string>();
    }
    for (const std::string& name : *names) {
      // The walk's own work (lstat, xattrs, the previous entry) is metadata;
      // its waits for the chunker (Push) and the subdirectories are not.
      std::optional<pipeline::StageTimer> busy(std::in_place, meter_, pipeline::Stage::kMetadata);
      std::string path = dir_entry.path.empty() ? name : dir_entry.path + "/" + name;
      if (name.size() > tree::kMaxNameLength || path.size() > tree::kMaxPathLength) {
        Skip(fmt::format("skipped /{}: name or path too long", path));
        continue;
      }
      if (Excluded(path, name)) continue;
      auto lstat = dir.Lstat(name);
      if (!lstat.ok()) {
        // NotFound: removed since the directory was read.
        if (lstat.status().code() != StatusCode::kNotFound) {
          Skip(fmt::format("skipped /{}: {}", path, lstat.status().message()));
        }
        continue;
      }
      const struct stat& st = *lstat;
      if (S_ISSOCK(st.st_mode)) {
        Skip(fmt::format("skipped socket /{}", path));
        continue;
      }
      auto captured = tree::CaptureEntry(dir, name, path, st, options_.xattrs);
      if (!captured.ok()) {
        Skip(fmt::format("skipped /{}: {}", path, captured.status().message()));
        continue;
      }
      Entry e = std::move(*captured);
      e.name = name;
      e.path = path;
      if (S_ISDIR(st.st_mode)) {
        dirs_.fetch_add(1, std::memory_order_relaxed);
        if (!options_.cross_filesystems && st.st_dev != dev) {
          log_.Info("not descending into /{}: another filesystem", path);
          WalkItem b;
          b.type = WalkItem::Type::kBeginDir;
          b.entry = std::move(e);
          WalkItem end;
          end.type = WalkItem::Type::kEndDir;
          busy.reset();
          if (!Push(std::move(b)) || !Push(std::move(end))) return Cancelled();
          continue;
        }
        auto sub = dir.OpenDir(name);
        if (!sub.ok()) {
          Skip(fmt::format("skipped directory /{}: {}", path, sub.status().message()));
          continue;
        }
        busy.reset();
        CAIRN_RETURN_IF_ERROR(WalkDir(**sub, e, st.st_dev, depth + 1));
        continue;
      }
      WalkItem item;
      item.st = st;
      if (S_ISREG(st.st_mode)) {
        if (st.st_nlink > 1) {
          auto key = std::make_pair(static_cast<uint64_t>(st.st_dev),
                                    static_cast<uint64_t>(st.st_ino));
          auto [it, first] = links_.try_emplace(key, path);
          if (!first) {
            Entry link = std::move(e);
            link.kind = EntryKind::kHardlink;
            link.link_target = it->second;
            link.size = 0;
            item.entry = std::move(link);
            busy.reset();
            if (!Push(std::move(item))) return Cancelled();
            continue;
          }
          e.linked = true;
        }
        e.inode = st.st_ino;
        e.ctime_ns = Nanos(st.st_ctim);
        const Entry* old = prev_ ? prev_->Seek(path) : nullptr;
        if (old != nullptr && old->size == static_cast<uint64_t>(st.st_size) &&
            old->mtime_ns == e.mtime_ns && old->ctime_ns == e.ctime_ns &&
            old->inode == e.inode && old->size > 0) {
          item.reuse = true;
          item.old_offset = old->payload_offset;
        } else if (st.st_size > 0) {
          // Unreadable (EACCES, ...): a warning and the file skipped.
          auto file = dir.OpenFile(name);
          if (!file.ok()) {
            Skip(fmt::format("skipped /{}: {}", path, file.status().message()));
            continue;
          }
          item.file = std::move(*file);
        }
      }
      item.entry = std::move(e);
      busy.reset();
      if (!Push(std::move(item))) return Cancelled();
    }
    WalkItem end;
    end.type = WalkItem::Type::kEndDir;
    if (!Push(std::move(end))) return Cancelled();
    return Status::Ok();
  }

  // ---- chunker (caller's thread) ----

  Status Chunk() {
    while (auto item = walk_queue_.Pop()) {
      switch (item->type) {
        case WalkItem::Type::kBeginDir:
          stats_.entries++;
          CAIRN_RETURN_IF_ERROR(encoder_.BeginDirectory(item->entry));
          break;
        case WalkItem::Type::kEndDir:
          CAIRN_RETURN_IF_ERROR(encoder_.EndDirectory());
          break;
        case WalkItem::Type::kEntry:
          stats_.entries++;
          if (item->entry.kind == EntryKind::kFile) {
            CAIRN_RETURN_IF_ERROR(AddFile(*item));
          }
          CAIRN_RETURN_IF_ERROR(encoder_.Add(item->entry));
          break;
      }
    }
    CAIRN_RETURN_IF_ERROR(encoder_.Finish());
    CAIRN_RETURN_IF_ERROR(Cut(data_));
    CAIRN_RETURN_IF_ERROR(Cut(meta_));
    stats_.dirs = dirs_ + 1;
    stats_.skipped = skipped_;
    return Status::Ok();
  }

  Status AddFile(WalkItem& item) {
    Entry& e = item.entry;
    stats_.files++;
    if (item.reuse) {
      CAIRN_RETURN_IF_ERROR(Reuse(e, item.old_offset));
      last_file_end_ = e.payload_offset + e.size;
      return Status::Ok();
    }
    if (item.file == nullptr) {  // empty: where the previous file ended (offsets never go back)
      e.size = 0;
      e.payload_offset = last_file_end_;
      return Status::Ok();
    }
    e.payload_offset = data_.pos();
    const uint64_t want = static_cast<uint64_t>(item.st.st_size);
    uint64_t done = 0;
    bool changed = false;
    while (done < want) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(kReadSize, want - done));
      size_t old = data_.cur.size();
      data_.cur.resize(old + n);
      Result<size_t> got = [&] {
        pipeline::StageTimer reading(meter_, pipeline::Stage::kSourceReads);
        return item.file->ReadAt(done, std::span<uint8_t>(data_.cur.data() + old, n));
      }();
      if (!got.ok()) {
        // A file that fails while it is read (EIO) fails the backup: what
        // would be stored is not what the file holds.
        data_.cur.resize(old);
        return got.status().WithContext(fmt::format("reading /{}", e.path));
      }
      data_.cur.resize(old + *got);
      done += *got;
      CAIRN_RETURN_IF_ERROR(Scan(data_, old));
      if (*got < n) {
        changed = true;  // shorter than when it was walked
        break;
      }
    }
    auto after = item.file->Stat();
    if (after.ok() && (after->size != want || after->mtime_ns != Nanos(item.st.st_mtim) ||
                       after->ctime_ns != Nanos(item.st.st_ctim))) {
      changed = true;
    }
    if (changed) {
      stats_.changed++;
      log_.Warn("/{} changed while it was read; stored {} bytes as read", e.path, done);
    }
    item.file.reset();
    e.size = done;
    last_file_end_ = e.payload_offset + done;
    stats_.bytes += done;
    stats_.read_bytes += done;
    return Status::Ok();
  }

  // Unchanged since the previous snapshot: append the previous chunks that
  // hold the file (after a forced cut), unless the last ones appended
  // already hold its start.
  Status Reuse(Entry& e, uint64_t old_offset) {
    const index::DynamicIndex& old = prev_->data();
    if (old_offset + e.size > old.size() || old_offset + e.size < old_offset) {
      return DataLossError(fmt::format("previous snapshot: /{} lies outside its payload", e.path));
    }
    size_t first = old.FindChunk(old_offset);
    size_t last = old.FindChunk(old_offset + e.size - 1);
    if (data_.cur.empty() && last_injected_ != kNone && first == last_injected_) {
      e.payload_offset = last_injected_start_ + (old_offset - old.ChunkStart(first));
      first++;
    } else {
      CAIRN_RETURN_IF_ERROR(Cut(data_));
      e.payload_offset = data_.end + (old_offset - old.ChunkStart(first));
    }
    for (size_t i = first; i <= last; ++i) {
      uint32_t len = old.ChunkLength(i);
      last_injected_start_ = data_.end;
      data_.end += len;
      data_.entries.push_back({data_.end, old.digest(i)});
      injected_bytes_ += len;
    }
    last_injected_ = last;
    stats_.reused_files++;
    stats_.reused_bytes += e.size;
    stats_.bytes += e.size;
    if (options_.progress != nullptr) options_.progress->Add(e.size);
    return Status::Ok();
  }

  Status AppendMeta(ByteSpan piece) {
    size_t old = meta_.cur.size();
    meta_.cur.insert(meta_.cur.end(), piece.begin(), piece.end());
    return Scan(meta_, old);
  }

  // Looks for cuts in s.cur[from, end): every cut sends a chunk on.
  Status Scan(Stream& s, size_t from) {
    if (s.payload) last_injected_ = kNone;
    while (from < s.cur.size()) {
      size_t cut;
      {
        // The rolling hash that finds cuts: the chunker thread's CPU work.
        pipeline::StageTimer hashing(meter_, pipeline::Stage::kHash);
        cut = s.chunker.FindCut(ByteSpan(s.cur).subspan(from));
      }
      if (cut == 0) break;
      size_t chunk_end = from + cut;
      Bytes rest = pool_.Take();
      rest.assign(s.cur.begin() + static_cast<std::ptrdiff_t>(chunk_end), s.cur.end());
      s.cur.resize(chunk_end);
      CAIRN_RETURN_IF_ERROR(Send(s));
      s.cur = std::move(rest);
      from = 0;
    }
    return Status::Ok();
  }

  // Ends the current chunk of `s` here (a forced cut).
  Status Cut(Stream& s) {
    if (!s.cur.empty()) CAIRN_RETURN_IF_ERROR(Send(s));
    s.chunker.Reset();
    return Status::Ok();
  }

  // Sends s.cur as the next chunk of `s`; s.cur is a fresh buffer after.
  Status Send(Stream& s) {
    s.end += s.cur.size();
    s.entries.push_back({s.end, {}});
    ChunkWork work{&s.entries.back(), std::move(s.cur), s.payload};
    s.cur = pool_.Take();
    s.cur.clear();
    if (!chunk_queue_.Push(std::move(work))) return Cancelled();
    return Status::Ok();
  }

  // ---- CPU workers ----

  Status HashWorker() {
    // This worker's stage times count 1/workers each (stage_meter.h).
    pipeline::Lanes lanes(workers_);
    pipeline::CpuWaitScope cpu_wait(meter_);
    for (;;) {
      std::optional<ChunkWork> work;
      {
        pipeline::StageTimer wait(meter_, pipeline::Stage::kReadWait);
        work = chunk_queue_.Pop();
      }
      if (!work) break;
      CAIRN_ASSIGN_OR_RETURN(work->slot->digest, writer_.Store(work->data));
      if (work->payload && options_.progress != nullptr) options_.progress->Add(work->data.size());
      pool_.Give(std::move(work->data));
    }
    return Status::Ok();
  }

  static constexpr size_t kNone = ~size_t{0};

  const TreeBackupOptions& options_;
  Env& env_;
  Logger& log_;
  std::unique_ptr<PreviousTree> prev_;  // walker thread only (Seek)
  TreeStats& stats_;                    // chunker thread, then Run
  const int workers_;
  pipeline::BoundedQueue<WalkItem> walk_queue_;
  pipeline::BoundedQueue<ChunkWork> chunk_queue_;
  pipeline::BufferPool pool_;

  // Walker thread.
  std::map<std::pair<uint64_t, uint64_t>, std::string> links_;  // (dev, ino) -> first path
  std::atomic<uint64_t> dirs_{0}, skipped_{0};

  // Chunker thread.
  Stream data_{true};
  Stream meta_{false};
  tree::TreeEncoder encoder_;
  size_t last_injected_ = kNone;  // previous chunk appended last, while nothing followed it
  uint64_t last_injected_start_ = 0;
  uint64_t injected_bytes_ = 0;
  uint64_t last_file_end_ = 0;  // payload end of the last file entry

  // Workers.
  pipeline::StageMeter* const meter_;  // null when there is no progress
  const DigestSet known_;              // every id of the base's two indexes
  ChunkWriter writer_;
};

}  // namespace

Status BackupTree(const datastore::Datastore& store, datastore::SnapshotWriter& writer,
                  const DedupBase* base, const std::string& name,
                  const std::string& source_dir, const TreeBackupOptions& options,
                  TreeStats* stats) {
  std::unique_ptr<PreviousTree> previous;
  if (base != nullptr) previous = PreviousTree::Open(store, *base, name, *options.logger);
  if (options.progress != nullptr) options.progress->StartPhase("backup", 0);
  TreeJob job(store, options, std::move(previous), stats);
  index::DynamicIndex meta;
  index::DynamicIndex data;
  CAIRN_RETURN_IF_ERROR(job.Run(source_dir, &meta, &data));
  return writer.AddTree(name, meta, data);
}

}  // namespace cairn::backup
