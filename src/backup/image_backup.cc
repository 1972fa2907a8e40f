#include "backup/image_backup.h"

#include <fmt/format.h>

#include "backup/chunk_writer.h"
#include "pipeline/fetch_pipeline.h"

namespace cairn::backup {

Result<index::FixedIndex> BackupImage(ReadableFile& source, uint64_t size, store::ChunkSink& sink,
                                      const ImageBackupOptions& options, ImageStats* stats) {
  CAIRN_RETURN_IF_ERROR(index::FixedIndex::ValidateChunkSize(options.chunk_size));
  if (size > index::kMaxImageSize) {
    return InvalidArgumentError(fmt::format("{}: {} bytes is larger than the supported maximum",
                                            source.path(), size));
  }
  const size_t count = index::FixedIndex::ChunkCount(size, options.chunk_size);
  std::vector<crypto::Digest> digests(count);  // workers write disjoint digests[i]
  ChunkWriter writer(sink, {.crypt = options.crypt,
                            .known = options.known,
                            .meter = pipeline::MeterOf(options.progress),
                            .usual_length = options.chunk_size});
  // The restore pipeline, run the other way: reads of the source in
  // flight (tuned by the controller, as a restore tunes its fetches), then
  // hash, compress and insert on all cores.
  pipeline::ConcurrencyController controller(
      pipeline::ConcurrencyController::Options::ForJobs(options.reads, 2));
  pipeline::FetchPipelineOptions popts;
  popts.cpu_workers = options.workers;
  popts.max_bytes_in_flight = options.max_bytes_in_flight;
  popts.controller = &controller;
  popts.progress = options.progress;
  pipeline::FetchPipelineStats ps;
  auto length = [&](size_t i) {
    uint64_t offset = uint64_t{i} * options.chunk_size;
    return static_cast<size_t>(std::min<uint64_t>(options.chunk_size, size - offset));
  };
  CAIRN_RETURN_IF_ERROR(pipeline::RunFetchPipeline(
      count,
      [&](size_t i, ReadBuffer* data) -> Status {
        const uint64_t offset = uint64_t{i} * options.chunk_size;
        const size_t len = length(i);
        data->Resize(len);
        CAIRN_ASSIGN_OR_RETURN(size_t n, source.ReadAt(offset, data->mutable_span()));
        if (n != len) {
          return FailedPreconditionError(
              fmt::format("{} shrank while being read (expected {} bytes, ended at {})",
                          source.path(), size, offset + n));
        }
        return Status::Ok();
      },
      [&](size_t i, ReadBuffer& data) -> Status {
        CAIRN_ASSIGN_OR_RETURN(digests[i], writer.Store(data));
        if (options.progress != nullptr) options.progress->Add(data.size());
        return Status::Ok();
      },
      // The read buffer and the compressed copy.
      [&](size_t i) { return uint64_t{length(i)} * 2; }, popts, &ps));
  const pipeline::ConcurrencyController::Summary reads = controller.summary();
  stats->reads_final = reads.final_limit;
  stats->reads_max = reads.max_limit;
  stats->reads_mean = reads.mean_limit;

  CAIRN_ASSIGN_OR_RETURN(uint64_t end_size, source.Size());
  if (end_size != size) {
    return FailedPreconditionError(fmt::format(
        "{} changed size while being read ({} → {} bytes); back up a stable copy or snapshot",
        source.path(), size, end_size));
  }
  static_cast<ChunkWriterStats&>(*stats) = writer.stats();
  stats->bytes = size;
  return index::FixedIndex(size, options.chunk_size, std::move(digests));
}

}  // namespace cairn::backup
