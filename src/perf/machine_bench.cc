#include "perf/machine_bench.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <latch>
#include <memory>
#include <set>
#include <string_view>
#include <thread>

#include "base/splitmix64.h"
#include "blob/blob.h"
#include "format/crc32c.h"
#include "index/chunker.h"
#include "pipeline/worker_group.h"
#include "restore/image_restore.h"
#include "store/local_chunk_store.h"

namespace cairn::perf {
namespace {

// --- the data ---------------------------------------------------------------

// xoshiro256** seeded through splitmix64, as bench/gendata/prng.h (src/ may
// not include bench/): every draw is computed from the raw words, never
// through <random>'s distributions, so a seed names the same bytes with any
// standard library.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (auto& word : s_) word = SplitMix64Next(seed);
  }
  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }
  uint64_t Below(uint64_t n) {  // [0, n), n > 0
    return static_cast<uint64_t>((static_cast<unsigned __int128>(Next()) * n) >> 64);
  }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  void Fill(MutableByteSpan out) {
    size_t i = 0;
    for (; i + 8 <= out.size(); i += 8) {
      uint64_t w = Next();
      std::memcpy(out.data() + i, &w, 8);
    }
    if (i < out.size()) {
      uint64_t w = Next();
      std::memcpy(out.data() + i, &w, out.size() - i);
    }
  }
  // Index drawn with probability proportional to weights[i].
  size_t Pick(std::span<const double> weights) {
    double total = 0;
    for (double w : weights) total += w;
    double x = Uniform() * total;
    for (size_t i = 0; i < weights.size(); ++i) {
      if (x < weights[i]) return i;
      x -= weights[i];
    }
    return weights.size() - 1;
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

// Text-like bytes, the model of bench/gendata/text_pool.h made smaller: a
// vocabulary of pseudo-words drawn with English letter frequencies, used
// with Zipf-like word frequencies, in log, code and prose lines; text is a
// random choice of pool lines, so it compresses like text (zstd -1: about
// 2.5-3×) without repeating at chunk scale.
class TextLines {
 public:
  explicit TextLines(uint64_t seed) {
    Rng rng(seed);
    constexpr std::string_view kLetters = "etaoinshrdlcumwfgypbvkjxqz";
    constexpr std::array<double, 26> kLetterWeights = {
        12.7, 9.1, 8.2, 7.5, 7.0, 6.7, 6.3, 6.1, 6.0, 4.3,  4.0,  2.8, 2.8,
        2.4,  2.4, 2.2, 2.0, 2.0, 1.9, 1.5, 1.0, 0.8, 0.15, 0.15, 0.1, 0.07};
    std::set<std::string> unique;
    while (unique.size() < 3000) {
      std::string w(1 + rng.Below(10), ' ');
      for (char& c : w) c = kLetters[rng.Pick(kLetterWeights)];
      unique.insert(std::move(w));
    }
    std::vector<std::string> words(unique.begin(), unique.end());
    for (size_t i = words.size(); i > 1; --i) std::swap(words[i - 1], words[rng.Below(i)]);
    std::vector<double> cumulative;
    double acc = 0;
    for (size_t i = 0; i < words.size(); ++i) {
      acc += 1.0 / std::pow(static_cast<double>(i + 1), 1.05);
      cumulative.push_back(acc);
    }
    auto word = [&]() -> const std::string& {
      double x = rng.Uniform() * acc;
      size_t k = std::upper_bound(cumulative.begin(), cumulative.end(), x) - cumulative.begin();
      return words[std::min(k, words.size() - 1)];
    };
    constexpr std::array<std::string_view, 4> kLevels = {"INFO", "INFO", "WARN", "DEBUG"};
    for (int i = 0; i < 20000; ++i) {
      std::string line;
      double style = rng.Uniform();
      int n = 3 + static_cast<int>(rng.Below(13));
      if (style < 0.25) {  // log line
        line = fmt::format("2024-{:02}-{:02} {:02}:{:02}:{:02}.{:03} {} [{}]", 1 + rng.Below(12),
                           1 + rng.Below(28), rng.Below(24), rng.Below(60), rng.Below(60),
                           rng.Below(1000), kLevels[rng.Below(kLevels.size())], word());
        for (int k = 1; k < n; ++k) line += " " + word();
      } else if (style < 0.45) {  // code line
        line = fmt::format("{}{}({}, {}, {});", std::string(4 * rng.Below(5), ' '), word(), word(),
                           word(), rng.Below(100000));
      } else {  // prose line
        for (int k = 0; k < n; ++k) line += (k == 0 ? "" : k % 5 == 4 ? ", " : " ") + word();
        line[0] = static_cast<char>(line[0] - 'a' + 'A');
        line += ".";
      }
      starts_.push_back(static_cast<uint32_t>(text_.size()));
      text_ += line + "\n";
    }
    starts_.push_back(static_cast<uint32_t>(text_.size()));
  }

  void Fill(Rng& rng, MutableByteSpan out) const {
    for (size_t pos = 0; pos < out.size();) {
      size_t i = rng.Below(starts_.size() - 1);
      size_t len = std::min<size_t>(starts_[i + 1] - starts_[i], out.size() - pos);
      std::memcpy(out.data() + pos, text_.data() + starts_[i], len);
      pos += len;
    }
  }

 private:
  std::string text_;
  std::vector<uint32_t> starts_;
};

constexpr uint64_t kPage = 4096;
enum Kind { kZero = 0, kRandom = 1, kText = 2, kDup = 3 };
constexpr std::array<double, 4> kTargetMix = {0.35, 0.25, 0.30, 0.10};

// --- measurement helpers -----------------------------------------------------

double Seconds(Env& env, int64_t start_nanos) {
  return static_cast<double>(env.NowMonotonicNanos() - start_nanos) / 1e9;
}

int AllCores() { return std::max(1, static_cast<int>(std::thread::hardware_concurrency())); }

// PBS's reference figures (../shared/prior-art/pbs.md §10: AMD Ryzen 7
// 2700X, one thread, 1 MiB of a synthetic, very compressible pattern).
constexpr double kPbsTls = 1235, kPbsSha256 = 2022, kPbsCompress = 752, kPbsDecompress = 1198,
                 kPbsAes = 3645, kPbsVerify = 758;

// Measures `make` per core and on all cores into a row; reports it.
Status MeasureRow(const MachineBenchOptions& options, int threads, BenchRow row,
                  const WorkFactory& make, uint64_t max_bytes, std::vector<BenchRow>* rows) {
  CAIRN_ASSIGN_OR_RETURN(Rate one, MeasureRate({1, options.seconds, max_bytes}, make));
  CAIRN_ASSIGN_OR_RETURN(Rate all, MeasureRate({threads, options.seconds, max_bytes}, make));
  row.per_core_mb_s = one.MBPerSecond();
  row.all_cores_mb_s = all.MBPerSecond();
  rows->push_back(std::move(row));
  if (options.on_row) options.on_row(rows->back());
  return Status::Ok();
}

// The work of one CPU stage over the chunks: each thread has its own State
// (buffers, contexts) and starts at its own chunk, so threads do not walk
// the same memory in step. Step processes chunk i and returns the
// plaintext bytes it covered.
template <typename State>
using Step = Result<uint64_t> (*)(const BenchData&, State&, size_t);

template <typename State>
WorkFactory OverChunks(const BenchData& data, Step<State> step) {
  return [&data, step](int index) -> Result<WorkFn> {
    auto state = std::make_shared<State>();
    size_t next = static_cast<size_t>(index) % data.chunks.size();
    return WorkFn([&data, step, state, next]() mutable -> Result<uint64_t> {
      size_t i = next;
      next = (next + 1) % data.chunks.size();
      return step(data, *state, i);
    });
  };
}

struct NoState {};
struct ScratchState {
  Bytes scratch;
};
struct ChunkerState {
  index::Chunker chunker;
};

Status CheckLength(size_t got, size_t want, const crypto::Digest& id) {
  if (got == want) return Status::Ok();
  return DataLossError(
      fmt::format("chunk {}: {} bytes, the index needs {}", crypto::DigestHex(id), got, want));
}

Result<uint64_t> Sha256Step(const BenchData& d, NoState&, size_t i) {
  if (crypto::Sha256(d.chunks[i]) != d.ids[i]) return InternalError("SHA-256 is not stable");
  return d.chunks[i].size();
}

// What backup does with a new chunk (blob::EncodeInto: zstd level 1, raw
// when that does not shrink it, CRC32C).
Result<uint64_t> CompressStep(const BenchData& d, ScratchState& s, size_t i) {
  CAIRN_RETURN_IF_ERROR(blob::EncodeInto(d.chunks[i], {}, &s.scratch));
  return d.chunks[i].size();
}

Result<uint64_t> DecompressStep(const BenchData& d, ScratchState& s, size_t i) {
  CAIRN_ASSIGN_OR_RETURN(ByteSpan plain, blob::DecodeView(d.stored[i], &s.scratch));
  return plain.size();
}

// The keyed chunk id an encrypted backup computes for every chunk (and
// restore and verify for every fetched one).
Result<uint64_t> HmacStep(const BenchData& d, NoState&, size_t i) {
  if (d.crypt->ChunkId(d.chunks[i]) != d.enc_ids[i]) {
    return InternalError("HMAC-SHA256 is not stable");
  }
  return d.chunks[i].size();
}

// What an encrypted backup does with a new chunk: blob::EncodeInto with the
// key (zstd level 1 or raw, AES-256-GCM with a fresh nonce, CRC32C).
Result<uint64_t> CompressEncryptedStep(const BenchData& d, ScratchState& s, size_t i) {
  CAIRN_RETURN_IF_ERROR(blob::EncodeInto(d.chunks[i], {.crypt = d.crypt.get()}, &s.scratch));
  return d.chunks[i].size();
}

// AES-256-GCM alone, as CryptConfig runs it for every encrypted blob (one
// EVP context per thread, key set per call, a fresh random nonce, 28 bytes
// of associated data like a blob header's), over whole plaintext chunks.
struct AesState {
  Bytes out;
  std::array<uint8_t, 28> aad{};
  std::array<uint8_t, crypto::kGcmNonceSize> nonce{};
  std::array<uint8_t, crypto::kGcmTagSize> tag{};
};

Result<uint64_t> AesEncryptStep(const BenchData& d, AesState& s, size_t i) {
  ByteSpan plain = d.chunks[i];
  s.out.resize(plain.size());
  d.crypt->Encrypt(s.aad, plain, s.out.data(), s.nonce, s.tag);
  return plain.size();
}

// Each chunk encrypted whole (not compressed first), so the decrypt row
// moves as many bytes through AES-GCM as the encrypt row.
struct Sealed {
  std::vector<Bytes> ciphertext;
  std::vector<std::array<uint8_t, crypto::kGcmNonceSize>> nonces;
  std::vector<std::array<uint8_t, crypto::kGcmTagSize>> tags;
};

Sealed SealChunks(const BenchData& d) {
  Sealed sealed;
  const std::array<uint8_t, 28> aad{};
  for (const Bytes& chunk : d.chunks) {
    sealed.ciphertext.emplace_back(chunk.size());
    sealed.nonces.emplace_back();
    sealed.tags.emplace_back();
    d.crypt->Encrypt(aad, chunk, sealed.ciphertext.back().data(), sealed.nonces.back(),
                     sealed.tags.back());
  }
  return sealed;
}

WorkFactory AesDecryptWork(const BenchData& d, const Sealed& sealed) {
  return [&d, &sealed](int index) -> Result<WorkFn> {
    auto out = std::make_shared<Bytes>();
    size_t next = static_cast<size_t>(index) % sealed.ciphertext.size();
    return WorkFn([&d, &sealed, out, next]() mutable -> Result<uint64_t> {
      size_t i = next;
      next = (next + 1) % sealed.ciphertext.size();
      const Bytes& c = sealed.ciphertext[i];
      out->resize(c.size());
      const std::array<uint8_t, 28> aad{};
      CAIRN_RETURN_IF_ERROR(d.crypt->Decrypt(aad, c, sealed.nonces[i], sealed.tags[i], out->data()));
      return c.size();
    });
  };
}

// The check restore and verify run on every fetched chunk.
Result<uint64_t> VerifyStep(const BenchData& d, ScratchState& s, size_t i) {
  CAIRN_ASSIGN_OR_RETURN(ByteSpan plain, blob::DecodeChunkView(d.stored[i], d.ids[i], &s.scratch));
  CAIRN_RETURN_IF_ERROR(CheckLength(plain.size(), d.chunks[i].size(), d.ids[i]));
  return plain.size();
}

// The same with the key, as restore and verify of an encrypted snapshot:
// CRC32C, AES-256-GCM decrypt (tag check), decompress, HMAC-SHA256 id
// compare.
Result<uint64_t> VerifyEncryptedStep(const BenchData& d, ScratchState& s, size_t i) {
  CAIRN_ASSIGN_OR_RETURN(ByteSpan plain, blob::DecodeChunkView(d.enc_stored[i], d.enc_ids[i],
                                                               &s.scratch, d.crypt.get()));
  CAIRN_RETURN_IF_ERROR(CheckLength(plain.size(), d.chunks[i].size(), d.enc_ids[i]));
  return plain.size();
}

Result<uint64_t> Crc32cStep(const BenchData& d, NoState&, size_t i) {
  volatile uint32_t crc = format::Crc32c(d.chunks[i]);  // volatile: not optimized away
  (void)crc;
  return d.chunks[i].size();
}

// The chunks as one stream, as a tree backup's chunker sees file contents.
Result<uint64_t> ChunkerStep(const BenchData& d, ChunkerState& s, size_t i) {
  for (ByteSpan rest = d.chunks[i]; !rest.empty();) {
    size_t cut = s.chunker.FindCut(rest);
    if (cut == 0) break;  // the chunk goes on past this piece
    rest = rest.subspan(cut);
  }
  return d.chunks[i].size();
}

// The CPU rows: PBS's columns first, then cairn's own stages.
Status MeasureCpuRows(const MachineBenchOptions& options, int threads, const BenchData& data,
                      std::vector<BenchRow>* rows) {
  // With -r https://…: 4 MiB buffers to (and from) the server's speedtest
  // endpoint for `seconds`, on one connection and on one per thread, as
  // PBS's upload_speedtest does.
  for (bool upload : {true, false}) {
    const WorkFactory& work = upload ? options.tls_upload : options.tls_download;
    BenchRow row{upload ? "tls" : "tls_download",
                 upload ? "upload of 4 MiB buffers to a server over TLS"
                        : "download of 4 MiB buffers from a server over TLS",
                 std::nullopt, std::nullopt,
                 upload ? std::optional<double>(kPbsTls) : std::nullopt,
                 "n/a (no server: -r https://HOST:PORT/STORE)"};
    if (work) {
      for (int t : {1, threads}) {
        MeasureOptions mo;
        mo.threads = t;
        mo.seconds = options.seconds;
        CAIRN_ASSIGN_OR_RETURN(Rate rate, MeasureRate(mo, work));
        (t == 1 ? row.per_core_mb_s : row.all_cores_mb_s) = rate.MBPerSecond();
      }
      row.note = fmt::format("{} (one connection; {} connections)", options.server, threads);
    }
    if (!upload && !work) continue;  // the download row only with a server
    rows->push_back(row);
    if (options.on_row) options.on_row(rows->back());
  }

  struct Stage {
    const char* name;
    const char* what;
    std::optional<double> pbs;
    WorkFactory work;
    const char* note = "";
  };
  const Sealed sealed = SealChunks(data);  // for aes256_gcm_decrypt
  const Stage stages[] = {
      {"sha256", "SHA-256 of a 4 MiB chunk (its id)", kPbsSha256,
       OverChunks<NoState>(data, Sha256Step)},
      {"hmac_sha256", "HMAC-SHA256 of a 4 MiB chunk (its id in an encrypted snapshot)",
       std::nullopt, OverChunks<NoState>(data, HmacStep)},
      {"compress",
       "blob encode as backup does: zstd level 1 (raw when it does not shrink) + CRC32C",
       kPbsCompress, OverChunks<ScratchState>(data, CompressStep)},
      {"compress_encrypted",
       "blob encode as an encrypted backup does: zstd level 1 (or raw) + AES-256-GCM + CRC32C",
       std::nullopt, OverChunks<ScratchState>(data, CompressEncryptedStep)},
      {"decompress", "blob decode: CRC32C + zstd decompress (raw blobs: CRC32C only)",
       kPbsDecompress, OverChunks<ScratchState>(data, DecompressStep)},
      {"aes256_gcm", "AES-256-GCM encryption of a 4 MiB chunk (OpenSSL EVP, as blobs use it)",
       kPbsAes, OverChunks<AesState>(data, AesEncryptStep)},
      {"aes256_gcm_decrypt",
       "AES-256-GCM decryption + tag check of a 4 MiB chunk (OpenSSL EVP, as blobs use it)",
       std::nullopt, AesDecryptWork(data, sealed), "PBS measures encryption only"},
      {"verify", "full chunk check of restore and verify: CRC32C + decompress + SHA-256 compare",
       kPbsVerify, OverChunks<ScratchState>(data, VerifyStep)},
      {"verify_encrypted",
       "the same with the key (encrypted snapshots): CRC32C + AES-256-GCM decrypt + decompress "
       "+ HMAC-SHA256 compare",
       std::nullopt, OverChunks<ScratchState>(data, VerifyEncryptedStep)},
      {"crc32c", "CRC32C of a 4 MiB chunk (every stored byte)", std::nullopt,
       OverChunks<NoState>(data, Crc32cStep)},
      {"chunker", "FastCDC cut search (tree backups; 512 KiB/2 MiB/8 MiB)", std::nullopt,
       OverChunks<ChunkerState>(data, ChunkerStep)},
  };
  for (const Stage& stage : stages) {
    CAIRN_RETURN_IF_ERROR(MeasureRow(options, threads,
                                     {stage.name, stage.what, {}, {}, stage.pbs, stage.note},
                                     stage.work, 0, rows));
  }
  return Status::Ok();
}

// --- the store rows ----------------------------------------------------------

constexpr std::string_view kScratchPrefix = ".bench-tmp-";
// Caps what one insert measurement writes (plaintext; stored is less).
constexpr uint64_t kMaxInsertBytes = uint64_t{1} << 30;
constexpr size_t kReadSampleChunks = 256;

// Removes `path` and everything below it (no symlinks are followed: the
// tree holds only what the benchmark created).
Status RemoveTree(Env& env, const std::string& path) {
  CAIRN_ASSIGN_OR_RETURN(FileInfo info, env.Stat(path));
  if (!info.is_dir) return env.RemoveFile(path);
  CAIRN_ASSIGN_OR_RETURN(std::vector<std::string> names, env.ListDir(path));
  for (const std::string& name : names) {
    CAIRN_RETURN_IF_ERROR(RemoveTree(env, JoinPath(path, name)));
  }
  return env.RemoveDir(path);
}

// A chunk store in DATASTORE/.bench-tmp-PID: on the file system the
// datastore's chunks live on, invisible to snapshot listing (which reads
// only ct/, host/, vm/ and ns/), and removed by Remove() or, failing that,
// by the destructor.
class ScratchStore {
 public:
  static Result<std::unique_ptr<ScratchStore>> Create(Env& env, const std::string& datastore) {
    RemoveStale(env, datastore);
    std::string dir = JoinPath(datastore, fmt::format("{}{}", kScratchPrefix, ::getpid()));
    if (Status s = env.CreateDir(dir); !s.ok()) {
      return s.WithContext(fmt::format(
          "creating the benchmark's scratch chunk store {} (it measures the datastore's file "
          "system and is removed afterwards)",
          dir));
    }
    std::unique_ptr<ScratchStore> scratch(new ScratchStore(env, dir));
    CAIRN_RETURN_IF_ERROR(store::LocalChunkStore::Create(env, dir));
    CAIRN_ASSIGN_OR_RETURN(scratch->chunks_, store::LocalChunkStore::Open(env, dir));
    return scratch;
  }
  ~ScratchStore() {
    if (!removed_) Remove().IgnoreError();  // best effort on an error path
  }
  ScratchStore(const ScratchStore&) = delete;
  ScratchStore& operator=(const ScratchStore&) = delete;

  Status Remove() {
    chunks_.reset();
    removed_ = true;
    Status s = RemoveTree(env_, dir_);
    return s.ok() ? s : s.WithContext("removing the benchmark's scratch chunk store " + dir_);
  }
  store::LocalChunkStore& chunks() { return *chunks_; }
  const std::string& dir() const { return dir_; }

 private:
  ScratchStore(Env& env, std::string dir) : env_(env), dir_(std::move(dir)) {}

  // A scratch store whose process is gone was left by a killed run: ours to
  // remove. (A live pid, even one reused by another program, keeps it.)
  static void RemoveStale(Env& env, const std::string& datastore) {
    auto names = env.ListDir(datastore);
    if (!names.ok()) return;
    for (const std::string& name : *names) {
      if (!name.starts_with(kScratchPrefix)) continue;
      long pid = std::strtol(name.c_str() + kScratchPrefix.size(), nullptr, 10);
      if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
        RemoveTree(env, JoinPath(datastore, name)).IgnoreError();  // retried next run
      }
    }
  }

  Env& env_;
  std::string dir_;
  std::unique_ptr<store::LocalChunkStore> chunks_;
  bool removed_ = false;
};

struct SampleChunk {
  crypto::Digest id;
  uint32_t length = 0;
  const crypto::CryptConfig* crypt = nullptr;  // the key of its snapshot; null: plain
};

struct RepoSample {
  std::vector<SampleChunk> chunks;
  size_t encrypted = 0;          // chunks of encrypted snapshots
  size_t skipped_snapshots = 0;  // encrypted without the key given (or with another)
};

// The key a snapshot's chunks decode with (Datastore::CryptFor); nullopt for
// an encrypted snapshot this run has no key for (it is skipped).
Result<std::optional<const crypto::CryptConfig*>> KeyFor(const datastore::Datastore& store,
                                                         const index::Manifest& manifest) {
  auto crypt = store.CryptFor(manifest);
  if (crypt.ok()) return std::optional<const crypto::CryptConfig*>(*crypt);
  if (crypt.status().code() == StatusCode::kUnauthenticated) {
    return std::optional<const crypto::CryptConfig*>();
  }
  return crypt.status();
}

// Up to `max` distinct chunks of the newest snapshots (newest first),
// without the all-zero chunks restore never fetches. A snapshot removed
// meanwhile is skipped, and so is an encrypted one without its key.
Result<RepoSample> SampleRepoChunks(const datastore::Datastore& store, size_t max) {
  CAIRN_ASSIGN_OR_RETURN(std::vector<datastore::SnapshotRef> snaps, store.ListAllSnapshots());
  std::stable_sort(snaps.begin(), snaps.end(),
                   [](const auto& a, const auto& b) { return a.time > b.time; });
  RepoSample out;
  std::set<crypto::Digest> seen;
  auto add = [&](const crypto::Digest& id, uint32_t length, const crypto::CryptConfig* crypt) {
    if (out.chunks.size() < max && seen.insert(id).second) {
      out.chunks.push_back({id, length, crypt});
      out.encrypted += crypt != nullptr ? 1 : 0;
    }
  };
  for (const auto& snap : snaps) {
    if (out.chunks.size() >= max) break;
    auto manifest = store.ReadManifest(snap);
    if (!manifest.ok() && manifest.status().code() == StatusCode::kNotFound) continue;
    if (!manifest.ok()) return manifest.status();
    CAIRN_ASSIGN_OR_RETURN(auto key, KeyFor(store, *manifest));
    if (!key) {
      ++out.skipped_snapshots;
      continue;
    }
    const crypto::CryptConfig* crypt = *key;
    for (const auto& entry : manifest->archives) {
      if (entry.kind == index::ArchiveKind::kImage) {
        CAIRN_ASSIGN_OR_RETURN(index::FixedIndex idx, store.ReadImageIndex(snap, entry));
        const crypto::Digest zero = index::ZeroChunkDigest(idx.chunk_size(), crypt);
        for (size_t i = 0; i < idx.chunk_count(); ++i) {
          if (idx.digest(i) != zero) add(idx.digest(i), idx.ChunkLength(i), crypt);
        }
      } else if (entry.kind == index::ArchiveKind::kTree) {
        CAIRN_ASSIGN_OR_RETURN(auto idx, store.ReadTreeIndexes(snap, entry));
        for (const auto* stream : {&idx.meta, &idx.data}) {
          for (size_t i = 0; i < stream->chunk_count(); ++i) {
            add(stream->digest(i), static_cast<uint32_t>(stream->ChunkLength(i)), crypt);
          }
        }
      }
    }
  }
  return out;
}

// Inserts every chunk of the data set under a fresh id (the store stores
// bytes under a name and checks neither; the ids are SHA-256 of a serial,
// so they spread over the prefix directories as real ids do).
WorkFactory InsertWork(const BenchData& data, store::LocalChunkStore& chunks,
                       std::atomic<uint64_t>& serial) {
  return [&data, &chunks, &serial](int index) -> Result<WorkFn> {
    size_t next = static_cast<size_t>(index) % data.chunks.size();
    return WorkFn([&data, &chunks, &serial, next]() mutable -> Result<uint64_t> {
      size_t i = next;
      next = (next + 1) % data.chunks.size();
      uint64_t n = serial.fetch_add(1, std::memory_order_relaxed);
      std::array<uint8_t, 16> name{};
      std::memcpy(name.data(), &n, sizeof(n));
      std::memcpy(name.data() + 8, &data.seed, sizeof(data.seed));
      CAIRN_ASSIGN_OR_RETURN(store::InsertResult r,
                             chunks.Insert(crypto::Sha256(name), data.stored[i]));
      if (!r.inserted) return InternalError("scratch chunk store: an id was used twice");
      return data.chunks[i].size();
    });
  };
}

WorkFactory ReadWork(const std::vector<SampleChunk>& sample, store::ChunkSource& source) {
  return [&sample, &source](int index) -> Result<WorkFn> {
    auto buffers = std::make_shared<std::pair<ReadBuffer, Bytes>>();  // stored, scratch
    size_t next = static_cast<size_t>(index) * 7 % sample.size();
    return WorkFn([&sample, &source, buffers, next]() mutable -> Result<uint64_t> {
      const SampleChunk& c = sample[next];
      next = (next + 1) % sample.size();
      CAIRN_RETURN_IF_ERROR(source.ReadInto(c.id, &buffers->first));
      CAIRN_ASSIGN_OR_RETURN(ByteSpan plain, blob::DecodeChunkView(buffers->first, c.id,
                                                                   &buffers->second, c.crypt));
      CAIRN_RETURN_IF_ERROR(CheckLength(plain.size(), c.length, c.id));
      return plain.size();
    });
  };
}

// Insert (with the syncfs a backup ends with) and read rows. Without a
// scratch store (`unwritable` says why), only the read row is measured.
Status MeasureStoreRows(Env& env, const MachineBenchOptions& options, int threads,
                        const BenchData& data, ScratchStore* scratch, const std::string& unwritable,
                        std::vector<BenchRow>* rows) {
  const datastore::Datastore& store = *options.store;
  BenchRow insert;
  insert.name = "chunk_insert";
  insert.what =
      "insert of a stored chunk into a chunk store on the datastore's file system (temp file + "
      "rename), then one syncfs";
  if (scratch == nullptr) {
    insert.note = "n/a (" + unwritable + ")";
  } else {
    insert.note = "into the scratch store " + scratch->dir() + " (removed)";
    std::atomic<uint64_t> serial{0};
    double* figures[] = {&insert.per_core_mb_s.emplace(), &insert.all_cores_mb_s.emplace()};
    for (int pass = 0; pass < 2; ++pass) {
      CAIRN_ASSIGN_OR_RETURN(
          Rate rate, MeasureRate({pass == 0 ? 1 : threads, options.seconds, kMaxInsertBytes},
                                 InsertWork(data, scratch->chunks(), serial)));
      int64_t start = env.NowMonotonicNanos();
      CAIRN_RETURN_IF_ERROR(scratch->chunks().Flush());
      rate.seconds += Seconds(env, start);
      *figures[pass] = rate.MBPerSecond();
    }
  }
  rows->push_back(insert);
  if (options.on_row) options.on_row(rows->back());

  CAIRN_ASSIGN_OR_RETURN(RepoSample repo_sample, SampleRepoChunks(store, kReadSampleChunks));
  std::vector<SampleChunk>& sample = repo_sample.chunks;
  store::ChunkSource* source = &store.chunks();
  BenchRow read;
  read.name = "chunk_read";
  read.what =
      "read of a stored chunk from the datastore + full check (CRC32C, decompress, SHA-256; "
      "encrypted chunks: + AES-256-GCM decrypt, HMAC-SHA256 id)";
  read.note = fmt::format("{} chunks of the newest snapshots{}; page cache warm unless dropped",
                          sample.size(),
                          repo_sample.encrypted == 0
                              ? ""
                              : fmt::format(" ({} encrypted)", repo_sample.encrypted));
  const std::string skipped =
      repo_sample.skipped_snapshots == 0
          ? ""
          : fmt::format("; {} encrypted snapshots skipped (no key for them: give --keyfile)",
                        repo_sample.skipped_snapshots);
  if (sample.empty() && scratch == nullptr) {
    read.note = "n/a (the datastore has no snapshots and no scratch store)" + skipped;
    rows->push_back(read);
    if (options.on_row) options.on_row(rows->back());
    return Status::Ok();
  }
  if (sample.empty()) {
    // An empty datastore: read back the data set from the scratch store.
    for (size_t i = 0; i < data.chunks.size(); ++i) {
      CAIRN_RETURN_IF_ERROR(scratch->chunks().Insert(data.ids[i], data.stored[i]).status());
      sample.push_back({data.ids[i], static_cast<uint32_t>(data.chunks[i].size())});
    }
    source = &scratch->chunks();
    read.note = fmt::format("{} chunks written to the scratch store (the datastore has no {})",
                            sample.size(),
                            repo_sample.skipped_snapshots == 0 ? "snapshots"
                                                               : "snapshots this run can read");
  }
  read.note += skipped;
  return MeasureRow(options, threads, read, ReadWork(sample, *source), 0, rows)
      .WithContext("chunk read benchmark (cairn verify checks the whole datastore)");
}

// The newest snapshot with an image archive that this run can read, that
// archive and its key; `skipped` counts the newer encrypted ones without
// their key.
struct ImageChoice {
  datastore::SnapshotRef snap;
  index::ArchiveEntry entry;
  const crypto::CryptConfig* crypt = nullptr;
};
Result<std::optional<ImageChoice>> NewestImage(const datastore::Datastore& store,
                                               size_t* skipped) {
  CAIRN_ASSIGN_OR_RETURN(std::vector<datastore::SnapshotRef> snaps, store.ListAllSnapshots());
  std::stable_sort(snaps.begin(), snaps.end(),
                   [](const auto& a, const auto& b) { return a.time > b.time; });
  for (const auto& snap : snaps) {
    auto manifest = store.ReadManifest(snap);
    if (!manifest.ok() && manifest.status().code() == StatusCode::kNotFound) continue;
    if (!manifest.ok()) return manifest.status();
    for (const auto& entry : manifest->archives) {
      if (entry.kind != index::ArchiveKind::kImage) continue;
      CAIRN_ASSIGN_OR_RETURN(auto key, KeyFor(store, *manifest));
      if (!key) {
        ++*skipped;
        break;
      }
      return std::optional<ImageChoice>(ImageChoice{snap, entry, *key});
    }
  }
  return std::optional<ImageChoice>();
}

// The first chunks of `idx` that hold at least `budget` non-zero bytes (or
// all of it): a rehearsal of a 500 GB image must not take an hour.
index::FixedIndex IndexPrefix(const index::FixedIndex& idx, uint64_t budget,
                              const crypto::CryptConfig* crypt) {
  const crypto::Digest zero = index::ZeroChunkDigest(idx.chunk_size(), crypt);
  uint64_t data_bytes = 0;
  size_t k = 0;
  while (k < idx.chunk_count() && data_bytes < budget) {
    if (idx.digest(k) != zero) data_bytes += idx.ChunkLength(k);
    ++k;
  }
  if (k == idx.chunk_count()) return idx;
  std::vector<crypto::Digest> digests(idx.digests().begin(), idx.digests().begin() + k);
  return index::FixedIndex(uint64_t{k} * idx.chunk_size(), idx.chunk_size(), std::move(digests));
}

// Restore rehearsals (fetch, decode, check; nothing written) of the start
// of the newest image archive, with one checking thread and with one per
// core, each sized to take about `seconds` at the measured verify rate.
Status MeasureRehearsal(Env& env, const MachineBenchOptions& options, int threads,
                        std::vector<BenchRow>* rows) {
  const datastore::Datastore& store = *options.store;
  BenchRow row;
  row.name = "restore_rehearsal";
  row.what =
      "restore --rehearse: the restore pipeline (reads in flight, decode, check), image bytes "
      "per second, zero chunks skipped as restore skips them";
  size_t skipped = 0;
  CAIRN_ASSIGN_OR_RETURN(std::optional<ImageChoice> choice, NewestImage(store, &skipped));
  const std::string skipped_note =
      skipped == 0 ? ""
                   : fmt::format("; {}{} encrypted image snapshots skipped (no key for them: "
                                 "give --keyfile)",
                                 skipped, choice ? " newer" : "");
  if (!choice) {
    row.note = (skipped == 0 ? "n/a (no image snapshot in the datastore)"
                             : "n/a (no image snapshot this run has the key for)") +
               skipped_note;
  } else {
    // Held like a restore holds it, so prune cannot remove it meanwhile.
    CAIRN_ASSIGN_OR_RETURN(auto lock, store.LockSnapshotShared(choice->snap));
    CAIRN_ASSIGN_OR_RETURN(index::FixedIndex idx,
                           store.ReadImageIndex(choice->snap, choice->entry));
    // Sized by the chunk check of its kind, plain or encrypted.
    const std::string check = choice->crypt != nullptr ? "verify_encrypted" : "verify";
    double verify_one = 0, verify_all = 0;
    for (const BenchRow& r : *rows) {
      if (r.name == check) {
        verify_one = r.per_core_mb_s.value_or(0);
        verify_all = r.all_cores_mb_s.value_or(0);
      }
    }
    uint64_t largest = 0;
    for (int pass = 0; pass < 2; ++pass) {
      double mb_s = pass == 0 ? verify_one : verify_all;
      uint64_t budget = std::max<uint64_t>(static_cast<uint64_t>(mb_s * 1e6 * options.seconds),
                                           uint64_t{4} * idx.chunk_size());
      index::FixedIndex prefix = IndexPrefix(idx, budget, choice->crypt);
      largest = std::max(largest, prefix.image_size());
      restore::ImageRestoreOptions ro;
      ro.rehearse = true;
      ro.cpu_workers = pass == 0 ? 1 : threads;
      ro.crypt = choice->crypt;
      std::vector<restore::ImageRestoreStats> stats;
      const restore::ImageTarget target{&prefix, ""};
      CAIRN_RETURN_IF_ERROR(
          restore::RestoreImages(env, std::span(&target, 1), store.chunks(), ro, &stats)
              .WithContext(fmt::format("restore rehearsal of {} of {}", choice->entry.name,
                                       choice->snap.ToString())));
      double mb =
          stats[0].seconds > 0 ? static_cast<double>(stats[0].bytes) / 1e6 / stats[0].seconds : 0;
      (pass == 0 ? row.per_core_mb_s : row.all_cores_mb_s) = mb;
    }
    row.note = fmt::format("{} of {} ({} of {}{}){}", choice->entry.name,
                           choice->snap.ToString(),
                           largest == idx.image_size() ? "all" : "first " + HumanBytes(largest),
                           HumanBytes(idx.image_size()),
                           choice->crypt != nullptr ? ", encrypted" : "", skipped_note);
  }
  rows->push_back(row);
  if (options.on_row) options.on_row(rows->back());
  return Status::Ok();
}

std::string Figure(const std::optional<double>& mb_s) {
  return mb_s ? fmt::format("{:.0f}", *mb_s) : "-";
}

double Fraction(uint64_t part, uint64_t whole) {
  return whole == 0 ? 0 : static_cast<double>(part) / static_cast<double>(whole);
}

}  // namespace

Bytes GenerateImageStream(uint64_t seed, uint64_t size, DataMix* mix) {
  struct Region {
    uint64_t offset, length;
  };
  Bytes out(size, 0);
  Rng rng(seed);
  TextLines text(seed * 7919 + 17);
  std::vector<Region> sources;  // random and text regions, for duplicates
  std::array<uint64_t, 4> written{};
  for (uint64_t off = 0; off < size;) {
    uint64_t pages = static_cast<uint64_t>(std::exp2(rng.Uniform() * 11));  // 1 .. 2047
    uint64_t rsize = std::min(pages * kPage, size - off);
    // Weight: the kind's deficit against the target mix, plus some chance
    // for every kind so kinds interleave.
    std::array<double, 4> w{};
    for (size_t k = 0; k < w.size(); ++k) {
      double deficit =
          kTargetMix[k] * static_cast<double>(off + rsize) - static_cast<double>(written[k]);
      w[k] = std::max(0.0, deficit) + kTargetMix[k] * static_cast<double>(rsize) * 0.25;
    }
    if (sources.empty()) w[kDup] = 0;
    auto kind = static_cast<Kind>(rng.Pick(w));
    MutableByteSpan region(out.data() + off, rsize);
    switch (kind) {
      case kZero:
        break;  // already zero
      case kRandom:
        rng.Fill(region);
        sources.push_back({off, rsize});
        break;
      case kText:
        text.Fill(rng, region);
        sources.push_back({off, rsize});
        break;
      case kDup: {  // a 4 KiB-aligned piece of an earlier region
        const Region& src = sources[rng.Below(sources.size())];
        rsize = std::min(rsize, src.length);
        uint64_t start = src.offset + rng.Below((src.length - rsize) / kPage + 1) * kPage;
        std::memcpy(out.data() + off, out.data() + start, rsize);
        break;
      }
    }
    written[kind] += rsize;
    off += rsize;
  }
  if (mix != nullptr)
    *mix = DataMix{written[kZero], written[kRandom], written[kText], written[kDup]};
  return out;
}

Result<BenchData> MakeBenchData(uint64_t seed, uint64_t stream_bytes) {
  BenchData data;
  data.seed = seed;
  data.stream_bytes = stream_bytes;
  Bytes stream = GenerateImageStream(seed, stream_bytes, &data.mix);
  for (uint64_t off = 0; off < stream.size(); off += kBenchChunkSize) {
    ByteSpan chunk =
        ByteSpan(stream).subspan(off, std::min<uint64_t>(kBenchChunkSize, stream.size() - off));
    if (IsAllZero(chunk)) {
      ++data.zero_chunks;
      continue;
    }
    data.chunks.emplace_back(chunk.begin(), chunk.end());
    data.ids.push_back(crypto::Sha256(chunk));
    CAIRN_ASSIGN_OR_RETURN(Bytes stored, blob::Encode(chunk));
    data.plain_bytes += chunk.size();
    data.stored_bytes += stored.size();
    data.stored.push_back(std::move(stored));
  }
  // A fixed key: the same bytes cost the same under any key.
  crypto::Key256 master;
  Rng(0x6165732d6b6579).Fill(master);
  data.crypt = crypto::CryptConfig::FromMasterKey(master);
  for (const Bytes& chunk : data.chunks) {
    data.enc_ids.push_back(data.crypt->ChunkId(chunk));
    CAIRN_ASSIGN_OR_RETURN(Bytes stored, blob::Encode(chunk, {.crypt = data.crypt.get()}));
    data.enc_stored_bytes += stored.size();
    data.enc_stored.push_back(std::move(stored));
  }
  if (data.chunks.empty()) {
    return FailedPreconditionError(
        fmt::format("a benchmark stream of {} bytes (seed {}) holds no chunk that is not all zeros",
                    stream_bytes, seed));
  }
  return data;
}

Result<Rate> MeasureRate(const MeasureOptions& options, const WorkFactory& make) {
  const int threads = std::max(1, options.threads);
  const auto duration = std::chrono::duration<double>(std::max(0.0, options.seconds));
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> total{0};
  std::latch ready(threads + 1);  // every thread built its work, and the clock starts
  std::chrono::steady_clock::time_point start, deadline;
  pipeline::WorkerGroup group([&stop] { stop.store(true); });
  group.Start(threads, [&](int index) -> Status {
    Result<WorkFn> work = InternalError("benchmark work not built");
    try {
      work = make(index);
    } catch (const std::exception& e) {  // must not skip the latch below
      work = InternalError(std::string("building benchmark work: ") + e.what());
    }
    ready.arrive_and_wait();  // also on error: the others must not wait for us
    if (!work.ok()) return work.status();
    do {
      CAIRN_ASSIGN_OR_RETURN(uint64_t bytes, (*work)());
      uint64_t sum = total.fetch_add(bytes, std::memory_order_relaxed) + bytes;
      if (options.max_bytes != 0 && sum >= options.max_bytes) break;
    } while (!stop.load(std::memory_order_relaxed) && std::chrono::steady_clock::now() < deadline);
    return Status::Ok();
  });
  // Set before the latch opens: the workers read `deadline` only after it.
  start = std::chrono::steady_clock::now();
  deadline = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(duration);
  ready.arrive_and_wait();
  CAIRN_RETURN_IF_ERROR(group.Wait());
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return Rate{total.load(), seconds};
}

MachineInfo ReadMachineInfo(Env& env) {
  MachineInfo info;
  info.cores = AllCores();
  info.date = datastore::FormatRfc3339(env.NowUnixSeconds());
  info.cpu_model = "unknown";
  // /proc files report size 0: read until the end.
  auto file = env.OpenReadable("/proc/cpuinfo");
  if (!file.ok()) return info;
  std::string text;
  Bytes buf(64 << 10);
  while (text.size() < (1 << 20)) {
    auto n = (*file)->ReadAt(text.size(), buf);
    if (!n.ok() || *n == 0) break;
    text.append(reinterpret_cast<const char*>(buf.data()), *n);
  }
  for (std::string_view key : {"model name", "Model", "cpu model"}) {
    size_t pos = text.find(std::string("\n") + std::string(key));
    if (pos == std::string::npos && text.starts_with(key)) pos = 0;
    if (pos == std::string::npos) continue;
    size_t colon = text.find(':', pos);
    size_t end = text.find('\n', colon == std::string::npos ? pos : colon);
    if (colon == std::string::npos || colon > end) continue;
    std::string value = text.substr(colon + 1, end - colon - 1);
    value.erase(0, value.find_first_not_of(" \t"));
    if (!value.empty()) info.cpu_model = value;
    break;
  }
  return info;
}

Result<MachineBenchReport> RunMachineBenchmark(Env& env, const MachineBenchOptions& options) {
  MachineBenchReport report;
  report.machine = ReadMachineInfo(env);
  report.threads = options.threads > 0 ? options.threads : report.machine.cores;
  report.seconds = options.seconds;
  CAIRN_ASSIGN_OR_RETURN(BenchData data, MakeBenchData(options.seed, options.stream_bytes));
  report.seed = data.seed;
  report.stream_bytes = data.stream_bytes;
  report.mix = data.mix;
  report.chunks = data.chunks.size();
  report.zero_chunks = data.zero_chunks;
  report.plain_bytes = data.plain_bytes;
  report.stored_bytes = data.stored_bytes;
  if (options.store != nullptr) report.repo = options.store->path();
  if (options.on_start) options.on_start(report);

  CAIRN_RETURN_IF_ERROR(MeasureCpuRows(options, report.threads, data, &report.rows));
  if (options.store != nullptr) {
    // A datastore this user may read but not write (a read-only mount,
    // another user's) still gets the read and rehearsal rows.
    auto scratch = ScratchStore::Create(env, options.store->path());
    ScratchStore* scratch_store = scratch.ok() ? scratch->get() : nullptr;
    std::string unwritable(scratch.ok() ? "" : scratch.status().message());
    Status s = MeasureStoreRows(env, options, report.threads, data, scratch_store, unwritable,
                                &report.rows);
    // Removed before the rehearsal, so its reads do not compete with the
    // scratch store's write-back; on error the destructor tries too.
    Status removed = scratch_store ? scratch_store->Remove() : Status::Ok();
    CAIRN_RETURN_IF_ERROR(s);
    CAIRN_RETURN_IF_ERROR(removed);
    CAIRN_RETURN_IF_ERROR(MeasureRehearsal(env, options, report.threads, &report.rows));
  }
  return report;
}

nlohmann::json ReportJson(const MachineBenchReport& report) {
  auto figure = [](const std::optional<double>& v) -> nlohmann::json {
    if (!v) return nullptr;
    return std::round(*v * 10) / 10;
  };
  nlohmann::json rows = nlohmann::json::array();
  for (const BenchRow& r : report.rows) {
    rows.push_back({{"name", r.name},
                    {"what", r.what},
                    {"per_core_mb_s", figure(r.per_core_mb_s)},
                    {"all_cores_mb_s", figure(r.all_cores_mb_s)},
                    {"pbs_reference_mb_s", figure(r.pbs_reference_mb_s)},
                    {"note", r.note}});
  }
  const DataMix& m = report.mix;
  auto share = [&](uint64_t part) { return std::round(Fraction(part, m.total()) * 1e4) / 1e4; };
  return {{"machine",
           {{"cores", report.machine.cores},
            {"cpu_model", report.machine.cpu_model},
            {"date", report.machine.date}}},
          {"threads", report.threads},
          {"seconds_per_measurement", report.seconds},
          {"unit", "MB/s: 10^6 bytes of chunk plaintext per second"},
          {"data",
           {{"generator",
             "image-like stream (zeros, random, text-like, duplicates), 4 MiB chunks, "
             "all-zero chunks left out"},
            {"seed", report.seed},
            {"stream_bytes", report.stream_bytes},
            {"fractions",
             {{"zero", share(m.zero)},
              {"random", share(m.random)},
              {"text", share(m.text)},
              {"dup", share(m.dup)}}},
            {"chunks", report.chunks},
            {"zero_chunks_left_out", report.zero_chunks},
            {"plain_bytes", report.plain_bytes},
            {"stored_bytes", report.stored_bytes}}},
          {"repo", report.repo.empty() ? nlohmann::json(nullptr) : nlohmann::json(report.repo)},
          {"pbs_reference",
           "proxmox-backup-client benchmark on an AMD Ryzen 7 2700X, one thread: compare with "
           "per_core_mb_s"},
          {"rows", rows}};
}

std::string FormatHeader(const MachineBenchReport& report) {
  const DataMix& m = report.mix;
  std::string out = fmt::format(
      "cairn benchmark: {}, {} cores, {}; {:g} s per measurement\n"
      "data: {} image-like stream (seed {}): zeros {:.0f}%, random {:.0f}%, text {:.0f}%, "
      "duplicates {:.0f}%;\n"
      "      {} chunks of 4 MiB that are not all zeros ({} all-zero left out), stored at {:.0f}% "
      "of their size\n\n",
      report.machine.cpu_model, report.machine.cores, report.machine.date, report.seconds,
      HumanBytes(report.stream_bytes, 0), report.seed, 100 * Fraction(m.zero, m.total()),
      100 * Fraction(m.random, m.total()), 100 * Fraction(m.text, m.total()),
      100 * Fraction(m.dup, m.total()), report.chunks, report.zero_chunks,
      100 * Fraction(report.stored_bytes, report.plain_bytes));
  out += fmt::format("{:<18} {:>9} {:>11} {:>15}   {}\n", "MB/s", "1 core",
                     fmt::format("{} cores", report.threads), "PBS (1 core)", "note");
  return out;
}

std::string FormatRow(const BenchRow& row) {
  std::string pbs = "-";
  if (row.pbs_reference_mb_s) {
    pbs = fmt::format("{:.0f}", *row.pbs_reference_mb_s);
    if (row.per_core_mb_s) {
      pbs = fmt::format("{} ({:.0f}%)", pbs, 100 * *row.per_core_mb_s / *row.pbs_reference_mb_s);
    }
  }
  return fmt::format("{:<18} {:>9} {:>11} {:>15}   {}\n", row.name, Figure(row.per_core_mb_s),
                     Figure(row.all_cores_mb_s), pbs, row.note);
}

std::string FormatFooter(const MachineBenchReport& report) {
  std::string out =
      "\nMB/s = 10^6 bytes of chunk plaintext per second. PBS: proxmox-backup-client benchmark\n"
      "on an AMD Ryzen 7 2700X, one thread, on a very compressible pattern: compare it with the\n"
      "1-core column (the percentage). What each row measures:\n";
  for (const BenchRow& r : report.rows) out += fmt::format("  {:<18} {}\n", r.name, r.what);
  return out;
}

}  // namespace cairn::perf
