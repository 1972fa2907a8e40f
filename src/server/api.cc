// server::Api: admission, routing, tokens and roles, snapshots, files and
// read grants (api_request.h has the split).
#include "server/api.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <limits>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "base/mutex.h"
#include "datastore/sync_marker.h"
#include "index/dynamic_index.h"
#include "index/fixed_index.h"
#include "index/manifest.h"
#include "maintenance/prune.h"
#include "server/api_request.h"

namespace cairn::server {

using nlohmann::json;

namespace {

constexpr uint64_t kMaxSnapshotFile = uint64_t{1} << 30;  // indexes of 4 TiB images fit
constexpr char kAuditFile[] = "audit.log";
constexpr char kBearer[] = "Bearer ";

bool IsIndexFileName(std::string_view name) {
  return name.ends_with(".img.fidx") || name.ends_with(".didx");
}

}  // namespace

std::string Dump(const json& body) { return body.dump(-1, ' ', false, json::error_handler_t::replace); }

ApiShared::ApiShared(Env& e, Logger& l, TokenStore& t,
                     std::map<std::string, std::unique_ptr<datastore::Datastore>> s, ApiOptions o)
    : env(e), logger(l), tokens(t), stores(std::move(s)), options(std::move(o)),
      audit(l, options.state_dir.empty() ? "" : JoinPath(options.state_dir, kAuditFile)),
      logins(options.max_failed_logins_per_minute > 0 ? options.max_failed_logins_per_minute
                                                      : std::numeric_limits<int>::max()),
      dashboard(e, l, t, audit, logins),
      grants(options.max_reader_chunks, options.sessions.timeout),
      sessions(l, options.sessions) {
  for (const auto& [name, store] : stores) {
    scrubber.Add(store->path(), "https://…/" + name);
    // An object-store datastore is named by its bucket's URL in messages.
    if (store->DisplayName() != store->path()) scrubber.Add(store->DisplayName(), "https://…/" + name);
  }
  if (!options.state_dir.empty()) scrubber.Add(options.state_dir, "<state directory>");
  tasks = std::make_unique<TaskManager>(env, logger, options.state_dir, stores, &scrubber);
  if (options.open_sync_source) {
    tasks->SetSyncJobs(options.sync_jobs, options.open_sync_source);
    scheduler = std::make_unique<SyncScheduler>(*tasks, logger, tasks->sync_jobs());
  }
  tasks->SetReadLatencyForTest(options.task_read_latency_us);
}

Api::Api(Env& env, Logger& logger, TokenStore& tokens,
         std::map<std::string, std::unique_ptr<datastore::Datastore>> stores, ApiOptions options)
    : shared_(std::make_unique<ApiShared>(env, logger, tokens, std::move(stores),
                                          std::move(options))) {}

Api::~Api() = default;

void Api::ConnectionClosed(uint64_t connection, bool by_client) {
  shared_->sessions.ConnectionClosed(connection, by_client);
}

void Api::Handle(const net::HttpRequest& request, net::ResponseWriter& response) {
  if (Dashboard::Serves(request.path)) return shared_->dashboard.Handle(request, response);
  Request(*shared_, request, response).Run();
}

size_t Api::OpenSessions() { return shared_->sessions.open_sessions(); }
std::vector<TaskInfo> Api::Tasks() { return shared_->tasks->List(); }

void Api::SetMetricsRenderer(std::function<std::string()> render) {
  MutexLock lock(shared_->metrics_mu);
  shared_->render_metrics = std::move(render);
}

net::Admission Api::Admit(const net::HttpRequest& h) {
  ApiShared& api = *shared_;
  net::Admission a;
  const protocol::Route route = protocol::ParseRoute(h.path);
  // The one route without a token, and bodyless.
  if (route.kind == protocol::RouteKind::kVersion) return a;
  if (Dashboard::Serves(h.path)) return api.dashboard.Admit(h);

  auto refuse = [&](int status, std::string message, std::string reason, std::string token) {
    api.audit.Record({h.peer, std::move(token), h.method, h.path, status,
                      reason.empty() ? message : reason});
    a.status = status;
    a.body = protocol::ErrorBody(message);
    if (status == 401) a.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"cairn\"");
    return a;
  };
  if (int64_t wait = api.logins.RetryAfter(h.peer_address); wait > 0) {
    a.headers.emplace_back("Retry-After", std::to_string(wait));
    return refuse(429,
                  fmt::format("too many failed logins from {}: try again in {} s", h.peer_address,
                              wait),
                  "", "");
  }
  auto it = h.headers.find("authorization");
  std::string why;
  std::string name;
  Result<Token> token = PermissionDeniedError("no token");
  // The dashboard's requests carry a session cookie instead.
  auto session = it == h.headers.end() ? api.dashboard.SessionToken(h) : std::nullopt;
  if (session) {
    if (!session->ok()) {
      const Status& s = session->status();
      return refuse(HttpStatusFor(s), std::string(s.message()), "", "");
    }
    token = std::move(*session);
  } else if (it == h.headers.end()) {
    why = "no Authorization header";
  } else if (!std::string_view(it->second).starts_with(kBearer)) {
    why = "the Authorization header is not 'Bearer NAME:SECRET'";
  } else {
    std::string_view credential = std::string_view(it->second).substr(sizeof(kBearer) - 1);
    name = PrintableName(credential.substr(0, credential.find(':')));
    token = api.tokens.Authenticate(credential, &why);
  }
  if (!token.ok()) {
    // A credential that does not match counts against the address; a
    // request without one (a client not told its token) does not.
    if (it != h.headers.end()) api.logins.Failed(h.peer_address);
    return refuse(401,
                  it == h.headers.end() ? "authentication required: pass a token (--token or "
                                          "CAIRN_TOKEN)"
                                        : "invalid token",
                  why, name);
  }
  a.authenticated = true;
  a.tenant = token->name;
  // Route by route: only uploads of chunks and files take large bodies,
  // and only from tokens that may upload.
  const bool may_upload = token->role == Role::kBackup || token->role == Role::kAdmin;
  a.max_body = protocol::BodyLimit(route, h.method, may_upload, api.options.max_body_bytes);
  return a;
}

void Request::Run() {
  using protocol::RouteKind;
  if (req_.path == "/metrics") return Metrics();
  const protocol::Route route = protocol::ParseRoute(req_.path);
  if (route.kind == RouteKind::kNotFound) {
    return SendError(404, fmt::format("no such resource: {}", req_.path));
  }
  if (route.kind == RouteKind::kVersion) {
    if (!Method("GET")) return;
    return SendJson(200, json{{"server", "cairn"}, {"api", protocol::kApiVersion}});
  }
  if (!Authenticate()) return;
  // A scraper's token reads /metrics and nothing else.
  if (token_.role == Role::kMetrics) {
    return SendError(403, fmt::format("token '{}' (role metrics) may only read /metrics",
                                      token_.name));
  }
  // Under stores/S, the store is checked first: a token learns nothing
  // about routes of a store it may not use.
  if (route.in_store) {
    if (!PickStore(route.store)) return;
  }
  switch (route.kind) {
    case RouteKind::kSpeedTest: return SpeedTest();
    case RouteKind::kStores: return ListStores();
    case RouteKind::kSnapshots:
      return Query("details") == "1" ? ListSnapshotDetails() : ListSnapshots();
    case RouteKind::kFile: return GetFile();
    case RouteKind::kGrant: return Grant();
    case RouteKind::kChunk: return GetChunk(route.id);
    case RouteKind::kChunks: return GetChunks();
    case RouteKind::kBackupStart:
    case RouteKind::kBackupSession:
    case RouteKind::kBackupStep: return Backup(route);
    case RouteKind::kStatus: return GetStatus();
    case RouteKind::kPrune: return Prune();
    case RouteKind::kSnapshot: return Forget();
    case RouteKind::kProtected: return Protect();
    case RouteKind::kNotes: return Notes();
    case RouteKind::kTree: return Tree();
    case RouteKind::kThroughput: return Throughput();
    // Server-side tasks (server/tasks.h): POST …/stores/S/verify and
    // …/stores/S/gc, GET tasks, tasks/ID, tasks/ID/log.
    case RouteKind::kStoreTask:
    case RouteKind::kTasks:
    case RouteKind::kTask:
    case RouteKind::kTaskSub: return TaskRoutes(route);
    case RouteKind::kSyncJobs: return ListSyncJobs();
    case RouteKind::kNotFound:
    case RouteKind::kVersion:
    case RouteKind::kStoreOther: break;
  }
  SendError(404, fmt::format("no such resource: {}", req_.path));
}

std::string Request::Query(const std::string& name) const {
  auto it = req_.query.find(name);
  return it == req_.query.end() ? std::string() : it->second;
}

void Request::SendJson(int status, const json& body) {
  res_.Send(status, "application/json", AsBytes(Dump(body)));
}

void Request::SendError(int status, std::string_view message, std::string_view reason) {
  std::string text = api_.scrubber.Scrub(message);
  // A refusal, or an answer that hides one (a backup token's 404 for
  // another token's group): audited.
  if (status == 401 || status == 403 || status == 429 || !reason.empty()) {
    std::string name = token_.name;
    if (!authenticated_) {
      auto it = req_.headers.find("authorization");
      if (it != req_.headers.end() && std::string_view(it->second).starts_with(kBearer)) {
        std::string_view credential = std::string_view(it->second).substr(sizeof(kBearer) - 1);
        name = PrintableName(credential.substr(0, credential.find(':')));
      }
    }
    api_.audit.Record({req_.peer, name, req_.method, req_.path, status,
                       reason.empty() ? text : api_.scrubber.Scrub(reason)});
  }
  net::ResponseWriter::Headers headers;
  if (status == 401) headers.emplace_back("WWW-Authenticate", "Bearer realm=\"cairn\"");
  res_.Send(status, "application/json", AsBytes(protocol::ErrorBody(text)), headers);
}

bool Request::Method(std::string_view want) {
  if (req_.method == want) return true;
  SendError(405, fmt::format("{} takes {}, not {}", req_.path, want, req_.method));
  return false;
}

bool Request::Authenticate() {
  auto it = req_.headers.find("authorization");
  auto session = it == req_.headers.end() ? api_.dashboard.SessionToken(req_) : std::nullopt;
  if (session) {
    if (!session->ok()) {
      SendError(HttpStatusFor(session->status()), session->status().message());
      return false;
    }
    token_ = **session;
    authenticated_ = true;
    return true;
  }
  if (it == req_.headers.end()) {
    SendError(401, "authentication required: pass a token (--token or CAIRN_TOKEN)",
              "no Authorization header");
    return false;
  }
  std::string_view value = it->second;
  if (!value.starts_with(kBearer)) {
    SendError(401, "the Authorization header must be 'Bearer NAME:SECRET'",
              "the Authorization header is not 'Bearer NAME:SECRET'");
    return false;
  }
  std::string why;
  auto token = api_.tokens.Authenticate(value.substr(sizeof(kBearer) - 1), &why);
  if (!token.ok()) {
    SendError(401, "invalid token", why);
    return false;
  }
  token_ = *token;
  authenticated_ = true;
  return true;
}

void Request::ListStores() {
  if (!Method("GET")) return;
  json names = json::array();
  for (const auto& [name, store] : api_.stores) {
    if (TokenCoversStore(token_, name) && Allows(token_.role, Action::kListStores)) {
      names.push_back(name);
    }
  }
  SendJson(200, json{{"stores", names}});
}

bool Request::PickStore(std::string_view name) {
  auto it = api_.stores.find(std::string(name));
  // A token for another datastore learns nothing about which ones exist.
  if (it == api_.stores.end() || !TokenCoversStore(token_, name)) {
    if (it == api_.stores.end() && token_.store == "*") {
      SendError(404, fmt::format("no datastore named '{}' on this server", name));
    } else {
      SendError(403, fmt::format("token '{}' has no access to datastore '{}'", token_.name, name));
    }
    return false;
  }
  store_name_ = it->first;
  store_ = it->second.get();
  return true;
}

bool Request::Allowed(Action action, std::string_view what) {
  if (Allows(token_.role, action)) return true;
  // Deleting is the admin's alone: a stolen backup token cannot destroy
  // the history it wrote (docs/SERVER.md, "Tokens and roles").
  std::string_view hint = action == Action::kPrune   ? ": that takes an admin token"
                          : action == Action::kNotes ? ": that takes a backup token owning "
                                                       "the group, or an admin token"
                          : action == Action::kStatus ? ": its counts are of every host's backups"
                                                      : "";
  SendError(403, fmt::format("token '{}' (role {}) may not {} in datastore '{}'{}", token_.name,
                             RoleName(token_.role), what, store_name_, hint));
  return false;
}

bool Request::OwnsGroup(const datastore::GroupRef& group) {
  if (token_.role != Role::kBackup) return true;
  return ReadGroupOwner(api_.env, store_->GroupDir(group)) == token_.name;
}

std::optional<std::vector<datastore::SnapshotRef>> Request::VisibleSnapshots() {
  if (!Method("GET") || !Allowed(Action::kListSnapshots, "list snapshots")) return std::nullopt;
  auto snaps = store_->ListAllSnapshots();
  if (!snaps.ok()) {
    SendStatus(snaps.status());
    return std::nullopt;
  }
  std::vector<datastore::SnapshotRef> visible;
  for (datastore::SnapshotRef& snap : *snaps) {
    if (OwnsGroup(snap.group)) visible.push_back(std::move(snap));
  }
  return visible;
}

void Request::ListSnapshots() {
  auto snaps = VisibleSnapshots();
  if (!snaps) return;
  json list = json::array();
  for (const datastore::SnapshotRef& snap : *snaps) {
    std::string dir = store_->SnapshotDir(snap);
    auto manifest =
        ReadWholeFile(api_.env, JoinPath(dir, index::kManifestFileName), kMaxSnapshotFile);
    if (!manifest.ok()) continue;  // forgotten meanwhile
    json entry = {{"ns", snap.group.ns},
                  {"type", snap.group.type},
                  {"id", snap.group.id},
                  {"time", snap.TimeString()},
                  {"manifest", ToHex(*manifest)}};
    auto verify = ReadWholeFile(api_.env, JoinPath(dir, datastore::kVerifyStateFileName), 1 << 20);
    if (verify.ok()) entry["verify"] = ToHex(*verify);
    // Protection and notes live beside the manifest, so a client's listing
    // shows them as a local one does.
    auto is_protected = maintenance::IsProtected(*store_, snap);
    if (is_protected.ok() && *is_protected) entry["protected"] = true;
    auto notes = maintenance::ReadNotes(*store_, snap);
    if (notes.ok() && !notes->empty()) entry["notes"] = *notes;
    // Which source `cairn sync` copied it from (its --remove-vanished).
    auto marker = ReadWholeFile(api_.env, JoinPath(dir, datastore::kSyncMarkerFileName),
                                datastore::kMaxSyncMarkerBytes);
    if (marker.ok()) {
      auto j = json::parse(AsStringView(*marker), nullptr, false);
      if (j.is_object() && j.contains("source") && j["source"].is_string()) {
        entry["sync_source"] = j["source"];
      }
    }
    list.push_back(std::move(entry));
  }
  SendJson(200, json{{"store", store_name_}, {"snapshots", std::move(list)}});
}

std::optional<datastore::SnapshotRef> Request::Snapshot() {
  auto spec = datastore::ParseSnapshotSpec(Query("ns"), Query("snapshot"));
  if (!spec.ok()) {
    SendError(400, spec.status().message());
    return std::nullopt;
  }
  // A backup token asking about another token's group gets the answer a
  // group that does not exist gets: it learns nothing of other groups.
  if (token_.role == Role::kBackup) {
    const std::string unknown =
        fmt::format("no snapshot {} among the groups of token '{}'", Query("snapshot"), token_.name);
    if (!OwnsGroup(spec->group)) {
      SendError(404, unknown,
                fmt::format("group {} is not the token's", spec->group.ToString()));
      return std::nullopt;
    }
    auto snap = store_->Resolve(*spec);
    if (!snap.ok()) {
      SendError(snap.status().code() == StatusCode::kNotFound ? 404 : HttpStatusFor(snap.status()),
                snap.status().code() == StatusCode::kNotFound ? unknown : snap.status().message());
      return std::nullopt;
    }
    return *snap;
  }
  auto snap = store_->Resolve(*spec);
  if (!snap.ok()) {
    SendStatus(snap.status());
    return std::nullopt;
  }
  return *snap;
}

Status Request::GrantIndex(const datastore::SnapshotRef& snap, const std::string& name,
                           ByteSpan data) {
  if (!ReadsByGrant(token_.role) || !IsIndexFileName(name)) return Status::Ok();
  // The index's checksum names it: the same file granted twice costs one
  // lookup, and a snapshot forgotten and made again is a new index.
  std::vector<crypto::Digest> digests;
  crypto::Digest csum{};
  if (name.ends_with(".img.fidx")) {
    auto idx = index::FixedIndex::Decode(data);
    if (!idx.ok()) return Status::Ok();  // served as it is; the client finds it damaged
    digests.assign(idx->digests().begin(), idx->digests().end());
    csum = idx->csum();
  } else {
    auto idx = index::DynamicIndex::Decode(data);
    if (!idx.ok()) return Status::Ok();
    digests.reserve(idx->chunk_count());
    for (size_t i = 0; i < idx->chunk_count(); ++i) digests.push_back(idx->digest(i));
    csum = idx->csum();
  }
  std::string key = snap.RelDir() + "/" + name + "@" + crypto::DigestHex(csum);
  return api_.grants.Grant(token_.name, store_name_, key, digests);
}

void Request::GetFile() {
  if (!Method("GET") || !Allowed(Action::kRead, "read snapshots")) return;
  std::string name = Query("name");
  if (!IsSnapshotFileName(name)) {
    return SendError(400, fmt::format("'{}' is not the name of a snapshot file", name));
  }
  auto snap = Snapshot();
  if (!snap) return;
  auto data =
      ReadWholeFile(api_.env, JoinPath(store_->SnapshotDir(*snap), name), kMaxSnapshotFile);
  if (!data.ok()) {
    return SendError(HttpStatusFor(data.status()),
                     fmt::format("snapshot {}: {}", snap->ToString(), data.status().message()));
  }
  // As in PBS, reading an index lets a reader download its chunks.
  if (Status s = GrantIndex(*snap, name, *data); !s.ok()) return SendError(429, s.message());
  res_.Send(200, "application/octet-stream", std::move(*data));
}

// POST …/grant?ns=&snapshot=&name=INDEX: what GET …/file of that index
// grants, for a client that has the index cached (remote/remote_repo.h).
void Request::Grant() {
  if (!Method("POST") || !Allowed(Action::kRead, "read snapshots")) return;
  std::string name = Query("name");
  if (!IsSnapshotFileName(name) || !IsIndexFileName(name)) {
    return SendError(400, fmt::format("'{}' is not the name of an index file", name));
  }
  auto snap = Snapshot();
  if (!snap) return;
  if (!ReadsByGrant(token_.role)) return SendJson(200, json{{"chunks", 0}});  // nothing to grant
  auto data =
      ReadWholeFile(api_.env, JoinPath(store_->SnapshotDir(*snap), name), kMaxSnapshotFile);
  if (!data.ok()) {
    return SendError(HttpStatusFor(data.status()),
                     fmt::format("snapshot {}: {}", snap->ToString(), data.status().message()));
  }
  if (Status s = GrantIndex(*snap, name, *data); !s.ok()) return SendError(429, s.message());
  SendJson(200, json{{"chunks", api_.grants.chunks(token_.name, store_name_)}});
}

// `cairn benchmark -r https://…`'s tls rows: POST uploads a body that is
// thrown away; GET ?bytes=N downloads N bytes. Both at most 4 MiB (the
// benchmark's buffer), so a request costs the server little.
void Request::SpeedTest() {
  if (req_.method == "POST") return SendJson(200, json{{"bytes", req_.body.size()}});
  if (!Method("GET")) return;
  uint64_t n = 0;
  std::string text = Query("bytes");
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || n == 0 || n > protocol::kSpeedTestMaxBytes) {
    return SendError(400, fmt::format("speedtest takes ?bytes=N, 1 to {}", protocol::kSpeedTestMaxBytes));
  }
  // Incompressible bytes (though TLS does not compress), made once; sent
  // the way chunks are (a stream of pieces in recycled buffers, each
  // encrypted and sent from there), so the row measures that path.
  static const Bytes* const pattern = [] {
    auto* p = new Bytes(protocol::kSpeedTestMaxBytes);
    uint64_t x = 0x9e3779b97f4a7c15;
    for (size_t i = 0; i + 8 <= p->size(); i += 8) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      std::memcpy(p->data() + i, &x, 8);
    }
    return p;
  }();
  auto sent = std::make_shared<uint64_t>(0);
  res_.Stream(200, "application/octet-stream",
              [n, sent](net::ResponseWriter::StreamPieces* out, bool* done) {
                constexpr uint64_t kPiece = 1 << 20;
                uint64_t len = std::min(kPiece, n - *sent);
                ReadBuffer piece = out->Take();
                piece.Resize(len);
                std::memcpy(piece.data(), pattern->data() + *sent, len);
                out->Push(std::move(piece));
                *sent += len;
                *done = *sent == n;
                return Status::Ok();
              });
}

}  // namespace cairn::server
