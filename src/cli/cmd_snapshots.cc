// cairn snapshots -r REPO [GROUP] [--ns NS] [--json]
#include <fmt/format.h>

#include "cli/cli_util.h"
#include "maintenance/prune.h"

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
    auto manifest = (*store)->ReadManifest(snap);
    auto verify = (*store)->ReadVerifyState(snap);
    // A listing shows what it can: an unreadable flag or notes file reads as
    // none rather than hiding the snapshot.
    auto is_protected = maintenance::IsProtected(**store, snap);
    const bool prot = is_protected.ok() && *is_protected;
    auto read_notes = maintenance::ReadNotes(**store, snap);
    const std::string notes = read_notes.ok() ? *read_notes : std::string();
    uint64_t size = 0;
    std::string names;
    const bool encrypted = manifest.ok() && manifest->encrypted;
    const std::string key_print = encrypted ? crypto::FingerprintText(manifest->key_fingerprint) : "";
    nlohmann::json archives = nlohmann::json::array();
    if (manifest.ok()) {
      for (const auto& a : manifest->archives) {
        size += a.size;
        names += (names.empty() ? "" : " ") + a.name;
        archives.push_back({{"name", a.name}, {"size", a.size}});
      }
    } else {
      names = "(manifest unreadable: run verify)";
    }
    if (ctx.json) {
      nlohmann::json v = nullptr;
      if (verify) {
        v = {{"state", verify->outcome == datastore::VerifyOutcome::kOk ? "ok" : "failed"},
             {"time", datastore::FormatRfc3339(verify->time)},
             {"errors", verify->errors}};
      }
      out.push_back({{"snapshot", snap.ToString()},
                     {"ns", snap.group.ns},
                     {"type", snap.group.type},
                     {"id", snap.group.id},
                     {"time", snap.TimeString()},
                     {"size", size},
                     {"archives", archives},
                     {"verify", v},
                     {"protected", prot},
                     {"encrypted", encrypted},
                     {"key_fingerprint", encrypted ? nlohmann::json(key_print) : nlohmann::json(nullptr)},
                     {"notes", notes}});
    } else {
      std::string name = snap.group.ns.empty() ? snap.ToString()
                                               : fmt::format("[{}] {}", snap.group.ns, snap.ToString());
      std::string line = fmt::format("{:<40} {:>12}  {:<36} {:<24} {:<9} {:<23} {}", name,
                                     HumanBytes(size), names, VerifyText(verify),
                                     prot ? "yes" : "-", encrypted ? key_print : "-",
                                     FirstLine(notes));
      line.erase(line.find_last_not_of(' ') + 1);  // no padding after the last column
      fmt::print("{}\n", line);
    }
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
