// An object-store datastore opened as a datastore::Datastore, so every
// command (backup, restore, verify, prune, gc, status, serve) runs on it
// exactly as on a path, on the same code (docs/S3.md).
//
// Layout in the bucket, under PREFIX (the local datastore's layout):
//   PREFIX/.cairn-datastore           marker, written last by init
//   PREFIX/.chunks/XXX/<64 hex id>    one object per chunk (s3_chunk_store.h)
//   PREFIX/[ns/A/]TYPE/ID/owner       group owner (server backups)
//   PREFIX/[ns/A/]TYPE/ID/TIME/FILE   snapshot files: index.json.blob
//                                     (written last), indexes, blobs,
//                                     verify.json.blob, .protected, notes.txt
//
// The local cache (CACHE/s3/HOST_PORT/BUCKET/PREFIX) is a datastore
// directory without chunks: every metadata object, plus the locks, the
// writers' registry, gc state and the verify ledger, which stay local (as
// in PBS, an object-store datastore is written by one host at a time; a
// server serving it is the way to share it). Opening syncs the cache with
// one listing (chunks left out): objects missing or different locally are
// fetched (many in flight), local files the bucket no longer has are
// removed. S3Env then writes every metadata file through to the bucket
// before it appears locally, and deletes there first. Deleting the cache
// loses nothing: the next command rebuilds it.
//
// Thread safety: S3Env and the backend may be used from any thread.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "base/env.h"
#include "datastore/datastore.h"
#include "s3/s3_client.h"
#include "s3store/s3_chunk_store.h"
#include "s3store/s3_location.h"

namespace cairn::s3store {

// CACHE/s3/HOST_PORT/BUCKET[/PREFIX] for `location`.
std::string CacheDirFor(const std::string& cache_root, const S3Location& location);

// Forwards to the base Env it owns; metadata files inside the cache
// directory are written through to the bucket (uploaded when renamed into
// place or closed, deleted in the bucket before locally).
class S3Env : public EnvWrapper {
 public:
  S3Env(std::unique_ptr<Env> base, std::shared_ptr<s3::S3Client> client, S3Location location,
        std::string cache_dir);

  Result<std::unique_ptr<WritableFile>> OpenWritable(const std::string& path, OpenMode mode) override;
  Status Rename(const std::string& from, const std::string& to) override;
  Status RemoveFile(const std::string& path) override;

  // The object key of `path` when it is a metadata file kept in the
  // bucket; nullopt for anything else (outside the cache, locks, temporary
  // files, gc and ledger state).
  std::optional<std::string> SyncedKey(const std::string& path) const;
  // Uploads the local file `path` as `key`.
  Status Upload(const std::string& path, const std::string& key);

  Env& base() { return *base_; }

 private:
  std::unique_ptr<Env> base_;
  std::shared_ptr<s3::S3Client> client_;
  S3Location location_;
  std::string cache_dir_;
};

// Creates the datastore: the bucket when it is missing, then the marker
// (create-only). AlreadyExists when PREFIX already holds one.
Status InitS3Datastore(const S3Location& location);

struct S3Datastore {
  std::unique_ptr<S3Env> env;  // the datastore refers to it: keep it alive
  std::unique_ptr<datastore::Datastore> store;
};

// Checks the marker, syncs the cache under `cache_root` and opens the
// datastore, its chunks in the bucket. NotFound (saying how to create one)
// when PREFIX holds no datastore; FailedPrecondition for a missing bucket;
// PermissionDenied for bad credentials.
Result<S3Datastore> OpenS3Datastore(std::unique_ptr<Env> base, const S3Location& location,
                                    const std::string& cache_root);

}  // namespace cairn::s3store
