// cairn snapshots -r REPO [GROUP] [--ns NS] [--json]
#include <fmt/format.h>

#include "cli/cli_util.h"
#include "maintenance/snapshot_info.h"

namespace cairn::cli {
namespace {

std::string VerifyText(const std::optional<datastore::VerifyState>& v) {
  if (!v) return "not verified";
  return fmt::format("{} {}", v->outcome == datastore::VerifyOutcome::kOk ? "ok" : "FAILED",
                     datastore::FormatRfc3339(v->time));
}

// The first line of `notes`, cut to at most `max` bytes on a UTF-8
// character boundary, for the table.
std::string FirstLine(const std::string& notes, size_t max = 60) {
  std::string line = notes.substr(0, notes.find('\n'));
  if (line.size() <= max) return line;
  size_t cut = max - 3;
  while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80) --cut;
  return line.substr(0, cut) + "...";
}

void Run(Context& ctx, const std::string& group_text) {
  auto store = OpenRepo(ctx);
  if (!store.ok()) return Fail(ctx, store.status());
  std::vector<datastore::SnapshotRef> snaps;
  if (group_text.empty()) {
    auto all = (*store)->ListAllSnapshots();
    if (!all.ok()) return Fail(ctx, all.status());
    for (auto& s : *all) {
      if (ctx.ns.empty() || s.group.ns == ctx.ns) snaps.push_back(s);
    }
  } else {
    auto group = datastore::ParseGroup(ctx.ns, group_text);
    if (!group.ok()) return Fail(ctx, group.status());
    auto list = (*store)->ListSnapshots(*group);
    if (!list.ok()) return Fail(ctx, list.status());
    snaps = *list;
  }
  nlohmann::json out = nlohmann::json::array();
  if (!ctx.json) {
    fmt::print("{:<40} {:>12}  {:<36} {:<24} {:<9} {:<23} {}\n", "snapshot", "size", "archives",
               "verify", "protected", "encrypted (key)", "notes");
  }
  for (const auto& snap : snaps) {
    const maintenance::SnapshotInfo info = maintenance::ReadSnapshotInfo(**store, snap);
    if (ctx.json) {
      out.push_back(maintenance::SnapshotInfoJson(info));
      continue;
    }
    std::string names;
    for (const auto& [archive, size] : info.archives) names += (names.empty() ? "" : " ") + archive;
    if (!info.manifest_ok) names = "(manifest unreadable: run verify)";
    std::string name = snap.group.ns.empty() ? snap.ToString()
                                             : fmt::format("[{}] {}", snap.group.ns, snap.ToString());
    std::string line = fmt::format("{:<40} {:>12}  {:<36} {:<24} {:<9} {:<23} {}", name,
                                   HumanBytes(info.size), names, VerifyText(info.verify),
                                   info.is_protected ? "yes" : "-",
                                   info.encrypted ? info.key_print : "-", FirstLine(info.notes));
    line.erase(line.find_last_not_of(' ') + 1);  // no padding after the last column
    fmt::print("{}\n", line);
  }
  if (ctx.json) PrintJson(out);
}

}  // namespace

void RegisterSnapshots(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("snapshots", "list snapshots and their verify state");
  auto group = std::make_shared<std::string>();
  AddRepoOptions(cmd, ctx);
  AddJsonOption(cmd, ctx);
  cmd->add_option("GROUP", *group, "only this group, like vm/100");
  cmd->callback([&ctx, group] { Run(ctx, *group); });
}

}  // namespace cairn::cli
