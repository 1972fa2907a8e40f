// TLS material for `cairn serve` and its clients: a self-signed certificate
// made at a server's first start, and certificate fingerprints, the way a
// client pins a server's identity (no CA is involved: as with ssh host keys,
// the user trusts a fingerprint once).
//
// Fingerprint: SHA-256 of the certificate's DER encoding. Shown as 32
// lowercase hex pairs joined by ':' ("ab:cd:…"); accepted with or without
// the colons, in any case.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/bytes.h"
#include "base/status.h"

namespace cairn::net {

// Writes a new self-signed certificate and its private key as PEM files:
// EC P-256, subject CN=cairn, subjectAltName DNS:localhost, IP:127.0.0.1,
// IP:::1 plus `extra_names` (each an IP address or a DNS name), valid for
// 10 years. The key file is written 0600. Both files are written to
// temporary names and renamed, key first; an existing file is never
// overwritten (AlreadyExists).
Status GenerateSelfSigned(const std::string& cert_path, const std::string& key_path,
                          const std::vector<std::string>& extra_names = {});

// Generates the pair when neither file exists; OK when both exist (after
// checking that they load and that the key matches the certificate);
// FailedPrecondition, naming the missing one, when only one exists.
Status EnsureCertificate(const std::string& cert_path, const std::string& key_path,
                         const std::vector<std::string>& extra_names = {});

// The server's private key must be its own: PermissionDenied when `key_path`
// may be read or written by group or others ("run chmod 600 …"),
// FailedPrecondition when it is not a regular file. As for tokens.json.
Status CheckPrivateKeyFile(const std::string& key_path);

// The display form ("ab:cd:…") of the fingerprint of a DER certificate.
std::string FingerprintOfDer(ByteSpan der);
// The fingerprint of the first certificate in a PEM file.
Result<std::string> CertificateFingerprint(const std::string& cert_pem_path);
// User input → display form. InvalidArgument unless it is 64 hex digits,
// optionally separated by ':'.
Result<std::string> NormalizeFingerprint(std::string_view text);

}  // namespace cairn::net
