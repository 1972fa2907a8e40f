#include "index/manifest.h"

#include <nlohmann/json.hpp>

#include <type_traits>
#include <utility>

#include <fmt/format.h>

#include "blob/blob.h"
#include "format/magic.h"

namespace cairn::index {
namespace {

using nlohmann::json;

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

// Reads a required field of the expected JSON type, or fails with DataLoss.
// Strict: an integer field takes only a JSON integer that fits `T` (no
// booleans, no floats, whose conversion could also overflow), a string
// field only a JSON string.
template <typename T>
Status GetField(const json& j, const char* key, T* out) {
  auto it = j.find(key);
  if (it == j.end()) return DataLossError(fmt::format("manifest: missing field '{}'", key));
  auto wrong = [&] {
    return DataLossError(fmt::format("manifest: field '{}' has the wrong type", key));
  };
  if constexpr (std::is_same_v<T, std::string>) {
    if (!it->is_string()) return wrong();
    *out = it->template get<std::string>();
  } else {
    static_assert(std::is_integral_v<T>);
    if (!it->is_number_integer()) return wrong();
    bool fits = it->is_number_unsigned() ? std::in_range<T>(it->template get<uint64_t>())
                                         : std::in_range<T>(it->template get<int64_t>());
    if (!fits) return DataLossError(fmt::format("manifest: field '{}' is out of range", key));
    *out = it->template get<T>();
  }
  return Status::Ok();
}

}  // namespace

const char* ArchiveKindName(ArchiveKind kind) {
  switch (kind) {
    case ArchiveKind::kImage: return "img";
    case ArchiveKind::kBlob: return "blob";
    case ArchiveKind::kTree: return "tree";
  }
  return "?";
}

std::string ArchiveEntry::FileName() const {
  switch (kind) {
    case ArchiveKind::kImage: return name + ".fidx";
    case ArchiveKind::kBlob: return name;
    case ArchiveKind::kTree: return name + ".data.didx";
  }
  return name;
}

const ArchiveEntry* Manifest::Find(std::string_view archive) const {
  for (const auto& a : archives) {
    if (a.name == archive) return &a;
  }
  return nullptr;
}

Result<ArchiveKind> ParseArchiveName(std::string_view name) {
  auto bad = [&](std::string_view why) {
    return InvalidArgumentError(fmt::format("archive name '{}': {}", name, why));
  };
  if (name.empty() || name.size() > 128) return bad("must be 1 to 128 characters");
  if (name[0] == '.' || name[0] == '-') return bad("must start with a letter or digit");
  for (char c : name) {
    if (!IsNameChar(c)) return bad("may contain only letters, digits, '.', '_' and '-'");
  }
  if (name.ends_with(".img") && name.size() > 4) return ArchiveKind::kImage;
  if (name.ends_with(".blob") && name.size() > 5) return ArchiveKind::kBlob;
  if (name.ends_with(".tree") && name.size() > 5) return ArchiveKind::kTree;
  return bad(
      "must end in .img (disk image), .tree (directory tree) or .blob (small file stored whole)");
}

std::string ManifestToJson(const Manifest& m, const crypto::CryptConfig* crypt) {
  json archives = json::array();
  for (const auto& a : m.archives) {
    json e = {{"name", a.name},
              {"kind", ArchiveKindName(a.kind)},
              {"size", a.size},
              {"csum", crypto::DigestHex(a.csum)}};
    if (a.kind == ArchiveKind::kImage) e["chunk_size"] = a.chunk_size;
    if (a.kind == ArchiveKind::kTree) {
      e["meta_size"] = a.meta_size;
      e["meta_csum"] = crypto::DigestHex(a.meta_csum);
    }
    archives.push_back(std::move(e));
  }
  json j = {{"version", format::kManifestVersion},
            {"type", m.type},
            {"id", m.id},
            {"time", m.time},
            {"ns", m.ns},
            {"archives", std::move(archives)},
            {"created_unix", m.created_unix},
            {"created_by", m.created_by}};
  if (crypt != nullptr) {
    j["crypt"] = {{"mode", "encrypt"}, {"key_fingerprint", crypto::DigestHex(crypt->fingerprint())}};
    // Canonical form: compact, keys sorted (nlohmann::json's object order).
    j["signature"] = crypto::DigestHex(crypt->Mac(AsBytes(j.dump())));
  }
  return j.dump(2);
}

Status CheckManifestSignature(const Manifest& m, const crypto::CryptConfig& crypt) {
  if (!m.encrypted) return Status::Ok();
  if (m.key_fingerprint != crypt.fingerprint()) {
    return UnauthenticatedError(fmt::format(
        "snapshot {}/{}/{} was made with another key (fingerprint {}...), not the one given ({})",
        m.type, m.id, m.time, crypto::DigestHex(m.key_fingerprint).substr(0, 16),
        crypt.FingerprintText()));
  }
  crypto::Digest expected = crypt.Mac(AsBytes(m.signed_content));
  if (!crypto::ConstantTimeEqual(expected, m.signature)) {
    return DataLossError(fmt::format(
        "manifest of {}/{}/{}: signature does not match: it was changed by someone without "
        "the key",
        m.type, m.id, m.time));
  }
  return Status::Ok();
}

Result<Manifest> ManifestFromJson(std::string_view text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return DataLossError("manifest: not a JSON object");
  int version = 0;
  CAIRN_RETURN_IF_ERROR(GetField(j, "version", &version));
  if (version != format::kManifestVersion) {
    return DataLossError(fmt::format("manifest: unsupported version {}", version));
  }
  Manifest m;
  CAIRN_RETURN_IF_ERROR(GetField(j, "type", &m.type));
  CAIRN_RETURN_IF_ERROR(GetField(j, "id", &m.id));
  CAIRN_RETURN_IF_ERROR(GetField(j, "time", &m.time));
  CAIRN_RETURN_IF_ERROR(GetField(j, "ns", &m.ns));
  CAIRN_RETURN_IF_ERROR(GetField(j, "created_unix", &m.created_unix));
  CAIRN_RETURN_IF_ERROR(GetField(j, "created_by", &m.created_by));
  auto it = j.find("archives");
  if (it == j.end() || !it->is_array()) return DataLossError("manifest: 'archives' missing");
  for (const json& e : *it) {
    if (!e.is_object()) return DataLossError("manifest: archive entry is not an object");
    ArchiveEntry a;
    std::string kind;
    std::string csum;
    CAIRN_RETURN_IF_ERROR(GetField(e, "name", &a.name));
    CAIRN_RETURN_IF_ERROR(GetField(e, "kind", &kind));
    CAIRN_RETURN_IF_ERROR(GetField(e, "size", &a.size));
    CAIRN_RETURN_IF_ERROR(GetField(e, "csum", &csum));
    auto parsed = ParseArchiveName(a.name);
    if (!parsed.ok()) return DataLossError(fmt::format("manifest: {}", parsed.status().message()));
    a.kind = *parsed;
    if (kind != ArchiveKindName(a.kind)) {
      return DataLossError(fmt::format("manifest: archive '{}' has kind '{}'", a.name, kind));
    }
    if (!FromHex(csum, a.csum)) {
      return DataLossError(fmt::format("manifest: archive '{}' has a malformed csum", a.name));
    }
    if (a.kind == ArchiveKind::kImage) {
      CAIRN_RETURN_IF_ERROR(GetField(e, "chunk_size", &a.chunk_size));
    }
    if (a.kind == ArchiveKind::kTree) {
      std::string meta_csum;
      CAIRN_RETURN_IF_ERROR(GetField(e, "meta_size", &a.meta_size));
      CAIRN_RETURN_IF_ERROR(GetField(e, "meta_csum", &meta_csum));
      if (!FromHex(meta_csum, a.meta_csum)) {
        return DataLossError(
            fmt::format("manifest: archive '{}' has a malformed meta_csum", a.name));
      }
    }
    if (m.Find(a.name) != nullptr) {
      return DataLossError(fmt::format("manifest: archive '{}' listed twice", a.name));
    }
    m.archives.push_back(std::move(a));
  }
  if (auto c = j.find("crypt"); c != j.end()) {
    if (!c->is_object()) return DataLossError("manifest: 'crypt' is not an object");
    std::string mode;
    std::string print;
    std::string signature;
    CAIRN_RETURN_IF_ERROR(GetField(*c, "mode", &mode));
    if (mode != "encrypt") return DataLossError(fmt::format("manifest: unknown crypt mode '{}'", mode));
    CAIRN_RETURN_IF_ERROR(GetField(*c, "key_fingerprint", &print));
    CAIRN_RETURN_IF_ERROR(GetField(j, "signature", &signature));
    if (!FromHex(print, m.key_fingerprint) || !FromHex(signature, m.signature)) {
      return DataLossError("manifest: malformed key fingerprint or signature");
    }
    m.encrypted = true;
    j.erase("signature");
    m.signed_content = j.dump();
  } else if (j.contains("signature")) {
    return DataLossError("manifest: a signature without 'crypt'");
  }
  return m;
}

Result<Bytes> EncodeManifest(const Manifest& m, const crypto::CryptConfig* crypt) {
  return blob::Encode(AsBytes(ManifestToJson(m, crypt)));
}

Result<Manifest> DecodeManifest(ByteSpan stored) {
  auto json_bytes = blob::Decode(stored);
  if (!json_bytes.ok()) {
    if (json_bytes.status().code() == StatusCode::kUnauthenticated) {
      return DataLossError("manifest blob is encrypted; manifests never are");
    }
    return json_bytes.status();
  }
  return ManifestFromJson(AsStringView(*json_bytes));
}

}  // namespace cairn::index
