// NbdServer: serves one BlockDevice over NBD on a Unix socket or a TCP
// port, to qemu-img, nbdcopy, nbdinfo, QEMU and the kernel's nbd client
// (nbd_session.h has the protocol; docs/ARCHITECTURE.md why cairn serves
// NBD itself rather than through an nbdkit plugin).
//
// One thread accepts connections; each connection gets a thread that runs
// the handshake and reads requests, and a few workers that serve them.
// Stop() stops accepting, shuts every connection down (requests being
// served are finished and answered first) and joins all threads.
//
// Thread safety: Stop and stats may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <thread>

#include "base/logging.h"
#include "base/mutex.h"
#include "base/status.h"
#include "base/unique_fd.h"
#include "nbd/block_device.h"
#include "nbd/nbd_session.h"

namespace cairn::nbd {

struct NbdServerOptions {
  ExportInfo export_info;
  SessionOptions session;
  Logger* logger = nullptr;  // connections and their errors; may be null
};

struct NbdServerStats {
  uint64_t connections = 0;
  uint64_t requests = 0;
  uint64_t bytes_read = 0;
  uint64_t bytes_written = 0;
  uint64_t errors = 0;
};

class NbdServer {
 public:
  // Binds and listens on `listen`: "unix:PATH" (a stale socket file left by
  // a killed server is replaced; one that answers is not), or "HOST:PORT"
  // ("[::1]:10809"; port 0 picks a free one). Accepting starts at once.
  // REQUIRES: device outlives the server.
  static Result<std::unique_ptr<NbdServer>> Listen(const std::string& listen, BlockDevice& device,
                                                   NbdServerOptions options);
  ~NbdServer();
  NbdServer(const NbdServer&) = delete;
  NbdServer& operator=(const NbdServer&) = delete;

  // "unix:/run/x.sock" or "127.0.0.1:10809" (the port really bound).
  const std::string& address() const { return address_; }
  // The URI clients take: "nbd+unix:///disk0.img?socket=/run/x.sock" or
  // "nbd://127.0.0.1:10809/disk0.img".
  std::string Uri() const;

  void Stop();
  NbdServerStats stats() const;

 private:
  struct Connection {
    UniqueFd fd;
    std::jthread thread;
    std::atomic<bool> done{false};
  };

  NbdServer(UniqueFd listen_fd, UniqueFd wake_fd, std::string address, std::string unix_path,
            BlockDevice& device, NbdServerOptions options);
  void AcceptLoop();
  void Serve(Connection* c);
  void ReapLocked() REQUIRES(mu_);

  UniqueFd listen_fd_;
  UniqueFd wake_fd_;  // an eventfd: Stop() wakes the accept loop
  const std::string address_;
  const std::string unix_path_;  // removed at Stop
  BlockDevice& device_;
  const NbdServerOptions options_;

  mutable Mutex mu_;
  std::list<Connection> connections_ GUARDED_BY(mu_);
  NbdServerStats stats_ GUARDED_BY(mu_);
  bool stopped_ GUARDED_BY(mu_) = false;
  std::jthread accept_thread_;
};

}  // namespace cairn::nbd
