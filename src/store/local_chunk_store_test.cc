#include "store/local_chunk_store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <thread>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "base/fault_injection_env.h"
#include "base/io_error.h"
#include "blob/blob.h"
#include "tests/unit_test_util.h"

namespace cairn::store {
namespace {

using test_util::CodeOf;

class LocalChunkStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CAIRN_ASSERT_OK(LocalChunkStore::Create(*env_, dir_.path()));
    auto store = LocalChunkStore::Open(*env_, dir_.path());
    CAIRN_ASSERT_OK(store);
    store_ = std::move(*store);
  }

  // A chunk as backup stores it: (id, encoded blob).
  static std::pair<ChunkId, Bytes> MakeChunk(uint64_t seed, size_t size = 1000) {
    Bytes plain = test_util::RandomBytes(size, seed);
    auto stored = blob::Encode(plain);
    EXPECT_TRUE(stored.ok());
    return {crypto::Sha256(plain), stored.ok() ? *stored : Bytes()};
  }

  std::vector<std::string> ListPrefixDir(const ChunkId& id) {
    auto names = env_->ListDir(DirName(store_->ChunkPath(id)));
    EXPECT_TRUE(names.ok()) << names.status().ToString();
    return names.ok() ? *names : std::vector<std::string>{};
  }

  std::unique_ptr<Env> env_ = NewPosixEnv();
  test_util::TempDir dir_;
  std::unique_ptr<LocalChunkStore> store_;
};

TEST_F(LocalChunkStoreTest, InsertReadContains) {
  auto [id, stored] = MakeChunk(1);
  auto before = store_->Contains(id);
  CAIRN_ASSERT_OK(before);
  EXPECT_FALSE(*before);

  auto ins = store_->Insert(id, stored);
  CAIRN_ASSERT_OK(ins);
  EXPECT_TRUE(ins->inserted);
  EXPECT_EQ(ins->stored_bytes, stored.size());

  auto after = store_->Contains(id);
  CAIRN_ASSERT_OK(after);
  EXPECT_TRUE(*after);
  auto read = store_->Read(id);
  CAIRN_ASSERT_OK(read);
  EXPECT_EQ(*read, stored);
  CAIRN_EXPECT_OK(blob::DecodeChunk(*read, id));

  std::string path = store_->ChunkPath(id);
  EXPECT_EQ(path.rfind(dir_.path() + "/.chunks/", 0), 0u) << path;
  EXPECT_NE(path.find(crypto::DigestHex(id)), std::string::npos);
  EXPECT_EQ(ListPrefixDir(id), std::vector<std::string>{crypto::DigestHex(id)});
  CAIRN_EXPECT_OK(store_->Flush());
}

// InsertAbsentDirect: a chunk file's aligned first part goes past the page
// cache, the tail buffered; every size reads back whole (below the minimum,
// whole pages, pages and a tail), and a second insert still leaves the
// first copy alone.
TEST_F(LocalChunkStoreTest, DirectWritesKeepEveryByte) {
  const size_t min = LocalChunkStore::kDirectWriteMinBytes;
  uint64_t seed = 100;
  for (size_t plain_size : {size_t{1000}, min - 1, min, 3 * min + 4096, 3 * min + 1234,
                            size_t{4} << 20}) {
    SCOPED_TRACE(plain_size);
    auto [id, stored] = MakeChunk(++seed, plain_size);
    auto ins = store_->InsertAbsentDirect(id, stored);
    CAIRN_ASSERT_OK(ins);
    EXPECT_TRUE(ins->inserted);
    auto back = store_->Read(id);
    CAIRN_ASSERT_OK(back);
    EXPECT_EQ(*back, stored);
    auto again = store_->InsertAbsentDirect(id, stored);  // raced: the first copy stays
    CAIRN_ASSERT_OK(again);
    EXPECT_FALSE(again->inserted);
  }
  // The blob's own length may be anything: one of whole pages exactly.
  Bytes pages(2 * min, 0x5a);
  ChunkId raw_id = crypto::Sha256(pages);
  CAIRN_ASSERT_OK(store_->InsertAbsentDirect(raw_id, pages));
  auto back = store_->Read(raw_id);
  CAIRN_ASSERT_OK(back);
  EXPECT_EQ(*back, pages);
  CAIRN_ASSERT_OK(store_->Flush());
}

TEST_F(LocalChunkStoreTest, EveryPrefixDirectoryExistsAfterCreate) {
  for (uint64_t seed = 0; seed < 64; ++seed) {
    auto [id, stored] = MakeChunk(seed, 10);
    auto info = env_->Stat(DirName(store_->ChunkPath(id)));
    CAIRN_ASSERT_OK(info);
    EXPECT_TRUE(info->is_dir);
  }
  ChunkId low{};
  ChunkId high;
  high.fill(0xff);
  CAIRN_EXPECT_OK(env_->Stat(DirName(store_->ChunkPath(low))));
  CAIRN_EXPECT_OK(env_->Stat(DirName(store_->ChunkPath(high))));
}

TEST_F(LocalChunkStoreTest, SecondInsertDoesNotRewrite) {
  auto [id, stored] = MakeChunk(2);
  CAIRN_ASSERT_OK(store_->Insert(id, stored));
  auto first = env_->Stat(store_->ChunkPath(id));
  CAIRN_ASSERT_OK(first);

  // Even different bytes under the same id leave the stored chunk alone.
  Bytes other = stored;
  other.back() ^= 1;
  auto again = store_->Insert(id, other);
  CAIRN_ASSERT_OK(again);
  EXPECT_FALSE(again->inserted);
  EXPECT_EQ(again->stored_bytes, 0u);
  auto second = env_->Stat(store_->ChunkPath(id));
  CAIRN_ASSERT_OK(second);
  EXPECT_EQ(second->inode, first->inode);
  EXPECT_EQ(second->mtime_ns, first->mtime_ns);
  auto read = store_->Read(id);
  CAIRN_ASSERT_OK(read);
  EXPECT_EQ(*read, stored);
  EXPECT_EQ(ListPrefixDir(id).size(), 1u);  // no temp file left behind
}

TEST_F(LocalChunkStoreTest, ConcurrentInsertsOfOneId) {
  // Not a structured binding: the threads' lambda captures both, which
  // clang 14 (the sanitizer build's compiler) does not allow.
  const auto chunk = MakeChunk(3, 200000);
  const auto& id = chunk.first;
  const auto& stored = chunk.second;
  constexpr int kThreads = 8;
  std::vector<Result<InsertResult>> results(kThreads, InternalError("not run"));
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] { results[t] = store_->Insert(id, stored); });
    }
  }
  int inserted = 0;
  for (const auto& r : results) {
    CAIRN_ASSERT_OK(r);
    if (r->inserted) ++inserted;
  }
  EXPECT_GE(inserted, 1);
  auto read = store_->Read(id);
  CAIRN_ASSERT_OK(read);
  EXPECT_EQ(*read, stored);
  EXPECT_EQ(ListPrefixDir(id), std::vector<std::string>{crypto::DigestHex(id)});
}

TEST_F(LocalChunkStoreTest, ConcurrentInsertsOfManyIds) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 50;
  std::vector<Status> errors(kThreads);
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kPerThread; ++i) {
          // Every id is inserted by two threads.
          auto [id, stored] = MakeChunk(static_cast<uint64_t>((t / 2) * 1000 + i), 300);
          auto r = store_->Insert(id, stored);
          if (!r.ok()) errors[t] = r.status();
        }
      });
    }
  }
  for (const Status& s : errors) CAIRN_EXPECT_OK(s);
  for (int t = 0; t < kThreads; t += 2) {
    for (int i = 0; i < kPerThread; ++i) {
      auto [id, stored] = MakeChunk(static_cast<uint64_t>((t / 2) * 1000 + i), 300);
      auto read = store_->Read(id);
      CAIRN_ASSERT_OK(read);
      ASSERT_EQ(*read, stored);
    }
  }
}

TEST_F(LocalChunkStoreTest, ReadOfMissingIdIsNotFoundNamingIt) {
  auto [id, stored] = MakeChunk(4);
  auto r = store_->Read(id);
  EXPECT_EQ(CodeOf(r), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find(crypto::DigestHex(id)), std::string_view::npos)
      << r.status().ToString();
  EXPECT_NE(r.status().message().find(dir_.path()), std::string_view::npos);
}

TEST_F(LocalChunkStoreTest, LeftoverTempFilesAreIgnored) {
  auto [id, stored] = MakeChunk(5);
  std::string tmp = store_->ChunkPath(id) + ".tmp-99999-0";
  test_util::WriteFileOrFail(tmp, AsBytes("torn write"));
  auto present = store_->Contains(id);
  CAIRN_ASSERT_OK(present);
  EXPECT_FALSE(*present);
  EXPECT_EQ(CodeOf(store_->Read(id)), StatusCode::kNotFound);

  auto ins = store_->Insert(id, stored);
  CAIRN_ASSERT_OK(ins);
  EXPECT_TRUE(ins->inserted);
  auto read = store_->Read(id);
  CAIRN_ASSERT_OK(read);
  EXPECT_EQ(*read, stored);
  EXPECT_EQ(AsStringView(test_util::ReadFileOrFail(tmp)), "torn write");  // not ours to remove
}

TEST_F(LocalChunkStoreTest, EmptyChunkFileIsATornInsert) {
  auto [id, stored] = MakeChunk(6);
  test_util::WriteFileOrFail(store_->ChunkPath(id), ByteSpan());
  auto present = store_->Contains(id);
  CAIRN_ASSERT_OK(present);
  EXPECT_FALSE(*present);
  auto ins = store_->Insert(id, stored);
  CAIRN_ASSERT_OK(ins);
  EXPECT_TRUE(ins->inserted);
  auto read = store_->Read(id);
  CAIRN_ASSERT_OK(read);
  EXPECT_EQ(*read, stored);
}

// InsertAbsent (the caller has just been told Contains() is false) asks
// nothing first, yet still never replaces a chunk that is there, and a torn
// one still gives way.
TEST_F(LocalChunkStoreTest, InsertAbsentNeverReplacesAndRepairsTorn) {
  auto [id, stored] = MakeChunk(9);
  auto [torn_id, torn_stored] = MakeChunk(10);
  Bytes other = stored;
  other.back() ^= 1;
  test_util::WriteFileOrFail(store_->ChunkPath(torn_id), ByteSpan());
  // (id, bytes, inserted, what the store then holds)
  const std::vector<std::tuple<ChunkId, Bytes, bool, Bytes>> steps = {
      {id, stored, true, stored},  // new
      {id, other, false, stored},  // there already: left alone
      {torn_id, torn_stored, true, torn_stored},  // torn: gives way
  };
  for (const auto& [chunk, bytes, inserted, held] : steps) {
    auto r = store_->InsertAbsent(chunk, bytes);
    CAIRN_ASSERT_OK(r);
    EXPECT_EQ(r->inserted, inserted);
    EXPECT_EQ(r->stored_bytes, inserted ? bytes.size() : 0u);
    auto read = store_->Read(chunk);
    CAIRN_ASSERT_OK(read);
    EXPECT_EQ(*read, held);
  }
  EXPECT_EQ(ListPrefixDir(id).size(), 1u);  // no temp file left behind
}

TEST_F(LocalChunkStoreTest, ChunkFileCutShortIsATornInsert) {
  // What a power cut leaves of a chunk renamed into place before its
  // contents reached the disk: a page-aligned prefix.
  auto [id, stored] = MakeChunk(8, 20000);
  ASSERT_GT(stored.size(), 8192u);
  for (size_t keep : {size_t{4096}, size_t{8192}, size_t{40}}) {
    SCOPED_TRACE(keep);
    test_util::WriteFileOrFail(store_->ChunkPath(id), ByteSpan(stored.data(), keep));
    auto present = store_->Contains(id);
    CAIRN_ASSERT_OK(present);
    EXPECT_FALSE(*present);
    auto ins = store_->Insert(id, stored);
    CAIRN_ASSERT_OK(ins);
    EXPECT_TRUE(ins->inserted);
    auto read = store_->Read(id);
    CAIRN_ASSERT_OK(read);
    EXPECT_EQ(*read, stored);
    auto whole = store_->Contains(id);
    CAIRN_ASSERT_OK(whole);
    EXPECT_TRUE(*whole);
  }
}

TEST_F(LocalChunkStoreTest, UnreadableChunkIsReplacedByTheNextInsert) {
  // A bad sector under a stored chunk: reads fail with EIO. Read says so;
  // Contains says absent, so an insert of the chunk writes a good copy over
  // it (verify leaves such a chunk in place: verify/verify.cc).
  auto [id, stored] = MakeChunk(9, 5000);
  CAIRN_ASSERT_OK(store_->Insert(id, stored));
  FaultInjectionEnv faulty(env_.get());
  auto over = LocalChunkStore::Open(faulty, dir_.path());
  CAIRN_ASSERT_OK(over);
  const std::string path = store_->ChunkPath(id);
  faulty.FailReadsMatching(crypto::DigestHex(id));
  auto read = (*over)->Read(id);
  EXPECT_TRUE(IsIoError(read.status())) << read.status().ToString();
  EXPECT_NE(read.status().message().find(crypto::DigestHex(id)), std::string_view::npos);
  struct stat before {};
  ASSERT_EQ(::stat(path.c_str(), &before), 0);
  auto present = (*over)->Contains(id);
  CAIRN_ASSERT_OK(present);
  EXPECT_FALSE(*present);
  auto ins = (*over)->Insert(id, stored);
  CAIRN_ASSERT_OK(ins);
  EXPECT_TRUE(ins->inserted);
  struct stat after {};
  ASSERT_EQ(::stat(path.c_str(), &after), 0);
  EXPECT_NE(after.st_ino, before.st_ino);  // a new file took its place
  faulty.FailReadsMatching("");
  auto again = (*over)->Read(id);
  CAIRN_ASSERT_OK(again);
  EXPECT_EQ(*again, stored);
  // Other read errors still fail the insert rather than replace anything.
  EXPECT_FALSE(IsIoError(DataLossError("chunk x: CRC mismatch")));
  EXPECT_FALSE(IsIoError(UnavailableError("read x: Input/output error")));
  EXPECT_TRUE(IsIoError(ErrnoToStatus(EIO, "read x")));
}

TEST_F(LocalChunkStoreTest, StaleTemporaryWithOurPidIsNotTheChunk) {
  // Left by a writer that crashed with the pid we have now (pids repeat
  // after a reboot): the insert must still store the chunk.
  auto [id, stored] = MakeChunk(9);
  for (int n = 0; n < 3; ++n) {
    test_util::WriteFileOrFail(fmt::format("{}.tmp-{}-{}", store_->ChunkPath(id), ::getpid(), n),
                               AsBytes("stale"));
  }
  auto ins = store_->Insert(id, stored);
  CAIRN_ASSERT_OK(ins);
  EXPECT_TRUE(ins->inserted);
  auto read = store_->Read(id);
  CAIRN_ASSERT_OK(read);
  EXPECT_EQ(*read, stored);
}

TEST_F(LocalChunkStoreTest, OversizedChunkFileIsDataLoss) {
  auto [id, stored] = MakeChunk(7);
  std::string path = store_->ChunkPath(id);
  test_util::WriteFileOrFail(path, ByteSpan());
  ASSERT_EQ(::truncate(path.c_str(), blob::kHeaderSize + blob::kMaxRawSize + 1), 0);
  auto r = store_->Read(id);
  EXPECT_EQ(CodeOf(r), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find(crypto::DigestHex(id)), std::string_view::npos);
}

TEST_F(LocalChunkStoreTest, OpenRequiresChunkDirectory) {
  test_util::TempDir other;
  auto r = LocalChunkStore::Open(*env_, other.path());
  EXPECT_EQ(CodeOf(r), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find(other.path()), std::string_view::npos);
  EXPECT_EQ(CodeOf(LocalChunkStore::Create(*env_, dir_.path())), StatusCode::kAlreadyExists);
}

TEST_F(LocalChunkStoreTest, TraitsDescribeTheStore) {
  SourceTraits t = store_->Traits();
  EXPECT_GT(t.initial_reads_in_flight, 0);
  EXPECT_NE(t.description.find(dir_.path()), std::string::npos);
}

TEST_F(LocalChunkStoreTest, ReadIntoReusesTheBuffer) {
  auto [id, stored] = MakeChunk(9, 5000);
  CAIRN_ASSERT_OK(store_->Insert(id, stored));
  ReadBuffer buffer;
  buffer.Resize(100000);
  const uint8_t* before = buffer.data();
  CAIRN_ASSERT_OK(store_->ReadInto(id, &buffer));
  EXPECT_EQ(Bytes(buffer.begin(), buffer.end()), stored);
  EXPECT_EQ(buffer.data(), before);  // read into the same memory
  auto [missing, unused] = MakeChunk(10);
  Status s = store_->ReadInto(missing, &buffer);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find(crypto::DigestHex(missing)), std::string_view::npos);
}

TEST_F(LocalChunkStoreTest, ReadAsyncDefaultCallsBackOnce) {
  auto [id, stored] = MakeChunk(8);
  CAIRN_ASSERT_OK(store_->Insert(id, stored));
  int calls = 0;
  Bytes got;
  store_->ReadAsync(id, [&](Result<Bytes> r) {
    ++calls;
    if (r.ok()) got = *r;
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(got, stored);
}

}  // namespace
}  // namespace cairn::store
