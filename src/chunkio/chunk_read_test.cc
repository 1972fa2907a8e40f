#include "chunkio/chunk_read.h"

#include <gtest/gtest.h>

#include "blob/blob.h"
#include "tests/unit_test_util.h"

namespace cairn::chunkio {
namespace {

// The one rule for reads in flight: the controller's ceiling is the
// source's (or --jobs N when larger), and the pipeline has as many I/O
// threads, so the ceiling can be reached (restore once capped them at
// max(64, jobs) while an object store's controller went to 128).
TEST(ReadRuleTest, IoThreadsFollowTheControllersCeiling) {
  struct Case {
    const char* what;
    store::SourceTraits traits;
    int jobs;
    bool adaptive;
    int initial, max;
  };
  const store::SourceTraits local{store::MediumKind::kFlash, 2, "local", 64};
  const store::SourceTraits s3{store::MediumKind::kNetwork, 16, "s3", 128};
  for (const Case& c : {Case{"local, adaptive", local, 0, true, 2, 64},
                        Case{"local, --jobs 4", local, 4, false, 4, 64},
                        Case{"local, --jobs 100", local, 100, false, 100, 100},
                        Case{"object store, adaptive", s3, 0, true, 16, 128},
                        Case{"object store, --jobs 200", s3, 200, false, 200, 200}}) {
    const pipeline::ConcurrencyController::Options o = ReadConcurrency(c.traits, c.jobs);
    EXPECT_EQ(o.adaptive, c.adaptive) << c.what;
    EXPECT_EQ(o.initial, c.initial) << c.what;
    EXPECT_EQ(o.max, c.max) << c.what;
    pipeline::ConcurrencyController controller(o);
    const pipeline::FetchPipelineOptions p = ReadPipelineOptions(c.traits, c.jobs, &controller);
    EXPECT_EQ(p.max_io_threads, c.max) << c.what;
    EXPECT_EQ(p.controller, &controller) << c.what;
  }
}

TEST(FetchCheckedTest, ChecksIdAndLength) {
  const Bytes plain = test_util::RandomBytes(3000, 5);
  const crypto::Digest id = crypto::Sha256(plain);
  auto stored = blob::Encode(plain);
  CAIRN_ASSERT_OK(stored);
  pipeline::StageMeter meter;
  auto good = CheckFetchedChunk(*stored, id, 3000, nullptr, &meter);
  CAIRN_ASSERT_OK(good);
  EXPECT_EQ(Bytes(good->begin(), good->end()), plain);
  EXPECT_GT(meter.Sample().busy_ns[static_cast<int>(pipeline::Stage::kDecode)], 0);

  auto short_index = CheckFetchedChunk(*stored, id, 2999, nullptr, nullptr);
  EXPECT_EQ(short_index.status().code(), StatusCode::kDataLoss);
  crypto::Digest other = id;
  other[0] ^= 1;
  auto wrong_id = CheckFetchedChunk(*stored, other, 3000, nullptr, nullptr);
  EXPECT_EQ(wrong_id.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(std::string(wrong_id.status().message()).find(crypto::DigestHex(other)),
            std::string::npos);
}

}  // namespace
}  // namespace cairn::chunkio
