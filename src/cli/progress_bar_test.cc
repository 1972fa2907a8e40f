#include "cli/progress_bar.h"

#include <cstdio>

#include <gtest/gtest.h>

namespace cairn::cli {
namespace {

TEST(ProgressBarTest, RendersBytesRateEtaAndReads) {
  std::string line = ProgressBar::Render("restore", uint64_t{1} << 30, uint64_t{2} << 30,
                                         512.0 * (1 << 20), 12);
  EXPECT_NE(line.find("restore"), std::string::npos) << line;
  EXPECT_NE(line.find("[############............]"), std::string::npos) << line;
  EXPECT_NE(line.find(" 50%"), std::string::npos) << line;
  EXPECT_NE(line.find("1.0 GiB / 2.0 GiB"), std::string::npos) << line;
  EXPECT_NE(line.find("512 MiB/s"), std::string::npos) << line;
  EXPECT_NE(line.find("ETA 0:02"), std::string::npos) << line;
  EXPECT_NE(line.find("reads in flight 12"), std::string::npos) << line;
}

TEST(ProgressBarTest, ShowsTheCurrentBottleneck) {
  std::string line = ProgressBar::Render("restore", 1, 2, 1, 4, "target writes");
  EXPECT_NE(line.find("limit: target writes"), std::string::npos) << line;
  EXPECT_EQ(ProgressBar::Render("restore", 1, 2, 1, 4).find("limit:"), std::string::npos);
}

TEST(ProgressBarTest, UnknownRateHasNoEtaAndDoneIsFull) {
  std::string line = ProgressBar::Render("scan", 0, 100, 0, 0);
  EXPECT_NE(line.find("ETA --:--"), std::string::npos) << line;
  EXPECT_EQ(line.find("reads in flight"), std::string::npos) << line;
  line = ProgressBar::Render("scan", 100, 100, 1, 0);
  EXPECT_NE(line.find("100%"), std::string::npos) << line;
}

TEST(ProgressBarTest, DrawsWhileAliveAndErasesAtTheEnd) {
  pipeline::Progress progress;
  progress.StartPhase("restore", 1000);
  progress.Add(500);
  char* buf = nullptr;
  size_t size = 0;
  FILE* out = open_memstream(&buf, &size);
  ASSERT_NE(out, nullptr);
  {
    ProgressBar bar(progress, out, /*enabled=*/true);
    // Draws every 250 ms: six chances, so a bar thread woken late on a
    // loaded machine (TSan, two tests per core) still draws before the end.
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  }
  std::fclose(out);
  std::string text(buf, size);
  free(buf);
  EXPECT_NE(text.find("50%"), std::string::npos) << text;
  EXPECT_TRUE(text.ends_with("\r\033[K")) << text;
}

TEST(ProgressBarTest, DisabledDrawsNothing) {
  pipeline::Progress progress;
  progress.StartPhase("restore", 10);
  char* buf = nullptr;
  size_t size = 0;
  FILE* out = open_memstream(&buf, &size);
  { ProgressBar bar(progress, out, /*enabled=*/false); }
  std::fclose(out);
  EXPECT_EQ(size, 0u);
  free(buf);
}

}  // namespace
}  // namespace cairn::cli
