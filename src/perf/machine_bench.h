// Machine benchmark (`cairn benchmark`): how fast this machine runs each
// stage of cairn's chunk path, per core and on all cores, so a user can see
// which stage bounds backup, restore and verify here, beside the reference
// figures of `proxmox-backup-client benchmark` (PBS).
//
// How it measures:
//   1. Data: a deterministic image-like stream (GenerateImageStream: regions
//      of zeros, random bytes, text-like lines and copies of earlier
//      regions, the kinds and byte mix of bench/gendata's image generator)
//      cut into 4 MiB chunks like an image backup; all-zero chunks are left
//      out, because backup and restore never hash, compress or fetch them.
//      Each chunk is also encoded as backup stores it (zstd level 1, raw
//      when that does not shrink it) for the decode rows, and as an
//      encrypted snapshot stores it (the same, then AES-256-GCM, under a
//      fixed benchmark key, with its HMAC-SHA256 id) for the encrypted rows.
//   2. Each stage runs in MeasureRate: T threads, each with its own state
//      and output buffers, walk the shared read-only chunks from different
//      starting points for about `seconds`; the rate is chunk plaintext
//      bytes over wall time, in MB/s (10^6 bytes, as PBS counts). Once with
//      T = 1 (per core), once with T = every core.
//   3. With a datastore: inserts into a scratch chunk store created inside
//      the datastore directory (the file system the chunks live on; removed
//      afterwards, also on error), reads with the full check of a sample of
//      the chunks of the newest snapshots, and restore rehearsals
//      (restore/image_restore.h, `rehearse`) of the start of the newest
//      image archive. Encrypted snapshots are read with the datastore's key
//      (Datastore::SetKey; the reads then decrypt and check keyed ids);
//      those without it are skipped, and the row notes say how many.
//
// Thread safety: RunMachineBenchmark is called from one thread; it starts
// and joins its own. The other functions are pure or thread-compatible.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/bytes.h"
#include "base/env.h"
#include "base/status.h"
#include "crypto/crypt_config.h"
#include "crypto/sha256.h"
#include "datastore/datastore.h"

namespace cairn::perf {

inline constexpr uint32_t kBenchChunkSize = 4u << 20;  // an image chunk
inline constexpr uint64_t kDefaultStreamBytes = uint64_t{64} << 20;
// Of the first 40 seeds, the one whose 64 MiB stream comes nearest the
// target mix (35.0% zeros, 25.1% random, 29.8% text, 10.3% duplicates):
// 64 MiB holds few regions of up to 8 MiB, so seeds differ by up to ±9%.
inline constexpr uint64_t kDefaultSeed = 14;

// Bytes of each kind of data in a generated stream.
struct DataMix {
  uint64_t zero = 0;
  uint64_t random = 0;
  uint64_t text = 0;
  uint64_t dup = 0;  // copies of earlier random or text regions
  uint64_t total() const { return zero + random + text + dup; }
};

// `size` bytes of an image-like stream, the same bytes for the same seed on
// any machine: 4 KiB-aligned regions of log-uniform size (4 KiB to 8 MiB),
// each of the kind furthest behind its share of the target mix (35% zeros,
// 25% random, 30% text-like, 10% duplicates), with some randomness. `mix`
// (optional) gets the bytes of each kind.
Bytes GenerateImageStream(uint64_t seed, uint64_t size, DataMix* mix);

// The chunks every stage works on.
struct BenchData {
  std::vector<Bytes> chunks;        // plaintext, kBenchChunkSize (the last may be short)
  std::vector<Bytes> stored;        // each chunk as backup stores it (blob::Encode)
  std::vector<crypto::Digest> ids;  // SHA-256 of each chunk
  // The same chunks as an encrypted snapshot stores them: a fixed benchmark
  // key (the speed does not depend on it), each chunk's keyed id
  // (HMAC-SHA256) and its blob (zstd level 1 or raw, then AES-256-GCM).
  std::shared_ptr<const crypto::CryptConfig> crypt;
  std::vector<Bytes> enc_stored;
  std::vector<crypto::Digest> enc_ids;
  uint64_t seed = 0;
  uint64_t stream_bytes = 0;
  DataMix mix;                // of the whole stream, all-zero chunks included
  uint64_t zero_chunks = 0;   // all-zero chunks left out
  uint64_t plain_bytes = 0;   // of `chunks`
  uint64_t stored_bytes = 0;  // of `stored`
  uint64_t enc_stored_bytes = 0;  // of `enc_stored`
};

// Generates the stream and cuts, filters and encodes it. FailedPrecondition
// when no chunk is left (a stream too short to hold anything but zeros).
Result<BenchData> MakeBenchData(uint64_t seed, uint64_t stream_bytes = kDefaultStreamBytes);

// The work of one thread: processes its next piece (a chunk) and returns
// the plaintext bytes it covered.
using WorkFn = std::function<Result<uint64_t>()>;
// Builds the state of thread `index` (untimed) and returns its work.
using WorkFactory = std::function<Result<WorkFn>(int index)>;

struct MeasureOptions {
  int threads = 1;
  double seconds = 1;
  // Stop once all threads together covered this many bytes (0: no limit);
  // bounds what the insert measurement writes to a fast disk.
  uint64_t max_bytes = 0;
};

struct Rate {
  uint64_t bytes = 0;
  double seconds = 0;  // wall time from the common start until every thread stopped
  double MBPerSecond() const {
    return seconds > 0 ? static_cast<double>(bytes) / 1e6 / seconds : 0;
  }
};

// Builds every thread's work, starts them together and runs each until the
// time (or byte limit) is up, at least once each, so a tiny duration still
// yields a figure. The first error stops all threads and is returned.
Result<Rate> MeasureRate(const MeasureOptions& options, const WorkFactory& make);

// One line of the report.
struct BenchRow {
  std::string name;  // "sha256", "chunk_insert", ...
  std::string what;  // what one unit of work is
  std::optional<double> per_core_mb_s;
  std::optional<double> all_cores_mb_s;
  std::optional<double> pbs_reference_mb_s;  // PBS's single-threaded figure
  std::string note;  // "n/a (no server yet)", the sample a store row used, ...
};

struct MachineInfo {
  int cores = 1;
  std::string cpu_model;  // "model name" of /proc/cpuinfo, or "unknown"
  std::string date;       // RFC 3339 UTC
};
MachineInfo ReadMachineInfo(Env& env);

struct MachineBenchReport {
  MachineInfo machine;
  int threads = 1;  // of the all-cores measurements
  double seconds = 0;
  uint64_t seed = 0;
  uint64_t stream_bytes = 0;
  DataMix mix;
  size_t chunks = 0;
  uint64_t zero_chunks = 0;
  uint64_t plain_bytes = 0;
  uint64_t stored_bytes = 0;
  std::string repo;  // the datastore path, empty without one
  std::vector<BenchRow> rows;
};

struct MachineBenchOptions {
  double seconds = 1;  // per measurement
  int threads = 0;     // threads of the all-cores measurements; 0: one per core
  uint64_t seed = kDefaultSeed;
  uint64_t stream_bytes = kDefaultStreamBytes;
  // With a datastore, the store rows too. Must outlive the call.
  const datastore::Datastore* store = nullptr;
  // With a server (-r https://…): the tls rows. Each builds thread i's
  // work, one request on that thread's own connection per call (an upload
  // of 4 MiB, or a download of 4 MiB), returning the bytes moved.
  WorkFactory tls_upload;
  WorkFactory tls_download;
  std::string server;  // "https://host:port", for the notes
  // Optional: called once the data is ready (the report without rows), and
  // with each row as soon as it is measured, to show progress.
  std::function<void(const MachineBenchReport&)> on_start;
  std::function<void(const BenchRow&)> on_row;
};

// Runs every measurement: about 2 × 11 × `seconds` without a datastore,
// plus 4 × `seconds` and two short rehearsals with one. Leaves nothing
// behind in the datastore: the scratch store DATASTORE/.bench-tmp-PID is
// removed on success and on error (and one left by a killed run is removed
// by the next run).
Result<MachineBenchReport> RunMachineBenchmark(Env& env, const MachineBenchOptions& options);

// --json: {"machine", "threads", "seconds_per_measurement", "unit", "data",
// "repo", "pbs_reference", "rows": [{"name", "what", "per_core_mb_s",
// "all_cores_mb_s", "pbs_reference_mb_s", "note"}]}; a figure not measured is
// null.
nlohmann::json ReportJson(const MachineBenchReport& report);

// The human table, in three parts so rows can be printed as they come.
std::string FormatHeader(const MachineBenchReport& report);
std::string FormatRow(const BenchRow& row);
std::string FormatFooter(const MachineBenchReport& report);

}  // namespace cairn::perf
