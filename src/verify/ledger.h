// Ledger: when each chunk of a datastore was last verified, and how it went.
//
// It lets verify skip chunks checked recently (--outdated-after), resume an
// interrupted run, and verify a slice at a time while knowing what the rest
// will take (rolling verify). It is a cache of verify results, never the
// only record of anything: losing it costs one full verify, nothing more.
//
// On disk, in DATASTORE/.ledger/ (docs/FORMAT.md, "Verify ledger"):
//   ledger    the compacted state: a header and records sorted by id;
//             replaced atomically (temp + fsync + rename) by Compact();
//   journal   records appended since, in batches, each with its own CRC32C
//             and synced; a batch torn or damaged (a process killed mid-
//             append, a crash) is skipped up to the next valid batch, so it
//             costs only its own records, even when other processes'
//             batches follow it;
//   lock      flock: readers (Open) and appenders hold it shared, Compact()
//             exclusive.
// Loading reads the ledger, then applies the journal: for each id the
// newest time wins, and on equal times the larger verdict (any failure
// beats kOk), so the result never depends on the order of records. Memory:
// one 48-byte Entry per chunk, in one sorted vector.
//
// Why our own format, not SQLite: the access pattern is "load everything
// sorted, merge with the sorted chunk list, append results" — a sorted file
// plus an append-only journal does that with sequential I/O and 41 bytes per
// chunk; a B-tree would add a dependency, per-row overhead and random I/O
// for no query we need.
//
// Thread safety: Append() may be called from several threads; the other
// methods are for one thread. Several processes may append to one journal
// at once (O_APPEND, whole batches per write), and any of them may compact.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/bytes.h"
#include "base/env.h"
#include "crypto/sha256.h"

namespace cairn::verify {

enum class ChunkVerdict : uint8_t {
  kOk = 0,
  kCorrupt = 1,  // present but failed a check (DataLoss)
  kMissing = 2,  // not in the store
  kError = 3,    // could not be read (I/O error): says nothing about the data
};

struct LedgerEntry {
  crypto::Digest id{};
  int64_t time = 0;  // unix seconds of the check
  ChunkVerdict verdict = ChunkVerdict::kOk;
};

// The codecs behind Ledger (docs/FORMAT.md, "Verify ledger"): no directory,
// no lock, no Env, so tests and the fuzz target (fuzz/ledger_fuzz.cc) can
// drive them on bytes in memory. Ledger uses exactly these.
namespace ledger_codec {

// Files are read in blocks of this many bytes (memory stays bounded however
// large they grow). A smaller block (64 bytes at least; less counts as 64)
// gives the same result; the fuzz target uses one to reach the block
// boundaries.
inline constexpr size_t kReadBlock = size_t{1} << 20;

// The `ledger` file holding `entries`. REQUIRES: sorted by id, unique, known
// verdicts (what DecodeLedgerFile returns).
Bytes EncodeLedgerFile(std::span<const LedgerEntry> entries);

// Decodes a whole `ledger` file read through `file` into `out` (sorted by
// id, unique). DataLoss, naming file.path() and the problem, when it is
// damaged; other codes for I/O errors.
Status DecodeLedgerFile(ReadableFile& file, std::vector<LedgerEntry>* out,
                        size_t read_block = kReadBlock);

// `entries` as journal batches of at most 65536 records each, concatenated
// (what one Ledger::Append writes). Verdicts must be known.
Bytes EncodeJournalBatches(std::span<const LedgerEntry> entries);

struct JournalScan {
  std::vector<LedgerEntry> records;  // of the valid batches, in file order
  uint64_t size = 0;                 // bytes scanned (the file's length)
  uint64_t ignored_bytes = 0;        // in torn or damaged regions
  uint64_t damaged_regions = 0;
  uint64_t first_damage = 0;  // offset of the first damaged region
};

// Reads every valid batch of a journal through `file`; a region that is not
// a valid batch is skipped up to the next valid one and counted. Errors: I/O
// only (damage is in `scan`).
Status ScanJournal(ReadableFile& file, JournalScan* scan, size_t read_block = kReadBlock);

// The state: `base` (sorted, unique: a decoded ledger file) and `journal`
// (any order, ids may repeat) merged into one entry per id, sorted by id;
// for each id the newest time wins, on equal times the larger verdict.
std::vector<LedgerEntry> MergeState(std::vector<LedgerEntry> base,
                                    std::vector<LedgerEntry> journal);

}  // namespace ledger_codec

class Ledger {
 public:
  // Loads DATASTORE_ROOT/.ledger/ (creating the directory and an empty
  // journal when absent). `env` must outlive the Ledger. A damaged `ledger`
  // file (what a DataLoss would say) is reported only through `warning`,
  // and left in place for Compact() to replace; the ledger then starts from
  // the journal alone. Torn or damaged journal batches are skipped and
  // their bytes counted in `warning` too. `warning` (may be null) is empty
  // when all is well, otherwise its problems joined by "; ". Errors: I/O
  // errors only (and Unavailable when a compaction holds the lock for over
  // a minute).
  static Result<std::unique_ptr<Ledger>> Open(Env& env, const std::string& datastore_root,
                                              std::string* warning);

  // Entries sorted by id (memcmp order), one per id (the newest).
  const std::vector<LedgerEntry>& entries() const { return entries_; }
  // The entry of `id`, or null.
  const LedgerEntry* Find(const crypto::Digest& id) const;
  // Frees entries() (a verify that has merged them keeps only appending).
  void ReleaseEntries() { std::vector<LedgerEntry>().swap(entries_); }

  // Appends one batch to the journal (one write(2); batches over 65536
  // entries go as several journal batches in that write) and fsyncs it
  // (durable when this returns). Waits while a compaction holds the lock.
  // Does not change entries(): the in-memory view is the state at Open()
  // or the last Compact(). InvalidArgument for an unknown verdict.
  // Thread-safe.
  Status Append(std::span<const LedgerEntry> batch);

  // Rewrites `ledger` as the merge of the file state and every journal
  // batch (including other processes' appends), then empties the journal,
  // and makes that merge entries(). Under the exclusive lock; when another
  // holder has it (an append or an Open() in progress, here or in another
  // process), returns Ok without compacting (next time). A crash at any
  // point loses nothing: the journal is emptied only after the new ledger
  // is durable, and replaying it onto that ledger changes nothing.
  Status Compact();

  // Journal bytes on disk (to decide when to compact).
  Result<uint64_t> JournalBytes() const;

 private:
  Ledger(Env& env, std::string dir) : env_(env), dir_(std::move(dir)) {}

  // `name` inside dir_.
  std::string Path(std::string_view name) const;

  Env& env_;         // outlives the Ledger
  std::string dir_;  // DATASTORE_ROOT/.ledger
  std::vector<LedgerEntry> entries_;
};

}  // namespace cairn::verify
