#include "restore/tree_restore.h"

#include <fnmatch.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <unordered_map>

#include <fmt/format.h>

#include "chunkio/tree_reader.h"
#include "pipeline/fetch_pipeline.h"
#include "tree/fs_meta.h"

namespace cairn::restore {
namespace {

using tree::Entry;
using tree::EntryKind;

// A batch of regular files is fetched and written by one pipeline run.
constexpr size_t kMaxBatchFiles = 512;
constexpr uint64_t kMaxBatchBytes = uint64_t{256} << 20;
// Descriptors left for the pipeline's reads and everything else.
constexpr size_t kReservedFds = 128;
constexpr size_t kMaxWarnings = 100;

size_t Depth(std::string_view path) {
  return path.empty() ? 0 : 1 + static_cast<size_t>(std::count(path.begin(), path.end(), '/'));
}

std::string_view BaseName(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// Raises the soft limit of open files to the hard one; returns the limit.
size_t RaiseFdLimit() {
  struct rlimit rl;
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return 1024;
  if (rl.rlim_cur < rl.rlim_max) {
    struct rlimit want = rl;
    want.rlim_cur = rl.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &want) == 0) rl = want;
  }
  return rl.rlim_cur == RLIM_INFINITY ? size_t{1} << 20 : static_cast<size_t>(rl.rlim_cur);
}

// Writes `data` at `offset` but for the file-aligned 4 KiB blocks of it that
// are all zeros: the file was created at its full size, so they read as
// zeros already, and left unwritten they stay holes.
Status WriteSkippingZeros(WritableFile& file, ByteSpan data, uint64_t offset) {
  constexpr uint64_t kBlock = 4096;
  size_t pos = 0, run = 0;
  bool in_run = false;
  while (pos < data.size()) {
    const size_t end =
        std::min<uint64_t>(data.size(), ((offset + pos) / kBlock + 1) * kBlock - offset);
    const bool zero = IsAllZero(data.subspan(pos, end - pos));
    if (!zero && !in_run) {
      run = pos;
      in_run = true;
    } else if (zero && in_run) {
      CAIRN_RETURN_IF_ERROR(file.WriteAt(offset + run, data.subspan(run, pos - run)));
      in_run = false;
    }
    pos = end;
  }
  return in_run ? file.WriteAt(offset + run, data.subspan(run)) : Status::Ok();
}

// Opens directory `rel` below `root` one component at a time, never
// following a symlink (O_NOFOLLOW only guards the last component of a path).
// Null when `rel` is empty: `root` itself.
Result<std::unique_ptr<Dir>> OpenDirBeneath(Dir& root, std::string_view rel) {
  std::unique_ptr<Dir> dir;
  while (!rel.empty()) {
    size_t slash = rel.find('/');
    CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<Dir> next,
                           (dir ? *dir : root).OpenDir(std::string(rel.substr(0, slash))));
    dir = std::move(next);
    rel = slash == std::string_view::npos ? std::string_view() : rel.substr(slash + 1);
  }
  return dir;
}

// --include: an entry is selected when a pattern matches its path, or (a
// pattern without '/') its name; the caller adds "or an ancestor is".
class Selector {
 public:
  explicit Selector(const std::vector<std::string>& includes) {
    for (std::string p : includes) {
      while (p.size() > 1 && p.back() == '/') p.pop_back();  // "etc/" is "etc"
      size_t lead = p.find_first_not_of('/');                // relative to the root
      p.erase(0, lead == std::string::npos ? p.size() : lead);
      patterns_.push_back(Pattern{std::move(p), false});
    }
  }
  bool all() const { return patterns_.empty(); }
  bool Matches(const Entry& e) {
    bool any = false;
    for (Pattern& p : patterns_) {
      bool has_slash = p.text.find('/') != std::string::npos;
      if (::fnmatch(p.text.c_str(), e.path.c_str(), FNM_PATHNAME) == 0 ||
          (!has_slash && ::fnmatch(p.text.c_str(), e.name.c_str(), 0) == 0)) {
        p.used = true;
        any = true;
      }
    }
    return any;
  }
  std::vector<std::string> Unused() const {
    std::vector<std::string> out;
    for (const Pattern& p : patterns_) {
      if (!p.used) out.push_back(p.text);
    }
    return out;
  }

 private:
  struct Pattern {
    std::string text;
    bool used;
  };
  std::vector<Pattern> patterns_;
};

// One directory on the path from the root to the current entry.
struct Frame {
  Entry entry;
  std::shared_ptr<Dir> dir;  // open once created (never when rehearsing)
  bool created = false;  // exists in the target (or would, when rehearsing)
  bool selected = false;  // it or an ancestor matched --include
};

// One regular file of the current batch: created at full size, filled by
// the batch's pipeline run, then given its metadata through its descriptor.
struct BatchFile {
  std::unique_ptr<WritableFile> file;  // null when rehearsing
  Entry entry;  // content: payload[entry.payload_offset, + entry.size)
};

// A slice of a chunk that belongs in a file.
struct Use {
  uint32_t file;          // index into the batch
  uint32_t chunk_offset;  // start of the slice in the chunk's plaintext
  uint32_t length;
  uint64_t file_offset;
};

struct Item {
  crypto::Digest id;
  uint32_t length;
  std::vector<Use> uses;
};

class TreeRestorer {
 public:
  TreeRestorer(Env& env, chunkio::TreeArchiveReader& reader, store::ChunkSource& source,
               const TreeRestoreOptions& options, TreeRestoreStats* stats)
      : env_(env), reader_(reader), source_(source), options_(options), stats_(*stats),
        selector_(options.includes), as_root_(::geteuid() == 0),
        controller_(chunkio::ReadConcurrency(source.Traits(), options.jobs)) {}

  // Restores into `root` (an open, empty directory; null when rehearsing).
  // Errors name the archive and the entry's path.
  Status Run(std::unique_ptr<Dir> root);

  const pipeline::ConcurrencyController& controller() const { return controller_; }

 private:
  Status OnEntry(Entry e);
  Status Finish();
  Status CreatePath();  // every frame of the stack not created yet
  Status AddFile(Entry e);
  Status AddHardlink(const Entry& e);
  Status AddSpecial(const Entry& e);
  Status FlushBatch();
  Status RunBatch(const std::vector<Item>& items);
  Status ApplyDirectoryMetadata();
  // Owner (as root), mode, xattrs, mtime (tree::ApplyMetadata), through
  // `file` or, when null, the directory `dir` itself.
  Status ApplyMetadata(WritableFile* file, Dir* dir, const Entry& e);
  void Warn(std::string message);

  bool rehearse() const { return options_.rehearse; }
  Dir& parent() const { return *stack_.back().dir; }
  void AddProgress(uint64_t bytes) {
    if (options_.progress != nullptr) options_.progress->Add(bytes);
  }

  Env& env_;
  chunkio::TreeArchiveReader& reader_;
  store::ChunkSource& source_;
  const TreeRestoreOptions& options_;
  TreeRestoreStats& stats_;
  Selector selector_;
  const bool as_root_;
  pipeline::ConcurrencyController controller_;  // one across batches: tuning carries over
  size_t max_fds_ = 1024;
  std::shared_ptr<Dir> root_;
  std::vector<Frame> stack_;
  // Every created directory in stream order; metadata applied at the end.
  std::vector<std::pair<std::string, Entry>> dirs_;
  // Files marked `linked`, by path: the hardlinks' targets. `where` is the
  // path the inode was restored at ("" while it has not been).
  struct Linked {
    Entry entry;
    std::string where;
  };
  std::unordered_map<std::string, Linked> linked_;
  std::vector<BatchFile> batch_;
  uint64_t batch_bytes_ = 0;
  bool selected_any_ = false;
  uint64_t dropped_warnings_ = 0;
};

Status TreeRestorer::Run(std::unique_ptr<Dir> root) {
  root_ = std::move(root);
  max_fds_ = RaiseFdLimit();
  if (options_.progress != nullptr) {
    options_.progress->StartPhase(rehearse() ? "rehearse" : "restore", reader_.data_index().size());
  }
  // The reader's errors name the archive already; the others get it here.
  while (true) {
    CAIRN_ASSIGN_OR_RETURN(std::optional<Entry> e, reader_.Next());
    if (!e.has_value()) break;
    Status s = OnEntry(std::move(*e));
    if (!s.ok()) return s.WithContext(reader_.description());
  }
  Status s = Finish();
  return s.ok() ? s : s.WithContext(reader_.description());
}

Status TreeRestorer::Finish() {
  CAIRN_RETURN_IF_ERROR(FlushBatch());
  if (!selector_.all() && !selected_any_) {
    return NotFoundError(fmt::format("no entry matches --include {}",
                                     fmt::join(options_.includes, ", --include ")));
  }
  for (const std::string& p : selector_.Unused()) {
    Warn(fmt::format("--include {} matched nothing", p));
  }
  while (stack_.size() > 1) stack_.pop_back();
  CAIRN_RETURN_IF_ERROR(ApplyDirectoryMetadata());
  if (!rehearse()) {
    pipeline::StageTimer timer(pipeline::MeterOf(options_.progress), pipeline::Stage::kTargetWrites);
    CAIRN_RETURN_IF_ERROR(env_.SyncFilesystem(root_->path()));
  }
  if (dropped_warnings_ > 0) {
    stats_.warnings.push_back(fmt::format("... and {} more warnings", dropped_warnings_));
  }
  return Status::Ok();
}

Status TreeRestorer::OnEntry(Entry e) {
  const size_t depth = Depth(e.path);
  if (depth == 0) {  // the root: the target directory itself
    Frame root{std::move(e), root_, true, selector_.all()};
    dirs_.emplace_back("", root.entry);
    ++stats_.dirs;
    ++stats_.entries;
    stack_.push_back(std::move(root));
    return Status::Ok();
  }
  if (stack_.empty() || depth > stack_.size()) {
    return DataLossError(fmt::format("entry {} outside any directory", e.path));
  }
  while (stack_.size() > depth) stack_.pop_back();
  const bool selected = stack_.back().selected || selector_.Matches(e);
  if (selected) selected_any_ = true;
  switch (e.kind) {
    case EntryKind::kDirectory:
      stack_.push_back(Frame{std::move(e), nullptr, false, selected});
      return selected ? CreatePath() : Status::Ok();
    case EntryKind::kFile:
      if (e.linked) linked_.emplace(e.path, Linked{e, selected ? e.path : ""});
      if (!selected) return Status::Ok();
      CAIRN_RETURN_IF_ERROR(CreatePath());
      return AddFile(std::move(e));
    case EntryKind::kHardlink:
      if (!selected) return Status::Ok();
      CAIRN_RETURN_IF_ERROR(CreatePath());
      return AddHardlink(e);
    default:
      if (!selected) return Status::Ok();
      CAIRN_RETURN_IF_ERROR(CreatePath());
      return AddSpecial(e);
  }
}

Status TreeRestorer::CreatePath() {
  for (size_t i = 1; i < stack_.size(); ++i) {
    Frame& f = stack_[i];
    if (f.created) continue;
    if (!rehearse()) {
      // Owner-only until the end, when the recorded mode is applied.
      Dir& up = *stack_[i - 1].dir;
      CAIRN_RETURN_IF_ERROR(up.CreateDir(f.entry.name, 0700));
      CAIRN_ASSIGN_OR_RETURN(f.dir, up.OpenDir(f.entry.name));
    }
    f.created = true;
    dirs_.emplace_back(f.entry.path, f.entry);
    ++stats_.dirs;
    ++stats_.entries;
  }
  return Status::Ok();
}

Status TreeRestorer::AddFile(Entry e) {
  if (e.payload_offset > reader_.data_index().size() ||
      e.size > reader_.data_index().size() - e.payload_offset) {
    return DataLossError(fmt::format("file {} lies outside the payload stream", e.path));
  }
  if (!batch_.empty() &&
      (batch_.size() >= kMaxBatchFiles || batch_bytes_ + e.size > kMaxBatchBytes ||
       batch_.size() + stack_.size() + kReservedFds >= max_fds_)) {
    CAIRN_RETURN_IF_ERROR(FlushBatch());
  }
  std::unique_ptr<WritableFile> file;
  if (!rehearse()) {
    CAIRN_ASSIGN_OR_RETURN(file, parent().CreateFile(e.name, 0600));
    // Full size first: what no chunk writes (zero chunks) stays a hole.
    if (e.size > 0) CAIRN_RETURN_IF_ERROR(file->Truncate(e.size));
  }
  ++stats_.files;
  ++stats_.entries;
  stats_.bytes += e.size;
  batch_bytes_ += e.size;
  batch_.push_back(BatchFile{std::move(file), std::move(e)});
  return Status::Ok();
}

Status TreeRestorer::AddHardlink(const Entry& e) {
  auto it = linked_.find(e.link_target);
  if (it == linked_.end()) {
    return DataLossError(
        fmt::format("hardlink {} names {}, not an earlier linked file", e.path, e.link_target));
  }
  Linked& target = it->second;
  if (target.where.empty()) {
    // The file it names was left out by --include: this name gets the
    // content, and later names of the same file link to it.
    Entry file = target.entry;
    file.name = e.name;
    file.path = e.path;
    target.where = e.path;
    return AddFile(std::move(file));
  }
  if (!rehearse()) {
    std::string_view where = target.where;
    std::string_view dir = where.substr(0, where.size() - BaseName(where).size());
    if (!dir.empty()) dir.remove_suffix(1);
    CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<Dir> from, OpenDirBeneath(*root_, dir));
    CAIRN_RETURN_IF_ERROR(
        parent().CreateHardlink(e.name, from ? *from : *root_, std::string(BaseName(where))));
  }
  ++stats_.hardlinks;
  ++stats_.entries;
  return Status::Ok();
}

Status TreeRestorer::AddSpecial(const Entry& e) {
  if (!rehearse()) {
    Status s = tree::CreateSpecial(parent(), e.name, e);
    const bool device = e.kind == EntryKind::kCharDevice || e.kind == EntryKind::kBlockDevice;
    if (device && s.code() == StatusCode::kPermissionDenied) {
      Warn(fmt::format("{}: device node not created: {}", e.path, s.message()));
      return Status::Ok();
    }
    CAIRN_RETURN_IF_ERROR(s);
    tree::ApplyOptions apply;
    apply.owner = as_root_;
    std::vector<std::string> warnings;
    CAIRN_RETURN_IF_ERROR(tree::ApplyMetadata(parent(), e.name, e, apply, &warnings));
    for (std::string& w : warnings) Warn(std::move(w));
  }
  ++(e.kind == EntryKind::kSymlink ? stats_.symlinks : stats_.specials);
  ++stats_.entries;
  return Status::Ok();
}

// Plans the batch: every distinct non-zero chunk its files need, with each
// slice it fills. Files come in payload order, so neighbouring small files
// share chunks; a chunk that straddles two batches is fetched by both
// (accepted: at most one chunk per batch boundary).
Status TreeRestorer::FlushBatch() {
  if (batch_.empty()) return Status::Ok();
  const index::DynamicIndex& idx = reader_.data_index();
  std::vector<Item> items;
  std::unordered_map<crypto::Digest, size_t, crypto::DigestHash> slot;
  for (uint32_t f = 0; f < batch_.size(); ++f) {
    const Entry& e = batch_[f].entry;
    if (e.size == 0) continue;
    const uint64_t begin = e.payload_offset, end = begin + e.size;
    for (size_t c = idx.FindChunk(begin); c < idx.chunk_count() && idx.ChunkStart(c) < end; ++c) {
      const uint64_t start = idx.ChunkStart(c);
      const uint32_t len = idx.ChunkLength(c);
      const uint64_t from = std::max(begin, start), to = std::min(end, start + len);
      if (reader_.IsZeroChunk(c)) {
        stats_.zero_bytes += to - from;
        AddProgress(to - from);
        continue;
      }
      Use use{f, static_cast<uint32_t>(from - start), static_cast<uint32_t>(to - from),
              from - begin};
      auto [it, fresh] = slot.try_emplace(idx.digest(c), items.size());
      if (!fresh && items[it->second].length == len) {
        items[it->second].uses.push_back(use);
        continue;
      }
      // New, or a second length for one id: an item of its own, which then
      // fails its length check (DataLoss) rather than writing past the chunk.
      items.push_back(Item{idx.digest(c), len, {use}});
    }
  }
  CAIRN_RETURN_IF_ERROR(RunBatch(items));
  for (const Item& item : items) {
    stats_.fetched_bytes += item.length;
    ++stats_.chunks;
  }
  pipeline::StageTimer timer(pipeline::MeterOf(options_.progress), pipeline::Stage::kMetadata);
  for (BatchFile& file : batch_) {
    if (rehearse()) continue;
    CAIRN_RETURN_IF_ERROR(ApplyMetadata(file.file.get(), nullptr, file.entry));
    CAIRN_RETURN_IF_ERROR(file.file->Close());
  }
  batch_.clear();
  batch_bytes_ = 0;
  return Status::Ok();
}

Status TreeRestorer::RunBatch(const std::vector<Item>& items) {
  if (items.empty()) return Status::Ok();  // empty files and holes only
  pipeline::FetchPipelineOptions popts =
      chunkio::ReadPipelineOptions(source_.Traits(), options_.jobs, &controller_);
  popts.cpu_workers = options_.cpu_workers;
  popts.max_bytes_in_flight = options_.max_bytes_in_flight;
  popts.progress = options_.progress;
  popts.fetch_async = chunkio::AsyncChunkReads(source_, [&](size_t k) { return items[k].id; });
  pipeline::FetchPipelineStats ps;
  return pipeline::RunFetchPipeline(
      items.size(),
      [&](size_t k, ReadBuffer* out) {
        return chunkio::ReadStoredChunk(source_, items[k].id, out);
      },
      [&](size_t k, ReadBuffer& data) -> Status {
        const Item& item = items[k];
        pipeline::StageMeter* meter = pipeline::MeterOf(options_.progress);
        auto plain = chunkio::CheckFetchedChunk(data, item.id, item.length, reader_.crypt(), meter);
        if (!plain.ok()) {
          return plain.status().WithContext(
              fmt::format("file {}", batch_[item.uses[0].file].entry.path));
        }
        for (const Use& use : item.uses) {
          ByteSpan slice = plain->subspan(use.chunk_offset, use.length);
          if (!rehearse()) {
            const BatchFile& file = batch_[use.file];
            pipeline::StageTimer timer(meter, pipeline::Stage::kTargetWrites);
            Status s = WriteSkippingZeros(*file.file, slice, use.file_offset);
            if (!s.ok()) return s.WithContext(file.entry.path);
          }
          AddProgress(use.length);
        }
        return Status::Ok();
      },
      // Stored and decoded copies may both be alive while a chunk is processed.
      [&](size_t k) { return uint64_t{items[k].length} * 2; }, popts, &ps);
}

Status TreeRestorer::ApplyMetadata(WritableFile* file, Dir* dir, const Entry& e) {
  tree::ApplyOptions apply;
  apply.owner = as_root_;
  std::vector<std::string> warnings;
  Status s = file != nullptr ? tree::ApplyMetadata(*file, e, apply, &warnings)
                             : tree::ApplyMetadata(*dir, "", e, apply, &warnings);
  for (std::string& w : warnings) Warn(std::move(w));
  return s;
}

// Deepest first: in reverse stream order every directory comes after all
// directories below it, so no later change touches a directory whose time
// (or read-only mode) is already set.
Status TreeRestorer::ApplyDirectoryMetadata() {
  if (rehearse()) return Status::Ok();
  for (auto it = dirs_.rbegin(); it != dirs_.rend(); ++it) {
    CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<Dir> dir, OpenDirBeneath(*root_, it->first));
    CAIRN_RETURN_IF_ERROR(ApplyMetadata(nullptr, dir ? dir.get() : root_.get(), it->second));
  }
  return Status::Ok();
}

void TreeRestorer::Warn(std::string message) {
  if (stats_.warnings.size() >= kMaxWarnings) {
    ++dropped_warnings_;
    return;
  }
  stats_.warnings.push_back(std::move(message));
}

// `opened` when it is an empty directory.
Result<std::unique_ptr<Dir>> CheckEmpty(Result<std::unique_ptr<Dir>> opened,
                                        const std::string& dir) {
  if (!opened.ok()) return opened;
  CAIRN_ASSIGN_OR_RETURN(std::vector<std::string> names, (*opened)->List());
  if (!names.empty()) {
    return AlreadyExistsError(fmt::format(
        "target {} is not empty; a tree restores into a new or empty directory only", dir));
  }
  return opened;
}

// Creates `dir` (owner-only) or accepts an existing empty directory, and
// opens it. `created` tells whether it was created here.
Result<std::unique_ptr<Dir>> OpenTarget(Env& env, const std::string& dir, bool* created) {
  *created = false;
  std::string_view trimmed = dir;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.remove_suffix(1);
  const std::string name(BaseName(trimmed));
  if (name.empty()) return CheckEmpty(env.OpenDir(dir), dir);  // "/"
  const std::string up =
      trimmed.size() > name.size() ? std::string(trimmed.substr(0, trimmed.size() - name.size()))
                                   : std::string(".");
  auto parent = env.OpenDir(up);
  if (!parent.ok()) {
    return parent.status().WithContext(fmt::format("create target directory {}", dir));
  }
  Status made = (*parent)->CreateDir(name, 0700);
  if (!made.ok() && made.code() != StatusCode::kAlreadyExists) {
    return made.WithContext(fmt::format("create target directory {}", dir));
  }
  *created = made.ok();
  auto opened = (*parent)->OpenDir(name);
  if (!opened.ok()) {
    auto st = (*parent)->Lstat(name);
    if (st.ok() && S_ISLNK(st->st_mode)) {
      return InvalidArgumentError(
          fmt::format("target {} is a symlink; name the directory it points to", dir));
    }
    if (st.ok() && !S_ISDIR(st->st_mode)) {
      return AlreadyExistsError(fmt::format(
          "target {} exists and is not a directory; a tree restores into a new or empty "
          "directory",
          dir));
    }
    return opened.status().WithContext(fmt::format("open target directory {}", dir));
  }
  return *created ? std::move(opened) : CheckEmpty(std::move(opened), dir);
}

}  // namespace

Result<TreeRestoreStats> RestoreTree(const datastore::Datastore& store, store::ChunkSource& source,
                                     const datastore::SnapshotRef& snap,
                                     const index::ArchiveEntry& entry,
                                     const std::string& target_dir,
                                     const TreeRestoreOptions& options) {
  const int64_t start = store.env().NowMonotonicNanos();
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<chunkio::TreeArchiveReader> reader,
                         chunkio::TreeArchiveReader::Open(store, source, snap, entry));
  const std::string context = options.rehearse ? "rehearse" : "restore into " + target_dir;
  Env& env = options.env != nullptr ? *options.env : store.env();
  std::unique_ptr<Dir> root;
  bool created = false;
  if (!options.rehearse) {
    const std::string what = "restore " + reader->description();
    if (target_dir.empty()) return InvalidArgumentError(what + ": no target directory");
    auto dir = OpenTarget(env, target_dir, &created);
    if (!dir.ok()) return dir.status().WithContext(what);
    root = std::move(*dir);
  }
  TreeRestoreStats stats;
  TreeRestorer restorer(env, *reader, source, options, &stats);
  Status s = restorer.Run(std::move(root));
  stats.jobs_final = restorer.controller().summary().final_limit;
  stats.seconds = static_cast<double>(store.env().NowMonotonicNanos() - start) / 1e9;
  if (!s.ok()) {
    if (options.rehearse) return s.WithContext(context);
    // A directory created here and still empty goes; anything restored
    // stays (as tar leaves it), and the message says so.
    if (created && env.RemoveDir(target_dir).ok()) return s.WithContext(context);
    s = s.WithContext(context);
    return Status(s.code(), fmt::format("{} (what was restored before the error is left in {})",
                                        s.message(), target_dir));
  }
  return stats;
}

}  // namespace cairn::restore
