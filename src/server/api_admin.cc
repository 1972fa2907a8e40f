// server::Api: maintenance through the server (status, prune, forget,
// protect, notes) and server-side tasks (api_request.h has the split). Each
// runs the code the local command runs, on the server's datastore, and
// answers the JSON the local command prints with --json
// (docs/SERVER.md, "Maintenance through the server").
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "maintenance/prune.h"
#include "maintenance/store_status.h"
#include "server/api_request.h"

namespace cairn::server {

using nlohmann::json;

namespace {

// {"snapshot", "ns"} of `snap`, the start of every snapshot verb's answer.
json SnapshotJson(const datastore::SnapshotRef& snap) {
  return {{"snapshot", snap.ToString()}, {"ns", snap.group.ns}};
}

}  // namespace

// {"snapshot", "ns"} of `snap`, the start of every snapshot verb's answer.
// Store-wide counts (snapshots, chunks, bytes, gc, verify) tell of every
// host's backups: not for backup tokens (tokens.cc, Allows).
void Request::GetStatus() {
  if (!Method("GET") || !Allowed(Action::kStatus, "read the status")) return;
  auto status = maintenance::ReadStoreStatus(*store_);
  if (!status.ok()) return SendStatus(status.status());
  // The store's name, not its path: the server's layout is its own.
  SendJson(200, maintenance::StoreStatusJson(*status, store_name_));
}

void Request::Prune() {
  if (!Method("POST") || !Allowed(Action::kPrune, "prune snapshots")) return;
  auto request = protocol::DecodePruneRequest(req_.body);
  if (!request.ok()) return SendStatus(request.status());
  const std::string& ns = request->ns;
  const std::string& group_text = request->group;
  maintenance::PruneOptions options;
  options.dry_run = request->dry_run;
  options.keep = {request->last,    request->hourly, request->daily, request->weekly,
                  request->monthly, request->yearly, request->utc};
  if (Status s = datastore::ValidateNamespace(ns); !s.ok()) return SendStatus(s);
  std::optional<datastore::GroupRef> group;
  if (!group_text.empty()) {
    auto g = datastore::ParseGroup(ns, group_text);
    if (!g.ok()) return SendStatus(g.status());
    group = *g;
  }
  auto report = maintenance::Prune(*store_, ns, group, options);
  if (!report.ok()) return SendStatus(report.status().WithContext("prune failed"));
  api_.logger.Info("{}: token '{}' pruned datastore '{}'{}: kept {}, removed {}{}", req_.peer,
                   token_.name, store_name_, group ? " group " + group->ToString() : "",
                   report->kept, report->removed, options.dry_run ? " (dry run)" : "");
  SendJson(200, maintenance::PruneReportJson(*report, ns, options.dry_run));
}

// DELETE …/snapshot?ns=&snapshot=: forget one snapshot.
void Request::Forget() {
  if (!Method("DELETE") || !Allowed(Action::kPrune, "forget snapshots")) return;
  auto snap = Snapshot();
  if (!snap) return;
  if (Status s = maintenance::ForgetSnapshot(*store_, *snap); !s.ok()) return SendStatus(s);
  api_.logger.Info("{}: token '{}' forgot {} in datastore '{}'", req_.peer, token_.name,
                   snap->ToString(), store_name_);
  json answer = SnapshotJson(*snap);
  answer["forgotten"] = true;
  SendJson(200, answer);
}

// PUT …/protected?ns=&snapshot= with {"protected": true|false}.
void Request::Protect() {
  if (!Method("PUT") || !Allowed(Action::kPrune, "protect or unprotect snapshots")) return;
  json body = json::parse(AsStringView(req_.body), nullptr, false);
  if (!body.is_object() || body.size() != 1 || !body.contains("protected") ||
      !body["protected"].is_boolean()) {
    return SendError(400, "the body must be {\"protected\": true} or false");
  }
  auto snap = Snapshot();
  if (!snap) return;
  const bool on = body["protected"].get<bool>();
  if (Status s = maintenance::SetProtected(*store_, *snap, on); !s.ok()) return SendStatus(s);
  json answer = SnapshotJson(*snap);
  answer["protected"] = on;
  SendJson(200, answer);
}

// GET …/notes?ns=&snapshot= reads them; PUT replaces them with the body
// (UTF-8 text, "" clears them).
void Request::Notes() {
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
  SendJson(200, answer);
}

// --- Server-side tasks (server/tasks.h) ---
// A task is visible to the token that started it and to admin tokens of
// its datastore; to everyone else it does not exist (404).
bool Request::TaskVisible(const TaskInfo& task) const {
  if (!TokenCoversStore(token_, task.store)) return false;
  return token_.role == Role::kAdmin || task.token == token_.name;
}

// POST …/stores/S/verify, …/gc or …/sync: 202 {"task"}; 409 {"error",
// "task", "kind"} when a task runs on S already (one at a time per
// datastore). A gc or a sync job takes an admin token.
void Request::StartTask(std::string_view kind) {
  if (!Method("POST")) return;
  const bool admin_only = kind == "gc" || kind == "sync";
  if (!Allows(token_.role, admin_only ? Action::kPrune : Action::kVerify)) {
    return SendError(403, fmt::format("token '{}' (role {}) may not start a {} on the "
                                      "server in datastore '{}': that takes a token "
                                      "with role {}",
                                      token_.name, RoleName(token_.role), kind, store_name_,
                                      admin_only ? "admin" : "verify or admin"));
  }
  json body =
      req_.body.empty() ? json(nullptr) : json::parse(AsStringView(req_.body), nullptr, false);
  if (body.is_discarded()) return SendError(400, "the body must be JSON");
  auto started = StartTaskOf(kind, body);  // bad options: InvalidArgument, 400
  if (!started.ok()) {
    return SendError(HttpStatusFor(started.status()), started.status().message());
  }
  if (started->already_running) {
    return SendJson(409, json{{"error", fmt::format("a {} of datastore '{}' is already "
                                                    "running: task {}",
                                                    started->kind, store_name_, started->id)},
                              {"task", started->id},
                              {"kind", started->kind}});
  }
  SendJson(202, json{{"task", started->id}});
}

Result<TaskManager::Started> Request::StartTaskOf(std::string_view kind, const json& body) {
  if (kind == "sync") {
    if (!body.is_object() || !body.contains("job") || !body["job"].is_string() ||
        body.size() != 1) {
      return InvalidArgumentError("start a sync job with {\"job\": \"NAME\"}");
    }
    return api_.tasks->StartSync(body["job"].get<std::string>(), token_.name, store_name_);
  }
  if (kind == "gc") {
    CAIRN_ASSIGN_OR_RETURN(GcTaskParams params, GcTaskParams::FromJson(body));
    return api_.tasks->StartGc(store_name_, token_.name, params);
  }
  CAIRN_ASSIGN_OR_RETURN(VerifyTaskParams params, VerifyTaskParams::FromJson(body));
  return api_.tasks->StartVerify(store_name_, token_.name, params);
}

void Request::ListSyncJobs() {
  if (!Method("GET")) return;
  if (!Allowed(Action::kPrune, "list the sync jobs")) return;
  json list = json::array();
  for (const SyncJob& job : api_.tasks->sync_jobs()) {
    if (job.store != store_name_) continue;
    json j = job.ToJson();
    const int64_t next = api_.scheduler ? api_.scheduler->NextRun(job.name) : 0;
    j["next_run"] = next > 0 ? json(datastore::FormatRfc3339(next)) : json(nullptr);
    auto last = api_.tasks->LastSync(job.name);
    j["last"] = last ? json{{"task", last->id},
                            {"state", TaskStateName(last->state)},
                            {"started_at", datastore::FormatRfc3339(last->started)},
                            {"ended", last->ended > 0 ? json(last->ended) : json(nullptr)},
                            {"summary", last->summary},
                            {"error", last->error}}
                     : json(nullptr);
    list.push_back(std::move(j));
  }
  SendJson(200, json{{"jobs", std::move(list)}});
}

void Request::TaskRoutes(const protocol::Route& route) {
  if (api_.tasks == nullptr) return SendError(503, "this server runs no tasks");
  if (route.kind == protocol::RouteKind::kStoreTask) return StartTask(route.step);
  if (!Method("GET")) return;
  if (route.kind == protocol::RouteKind::kTasks) {
    json list = json::array();
    for (const TaskInfo& t : api_.tasks->List()) {
      if (TaskVisible(t)) list.push_back(t.ToJson());
    }
    return SendJson(200, json{{"tasks", std::move(list)}});
  }
  std::string id(route.id);
  auto info = api_.tasks->Get(id);
  if (!info.ok() && info.status().code() != StatusCode::kNotFound) {
    return SendError(HttpStatusFor(info.status()), info.status().message());
  }
  if (!info.ok() || !TaskVisible(*info)) {
    return SendError(404, fmt::format("no task '{}'", id));
  }
  if (route.kind == protocol::RouteKind::kTask) return SendJson(200, info->ToJson());
  if (route.step != "log") return SendError(404, fmt::format("no such resource: {}", req_.path));
  size_t since = 0;
  if (std::string text = Query("since"); !text.empty()) {
    char* end = nullptr;
    unsigned long long v = std::strtoull(text.c_str(), &end, 10);
    if (*end != '\0' || text[0] == '-') {
      return SendError(400, fmt::format("since={}: expected a line number", text));
    }
    since = static_cast<size_t>(v);
  }
  size_t total = 0;
  auto lines = api_.tasks->Log(id, since, &total);
  if (!lines.ok()) return SendError(HttpStatusFor(lines.status()), lines.status().message());
  std::string text;
  for (const std::string& line : *lines) text += line + "\n";
  res_.Send(200, "text/plain; charset=utf-8", AsBytes(text),
            {{"X-Cairn-Log-Lines", std::to_string(total)}});
}

}  // namespace cairn::server
