#include "restore/tree_restore.h"

#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <grp.h>
#include <pwd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <unordered_map>

#include <fmt/format.h>

#include "pipeline/fetch_pipeline.h"
#include "restore/tree_reader.h"
#include "base/unique_fd.h"
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

Status PWriteAll(int fd, ByteSpan data, uint64_t offset) {
  while (!data.empty()) {
    ssize_t n = ::pwrite(fd, data.data(), data.size(), static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoToStatus(errno, "write");
    }
    data = data.subspan(static_cast<size_t>(n));
    offset += static_cast<uint64_t>(n);
  }
  return Status::Ok();
}

// Writes `data` at `offset` but for the file-aligned 4 KiB blocks of it that
// are all zeros: the file was created at its full size, so they read as
// zeros already, and left unwritten they stay holes.
Status WriteSkippingZeros(int fd, ByteSpan data, uint64_t offset) {
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
      CAIRN_RETURN_IF_ERROR(PWriteAll(fd, data.subspan(run, pos - run), offset + run));
      in_run = false;
    }
    pos = end;
  }
  return in_run ? PWriteAll(fd, data.subspan(run), offset + run) : Status::Ok();
}

// Opens directory `rel` below `root_fd` one component at a time, never
// following a symlink (O_NOFOLLOW only guards the last component of a path).
Result<UniqueFd> OpenDirBeneath(int root_fd, std::string_view rel) {
  UniqueFd fd(::fcntl(root_fd, F_DUPFD_CLOEXEC, 0));
  if (fd.get() < 0) return ErrnoToStatus(errno, "dup");
  while (!rel.empty()) {
    size_t slash = rel.find('/');
    std::string name(rel.substr(0, slash));
    UniqueFd next(
        ::openat(fd.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (next.get() < 0) return ErrnoToStatus(errno, fmt::format("open directory {}", name));
    fd = std::move(next);
    rel = slash == std::string_view::npos ? std::string_view() : rel.substr(slash + 1);
  }
  return fd;
}

// Owner and group to restore: the recorded names when they exist on this
// machine (as tar and PBS do), else the recorded ids. Lookups are cached.
class OwnerMap {
 public:
  uid_t Uid(const Entry& e) {
    if (e.user.empty()) return e.uid;
    auto [it, fresh] = users_.try_emplace(e.user, e.uid);
    if (fresh) {
      struct passwd pw, *res = nullptr;
      char buf[4096];
      if (::getpwnam_r(e.user.c_str(), &pw, buf, sizeof(buf), &res) == 0 && res != nullptr) {
        it->second = res->pw_uid;
      } else {
        it->second = kUnknown;
      }
    }
    return it->second == kUnknown ? e.uid : static_cast<uid_t>(it->second);
  }
  gid_t Gid(const Entry& e) {
    if (e.group.empty()) return e.gid;
    auto [it, fresh] = groups_.try_emplace(e.group, e.gid);
    if (fresh) {
      struct group gr, *res = nullptr;
      char buf[4096];
      if (::getgrnam_r(e.group.c_str(), &gr, buf, sizeof(buf), &res) == 0 && res != nullptr) {
        it->second = res->gr_gid;
      } else {
        it->second = kUnknown;
      }
    }
    return it->second == kUnknown ? e.gid : static_cast<gid_t>(it->second);
  }

 private:
  static constexpr int64_t kUnknown = -1;
  std::unordered_map<std::string, int64_t> users_;
  std::unordered_map<std::string, int64_t> groups_;
};

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
  UniqueFd fd;           // open once created (never when rehearsing)
  bool created = false;  // exists in the target (or would, when rehearsing)
  bool selected = false;  // it or an ancestor matched --include
};

// One regular file of the current batch: created at full size, filled by
// the batch's pipeline run, then given its metadata through its descriptor.
struct BatchFile {
  UniqueFd fd;
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
  TreeRestorer(TreeArchiveReader& reader, store::ChunkSource& source,
               const TreeRestoreOptions& options, TreeRestoreStats* stats)
      : reader_(reader), source_(source), options_(options), stats_(*stats),
        selector_(options.includes), as_root_(::geteuid() == 0),
        controller_(ReadConcurrency(source.Traits(), options.jobs)) {}

  // Restores into `root` (an open, empty directory; -1 when rehearsing).
  // Errors name the archive and the entry's path.
  Status Run(UniqueFd root);

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
  // Owner (as root), mode, xattrs, mtime, through `fd`; errors name `path`.
  Status ApplyMetadata(int fd, const Entry& e);
  void Warn(std::string message);

  bool rehearse() const { return options_.rehearse; }
  int parent_fd() const { return stack_.back().fd.get(); }
  void AddProgress(uint64_t bytes) {
    if (options_.progress != nullptr) options_.progress->Add(bytes);
  }

  TreeArchiveReader& reader_;
  store::ChunkSource& source_;
  const TreeRestoreOptions& options_;
  TreeRestoreStats& stats_;
  Selector selector_;
  const bool as_root_;
  OwnerMap owners_;
  pipeline::ConcurrencyController controller_;  // one across batches: tuning carries over
  size_t max_fds_ = 1024;
  UniqueFd root_;
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

Status TreeRestorer::Run(UniqueFd root) {
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
    if (::syncfs(root_.get()) != 0) return ErrnoToStatus(errno, "syncfs");
  }
  if (dropped_warnings_ > 0) {
    stats_.warnings.push_back(fmt::format("... and {} more warnings", dropped_warnings_));
  }
  return Status::Ok();
}

Status TreeRestorer::OnEntry(Entry e) {
  const size_t depth = Depth(e.path);
  if (depth == 0) {  // the root: the target directory itself
    Frame root{std::move(e), UniqueFd(), true, selector_.all()};
    if (!rehearse()) {
      root.fd = UniqueFd(::fcntl(root_.get(), F_DUPFD_CLOEXEC, 0));
      if (root.fd.get() < 0) return ErrnoToStatus(errno, "dup");
    }
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
      stack_.push_back(Frame{std::move(e), UniqueFd(), false, selected});
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
      if (::mkdirat(stack_[i - 1].fd.get(), f.entry.name.c_str(), 0700) != 0) {
        return ErrnoToStatus(errno, fmt::format("{}: create directory", f.entry.path));
      }
      f.fd = UniqueFd(::openat(stack_[i - 1].fd.get(), f.entry.name.c_str(),
                               O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (f.fd.get() < 0) return ErrnoToStatus(errno, fmt::format("{}: open", f.entry.path));
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
  UniqueFd fd;
  if (!rehearse()) {
    fd = UniqueFd(::openat(parent_fd(), e.name.c_str(),
                           O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (fd.get() < 0) return ErrnoToStatus(errno, fmt::format("{}: create", e.path));
    // Full size first: what no chunk writes (zero chunks) stays a hole.
    if (e.size > 0 && ::ftruncate(fd.get(), static_cast<off_t>(e.size)) != 0) {
      return ErrnoToStatus(errno, fmt::format("{}: set size {}", e.path, e.size));
    }
  }
  ++stats_.files;
  ++stats_.entries;
  stats_.bytes += e.size;
  batch_bytes_ += e.size;
  batch_.push_back(BatchFile{std::move(fd), std::move(e)});
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
    CAIRN_ASSIGN_OR_RETURN(UniqueFd from, OpenDirBeneath(root_.get(), dir));
    // Flags 0: a symlink at the old name would be linked itself, never followed.
    if (::linkat(from.get(), std::string(BaseName(where)).c_str(), parent_fd(), e.name.c_str(),
                 0) != 0) {
      return ErrnoToStatus(errno, fmt::format("{}: link to {}", e.path, target.where));
    }
  }
  ++stats_.hardlinks;
  ++stats_.entries;
  return Status::Ok();
}

Status TreeRestorer::AddSpecial(const Entry& e) {
  if (!rehearse()) {
    Status s = tree::CreateSpecial(parent_fd(), e.name, e);
    const bool device = e.kind == EntryKind::kCharDevice || e.kind == EntryKind::kBlockDevice;
    if (device && s.code() == StatusCode::kPermissionDenied) {
      Warn(fmt::format("{}: device node not created: {}", e.path, s.message()));
      return Status::Ok();
    }
    CAIRN_RETURN_IF_ERROR(s);
    tree::ApplyOptions apply;
    apply.owner = as_root_;
    std::vector<std::string> warnings;
    CAIRN_RETURN_IF_ERROR(tree::ApplyMetadata(parent_fd(), e.name, e, apply, &warnings));
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
    CAIRN_RETURN_IF_ERROR(ApplyMetadata(file.fd.get(), file.entry));
    CAIRN_RETURN_IF_ERROR(file.fd.Close(fmt::format("{}: close", file.entry.path)));
  }
  batch_.clear();
  batch_bytes_ = 0;
  return Status::Ok();
}

Status TreeRestorer::RunBatch(const std::vector<Item>& items) {
  if (items.empty()) return Status::Ok();  // empty files and holes only
  pipeline::FetchPipelineOptions popts =
      ReadPipelineOptions(source_.Traits(), options_.jobs, &controller_);
  popts.cpu_workers = options_.cpu_workers;
  popts.max_bytes_in_flight = options_.max_bytes_in_flight;
  popts.progress = options_.progress;
  pipeline::FetchPipelineStats ps;
  return pipeline::RunFetchPipeline(
      items.size(),
      [&](size_t k, ReadBuffer* out) { return ReadStoredChunk(source_, items[k].id, out); },
      [&](size_t k, ReadBuffer& data) -> Status {
        const Item& item = items[k];
        pipeline::StageMeter* meter = pipeline::MeterOf(options_.progress);
        auto plain = CheckFetchedChunk(data, item.id, item.length, reader_.crypt(), meter);
        if (!plain.ok()) {
          return plain.status().WithContext(
              fmt::format("file {}", batch_[item.uses[0].file].entry.path));
        }
        for (const Use& use : item.uses) {
          ByteSpan slice = plain->subspan(use.chunk_offset, use.length);
          if (!rehearse()) {
            const BatchFile& file = batch_[use.file];
            pipeline::StageTimer timer(meter, pipeline::Stage::kTargetWrites);
            Status s = WriteSkippingZeros(file.fd.get(), slice, use.file_offset);
            if (!s.ok()) return s.WithContext(file.entry.path);
          }
          AddProgress(use.length);
        }
        return Status::Ok();
      },
      // Stored and decoded copies may both be alive while a chunk is processed.
      [&](size_t k) { return uint64_t{items[k].length} * 2; }, popts, &ps);
}

Status TreeRestorer::ApplyMetadata(int fd, const Entry& e) {
  const std::string& path = e.path.empty() ? std::string(".") : e.path;
  // chown clears setuid/setgid: owner first, then mode; times last.
  if (as_root_ && ::fchown(fd, owners_.Uid(e), owners_.Gid(e)) != 0) {
    return ErrnoToStatus(errno, fmt::format("{}: chown", path));
  }
  if (::fchmod(fd, e.mode & 07777) != 0) {
    return ErrnoToStatus(errno, fmt::format("{}: chmod", path));
  }
  for (const tree::Xattr& x : e.xattrs) {
    if (::fsetxattr(fd, x.name.c_str(), x.value.data(), x.value.size(), 0) != 0) {
      if (errno == ENOTSUP || errno == EPERM || errno == EACCES) {
        Warn(fmt::format("{}: xattr {} not restored: {}", path, x.name, std::strerror(errno)));
        continue;
      }
      return ErrnoToStatus(errno, fmt::format("{}: set xattr {}", path, x.name));
    }
  }
  struct timespec times[2];
  times[0].tv_sec = 0;
  times[0].tv_nsec = UTIME_OMIT;
  times[1].tv_sec = static_cast<time_t>(e.mtime_ns / 1'000'000'000);
  times[1].tv_nsec = static_cast<long>(e.mtime_ns % 1'000'000'000);
  if (times[1].tv_nsec < 0) {  // before 1970: floor division
    times[1].tv_nsec += 1'000'000'000;
    --times[1].tv_sec;
  }
  if (::futimens(fd, times) != 0) return ErrnoToStatus(errno, fmt::format("{}: set mtime", path));
  return Status::Ok();
}

// Deepest first: in reverse stream order every directory comes after all
// directories below it, so no later change touches a directory whose time
// (or read-only mode) is already set.
Status TreeRestorer::ApplyDirectoryMetadata() {
  if (rehearse()) return Status::Ok();
  for (auto it = dirs_.rbegin(); it != dirs_.rend(); ++it) {
    CAIRN_ASSIGN_OR_RETURN(UniqueFd fd, OpenDirBeneath(root_.get(), it->first));
    CAIRN_RETURN_IF_ERROR(ApplyMetadata(fd.get(), it->second));
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

// Creates `dir` (owner-only) or accepts an existing empty directory, and
// opens it. `created` tells whether it was created here.
Result<UniqueFd> OpenTarget(const std::string& dir, bool* created) {
  *created = ::mkdir(dir.c_str(), 0700) == 0;
  if (!*created && errno != EEXIST) {
    return ErrnoToStatus(errno, fmt::format("create target directory {}", dir));
  }
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOTDIR) {
      return AlreadyExistsError(fmt::format(
          "target {} exists and is not a directory; a tree restores into a new or empty "
          "directory",
          dir));
    }
    if (errno == ELOOP) {
      return InvalidArgumentError(
          fmt::format("target {} is a symlink; name the directory it points to", dir));
    }
    return ErrnoToStatus(errno, fmt::format("open target directory {}", dir));
  }
  if (*created) return fd;
  int dup = ::fcntl(fd.get(), F_DUPFD_CLOEXEC, 0);
  DIR* d = dup < 0 ? nullptr : ::fdopendir(dup);
  if (d == nullptr) {
    if (dup >= 0) ::close(dup);
    return ErrnoToStatus(errno, fmt::format("list target directory {}", dir));
  }
  bool empty = true;
  while (struct dirent* de = ::readdir(d)) {
    if (std::string_view n = de->d_name; n != "." && n != "..") {
      empty = false;
      break;
    }
  }
  ::closedir(d);
  if (!empty) {
    return AlreadyExistsError(fmt::format(
        "target {} is not empty; a tree restores into a new or empty directory only", dir));
  }
  return fd;
}

}  // namespace

Result<TreeRestoreStats> RestoreTree(const datastore::Datastore& store, store::ChunkSource& source,
                                     const datastore::SnapshotRef& snap,
                                     const index::ArchiveEntry& entry,
                                     const std::string& target_dir,
                                     const TreeRestoreOptions& options) {
  const int64_t start = store.env().NowMonotonicNanos();
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<TreeArchiveReader> reader,
                         TreeArchiveReader::Open(store, source, snap, entry));
  const std::string context = options.rehearse ? "rehearse" : "restore into " + target_dir;
  UniqueFd root;
  bool created = false;
  if (!options.rehearse) {
    const std::string what = "restore " + reader->description();
    if (target_dir.empty()) return InvalidArgumentError(what + ": no target directory");
    auto fd = OpenTarget(target_dir, &created);
    if (!fd.ok()) return fd.status().WithContext(what);
    root = std::move(*fd);
  }
  TreeRestoreStats stats;
  TreeRestorer restorer(*reader, source, options, &stats);
  Status s = restorer.Run(std::move(root));
  stats.jobs_final = restorer.controller().summary().final_limit;
  stats.seconds = static_cast<double>(store.env().NowMonotonicNanos() - start) / 1e9;
  if (!s.ok()) {
    if (options.rehearse) return s.WithContext(context);
    // A directory created here and still empty goes; anything restored
    // stays (as tar leaves it), and the message says so.
    if (created && ::rmdir(target_dir.c_str()) == 0) return s.WithContext(context);
    s = s.WithContext(context);
    return Status(s.code(), fmt::format("{} (what was restored before the error is left in {})",
                                        s.message(), target_dir));
  }
  return stats;
}

}  // namespace cairn::restore
