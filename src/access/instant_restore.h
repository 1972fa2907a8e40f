// InstantRestore: `cairn restore SNAPSHOT ARCHIVE TARGET --instant`. The
// image is exported over NBD at once (InstantDevice: chunks not restored
// yet are read from the store through the shared cache, restored ones from
// the target, writes go to the target) while the normal restore pipeline
// (restore::RunRestore) writes the target in the background, skipping the
// chunks a client has written meanwhile. A VM can boot from the export
// before the restore is done; when it is, the target holds the image with
// the client's writes.
//
// Thread safety: Wait and Stop from the thread that started it.
#pragma once

#include <future>
#include <memory>
#include <string>
#include <thread>

#include "access/archive_open.h"
#include "access/instant_device.h"
#include "nbd/nbd_server.h"
#include "restore/restore.h"

namespace cairn::access {

struct InstantRestoreOptions {
  std::string listen;      // unix:PATH or HOST:PORT
  ReaderSettings readers;  // cache, source, readahead of the export's reads
  Logger* logger = nullptr;
};

class InstantRestore {
 public:
  // Resolves the snapshot, checks the archive is an image, opens it for the
  // export and starts the server, then starts the restore of `request`
  // (one image archive to a file or device; not --all, --in-place,
  // --rehearse or "-") on a thread of its own. `store` and the reader
  // settings' cache and source outlive the returned object.
  static Result<std::unique_ptr<InstantRestore>> Start(const datastore::Datastore& store,
                                                       restore::RestoreRequest request,
                                                       const InstantRestoreOptions& options);
  ~InstantRestore();

  std::string Uri() const { return server_->Uri(); }
  // Blocks until the restore ends: its report, or why it failed (the export
  // goes on serving either way: a failed restore leaves no target file, so
  // chunks not restored are still read from the store).
  Result<restore::RestoreReport> Wait();
  // Stops the export (clients are disconnected) and makes the target durable.
  Status Stop();

  const InstantDevice& device() const { return *device_; }
  nbd::NbdServerStats server_stats() const { return server_->stats(); }

 private:
  InstantRestore() = default;

  std::unique_ptr<StreamReader> reader_;
  std::unique_ptr<InstantDevice> device_;
  std::unique_ptr<nbd::NbdServer> server_;
  std::future<Result<restore::RestoreReport>> done_;
  std::jthread thread_;
  bool stopped_ = false;
};

}  // namespace cairn::access
