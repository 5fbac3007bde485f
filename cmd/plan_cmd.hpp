// --plan-only: load the cluster (topology file, or discover this node), make the plan and
// print it as text or JSON. Needs no GPU, no rendezvous and no other node.
#pragma once

#include <string>

#include "engine/spec/job_spec.hpp"

namespace holmes::cmd {

// topology_file: "--topology FILE"; empty = spec.cluster.topology (a relative path is looked
// up beside the job spec first), else discover this node. format: "text" or "json".
// nproc_per_node > 0 (--nproc-per-node) on a CPU-only machine plans for that many local
// workers, as the run would. nodes: the launch order of the job's nodes (a hostlist, from
// --nodes); empty = SLURM_JOB_NODELIST when set (inside an allocation), else the topology's
// order. A run numbers nodes in launch order, so this is what makes the preview the run's plan.
// Returns the exit code (0); bad input throws UserError (exit 2).
int run_plan_only(const holmes::spec::JobSpec& spec, const std::string& topology_file, const std::string& format,
                  int nproc_per_node = 0, const std::string& nodes = "");

}  // namespace holmes::cmd
