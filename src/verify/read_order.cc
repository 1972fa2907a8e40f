// The order verify reads chunks in (verify_detail.h, verify.h).
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <atomic>
#include <fstream>

#include "pipeline/worker_group.h"
#include "verify/verify_detail.h"

namespace cairn::verify {
namespace detail {

void SortByInode(Env& env, const store::LocalChunkStore& chunks, const std::vector<ChunkUse>& uses,
                 const std::vector<uint32_t>& unique, std::span<uint32_t> stretch) {
  constexpr uint64_t kMissing = UINT64_MAX;
  std::vector<uint64_t> inode(stretch.size());  // 8 bytes a chunk: a whole store may be sorted
  std::atomic<size_t> next{0};
  // A few stats in flight let the disk's elevator order the inode reads.
  const int threads = static_cast<int>(std::clamp<size_t>(stretch.size() / 256, 1, 8));
  pipeline::WorkerGroup group;
  group.Start(threads, [&](int) -> Status {
    for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < stretch.size();) {
      auto info = env.Stat(chunks.ChunkPath(uses[unique[stretch[i]]].id));
      inode[i] = info.ok() ? info->inode : kMissing;
    }
    return Status::Ok();
  });
  group.Wait().IgnoreError();  // the workers never fail
  // Inode numbers below 2^32 (ext4 always; xfs mostly): inode and index
  // share one 64-bit key, sorted in place. Ties keep id order (indexes
  // ascend with the id), and the missing sort last.
  constexpr uint64_t kLast = UINT32_MAX;
  auto fits = [](uint64_t n) { return n < kLast || n == kMissing; };
  if (std::all_of(inode.begin(), inode.end(), fits)) {
    for (size_t i = 0; i < inode.size(); ++i) {
      inode[i] = (std::min(inode[i], kLast) << 32) | stretch[i];
    }
    std::sort(inode.begin(), inode.end());
    for (size_t i = 0; i < inode.size(); ++i) stretch[i] = static_cast<uint32_t>(inode[i]);
    return;
  }
  std::vector<std::pair<uint64_t, uint32_t>> keyed(stretch.size());  // 64-bit inode numbers
  for (size_t i = 0; i < keyed.size(); ++i) keyed[i] = {inode[i], stretch[i]};
  inode = {};
  std::sort(keyed.begin(), keyed.end());
  for (size_t i = 0; i < keyed.size(); ++i) stretch[i] = keyed[i].second;
}

ChunkOrder ResolveOrder(const datastore::Datastore& store, const VerifyOptions& options) {
  // Not a local chunk store: its layout is unknown.
  if (options.source != nullptr || store.is_remote()) return ChunkOrder::kId;
  if (options.order != ChunkOrder::kAuto) return options.order;
  return IsRotational(store.chunks().dir()) ? ChunkOrder::kInode : ChunkOrder::kId;
}

}  // namespace detail

std::string_view ChunkOrderName(ChunkOrder order) {
  switch (order) {
    case ChunkOrder::kAuto:
      return "auto";
    case ChunkOrder::kId:
      return "id";
    case ChunkOrder::kInode:
      return "inode";
  }
  return "?";
}

Result<ChunkOrder> ParseChunkOrder(std::string_view text) {
  for (ChunkOrder o : {ChunkOrder::kAuto, ChunkOrder::kId, ChunkOrder::kInode}) {
    if (text == ChunkOrderName(o)) return o;
  }
  return InvalidArgumentError(fmt::format("chunk order \"{}\": expected auto, id or inode", text));
}

// Straight to stat(2) and sysfs, not through Env: a property of the device,
// not data, and Env has no device numbers.
bool IsRotational(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || major(st.st_dev) == 0) return false;  // 0: no device
  const std::string dev = fmt::format("/sys/dev/block/{}:{}", major(st.st_dev), minor(st.st_dev));
  // A partition has no queue of its own; ".." after the device's link is
  // its parent disk (the kernel resolves it in the link's target).
  for (const char* queue : {"/queue/rotational", "/../queue/rotational"}) {
    std::ifstream in(dev + queue);
    int rotational = 0;
    if (in >> rotational) return rotational == 1;
  }
  return false;
}

}  // namespace cairn::verify
