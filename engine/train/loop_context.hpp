// Where the training loop runs (run.hpp): which rank, how many, the job-wide collective and
// the store the checkpoint code coordinates through. Its own header so that the loop and its
// checkpoint steps (checkpoint_loop.hpp) both include it without including each other.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/store.hpp"

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
  std::string plan_json;               // rank 0 writes it to <output_dir>/plan.json (the run report reads it)
};

}  // namespace holmes::train
