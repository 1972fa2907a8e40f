// cairn prune -r REPO [GROUP] [--ns NS] --keep-last N … --keep-yearly N [--utc]
//   [--dry-run] [--json]
// cairn forget -r REPO SNAPSHOT [--json]
// cairn protect | unprotect -r REPO SNAPSHOT [--json]
// cairn notes -r REPO SNAPSHOT [--set TEXT | --file PATH] [--json]
//
// SNAPSHOT is TYPE/ID/TIME or TYPE/ID/latest. None of these touch chunks:
// `cairn gc` frees the space of what they remove.
#include <fmt/format.h>

#include "cli/cli_util.h"
#include "maintenance/prune.h"

namespace cairn::cli {
namespace {

using maintenance::PruneOutcome;

// "[ns] vm/100/TIME" outside the root namespace, as `cairn snapshots` shows it.
std::string Display(const datastore::SnapshotRef& snap) {
  return snap.group.ns.empty() ? snap.ToString()
                               : fmt::format("[{}] {}", snap.group.ns, snap.ToString());
}

// One line of prune's output, without padding after the last column.
void PrintLine(const std::string& name, std::string_view action, const std::string& why) {
  std::string line = fmt::format("{:<44} {:<7} {}", name, action, why);
  line.erase(line.find_last_not_of(' ') + 1);
  fmt::print("{}\n", line);
}

// What a line of prune's output says a snapshot gets; in a dry run "remove"
// is what would happen.
std::string_view ActionName(PruneOutcome outcome) {
  switch (outcome) {
    case PruneOutcome::kKept: return "keep";
    case PruneOutcome::kRemoved:
    case PruneOutcome::kWouldRemove: return "remove";
    case PruneOutcome::kInUse: return "in-use";
    case PruneOutcome::kFailed: return "failed";
  }
  return "?";
}

// Opens the repository and resolves SNAPSHOT (TYPE/ID/TIME or …/latest).
struct Target {
  std::unique_ptr<datastore::Datastore> store;
  datastore::SnapshotRef snap;
};
Result<Target> OpenTarget(Context& ctx, const std::string& text) {
  Target t;
  CAIRN_RETURN_IF_ERROR(RequireLocal(ctx, "changing snapshots"));
  CAIRN_ASSIGN_OR_RETURN(t.store, OpenRepo(ctx));
  CAIRN_ASSIGN_OR_RETURN(auto spec, datastore::ParseSnapshotSpec(ctx.ns, text));
  CAIRN_ASSIGN_OR_RETURN(t.snap, t.store->Resolve(spec));
  return t;
}

// --- prune -------------------------------------------------------------------

struct PruneArgs {
  std::string group;
  maintenance::PruneOptions options;
};

nlohmann::json GroupJson(const maintenance::GroupPruneReport& g) {
  nlohmann::json snaps = nlohmann::json::array();
  for (const auto& s : g.snapshots) {
    snaps.push_back({{"snapshot", s.snap.ToString()},
                     {"time", s.snap.TimeString()},
                     {"action", ActionName(s.outcome)},
                     {"reason", maintenance::KeepReasonName(s.reason)},
                     {"protected", s.is_protected},
                     {"detail", s.detail}});
  }
  nlohmann::json unfinished = nlohmann::json::array();
  for (const auto& u : g.unfinished) {
    unfinished.push_back(
        {{"name", u.name}, {"action", ActionName(u.outcome)}, {"detail", u.detail}});
  }
  return {{"group", g.group.ToString()},
          {"ns", g.group.ns},
          {"snapshots", snaps},
          {"unfinished", unfinished}};
}

void PrintGroup(const maintenance::GroupPruneReport& g) {
  for (const auto& s : g.snapshots) {
    std::string why = s.outcome == PruneOutcome::kKept ? std::string(KeepReasonName(s.reason))
                      : s.outcome == PruneOutcome::kInUse
                          ? fmt::format("kept this time: {}", s.detail)
                          : s.detail;
    PrintLine(Display(s.snap), ActionName(s.outcome), why);
  }
  for (const auto& u : g.unfinished) {
    std::string name = fmt::format("{}/{}", g.group.ToString(), u.name);
    if (!g.group.ns.empty()) name = fmt::format("[{}] {}", g.group.ns, name);
    std::string why = u.detail.empty() ? "unfinished backup (no manifest)"
                                       : fmt::format("unfinished backup: {}", u.detail);
    PrintLine(name, ActionName(u.outcome), why);
  }
}

void RunPrune(Context& ctx, const PruneArgs& args) {
  if (!args.options.keep.KeepsSomething()) {
    return Fail(ctx, InvalidArgumentError(
                         "no --keep-* option given; nothing would be removed (give at least one "
                         "of --keep-last, --keep-hourly, --keep-daily, --keep-weekly, "
                         "--keep-monthly, --keep-yearly)"));
  }
  if (Status s = RequireLocal(ctx, "prune"); !s.ok()) return Fail(ctx, s);
  auto store = OpenRepo(ctx);
  if (!store.ok()) return Fail(ctx, store.status());
  std::optional<datastore::GroupRef> group;
  if (!args.group.empty()) {
    auto g = datastore::ParseGroup(ctx.ns, args.group);
    if (!g.ok()) return Fail(ctx, g.status());
    group = *g;
  }
  auto report = maintenance::Prune(**store, ctx.ns, group, args.options);
  if (!report.ok()) return Fail(ctx, report.status().WithContext("prune failed"));
  const auto& r = *report;
  const bool dry = args.options.dry_run;
  if (ctx.json) {
    nlohmann::json groups = nlohmann::json::array();
    for (const auto& g : r.groups) groups.push_back(GroupJson(g));
    PrintJson({{"dry_run", dry},
               {"ns", ctx.ns},
               {"kept", r.kept},
               {"removed", r.removed},
               {"in_use", r.in_use},
               {"failed", r.failed},
               {"unfinished_removed", r.unfinished_removed},
               {"groups", groups}});
  } else {
    for (const auto& g : r.groups) PrintGroup(g);
    std::string unfinished =
        r.unfinished_removed > 0 ? fmt::format(", {} unfinished", r.unfinished_removed) : "";
    if (dry) {
      fmt::print("would keep {}, would remove {}{}; dry run: nothing removed\n", r.kept,
                 r.removed, unfinished);
    } else {
      fmt::print("kept {}, removed {}{}, in use {}{}{}\n", r.kept, r.removed, unfinished,
                 r.in_use, r.in_use > 0 ? " (kept this time)" : "",
                 r.removed + r.unfinished_removed > 0 ? "; run `cairn gc` to free space" : "");
    }
  }
  if (r.failed + r.unfinished_failed > 0) {
    Fail(ctx, UnknownError(fmt::format("{} snapshot(s) and {} unfinished directory(ies) could "
                                       "not be removed (see above)",
                                       r.failed, r.unfinished_failed)));
  }
}

// --- forget, protect, notes --------------------------------------------------

void RunForget(Context& ctx, const std::string& text) {
  auto t = OpenTarget(ctx, text);
  if (!t.ok()) return Fail(ctx, t.status());
  Status s = maintenance::ForgetSnapshot(*t->store, t->snap);
  if (!s.ok()) return Fail(ctx, s);
  if (ctx.json) {
    PrintJson({{"snapshot", t->snap.ToString()}, {"ns", t->snap.group.ns}, {"forgotten", true}});
  } else {
    fmt::print("forgot {}; run `cairn gc` to free space\n", Display(t->snap));
  }
}

void RunProtect(Context& ctx, const std::string& text, bool on) {
  auto t = OpenTarget(ctx, text);
  if (!t.ok()) return Fail(ctx, t.status());
  Status s = maintenance::SetProtected(*t->store, t->snap, on);
  if (!s.ok()) return Fail(ctx, s);
  if (ctx.json) {
    PrintJson({{"snapshot", t->snap.ToString()}, {"ns", t->snap.group.ns}, {"protected", on}});
  } else {
    fmt::print("{} {}\n", on ? "protected" : "unprotected", Display(t->snap));
  }
}

struct NotesArgs {
  std::string snapshot;
  std::string text;
  std::string file;
  CLI::Option* set = nullptr;
  CLI::Option* from_file = nullptr;
};

void RunNotes(Context& ctx, const NotesArgs& args) {
  const bool set = args.set->count() > 0;
  const bool from_file = args.from_file->count() > 0;
  if (set && from_file) {
    return Fail(ctx, InvalidArgumentError("give either --set TEXT or --file PATH, not both"));
  }
  auto t = OpenTarget(ctx, args.snapshot);
  if (!t.ok()) return Fail(ctx, t.status());
  if (!set && !from_file) {
    auto notes = maintenance::ReadNotes(*t->store, t->snap);
    if (!notes.ok()) return Fail(ctx, notes.status());
    if (ctx.json) {
      PrintJson({{"snapshot", t->snap.ToString()}, {"ns", t->snap.group.ns}, {"notes", *notes}});
    } else if (!notes->empty()) {
      fmt::print("{}{}", *notes, notes->ends_with('\n') ? "" : "\n");
    }
    return;
  }
  std::string text = args.text;
  if (from_file) {
    // One byte over the limit is enough to tell a file that is too long.
    auto data = ReadWholeFile(*ctx.env, args.file, maintenance::kMaxNotesBytes + 1);
    if (!data.ok()) return Fail(ctx, data.status().WithContext("reading --file"));
    text = std::string(AsStringView(*data));
  }
  Status s = maintenance::WriteNotes(*t->store, t->snap, text);
  if (!s.ok()) return Fail(ctx, s);
  if (ctx.json) {
    PrintJson({{"snapshot", t->snap.ToString()}, {"ns", t->snap.group.ns}, {"notes", text}});
  } else if (text.empty()) {
    fmt::print("notes of {} cleared\n", Display(t->snap));
  } else {
    fmt::print("notes of {} set ({} bytes)\n", Display(t->snap), text.size());
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
