// The training loop, written once for every kind of run: the single process and each rank
// of a distributed job go through run_loop with their Trainer. Rank 0 prints the log and
// writes metrics; checkpoints and preemption are handled here for all ranks alike.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/store.hpp"
#include "engine/spec/job_spec.hpp"
#include "engine/train/data.hpp"
#include "engine/train/step_runner.hpp"

namespace holmes::train {

// Where the loop runs. Default: one process.
struct LoopContext {
  int rank = 0;
  int world = 1;
  int nodes = 1;
  // Collective over all ranks: the element-wise maximum of `v` (identity when empty = single
  // process). The loop calls it once per step on every rank with the step's job-wide figures
  // packed together (memory, communication share, stop signal).
  std::function<std::vector<double>(std::vector<double>)> max_over_ranks;
  std::shared_ptr<comm::Store> store;  // job store for coordination (checkpoints); null when single
  std::string plan_text;               // what the run runs under (for checkpoint manifests)
  uint64_t plan_hash = 0;
};

// Explicit parallel degrees (those not auto) must be able to make a job of `world`
// processes: their product equals `world`, or divides it when some degree is auto. Else a
// UserError naming the parallel.* keys, the world size and `launched` (how the processes
// were started, e.g. "--nproc-per-node 3 on 1 node(s)").
void check_degrees_fit(const spec::JobSpec& spec, int world, const std::string& launched);

// Trains `trainer` for spec.train.steps steps. Returns the process exit code.
int run_loop(const spec::JobSpec& spec, StepRunner& trainer, const DataSet& data, const LoopContext& ctx);

// Single-process training of `spec` (tp = pp = dp = 1) with logging, validation,
// metrics.jsonl and the final weights in <output_dir>/final. Returns the exit code. Throws
// UserError on bad input.
int run_training(const spec::JobSpec& spec);

}  // namespace holmes::train
