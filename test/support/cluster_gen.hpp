// Small generator of ClusterTopology values for the planner tests: islands of nodes with a
// NIC kind each, filled in directly (no dependency on the topology engineer's builder).
#pragma once

#include <array>
#include <random>
#include <string>
#include <vector>

#include "engine/spec/job_spec.hpp"
#include "engine/topo/topology.hpp"

namespace holmes::plan::testing {

struct IslandSpec {
  topo::NicKind kind = topo::NicKind::kIb;  // Ib, Roce or Ethernet
  int nodes = 1;
  int devices = 8;            // per node
  double rdma_gbps = 400;     // per node
  double ethernet_gbps = 25;  // per node
  double peak_tflops = 400;
};

inline topo::NodeReport make_node(const std::string& host, const IslandSpec& s, int island) {
  topo::NodeReport n;
  n.hostname = host;
  n.devices.kind = "cuda";
  n.devices.count = s.devices;
  n.devices.name = "test-gpu";
  n.devices.memory_gb = 80;
  n.devices.peak_tflops = s.peak_tflops;
  topo::Nic eth;
  eth.name = "eth0";
  eth.kind = topo::NicKind::kEthernet;
  eth.active = true;
  eth.rate_gbps = s.ethernet_gbps;
  eth.netdev = "eth0";
  n.nics.push_back(eth);
  if (s.kind != topo::NicKind::kEthernet) {
    topo::Nic r;
    r.name = "mlx5_0";
    r.kind = s.kind;
    r.active = true;
    r.rate_gbps = s.rdma_gbps;
    r.port = 1;
    r.netdev = s.kind == topo::NicKind::kRoce ? "ens1f0" : "";
    r.fabric = "fabric-" + std::to_string(island);
    r.gid_index = s.kind == topo::NicKind::kRoce ? 3 : -1;
    n.nics.push_back(r);
  }
  return n;
}

// Islands in the given order; nodes numbered island by island unless `interleave` deals
// them round-robin (so a naive order mixes islands).
inline topo::ClusterTopology make_cluster(const std::vector<IslandSpec>& islands, bool interleave = false) {
  topo::ClusterTopology t;
  std::vector<std::pair<int, int>> order;  // (island, member)
  if (!interleave) {
    for (int i = 0; i < static_cast<int>(islands.size()); ++i)
      for (int k = 0; k < islands[i].nodes; ++k) order.emplace_back(i, k);
  } else {
    for (int k = 0, left = 1; left; ++k) {
      left = 0;
      for (int i = 0; i < static_cast<int>(islands.size()); ++i)
        if (k < islands[i].nodes) order.emplace_back(i, k), left = 1;
    }
  }
  t.islands.resize(islands.size());
  for (int i = 0; i < static_cast<int>(islands.size()); ++i) {
    t.islands[i].id = i;
    t.islands[i].kind = islands[i].kind;
    t.islands[i].rdma_gbps_per_node = islands[i].kind == topo::NicKind::kEthernet ? 0 : islands[i].rdma_gbps;
  }
  for (auto [i, k] : order) {
    int n = static_cast<int>(t.nodes.size());
    t.nodes.push_back(make_node("i" + std::to_string(i) + "n" + std::to_string(k), islands[i], i));
    t.island_of.push_back(i);
    t.islands[i].nodes.push_back(n);
  }
  return t;
}

// Does a layout with every stage inside one island exist? (TP in a node, so a stage is dp
// blocks of tp devices; each island must hold whole stages.)
inline bool perfect_layout_exists(const topo::ClusterTopology& t, int tp, int dp) {
  std::vector<int> devices(t.islands.size(), 0);
  for (size_t n = 0; n < t.nodes.size(); ++n) {
    if (t.nodes[n].devices.count % tp != 0) return false;
    devices[t.island_of[n]] += t.nodes[n].devices.count;
  }
  for (int d : devices)
    if (d % (tp * dp) != 0) return false;
  return true;
}

// Random degrees (tp, pp, dp) for `world` devices with tp a power of two inside a node of
// `devices` and pp <= max_pp, drawn with `rng`.
template <class Rng>
std::array<int, 3> random_degrees(Rng& rng, int devices, int world, int max_pp) {
  std::vector<std::array<int, 3>> options;
  for (int tp = 1; tp <= devices; tp *= 2)
    for (int pp = 1; pp <= max_pp; ++pp)
      if (world % (tp * pp) == 0) options.push_back({tp, pp, world / (tp * pp)});
  return options[std::uniform_int_distribution<size_t>(0, options.size() - 1)(rng)];
}

// A GPT job with the given degrees (0 = auto) and batch.
inline spec::JobSpec make_spec(int layers, int hidden, int heads, int tp, int pp, int dp, int micro_batch = 1,
                               int global_batch = 64, int seq_len = 1024) {
  spec::JobSpec s;
  s.model.layers = layers;
  s.model.hidden = hidden;
  s.model.heads = heads;
  s.model.vocab_size = 50257;
  s.model.max_seq_len = seq_len;
  s.train.seq_len = seq_len;
  s.train.micro_batch = micro_batch;
  s.train.global_batch = global_batch;
  s.parallel.tensor = tp;
  s.parallel.pipeline = pp;
  s.parallel.data = dp;
  // The planner's tests price the NCCL groups a real GPU cluster runs (the default is off
  // until checked on a GPU; the staged plans have tests of their own).
  s.parallel.nccl = spec::NcclMode::kAuto;
  return s;
}

}  // namespace holmes::plan::testing
