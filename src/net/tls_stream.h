// TlsStream: the server's TLS connection as an Asio stream (Beast's HTTP
// reads and writes run on it), on net::TlsEngine, so that bytes meet the
// socket in large operations (docs/ARCHITECTURE.md, "The data plane"):
//
//   - a write encrypts up to kWriteSlice (1 MiB) of what it is given, in
//     16 KiB records, and hands the ciphertext to the socket in one call
//     (Asio's SSL stream: one sendmsg per 16 KiB record);
//   - a read decrypts what OpenSSL holds, and when it needs more, takes up to
//     kReadCapacity (256 KiB) from the socket at once;
//   - no timer: the connection's deadline is its owner's (net::Session keeps
//     one per request, not one per operation).
//
// Meets Asio's AsyncReadStream and AsyncWriteStream requirements; a
// handler is never called from inside the call that started its
// operation. One read and one write at most at a time, and never both (the
// server's connections alternate: a request, then its answer).
//
// Thread safety: as an Asio socket; use it from its executor (the
// connection's strand).
#pragma once

// g++ 12 warns that TSan does not model Asio's atomic_thread_fence
// (-Wtsan, an error under -Werror in the tsan preset). Asio's fences only
// back up its mutexes, which TSan does see; silence it for these files.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#pragma GCC diagnostic ignored "-Wtsan"
#endif

#include <boost/asio/buffer.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "net/tls_engine.h"

namespace cairn::net {

// asio::async_write's own completion conditions hand a stream at most 64
// KiB per call; this one lets a TlsStream take a whole slice.
struct TransferLarge {
  size_t operator()(const boost::system::error_code& ec, size_t) const {
    return ec ? 0 : size_t{1} << 30;
  }
};

class TlsStream {
 public:
  using tcp = boost::asio::ip::tcp;
  using error_code = boost::system::error_code;
  using executor_type = tcp::socket::executor_type;

  static constexpr size_t kWriteSlice = 1 << 20;
  static constexpr size_t kReadCapacity = 256 << 10;

  TlsStream(tcp::socket socket, SSL_CTX* ctx);

  executor_type get_executor() { return socket_.get_executor(); }
  tcp::socket& socket() { return socket_; }
  bool valid() const { return tls_.valid(); }

  template <typename Handler>
  void async_handshake(Handler&& handler) {
    auto h = Share(std::forward<Handler>(handler));
    DoHandshake(true, [h](error_code ec, size_t) { std::move(*h)(ec); });
  }

  template <typename MutableBufferSequence, typename Handler>
  void async_read_some(const MutableBufferSequence& buffers, Handler&& handler) {
    boost::asio::mutable_buffer first;
    for (auto it = boost::asio::buffer_sequence_begin(buffers);
         it != boost::asio::buffer_sequence_end(buffers); ++it) {
      if (boost::asio::mutable_buffer(*it).size() > 0) {
        first = *it;
        break;
      }
    }
    auto h = Share(std::forward<Handler>(handler));
    DoRead(first, true, [h](error_code ec, size_t n) { std::move(*h)(ec, n); });
  }

  // Encrypts up to kWriteSlice bytes of `buffers` and sends them: the
  // handler gets how many plaintext bytes went.
  template <typename ConstBufferSequence, typename Handler>
  void async_write_some(const ConstBufferSequence& buffers, Handler&& handler) {
    std::vector<boost::asio::const_buffer> list;
    size_t total = 0;
    for (auto it = boost::asio::buffer_sequence_begin(buffers);
         it != boost::asio::buffer_sequence_end(buffers) && total < kWriteSlice; ++it) {
      boost::asio::const_buffer b(*it);
      if (b.size() == 0) continue;
      list.push_back(b);
      total += b.size();
    }
    auto h = Share(std::forward<Handler>(handler));
    DoWrite(std::move(list), [h](error_code ec, size_t n) { std::move(*h)(ec, n); });
  }

  // Sends a close_notify (not waiting for the peer's).
  template <typename Handler>
  void async_shutdown(Handler&& handler) {
    auto h = Share(std::forward<Handler>(handler));
    DoShutdown([h](error_code ec, size_t) { std::move(*h)(ec); });
  }

 private:
  using Done = std::function<void(error_code, size_t)>;

  // Handlers may be move-only; std::function needs a copyable callable.
  template <typename Handler>
  static std::shared_ptr<std::decay_t<Handler>> Share(Handler&& handler) {
    return std::make_shared<std::decay_t<Handler>>(std::forward<Handler>(handler));
  }

  // `initiating`: called from the function that started the operation, so
  // a result at hand is posted rather than delivered at once.
  void DoHandshake(bool initiating, Done done);
  void DoRead(boost::asio::mutable_buffer buffer, bool initiating, Done done);
  void DoWrite(std::vector<boost::asio::const_buffer> buffers, Done done);
  void DoShutdown(Done done);
  // Receives what the kernel has into the engine, then `then`.
  void Receive(std::function<void(error_code)> then);
  // Sends the engine's whole out queue, then done(ec, result).
  void SendOut(size_t result, bool initiating, Done done);
  void Complete(bool initiating, Done done, error_code ec, size_t n);
  error_code TlsError() const;

  tcp::socket socket_;
  TlsEngine tls_;
  bool sending_ = false;
};

}  // namespace cairn::net
