#include "net/tls_engine.h"

#include <openssl/bio.h>
#include <openssl/err.h>

#include <algorithm>
#include <cstring>

namespace cairn::net {

// The BIO under the engine's SSL object: reads take from the in queue,
// writes append to the out queue; nothing touches a socket.
struct EngineBio {
  static constexpr size_t kOutReserve = (1 << 20) + (64 << 10);

  static TlsEngine* Of(BIO* bio) { return static_cast<TlsEngine*>(BIO_get_data(bio)); }

  static int ReadEx(BIO* bio, char* buf, size_t len, size_t* got) {
    BIO_clear_retry_flags(bio);
    *got = 0;
    TlsEngine* e = Of(bio);
    size_t have = e->in_end_ - e->in_start_;
    if (have == 0) {
      // An end of stream is a read of nothing without a retry.
      if (!e->eof_) BIO_set_retry_read(bio);
      return 0;
    }
    size_t n = std::min(len, have);
    std::memcpy(buf, e->in_.get() + e->in_start_, n);
    e->in_start_ += n;
    if (e->in_start_ == e->in_end_) e->in_start_ = e->in_end_ = 0;
    *got = n;
    return 1;
  }

  static int WriteEx(BIO* bio, const char* buf, size_t len, size_t* written) {
    BIO_clear_retry_flags(bio);
    TlsEngine* e = Of(bio);
    if (e->out_start_ == e->out_.size()) {
      e->out_.clear();
      e->out_start_ = 0;
    }
    // Room for a slice of records without moving them as the queue grows.
    if (e->out_.capacity() < kOutReserve) e->out_.reserve(kOutReserve);
    const auto* p = reinterpret_cast<const uint8_t*>(buf);
    e->out_.insert(e->out_.end(), p, p + len);
    *written = len;
    return 1;
  }

  static long Ctrl(BIO* bio, int cmd, long, void*) {  // NOLINT(runtime/int): OpenSSL's type
    TlsEngine* e = Of(bio);
    switch (cmd) {
      case BIO_CTRL_FLUSH: return 1;  // the caller sends the out queue
      case BIO_CTRL_PENDING: return static_cast<long>(e->in_end_ - e->in_start_);
      case BIO_CTRL_WPENDING: return static_cast<long>(e->out_.size() - e->out_start_);
      case BIO_CTRL_EOF: return e->eof_ && e->in_end_ == e->in_start_;
      default: return 0;
    }
  }

  static int Create(BIO* bio) {
    BIO_set_init(bio, 1);
    return 1;
  }

  static const BIO_METHOD* Method() {
    static const BIO_METHOD* method = [] {
      BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "cairn TLS engine");
      BIO_meth_set_read_ex(m, ReadEx);
      BIO_meth_set_write_ex(m, WriteEx);
      BIO_meth_set_ctrl(m, Ctrl);
      BIO_meth_set_create(m, Create);
      return m;
    }();
    return method;
  }
};

void ConfigureDataPlaneContext(SSL_CTX* ctx) {
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  // OpenSSL asks the BIO for as much as a record buffer holds, not for a
  // record header and then its body: half the calls.
  SSL_CTX_set_read_ahead(ctx, 1);
}

TlsEngine::TlsEngine(SSL_CTX* ctx, bool server, size_t in_capacity)
    : in_capacity_(std::max<size_t>(in_capacity, 1 << 16)) {
  ssl_ = SSL_new(ctx);
  if (ssl_ == nullptr) return;
  BIO* bio = BIO_new(EngineBio::Method());
  if (bio == nullptr) {
    SSL_free(ssl_);
    ssl_ = nullptr;
    return;
  }
  BIO_set_data(bio, this);
  SSL_set_bio(ssl_, bio, bio);  // one reference, owned by ssl_
  if (server) {
    SSL_set_accept_state(ssl_);
  } else {
    SSL_set_connect_state(ssl_);
  }
}

TlsEngine::~TlsEngine() {
  if (ssl_ != nullptr) SSL_free(ssl_);
}

TlsEngine::Step TlsEngine::Fail(int ret) {
  int err = SSL_get_error(ssl_, ret);
  if (err == SSL_ERROR_WANT_READ) return Step::kWantRead;
  if (err == SSL_ERROR_ZERO_RETURN) return Step::kClosed;
  error_code_ = ERR_peek_error();
  bool bare_eof = eof_ && in_start_ == in_end_ &&
                  (error_code_ == 0 || ERR_GET_REASON(error_code_) == SSL_R_UNEXPECTED_EOF_WHILE_READING);
  if (bare_eof) {
    error_ = "the peer closed the connection without a TLS close_notify";
  } else if (error_code_ != 0) {
    char text[256];
    ERR_error_string_n(error_code_, text, sizeof(text));
    error_ = text;
  } else {
    error_ = "TLS error " + std::to_string(err);
  }
  ERR_clear_error();
  return Step::kError;
}

TlsEngine::Step TlsEngine::Handshake() {
  ERR_clear_error();
  int r = SSL_do_handshake(ssl_);
  return r == 1 ? Step::kOk : Fail(r);
}

TlsEngine::Step TlsEngine::Read(uint8_t* dest, size_t n, size_t* got) {
  ERR_clear_error();
  *got = 0;
  if (SSL_read_ex(ssl_, dest, n, got) == 1) return Step::kOk;
  return Fail(0);
}

TlsEngine::Step TlsEngine::Write(const uint8_t* data, size_t n) {
  ERR_clear_error();
  while (n > 0) {
    size_t written = 0;
    if (SSL_write_ex(ssl_, data, n, &written) != 1) {
      Step s = Fail(0);
      // A write needs no ciphertext from the peer (no renegotiation).
      if (s != Step::kError) {
        error_ = "TLS write stopped: the session is closing";
        s = Step::kError;
      }
      return s;
    }
    data += written;
    n -= written;
  }
  return Step::kOk;
}

void TlsEngine::Close() {
  ERR_clear_error();
  if ((SSL_get_shutdown(ssl_) & SSL_SENT_SHUTDOWN) == 0 && SSL_is_init_finished(ssl_)) {
    SSL_shutdown(ssl_);
  }
  ERR_clear_error();
}

MutableByteSpan TlsEngine::InSpace() {
  if (!in_) in_ = std::make_unique_for_overwrite<uint8_t[]>(in_capacity_);
  if (in_start_ == in_end_) in_start_ = in_end_ = 0;
  if (in_end_ == in_capacity_ && in_start_ > 0) {
    std::memmove(in_.get(), in_.get() + in_start_, in_end_ - in_start_);
    in_end_ -= in_start_;
    in_start_ = 0;
  }
  return MutableByteSpan(in_.get() + in_end_, in_capacity_ - in_end_);
}

void TlsEngine::CommitIn(size_t n) { in_end_ += n; }

void TlsEngine::ConsumeOut(size_t n) {
  out_start_ += n;
  if (out_start_ >= out_.size()) {
    out_.clear();
    out_start_ = 0;
  }
}

}  // namespace cairn::net
