// Manifest: the list of a snapshot's archives, written last and atomically
// (index.json.blob). A snapshot directory without a manifest is an
// unfinished backup and does not exist for readers.
//
// The manifest is JSON (schema in docs/FORMAT.md) wrapped in a blob, so its
// bytes carry a CRC32C; the decoder checks every field and rejects unknown
// versions. Per-archive `csum` is the fixed index checksum for images and
// the SHA-256 of the stored blob file for blobs.
//
// Thread safety: value type.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/bytes.h"
#include "base/env.h"
#include "base/status.h"
#include "crypto/crypt_config.h"
#include "crypto/sha256.h"

namespace cairn::index {

enum class ArchiveKind { kImage, kBlob, kTree };

// "img", "blob", "tree": the manifest's and the JSON outputs' word for a kind.
const char* ArchiveKindName(ArchiveKind kind);

struct ArchiveEntry {
  std::string name;  // "disk0.img", "vm.conf.blob"
  ArchiveKind kind = ArchiveKind::kImage;
  uint64_t size = 0;        // image bytes, or blob plaintext bytes
  crypto::Digest csum{};    // see file comment
  uint32_t chunk_size = 0;  // images only
  // Trees: `size` and `csum` describe the payload stream (NAME.tree.data.didx),
  // these the metadata stream (NAME.tree.meta.didx).
  uint64_t meta_size = 0;
  crypto::Digest meta_csum{};

  // File in the snapshot directory that holds the archive's index or blob
  // (for trees, the payload stream's index).
  std::string FileName() const;
  // Trees only: the metadata stream's index.
  std::string MetaFileName() const { return name + ".meta.didx"; }
};

struct Manifest {
  std::string type;  // vm, ct, host
  std::string id;
  std::string time;  // RFC 3339 UTC, "2026-11-30T05:00:00Z"
  std::string ns;    // namespace path, "" for the root
  std::vector<ArchiveEntry> archives;
  int64_t created_unix = 0;
  std::string created_by;  // "cairn 0.1.0"
  // Encrypted snapshots: the fingerprint of their key (CryptConfig), and
  // the manifest's signature, HMAC-SHA256 under the key's MAC key over the
  // canonical JSON without "signature" (docs/FORMAT.md, "Manifest").
  bool encrypted = false;
  crypto::Digest key_fingerprint{};
  crypto::Digest signature{};
  // Set by ManifestFromJson: the canonical bytes the signature covers.
  std::string signed_content;

  const ArchiveEntry* Find(std::string_view name) const;
};

// Archive names: [A-Za-z0-9][A-Za-z0-9._-]* ending in ".img", ".blob" or ".tree",
// at most 128 bytes. InvalidArgument otherwise.
Result<ArchiveKind> ParseArchiveName(std::string_view name);

// With `crypt`, the manifest is marked encrypted with that key and signed
// (`m`'s own encrypted/key_fingerprint/signature fields are ignored).
std::string ManifestToJson(const Manifest& m, const crypto::CryptConfig* crypt = nullptr);
// DataLoss on malformed JSON or a field of the wrong type or value. Does not
// check the signature (that needs the key): CheckManifestSignature.
Result<Manifest> ManifestFromJson(std::string_view json);

// An encrypted manifest's signature under `crypt`: FailedPrecondition when
// `crypt` is another key, DataLoss when the signature does not match (the
// manifest was changed by someone without the key).
Status CheckManifestSignature(const Manifest& m, const crypto::CryptConfig& crypt);

// Blob-wrapped encode/decode (the on-disk form). The manifest blob itself is
// not encrypted, so snapshots can be listed, pruned and collected without
// the key; the signature protects it.
Result<Bytes> EncodeManifest(const Manifest& m, const crypto::CryptConfig* crypt = nullptr);
Result<Manifest> DecodeManifest(ByteSpan stored);

inline constexpr char kManifestFileName[] = "index.json.blob";

}  // namespace cairn::index
