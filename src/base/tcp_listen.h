// A listening TCP socket on HOST:PORT, for the small servers that are not
// the API's Asio server: the NBD export (nbd/nbd_server.cc) and the plain
// HTTP metrics listener (server/metrics_listener.cc).
#pragma once

#include <string>

#include "base/status.h"
#include "base/unique_fd.h"

namespace cairn {

// Binds `host` (empty: every address; numeric or a name) and `port`
// (numeric; "0" picks a free one) with SO_REUSEADDR and listens with
// `backlog`. Sets `bound` to the address really bound ("127.0.0.1:10809",
// "[::1]:10809"). Errors start with `what` (like "--listen '…'").
Result<UniqueFd> ListenTcp(const std::string& host, const std::string& port, int backlog,
                           const std::string& what, std::string* bound);

}  // namespace cairn
