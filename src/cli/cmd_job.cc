// cairn job run FILE: one backup job of the timer (cairn-backup@NAME.timer
// runs it with /etc/cairn/backup.d/NAME.conf; client_config.h has the
// format): a backup of the job's sources, then, when the job has [keep]
// rules, a prune of its group. Each step is the command line a user would
// type, run in this process (RunCommandLine), so a job does exactly what
// `cairn backup` and `cairn prune` do, with their messages and exit codes.
#include <fmt/format.h>

#include "cli/cli_util.h"
#include "cli/client_config.h"

namespace cairn::cli {
namespace {

struct JobArgs {
  std::string file;
  bool dry_run = false;
};

void AddSetting(std::vector<std::string>* args, const char* flag, const std::string& value) {
  if (value.empty()) return;
  args->push_back(flag);
  args->push_back(value);
}

// Options every step passes on: the repository and its settings, and the
// global options this run was given.
std::vector<std::string> CommonArgs(const Context& ctx, const BackupJob& job) {
  std::vector<std::string> args = {"-r", job.repository};
  const RepositorySettings& s = job.settings;
  AddSetting(&args, "--ns", s.ns);
  AddSetting(&args, "--token", s.token);
  AddSetting(&args, "--fingerprint", s.fingerprint);
  AddSetting(&args, "--limit-upload", ctx.limit_upload.empty() ? s.limit_upload : ctx.limit_upload);
  AddSetting(&args, "--limit-download",
             ctx.limit_download.empty() ? s.limit_download : ctx.limit_download);
  if (ctx.quiet) args.push_back("-q");
  for (int i = 0; i < ctx.verbosity; ++i) args.push_back("-v");
  if (ctx.no_progress) args.push_back("--no-progress");
  return args;
}

std::vector<std::string> BackupArgs(const Context& ctx, const BackupJob& job) {
  std::vector<std::string> args = {"backup"};
  for (const std::string& a : CommonArgs(ctx, job)) args.push_back(a);
  args.push_back("--id");
  args.push_back(job.id);
  AddSetting(&args, "--keyfile", job.settings.keyfile);
  AddSetting(&args, "--passphrase-file", job.settings.passphrase_file);
  AddSetting(&args, "--password-command", job.settings.password_command);
  for (const std::string& e : job.excludes) AddSetting(&args, "--exclude", e);
  for (const std::string& f : job.exclude_files) AddSetting(&args, "--exclude-file", f);
  if (job.cross_fs) args.push_back("--cross-fs");
  args.push_back("--");
  for (const std::string& source : job.sources) args.push_back(source);
  return args;
}

std::vector<std::string> PruneArgs(const Context& ctx, const BackupJob& job, bool dry_run) {
  std::vector<std::string> args = {"prune"};
  for (const std::string& a : CommonArgs(ctx, job)) args.push_back(a);
  for (const auto& [rule, count] : job.keep) {
    args.push_back("--keep-" + rule);
    args.push_back(std::to_string(count));
  }
  if (dry_run) args.push_back("--dry-run");
  args.push_back(job.id);
  return args;
}

// The command line as a user would read it, with the token hidden.
std::string Show(const std::vector<std::string>& args) {
  std::string out = "cairn";
  bool hide = false;
  for (const std::string& a : args) {
    out += " " + (hide ? std::string("***") : a);
    hide = a == "--token";
  }
  return out;
}

void Run(Context& ctx, const JobArgs& args) {
  auto job = LoadBackupJob(args.file);
  if (!job.ok()) return Fail(ctx, job.status());
  std::vector<std::vector<std::string>> steps;
  if (!args.dry_run) steps.push_back(BackupArgs(ctx, *job));
  if (!job->keep.empty()) steps.push_back(PruneArgs(ctx, *job, args.dry_run));
  for (const auto& step : steps) {
    ctx.logger->Debug("job {}: {}", args.file, Show(step));
    if (!ctx.quiet) {
      std::fflush(stdout);
      fmt::print(stderr, "cairn job: {}\n", Show(step));
    }
    std::fflush(stdout);
    const int rc = RunCommandLine(step);
    if (rc != kExitOk) {
      fmt::print(stderr, "cairn: error: job {}: `{}` failed (exit {}){}\n", args.file, step[0], rc,
                 step[0] == "backup" && !job->keep.empty() ? "; nothing was pruned" : "");
      ctx.exit_code = rc;
      return;
    }
  }
}

}  // namespace

void RegisterJob(CLI::App& app, Context& ctx) {
  auto* job = app.add_subcommand(
      "job", "run a backup job file (what the cairn-backup@NAME timer runs)");
  job->require_subcommand(1);
  auto args = std::make_shared<JobArgs>();
  auto* run = job->add_subcommand(
      "run", "back up what the job FILE names, then prune its group by its [keep] rules");
  run->add_option("FILE", args->file,
                  "job file, like /etc/cairn/backup.d/NAME.conf (TOML: repository, id, sources, "
                  "excludes, keyfile, [keep]; see cairn-job(1))")
      ->required()
      ->type_name("FILE");
  run->add_flag("--dry-run", args->dry_run,
                "back up nothing; show what the [keep] rules would remove");
  run->callback([&ctx, args] { Run(ctx, *args); });
}

}  // namespace cairn::cli
