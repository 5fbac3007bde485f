// `holmes-train calibrate`'s compute table (engine/topo/calibration_tables.hpp): the job's
// model timed on this process's device with the project's own model and kernels, one tensor
// parallel slice at a time (a tp rank's shard with its sums left out: the communication is
// measured apart), for every slice, micro-batch and recompute mode the planner may pick.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "engine/spec/job_spec.hpp"
#include "engine/topo/calibration_tables.hpp"
#include "model/backend.hpp"

namespace holmes::tools {

struct ComputeSweep {
  std::vector<int> tp;            // tensor-parallel slices
  std::vector<int> micro_batches;
  std::vector<std::string> recompute = {"none", "selective", "full"};
  int reps = 3;                   // timed runs of each pass after one untimed; the least is kept
};

// The slices a search may pick on a node of `devices` devices (the degrees that divide the
// model's heads, key/value heads and MLP, up to the devices), and micro-batches: the spec's, or
// for auto 1, 2, 4, 8 and 16 that divide the global batch.
ComputeSweep default_sweep(const spec::JobSpec& spec, int devices);

// The table of this device: every layer row of the sweep at the spec's sequence length, the
// embedding and head rows, each block GEMM and the head's, attention, the optimizer, memory
// copies and, on a GPU, host copies and a kernel launch. `say` gets a line per row measured.
topo::ComputeTable measure_compute(const spec::JobSpec& spec, model::Backend& backend, const ComputeSweep& sweep,
                                   const std::function<void(const std::string&)>& say);

}  // namespace holmes::tools
