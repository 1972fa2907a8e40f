// cairn init STORE
#include <fmt/format.h>

#include "cli/cli_util.h"

namespace cairn::cli {

void RegisterInit(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand(
      "init", "create a datastore at a path or on object storage (s3://BUCKET/PREFIX?endpoint=URL)");
  auto path = std::make_shared<std::string>();
  cmd->add_option("STORE", *path,
                  "directory to create (must be new or empty), or s3://BUCKET/PREFIX?endpoint=URL")
      ->required();
  AddJsonOption(cmd, ctx);
  cmd->callback([&ctx, path] {
    if (path->starts_with("https://") || path->starts_with("http://")) {
      return Fail(ctx, InvalidArgumentError(fmt::format(
                           "{}: a server's datastores are made on the server: run `cairn init "
                           "PATH` there and serve it with `cairn serve --store NAME=PATH`",
                           *path)));
    }
    Status s;
    if (s3store::IsS3Url(*path)) {
      auto location = ResolveS3(ctx, *path);
      s = location.ok() ? s3store::InitS3Datastore(*location) : location.status();
    } else {
      s = datastore::Datastore::Init(*ctx.env, *path);
    }
    if (!s.ok()) return Fail(ctx, s.WithContext(fmt::format("init {}", *path)));
    if (ctx.json) {
      PrintJson({{"datastore", *path}, {"created", true}});
    } else if (!ctx.quiet) {
      fmt::print("created datastore {}\n", *path);
    }
  });
}

}  // namespace cairn::cli
