#include "gendata/tree_gen.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <string_view>
#include <vector>

#include "gendata/gen_file.h"
#include "gendata/prng.h"
#include "gendata/text_pool.h"

namespace cairn::bench {
namespace {

namespace fs = std::filesystem;

constexpr size_t kPiece = size_t{4} << 20;
constexpr size_t kMixedRun = 64 << 10;
constexpr int64_t kMtimeBase = 1'600'000'000;
constexpr double kMaxFile = 64 << 20;
constexpr std::array<std::string_view, 5> kKinds = {"text", "random", "zero", "mixed", "dup"};
constexpr std::array<double, 5> kKindWeights = {0.50, 0.33, 0.03, 0.04, 0.10};
enum Kind { kText = 0, kRandom = 1, kZero = 2, kMixed = 3, kDup = 4 };
constexpr std::array<std::string_view, 8> kDirNames = {"d",   "src",  "lib",   "usr",
                                                       "var", "data", "cache", "etc"};

struct Dir {
  std::string rel;  // "" is the root
  int depth;
};
struct Written {
  std::string rel;
  uint64_t size;
};

std::string_view PickExtension(Rng& rng, Kind kind) {
  static constexpr std::array<std::string_view, 6> kText = {".txt", ".log",  ".c",
                                                            ".py",  ".json", ".md"};
  static constexpr std::array<std::string_view, 5> kRandom = {".bin", ".jpg", ".gz", ".zst", ".so"};
  static constexpr std::array<std::string_view, 2> kZero = {".img", ".dat"};
  static constexpr std::array<std::string_view, 3> kMixed = {".db", ".pack", ".o"};
  switch (kind) {
    case Kind::kText:
      return kText[rng.Below(kText.size())];
    case Kind::kRandom:
      return kRandom[rng.Below(kRandom.size())];
    case Kind::kZero:
      return kZero[rng.Below(kZero.size())];
    default:
      return kMixed[rng.Below(kMixed.size())];
  }
}

std::string Child(const std::string& dir, std::string_view name) {
  return dir.empty() ? std::string(name) : fmt::format("{}/{}", dir, name);
}

// Log-normal sizes, rescaled (with the clamp) until they sum to ~total.
std::vector<uint64_t> DrawSizes(Rng& rng, int count, uint64_t total) {
  std::vector<double> sizes(count);
  for (double& s : sizes) s = rng.LogNormal(std::log(4096.0), 2.5);
  for (int round = 0; round < 6; ++round) {
    double sum = 0;
    for (double s : sizes) sum += std::min(s, kMaxFile);
    double f = sum > 0 ? static_cast<double>(total) / sum : 1.0;
    for (double& s : sizes) s = std::min(s * f, kMaxFile);
  }
  std::vector<uint64_t> out;
  for (double s : sizes) out.push_back(static_cast<uint64_t>(s));
  for (uint64_t& s : out) {
    if (rng.Uniform() < 0.01) s = static_cast<uint64_t>(rng.Between(0, 16));
  }
  return out;
}

class TreeWriter {
 public:
  explicit TreeWriter(uint64_t seed) : rng_(seed), text_(seed * 7919 + 17), buf_(kPiece) {}
  Rng& rng() { return rng_; }

  Status WriteFile(const std::string& path, Kind kind, uint64_t n) {
    CAIRN_ASSIGN_OR_RETURN(auto file, GenFile::Create(path));
    for (uint64_t done = 0; done < n;) {
      size_t piece = kind == kMixed ? kMixedRun : kPiece;
      size_t m = static_cast<size_t>(std::min<uint64_t>(piece, n - done));
      std::span<uint8_t> out(buf_.data(), m);
      Kind k = kind;
      if (kind == kMixed) {
        double r = rng_.Uniform();
        k = r < 0.5 ? kText : r < 0.85 ? kRandom : kZero;
      }
      if (k == kText) {
        text_.Fill(rng_, out);
      } else if (k == kRandom) {
        rng_.Fill(out);
      } else {
        std::fill(out.begin(), out.end(), 0);
      }
      CAIRN_RETURN_IF_ERROR(file->WriteAt(done, out));
      done += m;
    }
    return file->Close();
  }

 private:
  Rng rng_;
  TextPool text_;
  std::vector<uint8_t> buf_;
};

Status MakeDirs(Rng& rng, const fs::path& root, int count, std::vector<Dir>* dirs) {
  dirs->push_back(Dir{"", 0});
  for (int i = 0; i < count; ++i) {
    Dir parent = (*dirs)[rng.Below(dirs->size())];
    if (parent.depth >= 8) parent = Dir{"", 0};
    std::string name = fmt::format("{}{:04}", kDirNames[rng.Below(kDirNames.size())], i);
    Dir d{Child(parent.rel, name), parent.depth + 1};
    std::error_code ec;
    fs::create_directory(root / d.rel, ec);
    if (ec) return ErrnoToStatus(ec.value(), "create directory " + (root / d.rel).string());
    dirs->push_back(std::move(d));
  }
  return Status::Ok();
}

fs::path DirPath(const fs::path& root, const std::string& rel) {
  return rel.empty() ? root : root / rel;
}

struct KindStats {
  uint64_t files = 0;
  uint64_t bytes = 0;
};

}  // namespace

Result<nlohmann::ordered_json> GenerateTree(const TreeOptions& options) {
  auto t0 = std::chrono::steady_clock::now();
  fs::path root = fs::absolute(options.path).lexically_normal();
  if (!root.has_filename()) root = root.parent_path();  // "tree/" -> "tree"
  std::error_code ec;
  fs::remove_all(root, ec);
  if (ec) return ErrnoToStatus(ec.value(), "remove " + root.string());
  fs::create_directories(root, ec);
  if (ec) return ErrnoToStatus(ec.value(), "create directory " + root.string());

  TreeWriter writer(options.seed);
  Rng& rng = writer.rng();
  std::vector<Dir> dirs;
  CAIRN_RETURN_IF_ERROR(MakeDirs(rng, root, std::max(1, options.files / 20), &dirs));
  std::vector<uint64_t> sizes = DrawSizes(rng, options.files, options.size);

  std::array<KindStats, 5> stats{};
  std::vector<Written> files;  // non-duplicate files written so far
  for (int i = 0; i < options.files; ++i) {
    auto kind = static_cast<Kind>(rng.Pick(kKindWeights));
    if (kind == kDup && files.empty()) kind = kText;
    const std::string& dir = dirs[rng.Below(dirs.size())].rel;
    uint64_t n = 0;
    std::string rel;
    if (kind == kDup) {
      const Written& src = files[rng.Below(files.size())];
      n = src.size;
      rel = Child(dir, fmt::format("f{:05}{}", i, fs::path(src.rel).extension().string()));
      fs::copy_file(root / src.rel, root / rel, fs::copy_options::overwrite_existing, ec);
      if (ec) return ErrnoToStatus(ec.value(), "copy " + src.rel + " to " + rel);
    } else {
      n = sizes[i];
      rel = Child(dir, fmt::format("f{:05}{}", i, PickExtension(rng, kind)));
      CAIRN_RETURN_IF_ERROR(writer.WriteFile((root / rel).string(), kind, n));
      files.push_back(Written{rel, n});
    }
    CAIRN_RETURN_IF_ERROR(SetTimes((root / rel).string(), kMtimeBase + i));
    ++stats[kind].files;
    stats[kind].bytes += n;
  }

  // Symlinks, ~2% of the file count: 90% to files, 5% to dirs, 5% dangling.
  int links = options.files / 50;
  uint64_t to_file = 0, to_dir = 0, dangling = 0;
  for (int j = 0; j < links; ++j) {
    const std::string& dir = dirs[rng.Below(dirs.size())].rel;
    double r = rng.Uniform();
    std::string target;
    if (r < 0.90 && !files.empty()) {
      target = files[rng.Below(files.size())].rel;
      ++to_file;
    } else if (r < 0.95 && dirs.size() > 1) {
      target = dirs[1 + rng.Below(dirs.size() - 1)].rel;
      ++to_dir;
    } else {
      target = fmt::format("missing/nowhere{:05}", j);
      ++dangling;
    }
    fs::path link = root / Child(dir, fmt::format("l{:05}", j));
    fs::path rel_target = (root / target).lexically_relative(DirPath(root, dir));
    fs::create_symlink(rel_target, link, ec);
    if (ec) return ErrnoToStatus(ec.value(), "create symlink " + link.string());
    CAIRN_RETURN_IF_ERROR(SetTimes(link.string(), kMtimeBase));
  }
  // Directory times last (deepest first): creating entries changes them.
  std::stable_sort(dirs.begin(), dirs.end(),
                   [](const Dir& a, const Dir& b) { return a.depth > b.depth; });
  for (const Dir& d : dirs) {
    CAIRN_RETURN_IF_ERROR(SetTimes(DirPath(root, d.rel).string(), kMtimeBase));
  }

  nlohmann::ordered_json kinds;
  uint64_t total = 0;
  for (size_t k = 0; k < kKinds.size(); ++k) {
    kinds[std::string(kKinds[k])] = {{"files", stats[k].files}, {"bytes", stats[k].bytes}};
    total += stats[k].bytes;
  }
  uint64_t max_file = sizes.empty() ? 0 : *std::max_element(sizes.begin(), sizes.end());
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return nlohmann::ordered_json{
      {"type", "tree"},
      {"generator", "cairn-gendata"},
      {"path", root.string()},
      {"seed", options.seed},
      {"files", options.files},
      {"dirs", dirs.size()},
      {"symlinks", {{"file", to_file}, {"dir", to_dir}, {"dangling", dangling}}},
      {"total_bytes", total},
      {"max_file", max_file},
      {"kinds", kinds},
      {"seconds", std::round(seconds * 100) / 100}};
}

}  // namespace cairn::bench
