// `holmes-train calibrate`: measures what the planner prices a plan with, on this node's
// devices (or, launched as several workers, on every node's) and writes a calibration file
// (docs/cost-model.md, "Calibration tables") that records the device kind, the versions of
// the GPU stack and the date. No training loop: minutes on one node.
//
//   holmes-train calibrate --config job.yaml --out cal.yaml [--nproc-per-node N]
//
// One process measures the compute table of its device for the job's model (every tensor
// slice, micro-batch and recompute mode the search may pick); N workers also measure the
// collectives between them (and across nodes, per link class). --plan-only --set
// cluster.calibration=cal.yaml then prices with it, per term marked "measured".
#pragma once

#include <string>
#include <vector>

#include "engine/launch/launch_env.hpp"
#include "engine/spec/job_spec.hpp"

namespace holmes::tools {

struct CalibrateOptions {
  std::string out;                 // the file to write (its folder is made)
  int reps = 3;                    // timed runs of each measurement
  std::vector<int> tp;             // slices to time (empty: default_sweep's)
  std::vector<int> micro_batches;  // micro-batches to time (empty: default_sweep's)
};

// A worker (env.world_size > 1: collective over the job) or the only process. Returns the
// exit code; UserError for bad input, before anything is measured.
int run_calibrate(const spec::JobSpec& spec, const CalibrateOptions& o, const launch::LaunchEnv& env);

}  // namespace holmes::tools
