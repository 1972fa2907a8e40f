#include "server/tokens.h"

namespace cairn::server {
std::string_view RoleName(Role role) {
  switch (role) {
    case Role::kReader: return "reader";
    case Role::kBackup: return "backup";
    case Role::kVerify: return "verify";
    case Role::kAdmin: return "admin";
  }
  return "?";
}
Result<Role> ParseRole(std::string_view) { return UnimplementedError("not yet"); }
bool Allows(Role, Action) { return false; }
class TokenStore::Impl {};
TokenStore::TokenStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TokenStore::~TokenStore() = default;
Result<std::unique_ptr<TokenStore>> TokenStore::Open(const std::string&) {
  return UnimplementedError("not yet");
}
Result<std::string> TokenStore::Create(const std::string&, const std::string&, Role) {
  return UnimplementedError("not yet");
}
Status TokenStore::Revoke(const std::string&) { return UnimplementedError("not yet"); }
std::vector<Token> TokenStore::List() const { return {}; }
Result<Token> TokenStore::Authenticate(std::string_view) const {
  return UnimplementedError("not yet");
}
}  // namespace cairn::server
