// --plan-only: load the cluster (topology file, or discover this node), make the plan and
// print it as text or JSON. Needs no GPU, no rendezvous and no other node.
#pragma once

#include <string>

#include "engine/spec/job_spec.hpp"

namespace holmes::cmd {

// The cluster: spec.cluster.topology (--topology sets it; a relative path is looked up beside
// the job spec first), else this node. format: "text" or "json". nproc_per_node > 0
// (--nproc-per-node) plans for that many workers on this machine, as the run would (the file
// overlaid on this node). nodes: the launch order of the file's nodes (a hostlist, from
// --nodes); empty = SLURM_JOB_NODELIST when set (inside an allocation), else the file's
// order. Returns the exit code (0); bad input throws UserError (exit 2).
int run_plan_only(const holmes::spec::JobSpec& spec, const std::string& format, int nproc_per_node = 0,
                  const std::string& nodes = "");

}  // namespace holmes::cmd
