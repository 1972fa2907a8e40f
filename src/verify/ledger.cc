#include "verify/ledger.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "format/coding.h"
#include "format/crc32c.h"
#include "format/magic.h"

namespace cairn::verify {
namespace {

static_assert(sizeof(LedgerEntry) == 48, "docs: one 48-byte entry per chunk");

// Layout (docs/FORMAT.md, "Verify ledger").
constexpr size_t kRecordSize = 41;  // id 32, time 8, verdict 1
constexpr size_t kHeaderSize = 32;
constexpr size_t kOffVersion = 8;
constexpr size_t kOffReserved = 10;  // 2 bytes, zero
constexpr size_t kOffRecordsCrc = 12;
constexpr size_t kOffCount = 16;
constexpr size_t kOffReserved2 = 24;  // 4 bytes, zero
constexpr size_t kOffHeaderCrc = 28;  // CRC32C of bytes [0, 28)

constexpr size_t kBatchHeaderSize = 16;  // magic 8, version 2, reserved 2, count 4
constexpr size_t kBatchCrcSize = 4;
constexpr uint32_t kMaxBatchRecords = 65536;  // 2.6 MB: one write(2) each

// How long Open() and Append() wait for a compaction to release the lock.
constexpr int64_t kLockWaitNanos = int64_t{60} * 1000 * 1000 * 1000;

constexpr std::string_view kLedgerDirName = ".ledger";
constexpr std::string_view kLedgerName = "ledger";
constexpr std::string_view kJournalName = "journal";
constexpr std::string_view kLockName = "lock";

bool IdLess(const crypto::Digest& a, const crypto::Digest& b) {
  return std::memcmp(a.data(), b.data(), a.size()) < 0;
}

void EncodeRecord(const LedgerEntry& e, uint8_t* p) {
  std::memcpy(p, e.id.data(), 32);
  format::PutU64(p + 32, static_cast<uint64_t>(e.time));
  p[40] = static_cast<uint8_t>(e.verdict);
}

// False when the verdict is not one this version knows.
bool DecodeRecord(const uint8_t* p, LedgerEntry* e) {
  if (p[40] > static_cast<uint8_t>(ChunkVerdict::kError)) return false;
  std::memcpy(e->id.data(), p, 32);
  e->time = static_cast<int64_t>(format::GetU64(p + 32));
  e->verdict = static_cast<ChunkVerdict>(p[40]);
  return true;
}

// The smallest read block the readers accept: a batch header (so a magic
// always fits in one) and a record.
constexpr size_t kMinReadBlock = 64;

}  // namespace

namespace ledger_codec {

Bytes EncodeLedgerFile(std::span<const LedgerEntry> entries) {
  Bytes out(kHeaderSize + entries.size() * kRecordSize, 0);
  uint8_t* rec = out.data() + kHeaderSize;
  for (const LedgerEntry& e : entries) {
    EncodeRecord(e, rec);
    rec += kRecordSize;
  }
  uint8_t* h = out.data();
  std::memcpy(h, format::kLedgerMagic.data(), 8);
  format::PutU16(h + kOffVersion, format::kLedgerVersion);
  format::PutU32(h + kOffRecordsCrc, format::Crc32c(ByteSpan(out).subspan(kHeaderSize)));
  format::PutU64(h + kOffCount, entries.size());
  format::PutU32(h + kOffHeaderCrc, format::Crc32c(ByteSpan(h, kOffHeaderCrc)));
  return out;
}

// Batches of at most kMaxBatchRecords, concatenated: one write(2) for all.
Bytes EncodeJournalBatches(std::span<const LedgerEntry> entries) {
  size_t batches = (entries.size() + kMaxBatchRecords - 1) / kMaxBatchRecords;
  Bytes out(batches * (kBatchHeaderSize + kBatchCrcSize) + entries.size() * kRecordSize);
  uint8_t* p = out.data();
  for (size_t first = 0; first < entries.size(); first += kMaxBatchRecords) {
    size_t n = std::min<size_t>(kMaxBatchRecords, entries.size() - first);
    uint8_t* start = p;
    std::memcpy(p, format::kLedgerBatchMagic.data(), 8);
    format::PutU16(p + 8, format::kLedgerBatchVersion);
    format::PutU16(p + 10, 0);
    format::PutU32(p + 12, static_cast<uint32_t>(n));
    p += kBatchHeaderSize;
    for (size_t i = 0; i < n; ++i, p += kRecordSize) EncodeRecord(entries[first + i], p);
    format::PutU32(p, format::Crc32c(ByteSpan(start, static_cast<size_t>(p - start))));
    p += kBatchCrcSize;
  }
  return out;
}

Status DecodeLedgerFile(ReadableFile& file, std::vector<LedgerEntry>* out, size_t read_block) {
  out->clear();
  const std::string& path = file.path();
  CAIRN_ASSIGN_OR_RETURN(uint64_t size, file.Size());
  if (size < kHeaderSize) {
    return DataLossError(
        fmt::format("{}: {} bytes, shorter than the {}-byte header", path, size, kHeaderSize));
  }
  uint8_t h[kHeaderSize];
  CAIRN_ASSIGN_OR_RETURN(size_t got, file.ReadAt(0, h));
  if (got != kHeaderSize) return DataLossError(fmt::format("{}: shrank while read", path));
  if (std::memcmp(h, format::kLedgerMagic.data(), 8) != 0) {
    return DataLossError(fmt::format("{}: bad magic (not a ledger file)", path));
  }
  uint32_t stored_crc = format::GetU32(h + kOffHeaderCrc);
  uint32_t computed_crc = format::Crc32c(ByteSpan(h, kOffHeaderCrc));
  if (stored_crc != computed_crc) {
    return DataLossError(fmt::format("{}: header CRC mismatch (stored {:#010x}, computed {:#010x})",
                                     path, stored_crc, computed_crc));
  }
  if (uint16_t version = format::GetU16(h + kOffVersion); version != format::kLedgerVersion) {
    return DataLossError(fmt::format("{}: version {}, this cairn reads version {}", path, version,
                                     format::kLedgerVersion));
  }
  if (format::GetU16(h + kOffReserved) != 0 || format::GetU32(h + kOffReserved2) != 0) {
    return DataLossError(fmt::format("{}: reserved header bytes are not zero", path));
  }
  uint64_t count = format::GetU64(h + kOffCount);
  if (count > (size - kHeaderSize) / kRecordSize || kHeaderSize + count * kRecordSize != size) {
    return DataLossError(fmt::format("{}: {} bytes cannot hold the {} records the header counts",
                                     path, size, count));
  }

  out->reserve(count);
  const size_t block_records = std::max(read_block, kMinReadBlock) / kRecordSize;
  Bytes block(block_records * kRecordSize);
  uint32_t crc = 0;
  uint64_t offset = kHeaderSize;
  for (uint64_t done = 0; done < count;) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(block_records, count - done));
    std::span<uint8_t> buf(block.data(), n * kRecordSize);
    CAIRN_ASSIGN_OR_RETURN(got, file.ReadAt(offset, buf));
    if (got != buf.size()) return DataLossError(fmt::format("{}: shrank while read", path));
    crc = format::Crc32cExtend(crc, buf);
    for (size_t i = 0; i < n; ++i) {
      LedgerEntry e;
      if (!DecodeRecord(buf.data() + i * kRecordSize, &e)) {
        return DataLossError(fmt::format("{}: record {} has an unknown verdict {}", path, done + i,
                                         buf[i * kRecordSize + 40]));
      }
      if (!out->empty() && !IdLess(out->back().id, e.id)) {
        return DataLossError(fmt::format("{}: record {} is out of order", path, done + i));
      }
      out->push_back(e);
    }
    done += n;
    offset += buf.size();
  }
  if (uint32_t stored = format::GetU32(h + kOffRecordsCrc); stored != crc) {
    return DataLossError(fmt::format(
        "{}: records CRC mismatch (stored {:#010x}, computed {:#010x})", path, stored, crc));
  }
  return Status::Ok();
}

}  // namespace ledger_codec

namespace {

// A forward-only window over the first `size` bytes of a file, read in
// blocks, so a journal of any length is scanned in bounded memory.
class FileWindow {
 public:
  FileWindow(ReadableFile& file, uint64_t size, size_t block)
      : file_(file), size_(size), block_(std::max(block, kMinReadBlock)) {}

  uint64_t size() const { return size_; }
  size_t block() const { return block_; }

  // Makes bytes [pos, pos + n) readable through At(pos) as far as the file
  // has them; returns how many are. `pos` never goes back.
  Result<size_t> Ensure(uint64_t pos, size_t n) {
    uint64_t want_end = std::min(size_, pos + n);
    if (pos >= want_end) return size_t{0};
    if (want_end <= start_ + buf_.size()) return static_cast<size_t>(want_end - pos);
    // Drop what lies before `pos`, then read at least up to want_end.
    uint64_t drop = std::min<uint64_t>(pos - start_, buf_.size());
    buf_.erase(buf_.begin(), buf_.begin() + static_cast<ptrdiff_t>(drop));
    start_ = buf_.empty() ? pos : start_ + drop;
    uint64_t have_end = start_ + buf_.size();
    uint64_t read_end = std::min(size_, std::max(want_end, have_end + block_));
    size_t old = buf_.size();
    buf_.resize(static_cast<size_t>(read_end - start_));
    std::span<uint8_t> fresh = std::span<uint8_t>(buf_).subspan(old);
    CAIRN_ASSIGN_OR_RETURN(size_t got, file_.ReadAt(have_end, fresh));
    if (got < fresh.size()) {  // the file shrank: it ends here
      buf_.resize(old + got);
      size_ = start_ + buf_.size();
    }
    return static_cast<size_t>(std::min(want_end, start_ + buf_.size()) - pos);
  }

  const uint8_t* At(uint64_t pos) const { return buf_.data() + (pos - start_); }

 private:
  ReadableFile& file_;
  uint64_t size_;
  const size_t block_;
  uint64_t start_ = 0;  // file offset of buf_[0]
  Bytes buf_;
};

// The length of the valid batch at `pos`, its records appended to `out`;
// 0 (and `out` unchanged) when none starts there.
Result<uint64_t> ReadBatchAt(FileWindow& w, uint64_t pos, std::vector<LedgerEntry>* out) {
  CAIRN_ASSIGN_OR_RETURN(size_t avail, w.Ensure(pos, kBatchHeaderSize));
  if (avail < kBatchHeaderSize) return uint64_t{0};
  const uint8_t* h = w.At(pos);
  if (std::memcmp(h, format::kLedgerBatchMagic.data(), 8) != 0 ||
      format::GetU16(h + 8) != format::kLedgerBatchVersion || format::GetU16(h + 10) != 0) {
    return uint64_t{0};
  }
  uint32_t count = format::GetU32(h + 12);
  if (count == 0 || count > kMaxBatchRecords) return uint64_t{0};
  size_t len = kBatchHeaderSize + count * kRecordSize + kBatchCrcSize;
  CAIRN_ASSIGN_OR_RETURN(avail, w.Ensure(pos, len));
  if (avail < len) return uint64_t{0};
  const uint8_t* p = w.At(pos);
  size_t body = len - kBatchCrcSize;
  if (format::Crc32c(ByteSpan(p, body)) != format::GetU32(p + body)) return uint64_t{0};
  size_t old = out->size();
  out->resize(old + count);
  for (uint32_t i = 0; i < count; ++i) {
    if (!DecodeRecord(p + kBatchHeaderSize + i * kRecordSize, &(*out)[old + i])) {
      out->resize(old);
      return uint64_t{0};
    }
  }
  return uint64_t{len};
}

// The next offset ≥ `from` where the batch magic appears, or w.size().
Result<uint64_t> FindMagic(FileWindow& w, uint64_t from) {
  const auto& magic = format::kLedgerBatchMagic;
  while (true) {
    CAIRN_ASSIGN_OR_RETURN(size_t avail, w.Ensure(from, w.block()));
    if (avail < magic.size()) return w.size();
    const uint8_t* p = w.At(from);
    const uint8_t* hit = std::search(p, p + avail, magic.begin(), magic.end());
    if (hit != p + avail) return from + static_cast<uint64_t>(hit - p);
    from += avail - (magic.size() - 1);  // a magic may straddle the block end
  }
}

}  // namespace

namespace ledger_codec {

// Every valid batch of the journal in order. A region that is not a valid
// batch (torn by a killed writer, cut by a crash, flipped bits) is skipped
// up to the next valid batch, so one damaged batch costs only its own
// records, wherever it lies (several processes append to one journal, so a
// torn batch may have others after it).
Status ScanJournal(ReadableFile& file, JournalScan* scan, size_t read_block) {
  CAIRN_ASSIGN_OR_RETURN(scan->size, file.Size());
  scan->records.reserve(scan->size / kRecordSize);  // an upper bound: one allocation
  FileWindow w(file, scan->size, read_block);
  uint64_t pos = 0;
  while (pos < w.size()) {
    CAIRN_ASSIGN_OR_RETURN(uint64_t len, ReadBatchAt(w, pos, &scan->records));
    if (len > 0) {
      pos += len;
      continue;
    }
    uint64_t bad = pos;
    uint64_t next = pos + 1;
    while (true) {
      CAIRN_ASSIGN_OR_RETURN(next, FindMagic(w, next));
      if (next >= w.size()) break;
      CAIRN_ASSIGN_OR_RETURN(len, ReadBatchAt(w, next, &scan->records));
      if (len > 0) break;
      ++next;
    }
    next = std::min(next, w.size());
    if (scan->damaged_regions++ == 0) scan->first_damage = bad;
    scan->ignored_bytes += next - bad;
    pos = next + len;
  }
  scan->size = w.size();
  return Status::Ok();
}

}  // namespace ledger_codec

namespace {

// The `ledger` file into `out`: NotFound when absent, else as
// DecodeLedgerFile.
Status ReadLedgerFile(Env& env, const std::string& path, std::vector<LedgerEntry>* out) {
  out->clear();
  CAIRN_ASSIGN_OR_RETURN(auto file, env.OpenReadable(path));
  return ledger_codec::DecodeLedgerFile(*file, out);
}

// The journal; an absent one is empty.
Status ReadJournal(Env& env, const std::string& path, ledger_codec::JournalScan* scan) {
  auto opened = env.OpenReadable(path);
  if (opened.status().code() == StatusCode::kNotFound) return Status::Ok();
  CAIRN_RETURN_IF_ERROR(opened.status());
  return ledger_codec::ScanJournal(**opened, scan);
}

// Which of two records of one id wins: the newer check; at equal times
// the larger verdict, so any failure beats kOk (a cache may err towards
// verifying again). A total order, so the state does not depend on how
// concurrent appenders' batches interleaved, and replaying a journal onto a
// ledger that already holds it changes nothing.
bool Supersedes(const LedgerEntry& a, const LedgerEntry& b) {
  if (a.time != b.time) return a.time > b.time;
  return static_cast<uint8_t>(a.verdict) > static_cast<uint8_t>(b.verdict);
}

}  // namespace

namespace ledger_codec {

// `base` sorted and unique, `journal` in any order: one entry per id, the
// one that supersedes the others.
std::vector<LedgerEntry> MergeState(std::vector<LedgerEntry> base,
                                    std::vector<LedgerEntry> journal) {
  if (journal.empty()) return base;
  // By id, the winner last in each run of equal ids.
  std::sort(journal.begin(), journal.end(), [](const LedgerEntry& a, const LedgerEntry& b) {
    int c = std::memcmp(a.id.data(), b.id.data(), a.id.size());
    return c != 0 ? c < 0 : Supersedes(b, a);
  });
  size_t kept = 0;
  for (size_t i = 0; i < journal.size(); ++i) {
    if (i + 1 < journal.size() && journal[i + 1].id == journal[i].id) continue;
    journal[kept++] = journal[i];
  }
  journal.resize(kept);
  if (base.empty()) return journal;

  std::vector<LedgerEntry> out;
  out.reserve(base.size() + journal.size());
  size_t b = 0, j = 0;
  while (b < base.size() && j < journal.size()) {
    if (IdLess(base[b].id, journal[j].id)) {
      out.push_back(base[b++]);
    } else if (IdLess(journal[j].id, base[b].id)) {
      out.push_back(journal[j++]);
    } else {
      out.push_back(Supersedes(base[b], journal[j]) ? base[b] : journal[j]);
      ++b;
      ++j;
    }
  }
  out.insert(out.end(), base.begin() + static_cast<ptrdiff_t>(b), base.end());
  out.insert(out.end(), journal.begin() + static_cast<ptrdiff_t>(j), journal.end());
  return out;
}

}  // namespace ledger_codec

namespace {

struct LoadedState {
  std::vector<LedgerEntry> entries;
  bool ledger_damaged = false;
  uint64_t journal_size = 0;
  std::vector<std::string> warnings;
};

// Ledger file, then journal. Damage is a warning; I/O errors are errors.
// REQUIRES: the caller holds the lock (shared or exclusive), so no
// compaction replaces the ledger and empties the journal between the reads.
Result<LoadedState> LoadState(Env& env, const std::string& dir) {
  LoadedState state;
  std::vector<LedgerEntry> base;
  Status s = ReadLedgerFile(env, JoinPath(dir, kLedgerName), &base);
  if (s.code() == StatusCode::kDataLoss) {
    state.ledger_damaged = true;
    base.clear();
    state.warnings.push_back(fmt::format(
        "verify ledger {}; ignored (it is rebuilt at the next compaction), the chunks it "
        "covered will be verified again",
        s.message()));
  } else if (!s.ok() && s.code() != StatusCode::kNotFound) {
    return s;
  }

  ledger_codec::JournalScan scan;
  std::string journal_path = JoinPath(dir, kJournalName);
  CAIRN_RETURN_IF_ERROR(ReadJournal(env, journal_path, &scan));
  state.journal_size = scan.size;
  if (scan.ignored_bytes > 0) {
    state.warnings.push_back(fmt::format(
        "verify ledger journal {}: ignored {} of {} bytes in {} torn or damaged region(s), the "
        "first at offset {} (a writer killed mid-append, or a crash); their chunks will be "
        "verified again",
        journal_path, scan.ignored_bytes, scan.size, scan.damaged_regions, scan.first_damage));
  }
  state.entries = ledger_codec::MergeState(std::move(base), std::move(scan.records));
  return state;
}

// The lock in shared mode, waiting (with backoff) while a compaction holds
// it exclusively; Env offers only a non-blocking flock.
Result<std::unique_ptr<FileLock>> LockShared(Env& env, const std::string& path) {
  int64_t deadline = env.NowMonotonicNanos() + kLockWaitNanos;
  auto pause = std::chrono::microseconds(200);
  while (true) {
    auto lock = env.TryLock(path, /*exclusive=*/false);
    if (lock.ok() || lock.status().code() != StatusCode::kUnavailable) return lock;
    if (env.NowMonotonicNanos() > deadline) {
      return lock.status().WithContext(fmt::format("waited {} s for a ledger compaction to finish",
                                                   kLockWaitNanos / 1000000000));
    }
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(20));
  }
}

std::string JoinWarnings(const std::vector<std::string>& warnings) {
  std::string out;
  for (const std::string& w : warnings) {
    if (!out.empty()) out += "; ";
    out += w;
  }
  return out;
}

}  // namespace

Result<std::unique_ptr<Ledger>> Ledger::Open(Env& env, const std::string& datastore_root,
                                             std::string* warning) {
  if (warning != nullptr) warning->clear();
  std::string dir = JoinPath(datastore_root, kLedgerDirName);
  Status s = env.CreateDir(dir);
  if (s.ok()) {
    CAIRN_RETURN_IF_ERROR(env.SyncDir(datastore_root));
  } else if (s.code() != StatusCode::kAlreadyExists) {
    return s.WithContext("verify ledger");
  }
  std::unique_ptr<Ledger> ledger(new Ledger(env, dir));

  // The journal exists from here on, durably, so an append never creates it
  // (an fdatasync does not make a new directory entry durable).
  std::string journal = ledger->Path(kJournalName);
  if (env.Stat(journal).status().code() == StatusCode::kNotFound) {
    CAIRN_ASSIGN_OR_RETURN(auto file, env.OpenWritable(journal, OpenMode::kAppend));
    CAIRN_RETURN_IF_ERROR(file->Close());
    CAIRN_RETURN_IF_ERROR(env.SyncDir(dir));
  }

  CAIRN_ASSIGN_OR_RETURN(auto lock, LockShared(env, ledger->Path(kLockName)));
  CAIRN_ASSIGN_OR_RETURN(LoadedState state, LoadState(env, dir));
  ledger->entries_ = std::move(state.entries);
  if (warning != nullptr) *warning = JoinWarnings(state.warnings);
  return ledger;
}

const LedgerEntry* Ledger::Find(const crypto::Digest& id) const {
  auto it = std::lower_bound(
      entries_.begin(), entries_.end(), id,
      [](const LedgerEntry& e, const crypto::Digest& d) { return IdLess(e.id, d); });
  if (it == entries_.end() || it->id != id) return nullptr;
  return &*it;
}

Status Ledger::Append(std::span<const LedgerEntry> batch) {
  if (batch.empty()) return Status::Ok();
  for (const LedgerEntry& e : batch) {
    if (static_cast<uint8_t>(e.verdict) > static_cast<uint8_t>(ChunkVerdict::kError)) {
      return InvalidArgumentError(fmt::format("verify ledger: chunk {} has an unknown verdict {}",
                                              crypto::DigestHex(e.id),
                                              static_cast<int>(e.verdict)));
    }
  }
  Bytes data = ledger_codec::EncodeJournalBatches(batch);
  // Shared: other appenders go on; a compaction waits until this batch is
  // in the journal, so it can never empty the journal under it.
  CAIRN_ASSIGN_OR_RETURN(auto lock, LockShared(env_, Path(kLockName)));
  CAIRN_ASSIGN_OR_RETURN(auto file, env_.OpenWritable(Path(kJournalName), OpenMode::kAppend));
  CAIRN_RETURN_IF_ERROR(file->Append(data));
  // Env's Sync is fsync(2); for an append it costs what fdatasync would
  // (the file size must reach the disk either way).
  CAIRN_RETURN_IF_ERROR(file->Sync());
  return file->Close();
}

Status Ledger::Compact() {
  auto lock = env_.TryLock(Path(kLockName), /*exclusive=*/true);
  if (lock.status().code() == StatusCode::kUnavailable) return Status::Ok();  // busy: next time
  CAIRN_RETURN_IF_ERROR(lock.status());

  // Other processes may have appended since Open(): re-read everything.
  CAIRN_ASSIGN_OR_RETURN(LoadedState state, LoadState(env_, dir_));
  if (state.journal_size > 0 || state.ledger_damaged) {
    // Leftovers of a compaction killed mid-write (nobody else can be
    // writing one: we hold the lock exclusively).
    CAIRN_ASSIGN_OR_RETURN(std::vector<std::string> names, env_.ListDir(dir_));
    std::string tmp_prefix = fmt::format("{}.tmp", kLedgerName);
    for (const std::string& name : names) {
      if (name.starts_with(tmp_prefix)) env_.RemoveFile(Path(name)).IgnoreError();
    }
    CAIRN_RETURN_IF_ERROR(
        WriteFileAtomic(env_, Path(kLedgerName), ledger_codec::EncodeLedgerFile(state.entries)));
    // Emptied only once the new ledger is durable. A crash in between
    // replays the journal onto a ledger that already holds it, which
    // changes nothing (see Supersedes).
    CAIRN_ASSIGN_OR_RETURN(auto journal, env_.OpenWritable(Path(kJournalName), OpenMode::kAppend));
    CAIRN_RETURN_IF_ERROR(journal->Truncate(0));
    CAIRN_RETURN_IF_ERROR(journal->Sync());
    CAIRN_RETURN_IF_ERROR(journal->Close());
  }
  entries_ = std::move(state.entries);
  return Status::Ok();
}

Result<uint64_t> Ledger::JournalBytes() const {
  auto info = env_.Stat(Path(kJournalName));
  if (info.status().code() == StatusCode::kNotFound) return uint64_t{0};
  CAIRN_RETURN_IF_ERROR(info.status());
  return info->size;
}

std::string Ledger::Path(std::string_view name) const { return JoinPath(dir_, name); }

}  // namespace cairn::verify
