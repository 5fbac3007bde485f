#include "engine/plan/survivors.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <stdexcept>

#include "common/errors.hpp"

namespace holmes::plan {

topo::ClusterTopology without_nodes(const topo::ClusterTopology& topology, const std::vector<int>& lost) {
  const int n = static_cast<int>(topology.nodes.size());
  std::set<int> gone;
  for (int node : lost) {
    if (node < 0 || node >= n)
      throw std::invalid_argument(fmt::format("without_nodes: node {} of a cluster of {}", node, n));
    gone.insert(node);
  }
  topo::ClusterTopology out;
  // A warning about one lost node goes with it (a fresh job on the survivors has none of it);
  // the plan's hash covers the warnings, so the re-plan equals that job's plan.
  for (const std::string& w : topology.warnings) {
    const bool about_lost = std::any_of(gone.begin(), gone.end(), [&](int node) {
      return w.find(fmt::format("node '{}'", topology.nodes[node].hostname)) != std::string::npos;
    });
    if (!about_lost) out.warnings.push_back(w);
  }
  out.calibration = topology.calibration;
  std::vector<int> new_index(n, -1);
  for (int node = 0; node < n; ++node) {
    if (gone.count(node)) continue;
    new_index[node] = static_cast<int>(out.nodes.size());
    out.nodes.push_back(topology.nodes[node]);
  }
  std::vector<int> new_island(topology.islands.size(), -1);
  for (size_t i = 0; i < topology.islands.size(); ++i) {
    topo::Island isl = topology.islands[i];
    isl.nodes.clear();
    for (int node : topology.islands[i].nodes)
      if (new_index[node] >= 0) isl.nodes.push_back(new_index[node]);
    if (isl.nodes.empty()) continue;
    new_island[i] = static_cast<int>(out.islands.size());
    isl.id = new_island[i];
    out.islands.push_back(std::move(isl));
  }
  out.island_of.resize(out.nodes.size());
  for (int node = 0; node < n; ++node)
    if (new_index[node] >= 0) out.island_of[new_index[node]] = new_island[topology.island_of[node]];
  return out;
}

namespace {

int devices_of(const topo::ClusterTopology& t) {
  int d = 0;
  for (const auto& node : t.nodes) d += node.devices.count;
  return d;
}

}  // namespace

SurvivorPlan plan_on_survivors(const spec::JobSpec& spec, const topo::ClusterTopology& topology,
                               const std::vector<int>& lost) {
  if (spec.parallel.replicas > 1)
    throw std::invalid_argument("plan_on_survivors: a job of replicas loses whole replicas, not nodes of one plan");
  SurvivorPlan out;
  out.topology = without_nodes(topology, lost);
  const std::set<int> gone(lost.begin(), lost.end());
  for (int node = 0; node < static_cast<int>(topology.nodes.size()); ++node)
    if (!gone.count(node)) out.old_node.push_back(node);
  const int devices = devices_of(out.topology);
  const std::string left = fmt::format("{} device(s) on {} node(s) left", devices, out.topology.nodes.size());
  out.spec = spec;
  if (devices == 0) {
    out.why = fmt::format("{}: no node survived", left);
    return out;
  }
  auto& p = out.spec.parallel;
  if (p.tensor != spec::kAuto) {
    const bool divides = std::all_of(out.topology.nodes.begin(), out.topology.nodes.end(),
                                     [&](const topo::NodeReport& node) { return node.devices.count % p.tensor == 0; });
    if (!divides) p.tensor = spec::kAuto;
  }
  p.pipeline = spec::kAuto;
  p.data = spec::kAuto;
  // The partition and a per-stage layer list were the old pipeline's: searched again with it.
  p.partition.kind = spec::PartitionKind::kAuto;
  p.partition.layers.clear();
  try {
    out.plan = make_plan(out.spec, out.topology);
    out.fits = true;
  } catch (const UserError& e) {
    // The micro-batch size the user fixed may be what no data degree of the survivors can
    // split the batch by: searched again before giving up.
    if (spec.train.micro_batch != spec::kAuto) {
      out.spec.train.micro_batch = spec::kAuto;
      try {
        out.plan = make_plan(out.spec, out.topology);
        out.fits = true;
        return out;
      } catch (const UserError&) {
        out.spec.train.micro_batch = spec.train.micro_batch;
      }
    }
    out.why = fmt::format("{}: {}", left, e.what());
  }
  return out;
}

}  // namespace holmes::plan
