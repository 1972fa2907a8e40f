// A tiny XML reader for the few S3 response bodies cairn reads
// (ListBucketResult, DeleteResult, Error).
//
// It parses the whole body into a tree of elements (name, decoded text,
// children) and refuses anything it does not understand rather than guess:
// unbalanced or mismatched tags, text outside the root, '<' or a bare '&' in
// text, unknown entities, DOCTYPE (so no entity expansion), nesting deeper
// than kMaxDepth. Handled: the <?xml?> declaration, comments, CDATA,
// attributes (skipped), self-closing tags, and the entities &amp; &lt; &gt;
// &quot; &apos; &#N; &#xN; (encoded as UTF-8). Names keep any namespace
// prefix; S3 uses a default namespace only.
//
// Why not libxml2: these bodies are small and flat, we need six element
// names, and a 200-line reader with its own tests is less to audit than a
// general parser with DTD and network features to turn off.
//
// Thread safety: value types and pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace cairn::s3 {

inline constexpr int kMaxXmlDepth = 32;

struct XmlElement {
  std::string name;
  std::string text;  // the element's own text, entities decoded, concatenated
  std::vector<XmlElement> children;

  // The first child named `name`, or null.
  const XmlElement* Child(std::string_view child_name) const;
  // The first child's text, or "" when there is no such child.
  std::string ChildText(std::string_view child_name) const;
  std::vector<const XmlElement*> Children(std::string_view child_name) const;
};

// Parses a document; InvalidArgument says what is wrong and at which byte.
Result<XmlElement> ParseXml(std::string_view document);

// Decodes the five named entities and numeric references in `text`;
// InvalidArgument for an unknown or unterminated one, or a code point that
// is not a valid XML character.
Result<std::string> DecodeXmlEntities(std::string_view text);

// Escapes & < > " ' for text and attribute values.
std::string EscapeXml(std::string_view text);

}  // namespace cairn::s3
