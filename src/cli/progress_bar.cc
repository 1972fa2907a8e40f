#include "cli/progress_bar.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <utility>

#include <fmt/format.h>

#include "base/bytes.h"

namespace cairn::cli {
namespace {

std::string Duration(double seconds) {
  auto s = static_cast<uint64_t>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

}  // namespace

ProgressBar::ProgressBar(const pipeline::Progress& progress, FILE* out, bool enabled)
    : progress_(progress), out_(out) {
  if (enabled) thread_ = std::thread([this] { Loop(); });
}

ProgressBar::~ProgressBar() {
  if (!thread_.joinable()) return;
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.NotifyAll();
  thread_.join();
  fmt::print(out_, "\r\033[K");
  std::fflush(out_);
}

bool ProgressBar::StderrIsTerminal() {
  const char* term = std::getenv("TERM");
  return isatty(STDERR_FILENO) == 1 && (term == nullptr || std::strcmp(term, "dumb") != 0);
}

std::string ProgressBar::Render(const char* phase, uint64_t done, uint64_t total,
                                double bytes_per_s, int reads_limit,
                                const std::string& bottleneck) {
  constexpr int kWidth = 24;
  double fraction = total > 0 ? std::min(1.0, static_cast<double>(done) / total) : 0;
  int filled = static_cast<int>(fraction * kWidth);
  std::string bar(filled, '#');
  bar.resize(kWidth, '.');
  std::string eta = "--:--";
  if (bytes_per_s > 0 && total >= done) eta = Duration(static_cast<double>(total - done) / bytes_per_s);
  std::string line = fmt::format("{:<8} [{}] {:>3.0f}%  {} / {}  {:.0f} MiB/s  ETA {}", phase, bar,
                                 fraction * 100, HumanBytes(done, 1), HumanBytes(total, 1), bytes_per_s / (1 << 20),
                                 eta);
  if (reads_limit > 0) line += fmt::format("  reads in flight {}", reads_limit);
  if (!bottleneck.empty()) line += fmt::format("  limit: {}", bottleneck);
  return line;
}

void ProgressBar::Loop() {
  using Clock = std::chrono::steady_clock;
  // (time, done) samples of the last few seconds, for a steady rate, and
  // the stage meter's counters then, for the bottleneck of those seconds.
  struct Sample {
    Clock::time_point time;
    uint64_t done;
    pipeline::StageSample stages;
  };
  std::deque<Sample> samples;
  const char* last_phase = nullptr;
  MutexLock lock(mu_);
  while (true) {
    // A line every 250 ms until Stop().
    const auto tick = Clock::now() + std::chrono::milliseconds(250);
    while (!stop_ && cv_.WaitUntil(mu_, tick)) {
    }
    if (stop_) break;
    const char* phase = progress_.phase.load(std::memory_order_acquire);
    if (phase == nullptr || *phase == '\0') continue;
    uint64_t done = progress_.done_bytes.load(std::memory_order_relaxed);
    uint64_t total = progress_.total_bytes.load(std::memory_order_relaxed);
    auto now = Clock::now();
    if (phase != last_phase) samples.clear();
    last_phase = phase;
    samples.push_back(Sample{now, done, progress_.stages.Sample()});
    while (samples.size() > 2 && now - samples.front().time > std::chrono::seconds(3)) {
      samples.pop_front();
    }
    double rate = 0;
    double span = std::chrono::duration<double>(now - samples.front().time).count();
    if (span > 0 && done >= samples.front().done) {
      rate = static_cast<double>(done - samples.front().done) / span;
    }
    const pipeline::Bottleneck b =
        pipeline::AnalyzeStages(samples.front().stages, samples.back().stages);
    std::string line = Render(phase, done, total, rate,
                              progress_.reads_limit.load(std::memory_order_relaxed),
                              samples.size() > 1 && b.measured ? b.Name() : "");
    fmt::print(out_, "\r{}\033[K", line);
    std::fflush(out_);
  }
}

}  // namespace cairn::cli
