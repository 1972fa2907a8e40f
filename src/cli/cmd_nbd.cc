// cairn nbd -r REPO SNAPSHOT ARCHIVE [--listen unix:PATH | HOST:PORT]
//   [--writable --overlay FILE] [--cache SIZE] [--jobs auto|N] [--json]
// Exports an image archive over NBD until SIGINT or SIGTERM: read-only, or
// with writes kept in a copy-on-write overlay file (never in the store).
#include <signal.h>

#include <cstdio>

#include <fmt/format.h>

#include "access/archive_device.h"
#include "access/archive_open.h"
#include "access/overlay_device.h"
#include "cli/access_options.h"
#include "cli/cli_util.h"
#include "nbd/nbd_server.h"

namespace cairn::cli {
namespace {

struct NbdArgs {
  std::string snapshot;
  std::string archive;
  std::string listen = "127.0.0.1:10809";
  bool writable = false;
  std::string overlay;
  AccessOptions access;
  BenchOptions bench;
};

Status Export(Context& ctx, const NbdArgs& args) {
  const int64_t start = ctx.env->NowMonotonicNanos();
  if (args.writable != !args.overlay.empty()) {
    return InvalidArgumentError(
        "--writable needs --overlay FILE (where the writes go; the store is never written), "
        "and --overlay needs --writable");
  }
  CAIRN_ASSIGN_OR_RETURN(AccessSettings settings, ParseAccessOptions(args.access));
  // Every thread started below inherits this mask; sigwait takes the signals.
  sigset_t signals = BlockStopSignals();
  CAIRN_ASSIGN_OR_RETURN(auto store, OpenRepoWithKey(ctx));
  CAIRN_ASSIGN_OR_RETURN(datastore::SnapshotSpec spec,
                         datastore::ParseSnapshotSpec(ctx.ns, args.snapshot));
  CAIRN_ASSIGN_OR_RETURN(datastore::SnapshotRef snap, store->Resolve(spec));
  // Held while exported: prune and forget leave the snapshot alone.
  CAIRN_ASSIGN_OR_RETURN(auto snapshot_lock, store->LockSnapshotShared(snap));
  CAIRN_ASSIGN_OR_RETURN(index::Manifest manifest, store->ReadManifest(snap));
  const index::ArchiveEntry* entry = manifest.Find(args.archive);
  if (entry == nullptr || entry->kind != index::ArchiveKind::kImage) {
    std::string images;
    for (const auto& a : manifest.archives) {
      if (a.kind == index::ArchiveKind::kImage) images += (images.empty() ? "" : ", ") + a.name;
    }
    return (entry == nullptr ? NotFoundError : InvalidArgumentError)(fmt::format(
        "snapshot {} has no image archive {} (its images: {}){}", snap.ToString(), args.archive,
        images.empty() ? "none" : images,
        entry != nullptr ? "; mount a tree or blob with `cairn mount` instead" : ""));
  }
  std::unique_ptr<store::ChunkSource> injected;
  CAIRN_ASSIGN_OR_RETURN(store::ChunkSource* source,
                         MaybeInject(args.bench.inject_latency, store->source(), &injected));
  access::ChunkCache cache({.capacity_bytes = settings.cache_bytes, .logger = ctx.logger.get()});
  access::ReaderSettings rs{&cache, source, access::ReadaheadFor(settings.cache_bytes, settings.jobs)};
  rs.readahead.cpu_workers = args.bench.cpu_workers;
  CAIRN_ASSIGN_OR_RETURN(auto reader, access::OpenImageReader(*store, snap, *entry, rs));
  std::unique_ptr<nbd::BlockDevice> device;
  access::OverlayDevice* overlay = nullptr;
  if (args.writable) {
    CAIRN_ASSIGN_OR_RETURN(auto o, access::OverlayDevice::Open(*ctx.env, args.overlay, *reader,
                                                               entry->csum));
    overlay = o.get();
    device = std::move(o);
  } else {
    device = std::make_unique<access::ArchiveDevice>(*reader);
  }
  nbd::NbdServerOptions nopts;
  nopts.export_info.name = entry->name;
  nopts.export_info.description = reader->description();
  nopts.session.logger = ctx.logger.get();
  nopts.logger = ctx.logger.get();
  CAIRN_ASSIGN_OR_RETURN(auto server, nbd::NbdServer::Listen(args.listen, *device, nopts));
  const double ready = static_cast<double>(ctx.env->NowMonotonicNanos() - start) / 1e9;
  if (ctx.json) {
    PrintJson({{"event", "ready"},
               {"snapshot", snap.ToString()},
               {"archive", entry->name},
               {"size", entry->size},
               {"writable", args.writable},
               {"uri", server->Uri()},
               {"address", server->address()},
               {"ready_seconds", ready}});
  } else {
    fmt::print("exporting {} ({}, {}) at {} (ready in {:.2f} s; SIGINT or SIGTERM stops it)\n",
               reader->description(), HumanBytes(entry->size),
               args.writable ? "writes to " + args.overlay : std::string("read-only"),
               server->Uri(), ready);
  }
  std::fflush(stdout);
  int sig = 0;
  sigwait(&signals, &sig);
  server->Stop();
  Status closed = overlay != nullptr ? overlay->Close() : Status::Ok();
  const nbd::NbdServerStats s = server->stats();
  const access::ChunkCacheStats c = cache.stats();
  fmt::print(stderr,
             "cairn nbd: stopped by signal {}: {} connections, {} requests ({} failed), read {}, "
             "wrote {}; fetched {} chunks ({}) from {}, cache hits {}, joined fetches in progress "
             "{}, peak cache {}\n",
             sig, s.connections, s.requests, s.errors, HumanBytes(s.bytes_read),
             HumanBytes(s.bytes_written), c.loads, HumanBytes(c.loaded_bytes),
             source->Traits().description, c.hits, c.joins, HumanBytes(c.peak_bytes));
  if (!closed.ok()) return closed.WithContext("overlay " + args.overlay);
  return Status::Ok();
}

}  // namespace

void RegisterNbd(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand(
      "nbd", "export an image archive over NBD (qemu-img, nbdcopy, QEMU, the kernel's client)");
  auto args = std::make_shared<NbdArgs>();
  AddRepoOptions(cmd, ctx);
  AddKeyOptions(cmd, &ctx.key);
  AddJsonOption(cmd, ctx);
  cmd->add_option("SNAPSHOT", args->snapshot, "TYPE/ID/TIME or TYPE/ID/latest")->required();
  cmd->add_option("ARCHIVE", args->archive, "image archive name, like disk0.img")->required();
  cmd->add_option("--listen", args->listen,
                  "unix:PATH or HOST:PORT (default 127.0.0.1:10809; port 0 picks a free one)");
  cmd->add_flag("--writable", args->writable,
                "accept writes, kept in the --overlay file (the store is never written)");
  cmd->add_option("--overlay", args->overlay,
                  "copy-on-write file for --writable (created if absent; reusable)");
  AddAccessOptions(cmd, &args->access);
  AddBenchOptions(cmd, &args->bench);
  cmd->callback([&ctx, args] {
    if (Status s = Export(ctx, *args); !s.ok()) Fail(ctx, s);
  });
}

}  // namespace cairn::cli
