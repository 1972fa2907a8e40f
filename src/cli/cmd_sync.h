// What `cairn sync` shares with `cairn serve`'s sync jobs: opening a side.
#pragma once

#include <memory>
#include <string>

#include "cli/cli_util.h"

namespace cairn::cli {

// Opens repository `repo` (a path, https://HOST:PORT/STORE or s3://) as
// one side of a sync: with `token` and `fingerprint` for a server (else
// ctx's), in a Context of its own that the returned pointer owns (a
// server's mirror env, an object store's cache). Errors name the side.
Result<std::shared_ptr<const datastore::Datastore>> OpenSyncSide(const Context& ctx,
                                                                 const std::string& repo,
                                                                 const std::string& token,
                                                                 const std::string& fingerprint,
                                                                 std::string_view which);

}  // namespace cairn::cli
