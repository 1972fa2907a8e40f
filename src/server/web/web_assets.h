// The dashboard's static files (src/server/web/assets/), compiled into the
// binary by a CMake step (src/server/web/embed_assets.cmake writes
// web_assets.cc in the build tree): the server reads no file to serve them
// and needs no network, and building them takes no toolchain but CMake.
#pragma once

#include <string_view>

namespace cairn::server {

struct WebAsset {
  std::string_view name;          // "app.js"
  std::string_view content_type;  // "text/javascript; charset=utf-8"
  std::string_view data;
};

// The asset called `name`, or null.
const WebAsset* FindWebAsset(std::string_view name);

}  // namespace cairn::server
