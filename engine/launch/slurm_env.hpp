// Slurm's side of detect_launch_env (launch_env.hpp). Internal to engine/launch.
#pragma once

#include <string>

#include "engine/launch/env_read.hpp"
#include "engine/launch/launch_env.hpp"

namespace holmes::launch::detail {

// srun started this process as one task of the job (one task per device).
LaunchEnv detect_slurm_task(const EnvMap& env, const std::string& job_name);

// srun started this process as the one task of its node, and it spawns `nproc` workers.
LaunchEnv detect_slurm_node_launcher(const EnvMap& env, int nproc, const std::string& job_name);

}  // namespace holmes::launch::detail
