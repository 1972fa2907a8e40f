#include "chunkio/tree_reader.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "blob/blob.h"
#include "index/fixed_index.h"
#include "pipeline/fetch_pipeline.h"

namespace cairn::chunkio {
namespace {

// Plaintext bytes of payload chunks one ReadPayload window holds at most.
constexpr uint64_t kPayloadWindowBytes = uint64_t{64} << 20;
// Plaintext bytes of metadata chunks fetched together for the entry stream.
constexpr uint64_t kMetaWindowBytes = uint64_t{16} << 20;

// The zero ids of the recurring chunk lengths of a payload index, each
// computed when first asked for (see the file comment of the header).
class ZeroChunks {
 public:
  explicit ZeroChunks(const crypto::CryptConfig* crypt) : crypt_(crypt) {}
  bool IsZero(const index::DynamicIndex& idx, size_t i) {
    if (!candidates_ready_) FindCandidates(idx);
    auto it = digests_.find(idx.ChunkLength(i));
    if (it == digests_.end()) return false;
    if (!it->second.has_value()) it->second = index::ZeroChunkDigest(it->first, crypt_);
    return *it->second == idx.digest(i);
  }

 private:
  // The kMaxZeroLengths most frequent lengths that occur more than once.
  void FindCandidates(const index::DynamicIndex& idx) {
    candidates_ready_ = true;
    std::vector<uint32_t> lengths(idx.chunk_count());
    for (size_t i = 0; i < lengths.size(); ++i) lengths[i] = idx.ChunkLength(i);
    std::sort(lengths.begin(), lengths.end());
    std::vector<std::pair<size_t, uint32_t>> runs;  // (count, length)
    for (size_t i = 0; i < lengths.size();) {
      size_t j = i;
      while (j < lengths.size() && lengths[j] == lengths[i]) ++j;
      if (j - i > 1) runs.emplace_back(j - i, lengths[i]);
      i = j;
    }
    size_t keep = std::min(runs.size(), TreeArchiveReader::kMaxZeroLengths);
    std::partial_sort(runs.begin(), runs.begin() + keep, runs.end(), std::greater<>());
    for (size_t k = 0; k < keep; ++k) digests_.emplace(runs[k].second, std::nullopt);
  }

  const crypto::CryptConfig* crypt_;
  bool candidates_ready_ = false;
  std::unordered_map<uint32_t, std::optional<crypto::Digest>> digests_;
};

}  // namespace

std::vector<uint8_t> FindZeroChunks(const index::DynamicIndex& idx,
                                    const crypto::CryptConfig* crypt) {
  ZeroChunks zero(crypt);
  std::vector<uint8_t> out(idx.chunk_count());
  for (size_t i = 0; i < out.size(); ++i) out[i] = zero.IsZero(idx, i) ? 1 : 0;
  return out;
}

struct TreeArchiveReader::Impl {
  Impl(store::ChunkSource& source, datastore::Datastore::TreeIndexes indexes,
       std::string description, const crypto::CryptConfig* crypt)
      : source(source), indexes(std::move(indexes)), description(std::move(description)),
        crypt(crypt),
        controller(ReadConcurrency(source.Traits(), 0)),
        zero(crypt) {}

  // The decoder's source: the next metadata chunk's plaintext, checked. The
  // view lives until the next call.
  Result<ByteSpan> NextMetaChunk() {
    const index::DynamicIndex& meta = indexes.meta;
    if (meta_next >= meta.chunk_count()) return ByteSpan();
    if (meta_next >= window_end && meta_next >= single_until) FetchMetaWindow();
    const size_t i = meta_next++;
    if (i < window_end) return ByteSpan(window[i - window_begin]);
    // One at a time: a window that failed, read again up to its damage so
    // that the entries before it still come out (and the error is this
    // chunk's, in stream order).
    if (Status read = ReadStoredChunk(source, meta.digest(i), &stored); !read.ok()) {
      return read.WithContext(fmt::format("metadata chunk {}", i));
    }
    auto plain =
        DecodeCheckedChunk(stored, meta.digest(i), meta.ChunkLength(i), &scratch, crypt);
    if (!plain.ok()) return plain.status().WithContext(fmt::format("metadata chunk {}", i));
    return *plain;
  }

  // Fetches the metadata chunks from meta_next on, up to kMetaWindowBytes of
  // plaintext, on the fetch pipeline (several reads in flight, decoded on
  // its workers) into `window`. When any of them fails, the window is left
  // empty and its chunks are read one at a time instead (single_until).
  void FetchMetaWindow() {
    const index::DynamicIndex& meta = indexes.meta;
    const size_t begin = meta_next;
    size_t stop = begin;
    uint64_t bytes = 0;
    while (stop < meta.chunk_count() &&
           (stop == begin || bytes + meta.ChunkLength(stop) <= kMetaWindowBytes)) {
      bytes += meta.ChunkLength(stop++);
    }
    window.resize(stop - begin);
    pipeline::FetchPipelineOptions popts = ReadPipelineOptions(source.Traits(), 0, &controller);
    popts.max_bytes_in_flight = 2 * kMetaWindowBytes;
    popts.fetch_async = AsyncChunkReads(source, [&](size_t k) { return meta.digest(begin + k); });
    pipeline::FetchPipelineStats ps;
    Status s = pipeline::RunFetchPipeline(
        stop - begin,
        [&](size_t k, ReadBuffer* out) {
          return ReadStoredChunk(source, meta.digest(begin + k), out);
        },
        [&](size_t k, ReadBuffer& data) -> Status {
          CAIRN_ASSIGN_OR_RETURN(ByteSpan plain,
                                 CheckFetchedChunk(data, meta.digest(begin + k),
                                                   meta.ChunkLength(begin + k), crypt,
                                                   /*meter=*/nullptr));
          window[k].assign(plain.begin(), plain.end());
          return Status::Ok();
        },
        [&](size_t k) { return uint64_t{meta.ChunkLength(begin + k)} * 2; }, popts, &ps);
    ++meta_windows;
    if (s.ok()) {
      window_begin = begin;
      window_end = stop;
    } else {
      window.clear();
      window_begin = window_end = begin;
      single_until = stop;
    }
  }

  void Restart() {
    meta_next = 0;
    window.clear();
    window_begin = window_end = single_until = 0;
    decoder = std::make_unique<tree::TreeDecoder>([this] { return NextMetaChunk(); },
                                                  indexes.data.size());
  }

  store::ChunkSource& source;
  datastore::Datastore::TreeIndexes indexes;
  std::string description;
  const crypto::CryptConfig* crypt;
  pipeline::ConcurrencyController controller;  // reads of both streams: tuned across calls
  ZeroChunks zero;
  std::unique_ptr<tree::TreeDecoder> decoder;
  size_t meta_next = 0;  // next metadata chunk to hand the decoder
  // Metadata chunks [window_begin, window_end), decoded, fetched together.
  std::vector<Bytes> window;
  size_t window_begin = 0, window_end = 0;
  size_t single_until = 0;  // chunks before this one (after the window) are read singly
  uint64_t meta_windows = 0;
  ReadBuffer stored;   // a singly read metadata chunk, as stored
  ReadBuffer scratch;  // ... and decompressed
};

TreeArchiveReader::TreeArchiveReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TreeArchiveReader::~TreeArchiveReader() = default;

Result<std::unique_ptr<TreeArchiveReader>> TreeArchiveReader::Open(
    const datastore::Datastore& store, store::ChunkSource& source,
    const datastore::SnapshotRef& snap, const index::ArchiveEntry& entry) {
  if (entry.kind != index::ArchiveKind::kTree) {
    return InvalidArgumentError(fmt::format("archive {} of {} is a {} archive, not a tree",
                                            entry.name, snap.ToString(),
                                            index::ArchiveKindName(entry.kind)));
  }
  CAIRN_ASSIGN_OR_RETURN(index::Manifest manifest, store.ReadManifest(snap));
  CAIRN_ASSIGN_OR_RETURN(const crypto::CryptConfig* crypt, store.CryptFor(manifest));
  CAIRN_ASSIGN_OR_RETURN(datastore::Datastore::TreeIndexes indexes,
                         store.ReadTreeIndexes(snap, entry));
  return FromIndexes(source, std::move(indexes), crypt,
                     fmt::format("archive {} of {}", entry.name, snap.ToString()));
}

std::unique_ptr<TreeArchiveReader> TreeArchiveReader::FromIndexes(
    store::ChunkSource& source, datastore::Datastore::TreeIndexes indexes,
    const crypto::CryptConfig* crypt, std::string description) {
  auto impl =
      std::make_unique<Impl>(source, std::move(indexes), std::move(description), crypt);
  impl->Restart();
  return std::unique_ptr<TreeArchiveReader>(new TreeArchiveReader(std::move(impl)));
}

Result<std::optional<tree::Entry>> TreeArchiveReader::Next() {
  auto e = impl_->decoder->Next();
  if (!e.ok()) return e.status().WithContext(impl_->description);
  return e;
}

void TreeArchiveReader::Restart() { impl_->Restart(); }

Result<tree::Entry> TreeArchiveReader::Find(const std::string& path) {
  Restart();
  while (true) {
    CAIRN_ASSIGN_OR_RETURN(std::optional<tree::Entry> e, Next());
    if (!e.has_value()) break;
    int c = tree::CompareTreePaths(e->path, path);
    if (c == 0) return std::move(*e);
    if (c > 0) break;  // pre-order with sorted names: it would have come by now
  }
  return NotFoundError(fmt::format("{} has no entry {}", impl_->description, path));
}

Status TreeArchiveReader::ReadPayload(uint64_t offset, uint64_t size,
                                      const std::function<Status(ByteSpan)>& out) {
  const index::DynamicIndex& idx = impl_->indexes.data;
  if (offset > idx.size() || size > idx.size() - offset) {
    return OutOfRangeError(fmt::format("{}: payload range [{}, {}) outside the stream of {} bytes",
                                       impl_->description, offset, offset + size, idx.size()));
  }
  if (size == 0) return Status::Ok();
  const uint64_t end = offset + size;
  const size_t last = idx.FindChunk(end - 1);
  Bytes zeros;
  for (size_t begin = idx.FindChunk(offset); begin <= last;) {
    // A window of chunks, each distinct non-zero id fetched once.
    size_t stop = begin;
    uint64_t window_bytes = 0;
    std::vector<size_t> fetch;  // chunk positions to fetch
    std::unordered_map<crypto::Digest, size_t, crypto::DigestHash> slot_of;
    while (stop <= last &&
           (stop == begin || window_bytes + idx.ChunkLength(stop) <= kPayloadWindowBytes)) {
      window_bytes += idx.ChunkLength(stop);
      if (!IsZeroChunk(stop) && slot_of.try_emplace(idx.digest(stop), fetch.size()).second) {
        fetch.push_back(stop);
      }
      ++stop;
    }
    std::vector<Bytes> slots(fetch.size());
    pipeline::FetchPipelineOptions popts =
        ReadPipelineOptions(impl_->source.Traits(), 0, &impl_->controller);
    popts.max_bytes_in_flight = 2 * kPayloadWindowBytes;
    popts.fetch_async =
        AsyncChunkReads(impl_->source, [&](size_t k) { return idx.digest(fetch[k]); });
    pipeline::FetchPipelineStats ps;
    Status s = pipeline::RunFetchPipeline(
        fetch.size(),
        [&](size_t k, ReadBuffer* stored) {
          return ReadStoredChunk(impl_->source, idx.digest(fetch[k]), stored);
        },
        [&](size_t k, ReadBuffer& stored) -> Status {
          CAIRN_ASSIGN_OR_RETURN(ByteSpan plain,
                                 CheckFetchedChunk(stored, idx.digest(fetch[k]),
                                                   idx.ChunkLength(fetch[k]), impl_->crypt,
                                                   /*meter=*/nullptr));
          slots[k].assign(plain.begin(), plain.end());
          return Status::Ok();
        },
        [&](size_t k) { return uint64_t{idx.ChunkLength(fetch[k])} * 2; }, popts, &ps);
    if (!s.ok()) return s.WithContext(impl_->description);
    for (size_t i = begin; i < stop; ++i) {
      const uint64_t start = idx.ChunkStart(i);
      const uint32_t len = idx.ChunkLength(i);
      ByteSpan plain;
      if (IsZeroChunk(i)) {
        if (zeros.size() < len) zeros.assign(len, 0);
        plain = ByteSpan(zeros.data(), len);
      } else {
        plain = slots[slot_of.at(idx.digest(i))];
        if (plain.size() != len) {  // one id at two lengths: the index is inconsistent
          return DataLossError(fmt::format("{}: chunk {}: {} bytes, the index needs {}",
                                           impl_->description, crypto::DigestHex(idx.digest(i)),
                                           plain.size(), len));
        }
      }
      const uint64_t from = std::max(offset, start), to = std::min(end, start + len);
      CAIRN_RETURN_IF_ERROR(out(plain.subspan(from - start, to - from)));
    }
    begin = stop;
  }
  return Status::Ok();
}

const crypto::CryptConfig* TreeArchiveReader::crypt() const { return impl_->crypt; }

bool TreeArchiveReader::IsZeroChunk(size_t i) { return impl_->zero.IsZero(impl_->indexes.data, i); }

const index::DynamicIndex& TreeArchiveReader::meta_index() const { return impl_->indexes.meta; }
const index::DynamicIndex& TreeArchiveReader::data_index() const { return impl_->indexes.data; }
const std::string& TreeArchiveReader::description() const { return impl_->description; }
uint64_t TreeArchiveReader::metadata_fetches() const { return impl_->meta_windows; }

}  // namespace cairn::chunkio
