// The training loop, written once for every kind of run: the single process and each rank
// of a distributed job go through run_loop with their Trainer. Rank 0 prints the log and
// writes metrics; checkpoints and preemption are handled here for all ranks alike.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/train/loop_context.hpp"
#include "engine/spec/job_spec.hpp"
#include "engine/data/data.hpp"
#include "engine/train/step_runner.hpp"

namespace holmes::train {


// Trains `trainer` for spec.train.steps steps. Returns the process exit code.
int run_loop(const spec::JobSpec& spec, StepRunner& trainer, const DataSet& data, const LoopContext& ctx);

// Single-process training of `spec` (tp = pp = dp = 1) with logging, validation,
// metrics.jsonl and the final weights in <output_dir>/final. Returns the exit code. Throws
// UserError on bad input.
int run_training(const spec::JobSpec& spec);

}  // namespace holmes::train
