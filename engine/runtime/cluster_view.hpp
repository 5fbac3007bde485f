// The cluster a job plans on, assembled the same way by every mode (--plan-only, the local
// launcher before it spawns, a single process, each rank of a multi-process job): the nodes
// discovered at run time with cluster.topology overlaid, and the plan of one node's workers.
// Nothing here opens a socket: --plan-only and the launcher's checks use it without Gloo.
#pragma once

#include <string>
#include <vector>

#include "backends/backends.hpp"
#include "engine/plan/plan.hpp"
#include "engine/spec/job_spec.hpp"
#include "engine/topo/topology.hpp"

namespace holmes::runtime {

// A file the spec names (cluster.topology, cluster.calibration), read beside the spec file
// when it is relative and exists there (so the configs/ examples work from any folder); as
// given otherwise.
std::string spec_relative_path(const spec::JobSpec& spec, const std::string& path);
std::string spec_topology_path(const spec::JobSpec& spec);
// cluster.calibration loaded (UserError naming the file when it cannot be read), or empty.
topo::Calibration spec_calibration(const spec::JobSpec& spec);

// The reports of cluster.topology (empty when the key is empty), loaded and validated.
// UserError naming cluster.topology and the path when the file is missing or broken.
std::vector<topo::NodeReport> load_spec_topology(const spec::JobSpec& spec);

// The nodes a job plans on: `discovered` (one report per node of the job, in launch order)
// with the entries of cluster.topology replacing the nodes they name; with nothing
// discovered (--plan-only with a topology file: no job yet), the file's nodes, put in the
// launch order `order` (a hostlist; "" = the file's order; `order_source` names it in
// errors). Validated (build_cluster), with cluster.calibration attached.
topo::ClusterTopology assemble_cluster(const spec::JobSpec& spec, std::vector<topo::NodeReport> discovered,
                                       const std::string& order = "", const std::string& order_source = "");

// job.device on this machine, the one place it is decided: cpu and cuda as asked (UserError
// naming job.device when this build or node has no usable GPU for cuda), auto: cuda when a GPU
// is usable, else cpu, and `note` (may be null) says why, for the one line a process prints.
backends::Device training_device(spec::Device requested, std::string* note = nullptr);

// train.precision: fp8 needs FP8 tensor cores: a GPU of compute capability 8.9 or newer (Ada,
// Hopper, Blackwell). The problem with training fp8 on `device` ("" when there is none):
// `gpu` describes the GPU when device is cuda, `cpu_reason` why the job trains on the CPU
// otherwise (job.device cpu, or auto without a usable GPU). Pure.
std::string fp8_device_problem(backends::Device device, const backends::GpuSummary& gpu,
                               const std::string& cpu_reason);
// The same for this machine and the job's train.precision and job.device: UserError (exit 2)
// naming the device, what was seen and what is accepted, before any work starts. Called by a
// single process, the launcher, each worker's start-up and bench.
void check_precision_device(const spec::JobSpec& spec);

// This machine's compute devices: its GPUs when the backend registry finds any, else the CPU;
// `note` (may be null) says why no GPU was used.
topo::Devices local_devices(std::string* note = nullptr);

// What a multi-process job's workers train on: the CPU (job.device cpu or auto) or this
// node's GPUs (cuda). With cuda, refuses NCCL variables that break the groups
// (refuse_nccl_overrides, nccl_env.hpp) and a node without a usable GPU, naming job.device.
// The launcher and start-up both call it, so the message is the same.
void check_worker_device(const spec::JobSpec& spec);

// The devices `workers` worker processes of this node are in the plan: each a share of the
// CPU, or (job.device cuda) each a GPU, workers spread over the node's GPUs by local rank
// and, with HOLMES_WORKERS_PER_GPU = n > 1, up to n sharing one (its memory divided among
// them). Throws UserError when the node cannot hold them.
topo::Devices worker_devices(const spec::JobSpec& spec, int workers);
// A node's GPUs as `workers` worker devices (count = workers), each GPU's memory divided
// among the workers that share it; the launcher's plan and the ranks' plan use the same.
topo::Devices gpu_worker_devices(topo::Devices gpus, int workers);

// HOLMES_WORKERS_PER_GPU (default 1): how many worker processes may share one GPU (a test
// set-up: the groups then go through host memory). UserError naming the variable for a value
// that is not a whole number in 1..64 (launch::detail::get_int, as the launcher's variables).
int workers_per_gpu();

// This machine's CPU as `workers` devices of the plan (one per worker process), memory and
// cores split between them.
topo::Devices cpu_worker_devices(int workers);

// The plan of a job that runs `workers` processes on this machine alone, which has `devices`
// (the CUDA GPUs, or the CPU): what --plan-only --nproc-per-node N prints and what the local
// launcher checks before it spawns anything. Throws UserError when the node cannot hold that
// many workers or no plan fits.
// nodes: the launch order of the file's nodes for --plan-only (--nodes, else the Slurm
// allocation's node list); a run numbers nodes in launch order, so this makes the preview the
// run's plan.
plan::Plan plan_local_job(const spec::JobSpec& spec, const topo::Devices& devices, int workers,
                          const std::string& nodes = "");

// Workers one node can hold: on GPUs one per device; on CPUs at most kMaxWorkersPerCore per
// core and, with kWorkerBaseMiB each for the process itself, within the node's memory.
// UserError naming `launched` (e.g. "--nproc-per-node 1000"), what the node has and the limit.
inline constexpr int kMaxWorkersPerCore = 8;
inline constexpr double kWorkerBaseMiB = 64;
void check_node_capacity(const topo::Devices& devices, int workers, const std::string& launched);

}  // namespace holmes::runtime
