// cairn backup -r REPO --id TYPE/ID [--ns NS] [--time T] ARCHIVE=SOURCE ...
#include <fmt/format.h>

#include "backup/backup.h"
#include "cli/cli_util.h"
#include "cli/progress_bar.h"

namespace cairn::cli {
namespace {

struct BackupArgs {
  std::string id;
  std::string time;
  std::vector<std::string> archives;
  std::vector<std::string> excludes;
  std::vector<std::string> exclude_files;
  bool cross_fs = false;
  bool no_xattrs = false;
  std::string jobs = "auto";
};

// Patterns from an exclude file: one per line; blank lines and lines
// starting with '#' are ignored.
Status ReadExcludeFile(Env& env, const std::string& path, std::vector<std::string>* out) {
  auto data = ReadWholeFile(env, path, 16u << 20);
  if (!data.ok()) return data.status().WithContext("exclude file");
  std::string_view text = AsStringView(*data);
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    if (line.empty() || line.front() == '#') continue;
    out->emplace_back(line);
  }
  return Status::Ok();
}

nlohmann::json ArchiveJson(const backup::ArchiveReport& a) {
  const auto& s = a.stats;
  if (a.kind == index::ArchiveKind::kTree) {
    const auto& t = a.tree;
    return {{"name", a.name},
            {"source", a.source},
            {"kind", "tree"},
            {"bytes", t.bytes},
            {"seconds", a.seconds},
            {"mib_per_s", MiBPerSecond(t.bytes, a.seconds)},
            {"entries", t.entries},
            {"files", t.files},
            {"dirs", t.dirs},
            {"read_bytes", t.read_bytes},
            {"reused_files", t.reused_files},
            {"reused_bytes", t.reused_bytes},
            {"padding_bytes", t.padding_bytes},
            {"chunks", t.chunks},
            {"new_chunks", t.new_chunks},
            {"new_bytes", t.new_bytes},
            {"stored_bytes", t.stored_bytes},
            {"meta_bytes", t.meta_bytes},
            {"skipped", t.skipped},
            {"changed", t.changed},
            {"dedup_base", a.had_base}};
  }
  return {{"name", a.name},
          {"source", a.source},
          {"kind", index::ArchiveKindName(a.kind)},
          {"bytes", s.bytes},
          {"seconds", a.seconds},
          {"mib_per_s", MiBPerSecond(s.bytes, a.seconds)},
          {"chunks", s.chunks},
          {"new_chunks", s.new_chunks},
          {"new_bytes", s.new_bytes},
          {"stored_bytes", s.stored_bytes},
          {"reused_chunks", s.reused_chunks},
          {"reused_bytes", s.reused_bytes},
          {"zero_chunks", s.zero_chunks},
          {"dedup_base", a.had_base}};
}

void PrintArchiveLine(const backup::ArchiveReport& a) {
  const auto& s = a.stats;
  if (a.kind == index::ArchiveKind::kBlob) {
    fmt::print("  {:<16} {} stored whole from {}\n", a.name, HumanBytes(s.bytes), a.source);
    return;
  }
  if (a.kind == index::ArchiveKind::kTree) {
    const auto& t = a.tree;
    fmt::print(
        "  {:<16} {} in {} files, {} dirs, {:.2f} s ({}): {} read, {} files unchanged, "
        "{} new ({} -> {} stored){}{}\n",
        a.name, HumanBytes(t.bytes), t.files, t.dirs, a.seconds, HumanRate(t.bytes, a.seconds),
        HumanBytes(t.read_bytes), t.reused_files, t.new_chunks, HumanBytes(t.new_bytes),
        HumanBytes(t.stored_bytes),
        t.skipped > 0 ? fmt::format(", {} skipped", t.skipped) : "",
        t.changed > 0 ? fmt::format(", {} changed while read", t.changed) : "");
    return;
  }
  fmt::print("  {:<16} {} in {:.2f} s ({}): {} chunks, {} new ({} -> {} stored), {} reused, {} zero\n",
             a.name, HumanBytes(s.bytes), a.seconds, HumanRate(s.bytes, a.seconds), s.chunks,
             s.new_chunks, HumanBytes(s.new_bytes), HumanBytes(s.stored_bytes), s.reused_chunks,
             s.zero_chunks);
}

void Run(Context& ctx, const BackupArgs& args) {
  backup::BackupOptions options;
  options.logger = ctx.logger.get();
  options.created_by = fmt::format("cairn {}", kVersion);
  auto store = OpenRepoWithKey(ctx);
  if (!store.ok()) return Fail(ctx, store.status());
  auto group = datastore::ParseGroup(ctx.ns, args.id);
  if (!group.ok()) return Fail(ctx, group.status());
  options.group = *group;
  if (!args.time.empty()) {
    auto t = datastore::ParseRfc3339(args.time);
    if (!t.ok()) return Fail(ctx, t.status());
    options.time = *t;
  }
  auto jobs = ParseJobs(args.jobs);
  if (!jobs.ok()) return Fail(ctx, jobs.status());
  options.image.reads = *jobs;
  options.tree.excludes = args.excludes;
  for (const auto& file : args.exclude_files) {
    if (Status st = ReadExcludeFile(*ctx.env, file, &options.tree.excludes); !st.ok()) return Fail(ctx, st);
  }
  options.tree.cross_filesystems = args.cross_fs;
  options.tree.xattrs = !args.no_xattrs;
  for (const auto& text : args.archives) {
    auto spec = backup::ParseArchiveSpec(text);
    if (!spec.ok()) return Fail(ctx, spec.status());
    options.archives.push_back(*spec);
  }
  const bool draw = ShowProgress(ctx);
  if (!ctx.json && !ctx.quiet) {
    options.on_archive_done = [draw](const backup::ArchiveReport& a) {
      if (draw) fmt::print(stderr, "\r\033[K");  // the bar's line, before ours
      PrintArchiveLine(a);
    };
    fmt::print("backup of {} to {}\n", group->ToString(), ctx.repo);
  }
  pipeline::Progress progress;
  options.image.progress = &progress;
  auto report = [&] {
    ProgressBar bar(progress, stderr, draw);
    return backup::RunBackup(**store, options);
  }();
  if (!report.ok()) return Fail(ctx, report.status().WithContext("backup failed"));
  const pipeline::Bottleneck bottleneck = progress.stages.Analyze();
  uint64_t total = 0;
  // Reads of the source in flight: the last image archive's pipeline.
  const backup::ImageStats* reads = nullptr;
  for (const auto& a : report->archives) {
    total += a.stats.bytes;
    if (a.kind == index::ArchiveKind::kImage) reads = &a.stats;
  }
  // Through a server: the connections that uploaded the new chunks.
  const store::ConnectionSummary connections = (*store)->sink().Connections();
  if (ctx.json) {
    nlohmann::json archives = nlohmann::json::array();
    for (const auto& a : report->archives) archives.push_back(ArchiveJson(a));
    nlohmann::json j = {{"snapshot", report->snapshot.ToString()},
                        {"ns", report->snapshot.group.ns},
                        {"bytes", total},
                        {"seconds", report->seconds},
                        {"archives", archives},
                        {"jobs", {{"mode", *jobs == 0 ? "auto" : "fixed"},
                                  {"final", reads ? reads->reads_final : 0},
                                  {"max", reads ? reads->reads_max : 0},
                                  {"mean", reads ? reads->reads_mean : 0.0}}}};
    j["bottleneck"] = BottleneckJson(bottleneck);
    if (connections.cap > 0) j["connections"] = ConnectionsJson(connections);
    PrintJson(j);
  } else if (!ctx.quiet) {
    if (reads != nullptr) {
      fmt::print("reads of the source in flight {} (max {}, {})\n", reads->reads_final,
                 reads->reads_max, *jobs == 0 ? "auto" : "fixed");
    }
    if (connections.cap > 0) fmt::print("{}\n", ConnectionsLine(connections));
    fmt::print("snapshot {} finished: {} in {:.2f} s ({})\n", report->snapshot.ToString(),
               HumanBytes(total), report->seconds, HumanRate(total, report->seconds));
    PrintBottleneck(stdout, bottleneck);
  }
}

}  // namespace

void RegisterBackup(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("backup", "back up images and files into a new snapshot");
  auto args = std::make_shared<BackupArgs>();
  AddRepoOptions(cmd, ctx);
  AddKeyOptions(cmd, &ctx.key);
  AddJsonOption(cmd, ctx);
  cmd->add_option("--id", args->id, "backup group TYPE/ID (type vm, ct or host), like vm/100")
      ->required();
  cmd->add_option("--time", args->time, "snapshot time, RFC 3339 UTC (default: now)");
  cmd->add_option("ARCHIVE", args->archives,
                  "NAME.img=FILE|DEVICE, NAME.tree=DIRECTORY or NAME.blob=SMALLFILE, one or more")
      ->required();
  cmd->add_option("--exclude", args->excludes,
                  "leave out paths matching a glob (trees; with '/': matched against the path "
                  "from the tree's root, without: against each name); repeatable");
  cmd->add_option("--exclude-file", args->exclude_files,
                  "read --exclude patterns from a file, one per line ('#' comments)");
  cmd->add_flag("--cross-fs", args->cross_fs,
                "descend into other filesystems mounted below a tree's root (default: stay on "
                "one filesystem)");
  cmd->add_flag("--no-xattrs", args->no_xattrs, "do not record extended attributes and ACLs");
  cmd->add_option("--jobs", args->jobs,
                  "reads of an image source in flight: auto (self-tuning, default) or N");
  cmd->callback([&ctx, args] { Run(ctx, *args); });
}

}  // namespace cairn::cli
