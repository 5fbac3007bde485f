// The cluster a job plans on, assembled the same way by every mode (--plan-only, the local
// launcher before it spawns, a single process, each rank of a multi-process job): the nodes
// discovered at run time with cluster.topology overlaid, and the plan of one node's workers.
// Nothing here opens a socket: --plan-only and the launcher's checks use it without Gloo.
#pragma once

#include <string>
#include <vector>

#include "engine/plan/plan.hpp"
#include "engine/spec/job_spec.hpp"
#include "engine/topo/topology.hpp"

namespace holmes::train {

// cluster.topology, read beside the spec file when it is relative and exists there (so the
// configs/ examples work from any folder); as given otherwise.
std::string spec_topology_path(const spec::JobSpec& spec);

// The reports of cluster.topology (empty when the key is empty), loaded and validated.
// UserError naming cluster.topology and the path when the file is missing or broken.
std::vector<topo::NodeReport> load_spec_topology(const spec::JobSpec& spec);

// The nodes a job plans on: `discovered` (one report per node of the job) with the entries of
// cluster.topology replacing the nodes they name; with nothing discovered (--plan-only with a
// topology file: no job yet), the file's nodes. Validated (build_cluster).
topo::ClusterTopology assemble_cluster(const spec::JobSpec& spec, std::vector<topo::NodeReport> discovered);

// This machine's CPU as `workers` devices of the plan (one per worker process), memory and
// cores split between them.
topo::Devices cpu_worker_devices(int workers);

// The plan of a job that runs `workers` processes on this machine alone, which has `devices`
// (the CUDA GPUs, or the CPU): what --plan-only --nproc-per-node N prints and what the local
// launcher checks before it spawns anything. Throws UserError when the node cannot hold that
// many workers or no plan fits.
plan::Plan plan_local_job(const spec::JobSpec& spec, const topo::Devices& devices, int workers);

// Workers one node can hold: on GPUs one per device; on CPUs at most kMaxWorkersPerCore per
// core and, with kWorkerBaseMiB each for the process itself, within the node's memory.
// UserError naming `launched` (e.g. "--nproc-per-node 1000"), what the node has and the limit.
inline constexpr int kMaxWorkersPerCore = 8;
inline constexpr double kWorkerBaseMiB = 64;
void check_node_capacity(const topo::Devices& devices, int workers, const std::string& launched);

}  // namespace holmes::train
