// Entry of a training worker: one process of a job (world size 1 runs the single-process
// path). The multi-process path runs start_runtime (startup.hpp), builds the Trainer of
// this rank's RankPlan over the groups start-up made and drives it with run_loop (run.hpp).
#pragma once

#include <string>

#include "engine/launch/launch_env.hpp"
#include "engine/spec/job_spec.hpp"

namespace holmes::train {

// Trains the job as rank env.rank of env.world_size. Returns the exit code: 0, 1 after a
// runtime failure (printed as "holmes-train: rank R: <what>, peer rank P", P being the rank
// that died or hangs when the ranks' reports single it out), 128+N after a stop by signal. UserError
// (bad spec or environment) propagates to main (exit 2).
int run_job(const spec::JobSpec& spec, const launch::LaunchEnv& env);

// OpenMP / OpenBLAS threads per worker: OMP_NUM_THREADS when set, else max(1, cores this
// process may use / local_world), so that N workers on one machine do not oversubscribe it.
int worker_threads(int local_world);

}  // namespace holmes::train
