#include "base/tcp_listen.h"

#include <netdb.h>
#include <sys/socket.h>

#include <cerrno>
#include <memory>

#include <fmt/format.h>

namespace cairn {

Result<UniqueFd> ListenTcp(const std::string& host, const std::string& port, int backlog,
                           const std::string& what, std::string* bound) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  if (int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &res);
      rc != 0) {
    return InvalidArgumentError(fmt::format("{}: {}", what, ::gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> guard(res, ::freeaddrinfo);
  UniqueFd fd(::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return ErrnoToStatus(errno, what + ": socket");
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd.get(), res->ai_addr, res->ai_addrlen) != 0) {
    return ErrnoToStatus(errno, what + ": bind");
  }
  if (::listen(fd.get(), backlog) != 0) return ErrnoToStatus(errno, what + ": listen");
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len);
  char name[NI_MAXHOST], serv[NI_MAXSERV];
  ::getnameinfo(reinterpret_cast<sockaddr*>(&ss), len, name, sizeof name, serv, sizeof serv,
                NI_NUMERICHOST | NI_NUMERICSERV);
  *bound = ss.ss_family == AF_INET6 ? fmt::format("[{}]:{}", name, serv)
                                    : fmt::format("{}:{}", name, serv);
  return fd;
}

}  // namespace cairn
