#include "engine/tools/calibrate.hpp"

#include <cblas.h>
#include <fmt/format.h>
#include <omp.h>

#include <cstdio>
#include <set>

#include "common/errors.hpp"
#include "common/format.hpp"
#include "engine/runtime/cluster_view.hpp"
#include "engine/spec/model_config.hpp"
#include "model/architecture.hpp"
#include "engine/runtime/startup.hpp"
#include "engine/tools/calibrate_comm.hpp"
#include "engine/tools/calibrate_compute.hpp"
#include "engine/topo/calibration.hpp"
#include "engine/topo/discover.hpp"
#include "engine/train/calibration.hpp"
#include "engine/train/dist_run.hpp"
#include "engine/train/run.hpp"

namespace holmes::tools {

namespace {

// The spec as the calibrate run plans its ranks: any degrees (the plan only places the ranks),
// no replicas, no calibration of a job.
spec::JobSpec calibrate_spec(spec::JobSpec spec) {
  spec.parallel.tensor = spec.parallel.pipeline = spec.parallel.data = spec::kAuto;
  spec.parallel.partition = {};
  spec.parallel.replicas = 1;
  spec.cluster.calibrate.clear();
  spec.cluster.calibration.clear();
  return spec;
}

ComputeSweep sweep_of(const spec::JobSpec& spec, const CalibrateOptions& o, int devices) {
  ComputeSweep s = default_sweep(spec, devices);
  if (!o.tp.empty()) s.tp = o.tp;
  if (!o.micro_batches.empty()) s.micro_batches = o.micro_batches;
  s.reps = o.reps;
  const model::GptConfig m = spec::model_config(spec.model);
  for (int t : s.tp)
    if (t < 1 || !model::tp_divides(m, t)) {
      std::string sizes;
      for (const auto& [key, value] : m.architecture().tp_divides(m))
        sizes += fmt::format("{}{} = {}", sizes.empty() ? "" : ", ", key, value);
      throw UserError(fmt::format("calibrate --tp: {} does not split the model ({}); accepted: a degree that divides "
                                  "each", t, sizes));
    }
  for (int mb : s.micro_batches)
    if (mb < 1) throw UserError(fmt::format("calibrate --micro-batches: {} (accepted: 1 or more)", mb));
  return s;
}

auto printer(int rank) {
  return [rank](const std::string& line) {
    fmt::print("calibrate: {}{}\n", rank > 0 ? fmt::format("rank {}: ", rank) : "", line);
    std::fflush(stdout);
  };
}

int calibrate_alone(const spec::JobSpec& spec, const CalibrateOptions& o) {
  model::Backend backend = train::make_training_backend(spec);
  const bool gpu = backend.device == "cuda";
  const topo::Devices devices = gpu ? runtime::local_devices() : topo::detect_cpu_devices();
  topo::ClusterTopology here;
  here.nodes.push_back({"this node", devices, {}});
  topo::Calibration cal;
  cal.device = train::device_record(gpu ? "cuda" : "cpu", here);
  cal.source = fmt::format("holmes-train calibrate, one process on {}", cal.device.describe());
  const ComputeSweep sweep = sweep_of(spec, o, gpu ? devices.count : 1);
  topo::ComputeTable table = measure_compute(spec, backend, sweep, printer(0));
  table.device_kind = cal.device.kind, table.device_name = devices.name;
  cal.tables.push_back(std::move(table));
  fmt::print("calibrate: one process: no collectives measured (launch with --nproc-per-node N for the groups between "
             "N workers of this node)\n");
  train::write_calibration_file(o.out, cal, "calibrate", "calibrate --out");
  return 0;
}

}  // namespace

int run_calibrate(const spec::JobSpec& given, const CalibrateOptions& o, const launch::LaunchEnv& env) {
  if (o.out.empty()) throw UserError("calibrate: --out FILE is required (the calibration file to write)");
  if (o.reps < 1) throw UserError(fmt::format("calibrate --reps: {} (accepted: 1 or more)", o.reps));
  const spec::JobSpec spec = calibrate_spec(given);
  if (env.world_size <= 1) return calibrate_alone(spec, o);
  runtime::Runtime rt = runtime::start_runtime(spec, env);
  const int threads = train::worker_threads(rt.local_world);  // as a training worker would compute
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
  model::Backend backend = train::make_training_backend(spec, rt.local_rank);
  const auto say = printer(rt.rank);
  // A compute table per device model: the first node of each model measures it, on its first
  // rank, while the others wait (they would share its cores or its PCIe switch).
  const std::string name = rt.topology.nodes.at(rt.node).devices.name;
  int first_node = rt.node;
  for (size_t n = 0; n < rt.topology.nodes.size(); ++n)
    if (rt.topology.nodes[n].devices.name == name) {
      first_node = static_cast<int>(n);
      break;
    }
  topo::Calibration mine;
  if (rt.node == first_node && rt.local_rank == 0) {
    const ComputeSweep sweep = sweep_of(spec, o, rt.topology.nodes.at(rt.node).devices.count > 1
                                                     ? rt.topology.nodes.at(rt.node).devices.count
                                                     : rt.local_world);
    topo::ComputeTable table = measure_compute(spec, backend, sweep, say);
    table.device_kind = rt.plan.device_kind, table.device_name = name;
    mine.tables.push_back(std::move(table));
  }
  rt.world_group().barrier();
  mine.collectives = measure_collectives(rt, spec, backend, say);
  // Every rank's rows to rank 0, as the file's text (the reader checks what it gathers).
  mine.device = {rt.plan.device_kind, name, "", "", "", "", "", ""};
  const std::string text = topo::format_calibration_yaml(mine);
  comm::PrefixStore gather(rt.store, "calibrate/");
  const auto all = comm::store_all_gather(gather, "rows", rt.rank, rt.world, comm::Bytes(text.begin(), text.end()),
                                          runtime::timeout_of(spec));
  if (rt.rank == 0) {
    topo::Calibration cal;
    cal.device = train::device_record(rt.plan.device_kind, rt.topology);
    cal.source = fmt::format("holmes-train calibrate, {} on {}", count_of(rt.world, "rank"),
                             count_of(static_cast<int>(rt.topology.nodes.size()), "node"));
    for (size_t r = 0; r < all.size(); ++r) {
      const topo::Calibration part =
          topo::parse_calibration_yaml(std::string(all[r].begin(), all[r].end()), fmt::format("rank {}'s rows", r));
      cal.tables.insert(cal.tables.end(), part.tables.begin(), part.tables.end());
      cal.collectives.insert(cal.collectives.end(), part.collectives.begin(), part.collectives.end());
    }
    train::write_calibration_file(o.out, cal, "calibrate", "calibrate --out");
  }
  rt.world_group().barrier();
  rt.store->retire(false);
  rt.world_group().barrier();
  if (rt.rank == 0) rt.store->retire(true);
  return 0;
}

}  // namespace holmes::tools
