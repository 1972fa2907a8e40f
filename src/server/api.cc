#include "server/api.h"

#include <algorithm>
#include <cstring>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "crypto/sha256.h"
#include "format/coding.h"
#include "index/manifest.h"

namespace cairn::server {
namespace {

using nlohmann::json;

constexpr uint64_t kMaxSnapshotFile = uint64_t{1} << 30;  // indexes of 4 TiB images fit
constexpr char kOwnerFileName[] = "owner";

void SendJson(net::ResponseWriter& response, int status, const json& body) {
  std::string text = body.dump();
  response.Send(status, "application/json", AsBytes(text));
}

void SendError(net::ResponseWriter& response, int status, std::string_view message,
               bool auth_challenge = false) {
  std::string text = json{{"error", message}}.dump();
  std::vector<std::pair<std::string, std::string>> headers;
  if (auth_challenge) headers.emplace_back("WWW-Authenticate", "Bearer realm=\"cairn\"");
  response.Send(status, "application/json", AsBytes(text), headers);
}

int HttpStatusFor(const Status& s) {
  switch (s.code()) {
    case StatusCode::kNotFound: return 404;
    case StatusCode::kInvalidArgument: return 400;
    case StatusCode::kPermissionDenied: return 403;
    case StatusCode::kAlreadyExists: return 409;
    case StatusCode::kFailedPrecondition: return 409;
    case StatusCode::kUnavailable: return 503;
    case StatusCode::kResourceExhausted: return 507;
    default: return 500;
  }
}

// Splits "/a/b/c" into {"a", "b", "c"}; empty segments are kept so that
// "//" and a trailing "/" do not match any route.
std::vector<std::string_view> Segments(std::string_view path) {
  std::vector<std::string_view> out;
  if (path.empty() || path[0] != '/') return out;
  path.remove_prefix(1);
  while (true) {
    size_t slash = path.find('/');
    out.push_back(path.substr(0, slash));
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return out;
}

// Names of the files in a snapshot directory a client may read: the
// manifest, archive indexes and blobs, the verify state. Nothing with a '/',
// nothing hidden, only known suffixes.
bool IsSnapshotFileName(std::string_view name) {
  if (name.empty() || name.size() > 200 || name[0] == '.') return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return name.ends_with(".blob") || name.ends_with(".img.fidx") ||
         name.ends_with(".tree.meta.didx") || name.ends_with(".tree.data.didx");
}

std::string Query(const net::HttpRequest& r, const std::string& name) {
  auto it = r.query.find(name);
  return it == r.query.end() ? std::string() : it->second;
}

class Handling {
 public:
  Handling(Env& env, Logger& logger, TokenStore& tokens,
           const std::map<std::string, std::unique_ptr<datastore::Datastore>>& stores,
           const net::HttpRequest& request, net::ResponseWriter& response)
      : env_(env), logger_(logger), tokens_(tokens), stores_(stores), req_(request),
        res_(response) {}

  void Run() {
    auto seg = Segments(req_.path);
    if (seg.size() < 2 || seg[0] != "api" || seg[1] != "v1") {
      return SendError(res_, 404, fmt::format("no such resource: {}", req_.path));
    }
    seg.erase(seg.begin(), seg.begin() + 2);
    if (seg.size() == 1 && seg[0] == "version") {
      if (!Method("GET")) return;
      return SendJson(res_, 200, json{{"server", "cairn"}, {"api", kApiVersion}});
    }
    if (!Authenticate()) return;
    if (seg.size() == 1 && seg[0] == "stores") {
      if (!Method("GET")) return;
      json names = json::array();
      for (const auto& [name, store] : stores_) {
        if (TokenCoversStore(token_, name) && Allows(token_.role, Action::kListStores)) {
          names.push_back(name);
        }
      }
      return SendJson(res_, 200, json{{"stores", names}});
    }
    if (seg.size() >= 3 && seg[0] == "stores") {
      if (!PickStore(seg[1])) return;
      std::string_view what = seg[2];
      if (seg.size() == 3 && what == "snapshots") return ListSnapshots();
      if (seg.size() == 3 && what == "file") return GetFile();
      if (seg.size() == 4 && what == "chunk") return GetChunk(seg[3]);
      if (seg.size() == 3 && what == "chunks") return GetChunks();
    }
    SendError(res_, 404, fmt::format("no such resource: {}", req_.path));
  }

 private:
  bool Method(std::string_view want) {
    if (req_.method == want) return true;
    SendError(res_, 405, fmt::format("{} takes {}, not {}", req_.path, want, req_.method));
    return false;
  }

  bool Authenticate() {
    auto it = req_.headers.find("authorization");
    if (it == req_.headers.end()) {
      SendError(res_, 401, "authentication required: pass a token (--token or CAIRN_TOKEN)", true);
      return false;
    }
    std::string_view value = it->second;
    constexpr std::string_view kBearer = "Bearer ";
    if (!value.starts_with(kBearer)) {
      SendError(res_, 401, "the Authorization header must be 'Bearer NAME:SECRET'", true);
      return false;
    }
    auto token = tokens_.Authenticate(value.substr(kBearer.size()));
    if (!token.ok()) {
      logger_.Warn("{}: refused token: {}", req_.peer, token.status().message());
      SendError(res_, 401, "invalid token", true);
      return false;
    }
    token_ = *token;
    return true;
  }

  bool PickStore(std::string_view name) {
    auto it = stores_.find(std::string(name));
    // A token for another datastore learns nothing about which ones exist.
    if (it == stores_.end() || !TokenCoversStore(token_, name)) {
      if (it == stores_.end() && token_.store == "*") {
        SendError(res_, 404, fmt::format("no datastore named '{}' on this server", name));
      } else {
        SendError(res_, 403, fmt::format("token '{}' has no access to datastore '{}'",
                                         token_.name, name));
      }
      return false;
    }
    store_name_ = it->first;
    store_ = it->second.get();
    return true;
  }

  bool Allowed(Action action, std::string_view what) {
    if (Allows(token_.role, action)) return true;
    SendError(res_, 403, fmt::format("token '{}' (role {}) may not {} in datastore '{}'",
                                     token_.name, RoleName(token_.role), what, store_name_));
    return false;
  }

  // Backup tokens see only the groups they own (the owner file names the
  // token that created the group).
  bool OwnsGroup(const datastore::GroupRef& group) {
    if (token_.role != Role::kBackup) return true;
    auto owner = ReadWholeFile(env_, JoinPath(store_->GroupDir(group), kOwnerFileName), 4096);
    if (!owner.ok()) return false;
    std::string_view text = AsStringView(*owner);
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
    return text == token_.name;
  }

  void ListSnapshots() {
    if (!Method("GET") || !Allowed(Action::kListSnapshots, "list snapshots")) return;
    auto snaps = store_->ListAllSnapshots();
    if (!snaps.ok()) return SendError(res_, HttpStatusFor(snaps.status()), snaps.status().message());
    json list = json::array();
    for (const datastore::SnapshotRef& snap : *snaps) {
      if (!OwnsGroup(snap.group)) continue;
      std::string dir = store_->SnapshotDir(snap);
      auto manifest = ReadWholeFile(env_, JoinPath(dir, index::kManifestFileName), kMaxSnapshotFile);
      if (!manifest.ok()) continue;  // forgotten meanwhile
      json entry = {{"ns", snap.group.ns},
                    {"type", snap.group.type},
                    {"id", snap.group.id},
                    {"time", snap.TimeString()},
                    {"manifest", ToHex(*manifest)}};
      auto verify = ReadWholeFile(env_, JoinPath(dir, datastore::kVerifyStateFileName), 1 << 20);
      if (verify.ok()) entry["verify"] = ToHex(*verify);
      list.push_back(std::move(entry));
    }
    SendJson(res_, 200, json{{"store", store_name_}, {"snapshots", std::move(list)}});
  }

  // The snapshot named by ?ns=&snapshot=TYPE/ID/TIME, when it exists and the
  // token may read it.
  std::optional<datastore::SnapshotRef> Snapshot() {
    auto spec = datastore::ParseSnapshotSpec(Query(req_, "ns"), Query(req_, "snapshot"));
    if (!spec.ok()) {
      SendError(res_, 400, spec.status().message());
      return std::nullopt;
    }
    auto snap = store_->Resolve(*spec);
    if (!snap.ok()) {
      SendError(res_, HttpStatusFor(snap.status()), snap.status().message());
      return std::nullopt;
    }
    if (!OwnsGroup(snap->group)) {
      SendError(res_, 403, fmt::format("token '{}' does not own group {}", token_.name,
                                       snap->group.ToString()));
      return std::nullopt;
    }
    return *snap;
  }

  void GetFile() {
    if (!Method("GET") || !Allowed(Action::kRead, "read snapshots")) return;
    std::string name = Query(req_, "name");
    if (!IsSnapshotFileName(name)) {
      return SendError(res_, 400, fmt::format("'{}' is not the name of a snapshot file", name));
    }
    auto snap = Snapshot();
    if (!snap) return;
    auto data = ReadWholeFile(env_, JoinPath(store_->SnapshotDir(*snap), name), kMaxSnapshotFile);
    if (!data.ok()) {
      return SendError(res_, HttpStatusFor(data.status()),
                       fmt::format("snapshot {}: {}", snap->ToString(), data.status().message()));
    }
    res_.Send(200, "application/octet-stream", *data);
  }

  // Chunks are served to tokens that may read the whole datastore; a backup
  // token (its own groups only) would need the set of digests those groups
  // reference, which is not built yet.
  bool MayReadChunks() {
    if (!Allowed(Action::kRead, "read chunks")) return false;
    if (token_.role == Role::kBackup) {
      SendError(res_, 403, fmt::format("token '{}' (role backup) may not read chunks by digest; "
                                       "use a reader token to restore",
                                       token_.name));
      return false;
    }
    return true;
  }

  void GetChunk(std::string_view hex) {
    if (!Method("GET") || !MayReadChunks()) return;
    auto id = crypto::ParseDigestHex(hex);
    if (!id.ok()) return SendError(res_, 400, fmt::format("'{}' is not a chunk digest", hex));
    auto data = store_->chunks().Read(*id);
    if (!data.ok()) return SendError(res_, HttpStatusFor(data.status()), data.status().message());
    res_.Send(200, "application/octet-stream", *data);
  }

  void GetChunks() {
    if (!Method("POST") || !MayReadChunks()) return;
    const Bytes& body = req_.body;
    if (body.empty() || body.size() % 32 != 0 || body.size() / 32 > kMaxBatchDigests) {
      return SendError(res_, 400, fmt::format("the body must be 1 to {} digests of 32 bytes "
                                              "(got {} bytes)",
                                              kMaxBatchDigests, body.size()));
    }
    std::vector<crypto::Digest> ids(body.size() / 32);
    for (size_t i = 0; i < ids.size(); ++i) std::memcpy(ids[i].data(), &body[i * 32], 32);
    // Read in digest order: the chunk directories are laid out by digest,
    // so neighbours share a directory.
    std::sort(ids.begin(), ids.end());
    if (Status s = res_.BeginStream(200, "application/x-cairn-chunks"); !s.ok()) return;
    Bytes frame;
    for (const crypto::Digest& id : ids) {
      frame.resize(kFrameHeaderSize);
      std::memcpy(frame.data(), id.data(), 32);
      Status s = store_->chunks().ReadInto(id, &scratch_);
      ByteSpan payload;
      std::string message;
      if (s.ok()) {
        frame[32] = kFrameOk;
        payload = scratch_;
      } else {
        frame[32] = s.code() == StatusCode::kNotFound ? kFrameNotFound : kFrameError;
        message = std::string(s.message());
        payload = AsBytes(message);
      }
      format::PutU32(&frame[33], static_cast<uint32_t>(payload.size()));
      if (!res_.Write(frame).ok() || !res_.Write(payload).ok()) return;  // client gone
    }
    res_.End().IgnoreError();
  }

  Env& env_;
  Logger& logger_;
  TokenStore& tokens_;
  const std::map<std::string, std::unique_ptr<datastore::Datastore>>& stores_;
  const net::HttpRequest& req_;
  net::ResponseWriter& res_;
  Token token_;
  std::string store_name_;
  datastore::Datastore* store_ = nullptr;
  Bytes scratch_;
};

}  // namespace

Api::Api(Env& env, Logger& logger, TokenStore& tokens,
         std::map<std::string, std::unique_ptr<datastore::Datastore>> stores, ApiOptions options)
    : env_(env), logger_(logger), tokens_(tokens), stores_(std::move(stores)),
      options_(std::move(options)) {}

void Api::Handle(const net::HttpRequest& request, net::ResponseWriter& response) {
  Handling(env_, logger_, tokens_, stores_, request, response).Run();
}

}  // namespace cairn::server
