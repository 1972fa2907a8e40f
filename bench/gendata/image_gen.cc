#include "gendata/image_gen.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <vector>

#include "gendata/gen_file.h"
#include "gendata/prng.h"
#include "gendata/text_pool.h"

namespace cairn::bench {
namespace {

constexpr uint64_t kPage = 4096;
constexpr size_t kPiece = size_t{4} << 20;  // write granularity
constexpr std::array<const char*, 4> kKinds = {"zero", "random", "text", "dup"};
constexpr std::array<double, 4> kTarget = {0.35, 0.25, 0.30, 0.10};
enum Kind { kZero = 0, kRandom = 1, kText = 2, kDup = 3 };

struct Region {
  uint64_t offset;
  uint64_t length;
};

class ImageWriter {
 public:
  ImageWriter(GenFile& file, uint64_t seed)
      : file_(file), rng_(seed), text_(seed * 7919 + 17), buf_(kPiece), zeros_(kPiece, 0) {}

  Rng& rng() { return rng_; }

  Status Random(uint64_t off, uint64_t n) {
    for (uint64_t done = 0; done < n;) {
      size_t m = static_cast<size_t>(std::min<uint64_t>(kPiece, n - done));
      rng_.Fill(std::span(buf_.data(), m));
      CAIRN_RETURN_IF_ERROR(file_.WriteAt(off + done, std::span(buf_.data(), m)));
      done += m;
    }
    return Status::Ok();
  }
  Status Text(uint64_t off, uint64_t n) {
    for (uint64_t done = 0; done < n;) {
      size_t m = static_cast<size_t>(std::min<uint64_t>(kPiece, n - done));
      text_.Fill(rng_, std::span(buf_.data(), m));
      CAIRN_RETURN_IF_ERROR(file_.WriteAt(off + done, std::span(buf_.data(), m)));
      done += m;
    }
    return Status::Ok();
  }
  Status Zeros(uint64_t off, uint64_t n) {
    for (uint64_t done = 0; done < n;) {
      size_t m = static_cast<size_t>(std::min<uint64_t>(kPiece, n - done));
      CAIRN_RETURN_IF_ERROR(file_.WriteAt(off + done, std::span(zeros_.data(), m)));
      done += m;
    }
    return Status::Ok();
  }
  // Copies [src, src + n) to [dst, dst + n); the ranges do not overlap.
  Status Copy(uint64_t src, uint64_t dst, uint64_t n) {
    for (uint64_t done = 0; done < n;) {
      size_t m = static_cast<size_t>(std::min<uint64_t>(kPiece, n - done));
      CAIRN_RETURN_IF_ERROR(file_.ReadAt(src + done, std::span(buf_.data(), m)));
      CAIRN_RETURN_IF_ERROR(file_.WriteAt(dst + done, std::span(buf_.data(), m)));
      done += m;
    }
    return Status::Ok();
  }

 private:
  GenFile& file_;
  Rng rng_;
  TextPool text_;
  std::vector<uint8_t> buf_;
  std::vector<uint8_t> zeros_;
};

// A 4 KiB-aligned piece of an earlier random/text region to duplicate:
// prefers one at least `want` long (24 tries), else the longest seen.
Region PickDuplicate(Rng& rng, const std::vector<Region>& sources, uint64_t want) {
  const Region* best = nullptr;
  for (int t = 0; t < 24; ++t) {
    const Region& s = sources[rng.Below(sources.size())];
    if (s.length >= want) {
      best = &s;
      break;
    }
    if (best == nullptr || s.length > best->length) best = &s;
  }
  uint64_t n = std::min(want, best->length);
  uint64_t start = best->offset + rng.Below((best->length - n) / kPage + 1) * kPage;
  return Region{start, n};
}

}  // namespace

Result<nlohmann::ordered_json> GenerateImage(const ImageOptions& options) {
  auto t0 = std::chrono::steady_clock::now();
  std::filesystem::path path = std::filesystem::absolute(options.path);
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) return ErrnoToStatus(ec.value(), "create directory " + path.parent_path().string());
  CAIRN_ASSIGN_OR_RETURN(auto file, GenFile::Create(path.string()));
  ImageWriter writer(*file, options.seed);
  Rng& rng = writer.rng();

  std::array<uint64_t, 4> written{};
  std::array<uint64_t, 4> regions{};
  std::vector<Region> sources;  // random and text regions, for duplicates
  const uint64_t size = options.size;
  for (uint64_t off = 0; off < size;) {
    uint64_t pages = static_cast<uint64_t>(std::exp2(rng.Uniform(0, 11)));  // 1 .. 2047
    uint64_t rsize = std::min(pages * kPage, size - off);
    uint64_t total = off + rsize;
    std::array<double, 4> w{};
    for (size_t k = 0; k < w.size(); ++k) {
      double deficit = kTarget[k] * static_cast<double>(total) - static_cast<double>(written[k]);
      w[k] = std::max(0.0, deficit) + kTarget[k] * static_cast<double>(rsize) * 0.25;
    }
    if (sources.empty()) w[kDup] = 0;
    auto kind = static_cast<Kind>(rng.Pick(w));
    switch (kind) {
      case kDup: {
        Region src = PickDuplicate(rng, sources, rsize);
        rsize = src.length;
        CAIRN_RETURN_IF_ERROR(writer.Copy(src.offset, off, rsize));
        break;
      }
      case kZero:
        if (!options.sparse) CAIRN_RETURN_IF_ERROR(writer.Zeros(off, rsize));
        break;
      case kRandom:
        CAIRN_RETURN_IF_ERROR(writer.Random(off, rsize));
        sources.push_back(Region{off, rsize});
        break;
      case kText:
        CAIRN_RETURN_IF_ERROR(writer.Text(off, rsize));
        sources.push_back(Region{off, rsize});
        break;
    }
    written[kind] += rsize;
    ++regions[kind];
    off += rsize;
  }
  CAIRN_RETURN_IF_ERROR(file->Truncate(size));
  CAIRN_RETURN_IF_ERROR(file->Close());

  nlohmann::ordered_json by_regions, by_bytes, fractions;
  for (size_t k = 0; k < kKinds.size(); ++k) {
    by_regions[kKinds[k]] = regions[k];
    by_bytes[kKinds[k]] = written[k];
    double f = size == 0 ? 0.0 : static_cast<double>(written[k]) / static_cast<double>(size);
    fractions[kKinds[k]] = std::round(f * 1e4) / 1e4;
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return nlohmann::ordered_json{
      {"type", "image"},        {"generator", "cairn-gendata"},
      {"path", path.string()},  {"size", size},
      {"seed", options.seed},   {"sparse", options.sparse},
      {"regions", by_regions},  {"bytes", by_bytes},
      {"fractions", fractions}, {"seconds", std::round(seconds * 100) / 100}};
}

}  // namespace cairn::bench
