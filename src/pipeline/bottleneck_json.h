// The `bottleneck` object of a run's --json report (restore, verify, backup,
// gc; docs/ARCHITECTURE.md, "The stage meter"): the stage, its name, the
// summary line, the CPU share and cores, and every stage's seconds and
// share. A gc task on the server keeps the same object in its report, so
// `cairn gc -r https://…` prints the line a local gc does.
#pragma once

#include <nlohmann/json.hpp>

#include "pipeline/stage_meter.h"

namespace cairn::pipeline {

// null when nothing was measured.
nlohmann::json BottleneckJson(const Bottleneck& b);

}  // namespace cairn::pipeline
