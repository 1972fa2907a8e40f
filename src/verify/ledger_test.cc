#include "verify/ledger.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <iostream>
#include <map>
#include <random>
#include <thread>
#include <tuple>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "format/coding.h"
#include "format/crc32c.h"
#include "format/magic.h"
#include "tests/unit_test_util.h"

namespace cairn::verify {
namespace {

using test_util::CodeOf;

// Sizes from docs/FORMAT.md, "Verify ledger".
constexpr size_t kRecord = 41;
constexpr size_t kFileHeader = 32;
constexpr size_t kBatchOverhead = 16 + 4;  // header + CRC
constexpr size_t kMaxBatch = 65536;

size_t BatchBytes(size_t n) { return kBatchOverhead + n * kRecord; }

// A well-spread id for (a, b), as real chunk ids are.
crypto::Digest IdOf(uint64_t a, uint64_t b) {
  uint8_t in[16];
  format::PutU64(in, a);
  format::PutU64(in + 8, b);
  return crypto::Sha256(ByteSpan(in, sizeof(in)));
}

LedgerEntry Entry(const crypto::Digest& id, int64_t time, ChunkVerdict v = ChunkVerdict::kOk) {
  return LedgerEntry{id, time, v};
}

// Comparable, printable forms of entries (LedgerEntry has no operator==).
using Flat = std::tuple<crypto::Digest, int64_t, int>;
Flat Key(const LedgerEntry& e) { return {e.id, e.time, static_cast<int>(e.verdict)}; }
std::vector<Flat> Keys(const std::vector<LedgerEntry>& entries) {
  std::vector<Flat> out;
  out.reserve(entries.size());
  for (const LedgerEntry& e : entries) out.push_back(Key(e));
  return out;
}

// What the ledger should hold: id → entry, in id order (std::array
// compares bytes lexicographically, like the ledger).
using Model = std::map<crypto::Digest, LedgerEntry>;

std::vector<LedgerEntry> ToVector(const Model& m) {
  std::vector<LedgerEntry> out;
  for (const auto& [id, e] : m) out.push_back(e);
  return out;
}

void Flip(Bytes& data, size_t at) { data.at(at) ^= 0x40; }

class LedgerTest : public ::testing::Test {
 protected:
  std::unique_ptr<Env> env_ = NewPosixEnv();
  test_util::TempDir dir_;

  std::string LedgerDir() const { return dir_.Join(".ledger"); }
  std::string LedgerFile() const { return dir_.Join(".ledger/ledger"); }
  std::string JournalFile() const { return dir_.Join(".ledger/journal"); }

  std::unique_ptr<Ledger> OpenOrDie(std::string* warning = nullptr) {
    std::string local;
    auto ledger = Ledger::Open(*env_, dir_.path(), warning ? warning : &local);
    EXPECT_TRUE(ledger.ok()) << ledger.status().ToString();
    if (!ledger.ok()) return nullptr;
    if (warning == nullptr) {
      EXPECT_EQ(local, "");
    }
    return std::move(*ledger);
  }

  // Appends and records in `model` what a reader must then see.
  void AppendTo(Ledger& ledger, const std::vector<LedgerEntry>& batch, Model* model) {
    CAIRN_ASSERT_OK(ledger.Append(batch));
    for (const LedgerEntry& e : batch) {
      auto [it, fresh] = model->try_emplace(e.id, e);
      if (!fresh && (e.time > it->second.time ||
                     (e.time == it->second.time && e.verdict > it->second.verdict))) {
        it->second = e;
      }
    }
  }

  // `n` fresh entries of batch `tag`.
  static std::vector<LedgerEntry> Batch(uint64_t tag, size_t n, int64_t time) {
    std::vector<LedgerEntry> out;
    for (size_t i = 0; i < n; ++i) {
      out.push_back(Entry(IdOf(tag, i), time, static_cast<ChunkVerdict>((tag + i) % 4)));
    }
    return out;
  }

  void ExpectEntries(const Ledger& ledger, const Model& model) {
    EXPECT_EQ(Keys(ledger.entries()), Keys(ToVector(model)));
  }

  std::vector<std::string> LedgerDirNames() {
    auto names = env_->ListDir(LedgerDir());
    EXPECT_TRUE(names.ok());
    if (!names.ok()) return {};
    std::sort(names->begin(), names->end());
    return *names;
  }
};

TEST_F(LedgerTest, OpenCreatesTheDirectoryAndStartsEmpty) {
  auto ledger = OpenOrDie();
  ASSERT_NE(ledger, nullptr);
  EXPECT_TRUE(ledger->entries().empty());
  EXPECT_EQ(ledger->Find(IdOf(1, 1)), nullptr);
  EXPECT_EQ(LedgerDirNames(), (std::vector<std::string>{"journal", "lock"}));
  auto bytes = ledger->JournalBytes();
  CAIRN_ASSERT_OK(bytes);
  EXPECT_EQ(*bytes, 0u);
  CAIRN_EXPECT_OK(ledger->Append({}));  // nothing to write
  EXPECT_EQ(*ledger->JournalBytes(), 0u);
}

TEST_F(LedgerTest, AppendedEntriesSurviveReopen) {
  Model model;
  auto writer = OpenOrDie();
  ASSERT_NE(writer, nullptr);
  AppendTo(*writer, Batch(1, 1, 100), &model);
  AppendTo(*writer, Batch(2, 300, 200), &model);
  AppendTo(*writer, Batch(3, kMaxBatch + 10, 300), &model);  // two journal batches, one write
  EXPECT_TRUE(writer->entries().empty()) << "the view stays the state at Open()";
  EXPECT_EQ(*writer->JournalBytes(),
            BatchBytes(1) + BatchBytes(300) + BatchBytes(kMaxBatch) + BatchBytes(10));

  auto reader = OpenOrDie();
  ASSERT_NE(reader, nullptr);
  ExpectEntries(*reader, model);
  for (const auto& [id, e] : model) {
    const LedgerEntry* found = reader->Find(id);
    ASSERT_NE(found, nullptr);
    EXPECT_EQ(Key(*found), Key(e));
  }
  EXPECT_EQ(reader->Find(IdOf(4, 0)), nullptr);
}

TEST_F(LedgerTest, AppendRejectsAnUnknownVerdict) {
  auto ledger = OpenOrDie();
  ASSERT_NE(ledger, nullptr);
  std::vector<LedgerEntry> batch = {Entry(IdOf(1, 1), 1, static_cast<ChunkVerdict>(9))};
  EXPECT_EQ(CodeOf(ledger->Append(batch)), StatusCode::kInvalidArgument);
  EXPECT_EQ(*ledger->JournalBytes(), 0u);
}

TEST_F(LedgerTest, NewestTimeWinsAcrossLedgerAndJournal) {
  crypto::Digest a = IdOf(0, 1), b = IdOf(0, 2), c = IdOf(0, 3), d = IdOf(0, 4), e = IdOf(0, 5),
                 f = IdOf(0, 6);
  auto ledger = OpenOrDie();
  ASSERT_NE(ledger, nullptr);
  CAIRN_ASSERT_OK(ledger->Append(
      std::vector<LedgerEntry>{Entry(a, 10), Entry(b, 20, ChunkVerdict::kCorrupt), Entry(c, 30)}));
  CAIRN_ASSERT_OK(ledger->Compact());  // a, b, c now in the ledger file
  CAIRN_ASSERT_OK(ledger->Append(std::vector<LedgerEntry>{
      Entry(a, 15, ChunkVerdict::kCorrupt),  // newer than the ledger's: wins
      Entry(b, 5),                           // older: loses
      Entry(d, 1, ChunkVerdict::kError)}));
  CAIRN_ASSERT_OK(ledger->Append(std::vector<LedgerEntry>{
      Entry(a, 12),                                      // older than the journal's 15: loses
      Entry(c, 30, ChunkVerdict::kMissing),              // same time: the larger verdict wins
      Entry(d, 2), Entry(d, 1, ChunkVerdict::kCorrupt),  // within a batch too
      Entry(e, 40, ChunkVerdict::kCorrupt), Entry(e, 40), Entry(f, 40),
      Entry(f, 40, ChunkVerdict::kCorrupt)}));

  // On equal times the order of records does not matter: a failure beats kOk.
  std::vector<LedgerEntry> want = {
      Entry(a, 15, ChunkVerdict::kCorrupt), Entry(b, 20, ChunkVerdict::kCorrupt),
      Entry(c, 30, ChunkVerdict::kMissing), Entry(d, 2),
      Entry(e, 40, ChunkVerdict::kCorrupt), Entry(f, 40, ChunkVerdict::kCorrupt)};
  std::sort(want.begin(), want.end(),
            [](const LedgerEntry& x, const LedgerEntry& y) { return x.id < y.id; });
  auto reopened = OpenOrDie();
  ASSERT_NE(reopened, nullptr);
  EXPECT_EQ(Keys(reopened->entries()), Keys(want));
  CAIRN_ASSERT_OK(reopened->Compact());  // and the merge is what compaction keeps
  EXPECT_EQ(Keys(reopened->entries()), Keys(want));
  EXPECT_EQ(Keys(OpenOrDie()->entries()), Keys(want));
}

TEST_F(LedgerTest, CompactThenReopenGivesTheSameEntriesAndAnEmptyJournal) {
  Model model;
  auto early = OpenOrDie();  // opened before anything was appended
  ASSERT_NE(early, nullptr);
  auto writer = OpenOrDie();
  ASSERT_NE(writer, nullptr);
  for (uint64_t tag = 0; tag < 20; ++tag) {
    AppendTo(*writer, Batch(tag, 50, static_cast<int64_t>(1000 + tag)), &model);
  }
  AppendTo(*writer, Batch(3, 10, 5000), &model);  // newer results for some ids

  CAIRN_ASSERT_OK(early->Compact());  // re-reads what `writer` appended
  ExpectEntries(*early, model);
  EXPECT_EQ(*early->JournalBytes(), 0u);
  auto info = env_->Stat(LedgerFile());
  CAIRN_ASSERT_OK(info);
  EXPECT_EQ(info->size, kFileHeader + model.size() * kRecord);
  EXPECT_EQ(LedgerDirNames(), (std::vector<std::string>{"journal", "ledger", "lock"}));

  std::string warning;
  auto reopened = OpenOrDie(&warning);
  ASSERT_NE(reopened, nullptr);
  EXPECT_EQ(warning, "");
  ExpectEntries(*reopened, model);

  // Compacting again with an empty journal changes nothing.
  CAIRN_ASSERT_OK(reopened->Compact());
  ExpectEntries(*reopened, model);
  ExpectEntries(*OpenOrDie(), model);
}

TEST_F(LedgerTest, CompactRemovesTheTempFileOfAKilledCompaction) {
  auto ledger = OpenOrDie();
  ASSERT_NE(ledger, nullptr);
  test_util::WriteFileOrFail(dir_.Join(".ledger/ledger.tmp-424242"), AsBytes("half a ledger"));
  Model model;
  AppendTo(*ledger, Batch(1, 3, 7), &model);
  CAIRN_ASSERT_OK(ledger->Compact());
  EXPECT_EQ(LedgerDirNames(), (std::vector<std::string>{"journal", "ledger", "lock"}));
  ExpectEntries(*OpenOrDie(), model);
}

TEST_F(LedgerTest, CompactDoesNothingWhileAnotherHolderHasTheLock) {
  Model model;
  auto ledger = OpenOrDie();
  ASSERT_NE(ledger, nullptr);
  AppendTo(*ledger, Batch(1, 10, 7), &model);
  uint64_t journal = *ledger->JournalBytes();
  {
    auto held = env_->TryLock(dir_.Join(".ledger/lock"), /*exclusive=*/false);  // an appender
    CAIRN_ASSERT_OK(held);
    CAIRN_ASSERT_OK(ledger->Compact());  // Ok: next time
    EXPECT_EQ(*ledger->JournalBytes(), journal);
    EXPECT_EQ(CodeOf(env_->Stat(LedgerFile())), StatusCode::kNotFound);
  }
  CAIRN_ASSERT_OK(ledger->Compact());
  EXPECT_EQ(*ledger->JournalBytes(), 0u);
  ExpectEntries(*ledger, model);
}

// The bytes docs/FORMAT.md promises, for one record.
TEST_F(LedgerTest, FilesHaveTheDocumentedLayout) {
  crypto::Digest id;
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<uint8_t>(i);
  LedgerEntry e = Entry(id, 0x0102030405060708, ChunkVerdict::kMissing);
  Bytes record(id.begin(), id.end());
  record.insert(record.end(), {8, 7, 6, 5, 4, 3, 2, 1, 2});  // time LE, verdict

  auto ledger = OpenOrDie();
  ASSERT_NE(ledger, nullptr);
  CAIRN_ASSERT_OK(ledger->Append(std::vector<LedgerEntry>{e}));
  Bytes batch = {'C', 'A', 'I', 'R', 'N', 'J', 'N', 'L', 1, 0, 0, 0, 1, 0, 0, 0};
  batch.insert(batch.end(), record.begin(), record.end());
  uint32_t crc = format::Crc32c(batch);
  batch.resize(batch.size() + 4);
  format::PutU32(batch.data() + batch.size() - 4, crc);
  EXPECT_EQ(test_util::ReadFileOrFail(JournalFile()), batch);

  CAIRN_ASSERT_OK(ledger->Compact());
  Bytes file = {'C', 'A', 'I', 'R', 'N', 'L', 'D', 'G', 1, 0, 0, 0};
  file.resize(kFileHeader, 0);
  format::PutU32(file.data() + 12, format::Crc32c(record));
  format::PutU64(file.data() + 16, 1);
  format::PutU32(file.data() + 28, format::Crc32c(ByteSpan(file).first(28)));
  file.insert(file.end(), record.begin(), record.end());
  EXPECT_EQ(test_util::ReadFileOrFail(LedgerFile()), file);
  EXPECT_EQ(test_util::ReadFileOrFail(JournalFile()).size(), 0u);
}

// --- Damage ----------------------------------------------------------------

class LedgerDamageTest : public LedgerTest {
 protected:
  // Three batches of 5, 7 and 9 entries in the journal; their bytes and
  // where each starts.
  void SetUp() override {
    auto ledger = OpenOrDie();
    ASSERT_NE(ledger, nullptr);
    for (uint64_t tag = 0; tag < 3; ++tag) {
      AppendTo(*ledger, Batch(tag, sizes_[tag], static_cast<int64_t>(tag)), &models_[tag]);
    }
    journal_ = test_util::ReadFileOrFail(JournalFile());
    starts_ = {0, BatchBytes(5), BatchBytes(5) + BatchBytes(7), journal_.size()};
    ASSERT_EQ(journal_.size(), BatchBytes(5) + BatchBytes(7) + BatchBytes(9));
  }

  Model Without(size_t lost) const {
    Model m;
    for (size_t i = 0; i < 3; ++i) {
      if (i != lost) m.insert(models_[i].begin(), models_[i].end());
    }
    return m;
  }

  // Opens over `journal` and expects every batch but `lost`, with a warning
  // that counts `ignored` bytes.
  void ExpectAllBut(const Bytes& journal, size_t lost, size_t ignored) {
    test_util::WriteFileOrFail(JournalFile(), journal);
    std::string warning;
    auto ledger = OpenOrDie(&warning);
    ASSERT_NE(ledger, nullptr);
    ExpectEntries(*ledger, Without(lost));
    EXPECT_NE(warning.find(JournalFile()), std::string::npos) << warning;
    EXPECT_NE(warning.find(fmt::format("ignored {} of {} bytes", ignored, journal.size())),
              std::string::npos)
        << warning;
  }

  size_t sizes_[3] = {5, 7, 9};
  Model models_[3];
  Bytes journal_;
  std::vector<size_t> starts_;
};

TEST_F(LedgerDamageTest, JournalCutAnywhereInTheLastBatchLosesOnlyThatBatch) {
  size_t last = starts_[2];
  for (size_t cut : {last + 1, last + 8, last + 15, last + 16, last + 16 + 41 * 4 + 3,
                     journal_.size() - 4, journal_.size() - 1}) {
    SCOPED_TRACE(fmt::format("cut at {}", cut));
    ExpectAllBut(Bytes(journal_.begin(), journal_.begin() + cut), 2, cut - last);
  }
}

TEST_F(LedgerDamageTest, FlippedByteInTheLastBatchLosesOnlyThatBatch) {
  size_t last = starts_[2];
  // magic, version, count, an id, a time, a verdict, the CRC
  for (size_t at : {last, last + 8, last + 12, last + 16, last + 16 + 32, last + 16 + 40,
                    journal_.size() - 1}) {
    SCOPED_TRACE(fmt::format("byte {}", at));
    Bytes damaged = journal_;
    Flip(damaged, at);
    ExpectAllBut(damaged, 2, journal_.size() - last);
  }
}

// Several processes append to one journal: a batch torn by a killed writer
// may have whole batches of others after it. They survive.
TEST_F(LedgerDamageTest, DamagedOrTornBatchInTheMiddleLosesOnlyItself) {
  Bytes flipped = journal_;
  Flip(flipped, starts_[1] + 20);
  ExpectAllBut(flipped, 1, starts_[2] - starts_[1]);

  Bytes torn(journal_.begin(), journal_.begin() + starts_[1] + 30);  // half of batch 1
  torn.insert(torn.end(), journal_.begin() + starts_[2], journal_.end());
  ExpectAllBut(torn, 1, 30);

  Bytes garbage(journal_.begin(), journal_.begin() + starts_[2]);  // junk, then batch 2
  garbage.insert(garbage.end(), {'C', 'A', 'I', 'R', 'N', 'J', 'N', 'L', 'x'});
  garbage.insert(garbage.end(), journal_.begin() + starts_[2], journal_.end());
  test_util::WriteFileOrFail(JournalFile(), garbage);
  std::string warning;
  auto ledger = OpenOrDie(&warning);
  ASSERT_NE(ledger, nullptr);
  ExpectEntries(*ledger, Without(3));
  EXPECT_NE(warning.find("ignored 9 of"), std::string::npos) << warning;
}

TEST_F(LedgerDamageTest, DamagedLedgerFileGivesAWarningAndTheJournalsEntries) {
  // batches 0 and 1 go to the ledger file, batch 2 stays in the journal
  test_util::WriteFileOrFail(JournalFile(), ByteSpan(journal_).first(starts_[2]));
  CAIRN_ASSERT_OK(OpenOrDie()->Compact());
  Bytes good = test_util::ReadFileOrFail(LedgerFile());
  ASSERT_EQ(good.size(), kFileHeader + 12 * kRecord);
  Bytes tail(journal_.begin() + starts_[2], journal_.end());

  Bytes bad_version = good;  // a version this cairn does not read, CRC right
  format::PutU16(bad_version.data() + 8, 2);
  format::PutU32(bad_version.data() + 28, format::Crc32c(ByteSpan(bad_version).first(28)));
  std::vector<std::pair<std::string, Bytes>> cases = {
      {"empty", Bytes{}},
      {"short header", Bytes(good.begin(), good.begin() + 20)},
      {"truncated records", Bytes(good.begin(), good.end() - 1)},
      {"extended",
       [&] {
         Bytes b = good;
         b.push_back(0);
         return b;
       }()},
      {"magic",
       [&] {
         Bytes b = good;
         Flip(b, 0);
         return b;
       }()},
      {"header CRC",
       [&] {
         Bytes b = good;
         Flip(b, 17);
         return b;
       }()},
      {"record",
       [&] {
         Bytes b = good;
         Flip(b, kFileHeader + 5 * kRecord + 3);
         return b;
       }()},
      {"version", bad_version},
  };
  for (const auto& [name, bytes] : cases) {
    SCOPED_TRACE(name);
    test_util::WriteFileOrFail(LedgerFile(), bytes);
    test_util::WriteFileOrFail(JournalFile(), tail);
    std::string warning;
    auto ledger = OpenOrDie(&warning);
    ASSERT_NE(ledger, nullptr);
    ExpectEntries(*ledger, models_[2]);
    EXPECT_NE(warning.find(LedgerFile()), std::string::npos) << warning;
    EXPECT_EQ(test_util::ReadFileOrFail(LedgerFile()), bytes) << "Open() must leave it alone";
  }

  // Compaction replaces the damaged file with what the journal holds.
  std::string warning;
  CAIRN_ASSERT_OK(OpenOrDie(&warning)->Compact());
  auto ledger = OpenOrDie(&warning);
  ASSERT_NE(ledger, nullptr);
  EXPECT_EQ(warning, "");
  ExpectEntries(*ledger, models_[2]);
}

// A valid-looking ledger whose records are out of order (a writer bug, or
// a hand-made file) is damage too, not a source of duplicates.
TEST_F(LedgerDamageTest, LedgerWithUnsortedRecordsIsIgnored) {
  CAIRN_ASSERT_OK(OpenOrDie()->Compact());
  Bytes file = test_util::ReadFileOrFail(LedgerFile());
  ASSERT_EQ(file.size(), kFileHeader + 21 * kRecord);
  std::swap_ranges(file.begin() + kFileHeader, file.begin() + kFileHeader + kRecord,
                   file.begin() + kFileHeader + kRecord);
  format::PutU32(file.data() + 12, format::Crc32c(ByteSpan(file).subspan(kFileHeader)));
  format::PutU32(file.data() + 28, format::Crc32c(ByteSpan(file).first(28)));
  test_util::WriteFileOrFail(LedgerFile(), file);
  std::string warning;
  auto ledger = OpenOrDie(&warning);
  ASSERT_NE(ledger, nullptr);
  EXPECT_TRUE(ledger->entries().empty());
  EXPECT_NE(warning.find("out of order"), std::string::npos) << warning;
}

// Whatever the files hold, Open() neither crashes nor fails, its entries
// are sorted and unique, and compacting then reopening keeps exactly them.
TEST_F(LedgerDamageTest, RandomGarbageNeverCrashesOrFails) {
  CAIRN_ASSERT_OK(OpenOrDie()->Compact());
  Bytes good_ledger = test_util::ReadFileOrFail(LedgerFile());
  std::mt19937_64 rng(7);
  auto random_bytes = [&](size_t max) { return test_util::RandomBytes(rng() % (max + 1), rng()); };
  for (int round = 0; round < 300; ++round) {
    SCOPED_TRACE(fmt::format("round {}", round));
    Bytes ledger_bytes, journal_bytes;
    switch (round % 4) {
      case 0:  // pure noise
        ledger_bytes = random_bytes(500);
        journal_bytes = random_bytes(500);
        break;
      case 1:  // good prefixes, noisy tails
        ledger_bytes.assign(good_ledger.begin(), good_ledger.begin() + rng() % good_ledger.size());
        journal_bytes = random_bytes(300);
        journal_bytes.insert(journal_bytes.end(), journal_.begin(),
                             journal_.begin() + rng() % journal_.size());
        break;
      default: {  // good files with random bytes overwritten, batches spliced in noise
        ledger_bytes = good_ledger;
        for (int i = 0; i < 3; ++i) ledger_bytes[rng() % ledger_bytes.size()] = rng();
        for (int piece = 0; piece < 4; ++piece) {
          Bytes noise = random_bytes(60);
          if (rng() % 2)
            noise.insert(noise.end(), format::kLedgerBatchMagic.begin(),
                         format::kLedgerBatchMagic.end());
          journal_bytes.insert(journal_bytes.end(), noise.begin(), noise.end());
          size_t b = rng() % 3;
          journal_bytes.insert(journal_bytes.end(), journal_.begin() + starts_[b],
                               journal_.begin() + starts_[b + 1]);
        }
        for (int i = 0; i < 2; ++i) journal_bytes[rng() % journal_bytes.size()] = rng();
        break;
      }
    }
    test_util::WriteFileOrFail(LedgerFile(), ledger_bytes);
    test_util::WriteFileOrFail(JournalFile(), journal_bytes);
    std::string warning;
    auto ledger = Ledger::Open(*env_, dir_.path(), &warning);
    CAIRN_ASSERT_OK(ledger);
    const auto& entries = (*ledger)->entries();
    for (size_t i = 1; i < entries.size(); ++i) ASSERT_LT(entries[i - 1].id, entries[i].id);
    for (const LedgerEntry& e : entries) {
      ASSERT_LE(static_cast<int>(e.verdict), static_cast<int>(ChunkVerdict::kError));
    }
    std::vector<LedgerEntry> seen = entries;
    CAIRN_ASSERT_OK((*ledger)->Compact());
    EXPECT_EQ(Keys((*ledger)->entries()), Keys(seen));
    std::string after;
    auto reopened = Ledger::Open(*env_, dir_.path(), &after);
    CAIRN_ASSERT_OK(reopened);
    EXPECT_EQ(after, "");
    EXPECT_EQ(Keys((*reopened)->entries()), Keys(seen));
  }
}

// --- Concurrency -----------------------------------------------------------

// Two Ledger objects stand for two processes: each Append opens its own
// descriptors and takes its own flock, exactly as another process would.
TEST_F(LedgerTest, TwoLedgersAppendingFromThreadsLoseNothing) {
  auto first = OpenOrDie();
  auto second = OpenOrDie();
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  constexpr int kThreads = 4;
  constexpr int kBatches = 60;
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < kThreads; ++t) {
      Ledger* ledger = t % 2 ? second.get() : first.get();
      threads.emplace_back([ledger, t] {
        for (int b = 0; b < kBatches; ++b) {
          uint64_t tag = static_cast<uint64_t>(t * kBatches + b);
          CAIRN_ASSERT_OK(ledger->Append(Batch(tag, 1 + tag % 40, static_cast<int64_t>(tag))));
        }
      });
    }
  }
  auto reopened = OpenOrDie();
  ASSERT_NE(reopened, nullptr);
  size_t expected = 0;
  for (uint64_t tag = 0; tag < kThreads * kBatches; ++tag) {
    for (const LedgerEntry& e : Batch(tag, 1 + tag % 40, static_cast<int64_t>(tag))) {
      const LedgerEntry* found = reopened->Find(e.id);
      ASSERT_NE(found, nullptr) << "batch " << tag;
      EXPECT_EQ(Key(*found), Key(e));
      ++expected;
    }
  }
  EXPECT_EQ(reopened->entries().size(), expected);
}

// Compaction re-reads and empties the journal under the exclusive lock
// while appenders hold it shared: a batch landing at any moment survives.
TEST_F(LedgerTest, CompactWhileAnotherHolderAppendsLosesNothing) {
  auto appender = OpenOrDie();
  auto compactor = OpenOrDie();
  ASSERT_NE(appender, nullptr);
  ASSERT_NE(compactor, nullptr);
  constexpr uint64_t kBatches = 300;
  std::atomic<bool> done{false};
  std::jthread thread([&] {
    for (uint64_t tag = 0; tag < kBatches; ++tag) {
      CAIRN_EXPECT_OK(appender->Append(Batch(tag, 1 + tag % 30, static_cast<int64_t>(tag))));
      if (tag % 4 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
      if (tag == kBatches / 2) {
        // Halfway, until a compaction has run (a descheduled compactor
        // could otherwise miss the whole run), so later batches land on a
        // compacted ledger.
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (!env_->Stat(LedgerFile()).ok() && std::chrono::steady_clock::now() < give_up) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
      }
    }
    done = true;
  });
  do {
    CAIRN_ASSERT_OK(compactor->Compact());
    std::this_thread::sleep_for(std::chrono::microseconds(300));  // let appenders in
  } while (!done);
  thread.join();
  EXPECT_TRUE(env_->Stat(LedgerFile()).ok()) << "no compaction ran while appending";

  auto check = [&](const Ledger& ledger) {
    size_t expected = 0;
    for (uint64_t tag = 0; tag < kBatches; ++tag) {
      for (const LedgerEntry& e : Batch(tag, 1 + tag % 30, static_cast<int64_t>(tag))) {
        const LedgerEntry* found = ledger.Find(e.id);
        ASSERT_NE(found, nullptr) << "batch " << tag;
        EXPECT_EQ(Key(*found), Key(e));
        ++expected;
      }
    }
    EXPECT_EQ(ledger.entries().size(), expected);
  };
  auto reopened = OpenOrDie();
  ASSERT_NE(reopened, nullptr);
  check(*reopened);
  CAIRN_ASSERT_OK(reopened->Compact());
  EXPECT_EQ(*reopened->JournalBytes(), 0u);
  check(*OpenOrDie());
}

// --- Crash -----------------------------------------------------------------

// A child process appends batches without end, over and over (some large
// enough that a SIGKILL can land mid-write; appending a batch again changes
// nothing), and is killed at a random moment: the ledger
// then holds whole batches only, in order, and nothing else, and says that
// it dropped a torn one. Rounds go on (up to kMaxRounds) until some kill
// has torn a batch: a test whose kills all fell between batches would not
// have tested the torn tail at all.
TEST_F(LedgerTest, KilledAppenderLeavesOnlyWholeBatches) {
  const std::vector<size_t> sizes = {1, 9, 300, 5000, 40000, 2};
  constexpr uint64_t kBatches = 36;
  std::vector<std::vector<LedgerEntry>> batches;  // made before fork: the child only writes
  for (uint64_t k = 0; k < kBatches; ++k) {
    batches.push_back(Batch(k, sizes[k % sizes.size()], static_cast<int64_t>(k)));
  }
  constexpr int kMinRounds = 12;
  constexpr int kMaxRounds = 80;
  std::mt19937_64 rng(11);
  int torn = 0;
  int round = 0;
  for (; round < kMinRounds || (torn == 0 && round < kMaxRounds); ++round) {
    SCOPED_TRACE(fmt::format("round {}", round));
    test_util::TempDir dir;
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {  // child: no gtest here, just append until killed
      ::close(ready[0]);
      auto env = NewPosixEnv();
      auto ledger = Ledger::Open(*env, dir.path(), nullptr);
      if (!ledger.ok()) ::_exit(2);
      if (::write(ready[1], "x", 1) != 1) ::_exit(3);
      for (;;) {
        for (const auto& batch : batches) {
          if (!(*ledger)->Append(batch).ok()) ::_exit(4);
        }
      }
    }
    ::close(ready[1]);
    char byte;
    ASSERT_EQ(::read(ready[0], &byte, 1), 1) << "the child could not open the ledger";
    ::close(ready[0]);
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 60000));
    ::kill(pid, SIGKILL);
    int wstatus = 0;
    ASSERT_EQ(::waitpid(pid, &wstatus, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(wstatus)) << "child exited with " << WEXITSTATUS(wstatus);

    std::string warning;
    auto ledger = Ledger::Open(*env_, dir.path(), &warning);
    CAIRN_ASSERT_OK(ledger);
    const auto& entries = (*ledger)->entries();
    std::map<int64_t, size_t> per_batch;
    for (const LedgerEntry& e : entries) ++per_batch[e.time];
    uint64_t whole = per_batch.size();
    if (whole > 0) {
      EXPECT_EQ(per_batch.rbegin()->first, static_cast<int64_t>(whole - 1)) << "a gap";
    }
    size_t total = 0;
    for (uint64_t k = 0; k < whole; ++k) {
      const std::vector<LedgerEntry>& expected = batches[k];
      ASSERT_EQ(per_batch[static_cast<int64_t>(k)], expected.size()) << "batch " << k;
      for (const LedgerEntry& e : expected) {
        const LedgerEntry* found = (*ledger)->Find(e.id);
        ASSERT_NE(found, nullptr);
        ASSERT_EQ(Key(*found), Key(e));
      }
      total += expected.size();
    }
    EXPECT_EQ(entries.size(), total);
    if (!warning.empty()) {
      EXPECT_NE(warning.find("journal"), std::string::npos) << warning;
      ++torn;
    }
  }
  std::cout << "[          ] " << torn << " of " << round << " kills tore a batch\n";
  EXPECT_GE(torn, 1) << "no kill in " << round << " landed inside a batch's write";
}

// --- Scale -----------------------------------------------------------------

TEST_F(LedgerTest, MillionEntriesLoad) {
  constexpr size_t kEntries = 1000000;
  std::vector<LedgerEntry> all(kEntries);
  std::mt19937_64 rng(3);
  for (LedgerEntry& e : all) {
    for (size_t i = 0; i < e.id.size(); i += 8) format::PutU64(e.id.data() + i, rng());
    e.time = static_cast<int64_t>(rng() % 2000000000);
    e.verdict = static_cast<ChunkVerdict>(rng() % 4);
  }
  auto ledger = OpenOrDie();
  ASSERT_NE(ledger, nullptr);
  CAIRN_ASSERT_OK(ledger->Append(all));
  std::sort(all.begin(), all.end(),
            [](const LedgerEntry& a, const LedgerEntry& b) { return a.id < b.id; });

  auto timed_open = [&](const char* what) {
    auto start = std::chrono::steady_clock::now();
    auto opened = OpenOrDie();
    std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    std::cout << "[          ] 1 M entries from the " << what << ": " << took.count() << " s\n";
    return opened;
  };
  auto from_journal = timed_open("journal");
  ASSERT_NE(from_journal, nullptr);
  EXPECT_EQ(Keys(from_journal->entries()), Keys(all));
  from_journal.reset();

  CAIRN_ASSERT_OK(ledger->Compact());
  auto from_ledger = timed_open("ledger file");
  ASSERT_NE(from_ledger, nullptr);
  EXPECT_EQ(Keys(from_ledger->entries()), Keys(all));
  // Memory: the one vector, 48 bytes an entry, no slack.
  EXPECT_EQ(from_ledger->entries().capacity(), kEntries);
  for (size_t i = 0; i < kEntries; i += 9973) {
    EXPECT_EQ(from_ledger->Find(all[i].id), &from_ledger->entries()[i]);
  }
}

}  // namespace
}  // namespace cairn::verify
