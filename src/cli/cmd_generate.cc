// cairn generate (hidden): what the package build and the shell completion
// ask of cairn itself (doc_gen.h).
//   cairn generate man DIR            cairn.1 and a page per subcommand
//   cairn generate completion bash|zsh
//   cairn generate names -r REPO [SNAPSHOT]
//                                     snapshot names (with TYPE/ID/latest),
//                                     or the archives of SNAPSHOT, one a line
#include <set>

#include <fmt/format.h>

#include "cli/cli_util.h"
#include "cli/doc_gen.h"

namespace cairn::cli {
namespace {

// The whole command tree, built afresh: the pages describe every verb,
// whatever this run parsed.
struct Tree {
  Context ctx;
  CLI::App app{kDescription, "cairn"};
  Tree() { RegisterAll(app, ctx); }
};

Status WriteManPages(Env& env, const std::string& dir) {
  Tree tree;
  CAIRN_RETURN_IF_ERROR(CreateDirs(env, dir));
  for (const auto& [name, text] : RenderManPages(tree.app, kVersion)) {
    CAIRN_RETURN_IF_ERROR(WriteFileAtomic(env, JoinPath(dir, name), AsBytes(text)));
  }
  return Status::Ok();
}

Status PrintNames(Context& ctx, const std::string& snapshot) {
  CAIRN_ASSIGN_OR_RETURN(auto store, OpenRepo(ctx));
  if (!snapshot.empty()) {
    CAIRN_ASSIGN_OR_RETURN(datastore::SnapshotSpec spec,
                           datastore::ParseSnapshotSpec(ctx.ns, snapshot));
    CAIRN_ASSIGN_OR_RETURN(datastore::SnapshotRef snap, store->Resolve(spec));
    CAIRN_ASSIGN_OR_RETURN(index::Manifest m, store->ReadManifest(snap));
    for (const auto& a : m.archives) fmt::print("{}\n", a.name);
    return Status::Ok();
  }
  CAIRN_ASSIGN_OR_RETURN(auto snaps, store->ListAllSnapshots());
  std::set<std::string> groups;
  for (const auto& s : snaps) {
    if (s.group.ns != ctx.ns) continue;
    fmt::print("{}\n", s.ToString());
    groups.insert(s.group.ToString());
  }
  for (const auto& g : groups) fmt::print("{}/latest\n", g);
  return Status::Ok();
}

}  // namespace

void RegisterGenerate(CLI::App& app, Context& ctx) {
  auto* gen = app.add_subcommand("generate", "man pages, shell completion (for packaging)");
  gen->group("");  // hidden from --help and from the pages themselves
  gen->require_subcommand(1);

  auto dir = std::make_shared<std::string>();
  auto* man = gen->add_subcommand("man", "write cairn.1 and a page per subcommand into DIR");
  man->add_option("DIR", *dir, "directory for the pages")->required();
  man->callback([&ctx, dir] {
    if (Status s = WriteManPages(*ctx.env, *dir); !s.ok()) Fail(ctx, s);
  });

  auto shell = std::make_shared<std::string>();
  auto* completion = gen->add_subcommand("completion", "print the completion script for SHELL");
  completion->add_option("SHELL", *shell, "bash or zsh")->required();
  completion->callback([&ctx, shell] {
    Tree tree;
    auto text = RenderCompletion(tree.app, *shell);
    if (!text.ok()) return Fail(ctx, text.status());
    fmt::print("{}", *text);
  });

  auto snapshot = std::make_shared<std::string>();
  auto* names = gen->add_subcommand("names", "print snapshot names, or the archives of SNAPSHOT");
  AddRepoOptions(names, ctx);
  names->add_option("SNAPSHOT", *snapshot, "TYPE/ID/TIME or TYPE/ID/latest");
  names->callback([&ctx, snapshot] {
    if (Status s = PrintNames(ctx, *snapshot); !s.ok()) Fail(ctx, s);
  });
}

}  // namespace cairn::cli
