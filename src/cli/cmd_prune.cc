// cairn prune -r REPO [GROUP] [--ns NS] --keep-last N … --keep-yearly N [--utc]
//   [--dry-run] [--json]
// cairn forget -r REPO SNAPSHOT [--json]
// cairn protect | unprotect -r REPO SNAPSHOT [--json]
// cairn notes -r REPO SNAPSHOT [--set TEXT | --file PATH] [--json]
//
// SNAPSHOT is TYPE/ID/TIME or TYPE/ID/latest. None of these touch chunks:
// `cairn gc` frees the space of what they remove.
//
// On a server (-r https://HOST:PORT/STORE) each asks the server's API
// (docs/SERVER.md, "Maintenance through the server"), which runs the same
// maintenance code on its datastore and answers the JSON the local command
// prints with --json; both print from that JSON, so the output is the same.
#include <fmt/format.h>

#include "cli/cli_util.h"
#include "maintenance/prune.h"
#include "remote/remote_api.h"
#include "remote/remote_client.h"

namespace cairn::cli {
namespace {

using nlohmann::json;

std::string Str(const json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}
// j[key] when it is an array, else an empty one (a malformed answer prints nothing).
const json& Items(const json& j, const char* key) {
  static const json kNone = json::array();
  return j.is_object() && j.contains(key) && j[key].is_array() ? j[key] : kNone;
}
size_t Count(const json& j, const char* key) {
  return j.contains(key) && j[key].is_number_unsigned() ? j[key].get<size_t>() : 0;
}

// "[ns] vm/100/TIME" outside the root namespace, as `cairn snapshots` shows it.
std::string Display(const std::string& ns, const std::string& snapshot) {
  return ns.empty() ? snapshot : fmt::format("[{}] {}", ns, snapshot);
}

// One line of prune's output, without padding after the last column.
void PrintLine(const std::string& name, std::string_view action, const std::string& why) {
  std::string line = fmt::format("{:<44} {:<7} {}", name, action, why);
  line.erase(line.find_last_not_of(' ') + 1);
  fmt::print("{}\n", line);
}

// --- prune -------------------------------------------------------------------

struct PruneArgs {
  std::string group;
  maintenance::PruneOptions options;
};

// One group of the report (maintenance::PruneReportJson's form).
void PrintGroup(const json& g) {
  const std::string ns = Str(g, "ns");
  for (const json& s : Items(g, "snapshots")) {
    const std::string action = Str(s, "action");
    std::string why = action == "keep"     ? Str(s, "reason")
                      : action == "in-use" ? fmt::format("kept this time: {}", Str(s, "detail"))
                                           : Str(s, "detail");
    PrintLine(Display(ns, Str(s, "snapshot")), action, why);
  }
  for (const json& u : Items(g, "unfinished")) {
    std::string name = Display(ns, fmt::format("{}/{}", Str(g, "group"), Str(u, "name")));
    std::string why = Str(u, "detail").empty()
                          ? "unfinished backup (no manifest)"
                          : fmt::format("unfinished backup: {}", Str(u, "detail"));
    PrintLine(name, Str(u, "action"), why);
  }
}

// Prints a prune report, local or the server's (the same JSON), and fails
// when something could not be removed.
void PrintPrune(Context& ctx, const json& r) {
  if (!r.contains("groups") || !r["groups"].is_array()) {
    return Fail(ctx, DataLossError("malformed prune report: no \"groups\" list"));
  }
  size_t unfinished_failed = 0;
  for (const json& g : Items(r, "groups")) {
    for (const json& u : Items(g, "unfinished")) unfinished_failed += Str(u, "action") == "failed";
  }
  if (ctx.json) {
    PrintJson(r);
  } else if (!ctx.quiet) {
    for (const json& g : Items(r, "groups")) PrintGroup(g);
    const size_t kept = Count(r, "kept"), removed = Count(r, "removed");
    const size_t in_use = Count(r, "in_use"), unfinished_removed = Count(r, "unfinished_removed");
    std::string unfinished =
        unfinished_removed > 0 ? fmt::format(", {} unfinished", unfinished_removed) : "";
    if (r.value("dry_run", false)) {
      fmt::print("would keep {}, would remove {}{}; dry run: nothing removed\n", kept, removed,
                 unfinished);
    } else {
      fmt::print("kept {}, removed {}{}, in use {}{}{}\n", kept, removed, unfinished, in_use,
                 in_use > 0 ? " (kept this time)" : "",
                 removed + unfinished_removed > 0 ? "; run `cairn gc` to free space" : "");
    }
  }
  const size_t failed = Count(r, "failed");
  if (failed + unfinished_failed > 0) {
    Fail(ctx, UnknownError(fmt::format("{} snapshot(s) and {} unfinished directory(ies) could "
                                       "not be removed (see above)",
                                       failed, unfinished_failed)));
  }
}

// POST …/prune: the server prunes its datastore with the same options.
Result<json> PruneOnServer(Context& ctx, const PruneArgs& args) {
  CAIRN_RETURN_IF_ERROR(datastore::ValidateNamespace(ctx.ns));
  CAIRN_ASSIGN_OR_RETURN(ServerTarget target, ServerTargetFor(ctx));
  remote::RemoteClient client(target.url, target.credentials);
  const maintenance::KeepOptions& k = args.options.keep;
  protocol::PruneRequest request;
  request.ns = ctx.ns;
  request.group = args.group;
  request.last = k.last;
  request.hourly = k.hourly;
  request.daily = k.daily;
  request.weekly = k.weekly;
  request.monthly = k.monthly;
  request.yearly = k.yearly;
  request.utc = k.utc;
  request.dry_run = args.options.dry_run;
  return remote::PruneOnServer(client, request);
}

Result<json> PruneLocal(Context& ctx, const PruneArgs& args) {
  CAIRN_ASSIGN_OR_RETURN(auto store, OpenRepo(ctx));
  std::optional<datastore::GroupRef> group;
  if (!args.group.empty()) {
    CAIRN_ASSIGN_OR_RETURN(group, datastore::ParseGroup(ctx.ns, args.group));
  }
  auto report = maintenance::Prune(*store, ctx.ns, group, args.options);
  if (!report.ok()) return report.status().WithContext("prune failed");
  return maintenance::PruneReportJson(*report, ctx.ns, args.options.dry_run);
}

void RunPrune(Context& ctx, const PruneArgs& args) {
  if (!args.options.keep.KeepsSomething()) {
    return Fail(ctx, InvalidArgumentError(
                         "no --keep-* option given; nothing would be removed (give at least one "
                         "of --keep-last, --keep-hourly, --keep-daily, --keep-weekly, "
                         "--keep-monthly, --keep-yearly)"));
  }
  auto report = RepoIsServer(ctx) ? PruneOnServer(ctx, args) : PruneLocal(ctx, args);
  if (!report.ok()) return Fail(ctx, report.status());
  PrintPrune(ctx, *report);
}

// --- forget, protect, notes --------------------------------------------------

// Opens the repository and resolves SNAPSHOT (TYPE/ID/TIME or …/latest).
struct Target {
  std::unique_ptr<datastore::Datastore> store;
  datastore::SnapshotRef snap;
};
Result<Target> OpenTarget(Context& ctx, const std::string& text) {
  Target t;
  CAIRN_ASSIGN_OR_RETURN(t.store, OpenRepo(ctx));
  CAIRN_ASSIGN_OR_RETURN(auto spec, datastore::ParseSnapshotSpec(ctx.ns, text));
  CAIRN_ASSIGN_OR_RETURN(t.snap, t.store->Resolve(spec));
  return t;
}

// `method` on the server's …/ROUTE?ns=NS&snapshot=TEXT: the server resolves
// TEXT (…/latest too) and answers {"snapshot", "ns", …} as the local --json.
Result<json> OnServerSnapshot(Context& ctx, std::string_view method, const std::string& route,
                              const std::string& text, ByteSpan body = {}) {
  CAIRN_RETURN_IF_ERROR(datastore::ParseSnapshotSpec(ctx.ns, text).status());
  return CallStore(ctx, method,
                   route + remote::QueryString({{"ns", ctx.ns}, {"snapshot", text}}), body);
}

// The answer of a snapshot verb, local or the server's: {"snapshot", "ns", …}.
json SnapshotJson(const datastore::SnapshotRef& snap) {
  return {{"snapshot", snap.ToString()}, {"ns", snap.group.ns}};
}

Result<json> Forget(Context& ctx, const std::string& text) {
  if (RepoIsServer(ctx)) return OnServerSnapshot(ctx, "DELETE", "snapshot", text);
  CAIRN_ASSIGN_OR_RETURN(Target t, OpenTarget(ctx, text));
  CAIRN_RETURN_IF_ERROR(maintenance::ForgetSnapshot(*t.store, t.snap));
  json j = SnapshotJson(t.snap);
  j["forgotten"] = true;
  return j;
}

void RunForget(Context& ctx, const std::string& text) {
  auto j = Forget(ctx, text);
  if (!j.ok()) return Fail(ctx, j.status());
  if (ctx.json) return PrintJson(*j);
  if (ctx.quiet) return;
  fmt::print("forgot {}; run `cairn gc` to free space\n",
             Display(Str(*j, "ns"), Str(*j, "snapshot")));
}

Result<json> Protect(Context& ctx, const std::string& text, bool on) {
  if (RepoIsServer(ctx)) {
    std::string body = json{{"protected", on}}.dump();
    return OnServerSnapshot(ctx, "PUT", "protected", text, AsBytes(body));
  }
  CAIRN_ASSIGN_OR_RETURN(Target t, OpenTarget(ctx, text));
  CAIRN_RETURN_IF_ERROR(maintenance::SetProtected(*t.store, t.snap, on));
  json j = SnapshotJson(t.snap);
  j["protected"] = on;
  return j;
}

void RunProtect(Context& ctx, const std::string& text, bool on) {
  auto j = Protect(ctx, text, on);
  if (!j.ok()) return Fail(ctx, j.status());
  if (ctx.json) return PrintJson(*j);
  if (ctx.quiet) return;
  fmt::print("{} {}\n", on ? "protected" : "unprotected",
             Display(Str(*j, "ns"), Str(*j, "snapshot")));
}

struct NotesArgs {
  std::string snapshot;
  std::string text;
  std::string file;
  CLI::Option* set = nullptr;
  CLI::Option* from_file = nullptr;
};

// Reads the notes (`text` nullopt) or replaces them: {"snapshot", "ns", "notes"}.
Result<json> Notes(Context& ctx, const std::string& snapshot,
                   const std::optional<std::string>& text) {
  if (RepoIsServer(ctx)) {
    if (!text) return OnServerSnapshot(ctx, "GET", "notes", snapshot);
    return OnServerSnapshot(ctx, "PUT", "notes", snapshot, AsBytes(*text));
  }
  CAIRN_ASSIGN_OR_RETURN(Target t, OpenTarget(ctx, snapshot));
  json j = SnapshotJson(t.snap);
  if (text) {
    CAIRN_RETURN_IF_ERROR(maintenance::WriteNotes(*t.store, t.snap, *text));
    j["notes"] = *text;
  } else {
    CAIRN_ASSIGN_OR_RETURN(std::string notes, maintenance::ReadNotes(*t.store, t.snap));
    j["notes"] = notes;
  }
  return j;
}

void RunNotes(Context& ctx, const NotesArgs& args) {
  const bool set = args.set->count() > 0;
  const bool from_file = args.from_file->count() > 0;
  if (set && from_file) {
    return Fail(ctx, InvalidArgumentError("give either --set TEXT or --file PATH, not both"));
  }
  std::optional<std::string> text;
  if (set) text = args.text;
  if (from_file) {
    // One byte over the limit is enough to tell a file that is too long.
    auto data = ReadWholeFile(*ctx.env, args.file, maintenance::kMaxNotesBytes + 1);
    if (!data.ok()) return Fail(ctx, data.status().WithContext("reading --file"));
    text = std::string(AsStringView(*data));
  }
  auto j = Notes(ctx, args.snapshot, text);
  if (!j.ok()) return Fail(ctx, j.status());
  if (ctx.json) return PrintJson(*j);
  const std::string notes = Str(*j, "notes");
  const std::string name = Display(Str(*j, "ns"), Str(*j, "snapshot"));
  if (!text) {
    if (!notes.empty()) fmt::print("{}{}", notes, notes.ends_with('\n') ? "" : "\n");
  } else if (ctx.quiet) {
    return;
  } else if (notes.empty()) {
    fmt::print("notes of {} cleared\n", name);
  } else {
    fmt::print("notes of {} set ({} bytes)\n", name, notes.size());
  }
}

}  // namespace

void RegisterPrune(CLI::App& app, Context& ctx) {
  {
    auto* cmd = app.add_subcommand(
        "prune", "remove the snapshots that no --keep-* rule keeps (protected ones stay)");
    auto args = std::make_shared<PruneArgs>();
    AddRepoOptions(cmd, ctx);
    AddJsonOption(cmd, ctx);
    cmd->add_option("GROUP", args->group, "only this group, like vm/100 (default: every group "
                                          "of the namespace)");
    auto& keep = args->options.keep;
    cmd->add_option("--keep-last", keep.last, "keep the N newest snapshots");
    cmd->add_option("--keep-hourly", keep.hourly, "keep the newest snapshot of each of N hours");
    cmd->add_option("--keep-daily", keep.daily, "keep the newest snapshot of each of N days");
    cmd->add_option("--keep-weekly", keep.weekly,
                    "keep the newest snapshot of each of N ISO weeks (Monday to Sunday)");
    cmd->add_option("--keep-monthly", keep.monthly, "keep the newest snapshot of each of N months");
    cmd->add_option("--keep-yearly", keep.yearly, "keep the newest snapshot of each of N years");
    cmd->add_flag("--utc", keep.utc, "count hours, days, … in UTC (default: local time, TZ)");
    cmd->add_flag("--dry-run", args->options.dry_run, "only show what would be removed");
    cmd->callback([&ctx, args] { RunPrune(ctx, *args); });
  }
  {
    auto* cmd = app.add_subcommand(
        "forget", "remove one snapshot (its chunks stay until `cairn gc`)");
    auto snapshot = std::make_shared<std::string>();
    AddRepoOptions(cmd, ctx);
    AddJsonOption(cmd, ctx);
    cmd->add_option("SNAPSHOT", *snapshot, "TYPE/ID/TIME or TYPE/ID/latest")->required();
    cmd->callback([&ctx, snapshot] { RunForget(ctx, *snapshot); });
  }
  for (bool on : {true, false}) {
    auto* cmd = app.add_subcommand(
        on ? "protect" : "unprotect",
        on ? "keep a snapshot from prune and forget" : "let prune and forget remove it again");
    auto snapshot = std::make_shared<std::string>();
    AddRepoOptions(cmd, ctx);
    AddJsonOption(cmd, ctx);
    cmd->add_option("SNAPSHOT", *snapshot, "TYPE/ID/TIME or TYPE/ID/latest")->required();
    cmd->callback([&ctx, snapshot, on] { RunProtect(ctx, *snapshot, on); });
  }
  {
    auto* cmd = app.add_subcommand("notes", "show or set the notes of a snapshot");
    auto args = std::make_shared<NotesArgs>();
    AddRepoOptions(cmd, ctx);
    AddJsonOption(cmd, ctx);
    cmd->add_option("SNAPSHOT", args->snapshot, "TYPE/ID/TIME or TYPE/ID/latest")->required();
    args->set = cmd->add_option("--set", args->text, "replace the notes (\"\" clears them)");
    args->from_file = cmd->add_option("--file", args->file, "replace the notes with a file's text");
    cmd->callback([&ctx, args] { RunNotes(ctx, *args); });
  }
}

}  // namespace cairn::cli
