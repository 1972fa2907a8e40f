// cairn-synth-store: benchmark helpers that work on a datastore through
// cairn's own libraries (bench/verify_bench.sh uses both modes).
//
//   cairn-synth-store write STORE --chunks N [--chunk-size 64K] [--threads T] [--id vm/synth]
//                     [--index-only]
//   cairn-synth-store decode-limit STORE [--threads T] [--passes P]
//
// write: creates the datastore STORE (it must not exist) holding one
//   snapshot TYPE/ID/TIME with one image archive disk0.img of N distinct
//   chunks of --chunk-size bytes (default and smallest: index::kMinChunkSize,
//   64 KiB), so verify has N chunks to track with as little data as possible.
//   Chunk i (0-based) is zeros except its last 8 bytes, which hold i + 1
//   (little-endian): it compresses to almost nothing, yet every chunk is
//   distinct and none is the all-zero chunk. Putting the number at the end
//   lets SHA-256 hash the common zero prefix once (a copied midstate), so a
//   million chunks take seconds to make, not the 64 GiB of hashing they
//   would otherwise need. Chunks go through LocalChunkStore::Insert (blob
//   encoding with zstd, as a backup stores them) and the snapshot through
//   datastore::SnapshotWriter, so the format is exactly cairn's.
//
// decode-limit: the machine's limit for verify's CPU work. Collects the
//   distinct (id, length) chunks of every snapshot in STORE (the set `cairn
//   verify` checks), reads all their stored bytes into memory (untimed),
//   then times, on T threads (default: all online CPUs) pulling chunks from a
//   shared counter in id order, exactly the per-chunk check verify makes:
//   blob::DecodeChunkView (CRC32C of the stored bytes, zstd decompression,
//   SHA-256 of the plaintext against the id) and the length. No file I/O,
//   no pipeline, no controller: an upper bound for verify on warm data.
//   With --passes P the timed pass runs P times and the median is reported.
//
// Both print one JSON object on stdout. Exit codes: 0 ok, 1 failure (or a
// chunk that failed its check), 2 usage error.
#include <fmt/format.h>
#include <openssl/evp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "base/bytes.h"
#include "base/env.h"
#include "blob/blob.h"
#include "datastore/datastore.h"
#include "datastore/snapshot_writer.h"
#include "index/fixed_index.h"

namespace cairn::bench {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int Fail(const Status& s) {
  fmt::print(stderr, "cairn-synth-store: {}\n", s.ToString());
  return 1;
}

unsigned DefaultThreads() { return std::max(1u, std::thread::hardware_concurrency()); }

// Runs fn(i) for i in [0, n) on `threads` threads pulling from one counter;
// the first error wins and stops the others.
Status ParallelFor(size_t n, unsigned threads, const std::function<Status(size_t)>& fn) {
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  Status first;
  std::mutex mu;
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (size_t i; !failed.load(std::memory_order_relaxed) &&
                     (i = next.fetch_add(1, std::memory_order_relaxed)) < n;) {
        Status s = fn(i);
        if (!s.ok()) {
          std::lock_guard lock(mu);
          if (!failed.exchange(true)) first = s;
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  return first;
}

// SHA-256 of `chunk_size` bytes: zeros, then the 8-byte tail. The state
// after the zero prefix is computed once and copied for every chunk.
class TailHasher {
 public:
  explicit TailHasher(uint32_t chunk_size) : base_(EVP_MD_CTX_new()) {
    Bytes zeros(chunk_size - kBlock, 0);
    if (base_ == nullptr || EVP_DigestInit_ex(base_, EVP_sha256(), nullptr) != 1 ||
        EVP_DigestUpdate(base_, zeros.data(), zeros.size()) != 1) {
      throw std::runtime_error("OpenSSL SHA-256 init failed");
    }
  }
  ~TailHasher() { EVP_MD_CTX_free(base_); }
  TailHasher(const TailHasher&) = delete;
  TailHasher& operator=(const TailHasher&) = delete;

  // `last_block`: the final 64 bytes of the chunk.
  crypto::Digest Hash(const uint8_t* last_block) const {
    thread_local EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    crypto::Digest d{};
    unsigned len = 0;
    if (EVP_MD_CTX_copy_ex(ctx, base_) != 1 || EVP_DigestUpdate(ctx, last_block, kBlock) != 1 ||
        EVP_DigestFinal_ex(ctx, d.data(), &len) != 1 || len != d.size()) {
      throw std::runtime_error("OpenSSL SHA-256 failed");
    }
    return d;
  }

  static constexpr uint32_t kBlock = 64;  // the SHA-256 block: the prefix stays block-aligned

 private:
  EVP_MD_CTX* base_;
};

struct WriteArgs {
  std::string store;
  uint64_t chunks = 0;
  std::string chunk_size = "64K";
  unsigned threads = 0;
  std::string id = "vm/synth";
  bool index_only = false;
};

int Write(const WriteArgs& args) {
  auto cs = ParseByteSize(args.chunk_size);
  if (!cs.ok() || *cs > UINT32_MAX) {
    fmt::print(stderr, "cairn-synth-store: --chunk-size '{}' is not a size\n", args.chunk_size);
    return 2;
  }
  const auto chunk_size = static_cast<uint32_t>(*cs);
  if (Status s = index::FixedIndex::ValidateChunkSize(chunk_size); !s.ok()) {
    fmt::print(stderr, "cairn-synth-store: {}\n", s.message());
    return 2;
  }
  if (args.chunks == 0 || args.chunks > index::kMaxImageSize / chunk_size) {
    fmt::print(stderr,
               "cairn-synth-store: --chunks must be from 1 to kMaxImageSize / chunk size\n");
    return 2;
  }
  auto group = datastore::ParseGroup("", args.id);
  if (!group.ok()) {
    fmt::print(stderr, "cairn-synth-store: --id: {}\n", group.status().message());
    return 2;
  }
  const unsigned threads = args.threads ? args.threads : DefaultThreads();
  const double t0 = Now();
  auto env = NewPosixEnv();
  if (Status s = datastore::Datastore::Init(*env, args.store); !s.ok()) return Fail(s);
  auto store = datastore::Datastore::Open(*env, args.store);
  if (!store.ok()) return Fail(store.status());

  TailHasher hasher(chunk_size);
  std::vector<crypto::Digest> digests(args.chunks);
  std::atomic<uint64_t> stored_bytes{0};
  Status s = ParallelFor(args.chunks, threads, [&](size_t i) -> Status {
    thread_local Bytes plain;
    thread_local Bytes stored;
    const uint64_t n = i + 1;
    if (args.index_only) {  // the id alone: only the last block is hashed
      uint8_t tail[TailHasher::kBlock] = {};
      std::memcpy(tail + sizeof(tail) - sizeof(n), &n, sizeof(n));  // little-endian hosts
      digests[i] = hasher.Hash(tail);
      return Status::Ok();
    }
    plain.assign(chunk_size, 0);
    std::memcpy(plain.data() + chunk_size - sizeof(n), &n, sizeof(n));  // little-endian hosts
    const crypto::Digest id = hasher.Hash(plain.data() + chunk_size - TailHasher::kBlock);
    CAIRN_RETURN_IF_ERROR(blob::EncodeInto(plain, {}, &stored));
    CAIRN_ASSIGN_OR_RETURN(store::InsertResult r, (*store)->chunks().Insert(id, stored));
    if (!r.inserted) return InternalError(fmt::format("chunk {} was already in the store", i));
    stored_bytes.fetch_add(r.stored_bytes, std::memory_order_relaxed);
    digests[i] = id;
    return Status::Ok();
  });
  if (!s.ok()) return Fail(s);
  // Self-check of the midstate trick on the first and the last chunk.
  for (uint64_t i : {uint64_t{0}, args.chunks - 1}) {
    Bytes plain(chunk_size, 0);
    const uint64_t n = i + 1;
    std::memcpy(plain.data() + chunk_size - sizeof(n), &n, sizeof(n));
    if (crypto::Sha256(plain) != digests[i]) {
      return Fail(InternalError(fmt::format("the SHA-256 of chunk {} is wrong", i)));
    }
  }
  const double t_chunks = Now() - t0;

  datastore::SnapshotRef snap{*group, env->NowUnixSeconds()};
  auto writer = datastore::SnapshotWriter::Begin(**store, snap);
  if (!writer.ok()) return Fail(writer.status());
  index::FixedIndex idx(args.chunks * chunk_size, chunk_size, std::move(digests));
  if (Status w = (*writer)->AddImage("disk0.img", idx); !w.ok()) return Fail(w);
  if (Status w = (*writer)->Commit("cairn-synth-store"); !w.ok()) return Fail(w);
  nlohmann::ordered_json out = {{"store", args.store},
                                {"snapshot", snap.ToString()},
                                {"chunks", args.chunks},
                                {"chunk_size", chunk_size},
                                {"image_size", args.chunks * chunk_size},
                                {"stored_bytes", stored_bytes.load()},
                                {"index_only", args.index_only},
                                {"threads", threads},
                                {"chunk_seconds", t_chunks},
                                {"seconds", Now() - t0}};
  fmt::print("{}\n", out.dump());
  return 0;
}

struct LimitArgs {
  std::string store;
  unsigned threads = 0;
  unsigned passes = 1;
};

struct Chunk {
  crypto::Digest id;
  uint32_t length;
};

int DecodeLimit(const LimitArgs& args) {
  const unsigned threads = args.threads ? args.threads : DefaultThreads();
  auto env = NewPosixEnv();
  auto store = datastore::Datastore::Open(*env, args.store);
  if (!store.ok()) return Fail(store.status());
  auto snaps = (*store)->ListAllSnapshots();
  if (!snaps.ok()) return Fail(snaps.status());
  // The set verify checks: distinct (id, length) over every image index.
  std::vector<Chunk> chunks;
  for (const auto& snap : *snaps) {
    auto manifest = (*store)->ReadManifest(snap);
    if (!manifest.ok()) return Fail(manifest.status());
    for (const auto& entry : manifest->archives) {
      if (entry.kind != index::ArchiveKind::kImage) continue;
      auto idx = (*store)->ReadImageIndex(snap, entry);
      if (!idx.ok()) return Fail(idx.status());
      for (size_t i = 0; i < idx->chunk_count(); ++i) {
        chunks.push_back(Chunk{idx->digest(i), idx->ChunkLength(i)});
      }
    }
  }
  std::sort(chunks.begin(), chunks.end(), [](const Chunk& a, const Chunk& b) {
    return a.id != b.id ? a.id < b.id : a.length < b.length;
  });
  chunks.erase(std::unique(chunks.begin(), chunks.end(),
                           [](const Chunk& a, const Chunk& b) {
                             return a.id == b.id && a.length == b.length;
                           }),
               chunks.end());

  const double t_read = Now();
  std::vector<Bytes> stored(chunks.size());
  Status s = ParallelFor(chunks.size(), threads, [&](size_t i) -> Status {
    CAIRN_ASSIGN_OR_RETURN(stored[i], (*store)->chunks().Read(chunks[i].id));
    return Status::Ok();
  });
  if (!s.ok()) return Fail(s);
  const double read_seconds = Now() - t_read;
  uint64_t stored_bytes = 0, raw_bytes = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    stored_bytes += stored[i].size();
    raw_bytes += chunks[i].length;
  }

  std::vector<double> times;
  for (unsigned p = 0; p < std::max(1u, args.passes); ++p) {
    const double t0 = Now();
    s = ParallelFor(chunks.size(), threads, [&](size_t i) -> Status {
      thread_local Bytes scratch;
      CAIRN_ASSIGN_OR_RETURN(ByteSpan plain,
                             blob::DecodeChunkView(stored[i], chunks[i].id, &scratch));
      if (plain.size() != chunks[i].length) {
        return DataLossError(fmt::format("chunk {}: {} bytes, the index needs {}",
                                         crypto::DigestHex(chunks[i].id), plain.size(),
                                         chunks[i].length));
      }
      return Status::Ok();
    });
    times.push_back(Now() - t0);
    if (!s.ok()) return Fail(s);
  }
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  const double seconds = sorted[sorted.size() / 2];
  const double mib = 1024.0 * 1024.0;
  nlohmann::ordered_json out = {{"store", args.store},
                                {"snapshots", snaps->size()},
                                {"unique_chunks", chunks.size()},
                                {"stored_bytes", stored_bytes},
                                {"raw_bytes", raw_bytes},
                                {"threads", threads},
                                {"read_seconds", read_seconds},
                                {"passes", times},
                                {"seconds", seconds},
                                {"mib_per_s", seconds > 0 ? raw_bytes / mib / seconds : 0}};
  fmt::print("{}\n", out.dump());
  return 0;
}

int Main(int argc, char** argv) {
  CLI::App app{"cairn-synth-store: synthetic datastores and the decode limit, for bench/"};
  app.require_subcommand(1);

  WriteArgs w;
  auto* wr = app.add_subcommand("write", "a datastore with one snapshot of N distinct tiny chunks");
  wr->add_option("STORE", w.store, "datastore directory to create (must not exist)")->required();
  wr->add_option("--chunks", w.chunks, "distinct chunks in the image index")->required();
  wr->add_option("--chunk-size", w.chunk_size, "chunk size, a power of two from 64K to 16M")
      ->capture_default_str();
  wr->add_option("--threads", w.threads, "writer threads (default: online CPUs)");
  wr->add_option("--id", w.id, "group of the snapshot")->capture_default_str();
  wr->add_flag("--index-only", w.index_only, "write the snapshot and its index, but no chunk");

  LimitArgs l;
  auto* lim = app.add_subcommand(
      "decode-limit", "time verify's per-chunk CPU work (CRC, zstd, SHA-256) on chunks in memory");
  lim->add_option("STORE", l.store, "datastore")->required();
  lim->add_option("--threads", l.threads, "checking threads (default: online CPUs)");
  lim->add_option("--passes", l.passes, "timed passes; the median is reported")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (wr->parsed()) return Write(w);
  return DecodeLimit(l);
}

}  // namespace
}  // namespace cairn::bench

int main(int argc, char** argv) {
  try {
    return cairn::bench::Main(argc, argv);
  } catch (const std::exception& e) {  // exceptions stop at main()
    std::fprintf(stderr, "cairn-synth-store: %s\n", e.what());
    return 1;
  }
}
