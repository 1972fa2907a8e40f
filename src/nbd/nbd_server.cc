#include "nbd/nbd_server.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "base/tcp_listen.h"

namespace cairn::nbd {
namespace {

// A connected socket as a Channel.
class FdChannel final : public Channel {
 public:
  explicit FdChannel(int fd) : fd_(fd) {}
  Status ReadExact(MutableByteSpan out) override {
    size_t got = 0;
    while (got < out.size()) {
      ssize_t n = ::recv(fd_, out.data() + got, out.size() - got, 0);
      if (n == 0) return OutOfRangeError("the client closed the connection");
      if (n < 0) {
        if (errno == EINTR) continue;
        return ErrnoToStatus(errno, "read from NBD client");
      }
      got += static_cast<size_t>(n);
    }
    return Status::Ok();
  }
  Status WriteAll(ByteSpan data) override { return WriteAll(data, {}); }
  Status WriteAll(ByteSpan head, ByteSpan body) override {
    iovec iov[2] = {{const_cast<uint8_t*>(head.data()), head.size()},
                    {const_cast<uint8_t*>(body.data()), body.size()}};
    int first = 0;
    while (first < 2) {
      if (iov[first].iov_len == 0) {
        ++first;
        continue;
      }
      msghdr msg{};
      msg.msg_iov = iov + first;
      msg.msg_iovlen = static_cast<size_t>(2 - first);
      ssize_t n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        return ErrnoToStatus(errno, "write to NBD client");
      }
      for (size_t left = static_cast<size_t>(n); left > 0 && first < 2;) {
        const size_t take = std::min(left, iov[first].iov_len);
        iov[first].iov_base = static_cast<uint8_t*>(iov[first].iov_base) + take;
        iov[first].iov_len -= take;
        left -= take;
        if (iov[first].iov_len == 0) ++first;
      }
    }
    return Status::Ok();
  }

 private:
  int fd_;
};

// Binds a Unix socket at `path`, replacing a stale socket file.
Result<UniqueFd> ListenUnix(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof addr.sun_path) {
    return InvalidArgumentError(fmt::format(
        "socket path '{}': must be 1 to {} bytes", path, sizeof addr.sun_path - 1));
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return AlreadyExistsError(fmt::format("{} exists and is not a socket", path));
    }
    UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (::connect(probe.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
      return AlreadyExistsError(fmt::format("something is listening on {} already", path));
    }
    ::unlink(path.c_str());  // stale: left by a server that was killed
  }
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return ErrnoToStatus(errno, "socket");
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    return ErrnoToStatus(errno, "bind " + path);
  }
  if (::listen(fd.get(), 64) != 0) return ErrnoToStatus(errno, "listen " + path);
  return fd;
}

// Binds HOST:PORT; sets `bound` to the address really bound.
Result<UniqueFd> ListenHostPort(const std::string& spec, std::string* bound) {
  const size_t colon = spec.rfind(':');
  if (colon == std::string::npos || colon + 1 == spec.size()) {
    return InvalidArgumentError(fmt::format(
        "--listen '{}': expected unix:PATH or HOST:PORT (like 127.0.0.1:10809)", spec));
  }
  std::string host = spec.substr(0, colon);
  const std::string port = spec.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return cairn::ListenTcp(host, port, 64, fmt::format("--listen '{}'", spec), bound);
}

}  // namespace

Result<std::unique_ptr<NbdServer>> NbdServer::Listen(const std::string& listen,
                                                     BlockDevice& device,
                                                     NbdServerOptions options) {
  UniqueFd fd;
  std::string address;
  std::string unix_path;
  if (listen.starts_with("unix:")) {
    unix_path = listen.substr(5);
    CAIRN_ASSIGN_OR_RETURN(fd, ListenUnix(unix_path));
    address = listen;
  } else {
    CAIRN_ASSIGN_OR_RETURN(fd, ListenHostPort(listen, &address));
  }
  UniqueFd wake(::eventfd(0, EFD_CLOEXEC));
  if (wake.get() < 0) return ErrnoToStatus(errno, "eventfd");
  std::unique_ptr<NbdServer> server(new NbdServer(std::move(fd), std::move(wake), address,
                                                  unix_path, device, std::move(options)));
  server->accept_thread_ = std::jthread([s = server.get()] { s->AcceptLoop(); });
  return server;
}

NbdServer::NbdServer(UniqueFd listen_fd, UniqueFd wake_fd, std::string address,
                     std::string unix_path, BlockDevice& device, NbdServerOptions options)
    : listen_fd_(std::move(listen_fd)), wake_fd_(std::move(wake_fd)), address_(std::move(address)),
      unix_path_(std::move(unix_path)), device_(device), options_(std::move(options)) {}

NbdServer::~NbdServer() { Stop(); }

std::string NbdServer::Uri() const {
  const std::string& name = options_.export_info.name;
  if (!unix_path_.empty()) return fmt::format("nbd+unix:///{}?socket={}", name, unix_path_);
  return fmt::format("nbd://{}/{}", address_, name);
}

void NbdServer::AcceptLoop() {
  while (true) {
    pollfd fds[2] = {{listen_fd_.get(), POLLIN, 0}, {wake_fd_.get(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      if (options_.logger) options_.logger->Error("NBD server: poll: {}", std::strerror(errno));
      return;
    }
    if (fds[1].revents != 0) return;  // Stop()
    if ((fds[0].revents & POLLIN) == 0) continue;
    int cfd = ::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC);
    if (cfd < 0) continue;  // the client went away, or fds ran out for a moment
    int one = 1;
    ::setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // fails harmlessly on Unix sockets
    MutexLock lock(mu_);
    ReapLocked();
    if (stopped_) {
      ::close(cfd);
      return;
    }
    ++stats_.connections;
    Connection& c = connections_.emplace_back();
    c.fd = UniqueFd(cfd);
    c.thread = std::jthread([this, &c] { Serve(&c); });
  }
}

void NbdServer::ReapLocked() {
  for (auto it = connections_.begin(); it != connections_.end();) {
    if (it->done.load()) {
      it->thread.join();
      it = connections_.erase(it);
    } else {
      ++it;
    }
  }
}

void NbdServer::Serve(Connection* c) {
  FdChannel channel(c->fd.get());
  SessionStats stats;
  Negotiated negotiated;
  auto go = Handshake(channel, device_, options_.export_info, &negotiated);
  Status s = go.status();
  if (go.ok() && *go) {
    s = Transmission(channel, device_, options_.export_info, negotiated, options_.session, &stats);
  }
  if (!s.ok() && options_.logger != nullptr) {
    // A client that broke the protocol is worth a warning; one that hung
    // up while answers were on their way (nbdcopy closes its extra
    // connections so) is not.
    if (s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kNotFound) {
      options_.logger->Warn("NBD connection ended: {}", s.message());
    } else {
      options_.logger->Debug("NBD connection ended: {}", s.message());
    }
  }
  ::shutdown(c->fd.get(), SHUT_RDWR);
  {
    MutexLock lock(mu_);
    stats_.requests += stats.requests;
    stats_.bytes_read += stats.bytes_read;
    stats_.bytes_written += stats.bytes_written;
    stats_.errors += stats.errors;
  }
  c->done.store(true);
}

void NbdServer::Stop() {
  {
    MutexLock lock(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  uint64_t one = 1;
  if (::write(wake_fd_.get(), &one, sizeof one) < 0) {
    // An eventfd write fails only on overflow: the loop is woken anyway.
  }
  if (accept_thread_.joinable()) accept_thread_.join();
  // The accept loop is gone: nobody else changes the list now. It is
  // taken out under the lock, and joined without it (a connection's thread
  // takes mu_ to add its figures).
  std::list<Connection> connections;
  {
    MutexLock lock(mu_);
    connections.swap(connections_);
  }
  for (Connection& c : connections) ::shutdown(c.fd.get(), SHUT_RDWR);
  for (Connection& c : connections) {
    if (c.thread.joinable()) c.thread.join();
  }
  if (!unix_path_.empty()) ::unlink(unix_path_.c_str());
}

NbdServerStats NbdServer::stats() const {
  MutexLock lock(mu_);
  return stats_;
}

}  // namespace cairn::nbd
