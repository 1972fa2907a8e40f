#include "server/sync_jobs.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "base/rate_limiter.h"
#include "datastore/snapshot_ref.h"
#include "server/server_config.h"
#include "server/tasks.h"
#include "sync/group_filter.h"

namespace cairn::server {

using nlohmann::json;

namespace {

constexpr char kKnownKeys[] =
    "store, from, token, fingerprint, schedule, ns, target_ns, max_depth, groups, group_filter, "
    "transfer_last, remove_vanished, verified_only, encrypted_only, keep_protected, "
    "resync_corrupt, limit_rate, jobs";

// A busy datastore (another task on it) is tried again this often.
constexpr int64_t kRetryBusyS = 30;

Result<SyncJob> ParseJob(const std::string& name, const json& v,
                         const std::map<std::string, std::string>& stores) {
  auto error = [&](std::string_view key, std::string_view why) {
    return InvalidArgumentError(fmt::format("sync job '{}': \"{}\": {}", name, key, why));
  };
  if (!IsValidName(name)) {
    return InvalidArgumentError(
        fmt::format("sync job '{}': bad name: use 1 to 64 of A-Z a-z 0-9 . _ -", name));
  }
  if (!v.is_object()) return error("(job)", "must be an object with \"store\" and \"from\"");
  SyncJob job;
  job.name = name;
  for (const auto& item : v.items()) {
    const std::string key = item.key();
    const json& value = item.value();
    auto string = [&](std::string* out) -> Status {
      if (!value.is_string()) return error(key, "must be a string");
      *out = value.get<std::string>();
      return Status::Ok();
    };
    auto flag = [&](bool* out) -> Status {
      if (!value.is_boolean()) return error(key, "must be true or false");
      *out = value.get<bool>();
      return Status::Ok();
    };
    auto integer = [&](int* out, int lo, int hi) -> Status {
      if (!value.is_number_integer() || value.get<int64_t>() < lo || value.get<int64_t>() > hi) {
        return error(key, fmt::format("must be an integer from {} to {}", lo, hi));
      }
      *out = static_cast<int>(value.get<int64_t>());
      return Status::Ok();
    };
    auto strings = [&](std::vector<std::string>* out) -> Status {
      if (!value.is_array()) return error(key, "must be an array of strings");
      for (const json& s : value) {
        if (!s.is_string()) return error(key, "must be an array of strings");
        out->push_back(s.get<std::string>());
      }
      return Status::Ok();
    };
    Status s = Status::Ok();
    if (key == "store") s = string(&job.store);
    else if (key == "from") s = string(&job.from);
    else if (key == "token") s = string(&job.token);
    else if (key == "fingerprint") s = string(&job.fingerprint);
    else if (key == "ns") s = string(&job.ns);
    else if (key == "target_ns") s = string(&job.target_ns);
    else if (key == "limit_rate") s = string(&job.limit_rate);
    else if (key == "schedule") {
      std::string text;
      s = string(&text);
      if (s.ok()) {
        auto schedule = Schedule::Parse(text);
        if (!schedule.ok()) return error(key, schedule.status().message());
        job.schedule = *schedule;
      }
    } else if (key == "max_depth") s = integer(&job.max_depth, 0, 7);
    else if (key == "transfer_last") s = integer(&job.transfer_last, 1, 1'000'000);
    else if (key == "jobs") s = integer(&job.jobs, 0, 1024);
    else if (key == "groups") s = strings(&job.groups);
    else if (key == "group_filter") s = strings(&job.group_filter);
    else if (key == "remove_vanished") s = flag(&job.remove_vanished);
    else if (key == "verified_only") s = flag(&job.verified_only);
    else if (key == "encrypted_only") s = flag(&job.encrypted_only);
    else if (key == "keep_protected") s = flag(&job.keep_protected);
    else if (key == "resync_corrupt") s = flag(&job.resync_corrupt);
    else return error(key, fmt::format("unknown key (expected {})", kKnownKeys));
    CAIRN_RETURN_IF_ERROR(s);
  }
  if (job.store.empty()) return error("store", "is required: the datastore that receives");
  if (stores.find(job.store) == stores.end()) {
    return error("store", fmt::format("no datastore named '{}' in \"stores\"", job.store));
  }
  if (job.from.empty()) {
    return error("from", "is required: a path, https://HOST:PORT/STORE or s3://BUCKET/PREFIX");
  }
  if (auto st = datastore::ValidateNamespace(job.ns); !st.ok()) return error("ns", st.message());
  if (auto st = datastore::ValidateNamespace(job.target_ns); !st.ok()) {
    return error("target_ns", st.message());
  }
  if (auto f = sync::GroupFilter::Parse(job.group_filter); !f.ok()) {
    return error("group_filter", f.status().message());
  }
  if (!job.limit_rate.empty()) {
    if (auto r = ParseByteRate(job.limit_rate, "limit_rate"); !r.ok()) {
      return error("limit_rate", r.status().message());
    }
  }
  return job;
}

}  // namespace

json SyncJob::ToJson() const {
  const size_t colon = token.find(':');
  return {{"name", name},
          {"store", store},
          {"from", from},
          {"token", token.substr(0, colon)},
          {"fingerprint", fingerprint},
          {"schedule", schedule ? json(schedule->text()) : json(nullptr)},
          {"ns", ns},
          {"target_ns", target_ns},
          {"max_depth", max_depth < 0 ? json(nullptr) : json(max_depth)},
          {"groups", groups},
          {"group_filter", group_filter},
          {"transfer_last", transfer_last},
          {"remove_vanished", remove_vanished},
          {"verified_only", verified_only},
          {"encrypted_only", encrypted_only},
          {"keep_protected", keep_protected},
          {"resync_corrupt", resync_corrupt},
          {"limit_rate", limit_rate},
          {"jobs", jobs}};
}

sync::SyncOptions SyncJob::Options() const {
  sync::SyncOptions o;
  o.selection = groups;
  o.ns = ns;
  o.target_ns = target_ns;
  o.max_depth = max_depth;
  // Checked by ParseSyncJobs.
  auto filter = sync::GroupFilter::Parse(group_filter);
  if (filter.ok()) o.filter = std::move(filter).value();
  o.transfer_last = transfer_last;
  o.verified_only = verified_only;
  o.encrypted_only = encrypted_only;
  o.keep_protected = keep_protected;
  o.remove_vanished = remove_vanished;
  o.resync_corrupt = resync_corrupt;
  if (!limit_rate.empty()) {
    auto rate = ParseByteRate(limit_rate, "limit_rate");
    if (rate.ok()) o.limit_rate = *rate;
  }
  o.jobs = jobs;
  o.source_name = from;
  return o;
}

Result<std::vector<SyncJob>> ParseSyncJobs(const json& value,
                                           const std::map<std::string, std::string>& stores) {
  if (!value.is_object()) {
    return InvalidArgumentError("\"sync_jobs\" must be an object: job name → job");
  }
  std::vector<SyncJob> jobs;
  for (const auto& item : value.items()) {
    CAIRN_ASSIGN_OR_RETURN(SyncJob job, ParseJob(item.key(), item.value(), stores));
    jobs.push_back(std::move(job));
  }
  return jobs;
}

// --- SyncScheduler ----------------------------------------------------------

SyncScheduler::SyncScheduler(TaskManager& tasks, Logger& logger, const std::vector<SyncJob>& jobs)
    : tasks_(tasks), logger_(logger) {
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  for (const SyncJob& job : jobs) {
    if (!job.schedule) continue;
    int64_t next = job.schedule->Next(now);
    if (next == 0) {
      logger_.Warn("sync job '{}': schedule \"{}\" never comes: not scheduled", job.name,
                   job.schedule->text());
      continue;
    }
    due_.emplace(job.name, std::make_pair(*job.schedule, next));
  }
  if (!due_.empty()) thread_ = std::jthread([this](std::stop_token stop) { Loop(stop); });
}

SyncScheduler::~SyncScheduler() {
  if (thread_.joinable()) {
    thread_.request_stop();
    wake_.notify_all();
    thread_.join();
  }
}

int64_t SyncScheduler::NextRun(const std::string& name) {
  MutexLock lock(mu_);
  auto it = due_.find(name);
  return it == due_.end() ? 0 : it->second.second;
}

void SyncScheduler::Loop(std::stop_token stop) {
  MutexLock lock(mu_);
  while (!stop.stop_requested()) {
    const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    int64_t soonest = now + 3600;
    for (auto& [name, entry] : due_) {
      auto& [schedule, next] = entry;
      if (next <= now) {
        lock.Unlock();
        auto started = tasks_.StartSync(name, "(schedule)");
        lock.Lock();
        if (started.ok() && !started->already_running) {
          next = schedule.Next(now);
          logger_.Info("sync job '{}': started on schedule (task {}); next run {}", name,
                       started->id, datastore::FormatRfc3339(next));
        } else if (started.ok()) {
          next = now + kRetryBusyS;  // the datastore is busy: soon again
        } else {
          next = schedule.Next(now);
          logger_.Warn("sync job '{}': not started: {}", name, started.status().ToString());
        }
        if (next == 0) next = now + 366 * 86400;
      }
      soonest = std::min(soonest, next);
    }
    const auto until = std::chrono::system_clock::time_point(std::chrono::seconds(soonest));
    wake_.wait_until(mu_, stop, until, [] { return false; });
  }
}

}  // namespace cairn::server
