// A server's datastore opened as a datastore::Datastore, so that restore,
// verify, snapshots, ls and cat run on a server exactly as on a path, on the
// same pipelines (docs/ARCHITECTURE.md, "Server and remote client").
//
// How: the client keeps a metadata mirror of the remote datastore in its
// cache (CACHE/remote/HOST_PORT/STORE, a datastore layout without chunks).
// Opening syncs the list of snapshots and their manifests (one request);
// indexes and blobs are fetched the first time they are opened, by
// MirrorEnv, and checked as always against the manifest (sizes and
// checksums; the signature too for encrypted snapshots). Chunks come from a
// RemoteChunkSource set as the Datastore's source(). Nothing in the mirror
// is trusted more than the server: every byte is checked as if read locally.
//
// Backups write through the server's session (remote_backend.h); prune,
// forget, gc and the rest run on the server, through its API (docs/SERVER.md).
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "base/env.h"
#include "datastore/datastore.h"
#include "remote/remote_client.h"

namespace cairn::remote {

// The cache root: $CAIRN_CACHE_DIR, else $XDG_CACHE_HOME/cairn, else
// ~/.cache/cairn.
std::string CacheRoot();

// Forwards to the base Env it owns; opening (or stat'ing) an index or blob
// file of a snapshot inside the mirror directory that is not there yet
// fetches it from the server first. A reader may download only the chunks
// of indexes it read (docs/SERVER.md, "Reader tokens and chunks"): fetching
// an index grants them; an index found in the cache is registered with
// the server (POST …/grant) the first time this process opens it. The
// server forgets grants when it restarts: MirrorEnv registers with the
// client how to re-grant every index this process read
// (RemoteClient::SetSessionRestorer), which the chunk source calls when it
// is refused a chunk.
class MirrorEnv : public EnvWrapper {
 public:
  MirrorEnv(std::unique_ptr<Env> base, std::shared_ptr<RemoteClient> client, std::string mirror_dir);

  Result<std::unique_ptr<ReadableFile>> OpenReadable(const std::string& path) override;
  Result<FileInfo> Stat(const std::string& path) override;

 private:
  // Fetches `path` when it is a fetchable file of the mirror that is
  // missing; OK when there is nothing to do.
  Status MaybeFetch(const std::string& path);

  std::unique_ptr<Env> base_;
  std::shared_ptr<RemoteClient> client_;
  std::string mirror_dir_;
  struct Granted;  // the files the server knows we read (shared with the restorer)
  std::shared_ptr<Granted> granted_;
};


// Syncs the mirror's snapshot list with the server and opens it. `env` must
// be the MirrorEnv built over the same client and `mirror_dir`. The
// returned datastore reads chunks from the server.
Result<std::unique_ptr<datastore::Datastore>> OpenMirror(Env& env,
                                                         std::shared_ptr<RemoteClient> client,
                                                         const std::string& mirror_dir);

// CACHE/remote/HOST_PORT/STORE for `url`.
std::string MirrorDir(const std::string& cache_root, const RemoteUrl& url);

}  // namespace cairn::remote
