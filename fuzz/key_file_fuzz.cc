// Fuzz target for the key file decoder (crypto::ParseKeyFile).
//
// A key file comes from the user's disk or a paper copy typed back in, so it
// is input like any other: parsing either succeeds with parameters inside
// the documented bounds or fails with DataLoss, never crashes. Unwrapping is
// not fuzzed (each try runs the KDF); the unit tests cover its failures.
#include <cstdio>
#include <cstdint>
#include <cstdlib>

#include "crypto/key_file.h"

#define FUZZ_CHECK(cond)                                                \
  do {                                                                  \
    if (!(cond)) {                                                      \
      __builtin_fprintf(stderr, "key_file_fuzz: invariant failed: %s\n", #cond); \
      std::abort();                                                     \
    }                                                                   \
  } while (0)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto info = cairn::crypto::ParseKeyFile(text);
  if (!info.ok()) {
    // Unimplemented: a newer key file version ("upgrade cairn").
    FUZZ_CHECK(info.status().code() == cairn::StatusCode::kDataLoss ||
               info.status().code() == cairn::StatusCode::kUnimplemented);
    return 0;
  }
  FUZZ_CHECK(cairn::crypto::KdfName(info->kdf) != nullptr);
  return 0;
}
