#include "engine/runtime/cluster_view.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <utility>

#include "engine/launch/env_read.hpp"
#include "engine/launch/launch_env.hpp"
#include "engine/runtime/nccl_env.hpp"
#include "common/errors.hpp"
#include "engine/topo/cluster.hpp"
#include "engine/topo/calibration.hpp"
#include "engine/topo/discover.hpp"
#include "engine/topo/hostlist.hpp"
#include "engine/topo/topology_file.hpp"
#include "backends/backends.hpp"

namespace holmes::runtime {

std::string spec_relative_path(const spec::JobSpec& spec, const std::string& path) {
  namespace fs = std::filesystem;
  fs::path p(path);
  if (p.is_absolute() || spec.source_file.empty()) return p.string();
  fs::path beside = fs::path(spec.source_file).parent_path() / p;
  return fs::exists(beside) ? beside.string() : p.string();
}

std::string spec_topology_path(const spec::JobSpec& spec) { return spec_relative_path(spec, spec.cluster.topology); }

topo::Calibration spec_calibration(const spec::JobSpec& spec) {
  if (spec.cluster.calibration.empty()) return {};
  return topo::load_calibration_file(spec_relative_path(spec, spec.cluster.calibration));
}

namespace {

// --nodes, else the Slurm allocation's node list, else none (the topology's order).
std::pair<std::string, std::string> launch_order(const std::string& nodes) {
  if (!nodes.empty()) return {nodes, "--nodes"};
  for (const char* var : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST"})
    if (const char* v = std::getenv(var); v && *v) return {v, var};
  return {"", ""};
}

}  // namespace

std::vector<topo::NodeReport> load_spec_topology(const spec::JobSpec& spec) {
  if (spec.cluster.topology.empty()) return {};
  const std::string path = spec_topology_path(spec);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw UserError(fmt::format("cluster.topology (--topology): '{}' {}; expected a topology file (YAML, "
                                "docs/topology.md; `holmes-train discover --format yaml` writes one)",
                                spec.cluster.topology,
                                std::filesystem::exists(path, ec) ? "is not a file" : "does not exist"));
  return topo::load_topology_file(path);
}

topo::ClusterTopology assemble_cluster(const spec::JobSpec& spec, std::vector<topo::NodeReport> discovered,
                                       const std::string& order, const std::string& order_source) {
  std::vector<topo::NodeReport> file = load_spec_topology(spec);
  std::vector<topo::NodeReport> nodes =
      discovered.empty() ? std::move(file) : topo::overlay_reports(std::move(discovered), file, nullptr);
  if (!order.empty())
    nodes = topo::order_nodes(nodes, topo::expand_hostlist(order), fmt::format("{} '{}'", order_source, order));
  topo::ClusterTopology cluster = topo::build_cluster(std::move(nodes));
  cluster.calibration = spec_calibration(spec);
  return cluster;
}

topo::Devices local_devices(std::string* note) {
  const backends::GpuSummary gpus = backends::local_gpus(note);
  if (gpus.count == 0) return topo::detect_cpu_devices();
  topo::Devices d;
  d.kind = "cuda";
  d.count = gpus.count;
  d.name = gpus.name;
  d.nccl = backends::nccl_usable();
  d.memory_gb = gpus.memory_gb;
  d.nvlinks = gpus.nvlinks;  // discovery's intra-node class (engine/topo/discover.hpp)
  return d;
}

backends::Device training_device(spec::Device requested, std::string* note) {
  if (requested == spec::Device::kCpu) return backends::Device::kCpu;
  const std::string why = backends::unusable(backends::Device::kCuda);
  if (why.empty()) return backends::Device::kCuda;
  if (requested == spec::Device::kCuda)
    throw UserError(fmt::format("job.device: 'cuda', but {} (accepted here: cpu, auto)", why));
  if (note) *note = fmt::format("job.device auto: {}, training on the CPU", why);
  return backends::Device::kCpu;
}

std::string fp8_device_problem(backends::Device device, const backends::GpuSummary& gpu,
                               const std::string& cpu_reason) {
  constexpr int kMajor = 8, kMinor = 9;  // Ada's FP8 tensor cores; Hopper is 9.0
  if (device == backends::Device::kCpu)
    return fmt::format("train.precision: 'fp8' needs a GPU with FP8 tensor cores (compute capability {}.{} or newer: "
                       "Ada, Hopper, Blackwell), and this job trains on the CPU ({}); accepted here: auto, fp32",
                       kMajor, kMinor, cpu_reason);
  if (gpu.cc_major > kMajor || (gpu.cc_major == kMajor && gpu.cc_minor >= kMinor)) return "";
  return fmt::format("train.precision: 'fp8' needs a GPU with FP8 tensor cores (compute capability {}.{} or newer: "
                     "Ada, Hopper, Blackwell), and this job's GPU is '{}' with compute capability {}.{}; accepted "
                     "here: auto, bf16, fp32",
                     kMajor, kMinor, gpu.name, gpu.cc_major, gpu.cc_minor);
}

void check_precision_device(const spec::JobSpec& spec) {
  if (spec.train.precision != spec::Precision::kFp8) return;
  std::string note;
  const backends::Device device = training_device(spec.job.device, &note);
  std::string cpu_reason = "job.device: cpu";
  if (spec.job.device != spec::Device::kCpu) cpu_reason = note.empty() ? "no usable GPU" : note;
  const std::string problem =
      fp8_device_problem(device, device == backends::Device::kCuda ? backends::local_gpus() : backends::GpuSummary{},
                         cpu_reason);
  if (!problem.empty()) throw UserError(problem);
}

void check_worker_device(const spec::JobSpec& spec) {
  check_precision_device(spec);
  if (spec.job.device != spec::Device::kCuda) return;
  // Refused before anything else about a multi-GPU job: it stays wrong once those run.
  refuse_nccl_overrides(launch::process_environment());
  training_device(spec.job.device);
}

int workers_per_gpu() {
  const auto n = launch::detail::get_int(launch::process_environment(), "HOLMES_WORKERS_PER_GPU", 1, 64,
                                         "1..64 worker processes per GPU");
  return n ? static_cast<int>(*n) : 1;
}

topo::Devices worker_devices(const spec::JobSpec& spec, int workers) {
  if (spec.job.device != spec::Device::kCuda) return cpu_worker_devices(workers);
  const topo::Devices gpus = local_devices();
  check_node_capacity(gpus, workers, fmt::format("{} worker(s) with job.device cuda", workers));
  return gpu_worker_devices(gpus, workers);
}

topo::Devices gpu_worker_devices(topo::Devices gpus, int workers) {
  // Workers sharing a GPU (HOLMES_WORKERS_PER_GPU) share its memory in the plan's model.
  const int sharing = (workers + gpus.count - 1) / std::max(1, gpus.count);
  gpus.memory_gb /= std::max(1, sharing);
  gpus.per_gpu = std::max(1, sharing);
  gpus.count = workers;
  return gpus;
}

topo::Devices cpu_worker_devices(int workers) {
  topo::Devices d = topo::detect_cpu_devices();
  d.count = workers;
  d.memory_gb /= workers;
  d.cores = std::max(1, d.cores / workers);
  return d;
}

void check_node_capacity(const topo::Devices& d, int workers, const std::string& launched) {
  if (d.kind != "cpu") {
    const int per = workers_per_gpu();
    if (workers > d.count * per)
      throw UserError(fmt::format("{}: this node has {} {} device(s) ({}); {} worker(s) per device "
                                  "(HOLMES_WORKERS_PER_GPU), so at most {}",
                                  launched, d.count, d.kind, d.name, per, d.count * per));
    return;
  }
  const int by_cores = kMaxWorkersPerCore * std::max(1, d.cores);
  const int by_memory = static_cast<int>(d.memory_gb * 1024 / kWorkerBaseMiB);
  if (workers > by_cores || workers > by_memory)
    throw UserError(fmt::format("{}: this node cannot hold {} workers: it has {} CPU core(s) (at most {} workers per "
                                "core: {}) and {:.1f} GiB of memory (at least {:.0f} MiB per worker process: {}); "
                                "accepted here: 1..{}",
                                launched, workers, d.cores, kMaxWorkersPerCore, by_cores, d.memory_gb, kWorkerBaseMiB,
                                by_memory, std::min(by_cores, by_memory)));
}

plan::Plan plan_local_job(const spec::JobSpec& spec, const topo::Devices& devices, int workers,
                          const std::string& nodes) {
  topo::Devices d = devices;
  if (workers > 0) {
    check_node_capacity(devices, workers, fmt::format("--nproc-per-node {}", workers));
    d = devices.kind == "cpu" ? cpu_worker_devices(workers) : gpu_worker_devices(devices, workers);
  }
  std::vector<topo::NodeReport> discovered{topo::discover_node(spec.cluster.sysfs_root, d)};
  // --plan-only with a topology file and no worker count plans the file's cluster, in the
  // order the launch will number its nodes.
  if (workers <= 0 && !spec.cluster.topology.empty()) {
    discovered.clear();
    const auto [list, source] = launch_order(nodes);
    return plan::make_plan(spec, assemble_cluster(spec, {}, list, source));
  }
  return plan::make_plan(spec, assemble_cluster(spec, std::move(discovered)));
}

}  // namespace holmes::runtime
