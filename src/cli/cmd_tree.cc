// cairn ls -r REPO SNAPSHOT ARCHIVE [PATH] [-l | --long] [--json]
// cairn cat -r REPO SNAPSHOT ARCHIVE PATH
// Read a tree archive without restoring it: `ls` reads only the metadata
// stream, `cat` the metadata plus the payload chunks of one file.
#include <sys/sysmacros.h>

#include <fmt/format.h>

#include "chunkio/tree_reader.h"
#include "cli/cli_util.h"
#include "tree/tree_path.h"

namespace cairn::cli {
namespace {

using tree::Entry;
using tree::EntryKind;
using tree::EntryKindWord;
using tree::NormalizeTreePath;

struct TreeArgs {
  std::string snapshot;
  std::string archive;
  std::string path;
  bool long_format = false;
};

// Opens the tree archive named on the command line.
Result<std::unique_ptr<chunkio::TreeArchiveReader>> OpenArchive(
    Context& ctx, const TreeArgs& args, std::unique_ptr<datastore::Datastore>* store) {
  CAIRN_ASSIGN_OR_RETURN(*store, OpenRepoWithKey(ctx));
  CAIRN_ASSIGN_OR_RETURN(datastore::SnapshotSpec spec,
                         datastore::ParseSnapshotSpec(ctx.ns, args.snapshot));
  CAIRN_ASSIGN_OR_RETURN(datastore::SnapshotRef snap, (*store)->Resolve(spec));
  CAIRN_ASSIGN_OR_RETURN(index::Manifest manifest, (*store)->ReadManifest(snap));
  const index::ArchiveEntry* entry = manifest.Find(args.archive);
  if (entry == nullptr) {
    std::string trees;
    for (const auto& a : manifest.archives) {
      if (a.kind == index::ArchiveKind::kTree) trees += (trees.empty() ? "" : ", ") + a.name;
    }
    return NotFoundError(fmt::format("snapshot {} has no archive {} (its tree archives: {})",
                                     snap.ToString(), args.archive,
                                     trees.empty() ? "none" : trees));
  }
  if (entry->kind != index::ArchiveKind::kTree) {
    return InvalidArgumentError(fmt::format(
        "{} is {} archive; ls and cat read tree archives (restore it instead)", args.archive,
        entry->kind == index::ArchiveKind::kImage ? "an image" : "a blob"));
  }
  return chunkio::TreeArchiveReader::Open(**store, (*store)->source(), snap, *entry);
}

// "drwxr-xr-x", as ls -l writes it ('h' for a hardlink, as GNU tar does).
std::string ModeString(const Entry& e) {
  std::string s = "?rwxrwxrwx";
  switch (e.kind) {
    case EntryKind::kDirectory: s[0] = 'd'; break;
    case EntryKind::kFile: s[0] = '-'; break;
    case EntryKind::kSymlink: s[0] = 'l'; break;
    case EntryKind::kHardlink: s[0] = 'h'; break;
    case EntryKind::kCharDevice: s[0] = 'c'; break;
    case EntryKind::kBlockDevice: s[0] = 'b'; break;
    case EntryKind::kFifo: s[0] = 'p'; break;
  }
  for (int i = 0; i < 9; ++i) {
    if ((e.mode & (0400u >> i)) == 0) s[1 + i] = '-';
  }
  auto special = [&](uint32_t bit, int pos, char set, char unset) {
    if (e.mode & bit) s[pos] = s[pos] == '-' ? unset : set;
  };
  special(04000, 3, 's', 'S');
  special(02000, 6, 's', 'S');
  special(01000, 9, 't', 'T');
  return s;
}

std::string DisplayPath(const Entry& e) {
  if (e.path.empty()) return "./";
  return e.kind == EntryKind::kDirectory ? e.path + "/" : e.path;
}

std::string LongLine(const Entry& e) {
  std::string owner = fmt::format("{}/{}", e.user.empty() ? std::to_string(e.uid) : e.user,
                                  e.group.empty() ? std::to_string(e.gid) : e.group);
  std::string size = e.kind == EntryKind::kCharDevice || e.kind == EntryKind::kBlockDevice
                         ? fmt::format("{},{}", major(e.rdev), minor(e.rdev))
                         : std::to_string(e.size);
  int64_t secs = e.mtime_ns / 1'000'000'000;
  if (e.mtime_ns % 1'000'000'000 < 0) --secs;  // floor, before 1970
  std::string line = fmt::format("{} {:<17} {:>12} {} {}", ModeString(e), owner, size,
                                 datastore::FormatRfc3339(secs), DisplayPath(e));
  if (e.kind == EntryKind::kSymlink || e.kind == EntryKind::kHardlink) {
    line += " -> " + e.link_target;
  }
  return line;
}

nlohmann::json EntryJson(const Entry& e) {
  return {{"path", e.path},   {"kind", EntryKindWord(e.kind)}, {"mode", e.mode},
          {"uid", e.uid},     {"gid", e.gid},                  {"user", e.user},
          {"group", e.group}, {"size", e.size},                {"mtime_ns", e.mtime_ns},
          {"link_target", e.link_target}};
}

// True when `path` is `top` or lies below it.
bool IsWithin(const std::string& path, const std::string& top) {
  return top.empty() || path == top ||
         (path.size() > top.size() && path.starts_with(top) && path[top.size()] == '/');
}

Status ListTree(Context& ctx, const TreeArgs& args) {
  std::unique_ptr<datastore::Datastore> store;
  CAIRN_ASSIGN_OR_RETURN(auto reader, OpenArchive(ctx, args, &store));
  const std::string top = NormalizeTreePath(args.path);
  bool found = false;
  // Streamed, so a tree of millions of entries is never held in memory.
  if (ctx.json) fmt::print("[");
  while (true) {
    CAIRN_ASSIGN_OR_RETURN(std::optional<Entry> e, reader->Next());
    if (!e.has_value()) break;
    if (!IsWithin(e->path, top)) {
      // Sorted stream: once past `top` and its subtree, nothing follows.
      if (tree::CompareTreePaths(e->path, top) > 0) break;
      continue;
    }
    if (ctx.json) {
      fmt::print("{}\n{}", found ? "," : "", EntryJson(*e).dump());
    } else {
      fmt::print("{}\n", args.long_format ? LongLine(*e) : DisplayPath(*e));
    }
    found = true;
  }
  if (ctx.json) fmt::print("{}]\n", found ? "\n" : "");
  if (!found) {
    return NotFoundError(
        fmt::format("{} has no entry {}", reader->description(), top.empty() ? "/" : top));
  }
  return Status::Ok();
}

Status CatFile(Context& ctx, const TreeArgs& args) {
  std::unique_ptr<datastore::Datastore> store;
  CAIRN_ASSIGN_OR_RETURN(auto reader, OpenArchive(ctx, args, &store));
  const std::string path = NormalizeTreePath(args.path);
  CAIRN_ASSIGN_OR_RETURN(Entry e, reader->Find(path));
  if (e.kind == EntryKind::kHardlink) {  // another name of an earlier file: its content
    CAIRN_ASSIGN_OR_RETURN(e, reader->Find(e.link_target));
  }
  if (e.kind == EntryKind::kSymlink) {
    return InvalidArgumentError(fmt::format(
        "{} is a symlink to {}; cat reads regular files (name the target, if it is in the "
        "archive)",
        args.path, e.link_target));
  }
  if (e.kind != EntryKind::kFile) {
    return InvalidArgumentError(
        fmt::format("{} is a {}, not a regular file", path.empty() ? "/" : args.path,
                    e.kind == EntryKind::kDirectory ? "directory" : EntryKindWord(e.kind)));
  }
  CAIRN_ASSIGN_OR_RETURN(auto out, ctx.env->OpenStdout());
  CAIRN_RETURN_IF_ERROR(reader->ReadPayload(e.payload_offset, e.size,
                                            [&](ByteSpan piece) { return out->Append(piece); }));
  return out->Close();
}

void AddCommon(CLI::App* cmd, Context& ctx, TreeArgs* args) {
  AddRepoOptions(cmd, ctx);
  AddKeyOptions(cmd, &ctx.key);
  cmd->add_option("SNAPSHOT", args->snapshot, "TYPE/ID/TIME or TYPE/ID/latest")->required();
  cmd->add_option("ARCHIVE", args->archive, "tree archive name, like root.tree")->required();
}

}  // namespace

void RegisterTree(CLI::App& app, Context& ctx) {
  auto* ls = app.add_subcommand(
      "ls", "list the entries of a tree archive (PATH and everything below it)");
  auto ls_args = std::make_shared<TreeArgs>();
  AddCommon(ls, ctx, ls_args.get());
  AddJsonOption(ls, ctx);
  ls->add_option("PATH", ls_args->path, "path inside the archive (default: the root)");
  ls->add_flag("-l,--long", ls_args->long_format,
               "mode, owner/group, size, mtime (UTC) and link targets");
  ls->callback([&ctx, ls_args] {
    if (Status s = ListTree(ctx, *ls_args); !s.ok()) Fail(ctx, s);
  });

  auto* cat = app.add_subcommand("cat", "write one regular file of a tree archive to stdout");
  auto cat_args = std::make_shared<TreeArgs>();
  AddCommon(cat, ctx, cat_args.get());
  cat->add_option("PATH", cat_args->path, "path of the file inside the archive")->required();
  cat->callback([&ctx, cat_args] {
    if (Status s = CatFile(ctx, *cat_args); !s.ok()) Fail(ctx, s);
  });
}

}  // namespace cairn::cli
