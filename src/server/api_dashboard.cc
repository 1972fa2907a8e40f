// server::Api: what the web dashboard (server/web/dashboard.h) asks the API
// beyond the CLI's routes (api_request.h has the split). Authorised by the
// same checks as every route: the store was picked for the token already,
// and the role and group ownership are checked here as ListSnapshots does.
#include "index/manifest.h"
#include "maintenance/snapshot_info.h"
#include "server/api_request.h"

namespace cairn::server {

using nlohmann::json;

void Request::ListSnapshotDetails() {
  if (!Method("GET") || !Allowed(Action::kListSnapshots, "list snapshots")) return;
  auto snaps = store_->ListAllSnapshots();
  if (!snaps.ok()) return SendStatus(snaps.status());
  json list = json::array();
  for (const datastore::SnapshotRef& snap : *snaps) {
    if (!OwnsGroup(snap.group)) continue;
    // Forgotten meanwhile: gone from the listing, as in ListSnapshots.
    if (!api_.env.Stat(JoinPath(store_->SnapshotDir(snap), index::kManifestFileName)).ok()) continue;
    list.push_back(maintenance::SnapshotInfoJson(maintenance::ReadSnapshotInfo(*store_, snap)));
  }
  SendJson(200, json{{"store", store_name_}, {"snapshots", std::move(list)}});
}

}  // namespace cairn::server
