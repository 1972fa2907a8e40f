// Fuzz target for the S3 client's XML reader and the response parsers built
// on it (src/s3/s3_xml.h, s3_protocol.h): the bytes come from an object
// store, which cairn does not trust. Every parser must return a value or an
// error, never crash; and what it accepts must survive a round trip: the
// text of every element, escaped and parsed again, gives the same text.
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "s3/s3_protocol.h"
#include "s3/s3_xml.h"

#define FUZZ_CHECK(cond)                                                 \
  do {                                                                   \
    if (!(cond)) {                                                       \
      __builtin_fprintf(stderr, "s3_xml_fuzz: invariant failed: %s\n", #cond);   \
      std::abort();                                                      \
    }                                                                    \
  } while (0)

namespace {

using cairn::s3::XmlElement;

// Every element's text, escaped into a one-element document, parses back to
// the same text.
void CheckRoundTrip(const XmlElement& e, int depth) {
  FUZZ_CHECK(depth <= cairn::s3::kMaxXmlDepth);
  auto again = cairn::s3::ParseXml("<t>" + cairn::s3::EscapeXml(e.text) + "</t>");
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->text == e.text);
  for (const XmlElement& child : e.children) CheckRoundTrip(child, depth + 1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view doc(reinterpret_cast<const char*>(data), size);
  auto tree = cairn::s3::ParseXml(doc);
  if (tree.ok()) CheckRoundTrip(*tree, 1);
  auto page = cairn::s3::ParseListObjectsV2(doc);
  if (page.ok() && page->is_truncated) FUZZ_CHECK(!page->next_continuation_token.empty());
  (void)cairn::s3::ParseDeleteResult(doc);
  (void)cairn::s3::ParseErrorBody(cairn::ByteSpan(data, size));
  (void)cairn::s3::DecodeXmlEntities(doc);
  return 0;
}
