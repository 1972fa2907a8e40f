#include "verify/coverage.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <string_view>

#include "pipeline/worker_group.h"
#include "store/local_chunk_store.h"
#include "verify/ledger.h"

namespace cairn::verify {
namespace {

constexpr size_t kChunkNameLength = 64;  // hex digits of a chunk id

}  // namespace

Result<VerifyCoverage> ReadVerifyCoverage(const datastore::Datastore& store, int64_t now_unix,
                                          const std::vector<int>& days) {
  std::string warning;  // a damaged ledger counts what it still holds
  CAIRN_ASSIGN_OR_RETURN(auto ledger, Ledger::Open(store.env(), store.path(), &warning));
  VerifyCoverage cov;
  cov.days = days;
  cov.checked.assign(days.size(), 0);
  std::mutex mu;
  // Counts one chunk file name (the id's 64 hex digits, nothing after).
  auto count = [&](std::string_view name, VerifyCoverage* into) {
    if (name.size() != kChunkNameLength) return;  // .trash, .bad, temporaries
    auto id = crypto::ParseDigestHex(name);
    if (!id.ok()) return;
    ++into->chunks;
    const LedgerEntry* e = ledger->Find(*id);
    if (e == nullptr || e->verdict != ChunkVerdict::kOk) return;
    for (size_t i = 0; i < days.size(); ++i) {
      if (now_unix - e->time <= int64_t{days[i]} * 86400) ++into->checked[i];
    }
  };
  auto add = [&](const VerifyCoverage& part) {
    std::lock_guard lock(mu);
    cov.chunks += part.chunks;
    for (size_t i = 0; i < days.size(); ++i) cov.checked[i] += part.checked[i];
  };
  if (store.chunks_in_object_store()) {
    VerifyCoverage part;
    part.checked.assign(days.size(), 0);
    CAIRN_RETURN_IF_ERROR(store.remote()->ListChunks(
        [&](std::string_view name, uint64_t) { count(name, &part); }));
    add(part);
    return cov;
  }
  // Names only, on two threads: a figure for a graph, not worth the cores.
  CAIRN_RETURN_IF_ERROR(pipeline::ParallelFor(2, store::kChunkPrefixDirs, [&](size_t p) {
    auto names = store.env().ListDir(store.chunks().PrefixDirPath(static_cast<unsigned>(p)));
    if (!names.ok()) return Status::Ok();  // a missing prefix directory holds nothing
    VerifyCoverage part;
    part.checked.assign(days.size(), 0);
    for (const std::string& name : *names) count(name, &part);
    add(part);
    return Status::Ok();
  }));
  return cov;
}

}  // namespace cairn::verify
