// The HTTP API of `cairn serve` (docs/SERVER.md, "HTTP API"): every request
// authenticated by token, authorised by role and datastore, then answered
// from the datastores named in the configuration. Handlers block (file
// reads); net::HttpServer runs them on its worker pool.
//
// Thread safety: Handle() may be called concurrently.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "base/env.h"
#include "base/logging.h"
#include "datastore/datastore.h"
#include "net/http_server.h"
#include "server/backup_session.h"
#include "server/tasks.h"
#include "server/tokens.h"

namespace cairn::server {

inline constexpr int kApiVersion = 1;
// The most digests one batched chunk request may name.
inline constexpr size_t kMaxBatchDigests = 1024;

// Batched chunk download frames (POST …/chunks): for each digest asked, in
// the order the server read them:
//   digest[32] | status u8 | length u32 LE | payload[length]
// status kFrameOk: payload is the stored chunk; otherwise a UTF-8 message.
enum FrameStatus : uint8_t { kFrameOk = 0, kFrameNotFound = 1, kFrameError = 2 };
inline constexpr size_t kFrameHeaderSize = 32 + 1 + 4;

struct ApiOptions {
  std::string state_dir;  // the server's state directory (tasks/ lives there)
  // A backup session with no request for this long is aborted: its
  // unfinished snapshot is removed and the group unlocked.
  std::chrono::seconds session_timeout{900};
};

class Api {
 public:
  // `stores`: name → opened datastore. REQUIRES: all outlive the Api.
  Api(Env& env, Logger& logger, TokenStore& tokens,
      std::map<std::string, std::unique_ptr<datastore::Datastore>> stores,
      ApiOptions options = {});

  void Handle(const net::HttpRequest& request, net::ResponseWriter& response);

 private:
  Env& env_;
  Logger& logger_;
  TokenStore& tokens_;
  std::map<std::string, std::unique_ptr<datastore::Datastore>> stores_;
  ApiOptions options_;
  std::unique_ptr<SessionRegistry> sessions_;
  // Server-side verify tasks (server/tasks.h). Declared after stores_:
  // destroyed (running tasks cancelled and joined) before the datastores.
  std::unique_ptr<TaskManager> tasks_ =
      std::make_unique<TaskManager>(env_, logger_, options_.state_dir, stores_);
};

}  // namespace cairn::server
