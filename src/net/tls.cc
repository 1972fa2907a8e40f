#include "net/tls.h"

namespace cairn::net {
Status GenerateSelfSigned(const std::string&, const std::string&, const std::vector<std::string>&) {
  return UnimplementedError("not yet");
}
Status EnsureCertificate(const std::string&, const std::string&, const std::vector<std::string>&) {
  return UnimplementedError("not yet");
}
std::string FingerprintOfDer(ByteSpan) { return {}; }
Result<std::string> CertificateFingerprint(const std::string&) { return UnimplementedError("not yet"); }
Result<std::string> NormalizeFingerprint(std::string_view) { return UnimplementedError("not yet"); }
}  // namespace cairn::net
