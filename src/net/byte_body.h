// A request body of bytes for Beast's parser.
//
// Beast 1.74's vector_body::reader::put takes `&body_[0]` of a vector that is still
// empty when a chunk of a chunked body is empty ("2\r\n" followed by nothing yet), which
// is undefined behaviour (UBSan stops on it; the request fuzzer found it). ByteBody is
// vector_body<uint8_t> with a reader that copies through data(), valid for every size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <boost/beast/core/buffers_range.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/vector_body.hpp>
#include <boost/optional.hpp>

namespace cairn::net {

struct ByteBody : boost::beast::http::vector_body<uint8_t> {
  class reader {
   public:
    template <bool isRequest, class Fields>
    reader(boost::beast::http::header<isRequest, Fields>&, value_type& body) : body_(body) {}

    void init(const boost::optional<std::uint64_t>& length, boost::beast::error_code& ec) {
      ec = {};
      if (!length) return;
      if (*length > body_.max_size()) {
        ec = boost::beast::http::error::buffer_overflow;
        return;
      }
      body_.reserve(static_cast<size_t>(*length));
    }

    template <class ConstBufferSequence>
    size_t put(const ConstBufferSequence& buffers, boost::beast::error_code& ec) {
      ec = {};
      const size_t n = boost::asio::buffer_size(buffers);
      if (n > body_.max_size() - body_.size()) {
        ec = boost::beast::http::error::buffer_overflow;
        return 0;
      }
      if (n == 0) return 0;
      // Appended, not resized then copied: no zero fill of what is overwritten.
      for (auto b : boost::beast::buffers_range_ref(buffers)) {
        const auto* p = static_cast<const uint8_t*>(b.data());
        body_.insert(body_.end(), p, p + b.size());
      }
      return n;
    }

    void finish(boost::beast::error_code& ec) { ec = {}; }

   private:
    value_type& body_;
  };
};

}  // namespace cairn::net
