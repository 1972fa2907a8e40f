#include "server/server_config.h"

namespace cairn::server {
net::ServerOptions ServerConfig::ToServerOptions() const { return limits; }
Result<ServerConfig> LoadServerConfig(const std::string&) { return UnimplementedError("not yet"); }
Result<std::pair<std::string, std::string>> ParseStoreFlag(const std::string&) {
  return UnimplementedError("not yet");
}
bool IsValidName(std::string_view) { return false; }
Status FinishConfig(ServerConfig*) { return UnimplementedError("not yet"); }
}  // namespace cairn::server
