// Fuzz target for the manifest decoders (index::DecodeManifest and
// index::ManifestFromJson).
//
// Each input is tried as a stored manifest (a blob), as JSON text, and as
// JSON text wrapped in a valid blob, so the fuzzer works on the JSON schema
// checks rather than on the blob CRC. Invariant: a decoded manifest survives
// a JSON round trip unchanged.
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "blob/blob.h"
#include "index/manifest.h"

namespace {

using cairn::ByteSpan;
using cairn::index::Manifest;

#define FUZZ_CHECK(cond)                                                \
  do {                                                                  \
    if (!(cond)) {                                                      \
      __builtin_fprintf(stderr, "manifest_fuzz: invariant failed: %s\n", #cond); \
      std::abort();                                                     \
    }                                                                   \
  } while (0)

void CheckRoundTrip(const Manifest& m) {
  auto back = cairn::index::ManifestFromJson(cairn::index::ManifestToJson(m));
  FUZZ_CHECK(back.ok());
  FUZZ_CHECK(back->type == m.type && back->id == m.id && back->time == m.time &&
             back->ns == m.ns && back->created_unix == m.created_unix &&
             back->created_by == m.created_by);
  FUZZ_CHECK(back->archives.size() == m.archives.size());
  for (size_t i = 0; i < m.archives.size(); ++i) {
    const auto& a = m.archives[i];
    const auto& b = back->archives[i];
    FUZZ_CHECK(a.name == b.name && a.kind == b.kind && a.size == b.size && a.csum == b.csum &&
               a.chunk_size == b.chunk_size);
    FUZZ_CHECK(cairn::index::ParseArchiveName(a.name).ok());
    FUZZ_CHECK(m.Find(a.name) == &a);  // names are unique
  }
  auto stored = cairn::index::EncodeManifest(m);
  if (stored.ok()) FUZZ_CHECK(cairn::index::DecodeManifest(*stored).ok());
}

template <typename R>
void Expect(const R& r) {
  if (r.ok()) {
    CheckRoundTrip(*r);
  } else {
    FUZZ_CHECK(r.status().code() == cairn::StatusCode::kDataLoss);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ByteSpan bytes(data, size);
  Expect(cairn::index::DecodeManifest(bytes));
  Expect(cairn::index::ManifestFromJson(cairn::AsStringView(bytes)));
  auto wrapped = cairn::blob::Encode(bytes);
  if (wrapped.ok()) Expect(cairn::index::DecodeManifest(*wrapped));
  return 0;
}
