#include "server/api.h"

#include <algorithm>
#include <charconv>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "crypto/sha256.h"
#include "format/coding.h"
#include "index/manifest.h"
#include "maintenance/prune.h"
#include "maintenance/status.h"

namespace cairn::server {
namespace {

using nlohmann::json;

constexpr uint64_t kMaxSnapshotFile = uint64_t{1} << 30;  // indexes of 4 TiB images fit

// Client input echoed in a message need not be UTF-8: replaced, not thrown.
std::string Dump(const json& body) {
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

void SendJson(net::ResponseWriter& response, int status, const json& body) {
  std::string text = Dump(body);
  response.Send(status, "application/json", AsBytes(text));
}

void SendError(net::ResponseWriter& response, int status, std::string_view message,
               bool auth_challenge = false) {
  std::string text = Dump(json{{"error", message}});
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
    // Locked by another operation (a running backup of the group, a gc).
    case StatusCode::kAborted: return 423;
    case StatusCode::kUnauthenticated: return 401;
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

std::string Query(const net::HttpRequest& r, const std::string& name) {
  auto it = r.query.find(name);
  return it == r.query.end() ? std::string() : it->second;
}

class Handling {
 public:
  Handling(Env& env, Logger& logger, TokenStore& tokens,
           const std::map<std::string, std::unique_ptr<datastore::Datastore>>& stores,
           SessionRegistry& sessions, const net::HttpRequest& request,
           net::ResponseWriter& response)
      : env_(env), logger_(logger), tokens_(tokens), stores_(stores), sessions_(sessions),
        req_(request), res_(response) {}

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
    if (seg.size() == 1 && seg[0] == "speedtest") return SpeedTest();
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
      if (seg.size() >= 3 && seg.size() <= 5 && what == "backup") return Backup(seg);
      if (seg.size() == 3 && what == "status") return GetStatus();
      if (seg.size() == 3 && what == "prune") return Prune();
      if (seg.size() == 3 && what == "snapshot") return Forget();
      if (seg.size() == 3 && what == "protected") return Protect();
      if (seg.size() == 3 && what == "notes") return Notes();
    }
    // Server-side tasks (server/tasks.h): POST …/stores/S/verify and
    // …/stores/S/gc (S was picked and checked by the stores block above),
    // GET tasks, tasks/ID, tasks/ID/log.
    if ((seg.size() == 3 && seg[0] == "stores" && (seg[2] == "verify" || seg[2] == "gc")) ||
        (!seg.empty() && seg.size() <= 3 && seg[0] == "tasks")) {
      return TaskRoutes(seg);
    }
    SendError(res_, 404, fmt::format("no such resource: {}", req_.path));
  }

 private:
  bool Method(std::string_view want) {
    if (req_.method == want) return true;
    SendError(res_, 405, fmt::format("{} takes {}, not {}", req_.path, want, req_.method));
    return false;
  }

  // `cairn benchmark -r https://…`'s tls rows: POST uploads a body that is
  // thrown away; GET ?bytes=N (at most 64 MiB) downloads N bytes.
  void SpeedTest() {
    if (req_.method == "POST") {
      return SendJson(res_, 200, json{{"bytes", req_.body.size()}});
    }
    if (!Method("GET")) return;
    uint64_t n = 0;
    std::string text = Query(req_, "bytes");
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (ec != std::errc() || end != text.data() + text.size() || n == 0 || n > (64u << 20)) {
      return SendError(res_, 400, "speedtest takes ?bytes=N, 1 to 67108864");
    }
    // Incompressible bytes, though TLS does not compress.
    static const Bytes kPattern = [] {
      Bytes b(1 << 20);
      uint64_t x = 0x9e3779b97f4a7c15;
      for (auto& c : b) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        c = static_cast<uint8_t>(x);
      }
      return b;
    }();
    Bytes out(n);
    for (uint64_t at = 0; at < n; at += kPattern.size()) {
      std::memcpy(&out[at], kPattern.data(), std::min<uint64_t>(kPattern.size(), n - at));
    }
    res_.Send(200, "application/octet-stream", out);
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
    // Deleting is the admin's alone: a stolen backup token cannot destroy
    // the history it wrote (docs/SERVER.md, "Tokens and roles").
    std::string_view hint = action == Action::kPrune   ? ": that takes an admin token"
                            : action == Action::kNotes ? ": that takes a backup token owning "
                                                         "the group, or an admin token"
                                                       : "";
    SendError(res_, 403, fmt::format("token '{}' (role {}) may not {} in datastore '{}'{}",
                                     token_.name, RoleName(token_.role), what, store_name_, hint));
    return false;
  }

  // Backup tokens see only the groups they own (the owner file names the
  // token that created the group).
  bool OwnsGroup(const datastore::GroupRef& group) {
    if (token_.role != Role::kBackup) return true;
    return ReadGroupOwner(env_, store_->GroupDir(group)) == token_.name;
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

  // Chunks are served to tokens that may read the whole datastore. A backup
  // token reads only during one of its backup sessions, and only the chunks
  // that session's base or uploads hold (MayReadChunk).
  bool MayReadChunks() {
    if (!Allowed(Action::kRead, "read chunks")) return false;
    if (token_.role == Role::kBackup && !sessions_.HasSession(token_.name, store_name_)) {
      SendError(res_, 403, fmt::format("token '{}' (role backup) may read chunks only of its "
                                       "backup's base, during the backup; use a reader token "
                                       "to restore",
                                       token_.name));
      return false;
    }
    return true;
  }
  bool MayReadChunk(const crypto::Digest& id) {
    return token_.role != Role::kBackup || sessions_.MayRead(token_.name, store_name_, id);
  }

  // Backup sessions (server/backup_session.h): …/backup, …/backup/ID and
  // …/backup/ID/{base,chunks,file,finish}.
  void Backup(const std::vector<std::string_view>& seg) {
    if (seg.size() == 3) {
      if (!Method("POST") || !Allowed(Action::kBackup, "create snapshots")) return;
      json body = json::parse(AsStringView(req_.body), nullptr, false);
      if (!body.is_object() || !body["type"].is_string() || !body["id"].is_string() ||
          !body["time"].is_string() || (body.contains("ns") && !body["ns"].is_string())) {
        return SendError(res_, 400, "the body must be {\"ns\", \"type\", \"id\", \"time\"}");
      }
      std::string ns = body.value("ns", "");
      auto spec = datastore::ParseSnapshotSpec(
          ns, fmt::format("{}/{}/{}", body["type"].get<std::string>(),
                          body["id"].get<std::string>(), body["time"].get<std::string>()));
      if (!spec.ok()) return SendError(res_, 400, spec.status().message());
      if (spec->latest) return SendError(res_, 400, "a new snapshot needs a time, not 'latest'");
      datastore::SnapshotRef snap{spec->group, spec->time};
      auto id = sessions_.Begin(token_.name, store_name_, *store_, snap,
                                token_.role == Role::kBackup);
      if (!id.ok()) return SendError(res_, HttpStatusFor(id.status()), id.status().message());
      return SendJson(res_, 201, json{{"session", *id}, {"snapshot", snap.ToString()}});
    }
    std::string id(seg[3]);
    if (seg.size() == 4) {
      if (!Method("DELETE") || !Allowed(Action::kBackup, "create snapshots")) return;
      auto session = sessions_.Find(id, token_.name, store_name_);
      if (!session.ok()) return SendError(res_, 404, session.status().message());
      sessions_.Abort(id);
      return SendJson(res_, 200, json{{"aborted", id}});
    }
    if (!Method("POST") || !Allowed(Action::kBackup, "create snapshots")) return;
    auto session = sessions_.Find(id, token_.name, store_name_);
    if (!session.ok()) return SendError(res_, 404, session.status().message());
    std::string_view what = seg[4];
    Status s;
    if (what == "base") {
      json body = json::parse(AsStringView(req_.body), nullptr, false);
      if (!body.is_object() || !body["time"].is_string()) {
        return SendError(res_, 400, "the body must be {\"time\": \"…\"}");
      }
      s = sessions_.UseBase(**session, body["time"].get<std::string>());
    } else if (what == "chunks") {
      auto r = sessions_.UploadChunks(**session, req_.body);
      if (r.ok()) {
        return SendJson(res_, 200, json{{"chunks", r->chunks}, {"inserted", r->inserted},
                                        {"stored_bytes", r->stored_bytes}});
      }
      s = r.status();
    } else if (what == "file") {
      s = sessions_.PutFile(**session, Query(req_, "name"), req_.body);
    } else if (what == "finish") {
      session->reset();  // Finish takes the session out of the registry
      auto snap = sessions_.Finish(id, req_.body);
      if (snap.ok()) return SendJson(res_, 200, json{{"snapshot", snap->ToString()}});
      s = snap.status();
    } else {
      return SendError(res_, 404, fmt::format("no such resource: {}", req_.path));
    }
    if (!s.ok()) return SendError(res_, HttpStatusFor(s), s.message());
    SendJson(res_, 200, json::object());
  }

  void GetChunk(std::string_view hex) {
    if (!Method("GET") || !MayReadChunks()) return;
    auto id = crypto::ParseDigestHex(hex);
    if (!id.ok()) return SendError(res_, 400, fmt::format("'{}' is not a chunk digest", hex));
    if (!MayReadChunk(*id)) return SendError(res_, 404, fmt::format("no chunk {}", hex));
    auto data = store_->source().Read(*id);
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
    // From an object store, each read waits a round trip: keep a few
    // going ahead of the one being sent (in order).
    const bool ahead = store_->source().Traits().medium == store::MediumKind::kNetwork;
    std::deque<std::shared_ptr<PendingRead>> window;
    size_t next = 0;
    Bytes frame;
    for (const crypto::Digest& id : ids) {
      frame.resize(kFrameHeaderSize);
      std::memcpy(frame.data(), id.data(), 32);
      Status s;
      if (ahead) {
        for (; next < ids.size() && window.size() < kReadsAhead; ++next) {
          window.push_back(StartRead(ids[next]));
        }
        std::shared_ptr<PendingRead> read = std::move(window.front());
        window.pop_front();
        std::unique_lock<std::mutex> lock(read->mu);
        read->cv.wait(lock, [&] { return read->done; });
        s = read->status;
        scratch_.Adopt(std::move(read->data));
      } else {
        s = MayReadChunk(id) ? store_->source().ReadInto(id, &scratch_)
                             : NotFoundError(fmt::format("no chunk {}", crypto::DigestHex(id)));
      }
      ByteSpan payload;
      std::string message;
      if (s.ok()) {
        frame[32] = kFrameOk;
        payload = scratch_.span();
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

  static constexpr size_t kReadsAhead = 8;
  struct PendingRead {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    Status status;
    Bytes data;
  };
  // Starts reading `id` (the callback owns its share of the result, so an
  // answer abandoned midway leaves nothing dangling).
  std::shared_ptr<PendingRead> StartRead(const crypto::Digest& id) {
    auto read = std::make_shared<PendingRead>();
    if (!MayReadChunk(id)) {
      read->done = true;
      read->status = NotFoundError(fmt::format("no chunk {}", crypto::DigestHex(id)));
      return read;
    }
    store_->source().ReadAsync(id, [read](Result<Bytes> r) {
      std::lock_guard<std::mutex> lock(read->mu);
      if (r.ok()) {
        read->data = std::move(*r);
      } else {
        read->status = r.status();
      }
      read->done = true;
      read->cv.notify_all();
    });
    return read;
  }

  // --- Maintenance (docs/SERVER.md, "Maintenance through the server") ---
  // Each runs the code the local command runs, on the server's datastore,
  // and answers the JSON the local command prints with --json.

  // The local code names the datastore by its path, which is the server's
  // own business; the client knows it as https://…/NAME.
  void SendStatus(const Status& s) {
    std::string message(s.message());
    const std::string& path = store_->path();
    const std::string name = "https://…/" + store_name_;
    for (size_t at = message.find(path); !path.empty() && at != std::string::npos;
         at = message.find(path, at + name.size())) {
      message.replace(at, path.size(), name);
    }
    SendError(res_, HttpStatusFor(s), message);
  }

  // {"snapshot", "ns"} of `snap`, the start of every snapshot verb's answer.
  static json SnapshotJson(const datastore::SnapshotRef& snap) {
    return {{"snapshot", snap.ToString()}, {"ns", snap.group.ns}};
  }

  void GetStatus() {
    if (!Method("GET") || !Allowed(Action::kStatus, "read the status")) return;
    auto status = maintenance::ReadStoreStatus(*store_);
    if (!status.ok()) return SendStatus(status.status());
    // The store's name, not its path: the server's layout is its own.
    SendJson(res_, 200, maintenance::StoreStatusJson(*status, store_name_));
  }

  // The body of POST …/prune: {"ns", "group", "keep": {"last", "hourly",
  // "daily", "weekly", "monthly", "yearly", "utc"}, "dry_run"}, all optional
  // but one keep count.
  static Result<maintenance::PruneOptions> ParsePruneOptions(const json& body, std::string* ns,
                                                             std::string* group) {
    if (!body.is_object()) return InvalidArgumentError("the prune options must be a JSON object");
    maintenance::PruneOptions o;
    for (const auto& item : body.items()) {
      const std::string key = item.key();
      const json& v = item.value();
      if ((key == "ns" || key == "group") && v.is_string()) {
        (key == "ns" ? *ns : *group) = v.get<std::string>();
      } else if (key == "dry_run" && v.is_boolean()) {
        o.dry_run = v.get<bool>();
      } else if (key == "keep" && v.is_object()) {
        CAIRN_RETURN_IF_ERROR(ParseKeep(v, &o.keep));
      } else {
        return InvalidArgumentError(fmt::format(
            "prune option \"{}\": unknown, or of the wrong type (known: ns and group strings, "
            "keep object, dry_run boolean)",
            key));
      }
    }
    return o;
  }
  static Status ParseKeep(const json& keep, maintenance::KeepOptions* k) {
    const std::pair<const char*, uint32_t*> counts[] = {
        {"last", &k->last},     {"hourly", &k->hourly},   {"daily", &k->daily},
        {"weekly", &k->weekly}, {"monthly", &k->monthly}, {"yearly", &k->yearly}};
    for (const auto& item : keep.items()) {
      const std::string key = item.key();
      const json& v = item.value();
      if (key == "utc" && v.is_boolean()) {
        k->utc = v.get<bool>();
        continue;
      }
      auto c = std::find_if(std::begin(counts), std::end(counts),
                            [&](const auto& p) { return key == p.first; });
      if (c == std::end(counts) || !v.is_number_unsigned() || v.get<uint64_t>() > UINT32_MAX) {
        return InvalidArgumentError(fmt::format(
            "prune option \"keep.{}\": unknown, or not a count (known: last, hourly, daily, "
            "weekly, monthly, yearly, utc)",
            key));
      }
      *c->second = static_cast<uint32_t>(v.get<uint64_t>());
    }
    return Status::Ok();
  }

  void Prune() {
    if (!Method("POST") || !Allowed(Action::kPrune, "prune snapshots")) return;
    json body = json::parse(AsStringView(req_.body), nullptr, false);
    std::string ns, group_text;
    auto options = ParsePruneOptions(body, &ns, &group_text);
    if (!options.ok()) return SendStatus(options.status());
    if (Status s = datastore::ValidateNamespace(ns); !s.ok()) return SendStatus(s);
    std::optional<datastore::GroupRef> group;
    if (!group_text.empty()) {
      auto g = datastore::ParseGroup(ns, group_text);
      if (!g.ok()) return SendStatus(g.status());
      group = *g;
    }
    auto report = maintenance::Prune(*store_, ns, group, *options);
    if (!report.ok()) return SendStatus(report.status().WithContext("prune failed"));
    logger_.Info("{}: token '{}' pruned datastore '{}'{}: kept {}, removed {}{}", req_.peer,
                 token_.name, store_name_, group ? " group " + group->ToString() : "",
                 report->kept, report->removed, options->dry_run ? " (dry run)" : "");
    SendJson(res_, 200, maintenance::PruneReportJson(*report, ns, options->dry_run));
  }

  // DELETE …/snapshot?ns=&snapshot=: forget one snapshot.
  void Forget() {
    if (!Method("DELETE") || !Allowed(Action::kPrune, "forget snapshots")) return;
    auto snap = Snapshot();
    if (!snap) return;
    if (Status s = maintenance::ForgetSnapshot(*store_, *snap); !s.ok()) return SendStatus(s);
    logger_.Info("{}: token '{}' forgot {} in datastore '{}'", req_.peer, token_.name,
                 snap->ToString(), store_name_);
    json answer = SnapshotJson(*snap);
    answer["forgotten"] = true;
    SendJson(res_, 200, answer);
  }

  // PUT …/protected?ns=&snapshot= with {"protected": true|false}.
  void Protect() {
    if (!Method("PUT") || !Allowed(Action::kPrune, "protect or unprotect snapshots")) return;
    json body = json::parse(AsStringView(req_.body), nullptr, false);
    if (!body.is_object() || body.size() != 1 || !body.contains("protected") ||
        !body["protected"].is_boolean()) {
      return SendError(res_, 400, "the body must be {\"protected\": true} or false");
    }
    auto snap = Snapshot();
    if (!snap) return;
    const bool on = body["protected"].get<bool>();
    if (Status s = maintenance::SetProtected(*store_, *snap, on); !s.ok()) return SendStatus(s);
    json answer = SnapshotJson(*snap);
    answer["protected"] = on;
    SendJson(res_, 200, answer);
  }

  // GET …/notes?ns=&snapshot= reads them; PUT replaces them with the body
  // (UTF-8 text, "" clears them).
  void Notes() {
    const bool put = req_.method == "PUT";
    if (!put && !Method("GET")) return;
    if (put ? !Allowed(Action::kNotes, "set notes") : !Allowed(Action::kRead, "read snapshots")) {
      return;
    }
    auto snap = Snapshot();
    if (!snap) return;
    json answer = SnapshotJson(*snap);
    if (put) {
      std::string_view text = AsStringView(req_.body);
      if (Status s = maintenance::WriteNotes(*store_, *snap, text); !s.ok()) return SendStatus(s);
      answer["notes"] = text;
    } else {
      auto notes = maintenance::ReadNotes(*store_, *snap);
      if (!notes.ok()) return SendStatus(notes.status());
      answer["notes"] = *notes;
    }
    SendJson(res_, 200, answer);
  }

  // --- Server-side tasks (server/tasks.h) ---
 public:
  Handling& WithTasks(TaskManager* tasks) {
    tasks_ = tasks;
    return *this;
  }

 private:
  // A task is visible to the token that started it and to admin tokens of
  // its datastore; to everyone else it does not exist (404).
  bool TaskVisible(const TaskInfo& task) const {
    if (!TokenCoversStore(token_, task.store)) return false;
    return token_.role == Role::kAdmin || task.token == token_.name;
  }

  // POST …/stores/S/verify or …/gc: 202 {"task"}; 409 {"error", "task",
  // "kind"} when a task runs on S already (one at a time per datastore).
  void StartTask(std::string_view kind) {
    if (!Method("POST")) return;
    const bool gc = kind == "gc";
    if (!Allows(token_.role, gc ? Action::kPrune : Action::kVerify)) {
      return SendError(res_, 403, fmt::format("token '{}' (role {}) may not start a {} on the "
                                              "server in datastore '{}': that takes a token "
                                              "with role {}",
                                              token_.name, RoleName(token_.role), kind, store_name_,
                                              gc ? "admin" : "verify or admin"));
    }
    json body = req_.body.empty() ? json(nullptr)
                                  : json::parse(AsStringView(req_.body), nullptr, false);
    if (body.is_discarded()) return SendError(res_, 400, "the body must be JSON");
    auto started = Start(gc, body);  // bad options: InvalidArgument, 400
    if (!started.ok()) {
      return SendError(res_, HttpStatusFor(started.status()), started.status().message());
    }
    if (started->already_running) {
      return SendJson(res_, 409, json{{"error", fmt::format("a {} of datastore '{}' is already "
                                                            "running: task {}",
                                                            started->kind, store_name_,
                                                            started->id)},
                                      {"task", started->id},
                                      {"kind", started->kind}});
    }
    SendJson(res_, 202, json{{"task", started->id}});
  }

  Result<TaskManager::Started> Start(bool gc, const json& body) {
    if (gc) {
      CAIRN_ASSIGN_OR_RETURN(GcTaskParams params, GcTaskParams::FromJson(body));
      return tasks_->StartGc(store_name_, token_.name, params);
    }
    CAIRN_ASSIGN_OR_RETURN(VerifyTaskParams params, VerifyTaskParams::FromJson(body));
    return tasks_->StartVerify(store_name_, token_.name, params);
  }

  void TaskRoutes(const std::vector<std::string_view>& seg) {
    if (tasks_ == nullptr) return SendError(res_, 503, "this server runs no tasks");
    if (seg[0] == "stores") return StartTask(seg[2]);  // POST …/stores/S/{verify,gc}
    if (!Method("GET")) return;
    if (seg.size() == 1) {  // GET tasks
      json list = json::array();
      for (const TaskInfo& t : tasks_->List()) {
        if (TaskVisible(t)) list.push_back(t.ToJson());
      }
      return SendJson(res_, 200, json{{"tasks", std::move(list)}});
    }
    std::string id(seg[1]);
    auto info = tasks_->Get(id);
    if (!info.ok() && info.status().code() != StatusCode::kNotFound) {
      return SendError(res_, HttpStatusFor(info.status()), info.status().message());
    }
    if (!info.ok() || !TaskVisible(*info)) {
      return SendError(res_, 404, fmt::format("no task '{}'", id));
    }
    if (seg.size() == 2) return SendJson(res_, 200, info->ToJson());
    if (seg[2] != "log") return SendError(res_, 404, fmt::format("no such resource: {}", req_.path));
    size_t since = 0;
    if (std::string text = Query(req_, "since"); !text.empty()) {
      char* end = nullptr;
      unsigned long long v = std::strtoull(text.c_str(), &end, 10);
      if (*end != '\0' || text[0] == '-') {
        return SendError(res_, 400, fmt::format("since={}: expected a line number", text));
      }
      since = static_cast<size_t>(v);
    }
    size_t total = 0;
    auto lines = tasks_->Log(id, since, &total);
    if (!lines.ok()) return SendError(res_, HttpStatusFor(lines.status()), lines.status().message());
    std::string text;
    for (const std::string& line : *lines) text += line + "\n";
    res_.Send(200, "text/plain; charset=utf-8", AsBytes(text),
              {{"X-Cairn-Log-Lines", std::to_string(total)}});
  }

  TaskManager* tasks_ = nullptr;
  Env& env_;
  Logger& logger_;
  TokenStore& tokens_;
  const std::map<std::string, std::unique_ptr<datastore::Datastore>>& stores_;
  SessionRegistry& sessions_;
  const net::HttpRequest& req_;
  net::ResponseWriter& res_;
  Token token_;
  std::string store_name_;
  datastore::Datastore* store_ = nullptr;
  ReadBuffer scratch_;
};

}  // namespace

Api::Api(Env& env, Logger& logger, TokenStore& tokens,
         std::map<std::string, std::unique_ptr<datastore::Datastore>> stores, ApiOptions options)
    : env_(env), logger_(logger), tokens_(tokens), stores_(std::move(stores)),
      options_(std::move(options)),
      sessions_(std::make_unique<SessionRegistry>(logger, options_.session_timeout)) {}

void Api::Handle(const net::HttpRequest& request, net::ResponseWriter& response) {
  Handling(env_, logger_, tokens_, stores_, *sessions_, request, response)
      .WithTasks(tasks_.get())
      .Run();
}

}  // namespace cairn::server
