// API tokens of `cairn serve`: NAME:SECRET pairs, each bound to one
// datastore (or "*": all of them) and one role. The secret is 32 random
// bytes shown once, as 64 hex digits, when the token is made; the server
// keeps only SHA-256(secret) (a random 256-bit secret needs no slow hash:
// there is nothing to guess).
//
// Stored in STATE_DIR/tokens.json, mode 0600, rewritten atomically (temp
// file, fsync, rename). A running server re-reads it when its mtime or size
// changes, so `cairn token create` / `revoke` take effect without a restart.
//
// Roles (what each may do in its datastore; docs/SECURITY.md):
//   reader  list snapshots, read manifests, indexes, blobs and chunks
//   backup  create snapshots in groups it owns (a new group becomes its own);
//           list and read only the groups it owns; delete nothing
//   verify  reader + start verify tasks on the server
//   admin   everything, including prune, forget, protect and gc
//   metrics GET /metrics on the API port (Prometheus) and nothing else: no
//           datastore, snapshot or task; bound to one datastore it sees
//           only that datastore's series
// Every role but backup may read its datastore's status (store-wide counts
// tell of other hosts' backups); notes may be set by admin and by a backup
// token on the groups it owns.
//
// Thread safety: all methods may be called concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace cairn::server {

enum class Role { kReader, kBackup, kVerify, kAdmin, kMetrics };
std::string_view RoleName(Role role);
// "reader", "backup", "verify", "admin", "metrics"; InvalidArgument otherwise.
Result<Role> ParseRole(std::string_view text);

// What a request wants to do; Allows() maps roles to actions. Ownership
// (backup role, own groups only) is checked by the caller.
enum class Action {
  kListStores,     // see the datastore at all
  kListSnapshots,  // list snapshots (backup: own groups only)
  kRead,           // manifests, indexes, blobs, chunks (backup: own groups only)
  kBackup,         // create a snapshot
  kVerify,         // start a verify task, read task status
  kPrune,          // forget, prune, protect, unprotect, gc: admin only
  kNotes,          // set a snapshot's notes (backup: own groups only)
  kStatus,         // the datastore's status (counts, sizes, last gc and verify): not backup
  kMetrics,        // GET /metrics on the API port: metrics and admin
};
bool Allows(Role role, Action action);

struct Token {
  std::string name;   // [A-Za-z0-9._-]{1,64}
  std::string store;  // a datastore name, or "*" for all
  Role role = Role::kReader;
  int64_t created = 0;  // Unix seconds
};

class TokenStore {
 public:
  // Opens STATE_DIR/tokens.json; a missing file is an empty store.
  // DataLoss naming the file when it does not parse; PermissionDenied when
  // it is readable by group or others.
  static Result<std::unique_ptr<TokenStore>> Open(const std::string& state_dir);

  // Makes a token and returns "NAME:SECRET", the only time the secret is
  // shown. AlreadyExists when the name is taken; InvalidArgument for a bad
  // name or store.
  Result<std::string> Create(const std::string& name, const std::string& store, Role role);
  // NotFound when there is no such token.
  Status Revoke(const std::string& name);
  std::vector<Token> List() const;

  // Checks "NAME:SECRET" in constant time with respect to the secret.
  // PermissionDenied for anything that does not match, never saying which
  // part was wrong; `why`, when given, gets that for the server's log
  // ("unknown token 'x'", "wrong secret for token 'x'", "malformed
  // credential", "tokens file …: …"), never the secret.
  Result<Token> Authenticate(std::string_view credential, std::string* why = nullptr) const;

  class Impl;
  ~TokenStore();

 private:
  explicit TokenStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A token name as a client gave it, safe for logs: at most 64 characters,
// anything but A-Z a-z 0-9 . _ - shown as '?'.
std::string PrintableName(std::string_view name);

// True when `token` may act on datastore `store` at all.
inline bool TokenCoversStore(const Token& token, std::string_view store) {
  return token.store == "*" || token.store == store;
}

}  // namespace cairn::server
