#include "pipeline/bottleneck_json.h"

namespace cairn::pipeline {

nlohmann::json BottleneckJson(const Bottleneck& b) {
  if (!b.measured) return nullptr;
  nlohmann::json stages = nlohmann::json::object();
  for (int i = 0; i < kStageCount; ++i) {
    const auto stage = static_cast<Stage>(i);
    if (stage == Stage::kSourceReads) {
      // Summed over the reads in flight: their mean, not a share.
      stages[StageKey(stage)] = {{"seconds", b.share[i] * b.seconds},
                                 {"reads_in_flight", b.reads_in_flight}};
    } else {
      stages[StageKey(stage)] = {{"seconds", b.share[i] * b.seconds}, {"share", b.share[i]}};
    }
  }
  const char* key = b.stage == Stage::kReadWait ? "source_reads" : StageKey(b.stage);
  return {{"stage", key},
          {"name", b.Name()},
          {"cpu_bound", b.cpu_bound},
          {"line", b.Describe()},
          {"seconds", b.seconds},
          {"cpu", {{"share", b.cpu_share}, {"wait_share", b.cpu_wait_share}, {"cores", b.cores}}},
          {"other_share", b.other_share},
          {"stages", stages}};
}

}  // namespace cairn::pipeline
