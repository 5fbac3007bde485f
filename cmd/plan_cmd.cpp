#include "cmd/plan_cmd.hpp"

#include <fmt/format.h>

#include "cmd/backends.hpp"
#include "engine/plan/plan.hpp"
#include "engine/spec/errors.hpp"
#include "engine/topo/cluster.hpp"
#include "engine/topo/discover.hpp"
#include "engine/topo/topology_file.hpp"
#include "engine/train/startup.hpp"

namespace holmes::cmd {

int run_plan_only(const spec::JobSpec& spec, const std::string& topology_file, const std::string& format,
                  int nproc_per_node) {
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
  topo::ClusterTopology cluster = topo::build_cluster(std::move(reports));
  plan::Plan p = plan::make_plan(spec, cluster);
  fmt::print("{}", format == "json" ? plan::format_plan_json(p) : plan::format_plan_text(p));
  if (format == "text") fmt::print("plan hash {:016x}\n", plan::plan_hash(p));
  return 0;
}

}  // namespace holmes::cmd
