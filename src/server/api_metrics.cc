// server::Api: GET /metrics on the API port (docs/SERVER.md, "Metrics"),
// beside the plain-HTTP address of --metrics-listen: the same exposition for
// a token with the metrics role (or admin), over the API's TLS, token check,
// rate limits and worker lanes. A token bound to one datastore gets only
// the series of that datastore (and the server-wide ones).
#include "server/api_request.h"
#include "base/mutex.h"
#include "server/metrics.h"

namespace cairn::server {

void Request::Metrics() {
  if (!Method("GET") || !Authenticate()) return;
  if (!Allows(token_.role, Action::kMetrics)) {
    return SendError(403, fmt::format("token '{}' (role {}) may not read /metrics: that takes a "
                                      "token with role metrics or admin",
                                      token_.name, RoleName(token_.role)));
  }
  std::function<std::string()> render;
  {
    MutexLock lock(api_.metrics_mu);
    render = api_.render_metrics;
  }
  if (!render) return SendError(404, "this server exports no metrics");
  std::string text = render();
  if (token_.store != "*") text = MetricsForStore(text, token_.store);
  res_.Send(200, kMetricsContentType, AsBytes(text));
}

}  // namespace cairn::server
