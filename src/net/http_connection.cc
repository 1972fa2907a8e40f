// One connection of net::HttpServer (http_server_impl.h has its life).
#include <limits>

#include "base/text.h"
#include "net/http_server_impl.h"

namespace cairn::net {
namespace {

constexpr auto kLingerTime = std::chrono::milliseconds(1000);
constexpr size_t kLingerBytes = 1 << 20;
constexpr auto kMaxShutdownTime = std::chrono::milliseconds(5000);
// Buffers of written stream pieces kept for the next ones.
constexpr size_t kSpareBuffers = 4;
constexpr size_t kMinSpareCapacity = ResponseWriter::StreamPieces::kSmallPiece;

bool IsFramingHeader(std::string_view name) {
  std::string lower = AsciiLower(name);
  return lower == "content-length" || lower == "transfer-encoding";
}

template <typename Message>
void FillHeader(Message& res, std::string_view content_type, const ResponseWriter::Headers& headers,
                bool keep_alive) {
  res.set(http::field::server, "cairn");
  if (!content_type.empty()) {
    res.set(http::field::content_type,
            beast::string_view(content_type.data(), content_type.size()));
  }
  for (const auto& [name, value] : headers) {
    if (!IsFramingHeader(name)) res.insert(name, value);
  }
  res.keep_alive(keep_alive);
}

}  // namespace

// The response being written: a whole one, or a stream and its pieces.
struct Session::Out {
  bool head = false;
  std::shared_ptr<ResponseWriter::Producer> producer;  // streams
  std::vector<ReadBuffer> pieces;                      // produced, not yet written
  size_t queued = 0;  // bytes in `pieces` (not those being written)
  bool writing = false;
  bool producing = false;
  bool produced_all = false;
  bool ended = false;  // the last chunk is written or being written
};

Session::Session(HttpServer::Impl* server, tcp::socket socket, uint64_t id, std::string peer,
                 std::string address)
    : server_(server),
      options_(server->options()),
      stream_(std::move(socket), server->ssl_ctx().native_handle()),
      id_(id),
      peer_(std::move(peer)),
      address_(std::move(address)),
      timer_(stream_.get_executor()) {}

void Session::SetDeadline(std::chrono::milliseconds d) {
  deadline_ = Clock::now() + d;
  if (deadline_ < armed_) ArmTimer(deadline_);
}

void Session::ArmTimer(Clock::time_point at) {
  armed_ = at;
  timer_.expires_at(at);  // a wait in progress ends (its generation is old)
  timer_.async_wait([self = shared_from_this(), generation = ++timer_generation_](error_code ec) {
    if (!ec) self->OnTimer(generation);
  });
}

void Session::OnTimer(uint64_t generation) {
  if (generation != timer_generation_ || closed_) return;
  armed_ = Clock::time_point::max();
  if (Clock::now() >= deadline_) {
    // The operation in flight fails; its handler sees timed_out_.
    timed_out_ = true;
    error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.socket().close(ignored);
  } else if (deadline_ != Clock::time_point::max()) {
    ArmTimer(deadline_);
  }
}

void Session::Start() {
  asio::dispatch(stream_.get_executor(), [self = shared_from_this()] {
    if (self->closed_) return;
    if (!self->stream_.valid()) return self->Abort();
    self->SetDeadline(self->options_.handshake_timeout);
    self->stream_.async_handshake([self](error_code ec) { self->OnHandshake(ec); });
  });
}

void Session::CloseIfIdle() {
  asio::post(stream_.get_executor(), [self = shared_from_this()] {
    if (!self->handling_) self->Abort();
  });
}

void Session::CloseNow() {
  asio::post(stream_.get_executor(), [self = shared_from_this()] { self->Abort(); });
}

void Session::OnHandshake(error_code ec) {
  if (ec) {
    if (timed_out_) server_->CountBadRequest();
    return Abort();
  }
  // The first request must follow at once.
  SetDeadline(options_.header_timeout);
  StartHeader();
}

void Session::ReadNextRequest() {
  if (buffer_.size() > 0) {  // pipelined
    SetDeadline(options_.header_timeout);
    return StartHeader();
  }
  SetDeadline(options_.idle_timeout);
  stream_.async_read_some(buffer_.prepare(4096),
                          [self = shared_from_this()](error_code ec, size_t n) {
                            if (ec) return self->Abort();
                            self->buffer_.commit(n);
                            self->SetDeadline(self->options_.header_timeout);
                            self->StartHeader();
                          });
}

void Session::StartHeader() {
  parser_.emplace();
  parser_->header_limit(static_cast<uint32_t>(
      std::min<size_t>(options_.max_header_bytes, std::numeric_limits<uint32_t>::max())));
  // No route takes more; the Admitter lowers it per request.
  parser_->body_limit(options_.max_body_bytes);
  http::async_read_header(
      stream_, buffer_, *parser_,
      [self = shared_from_this()](error_code ec, size_t) { self->OnHeader(ec); });
}

void Session::FailRead(error_code ec) {
  if (ec == http::error::header_limit) return Reject(431, "request header too large");
  if (ec == http::error::body_limit) return Reject(413, "request body too large");
  if (timed_out_) {
    server_->CountBadRequest();
    return Abort();
  }
  if (ec.category() == http::make_error_code(http::error::bad_target).category() &&
      ec != http::error::end_of_stream && ec != http::error::partial_message) {
    return Reject(400, "malformed request");
  }
  Abort();  // the client went away
}

void Session::OnHeader(error_code ec) {
  if (closed_) return;
  if (ec) return FailRead(ec);
  const auto& message = parser_->get();
  request_ = HttpRequest();
  request_.method = std::string(message.method_string());
  request_.target = std::string(message.target());
  if (!DecodeRequestTarget(request_.target, &request_.path, &request_.query)) {
    return Reject(400, "malformed request target");
  }
  for (const auto& field : message) {
    std::string name = AsciiLower(std::string(field.name_string()));
    auto [it, inserted] = request_.headers.emplace(name, std::string(field.value()));
    if (!inserted) it->second += ", " + std::string(field.value());
  }
  request_.peer = peer_;
  request_.peer_address = address_;
  request_.connection = id_;
  keep_alive_ = message.keep_alive();

  Admission a = server_->Admit(request_);
  if (a.status != 0) return RejectWith(a);
  handling_ = true;  // the tenant's slot is held from here
  tenant_ = a.tenant;
  tenant_held_ = true;
  request_.tenant = a.tenant;
  if (a.authenticated) server_->MarkAuthenticated(id_);
  auto length = parser_->content_length();
  if (length && *length > a.max_body) {
    ReleaseRequest();
    return Reject(413, "request body too large for this request");
  }
  parser_->body_limit(a.max_body);
  // Into kept memory (the body's reader reserves the length, which leaves
  // a large enough capacity as it is).
  if (length && *length > 0) parser_->get().body() = server_->TakeBody(*length);
  SetDeadline(options_.request_timeout);
  http::async_read(stream_, buffer_, *parser_,
                   [self = shared_from_this()](error_code e, size_t) { self->OnBody(e); });
}

void Session::OnBody(error_code ec) {
  if (closed_) {
    ReleaseRequest();
    return;
  }
  if (ec) {
    ReleaseRequest();
    return FailRead(ec);
  }
  request_.body = std::move(parser_->get().body());
  parser_.reset();
  ClearDeadline();
  server_->CountRequest();
  dispatched_ = server_->Dispatch(shared_from_this(), std::move(request_), keep_alive_);
  if (!dispatched_) {
    ReleaseRequest();
    Abort();
  }
}

void Session::Deliver(std::optional<Response> response, bool head, bool keep_alive) {
  asio::post(stream_.get_executor(), [self = shared_from_this(), response = std::move(response),
                                      head, keep_alive]() mutable {
    if (self->closed_ || !response) {
      self->FinishRequest(false);
      return self->Abort();
    }
    self->keep_alive_ = self->keep_alive_ && keep_alive;
    self->StartResponse(std::move(*response), head);
  });
}

void Session::StartResponse(Response r, bool head) {
  out_ = std::make_shared<Out>();
  out_->head = head;
  auto self = shared_from_this();
  SetDeadline(options_.write_timeout);
  if (!r.producer) {
    auto res = std::make_shared<http::response<http::vector_body<uint8_t>>>(
        static_cast<http::status>(r.status), 11);
    FillHeader(*res, r.content_type, r.headers, keep_alive_);
    res->body() = std::move(r.body);
    res->prepare_payload();
    auto done = [self, res](error_code ec, size_t) {
      if (ec) self->Abort();
      self->FinishRequest(!ec);
    };
    if (head) {
      auto sr = std::make_shared<http::response_serializer<http::vector_body<uint8_t>>>(*res);
      http::async_write_header(stream_, *sr, [sr, done](error_code ec, size_t n) { done(ec, n); });
    } else {
      http::async_write(stream_, *res, done);
    }
    return;
  }
  out_->producer = std::make_shared<ResponseWriter::Producer>(std::move(r.producer));
  auto header =
      std::make_shared<http::response<http::empty_body>>(static_cast<http::status>(r.status), 11);
  FillHeader(*header, r.content_type, r.headers, keep_alive_);
  header->chunked(true);
  auto sr = std::make_shared<http::response_serializer<http::empty_body>>(*header);
  http::async_write_header(stream_, *sr, [self, header, sr, o = out_](error_code ec, size_t) {
    if (ec) {
      self->Abort();
      return self->FinishRequest(false);
    }
    if (o->head) return self->FinishRequest(true);  // no body for HEAD
    self->PumpStream();
  });
}

void Session::PumpStream() {
  if (closed_) return FinishRequest(false);
  if (!handling_ || out_ == nullptr) return;
  std::shared_ptr<Out> o = out_;
  if (!o->writing && !o->pieces.empty()) {
    // Everything produced goes out as one HTTP chunk, each piece from its
    // own buffer; the next pieces are produced meanwhile.
    o->writing = true;
    auto sending = std::make_shared<std::vector<ReadBuffer>>(std::move(o->pieces));
    o->pieces.clear();
    o->queued = 0;
    std::vector<asio::const_buffer> buffers;
    for (const ReadBuffer& p : *sending) buffers.emplace_back(p.data(), p.size());
    SetDeadline(options_.write_timeout);
    asio::async_write(stream_, http::make_chunk(buffers), TransferLarge(),
                      [self = shared_from_this(), sending, o](error_code ec, size_t) {
                        o->writing = false;
                        for (ReadBuffer& b : *sending) {
                          if (self->spare_.size() >= kSpareBuffers) break;
                          // Only chunk-sized ones: a frame header's small
                          // buffer taken for a chunk would grow afresh.
                          if (b.capacity() < kMinSpareCapacity) continue;
                          self->spare_.push_back(std::move(b));
                        }
                        if (ec || self->out_ != o) {
                          self->Abort();
                          return self->FinishRequest(false);
                        }
                        self->PumpStream();
                      });
  }
  if (!o->producing && !o->produced_all && o->queued < ResponseWriter::kStreamWindow) Produce();
  if (o->produced_all && o->pieces.empty() && !o->writing && !o->ended) {
    o->ended = true;
    o->writing = true;
    SetDeadline(options_.write_timeout);
    asio::async_write(stream_, http::make_chunk_last(), TransferLarge(),
                      [self = shared_from_this(), o](error_code ec, size_t) {
                        o->writing = false;
                        if (ec) self->Abort();
                        self->FinishRequest(!ec);
                      });
  }
}

void Session::Produce() {
  std::shared_ptr<Out> o = out_;
  o->producing = true;
  std::shared_ptr<ResponseWriter::Producer> producer = o->producer;
  auto self = shared_from_this();
  auto out = std::make_shared<ResponseWriter::StreamPieces>();
  out->spare = std::move(spare_);
  spare_.clear();
  bool queued = server_->PushJob(tenant_, [self, producer, o, out] {
    bool done = false;
    Status s;
    try {
      s = (*producer)(out.get(), &done);
    } catch (...) {
      s = InternalError("the response stream's producer threw");
    }
    asio::post(self->stream_.get_executor(), [self, o, out, done, s] {
      o->producing = false;
      // Buffers the producer did not use go back for the next call.
      for (ReadBuffer& b : out->spare) {
        if (self->spare_.size() >= kSpareBuffers) break;
        self->spare_.push_back(std::move(b));
      }
      if (self->closed_ || !s.ok() || self->out_ != o) {
        self->Abort();
        return self->FinishRequest(false);
      }
      for (ReadBuffer& piece : out->pieces) {
        if (piece.empty()) continue;
        o->queued += piece.size();
        o->pieces.push_back(std::move(piece));
      }
      if (done) {
        o->produced_all = true;
        o->producer.reset();  // what it holds goes now
      }
      self->PumpStream();
    });
  });
  if (!queued) {
    o->producing = false;
    Abort();
    FinishRequest(false);
  }
}

bool Session::ReleaseRequest() {
  if (!handling_) return false;
  handling_ = false;
  if (tenant_held_) {
    tenant_held_ = false;
    server_->ReleaseTenant(tenant_);
  }
  if (dispatched_) {  // counted in flight by Dispatch
    dispatched_ = false;
    server_->RequestDone();
  }
  if (out_ != nullptr) out_->producer.reset();
  out_.reset();
  return true;
}

void Session::FinishRequest(bool reusable) {
  if (!ReleaseRequest() || closed_) return;
  if (reusable && keep_alive_ && !server_->stopping()) {
    ReadNextRequest();
  } else {
    Shutdown();
  }
}

void Session::Reject(int status, std::string_view text) {
  server_->CountBadRequest();
  auto res =
      std::make_shared<http::response<http::string_body>>(static_cast<http::status>(status), 11);
  res->set(http::field::content_type, "text/plain; charset=utf-8");
  res->body() = std::string(text) + "\n";
  WriteAndLinger(res);
}

void Session::RejectWith(const Admission& a) {
  server_->CountRefused();
  auto res =
      std::make_shared<http::response<http::string_body>>(static_cast<http::status>(a.status), 11);
  res->set(http::field::content_type, a.content_type);
  for (const auto& [name, value] : a.headers) {
    if (!IsFramingHeader(name)) res->insert(name, value);
  }
  res->body() = a.body;
  WriteAndLinger(res);
}

// Writes `res` and closes: the body that may follow the header is never
// read (LingerClose discards what arrives for a moment).
void Session::WriteAndLinger(std::shared_ptr<http::response<http::string_body>> res) {
  res->set(http::field::server, "cairn");
  res->keep_alive(false);
  res->prepare_payload();
  SetDeadline(options_.write_timeout);
  http::async_write(stream_, *res, [self = shared_from_this(), res](error_code ec, size_t) {
    if (ec) return self->Abort();
    self->LingerClose();
  });
}

// After an error response the client may still be sending: stop writing
// and discard what arrives for a moment, so that closing with unread data
// (a TCP reset) does not destroy the response before it is read.
void Session::LingerClose() {
  error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  SetDeadline(kLingerTime);
  buffer_.clear();
  DrainSome(kLingerBytes);
}

void Session::DrainSome(size_t budget) {
  stream_.socket().async_read_some(buffer_.prepare(16384),
                           [self = shared_from_this(), budget](error_code ec, size_t n) {
                             if (ec || n >= budget) return self->Abort();
                             self->DrainSome(budget - n);
                           });
}

void Session::Shutdown() {
  SetDeadline(
      std::min<std::chrono::milliseconds>(options_.write_timeout, kMaxShutdownTime));
  stream_.async_shutdown([self = shared_from_this()](error_code) { self->Abort(); });
}

void Session::Abort() {
  if (closed_) return;
  closed_ = true;
  if (out_ != nullptr) out_->producer.reset();
  error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream_.socket().close(ignored);
  timer_.cancel();  // its wait holds this session
}

}  // namespace cairn::net
