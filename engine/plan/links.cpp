#include "engine/plan/links.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

#include "common/errors.hpp"
#include "engine/spec/model_config.hpp"
#include "engine/topo/gpu_peaks.hpp"

namespace holmes::plan {

const char* to_string(LinkKind kind) {
  switch (kind) {
    case LinkKind::kIntraNode: return "intra-node";
    case LinkKind::kIb: return "ib";
    case LinkKind::kRoce: return "roce";
    case LinkKind::kEthernet: return "ethernet";
  }
  return "?";
}

double LinkCost::gbps_for(double message_bytes) const {
  if (size_factor.empty()) return gbps_per_rank;
  const double eff = efficiency > 0 ? efficiency : 1.0;
  topo::LinkCalibration curve;  // in efficiencies over the declared rate, as measured
  curve.efficiency = eff;
  for (const auto& [bytes, factor] : size_factor) curve.sizes.emplace_back(bytes, factor * eff);
  return gbps_per_rank / eff * topo::efficiency_at(curve, message_bytes);
}

double LinkCost::transfer_s(double bytes) const {
  if (gbps_per_rank <= 0) return 0;
  if (const auto t = curves.seconds("send_recv", 2, bytes)) return *t;
  return latency_s + bytes * 8.0 / (gbps_for(bytes) * 1e9);
}

namespace {

// TCP traffic that leaves the island binds to the interface the topology picks for it
// (ClusterTopology::tcp_interface); its rate is that port's, or the default when unknown.
void pick_ethernet(const topo::ClusterTopology& topo, int node, NodeFacts& out) {
  out.ethernet_if = topo.tcp_interface(node, false);
  out.island_if = topo.tcp_interface(node, true);
  out.ethernet_gbps = kDefaultEthernetGbps;
  for (const auto& nic : topo.nodes[node].nics) {
    const std::string& carrier = nic.kind == topo::NicKind::kRoce ? nic.netdev : nic.name;
    if (nic.active && carrier == out.ethernet_if && nic.rate_gbps && *nic.rate_gbps > 0) {
      out.ethernet_gbps = *nic.rate_gbps;
      break;
    }
  }
  const topo::NicKind island = topo.islands[topo.island_of[node]].kind;
  for (const auto& nic : topo.nodes[node].nics) {
    if (!nic.active) continue;
    if (island == topo::NicKind::kIb && nic.kind == topo::NicKind::kIpoib && nic.name == out.island_if)
      out.island_tcp = true;
    if (island == topo::NicKind::kRoce && nic.kind == topo::NicKind::kRoce && nic.netdev == out.island_if)
      out.island_tcp = true;
  }
}

// RDMA ports of the island's kind and fabric (NCCL_IB_HCA) and the RoCE GID index.
void pick_rdma(const topo::NodeReport& n, const topo::Island& island, NodeFacts& out) {
  for (const auto& nic : n.nics) {
    if (!nic.active || nic.kind != island.kind) continue;
    if (!island.fabric.empty() && !nic.fabric.empty() && nic.fabric != island.fabric) continue;
    out.hcas.push_back(nic.port > 0 ? fmt::format("{}:{}", nic.name, nic.port) : nic.name);
    if (nic.gid_index >= 0 && (out.gid_index < 0 || nic.gid_index < out.gid_index)) out.gid_index = nic.gid_index;
  }
  std::sort(out.hcas.begin(), out.hcas.end());
}

}  // namespace

namespace {

// What the topology and spec declare a device sustains (no calibration).
double sustained_tflops(const spec::JobSpec& spec, const topo::Devices& d, bool cuda) {
  if (spec.cluster.device_tflops > 0) return spec.cluster.device_tflops;
  double eff = spec.cluster.compute_efficiency > 0 ? spec.cluster.compute_efficiency
               : cuda ? kDefaultEfficiencyCuda : kDefaultEfficiencyCpu;
  double peak = d.peak_tflops;
  if (peak <= 0) peak = cuda ? kDefaultPeakTflopsCuda : kDefaultPeakTflopsCpuCore * std::max(1, d.cores);
  // A GPU's peak is its BF16 tensor-core figure; an fp32 job computes on the CUDA cores.
  if (cuda && !spec.trains_bf16(cuda)) {
    const double fp32 = topo::known_fp32_peak_tflops(d.name);
    peak = fp32 > 0 ? fp32 : peak * kFp32PeakFractionCuda;
  }
  return peak * eff;
}

}  // namespace

Facts collect_facts(const spec::JobSpec& spec, const topo::ClusterTopology& topo) {
  int n = static_cast<int>(topo.nodes.size());
  if (n == 0) throw UserError("the topology lists no nodes: nothing to plan on");
  if (static_cast<int>(topo.island_of.size()) != n)
    throw UserError(fmt::format("the topology has {} nodes but island_of lists {}", n, topo.island_of.size()));
  Facts f;
  f.islands = static_cast<int>(topo.islands.size());
  // The key the calibrate tables name this model by; only where there are tables (the model is
  // finalized for it, which a spec that never trains, as the topology's tests give, need not be).
  const std::string table_model =
      topo.calibration.tables.empty() ? std::string() : shape_key(spec::model_config(spec.model));
  const auto& c = spec.cluster;
  const spec::LinkOverride* over[kLinkKinds] = {&c.intra_node, &c.ib, &c.roce, &c.ethernet};
  bool intra_latency_default = false;
  for (int k = 0; k < kLinkKinds; ++k) {
    auto cal = topo.calibration.links.find(to_string(LinkKind(k)));
    const topo::LinkCalibration measured = cal == topo.calibration.links.end() ? topo::LinkCalibration{} : cal->second;
    const double latency_us = over[k]->latency_us > 0 ? over[k]->latency_us
                              : measured.latency_us > 0 ? measured.latency_us
                                                        : kDefaultLatencyUs[k];
    f.latency_s[k] = latency_us * 1e-6;
    if (k == static_cast<int>(LinkKind::kIntraNode))
      intra_latency_default = over[k]->latency_us <= 0 && measured.latency_us <= 0;
    f.link_calibrated[k] = measured.efficiency > 0 || measured.latency_us > 0;
    if (measured.efficiency > 0) {
      f.efficiency[k] = measured.efficiency;
      for (const auto& [bytes, eff] : measured.sizes) f.size_factor[k].emplace_back(bytes, eff / measured.efficiency);
    }
  }
  f.update_s_per_param = topo.calibration.update_ns_per_param * 1e-9;
  f.collectives = topo.calibration.collectives.empty() ? nullptr : &topo.calibration.collectives;
  f.host_s_per_step = topo.calibration.host_us_per_step * 1e-6;
  f.nodes.resize(n);
  for (int i = 0; i < n; ++i) {
    const auto& rep = topo.nodes[i];
    NodeFacts& nf = f.nodes[i];
    nf.island = topo.island_of[i];
    if (nf.island < 0 || nf.island >= f.islands)
      throw UserError(fmt::format("topology node {} ('{}') is on island {} but the topology has {} islands", i,
                                  rep.hostname, nf.island, f.islands));
    const auto& isl = topo.islands[nf.island];
    if (rep.devices.count < 1)
      throw UserError(fmt::format("topology node '{}' has devices.count = {}; at least 1 is needed", rep.hostname,
                                  rep.devices.count));
    nf.devices = rep.devices.count;
    nf.cuda = rep.devices.kind == "cuda";
    nf.tflops = sustained_tflops(spec, rep.devices, nf.cuda);
    nf.memory_bytes = rep.devices.memory_gb * double(1 << 30);
    pick_ethernet(topo, i, nf);
    if (c.ethernet.bandwidth_gbps > 0) nf.ethernet_gbps = c.ethernet.bandwidth_gbps;
    if (isl.kind == topo::NicKind::kIb || isl.kind == topo::NicKind::kRoce) {
      nf.island_link = isl.kind == topo::NicKind::kIb ? LinkKind::kIb : LinkKind::kRoce;
      pick_rdma(rep, isl, nf);
      double over_bw = isl.kind == topo::NicKind::kIb ? c.ib.bandwidth_gbps : c.roce.bandwidth_gbps;
      nf.rdma_gbps = over_bw > 0 ? over_bw : isl.rdma_gbps_per_node > 0 ? isl.rdma_gbps_per_node : kDefaultRdmaGbps;
    }
    // The node's intra-node class sets the declared rate and latency (an override or a
    // calibration of the class wins); GPU models side by side keep their own NVLink rates.
    nf.intra_class = topo::intra_class_of(rep.devices);
    nf.device_name = rep.devices.name;
    // cluster.device_tflops wins over every measured rate, a table's too.
    if (spec.cluster.device_tflops <= 0)
      nf.table = table_for(topo.calibration.tables, rep.devices.name, spec.trains_bf16(nf.cuda) ? "bf16" : "fp32",
                           table_model);
    const bool pcie = nf.cuda && nf.intra_class == "pcie";
    const double nvlink = topo::known_nvlink_gbps(rep.devices.name);
    nf.intra_gbps = c.intra_node.bandwidth_gbps > 0 ? c.intra_node.bandwidth_gbps
                    : !nf.cuda                      ? kDefaultIntraGbpsCpuProcesses
                    : pcie                          ? kDefaultIntraGbpsPcie
                    : nvlink > 0                    ? nvlink
                                                    : kDefaultIntraGbpsCuda;
    // The class's latency (override, calibration, default) except the defaults of CPU processes
    // and of PCIe.
    nf.intra_latency_s = !intra_latency_default ? f.latency_s[static_cast<int>(LinkKind::kIntraNode)]
                         : !nf.cuda             ? kDefaultIntraLatencyUsCpuProcesses * 1e-6
                         : pcie                 ? kDefaultIntraLatencyUsPcie * 1e-6
                                                : f.latency_s[static_cast<int>(LinkKind::kIntraNode)];
  }
  // Without a job's update figure, the calibrate tables' optimizer (every node's device measured).
  if (f.update_s_per_param <= 0 && !f.nodes.empty()) {
    double ns = 0;
    bool all = true;
    for (const NodeFacts& n : f.nodes) {
      all = all && n.table;
      if (n.table) ns = std::max(ns, n.table->optimizer_ns_per_param);
    }
    if (all && ns > 0) f.update_s_per_param = ns * 1e-9, f.update_from_table = true;
  }
  // The calibration's kind was checked against the plan's (make_plan, topo::check_device_kind):
  // CPU-time figures are host emulation's, and only a CPU calibration has them to give.
  const topo::Calibration& cal = topo.calibration;
  emulate_nodes(topo, cal.device.kind != "cuda" ? &cal : nullptr, f);
  // The device rate was measured on the calibration's device models: a node of another model
  // keeps its declared rate (an H100 job's rate is not an A100's).
  const std::vector<std::string> names = cal.device.names();
  std::vector<std::string> other;
  for (const auto& rep : topo.nodes)
    if (!names.empty() && !rep.devices.name.empty() &&
        std::find(names.begin(), names.end(), rep.devices.name) == names.end() &&
        std::find(other.begin(), other.end(), rep.devices.name) == other.end())
      other.push_back(rep.devices.name);
  if (other.empty()) {
    calibrate_compute(spec, cal.device_tflops, f);
    for (NodeFacts& n : f.nodes) n.tflops_calibrated = cal.device_tflops > 0 && spec.cluster.device_tflops <= 0;
  } else if (cal.device_tflops > 0) {
    f.notes.push_back(fmt::format("the calibration's device rate was measured on {}, and this plan also has '{}' "
                                  "nodes: it is not applied (every node at its declared rate)",
                                  cal.device.describe(), fmt::join(other, "', '")));
  }
  return f;
}

void calibrate_compute(const spec::JobSpec& spec, double calibrated, Facts& f) {
  // A calibration measures one rate, the slowest stage's: that of the slowest kind of device
  // (a stage runs at its slowest device). Nodes declared faster keep their declared ratio to
  // it, so an older island beside a newer one stays slower after calibration.
  if (f.nodes.empty()) return;
  if (calibrated <= 0 || spec.cluster.device_tflops > 0) return;
  double slowest = -1;
  for (const NodeFacts& n : f.nodes)
    if (n.tflops > 0 && (slowest < 0 || n.tflops < slowest)) slowest = n.tflops;
  for (NodeFacts& n : f.nodes) n.tflops = slowest > 0 ? calibrated * n.tflops / slowest : calibrated;
}

int NicUse::sharing(const Facts& f, int node, LinkKind kind) const {
  const std::vector<int>& count = kind == LinkKind::kEthernet ? ethernet : island;
  if (count.empty()) return std::max(1, f.nodes[node].devices);  // not counted: every rank of the node
  return std::max(1, count.at(node));
}

NicUse nic_use(const Facts& f, const std::vector<std::vector<int>>& groups, bool ring, bool own_links) {
  NicUse use;
  use.ethernet.assign(f.nodes.size(), 0);
  use.island.assign(f.nodes.size(), 0);
  for (const std::vector<int>& nodes : groups) {
    const int n = static_cast<int>(nodes.size());
    if (n < 2) continue;
    const bool ethernet = !own_links && group_on_ethernet(f, nodes, ring);
    for (int i = 0; i < n; ++i) {
      const int next = ring ? nodes[(i + 1) % n] : i + 1 < n ? nodes[i + 1] : nodes[i];
      const int prev = ring || i == 0 ? nodes[i] : nodes[i - 1];
      bool on[2] = {false, false};  // this member on the Ethernet port, on the island's
      for (int peer : {next, prev})
        if (peer != nodes[i]) on[link_between(f, nodes[i], peer, ethernet).kind == LinkKind::kEthernet ? 0 : 1] = true;
      use.ethernet[nodes[i]] += on[0];
      use.island[nodes[i]] += on[1];
    }
  }
  return use;
}

LinkCost link_between(const Facts& f, int a, int b, bool over_ethernet, const NicUse* use) {
  const NodeFacts& na = f.nodes[a];
  const NodeFacts& nb = f.nodes[b];
  auto sharing = [&](int node, LinkKind kind) { return use ? use->sharing(f, node, kind) : f.nodes[node].devices; };
  LinkCost l;
  if (a == b) {
    l.kind = LinkKind::kIntraNode;
    l.gbps_per_rank = na.intra_gbps;
  } else if (!over_ethernet && na.island == nb.island && na.island_link != LinkKind::kEthernet && !f.ethernet_only &&
             (!f.tcp_groups || (na.island_tcp && nb.island_tcp))) {
    l.kind = na.island_link;
    l.gbps_per_rank = std::min(na.rdma_gbps / sharing(a, l.kind), nb.rdma_gbps / sharing(b, l.kind));
  } else {
    l.kind = LinkKind::kEthernet;
    l.gbps_per_rank = std::min(na.ethernet_gbps / sharing(a, l.kind), nb.ethernet_gbps / sharing(b, l.kind));
    l.crosses_island = na.island != nb.island;
  }
  l.latency_s = a == b ? na.intra_latency_s : f.latency_s[static_cast<int>(l.kind)];
  if (f.collectives)
    l.curves = curves_for(*f.collectives, to_string(l.kind), na.intra_class, f.tcp_groups ? "gloo" : "nccl",
                          na.device_name);
  l.calibrated = f.link_calibrated[static_cast<int>(l.kind)];
  l.gbps_per_rank *= f.efficiency[static_cast<int>(l.kind)];
  l.efficiency = f.efficiency[static_cast<int>(l.kind)];
  l.size_factor = f.size_factor[static_cast<int>(l.kind)];
  return l;
}

bool group_on_ethernet(const Facts& f, const std::vector<int>& nodes, bool ring) {
  const size_t hops = nodes.size() < 2 ? 0 : ring ? nodes.size() : nodes.size() - 1;
  for (size_t i = 0; i < hops; ++i)
    if (link_between(f, nodes[i], nodes[(i + 1) % nodes.size()]).kind == LinkKind::kEthernet) return true;
  return false;
}

LinkCost link_in_group(const Facts& f, const std::vector<int>& nodes, bool ring, int a, int b, const NicUse* use) {
  return link_between(f, a, b, group_on_ethernet(f, nodes, ring), use);
}

LinkCost pipeline_hop(const Facts& f, const std::vector<int>& nodes, int a, int b, const NicUse* use) {
  return link_between(f, a, b, !pipelines_on_own_links(f) && group_on_ethernet(f, nodes, false), use);
}

LinkCost ring_bottleneck(const Facts& f, const std::vector<int>& nodes, const NicUse* use) {
  LinkCost worst;
  if (nodes.size() < 2) return worst;  // intra-node, zero bandwidth = zero cost
  worst.gbps_per_rank = -1;
  const bool ethernet = group_on_ethernet(f, nodes, true);
  for (size_t i = 0; i < nodes.size(); ++i) {
    LinkCost l = link_between(f, nodes[i], nodes[(i + 1) % nodes.size()], ethernet, use);
    bool slower = worst.gbps_per_rank < 0 || l.gbps_per_rank < worst.gbps_per_rank ||
                  (l.gbps_per_rank == worst.gbps_per_rank && l.latency_s > worst.latency_s);
    bool crosses = worst.crosses_island || l.crosses_island;
    if (slower) worst = l;
    worst.crosses_island = crosses;
  }
  return worst;
}

LinkShares ring_shares(const Facts& f, std::vector<int> nodes) {
  LinkShares shares{};
  if (nodes.size() < 2) return shares;
  if (!f.tcp_groups) {  // NCCL's ring: each node's members together
    std::vector<int> order;
    for (int n : nodes)
      if (std::find(order.begin(), order.end(), n) == order.end()) order.push_back(n);
    std::stable_sort(nodes.begin(), nodes.end(), [&](int a, int b) {
      return std::find(order.begin(), order.end(), a) < std::find(order.begin(), order.end(), b);
    });
  }
  const bool ethernet = group_on_ethernet(f, nodes, true);
  for (size_t i = 0; i < nodes.size(); ++i)
    shares[static_cast<int>(link_between(f, nodes[i], nodes[(i + 1) % nodes.size()], ethernet).kind)] +=
        1.0 / double(nodes.size());
  return shares;
}

LinkShares pair_shares(const Facts& f, const std::vector<int>& nodes) {
  LinkShares shares{};
  const size_t d = nodes.size();
  if (d < 2) return shares;
  const bool ethernet = group_on_ethernet(f, nodes, true);  // a mesh crosses where its ring does
  for (size_t i = 0; i < d; ++i)
    for (size_t j = 0; j < d; ++j)
      if (i != j)
        shares[static_cast<int>(link_between(f, nodes[i], nodes[j], ethernet).kind)] += 1.0 / double(d * (d - 1));
  return shares;
}

namespace {

// The ring's alpha-beta time, (d - 1) steps of a 1/d chunk each (or twice for an all-reduce).
double ring_steps_s(const LinkCost& l, int d, double bytes) {
  return (d - 1) * (l.latency_s + bytes / d * 8.0 / (l.gbps_for(bytes / d) * 1e9));
}

}  // namespace

double ring_all_reduce_s(const LinkCost& l, int d, double bytes) {
  if (d < 2 || l.gbps_per_rank <= 0) return 0;
  if (const auto t = l.curves.seconds("all_reduce", d, bytes)) return *t;
  return 2.0 * ring_steps_s(l, d, bytes);
}

double ring_reduce_scatter_s(const LinkCost& l, int d, double bytes) {
  if (d < 2 || l.gbps_per_rank <= 0) return 0;
  if (const auto t = l.curves.seconds("reduce_scatter", d, bytes)) return *t;
  return ring_steps_s(l, d, bytes);
}

double ring_all_gather_s(const LinkCost& l, int d, double bytes) {
  if (d < 2 || l.gbps_per_rank <= 0) return 0;
  if (const auto t = l.curves.seconds("all_gather", d, bytes)) return *t;
  return ring_steps_s(l, d, bytes);
}

double group_all_reduce_s(const LinkCost& ring, const GroupSpan& span, int d, double bytes) {
  const double flat = ring_all_reduce_s(ring, d, bytes);
  if (!span.hierarchical()) return flat;
  const double hier = ring_reduce_scatter_s(span.intra, span.per_node, bytes) +
                      ring_all_reduce_s(span.inter, span.nodes, bytes) +
                      ring_all_gather_s(span.intra, span.per_node, bytes);
  return std::min(flat, hier);
}

double group_reduce_scatter_s(const LinkCost& ring, const GroupSpan& span, int d, double bytes) {
  const double flat = ring_reduce_scatter_s(ring, d, bytes);
  if (!span.hierarchical()) return flat;
  return std::min(flat, ring_reduce_scatter_s(span.intra, span.per_node, bytes) +
                            ring_reduce_scatter_s(span.inter, span.nodes, bytes));
}

double group_all_gather_s(const LinkCost& ring, const GroupSpan& span, int d, double bytes) {
  const double flat = ring_all_gather_s(ring, d, bytes);
  if (!span.hierarchical()) return flat;
  return std::min(flat, ring_all_gather_s(span.inter, span.nodes, bytes) +
                            ring_all_gather_s(span.intra, span.per_node, bytes));
}

NicUse span_use(const Facts& f, std::vector<std::vector<int>> groups) {
  for (std::vector<int>& g : groups) std::sort(g.begin(), g.end());
  return nic_use(f, groups, true);
}

GroupSpan group_span(const Facts& f, const std::vector<int>& nodes, const NicUse* use) {
  GroupSpan span;
  if (f.tcp_groups || nodes.size() < 2) return span;
  std::vector<int> distinct;
  std::map<int, int> count;
  for (int n : nodes)
    if (count[n]++ == 0) distinct.push_back(n);
  if (distinct.size() < 2) return span;
  span.nodes = static_cast<int>(distinct.size());
  for (const auto& [n, k] : count) span.per_node = std::max(span.per_node, k);
  if (span.per_node < 2) return span;
  span.intra = link_between(f, distinct.front(), distinct.front());
  // A node's port to one group's local rings at a time (each ring carries its share of the
  // bytes), shared with the other groups of the kind that leave the node.
  NicUse alone;
  alone.ethernet.assign(f.nodes.size(), 1);
  alone.island.assign(f.nodes.size(), 1);
  span.inter = ring_bottleneck(f, distinct, use ? use : &alone);
  return span;
}

}  // namespace holmes::plan
