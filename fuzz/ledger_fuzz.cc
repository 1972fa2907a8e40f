// Fuzz target for the verify ledger's decoders (verify::ledger_codec:
// DecodeLedgerFile, ScanJournal, MergeState; docs/FORMAT.md, "Verify
// ledger"), on bytes in memory: no file, no lock.
//
// Input: byte 0 picks a small read block (64 + 4 × byte), the rest is the
// file. The rest is tried
//   - as a `ledger` file: an error is DataLoss; a decoded file has strictly
//     increasing ids and known verdicts, and encodes back to the very same
//     bytes (the format has one encoding per state);
//   - as a `journal`: every record has a known verdict, ignored bytes fit
//     in the file, and a valid batch appended after the input is always
//     read back whole (a torn region costs only its own bytes);
//   - as records (41 bytes each) encoded into a valid ledger and journal,
//     so the fuzzer also works past the CRCs: those decode to what was
//     encoded;
// each decoder once with the production 1 MiB block and once with the small
// one, which must give the same result (the block boundary is invisible).
// MergeState of whatever was decoded: sorted and unique, each id's winner
// supersedes every record of that id, independent of the journal's order,
// and merging the journal again changes nothing.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "base/env.h"
#include "verify/ledger.h"

namespace {

using cairn::Bytes;
using cairn::ByteSpan;
using cairn::verify::ChunkVerdict;
using cairn::verify::LedgerEntry;
namespace codec = cairn::verify::ledger_codec;

#define FUZZ_CHECK(cond)                                                  \
  do {                                                                    \
    if (!(cond)) {                                                        \
      std::fprintf(stderr, "ledger_fuzz: invariant failed: %s\n", #cond); \
      std::abort();                                                       \
    }                                                                     \
  } while (0)

constexpr size_t kRecord = 41;

// A ReadableFile over bytes in memory.
class MemoryFile final : public cairn::ReadableFile {
 public:
  explicit MemoryFile(ByteSpan data) : data_(data) {}
  cairn::Result<size_t> ReadAt(uint64_t offset, std::span<uint8_t> buf) override {
    if (offset >= data_.size()) return size_t{0};
    size_t n = std::min<uint64_t>(buf.size(), data_.size() - offset);
    std::memcpy(buf.data(), data_.data() + offset, n);
    return n;
  }
  cairn::Result<uint64_t> Size() override { return uint64_t{data_.size()}; }
  const std::string& path() const override { return path_; }

 private:
  ByteSpan data_;
  std::string path_ = "fuzz";
};

bool Same(const LedgerEntry& a, const LedgerEntry& b) {
  return a.id == b.id && a.time == b.time && a.verdict == b.verdict;
}
bool Same(const std::vector<LedgerEntry>& a, const std::vector<LedgerEntry>& b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(),
                    [](const auto& x, const auto& y) { return Same(x, y); });
}
bool IdLess(const LedgerEntry& a, const LedgerEntry& b) {
  return std::memcmp(a.id.data(), b.id.data(), a.id.size()) < 0;
}
bool Known(ChunkVerdict v) { return static_cast<uint8_t>(v) <= 3; }
// docs/FORMAT.md: the newer time wins; on equal times the larger verdict.
bool Beats(const LedgerEntry& a, const LedgerEntry& b) {
  if (a.time != b.time) return a.time > b.time;
  return static_cast<uint8_t>(a.verdict) > static_cast<uint8_t>(b.verdict);
}

struct LedgerResult {
  cairn::StatusCode code;
  std::vector<LedgerEntry> entries;
};

LedgerResult DecodeLedger(ByteSpan data, size_t block) {
  MemoryFile file(data);
  LedgerResult r;
  cairn::Status s = codec::DecodeLedgerFile(file, &r.entries, block);
  r.code = s.code();
  return r;
}

codec::JournalScan ScanJournal(ByteSpan data, size_t block) {
  MemoryFile file(data);
  codec::JournalScan scan;
  FUZZ_CHECK(codec::ScanJournal(file, &scan, block).ok());  // memory never fails
  return scan;
}

void CheckSameScan(const codec::JournalScan& a, const codec::JournalScan& b) {
  FUZZ_CHECK(Same(a.records, b.records));
  FUZZ_CHECK(a.size == b.size && a.ignored_bytes == b.ignored_bytes &&
             a.damaged_regions == b.damaged_regions && a.first_damage == b.first_damage);
}

// The ledger file decoder, both block sizes; returns the entries (empty on
// error).
std::vector<LedgerEntry> CheckLedger(ByteSpan data, size_t small_block) {
  LedgerResult big = DecodeLedger(data, codec::kReadBlock);
  LedgerResult small = DecodeLedger(data, small_block);
  FUZZ_CHECK(big.code == small.code);
  if (big.code != cairn::StatusCode::kOk) {
    FUZZ_CHECK(big.code == cairn::StatusCode::kDataLoss);
    return {};
  }
  FUZZ_CHECK(Same(big.entries, small.entries));
  for (size_t i = 0; i < big.entries.size(); ++i) {
    FUZZ_CHECK(Known(big.entries[i].verdict));
    if (i > 0) FUZZ_CHECK(IdLess(big.entries[i - 1], big.entries[i]));
  }
  Bytes again = codec::EncodeLedgerFile(big.entries);
  FUZZ_CHECK(again.size() == data.size() && std::equal(again.begin(), again.end(), data.begin()));
  return big.entries;
}

// The journal scanner, both block sizes; returns the records.
std::vector<LedgerEntry> CheckJournal(ByteSpan data, size_t small_block) {
  codec::JournalScan big = ScanJournal(data, codec::kReadBlock);
  CheckSameScan(big, ScanJournal(data, small_block));
  FUZZ_CHECK(big.size == data.size());
  FUZZ_CHECK(big.ignored_bytes <= big.size);
  FUZZ_CHECK((big.ignored_bytes == 0) == (big.damaged_regions == 0));
  if (big.damaged_regions > 0) FUZZ_CHECK(big.first_damage < big.size);
  // Valid bytes: each record 41, each batch 20 more; what is left is ignored.
  FUZZ_CHECK(big.records.size() * kRecord + big.ignored_bytes <= big.size);
  for (const LedgerEntry& e : big.records) FUZZ_CHECK(Known(e.verdict));

  // A valid batch appended after whatever the input is gets read back whole,
  // after the input's own records.
  std::vector<LedgerEntry> tail(2);
  for (size_t i = 0; i < tail.size(); ++i) {
    tail[i].id.fill(static_cast<uint8_t>(0xa0 + i));
    tail[i].time = 1796014800 + static_cast<int64_t>(i);
    tail[i].verdict = static_cast<ChunkVerdict>(i % 4);
  }
  Bytes joined(data.begin(), data.end());
  Bytes batch = codec::EncodeJournalBatches(tail);
  joined.insert(joined.end(), batch.begin(), batch.end());
  codec::JournalScan with_tail = ScanJournal(joined, small_block);
  FUZZ_CHECK(with_tail.records.size() >= tail.size());
  std::vector<LedgerEntry> last(with_tail.records.end() - static_cast<ptrdiff_t>(tail.size()),
                                with_tail.records.end());
  FUZZ_CHECK(Same(last, tail));
  return big.records;
}

// Records cut from `data`, 41 bytes each, verdicts folded into the known
// ones (the encoders require them).
std::vector<LedgerEntry> RecordsOf(ByteSpan data) {
  std::vector<LedgerEntry> out;
  for (size_t off = 0; off + kRecord <= data.size(); off += kRecord) {
    LedgerEntry e;
    std::memcpy(e.id.data(), data.data() + off, 32);
    uint64_t t = 0;
    for (int i = 7; i >= 0; --i) t = t << 8 | data[off + 32 + static_cast<size_t>(i)];
    e.time = static_cast<int64_t>(t);
    e.verdict = static_cast<ChunkVerdict>(data[off + 40] % 4);
    out.push_back(e);
  }
  return out;
}

void CheckEncoded(const std::vector<LedgerEntry>& records, size_t small_block) {
  // As a journal: every record back, in order.
  Bytes journal = codec::EncodeJournalBatches(records);
  codec::JournalScan scan = ScanJournal(journal, small_block);
  FUZZ_CHECK(Same(scan.records, records) && scan.ignored_bytes == 0);
  // As a ledger: the state (one per id, sorted), back unchanged.
  std::vector<LedgerEntry> state = codec::MergeState({}, records);
  Bytes file = codec::EncodeLedgerFile(state);
  LedgerResult r = DecodeLedger(file, small_block);
  FUZZ_CHECK(r.code == cairn::StatusCode::kOk && Same(r.entries, state));
}

// `base` sorted and unique (a decoded ledger), `journal` anything.
void CheckMerge(const std::vector<LedgerEntry>& base, const std::vector<LedgerEntry>& journal) {
  std::vector<LedgerEntry> merged = codec::MergeState(base, journal);
  // The expected state, the slow way (std::array orders like memcmp).
  std::map<cairn::crypto::Digest, LedgerEntry> best;
  for (const auto* part : {&base, &journal}) {
    for (const LedgerEntry& e : *part) {
      auto [it, fresh] = best.emplace(e.id, e);
      if (!fresh && Beats(e, it->second)) it->second = e;
    }
  }
  FUZZ_CHECK(merged.size() == best.size());
  size_t i = 0;
  for (const auto& [id, e] : best) FUZZ_CHECK(Same(merged[i++], e));
  // The journal's order does not matter, and replaying it changes nothing.
  std::vector<LedgerEntry> reversed(journal.rbegin(), journal.rend());
  FUZZ_CHECK(Same(codec::MergeState(base, reversed), merged));
  FUZZ_CHECK(Same(codec::MergeState(merged, journal), merged));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t small_block = 64 + 4 * size_t{data[0]};
  ByteSpan bytes(data + 1, size - 1);
  std::vector<LedgerEntry> base = CheckLedger(bytes, small_block);
  std::vector<LedgerEntry> journal = CheckJournal(bytes, small_block);
  std::vector<LedgerEntry> records = RecordsOf(bytes);
  CheckEncoded(records, small_block);
  CheckMerge(base, journal);
  CheckMerge(base, records);
  return 0;
}
