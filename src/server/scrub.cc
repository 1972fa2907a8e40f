#include "server/scrub.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

namespace cairn::server {

void PathScrubber::Add(const std::string& path, std::string shown) {
  auto add = [&](std::string p) {
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    if (p.empty() || p == "/") return;
    for (const auto& [known, s] : paths_) {
      if (known == p) return;
    }
    paths_.emplace_back(std::move(p), shown);
  };
  add(path);
  if (path.find("://") != std::string::npos) return;  // a URL: as it is
  std::error_code ec;
  auto canonical = std::filesystem::weakly_canonical(path, ec);
  if (!ec) add(canonical.string());
  auto absolute = std::filesystem::absolute(path, ec);
  if (!ec) add(absolute.lexically_normal().string());
  std::stable_sort(paths_.begin(), paths_.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
}

std::string PathScrubber::Scrub(std::string_view text) const {
  std::string out(text);
  for (const auto& [path, shown] : paths_) {
    for (size_t at = out.find(path); at != std::string::npos;
         at = out.find(path, at + shown.size())) {
      out.replace(at, path.size(), shown);
    }
  }
  return out;
}

}  // namespace cairn::server
