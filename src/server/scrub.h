// PathScrubber: takes the server's own paths out of what clients and task
// logs see. Error messages of the datastore code name files by path
// ("chunk 3f2a… missing from store /srv/cairn/main"); a client knows the
// datastore as https://…/NAME and has no business learning the server's
// layout. Every error answer of the API and every line of a task's log and
// status goes through Scrub.
//
// Thread safety: immutable after construction; Scrub may be called
// concurrently.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cairn::server {

class PathScrubber {
 public:
  // Adds `path` (and its canonical form, when it differs) to be shown as
  // `shown`. Longer paths are replaced first, so a datastore inside the
  // state directory is named as the datastore.
  void Add(const std::string& path, std::string shown);
  std::string Scrub(std::string_view text) const;

 private:
  std::vector<std::pair<std::string, std::string>> paths_;  // longest first
};

}  // namespace cairn::server
