#include "s3/s3_xml.h"

#include <cstdint>

#include <fmt/format.h>

#include "base/markup.h"

namespace cairn::s3 {
namespace {

bool IsNameChar(char c) {
  auto u = static_cast<unsigned char>(c);
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
         c == '_' || c == '-' || c == '.' || c == ':' || u >= 0x80;
}

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// XML 1.0 Char production.
bool IsXmlChar(uint32_t cp) {
  return cp == 0x9 || cp == 0xA || cp == 0xD || (cp >= 0x20 && cp <= 0xD7FF) ||
         (cp >= 0xE000 && cp <= 0xFFFD) || (cp >= 0x10000 && cp <= 0x10FFFF);
}

Result<uint32_t> ParseCharRef(std::string_view ref) {  // "#65" or "#x41"
  int base = 10;
  ref.remove_prefix(1);
  if (!ref.empty() && ref[0] == 'x') {
    base = 16;
    ref.remove_prefix(1);
  }
  if (ref.empty() || ref.size() > 8) return InvalidArgumentError("bad character reference");
  uint32_t cp = 0;
  for (char c : ref) {
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (base == 16 && c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else if (base == 16 && c >= 'A' && c <= 'F') {
      d = c - 'A' + 10;
    } else {
      return InvalidArgumentError("bad character reference");
    }
    cp = cp * static_cast<uint32_t>(base) + static_cast<uint32_t>(d);
  }
  if (!IsXmlChar(cp)) return InvalidArgumentError(fmt::format("character reference U+{:X} is not allowed", cp));
  return cp;
}

class Parser {
 public:
  explicit Parser(std::string_view doc) : doc_(doc) {}

  Result<XmlElement> Document() {
    CAIRN_RETURN_IF_ERROR(SkipMisc());
    if (pos_ >= doc_.size() || doc_[pos_] != '<') return Error("no root element");
    XmlElement root;
    CAIRN_RETURN_IF_ERROR(Element(&root, 1));
    CAIRN_RETURN_IF_ERROR(SkipMisc());
    if (pos_ != doc_.size()) return Error("content after the root element");
    return root;
  }

 private:
  Status Error(std::string_view what) const {
    return InvalidArgumentError(fmt::format("malformed XML at byte {}: {}", pos_, what));
  }

  bool StartsWith(std::string_view s) const { return doc_.substr(pos_).starts_with(s); }

  // Skips from the current position past `end`; false when it is missing.
  bool SkipPast(std::string_view end) {
    size_t at = doc_.find(end, pos_);
    if (at == std::string_view::npos) return false;
    pos_ = at + end.size();
    return true;
  }

  // Whitespace, comments and processing instructions outside the root.
  Status SkipMisc() {
    while (true) {
      while (pos_ < doc_.size() && IsSpace(doc_[pos_])) ++pos_;
      if (StartsWith("<?")) {
        if (!SkipPast("?>")) return Error("unterminated processing instruction");
      } else if (StartsWith("<!--")) {
        if (!SkipPast("-->")) return Error("unterminated comment");
      } else if (StartsWith("<!")) {
        return Error("DOCTYPE and declarations are not accepted");
      } else {
        return Status::Ok();
      }
    }
  }

  std::string_view Name() {
    size_t start = pos_;
    while (pos_ < doc_.size() && IsNameChar(doc_[pos_])) ++pos_;
    return doc_.substr(start, pos_ - start);
  }

  // At '<' of a start tag; parses through the matching end tag.
  Status Element(XmlElement* out, int depth) {
    if (depth > kMaxXmlDepth) return Error("nesting too deep");
    ++pos_;  // '<'
    std::string_view name = Name();
    if (name.empty()) return Error("element without a name");
    out->name = std::string(name);
    // Attributes: skipped, but their quoted values may hold '>' or '/'.
    while (true) {
      if (pos_ >= doc_.size()) return Error("unterminated start tag");
      char c = doc_[pos_];
      if (c == '"' || c == '\'') {
        size_t close = doc_.find(c, pos_ + 1);
        if (close == std::string_view::npos) return Error("unterminated attribute value");
        pos_ = close + 1;
      } else if (c == '>') {
        ++pos_;
        break;
      } else if (c == '/') {
        if (!StartsWith("/>")) return Error("stray '/' in start tag");
        pos_ += 2;
        return Status::Ok();
      } else if (c == '<') {
        return Error("'<' in start tag");
      } else {
        ++pos_;
      }
    }
    return Content(out, depth);
  }

  Status Content(XmlElement* out, int depth) {
    while (true) {
      size_t lt = doc_.find('<', pos_);
      if (lt == std::string_view::npos) {
        return Error(fmt::format("element <{}> is not closed", out->name));
      }
      if (lt > pos_) {
        auto text = DecodeXmlEntities(doc_.substr(pos_, lt - pos_));
        if (!text.ok()) return Error(text.status().message());
        out->text += *text;
        pos_ = lt;
      }
      if (StartsWith("</")) {
        pos_ += 2;
        std::string_view name = Name();
        while (pos_ < doc_.size() && IsSpace(doc_[pos_])) ++pos_;
        if (name != out->name || pos_ >= doc_.size() || doc_[pos_] != '>') {
          return Error(fmt::format("expected </{}>", out->name));
        }
        ++pos_;
        return Status::Ok();
      } else if (StartsWith("<!--")) {
        if (!SkipPast("-->")) return Error("unterminated comment");
      } else if (StartsWith("<![CDATA[")) {
        size_t start = pos_ + 9;
        if (!SkipPast("]]>")) return Error("unterminated CDATA section");
        out->text.append(doc_.substr(start, pos_ - 3 - start));
      } else if (StartsWith("<?")) {
        if (!SkipPast("?>")) return Error("unterminated processing instruction");
      } else if (StartsWith("<!")) {
        return Error("declaration inside an element");
      } else {
        out->children.emplace_back();
        CAIRN_RETURN_IF_ERROR(Element(&out->children.back(), depth + 1));
      }
    }
  }

  std::string_view doc_;
  size_t pos_ = 0;
};

}  // namespace

const XmlElement* XmlElement::Child(std::string_view child_name) const {
  for (const XmlElement& c : children) {
    if (c.name == child_name) return &c;
  }
  return nullptr;
}

std::string XmlElement::ChildText(std::string_view child_name) const {
  const XmlElement* c = Child(child_name);
  return c ? c->text : std::string();
}

std::vector<const XmlElement*> XmlElement::Children(std::string_view child_name) const {
  std::vector<const XmlElement*> out;
  for (const XmlElement& c : children) {
    if (c.name == child_name) out.push_back(&c);
  }
  return out;
}

Result<XmlElement> ParseXml(std::string_view document) { return Parser(document).Document(); }

Result<std::string> DecodeXmlEntities(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    char c = text[i];
    if (c == '<') return InvalidArgumentError("'<' in text");
    if (c != '&') {
      out.push_back(c);
      ++i;
      continue;
    }
    size_t semi = text.find(';', i);
    if (semi == std::string_view::npos || semi - i > 12) {
      return InvalidArgumentError("unterminated entity reference");
    }
    std::string_view ref = text.substr(i + 1, semi - i - 1);
    if (ref == "amp") {
      out.push_back('&');
    } else if (ref == "lt") {
      out.push_back('<');
    } else if (ref == "gt") {
      out.push_back('>');
    } else if (ref == "quot") {
      out.push_back('"');
    } else if (ref == "apos") {
      out.push_back('\'');
    } else if (!ref.empty() && ref[0] == '#') {
      CAIRN_ASSIGN_OR_RETURN(uint32_t cp, ParseCharRef(ref));
      AppendUtf8(cp, &out);
    } else {
      return InvalidArgumentError(fmt::format("unknown entity &{};", ref));
    }
    i = semi + 1;
  }
  return out;
}

std::string EscapeXml(std::string_view text) { return EscapeMarkup(text); }

}  // namespace cairn::s3
