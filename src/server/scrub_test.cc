#include "server/scrub.h"

#include <gtest/gtest.h>

namespace cairn::server {
namespace {

TEST(PathScrubberTest, ServerPathsBecomeNames) {
  PathScrubber s;
  s.Add("/srv/cairn/main", "https://…/main");
  s.Add("/srv/cairn/main2/", "https://…/main2");
  s.Add("/var/lib/cairn", "<state directory>");
  s.Add("s3://bucket/prefix", "https://…/cloud");
  EXPECT_EQ(s.Scrub("chunk 3f missing from store /srv/cairn/main (twice: /srv/cairn/main)"),
            "chunk 3f missing from store https://…/main (twice: https://…/main)");
  EXPECT_EQ(s.Scrub("open /srv/cairn/main2/vm/1/x.blob: gone"),
            "open https://…/main2/vm/1/x.blob: gone");
  EXPECT_EQ(s.Scrub("/var/lib/cairn/tasks/ab.json"), "<state directory>/tasks/ab.json");
  EXPECT_EQ(s.Scrub("GET s3://bucket/prefix/.chunks/3f2: 500"),
            "GET https://…/cloud/.chunks/3f2: 500");
  EXPECT_EQ(s.Scrub("nothing to hide"), "nothing to hide");
}

}  // namespace
}  // namespace cairn::server
