#include "cmd/plan_cmd.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <utility>

#include "cmd/backends.hpp"
#include "engine/plan/plan.hpp"
#include "engine/spec/errors.hpp"
#include "engine/topo/cluster.hpp"
#include "engine/topo/discover.hpp"
#include "engine/topo/hostlist.hpp"
#include "engine/topo/topology_file.hpp"
#include "engine/train/startup.hpp"

namespace holmes::cmd {

namespace {

// --nodes, else the Slurm allocation's node list, else none (the topology's order).
std::pair<std::string, std::string> launch_order(const std::string& nodes) {
  if (!nodes.empty()) return {nodes, "--nodes"};
  for (const char* var : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST"})
    if (const char* v = std::getenv(var); v && *v) return {v, var};
  return {"", ""};
}

}  // namespace

int run_plan_only(const spec::JobSpec& spec, const std::string& topology_file, const std::string& format,
                  int nproc_per_node, const std::string& nodes) {
  if (format != "text" && format != "json")
    throw UsageError(fmt::format("--format '{}' is not accepted for --plan-only; expected text or json", format));
  std::vector<topo::NodeReport> reports;
  if (!topology_file.empty()) reports = topo::load_topology_file(topology_file);
  else if (!spec.cluster.topology.empty()) reports = topo::load_topology_file(train::spec_topology_path(spec));
  else {
    // This machine; with --nproc-per-node on a CPU-only host, as the workers would see it.
    topo::Devices devices = local_devices();
    if (nproc_per_node > 0 && devices.kind == "cpu") devices = train::cpu_worker_devices(nproc_per_node);
    reports.push_back(topo::discover_node(spec.cluster.sysfs_root, devices));
  }
  if (auto [list, source] = launch_order(nodes); !list.empty())
    reports = topo::order_nodes(reports, topo::expand_hostlist(list),
                                fmt::format("{} '{}'", source, list));
  topo::ClusterTopology cluster = topo::build_cluster(std::move(reports));
  cluster.calibration = train::spec_calibration(spec);
  plan::Plan p = plan::make_plan(spec, cluster);
  fmt::print("{}", format == "json" ? plan::format_plan_json(p) : plan::format_plan_text(p));
  if (format == "text") fmt::print("plan hash {:016x}\n", plan::plan_hash(p));
  return 0;
}

}  // namespace holmes::cmd
