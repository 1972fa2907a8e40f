#include "access/instant_restore.h"

#include <fmt/format.h>

namespace cairn::access {

Result<std::unique_ptr<InstantRestore>> InstantRestore::Start(const datastore::Datastore& store,
                                                              restore::RestoreRequest request,
                                                              const InstantRestoreOptions& options) {
  if (request.all || request.in_place || request.rehearse || request.target == "-" ||
      request.target.empty()) {
    return InvalidArgumentError(
        "--instant restores one image archive to a file or device (not --all, --in-place, "
        "--rehearse or standard output)");
  }
  CAIRN_ASSIGN_OR_RETURN(datastore::SnapshotRef snap, store.Resolve(request.snapshot));
  CAIRN_ASSIGN_OR_RETURN(index::Manifest manifest, store.ReadManifest(snap));
  const index::ArchiveEntry* entry = manifest.Find(request.archive);
  if (entry == nullptr) {
    return NotFoundError(fmt::format("snapshot {} has no archive {}", snap.ToString(), request.archive));
  }
  if (entry->kind != index::ArchiveKind::kImage) {
    return InvalidArgumentError(fmt::format(
        "--instant exports an image; {} is a {} archive (restore it without --instant, or "
        "mount it)",
        entry->name, index::ArchiveKindName(entry->kind)));
  }
  // The restore takes the same snapshot the export shows, even if `latest`
  // moves on meanwhile.
  request.snapshot.latest = false;
  request.snapshot.time = snap.time;
  std::unique_ptr<InstantRestore> r(new InstantRestore());
  CAIRN_ASSIGN_OR_RETURN(r->reader_, OpenImageReader(store, snap, *entry, options.readers));
  r->device_ = std::make_unique<InstantDevice>(store.env(), *r->reader_);
  nbd::NbdServerOptions nopts;
  nopts.export_info.name = entry->name;
  nopts.export_info.description =
      fmt::format("{}, being restored to {}", r->reader_->description(), request.target);
  nopts.session.logger = options.logger;
  nopts.logger = options.logger;
  CAIRN_ASSIGN_OR_RETURN(r->server_, nbd::NbdServer::Listen(options.listen, *r->device_, nopts));
  request.gate = &r->device_->gate();
  std::promise<Result<restore::RestoreReport>> promise;
  r->done_ = promise.get_future();
  r->thread_ = std::jthread([&store, request, p = std::move(promise)]() mutable {
    p.set_value(restore::RunRestore(store, request));
  });
  return r;
}

InstantRestore::~InstantRestore() { Stop().IgnoreError(); }

Result<restore::RestoreReport> InstantRestore::Wait() {
  if (!done_.valid()) return FailedPreconditionError("Wait() was called already");
  return done_.get();
}

Status InstantRestore::Stop() {
  if (stopped_) return Status::Ok();
  stopped_ = true;
  server_->Stop();
  if (thread_.joinable()) thread_.join();  // a restore still running finishes first
  return device_->Close();
}

}  // namespace cairn::access
