// Escaping text for markup: one function for the S3 client's XML requests
// and the web dashboard's HTML pages.
#pragma once

#include <string>
#include <string_view>

namespace cairn {

// `text` with & < > " ' as entities (&amp; &lt; &gt; &quot; &apos;): safe
// as XML or HTML text and as a quoted attribute value.
std::string EscapeMarkup(std::string_view text);

}  // namespace cairn
