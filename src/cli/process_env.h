// The Env a cairn process runs on, with its hidden test hook.
#pragma once

#include <memory>

#include "base/env.h"

namespace cairn::cli {

// The process's Env: PosixEnv, or, when the environment variable
// CAIRN_TEST_READ_EIO is set (a hidden hook for the integration tests,
// never documented to users), a FaultInjectionEnv over it whose reads of
// every file with that substring in its path fail with EIO. main() builds
// ctx.env with it, as do the other places that make a fresh Env (sync's
// sides, the server's object-store datastores).
//
// Why an environment variable in the binary, not an LD_PRELOAD shim or a
// hidden option: Env is the seam every datastore read goes through (chunks
// via LocalChunkStore::Read/ReadInto, indexes and manifests via Datastore,
// the server's reads via its Datastore), so the hook reaches exactly the
// reads under test and reports them as PosixEnv reports a real EIO; an
// LD_PRELOAD shim would not work under the ASan cairn the sanitize stage
// runs these tests against (its runtime must come first in the library
// list) and would need a library built only for tests; a hidden option
// would have to be added to every verb and to `cairn serve`, while a
// variable reaches them all, and a server the test starts, unchanged.
inline constexpr char kReadEioVariable[] = "CAIRN_TEST_READ_EIO";
std::unique_ptr<Env> NewProcessEnv();

}  // namespace cairn::cli
