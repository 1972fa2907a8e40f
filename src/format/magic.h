// Every magic number and format version of cairn, in one place.
// docs/FORMAT.md describes the byte layout behind each of them.
#pragma once

#include <array>
#include <cstdint>

namespace cairn::format {

using Magic = std::array<uint8_t, 8>;

// Chunk and blob files (.chunks/…, NAME.blob, index.json.blob).
inline constexpr Magic kBlobMagic = {'C', 'A', 'I', 'R', 'N', 'B', 'L', 'B'};
inline constexpr uint16_t kBlobVersion = 1;

// Fixed index of an image archive (NAME.img.fidx).
inline constexpr Magic kFixedIndexMagic = {'C', 'A', 'I', 'R', 'N', 'F', 'I', 'X'};
inline constexpr uint16_t kFixedIndexVersion = 1;

// Dynamic index of a tree archive's stream (NAME.tree.{meta,data}.didx).
inline constexpr Magic kDynamicIndexMagic = {'C', 'A', 'I', 'R', 'N', 'D', 'I', 'X'};
inline constexpr uint16_t kDynamicIndexVersion = 1;

// Metadata stream of a tree archive (the first bytes of the stream).
inline constexpr Magic kTreeMagic = {'C', 'A', 'I', 'R', 'N', 'T', 'R', 'E'};
inline constexpr uint16_t kTreeVersion = 1;

// Verify ledger (DATASTORE/.ledger/): the compacted `ledger` file, and each
// batch appended to `journal` (its own magic, so a reader can find the next
// batch after a damaged one).
inline constexpr Magic kLedgerMagic = {'C', 'A', 'I', 'R', 'N', 'L', 'D', 'G'};
inline constexpr uint16_t kLedgerVersion = 1;
inline constexpr Magic kLedgerBatchMagic = {'C', 'A', 'I', 'R', 'N', 'J', 'N', 'L'};
inline constexpr uint16_t kLedgerBatchVersion = 1;

// The copy-on-write overlay of a writable NBD export (`cairn nbd --writable
// --overlay FILE`): its header's magic.
inline constexpr Magic kOverlayMagic = {'C', 'A', 'I', 'R', 'N', 'O', 'V', 'L'};
inline constexpr uint16_t kOverlayVersion = 1;

// Datastore marker file (.cairn-datastore): JSON, this format version.
inline constexpr int kDatastoreVersion = 1;
// Manifest JSON schema version (inside index.json.blob).
inline constexpr int kManifestVersion = 1;
// Verify state JSON schema version (inside verify.json.blob).
inline constexpr int kVerifyStateVersion = 1;

}  // namespace cairn::format
