#include "net/tls_stream.h"

#include <boost/asio/defer.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/write.hpp>
#include <openssl/err.h>

namespace cairn::net {
namespace {

namespace asio = boost::asio;
using error_code = boost::system::error_code;

}  // namespace

TlsStream::TlsStream(tcp::socket socket, SSL_CTX* ctx)
    : socket_(std::move(socket)), tls_(ctx, /*server=*/true, kReadCapacity) {}

error_code TlsStream::TlsError() const {
  if (tls_.eof() && tls_.error_code() == 0) return asio::ssl::error::stream_truncated;
  return error_code(static_cast<int>(ERR_GET_REASON(tls_.error_code())),
                    asio::error::get_ssl_category());
}

void TlsStream::Complete(bool initiating, Done done, error_code ec, size_t n) {
  if (!initiating) return done(ec, n);
  // Deferred, not posted: a continuation of the caller's operation (Beast
  // reads a body 64 KiB at a time, most of it already decrypted here), so
  // it runs next on this I/O thread. A post went to the shared queue and
  // woke an idle I/O thread for each piece: two epoll_wait and a futex
  // per 64 KiB of an upload.
  asio::defer(socket_.get_executor(), [done = std::move(done), ec, n] { done(ec, n); });
}

void TlsStream::Receive(std::function<void(error_code)> then) {
  MutableByteSpan space = tls_.InSpace();
  socket_.async_read_some(asio::buffer(space.data(), space.size()),
                          [this, then = std::move(then)](error_code ec, size_t n) {
                            if (ec == asio::error::eof) {
                              tls_.SetEof();
                              ec = {};
                            } else if (!ec) {
                              tls_.CommitIn(n);
                            }
                            then(ec);
                          });
}

void TlsStream::SendOut(size_t result, bool initiating, Done done) {
  if (tls_.out_empty()) return Complete(initiating, std::move(done), {}, result);
  sending_ = true;
  ByteSpan out = tls_.OutPending();
  asio::async_write(socket_, asio::buffer(out.data(), out.size()), TransferLarge(),
                    [this, result, done = std::move(done)](error_code ec, size_t n) {
                      sending_ = false;
                      tls_.ConsumeOut(n);
                      done(ec, ec ? 0 : result);
                    });
}

void TlsStream::DoHandshake(bool initiating, Done done) {
  TlsEngine::Step step = tls_.Handshake();
  if (step == TlsEngine::Step::kError) return Complete(initiating, std::move(done), TlsError(), 0);
  // What the handshake wrote goes out first; then it is done or reads on.
  SendOut(0, initiating, [this, step, done = std::move(done)](error_code ec, size_t) {
    if (ec || step == TlsEngine::Step::kOk) return done(ec, 0);
    if (step == TlsEngine::Step::kClosed) return done(asio::error::eof, 0);
    Receive([this, done](error_code rec) {
      if (rec) return done(rec, 0);
      if (tls_.eof() && tls_.in_buffered() == 0) return done(asio::error::eof, 0);
      DoHandshake(false, done);
    });
  });
}

void TlsStream::DoRead(asio::mutable_buffer buffer, bool initiating, Done done) {
  if (buffer.size() == 0) return Complete(initiating, std::move(done), {}, 0);
  size_t got = 0;
  TlsEngine::Step step = tls_.Read(static_cast<uint8_t*>(buffer.data()), buffer.size(), &got);
  error_code ec;
  switch (step) {
    case TlsEngine::Step::kOk: break;
    case TlsEngine::Step::kClosed: ec = asio::error::eof; break;
    case TlsEngine::Step::kError: ec = TlsError(); break;
    case TlsEngine::Step::kWantRead:
      if (!tls_.out_empty()) break;  // sent below, then the read goes on
      return Receive([this, buffer, done = std::move(done)](error_code rec) {
        if (rec) return done(rec, 0);
        DoRead(buffer, false, done);
      });
  }
  if (tls_.out_empty() || ec) return Complete(initiating, std::move(done), ec, got);
  // The read produced an answer (a post-handshake message): send it. Reads
  // and writes never overlap on a connection of the server.
  if (sending_) return Complete(initiating, std::move(done), asio::error::in_progress, 0);
  SendOut(got, initiating, [this, step, buffer, done = std::move(done)](error_code e, size_t n) {
    if (e || step != TlsEngine::Step::kWantRead) return done(e, n);
    DoRead(buffer, false, done);
  });
}

void TlsStream::DoWrite(std::vector<asio::const_buffer> buffers, Done done) {
  if (sending_) return Complete(true, std::move(done), asio::error::in_progress, 0);
  size_t total = 0;
  for (const asio::const_buffer& b : buffers) {
    size_t n = std::min(b.size(), kWriteSlice - total);
    if (n == 0) break;
    if (tls_.Write(static_cast<const uint8_t*>(b.data()), n) != TlsEngine::Step::kOk) {
      return Complete(true, std::move(done), TlsError(), 0);
    }
    total += n;
  }
  SendOut(total, true, std::move(done));
}

void TlsStream::DoShutdown(Done done) {
  if (sending_) return Complete(true, std::move(done), asio::error::in_progress, 0);
  tls_.Close();
  SendOut(0, true, std::move(done));
}

}  // namespace cairn::net
