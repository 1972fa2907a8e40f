// cairn-gendata: deterministic benchmark data sets (a disk image, a file tree).
//
//   cairn-gendata image PATH [--size 2G] [--seed 1] [--sparse]
//   cairn-gendata tree  PATH [--files 20000] [--size 1G] [--seed 2]
//
// The same kinds of data as ../shared/data/gen_dataset.py (on which the peer
// figures in the issues were measured), 2-5x faster (writing is the limit); a JSON manifest
// with the byte counts per kind goes to PATH.manifest.json and to stdout.
// Exit codes: 0 ok, 1 failure, 2 usage error.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <string_view>

#include "base/bytes.h"
#include "gendata/image_gen.h"
#include "gendata/tree_gen.h"

namespace cairn::bench {
namespace {


int Finish(const Result<nlohmann::ordered_json>& manifest, std::string manifest_path, bool quiet) {
  if (!manifest.ok()) {
    fmt::print(stderr, "cairn-gendata: {}\n", manifest.status().ToString());
    return 1;
  }
  while (manifest_path.size() > 1 && manifest_path.back() == '/') manifest_path.pop_back();
  manifest_path += ".manifest.json";
  std::ofstream out(manifest_path, std::ios::trunc);
  out << manifest->dump(1) << "\n";
  out.close();
  if (!out) {
    fmt::print(stderr, "cairn-gendata: cannot write {}\n", manifest_path);
    return 1;
  }
  if (!quiet) fmt::print("{}\n", manifest->dump());
  return 0;
}

int Main(int argc, char** argv) {
  CLI::App app{"cairn-gendata: deterministic benchmark data sets"};
  app.require_subcommand(1);
  bool quiet = false;
  app.add_flag("-q,--quiet", quiet, "do not print the manifest");

  ImageOptions image;
  std::string image_size = "2G";
  auto* img = app.add_subcommand("image", "a synthetic VM disk image (one file)");
  img->add_option("PATH", image.path, "output file")->required();
  img->add_option("--size", image_size, "image size (2G, 512M, ...)")->capture_default_str();
  img->add_option("--seed", image.seed, "seed")->capture_default_str();
  img->fallthrough();  // -q after the subcommand
  img->add_flag("--sparse", image.sparse, "leave zero regions as holes");

  TreeOptions tree;
  std::string tree_size = "1G";
  auto* tr = app.add_subcommand("tree", "a synthetic file tree (PATH is replaced)");
  tr->add_option("PATH", tree.path, "output directory")->required();
  tr->add_option("--files", tree.files, "number of files")
      ->check(CLI::Range(1, 10'000'000))
      ->capture_default_str();
  tr->add_option("--size", tree_size, "total bytes of file contents")->capture_default_str();
  tr->add_option("--seed", tree.seed, "seed")->capture_default_str();
  tr->fallthrough();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (img->parsed()) {
    auto size = ParseByteSize(image_size);
    if (!size.ok()) {
      fmt::print(stderr, "cairn-gendata: {}\n", size.status().message());
      return 2;
    }
    image.size = *size;
    return Finish(GenerateImage(image), image.path, quiet);
  }
  auto size = ParseByteSize(tree_size);
  if (!size.ok()) {
    fmt::print(stderr, "cairn-gendata: {}\n", size.status().message());
    return 2;
  }
  tree.size = *size;
  return Finish(GenerateTree(tree), tree.path, quiet);
}

}  // namespace
}  // namespace cairn::bench

int main(int argc, char** argv) {
  try {
    return cairn::bench::Main(argc, argv);
  } catch (const std::exception& e) {  // exceptions stop at main()
    std::fprintf(stderr, "cairn-gendata: %s\n", e.what());
    return 1;
  }
}
