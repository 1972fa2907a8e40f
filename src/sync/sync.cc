// RunSync (sync.h): per snapshot, read it as stored, open the DST target,
// copy the missing chunks through the fetch pipeline, write the files and
// commit; then, with remove_vanished, forget what SRC no longer has.
#include "sync/sync.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "base/mutex.h"
#include "base/rate_limiter.h"
#include "blob/blob.h"
#include "chunkio/chunk_read.h"
#include "datastore/snapshot_writer.h"
#include "maintenance/prune.h"
#include "pipeline/concurrency_controller.h"
#include "pipeline/fetch_pipeline.h"
#include "pipeline/stage_meter.h"
#include "pipeline/worker_group.h"
#include "sync/sync_plan.h"

namespace cairn::sync {
namespace {

using datastore::Datastore;
using datastore::GroupRef;
using datastore::SnapshotRef;
using detail::ChunkRef;
using detail::DisplayName;
using detail::IdSet;
using detail::SnapshotFiles;

// Checks a chunk that arrived from SRC before DST stores it: the blob's CRC
// and header, its mode against its snapshot's, and a plain chunk's content
// against its id (decompressed and hashed; an encrypted one's content only
// the key could prove).
Status CheckArrived(ByteSpan stored, const ChunkRef& chunk, bool encrypted, ReadBuffer* scratch) {
  auto header = blob::Check(stored);
  if (!header.ok()) return header.status();
  bool chunk_encrypted = header->encryption != blob::Encryption::kNone;
  if (chunk_encrypted != encrypted) {
    return DataLossError(fmt::format("chunk {} is {}encrypted, but its snapshot is {}",
                                     crypto::DigestHex(chunk.id), chunk_encrypted ? "" : "not ",
                                     encrypted ? "encrypted" : "not"));
  }
  if (encrypted) return Status::Ok();
  return chunkio::DecodeCheckedChunk(stored, chunk.id, chunk.length, scratch, nullptr).status();
}

// DST is a server: its sink knows only the current session's uploads, and
// the session may reference only those and its base's chunks.
bool IsServer(const Datastore& store) {
  return store.is_remote() && !store.chunks_in_object_store();
}

// What DST holds of a group, as far as this run knows without asking: its
// dedup base and that base's chunk ids.
struct GroupState {
  std::optional<SnapshotRef> base;
  IdSet known;
};

// Reads in flight over every group's pipeline, held to the one
// controller's limit: each pipeline's I/O stage follows the same limit, so
// without this, G groups at once would read G times as many. Cheap when
// only one pipeline runs (a slot is always free).
class ReadSlots {
 public:
  // Waits for a free slot and takes it.
  void Acquire(const pipeline::ConcurrencyController& controller) {
    MutexLock lock(mu_);
    while (in_flight_ >= controller.limit()) freed_.Wait(mu_);
    ++in_flight_;
  }
  // Gives a slot back (short lock: a source's event loop may call it).
  void Release() {
    {
      MutexLock lock(mu_);
      --in_flight_;
    }
    freed_.NotifyOne();
  }

  // A slot held for a scope (a blocking read).
  class Slot {
   public:
    Slot(ReadSlots& slots, const pipeline::ConcurrencyController& controller) : slots_(slots) {
      slots_.Acquire(controller);
    }
    ~Slot() { slots_.Release(); }
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;

   private:
    ReadSlots& slots_;
  };

 private:
  Mutex mu_;
  CondVar freed_;
  int in_flight_ GUARDED_BY(mu_) = 0;
};

class Syncer {
 public:
  Syncer(const Datastore& src, const Datastore& dst, const SyncOptions& options)
      : src_(src),
        dst_(dst),
        options_(options),
        source_(options.source != nullptr ? *options.source : src.source()),
        dst_is_server_(IsServer(dst)),
        copts_(pipeline::ConcurrencyController::Options::ForJobs(
            options.jobs, source_.Traits().initial_reads_in_flight,
            source_.Traits().max_reads_in_flight)),
        controller_(copts_) {
    if (options.limit_rate > 0) limiter_ = std::make_unique<RateLimiter>(options.limit_rate);
  }

  Result<SyncReport> Run() {
    const int64_t start = src_.env().NowMonotonicNanos();
    if (options_.remove_vanished && dst_is_server_ && !options_.forget_on_server) {
      return FailedPreconditionError(
          "--remove-vanished towards a server needs a way to forget there (SyncOptions::"
          "forget_on_server)");
    }
    if (options_.resync_corrupt && dst_is_server_ && !options_.begin_repair_on_server) {
      return FailedPreconditionError(
          "--resync-corrupt towards a server needs a repair session there (SyncOptions::"
          "begin_repair_on_server)");
    }
    if (options_.target_ns != options_.ns && dst_is_server_) {
      return FailedPreconditionError(
          "a namespace mapping (--target-ns) needs a destination this client writes itself (a "
          "path or s3://): a server takes a snapshot only in the namespace its manifest names");
    }
    CAIRN_ASSIGN_OR_RETURN(detail::Selection sel, detail::Select(src_, options_));
    CAIRN_ASSIGN_OR_RETURN(dst_all_, dst_.ListAllSnapshots());
    for (const SnapshotRef& s : dst_all_) dst_names_.insert(s.RelDir());
    // The snapshots by group (each oldest first), groups in order.
    std::vector<std::vector<SnapshotRef>> groups;
    for (const SnapshotRef& snap : sel.snapshots) {
      if (groups.empty() || !(groups.back().back().group == snap.group)) groups.emplace_back();
      groups.back().push_back(snap);
    }
    // Groups run side by side (towards a path or an object store; a
    // server's chunk sink serves one session at a time), each on its own
    // fetch pipeline; the one controller bounds their reads together
    // (ReadSlots). A dry run stays in order: it changes nothing worth
    // the threads.
    const int lanes = dst_is_server_ || options_.dry_run
                          ? 1
                          : static_cast<int>(std::min<size_t>(groups.size(), kMaxGroupsAtOnce));
    parallel_ = lanes > 1;
    if (parallel_ && options_.progress != nullptr) options_.progress->StartPhase("sync", 0);
    std::atomic<size_t> next{0};
    auto lane = [&](int) -> Status {
      for (size_t g = next++; g < groups.size() && !failed_.load(); g = next++) {
        for (const SnapshotRef& snap : groups[g]) CAIRN_RETURN_IF_ERROR(SyncOne(snap));
      }
      return Status::Ok();
    };
    if (lanes <= 1) {
      // One lane runs here: a thread of its own only waits for a core
      // first (~0.1 s on a loaded machine, for nothing).
      CAIRN_RETURN_IF_ERROR(lane(0));
    } else {
      pipeline::WorkerGroup workers([this] { failed_.store(true); });
      workers.Start(lanes, lane);
      CAIRN_RETURN_IF_ERROR(workers.Wait());
    }
    if (parallel_) {
      // In the order of the selection, as a run in order would list them.
      std::map<std::string, size_t> order;
      for (size_t i = 0; i < sel.snapshots.size(); ++i) order[DisplayName(sel.snapshots[i])] = i;
      MutexLock lock(mu_);  // the lanes have ended: never contended
      std::stable_sort(report_.snapshots.begin(), report_.snapshots.end(),
                       [&](const SnapshotOutcome& a, const SnapshotOutcome& b) {
                         return order[a.name] < order[b.name];
                       });
    }
    if (options_.remove_vanished) CAIRN_RETURN_IF_ERROR(RemoveVanished(sel, dst_all_));
    MutexLock lock(mu_);
    report_.seconds = static_cast<double>(src_.env().NowMonotonicNanos() - start) / 1e9;
    return report_;
  }

 private:
  static constexpr size_t kMaxGroupsAtOnce = 4;

  bool Cancelled() const {
    return failed_.load() || (options_.cancel != nullptr && options_.cancel->load());
  }

  // One snapshot of the selection: copied, resynced or found present.
  Status SyncOne(const SnapshotRef& snap) {
    if (Cancelled()) return CancelledError("sync cancelled");
    const SnapshotRef to = detail::ToDst(snap, options_);
    CAIRN_RETURN_IF_ERROR(datastore::ValidateNamespace(to.group.ns)
                              .WithContext(fmt::format("{} mapped to namespace '{}'",
                                                       DisplayName(snap), to.group.ns)));
    if (dst_names_.count(to.RelDir())) {
      auto state = dst_.ReadVerifyState(to);
      if (options_.resync_corrupt && state &&
          state->outcome == datastore::VerifyOutcome::kFailed) {
        return Resync(snap, to);
      }
      MutexLock lock(mu_);
      report_.snapshots.push_back({DisplayName(snap), "present"});
      ++report_.present;
      return Status::Ok();
    }
    return CopySnapshot(snap, to, dst_all_);
  }

  // The group's state on DST, loaded on first use: its newest snapshot
  // there and that snapshot's chunks.
  GroupState& StateOf(const GroupRef& group, const std::vector<SnapshotRef>& dst_all) {
    std::string key = group.RelDir();
    MutexLock lock(mu_);
    auto it = groups_.find(key);
    if (it != groups_.end()) return it->second;
    // One group is synced by one thread: its entry is this thread's
    // once made (a map's nodes stay put).
    GroupState& st = groups_[key];
    lock.Unlock();
    for (const SnapshotRef& s : dst_all) {
      if (s.group == group && (!st.base || s.time > st.base->time)) st.base = s;
    }
    // As for a backup: a snapshot that failed verification is never a base
    // (its chunks may be quarantined), so every chunk is checked instead.
    if (st.base) {
      auto state = dst_.ReadVerifyState(*st.base);
      if (state && state->outcome == datastore::VerifyOutcome::kFailed) st.base.reset();
    }
    if (st.base) {
      auto files = detail::ReadSnapshotFiles(dst_, *st.base, false);
      if (files.ok()) {
        for (const ChunkRef& c : files->chunks) st.known.insert(c.id);
      } else {
        options_.logger->Warn(
            "{}: not used as the dedup base on {} ({}); its chunks are sent "
            "again where the destination cannot be asked",
            DisplayName(*st.base), dst_.DisplayName(), files.status().ToString());
        st.base.reset();
      }
    }
    return st;
  }

  // `snap` on SRC becomes `to` on DST (the same name unless a namespace is mapped).
  Status CopySnapshot(const SnapshotRef& snap, const SnapshotRef& to,
                      const std::vector<SnapshotRef>& dst_all) {
    const int64_t start = src_.env().NowMonotonicNanos();
    // Held as a restore holds it: a forget on SRC (and gc after it) waits
    // until the copy is done. A server's mirror has the file to lock, too.
    auto src_lock = src_.LockSnapshotShared(snap);
    Result<SnapshotFiles> files = src_lock.ok()
                                      ? detail::ReadSnapshotFiles(src_, snap, !options_.dry_run)
                                      : Result<SnapshotFiles>(src_lock.status());
    if (!files.ok()) {
      if (files.status().code() == StatusCode::kNotFound) {
        options_.logger->Warn("{}: gone from {} since the listing; skipped", DisplayName(snap),
                              src_.DisplayName());
        return Status::Ok();
      }
      return files.status();
    }
    GroupState& group = StateOf(to.group, dst_all);
    // Candidates: not in the base, not copied by this run already.
    std::vector<ChunkRef> todo;
    SnapshotOutcome out{DisplayName(snap), options_.dry_run ? "would copy" : "copied"};
    for (const ChunkRef& c : files->chunks) {
      if (group.known.count(c.id) || (!dst_is_server_ && CopiedBefore(c.id))) {
        ++out.chunks_skipped;
      } else {
        todo.push_back(c);
      }
    }
    if (options_.dry_run) {
      for (const ChunkRef& c : todo) {
        bool has = false;
        if (!dst_is_server_) {
          CAIRN_ASSIGN_OR_RETURN(has, dst_.sink().Contains(c.id));
        }
        if (has) {
          ++out.chunks_skipped;
        } else {
          ++out.chunks_copied;
          out.raw_bytes += c.length;
          MutexLock lock(mu_);
          copied_.insert(c.id);
        }
      }
    } else {
      CAIRN_RETURN_IF_ERROR(
          Commit(snap, to, *files, group, todo, &out)
              .WithContext(fmt::format("sync of {} to {}", DisplayName(snap), dst_.DisplayName())));
      // This snapshot is the group's base from now on.
      group.base = to;
      group.known.clear();
      for (const ChunkRef& c : files->chunks) group.known.insert(c.id);
      MutexLock lock(mu_);
      ++report_.copied;
    }
    out.seconds = static_cast<double>(src_.env().NowMonotonicNanos() - start) / 1e9;
    Account(std::move(out));
    return Status::Ok();
  }

  // A snapshot DST has and whose last verify there failed: every chunk of
  // it that DST lacks (verify quarantined the bad ones) is copied again.
  // Nothing else changes: the next verify on DST judges the result.
  Status Resync(const SnapshotRef& snap, const SnapshotRef& to) {
    const int64_t start = src_.env().NowMonotonicNanos();
    auto src_lock = src_.LockSnapshotShared(snap);
    if (!src_lock.ok()) return src_lock.status().WithContext("resync: " + DisplayName(snap));
    CAIRN_ASSIGN_OR_RETURN(SnapshotFiles files, detail::ReadSnapshotFiles(src_, snap, false));
    CAIRN_ASSIGN_OR_RETURN(index::Manifest theirs, dst_.ReadManifest(to));
    if (theirs.signed_content != files.manifest.signed_content) {
      return FailedPreconditionError(
          fmt::format("{} differs between {} and {} (not the same snapshot): not resynced",
                      DisplayName(snap), src_.DisplayName(), dst_.DisplayName()));
    }
    SnapshotOutcome out{DisplayName(snap), options_.dry_run ? "would resync" : "resynced"};
    if (options_.dry_run) {
      for (const ChunkRef& c : files.chunks) {
        bool has = false;
        if (!dst_is_server_) {
          CAIRN_ASSIGN_OR_RETURN(has, dst_.sink().Contains(c.id));
        }
        ++(has ? out.chunks_skipped : out.chunks_copied);
        if (!has) out.raw_bytes += c.length;
      }
    } else if (dst_is_server_) {
      // The server cannot be asked which chunks it lacks: every chunk goes,
      // within a repair session, and the server keeps its valid copies.
      auto repair = options_.begin_repair_on_server(to);
      if (!repair.ok()) {
        return repair.status().WithContext(
            fmt::format("resync of {} on {}", DisplayName(to), dst_.DisplayName()));
      }
      CAIRN_RETURN_IF_ERROR(CopyChunks(files.chunks, files.manifest.encrypted, &out));
      CAIRN_RETURN_IF_ERROR(dst_.sink().Flush());
    } else {
      CAIRN_RETURN_IF_ERROR(CopyChunks(files.chunks, files.manifest.encrypted, &out));
      CAIRN_RETURN_IF_ERROR(dst_.sink().Flush());
    }
    out.seconds = static_cast<double>(src_.env().NowMonotonicNanos() - start) / 1e9;
    Account(std::move(out));
    MutexLock lock(mu_);
    ++report_.resynced;
    return Status::Ok();
  }

  bool CopiedBefore(const crypto::Digest& id) {
    MutexLock lock(mu_);
    return copied_.count(id) > 0;
  }

  void Account(SnapshotOutcome out) {
    MutexLock lock(mu_);
    options_.logger->Debug("{} {}: {} chunks copied ({:.1f} MiB stored), {} present", out.action,
                           out.name, out.chunks_copied, out.stored_bytes / 1048576.0,
                           out.chunks_skipped);
    report_.chunks_copied += out.chunks_copied;
    report_.chunks_skipped += out.chunks_skipped;
    report_.stored_bytes += out.stored_bytes;
    report_.raw_bytes += out.raw_bytes;
    report_.snapshots.push_back(std::move(out));
  }

  Status Commit(const SnapshotRef& snap, const SnapshotRef& to, const SnapshotFiles& files,
                const GroupState& group, const std::vector<ChunkRef>& todo,
                SnapshotOutcome* out) {
    std::unique_ptr<datastore::SnapshotTarget> target;
    std::unique_ptr<FileLock> base_lock;
    if (dst_.remote() != nullptr) {
      CAIRN_ASSIGN_OR_RETURN(target, dst_.remote()->BeginSnapshot(to));
    } else {
      CAIRN_ASSIGN_OR_RETURN(target, datastore::LocalSnapshotTarget::Begin(dst_, to));
    }
    if (group.base) {
      // The base stays while its chunks count as present (a forget and gc
      // meanwhile would take them); a server holds it for its session.
      if (!dst_is_server_) {
        auto lock = dst_.LockSnapshotShared(*group.base);
        if (!lock.ok()) return lock.status().WithContext("locking the dedup base");
        base_lock = std::move(lock).value();
      }
      CAIRN_RETURN_IF_ERROR(target->UseBase(*group.base));
    }
    CAIRN_RETURN_IF_ERROR(CopyChunks(todo, files.manifest.encrypted, out));
    for (const auto& [name, data] : files.files)
      CAIRN_RETURN_IF_ERROR(target->WriteFile(name, data));
    if (!dst_is_server_) {
      CAIRN_RETURN_IF_ERROR(WriteExtras(snap, *target));
    } else if (Status m = target->WriteFile(kSyncMarkerFileName, AsBytes(MarkerText())); !m.ok()) {
      // A server older than the marker refuses it: the snapshot still
      // goes, only a later --remove-vanished will not know it as synced.
      if (m.code() != StatusCode::kInvalidArgument) return m;
      options_.logger->Warn("{}: {} keeps no sync marker ({}); --remove-vanished will not "
                            "remove it there",
                            DisplayName(snap), dst_.DisplayName(), m.ToString());
    }
    CAIRN_RETURN_IF_ERROR(target->Commit(files.manifest_stored));
    if (!dst_is_server_) {
      CopyOwner(snap.group, to.group);
    } else if (options_.set_on_server) {
      SetOnServer(snap);
    }
    return Status::Ok();
  }

  // Notes and (with keep_protected) protection of a snapshot just pushed,
  // through the server's API; a refusal (protection is the admin's) warns.
  void SetOnServer(const SnapshotRef& snap) {
    auto notes = maintenance::ReadNotes(src_, snap);
    auto prot = maintenance::IsProtected(src_, snap);
    bool protect = options_.keep_protected && prot.ok() && *prot;
    std::string text = notes.ok() ? *notes : std::string();
    if (text.empty() && !protect) return;
    Status s = options_.set_on_server(snap, text, protect);
    if (!s.ok()) {
      options_.logger->Warn("{} is on {}, but its notes or protection are not: {}",
                            DisplayName(snap), dst_.DisplayName(), s.ToString());
    }
  }

  // Notes, protection (when asked) and the marker, before the manifest, so
  // they appear with the snapshot.
  Status WriteExtras(const SnapshotRef& snap, datastore::SnapshotTarget& target) {
    auto notes = maintenance::ReadNotes(src_, snap);
    if (notes.ok() && !notes->empty()) {
      CAIRN_RETURN_IF_ERROR(target.WriteFile(datastore::kNotesFileName, AsBytes(*notes)));
    }
    if (options_.keep_protected) {
      auto prot = maintenance::IsProtected(src_, snap);
      if (prot.ok() && *prot) {
        CAIRN_RETURN_IF_ERROR(target.WriteFile(datastore::kProtectedFileName, ByteSpan()));
      }
    }
    return target.WriteFile(kSyncMarkerFileName, AsBytes(MarkerText()));
  }

  // The `.sync-source` marker of a snapshot this run commits.
  std::string MarkerText() const {
    nlohmann::json marker = {{"source", options_.source_name},
                             {"synced_unix", dst_.env().NowUnixSeconds()}};
    return marker.dump() + "\n";
  }

  // A group new on DST gets SRC's owner (a server's backup token), if any.
  void CopyOwner(const GroupRef& group, const GroupRef& dst_group) {
    static constexpr char kOwner[] = "owner";  // server/backup_session.h: kOwnerFileName
    const std::string to = JoinPath(dst_.GroupDir(dst_group), kOwner);
    if (dst_.env().Stat(to).ok()) return;
    auto owner = ReadWholeFile(src_.env(), JoinPath(src_.GroupDir(group), kOwner), 4096);
    if (!owner.ok()) return;
    Status s = WriteFileAtomic(dst_.env(), to, *owner);
    if (!s.ok())
      options_.logger->Warn("owner of {} not copied: {}", group.ToString(), s.ToString());
  }

  Status CopyChunks(const std::vector<ChunkRef>& todo, bool encrypted, SnapshotOutcome* out) {
    if (todo.empty()) return Status::Ok();
    std::vector<uint8_t> present(todo.size(), 0);
    std::atomic<uint64_t> copied{0}, skipped{0}, stored{0}, raw{0};
    uint64_t total = 0;
    for (const ChunkRef& c : todo) total += c.length;
    if (options_.progress != nullptr) {
      if (parallel_) {
        options_.progress->total_bytes.fetch_add(total, std::memory_order_relaxed);
      } else {
        options_.progress->StartPhase("sync", total);
      }
    }
    store::ChunkSink& sink = dst_.sink();
    // Where the time goes (the summary's bottleneck line): the pipeline
    // times source reads and the workers' waits; here the check on arrival
    // (decode) and DST's inserts (target writes).
    pipeline::StageMeter* meter = pipeline::MeterOf(options_.progress);
    const bool network = source_.Traits().medium == store::MediumKind::kNetwork;
    pipeline::FetchPipelineOptions popts;
    popts.controller = &controller_;
    popts.max_io_threads = copts_.max;
    popts.cpu_workers = options_.cpu_workers;
    popts.progress = options_.progress;
    // A chunk DST has is never fetched (a server is not asked: its sink
    // knows this session's uploads only).
    auto present_on_dst = [&](size_t i, ReadBuffer* data) -> Result<bool> {
      if (dst_is_server_) return false;
      CAIRN_ASSIGN_OR_RETURN(bool has, sink.Contains(todo[i].id));
      if (has) {
        present[i] = 1;
        data->Clear();
      }
      return has;
    };
    // A source whose reads do not block (an object store, a server) is read
    // without a pipeline thread per read, when DST's Contains is cheap
    // enough to ask on the one thread that issues the reads (a path; a
    // server is not asked). The rate limit then waits on the CPU workers,
    // never on the source's event loop.
    const bool async = source_.ReadsAsync() && (dst_is_server_ || dst_.remote() == nullptr);
    if (async) {
      pipeline::AsyncFetchFn read =
          chunkio::AsyncChunkReads(source_, [&](size_t i) { return todo[i].id; });
      popts.fetch_async = [&, read](size_t i, ReadBuffer* data, pipeline::FetchDoneFn done) {
        if (Cancelled()) return done(CancelledError("sync cancelled"));
        Result<bool> has = present_on_dst(i, data);
        if (!has.ok() || *has) return done(has.status());
        slots_.Acquire(controller_);
        read(i, data, [this, done = std::move(done)](Status s) {
          slots_.Release();
          done(std::move(s));
        });
      };
    }
    pipeline::FetchPipelineStats stats;
    Status s = pipeline::RunFetchPipeline(
        todo.size(),
        [&](size_t i, ReadBuffer* data) -> Status {
          if (Cancelled()) return CancelledError("sync cancelled");
          CAIRN_ASSIGN_OR_RETURN(bool has, present_on_dst(i, data));
          if (has) return Status::Ok();
          {
            ReadSlots::Slot slot(slots_, controller_);
            CAIRN_RETURN_IF_ERROR(chunkio::ReadStoredChunk(source_, todo[i].id, data));
          }
          if (limiter_) limiter_->Acquire(data->size());
          return Status::Ok();
        },
        [&](size_t i, ReadBuffer& data) -> Status {
          const ChunkRef& c = todo[i];
          if (options_.progress != nullptr) options_.progress->Add(c.length);
          if (present[i]) {
            skipped.fetch_add(1, std::memory_order_relaxed);
            return Status::Ok();
          }
          if (async && limiter_) limiter_->Acquire(data.size());
          thread_local ReadBuffer scratch;
          Status check = [&] {
            pipeline::StageTimer timer(meter, pipeline::Stage::kDecode);
            return CheckArrived(data, c, encrypted, &scratch);
          }();
          if (check.code() == StatusCode::kDataLoss && network) {
            // Bytes can be damaged on the way: judged only if a second read fails too.
            ReadBuffer again;
            if (chunkio::ReadStoredChunk(source_, c.id, &again).ok() &&
                CheckArrived(again, c, encrypted, &scratch).ok()) {
              data.Adopt(again.Release());
              check = Status::Ok();
            }
          }
          if (!check.ok()) {
            return check.WithContext(fmt::format("chunk {} from {} refused on arrival",
                                                 crypto::DigestHex(c.id),
                                                 source_.Traits().description));
          }
          {
            // Towards a path or an object store, the I/O stage asked
            // Contains already: the sink does not ask again. Into a path,
            // past the page cache, as an image restore writes: the copy
            // into the cache was most of a sync's kernel CPU and left the
            // commit's syncfs the writeback of it all.
            pipeline::StageTimer timer(meter, pipeline::Stage::kTargetWrites);
            Result<store::InsertResult> inserted =
                dst_is_server_             ? sink.Insert(c.id, data)
                : dst_.remote() == nullptr ? dst_.chunks().InsertAbsentDirect(c.id, data)
                                           : sink.InsertAbsent(c.id, data);
            CAIRN_RETURN_IF_ERROR(inserted.status());
          }
          copied.fetch_add(1, std::memory_order_relaxed);
          stored.fetch_add(data.size(), std::memory_order_relaxed);
          raw.fetch_add(c.length, std::memory_order_relaxed);
          return Status::Ok();
        },
        [&](size_t i) { return uint64_t{todo[i].length} * 2; }, popts, &stats);
    CAIRN_RETURN_IF_ERROR(s);
    MutexLock lock(mu_);
    report_.peak_reads_in_flight =
        std::max(report_.peak_reads_in_flight, stats.peak_reads_in_flight);
    out->chunks_copied += copied;
    out->chunks_skipped += skipped;
    out->stored_bytes += stored;
    out->raw_bytes += raw;
    if (!dst_is_server_) {
      for (size_t i = 0; i < todo.size(); ++i) copied_.insert(todo[i].id);
    }
    return Status::Ok();
  }

  // Forgets the DST snapshots of the covered groups that carry this
  // source's marker and that SRC no longer has; protected ones stay.
  Status RemoveVanished(const detail::Selection& sel, const std::vector<SnapshotRef>& dst_all) {
    std::set<std::string> on_src;
    for (const SnapshotRef& s : sel.src_all) {
      if (detail::InScope(s.group.ns, options_)) on_src.insert(detail::ToDst(s, options_).RelDir());
    }
    std::vector<GroupRef> groups;
    for (const GroupRef& g : sel.groups) groups.push_back(detail::ToDst(g, options_));
    for (const SnapshotRef& s : dst_all) {
      if (on_src.count(s.RelDir())) continue;
      if (std::find(groups.begin(), groups.end(), s.group) == groups.end()) continue;
      auto marker =
          ReadWholeFile(dst_.env(), JoinPath(dst_.SnapshotDir(s), kSyncMarkerFileName), 64 << 10);
      if (!marker.ok()) continue;  // not made by sync
      auto j = nlohmann::json::parse(AsStringView(*marker), nullptr, false);
      if (!j.is_object() || j.value("source", "") != options_.source_name) continue;
      auto prot = maintenance::IsProtected(dst_, s);
      if (prot.ok() && *prot) {
        options_.logger->Info("{} vanished from the source but is protected: kept", DisplayName(s));
        continue;
      }
      SnapshotOutcome out{DisplayName(s), options_.dry_run ? "would remove" : "removed"};
      if (!options_.dry_run) {
        // A server checks the token's right to forget, as for any forget.
        Status f = dst_is_server_ ? options_.forget_on_server(s)
                                  : maintenance::ForgetSnapshot(dst_, s);
        CAIRN_RETURN_IF_ERROR(f.WithContext(fmt::format(
            "--remove-vanished: forgetting {} on {}", DisplayName(s), dst_.DisplayName())));
      }
      options_.logger->Info("{} {}", out.action, out.name);
      MutexLock lock(mu_);
      report_.snapshots.push_back(std::move(out));
      ++report_.removed;
    }
    return Status::Ok();
  }

  const Datastore& src_;
  const Datastore& dst_;
  const SyncOptions& options_;
  store::ChunkSource& source_;
  const bool dst_is_server_;
  const pipeline::ConcurrencyController::Options copts_;
  pipeline::ConcurrencyController
      controller_;  // shared by all snapshots: what it learnt carries over
  std::unique_ptr<RateLimiter> limiter_;
  std::vector<SnapshotRef> dst_all_;   // set before the groups start
  std::set<std::string> dst_names_;    // set before the groups start
  bool parallel_ = false;              // groups run side by side
  std::atomic<bool> failed_{false};    // a group failed: the others stop
  ReadSlots slots_;
  Mutex mu_;
  std::map<std::string, GroupState> groups_ GUARDED_BY(mu_);  // insertion
  IdSet copied_ GUARDED_BY(mu_);  // chunks this run stored on DST (not towards a server)
  SyncReport report_ GUARDED_BY(mu_);
};

}  // namespace

nlohmann::json SyncReportJson(const SyncReport& r) {
  nlohmann::json snaps = nlohmann::json::array();
  for (const auto& s : r.snapshots) {
    snaps.push_back({{"snapshot", s.name},
                     {"action", s.action},
                     {"chunks_copied", s.chunks_copied},
                     {"chunks_skipped", s.chunks_skipped},
                     {"stored_bytes", s.stored_bytes},
                     {"raw_bytes", s.raw_bytes},
                     {"seconds", s.seconds}});
  }
  return {{"snapshots", snaps},
          {"copied", r.copied},
          {"present", r.present},
          {"removed", r.removed},
          {"resynced", r.resynced},
          {"chunks_copied", r.chunks_copied},
          {"chunks_skipped", r.chunks_skipped},
          {"stored_bytes", r.stored_bytes},
          {"raw_bytes", r.raw_bytes},
          {"seconds", r.seconds},
          {"mib_per_second", r.seconds > 0 ? r.raw_bytes / 1048576.0 / r.seconds : 0.0},
          {"peak_reads_in_flight", r.peak_reads_in_flight}};
}

std::vector<std::string> SyncReportLines(const SyncReport& r, bool dry_run) {
  std::vector<std::string> lines;
  for (const auto& s : r.snapshots) {
    if (s.action == "present") continue;
    if (s.action == "removed" || s.action == "would remove") {
      lines.push_back(fmt::format("{:<12} {}", s.action, s.name));
      continue;
    }
    lines.push_back(fmt::format("{:<12} {}  {} chunks ({}{}), {} present", s.action, s.name,
                                s.chunks_copied, HumanBytes(dry_run ? s.raw_bytes : s.stored_bytes),
                                dry_run ? " before compression" : "", s.chunks_skipped));
  }
  size_t copying = 0;
  for (const auto& s : r.snapshots) copying += s.action == "copied" || s.action == "would copy";
  std::string line = fmt::format(
      "{} {} snapshot(s), {} already there, {} {}; {} chunks {} ({} stored, {} raw), "
      "{} present; {:.1f} s",
      dry_run ? "would copy" : "copied", copying, r.present, r.removed,
      dry_run ? "to remove" : "removed", r.chunks_copied, dry_run ? "to copy" : "copied",
      HumanBytes(r.stored_bytes), HumanBytes(r.raw_bytes), r.chunks_skipped, r.seconds);
  if (r.resynced > 0)
    line += fmt::format("; {} snapshot(s) {}", r.resynced, dry_run ? "to resync" : "resynced");
  if (!dry_run && r.raw_bytes > 0 && r.seconds > 0) {
    line += fmt::format(", {:.0f} MiB/s", r.raw_bytes / 1048576.0 / r.seconds);
  }
  lines.push_back(std::move(line));
  return lines;
}

Result<SyncReport> RunSync(const Datastore& src, const Datastore& dst, const SyncOptions& options) {
  if (options.logger == nullptr) return InvalidArgumentError("sync: no logger");
  Syncer syncer(src, dst, options);
  return syncer.Run();
}

}  // namespace cairn::sync
