#include "perf/machine_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <latch>
#include <memory>
#include <string_view>
#include <thread>

#include "blob/blob.h"
#include "format/crc32c.h"
#include "index/chunker.h"
#include "perf/bench_rows.h"
#include "pipeline/worker_group.h"

namespace cairn::perf {
namespace {

// --- measurement helpers -----------------------------------------------------

int AllCores() { return std::max(1, static_cast<int>(std::thread::hardware_concurrency())); }

// PBS's reference figures (../shared/prior-art/pbs.md §10: AMD Ryzen 7
// 2700X, one thread, 1 MiB of a synthetic, very compressible pattern).
constexpr double kPbsTls = 1235, kPbsSha256 = 2022, kPbsCompress = 752, kPbsDecompress = 1198,
                 kPbsAes = 3645, kPbsVerify = 758;

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

std::string Figure(const std::optional<double>& mb_s) {
  return mb_s ? fmt::format("{:.0f}", *mb_s) : "-";
}

double Fraction(uint64_t part, uint64_t whole) {
  return whole == 0 ? 0 : static_cast<double>(part) / static_cast<double>(whole);
}

}  // namespace

double Seconds(Env& env, int64_t start_nanos) {
  return static_cast<double>(env.NowMonotonicNanos() - start_nanos) / 1e9;
}

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

Status CheckLength(size_t got, size_t want, const crypto::Digest& id) {
  if (got == want) return Status::Ok();
  return DataLossError(
      fmt::format("chunk {}: {} bytes, the index needs {}", crypto::DigestHex(id), got, want));
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
    CAIRN_RETURN_IF_ERROR(MeasureDatastoreRows(env, options, report.threads, data, &report.rows));
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
