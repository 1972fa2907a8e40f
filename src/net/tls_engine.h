// TlsEngine: OpenSSL's TLS state machine between two byte queues, so that
// the caller, not OpenSSL, decides how bytes meet the socket: few, large
// system calls (docs/ARCHITECTURE.md, "The data plane").
//
// OpenSSL on a socket BIO (and Asio's SSL stream, with its 17 KiB
// buffers) makes one system call per TLS record, a record holding at most
// 16 KiB: a 4 MiB chunk costs ~260 sendmsg on one side and as many recvmsg
// on the other, each with its event-loop round. Here OpenSSL reads
// ciphertext from `in` and writes it to `out`, both plain memory:
//
//   receiving: the caller reads from the socket into InSpace() (up to
//     kInCapacity at once, whatever the kernel has), commits it, and calls
//     Read(); OpenSSL takes records from that buffer and decrypts them into
//     the caller's memory (its own record buffer in between: OpenSSL 3.0
//     decrypts in place and then copies);
//   sending: Write() encrypts as much plaintext as the caller gives into
//     `out` (records of 16 KiB, one after another); the caller sends
//     OutPending() in one call and Consume()s what went.
//
// Neither queue does I/O, so the same engine serves the blocking client
// (net/http_client.cc) and the asynchronous server (net/tls_stream.h).
//
// Thread safety: none; one thread (or strand) at a time.
#pragma once

#include <openssl/ssl.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/bytes.h"
#include "base/status.h"

namespace cairn::net {

class TlsEngine {
 public:
  // What an operation needs next.
  enum class Step {
    kOk,        // done (Read: some bytes were read)
    kWantRead,  // more ciphertext must be received (InSpace, CommitIn), then retry
    kClosed,    // the peer closed the TLS session (close_notify): no more data
    kError,     // a TLS or protocol error, or the connection ended without a
                // close_notify: error() says which
  };

  // Creates the SSL object of `ctx` for one connection, on the engine's
  // BIO; valid() is false when OpenSSL could not (out of memory).
  // `in_capacity`: the largest read from the socket into InSpace().
  TlsEngine(SSL_CTX* ctx, bool server, size_t in_capacity = kDefaultInCapacity);
  ~TlsEngine();
  TlsEngine(const TlsEngine&) = delete;
  TlsEngine& operator=(const TlsEngine&) = delete;

  bool valid() const { return ssl_ != nullptr; }
  SSL* ssl() { return ssl_; }

  // One step of the handshake: kOk when it is complete.
  Step Handshake();
  // Decrypts up to `n` bytes into `dest`; *got is set on kOk (≥ 1).
  Step Read(uint8_t* dest, size_t n, size_t* got);
  // Encrypts all `n` bytes of `data` into the out queue (never blocks: the
  // queue grows; send it before writing much more).
  Step Write(const uint8_t* data, size_t n);
  // Queues a close_notify alert (best effort).
  void Close();

  // Receiving: free space for ciphertext from the socket (in_capacity when
  // empty), and how many bytes were put there. REQUIRES: n ≤ the span's size.
  MutableByteSpan InSpace();
  void CommitIn(size_t n);
  // The socket reported end of stream: a later Read fails once the
  // buffered bytes are used up (kClosed after a close_notify, else kError).
  void SetEof() { eof_ = true; }
  bool eof() const { return eof_; }
  size_t in_buffered() const { return in_end_ - in_start_; }

  // Sending: the ciphertext waiting to be sent, and how much of it went.
  ByteSpan OutPending() const { return ByteSpan(out_.data() + out_start_, out_.size() - out_start_); }
  void ConsumeOut(size_t n);
  bool out_empty() const { return out_start_ == out_.size(); }

  // The error of the last kError: OpenSSL's reason, or "the peer closed the
  // connection without a TLS close_notify".
  const std::string& error() const { return error_; }
  // The OpenSSL error code of the last kError (0 for a bare end of stream).
  unsigned long error_code() const { return error_code_; }

  static constexpr size_t kDefaultInCapacity = 1 << 20;

 private:
  Step Fail(int ret);
  friend struct EngineBio;

  SSL* ssl_ = nullptr;
  // in_: ciphertext received, [in_start_, in_end_) not yet taken by OpenSSL.
  const size_t in_capacity_;
  std::unique_ptr<uint8_t[]> in_;
  size_t in_start_ = 0;
  size_t in_end_ = 0;
  bool eof_ = false;
  // out_: ciphertext written by OpenSSL, [out_start_, size) not yet sent.
  Bytes out_;
  size_t out_start_ = 0;
  std::string error_;
  unsigned long error_code_ = 0;
};

// Sets what both sides want of a context for the data plane: TLS 1.2 at
// least, no compression or renegotiation, read-ahead.
void ConfigureDataPlaneContext(SSL_CTX* ctx);

}  // namespace cairn::net
