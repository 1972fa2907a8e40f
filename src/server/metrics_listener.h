// MetricsListener: the plain-HTTP endpoint of `cairn serve --metrics-listen
// HOST:PORT` ("metrics": {"listen": …} in the config), where Prometheus
// scrapes GET /metrics (docs/SERVER.md, "Metrics"). Apart from the API's
// TLS port on purpose: a scraper needs no token and no certificate, and the
// API's limits and lanes never see it. It shows figures, never data, but
// names datastores and groups: listen on loopback or a management network.
//
// One thread serves one connection at a time (a scraper asks every few
// seconds): it reads a request of at most 8 KiB within 5 s, answers
// GET /metrics with `render()` and anything else with 404 or 405, and
// closes the connection.
//
// Thread safety: Start, Stop and the destructor from one thread; render is
// called on the listener's thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "base/status.h"
#include "base/unique_fd.h"

namespace cairn::server {

class MetricsListener {
 public:
  using Render = std::function<std::string()>;
  // Binds `listen` ("HOST:PORT"; port 0 picks one) and starts serving.
  static Result<std::unique_ptr<MetricsListener>> Start(const std::string& listen, Render render);
  ~MetricsListener();  // stops

  // "127.0.0.1:9107", with the real port.
  const std::string& endpoint() const { return endpoint_; }

 private:
  MetricsListener(UniqueFd fd, std::string endpoint, Render render);
  void Serve(std::stop_token stop);
  void Answer(int fd);

  UniqueFd fd_;
  const std::string endpoint_;
  const Render render_;
  std::jthread thread_;
};

}  // namespace cairn::server
