// What the NCCL groups need from a plan (engine/plan/nccl.hpp): the per-node environment on
// the shipped examples and on generated clusters, the link layers of RDMA groups, and the
// order in which each rank creates its communicators.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <map>
#include <random>
#include <set>

#include "engine/plan/cost_model.hpp"
#include "engine/plan/groups.hpp"
#include "engine/plan/nccl.hpp"
#include "engine/plan/plan.hpp"
#include "engine/spec/load.hpp"
#include "engine/topo/cluster.hpp"
#include "engine/topo/topology_file.hpp"
#include "test/support/cluster_gen.hpp"

namespace hp = holmes::plan;
namespace ht = holmes::topo;
namespace fs = std::filesystem;

namespace {

std::map<std::string, std::string> env_map(const hp::Plan& p, int node) {
  std::map<std::string, std::string> out;
  for (const auto& v : hp::nccl_env(p, node)) {
    REQUIRE(out.count(v.name) == 0);  // each variable once
    REQUIRE_FALSE(v.why.empty());
    out[v.name] = v.value;
  }
  return out;
}

// The NIC of `report` that a NCCL_IB_HCA entry "name:port" names.
const ht::Nic* port_named(const ht::NodeReport& report, const std::string& entry) {
  for (const auto& nic : report.nics)
    if (nic.kind == ht::NicKind::kIb || nic.kind == ht::NicKind::kRoce)
      if (entry == (nic.port > 0 ? nic.name + ":" + std::to_string(nic.port) : nic.name)) return &nic;
  return nullptr;
}

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= list.size()) {
    size_t comma = list.find(',', at);
    if (comma == std::string::npos) comma = list.size();
    out.push_back(list.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

// The contract of nccl_env for every node of a plan, checked against the topology it was
// made from: the island's active ports of the island's kind and fabric, exact-match syntax,
// the RoCE GID index, the Ethernet interface (loopback on one machine).
void check_env(const hp::Plan& p, const ht::ClusterTopology& t) {
  for (int n = 0; n < static_cast<int>(t.nodes.size()); ++n) {
    INFO("node " << n << " (" << t.nodes[n].hostname << ")");
    auto env = env_map(p, n);
    if (!hp::uses_nccl(p)) {  // CPU plans, and GPU plans whose groups all stage through Gloo
      REQUIRE(env.empty());
      continue;
    }
    const ht::Island& isl = t.islands[t.island_of[n]];
    const std::string iface = t.nodes.size() == 1 ? "lo" : t.tcp_interface(n, false);
    REQUIRE(env.at("NCCL_SOCKET_IFNAME") == "=" + iface);
    REQUIRE(env.at("NCCL_SOCKET_FAMILY") == "AF_INET");
    std::set<std::string> expected;
    int gid = -1;
    for (const auto& nic : t.nodes[n].nics)
      if (nic.active && nic.kind == isl.kind && isl.kind != ht::NicKind::kEthernet &&
          (isl.fabric.empty() || nic.fabric.empty() || nic.fabric == isl.fabric)) {
        expected.insert(nic.name + ":" + std::to_string(nic.port));
        if (nic.gid_index >= 0 && (gid < 0 || nic.gid_index < gid)) gid = nic.gid_index;
      }
    if (expected.empty()) {
      REQUIRE(env.count("NCCL_IB_HCA") == 0);
      REQUIRE(env.count("NCCL_IB_GID_INDEX") == 0);
      continue;
    }
    const std::string hca = env.at("NCCL_IB_HCA");
    REQUIRE(hca.front() == '=');
    const auto listed = split(hca.substr(1));
    REQUIRE(std::set<std::string>(listed.begin(), listed.end()) == expected);
    REQUIRE(listed.size() == expected.size());
    for (const auto& entry : listed) REQUIRE(port_named(t.nodes[n], entry)->kind == isl.kind);
    if (isl.kind == ht::NicKind::kRoce && gid >= 0) REQUIRE(env.at("NCCL_IB_GID_INDEX") == std::to_string(gid));
    else REQUIRE(env.count("NCCL_IB_GID_INDEX") == 0);
  }
}

ht::NicKind kind_of(hp::Transport t) { return t == hp::Transport::kNcclIb ? ht::NicKind::kIb : ht::NicKind::kRoce; }

// No RDMA group mixes link layers: its members share one island, whose kind is the
// transport's, and every port offered to it (the group's and each member node's
// NCCL_IB_HCA) is of that kind.
void check_link_layers(const hp::Plan& p, const ht::ClusterTopology& t) {
  for (const auto& g : p.groups) {
    const bool rdma = g.transport == hp::Transport::kNcclIb || g.transport == hp::Transport::kNcclRoce;
    if (g.crosses_islands) REQUIRE_FALSE(rdma);
    if (!rdma) continue;
    INFO(hp::group_name(g) << " " << hp::to_string(g.transport));
    const int island = t.island_of[p.ranks[g.ranks[0]].node];
    REQUIRE(t.islands[island].kind == kind_of(g.transport));
    for (int r : g.ranks) {
      const int node = p.ranks[r].node;
      REQUIRE(t.island_of[node] == island);
      REQUIRE(hp::nccl_net(p, g, node) == "IB");
      for (const auto& entry : split(env_map(p, node).at("NCCL_IB_HCA").substr(1)))
        REQUIRE(port_named(t.nodes[node], entry)->kind == kind_of(g.transport));
    }
    // The group's list is the union of its members' ports (names are per node).
    for (const auto& entry : g.hcas) {
      bool found = false;
      for (int r : g.ranks) {
        const auto& mine = p.node_nets[p.ranks[r].node].hcas;
        found |= std::find(mine.begin(), mine.end(), entry) != mine.end();
      }
      REQUIRE(found);
    }
  }
}

// A random node: Ethernet always; IB and/or RoCE ports on one of two fabrics each (RoCE
// ports sometimes on none), some down, so nodes with both link layers and islands of one
// kind on several fabrics occur.
ht::NodeReport random_node(std::mt19937& rng, int index, int devices) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  ht::NodeReport n;
  n.hostname = "node" + std::to_string(index);
  n.devices.kind = "cuda";
  n.devices.count = devices;
  n.devices.name = "test-gpu";
  n.devices.memory_gb = 80;
  n.devices.peak_tflops = 400;
  ht::Nic eth;
  eth.name = eth.netdev = pick(0, 3) == 0 ? "ens3" : "eth0";
  eth.kind = ht::NicKind::kEthernet;
  eth.active = true;
  eth.rate_gbps = 25;
  eth.addresses = {"192.168.0." + std::to_string(index + 1) + "/24"};
  n.nics.push_back(eth);
  int next = 0;
  for (ht::NicKind kind : {ht::NicKind::kIb, ht::NicKind::kRoce}) {
    if (pick(0, 2) == 0) continue;
    const int fabric = pick(0, 1);
    for (int k = pick(1, 3); k > 0; --k) {
      ht::Nic r;
      r.name = "mlx5_" + std::to_string(next++);
      r.kind = kind;
      r.port = 1;
      r.active = pick(0, 5) != 0;
      r.rate_gbps = 100.0 * pick(1, 4);
      if (kind == ht::NicKind::kIb) {
        r.fabric = fabric ? "fe80:0000:0000:0001" : "fe80:0000:0000:0002";
      } else {
        r.netdev = "ens" + std::to_string(10 + next);
        // A RoCE port without an IPv4 address has no known fabric (topology.hpp).
        r.fabric = pick(0, 3) == 0 ? "" : fabric ? "10.1.0.0/16" : "10.2.0.0/16";
        r.gid_index = pick(0, 3);
        r.roce_version = 2;
      }
      n.nics.push_back(r);
    }
  }
  return n;
}

hp::Plan plan_file(const std::string& config, const std::string& topology, ht::ClusterTopology& t,
                   const std::vector<std::string>& sets = {}) {
  auto spec = holmes::spec::load_job_spec(config, sets).spec;
  t = ht::build_cluster(ht::load_topology_file(topology));
  return hp::make_plan(spec, t);
}

}  // namespace

TEST_CASE("NCCL environment of every node of the shipped examples", "[nccl]") {
  const fs::path root = HOLMES_SOURCE_DIR;
  int cuda_nodes = 0, roce_nodes = 0;
  // Each example job on its own topology, then every shipped topology under a small job with
  // auto degrees.
  std::vector<std::pair<std::string, std::string>> cases = {
      {"configs/ib-roce-7b.yaml", "configs/topologies/ib-roce-7b-topology.yaml"},
      {"configs/ib-ethernet.yaml", "configs/topologies/ib-ethernet-topology.yaml"}};
  for (const auto& f : fs::directory_iterator(root / "configs/topologies"))
    cases.emplace_back("configs/default.yaml", fs::relative(f.path(), root).string());
  // The default job is too small for the big clusters: a model with room for their degrees.
  const std::vector<std::string> wider = {"model.layers=16", "model.heads=16", "model.hidden=256",
                                          "train.micro_batch=1", "train.global_batch=256"};
  for (const auto& [config, topology] : cases) {
    INFO(config << " on " << topology);
    ht::ClusterTopology t;
    hp::Plan p = plan_file((root / config).string(), (root / topology).string(), t,
                           config == "configs/default.yaml" ? wider : std::vector<std::string>{});
    check_env(p, t);
    check_link_layers(p, t);
    for (int n = 0; n < static_cast<int>(t.nodes.size()); ++n) {
      cuda_nodes += p.device_kind == "cuda";
      roce_nodes += env_map(p, n).count("NCCL_IB_GID_INDEX");
    }
  }
  CHECK(cuda_nodes >= 8);  // the examples do exercise the CUDA case ...
  CHECK(roce_nodes >= 4);  // ... and RoCE nodes
  // A spot check by hand: the RoCE cluster of the 7B example uses GID index 3 on eight ports.
  ht::ClusterTopology t;
  hp::Plan p = plan_file((root / "configs/ib-roce-7b.yaml").string(),
                         (root / "configs/topologies/ib-roce-7b-topology.yaml").string(), t);
  auto roce = env_map(p, 4);
  CHECK(p.hostnames[4] == "roce-node0");
  CHECK(roce.at("NCCL_IB_GID_INDEX") == "3");
  CHECK(split(roce.at("NCCL_IB_HCA").substr(1)).size() == 8);
  CHECK(env_map(p, 0).count("NCCL_IB_GID_INDEX") == 0);  // an IB node
}

TEST_CASE("no RDMA group mixes IB and RoCE, DP groups stay in islands, over generated clusters", "[nccl]") {
  std::mt19937 rng(1414);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int rdma_groups = 0, mixed_nodes = 0, perfect_cases = 0;
  for (int iter = 0; iter < 250; ++iter) {
    const int devices = std::vector<int>{1, 2, 4, 8}[pick(0, 3)];
    std::vector<ht::NodeReport> nodes;
    for (int i = pick(1, 12); i > 0; --i) nodes.push_back(random_node(rng, static_cast<int>(nodes.size()), devices));
    for (const auto& n : nodes) mixed_nodes += ht::rdma_fabrics(n).size() > 1;
    const ht::ClusterTopology t = ht::build_cluster(nodes);
    auto [tp, pp, dp] = hp::testing::random_degrees(rng, devices, devices * static_cast<int>(nodes.size()), 16);
    auto spec = hp::testing::make_spec(16, 256, 16, tp, pp, dp, 1, dp * pick(1, 4), 128);
    using P = holmes::spec::Placement;
    spec.parallel.placement = std::vector<P>{P::kHolmes, P::kHolmes, P::kNaive, P::kMegatron}[pick(0, 3)];
    INFO("iteration " << iter << ": " << nodes.size() << " nodes, tp " << tp << " pp " << pp << " dp " << dp << ", "
                      << spec.parallel.placement);
    const hp::Plan p = hp::make_plan(spec, t);
    check_env(p, t);
    check_link_layers(p, t);
    const bool perfect = spec.parallel.placement == holmes::spec::Placement::kHolmes && hp::testing::perfect_layout_exists(t, tp, dp);
    perfect_cases += perfect;
    for (const auto& g : p.groups) {
      rdma_groups += g.transport == hp::Transport::kNcclIb || g.transport == hp::Transport::kNcclRoce;
      if (perfect && g.kind == hp::kDpGroup) REQUIRE_FALSE(g.crosses_islands);
    }
  }
  // The generator must produce the cases that matter.
  CHECK(rdma_groups > 100);
  CHECK(mixed_nodes > 100);
  CHECK(perfect_cases > 30);
}

TEST_CASE("each rank creates its NCCL communicators in plan order, the same order on every rank", "[nccl]") {
  std::mt19937 rng(77);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int iter = 0; iter < 60; ++iter) {
    const int devices = std::vector<int>{1, 2, 4}[pick(0, 2)];
    std::vector<ht::NodeReport> nodes;
    for (int i = pick(1, 6); i > 0; --i) nodes.push_back(random_node(rng, static_cast<int>(nodes.size()), devices));
    const ht::ClusterTopology t = ht::build_cluster(nodes);
    const hp::Plan p = hp::make_plan(hp::testing::make_spec(8, 128, 8, 0, 0, 0, 1, 64, 64), t);
    std::set<std::string> names;
    for (const auto& g : p.groups) REQUIRE(names.insert(hp::group_name(g)).second);
    std::vector<std::vector<hp::NcclComm>> per_rank;
    for (int r = 0; r < p.world; ++r) {
      auto comms = hp::nccl_communicators(p, r);
      // Brute force: the groups of two or more members holding r, in plan.groups order.
      std::vector<int> expected;
      for (int i = 0; i < static_cast<int>(p.groups.size()); ++i)
        if (p.groups[i].ranks.size() > 1 &&
            std::count(p.groups[i].ranks.begin(), p.groups[i].ranks.end(), r) == 1)
          expected.push_back(i);
      REQUIRE(comms.size() == expected.size());
      for (size_t k = 0; k < comms.size(); ++k) {
        const hp::Group& g = p.groups[comms[k].group];
        REQUIRE(comms[k].group == expected[k]);
        REQUIRE(comms[k].name == hp::group_name(g));
        REQUIRE(comms[k].ranks == g.ranks);
        REQUIRE(comms[k].net == (g.transport == hp::Transport::kNcclSocket ? "Socket"
                                 : g.transport == hp::Transport::kIntraNode ? comms[k].net
                                                                             : "IB"));
      }
      per_rank.push_back(std::move(comms));
    }
    // Any two ranks meet their common communicators in the same order and agree on the net.
    for (int a = 0; a < p.world; ++a)
      for (int b = a + 1; b < p.world; ++b) {
        std::vector<std::pair<int, std::string>> in_a, in_b;
        std::set<int> of_b;
        for (const auto& c : per_rank[b]) of_b.insert(c.group);
        for (const auto& c : per_rank[a])
          if (of_b.count(c.group)) in_a.emplace_back(c.group, c.net);
        std::set<int> of_a;
        for (const auto& c : per_rank[a]) of_a.insert(c.group);
        for (const auto& c : per_rank[b])
          if (of_a.count(c.group)) in_b.emplace_back(c.group, c.net);
        REQUIRE(in_a == in_b);
      }
  }
}

TEST_CASE("CPU plans have no NCCL environment and no NCCL communicators", "[nccl]") {
  auto t = hp::testing::make_cluster({{ht::NicKind::kIb, 2, 2}});
  for (auto& n : t.nodes) n.devices.kind = "cpu";
  const hp::Plan p = hp::make_plan(hp::testing::make_spec(4, 64, 4, 0, 0, 0, 1, 8, 32), t);
  REQUIRE(p.device_kind == "cpu");
  for (int n = 0; n < 2; ++n) CHECK(hp::nccl_env(p, n).empty());
  for (int r = 0; r < p.world; ++r) CHECK(hp::nccl_communicators(p, r).empty());
  CHECK_THROWS_AS(hp::nccl_net(p, p.groups.back(), 0), std::invalid_argument);  // gloo-tcp
  CHECK_THROWS_AS(hp::nccl_env(p, 2), std::out_of_range);
}

TEST_CASE("one machine: NCCL bootstraps over loopback, intra-node groups name no network", "[nccl]") {
  auto t = hp::testing::make_cluster({{ht::NicKind::kRoce, 1, 4}});
  const hp::Plan p = hp::make_plan(hp::testing::make_spec(4, 64, 4, 2, 1, 2, 1, 8, 32), t);
  auto env = env_map(p, 0);
  CHECK(env.at("NCCL_SOCKET_IFNAME") == "=lo");
  CHECK(env.at("NCCL_IB_HCA") == "=mlx5_0:1");
  CHECK(env.at("NCCL_IB_GID_INDEX") == "3");
  // A node-local group names no network: NCCL then loads no plugin (a container without
  // /dev/infiniband still connects it over NVLink, P2P or shared memory).
  REQUIRE_FALSE(hp::nccl_communicators(p, 0).empty());
  for (const auto& c : hp::nccl_communicators(p, 0)) CHECK(c.net.empty());
  auto e = hp::testing::make_cluster({{ht::NicKind::kEthernet, 1, 4}});
  const hp::Plan q = hp::make_plan(hp::testing::make_spec(4, 64, 4, 2, 1, 2, 1, 8, 32), e);
  CHECK(env_map(q, 0).count("NCCL_IB_HCA") == 0);
  for (const auto& c : hp::nccl_communicators(q, 0)) CHECK(c.net.empty());
}

TEST_CASE("parallel.cross_island picks the transport of a GPU job's Ethernet groups", "[nccl]") {
  const fs::path root = HOLMES_SOURCE_DIR;
  const std::string config = (root / "configs/ib-roce-7b.yaml").string();
  const std::string topology = (root / "configs/topologies/ib-roce-7b-topology.yaml").string();
  auto ethernet_groups = [](const hp::Plan& p) {
    std::vector<const hp::Group*> out;
    for (const auto& g : p.groups)
      if (g.crosses_nodes && (g.link == hp::LinkKind::kEthernet)) out.push_back(&g);
    return out;
  };
  ht::ClusterTopology t;
  const hp::Plan automatic = plan_file(config, topology, t);
  REQUIRE(automatic.device_kind == "cuda");
  REQUIRE_FALSE(ethernet_groups(automatic).empty());  // the islands are joined by Ethernet
  // auto: the cost model's faster for the pipeline message; NCCL overlaps its host copies.
  for (const hp::Group* g : ethernet_groups(automatic)) CHECK(g->transport == hp::Transport::kNcclSocket);
  const hp::Plan gloo = plan_file(config, topology, t, {"parallel.cross_island=gloo"});
  REQUIRE(gloo.groups.size() == automatic.groups.size());
  for (size_t i = 0; i < gloo.groups.size(); ++i) {
    const hp::Group& a = automatic.groups[i];
    const hp::Group& g = gloo.groups[i];
    INFO(hp::group_name(g));
    // Only the Ethernet groups change; RDMA and intra-node groups keep NCCL.
    CHECK(g.transport == (a.transport == hp::Transport::kNcclSocket ? hp::Transport::kGlooTcp : a.transport));
    CHECK(g.interface == a.interface);
  }
  // gloo-tcp groups are no NCCL communicator of any rank: the trainer stages them through Gloo.
  for (int r = 0; r < gloo.world; ++r)
    for (const auto& c : hp::nccl_communicators(gloo, r))
      CHECK(gloo.groups[c.group].transport != hp::Transport::kGlooTcp);
  const hp::Plan nccl = plan_file(config, topology, t, {"parallel.cross_island=nccl-socket"});
  for (size_t i = 0; i < nccl.groups.size(); ++i) CHECK(nccl.groups[i].transport == automatic.groups[i].transport);
}

TEST_CASE("cross-island transfer costs: the staged Gloo path adds two host copies", "[nccl]") {
  hp::LinkCost link;
  link.kind = hp::LinkKind::kEthernet;
  link.gbps_per_rank = 25;
  link.latency_s = 50e-6;
  const double bytes = 48.0 * 1024 * 1024;
  const double nccl = hp::ethernet_transfer_s(hp::Transport::kNcclSocket, bytes, link);
  const double gloo = hp::ethernet_transfer_s(hp::Transport::kGlooTcp, bytes, link);
  CHECK(nccl == Approx(50e-6 + bytes * 8 / 25e9));
  CHECK(gloo == Approx(nccl + 2 * bytes / (hp::kHostCopyGBps * 1e9)));
  CHECK(hp::ethernet_transport({holmes::spec::CrossIsland::kAuto, bytes}, link) == hp::Transport::kNcclSocket);
  CHECK(hp::ethernet_transport({holmes::spec::CrossIsland::kGloo, bytes}, link) == hp::Transport::kGlooTcp);
  CHECK(hp::ethernet_transport({holmes::spec::CrossIsland::kNcclSocket, bytes}, link) == hp::Transport::kNcclSocket);
}

namespace {

bool all_gloo(const hp::Plan& p) {
  for (const auto& g : p.groups)
    if (g.ranks.size() > 1 && g.transport != hp::Transport::kGlooTcp) return false;
  return true;
}

bool warns(const hp::Plan& p, const std::string& text) {
  return std::any_of(p.warnings.begin(), p.warnings.end(),
                     [&](const std::string& w) { return w.find(text) != std::string::npos; });
}

}  // namespace

TEST_CASE("parallel.nccl decides in the plan whether device buffers go over NCCL or stage through Gloo", "[nccl]") {
  auto t = hp::testing::make_cluster({{ht::NicKind::kIb, 2, 4}, {ht::NicKind::kRoce, 2, 4}});
  auto spec = hp::testing::make_spec(8, 256, 16, 4, 2, 2, 1, 16, 128);
  const hp::Plan nccl = hp::make_plan(spec, t);
  REQUIRE(hp::uses_nccl(nccl));
  CHECK_FALSE(hp::nccl_env(nccl, 0).empty());

  // off: every group is gloo-tcp (staged), no NCCL environment or communicator, a warning
  // says why, the estimate pays the staging, and the hash differs.
  spec.parallel.nccl = holmes::spec::NcclMode::kOff;
  const hp::Plan off = hp::make_plan(spec, t);
  CHECK(all_gloo(off));
  CHECK_FALSE(hp::uses_nccl(off));
  for (int n = 0; n < 4; ++n) CHECK(hp::nccl_env(off, n).empty());
  for (int r = 0; r < off.world; ++r) CHECK(hp::nccl_communicators(off, r).empty());
  CHECK(warns(off, "parallel.nccl is off"));
  CHECK(off.estimate.step_time_s > nccl.estimate.step_time_s);
  CHECK(hp::plan_hash(off) != hp::plan_hash(nccl));
  // Inside an island the staged groups bind to the island's TCP interface, across to Ethernet.
  for (const auto& g : off.groups)
    if (g.ranks.size() > 1 && !g.crosses_nodes) CHECK(g.interface == "lo");

  // auto: a node without libnccl puts the whole job on Gloo, naming the node; on refuses.
  spec.parallel.nccl = holmes::spec::NcclMode::kAuto;
  auto missing = t;
  missing.nodes[2].devices.nccl = false;
  const hp::Plan fallback = hp::make_plan(spec, missing);
  CHECK(all_gloo(fallback));
  CHECK(warns(fallback, "no libnccl on " + missing.nodes[2].hostname));
  spec.parallel.nccl = holmes::spec::NcclMode::kOn;
  try {
    hp::make_plan(spec, missing);
    FAIL("parallel.nccl on without libnccl was accepted");
  } catch (const holmes::UserError& e) {
    CHECK_THAT(e.what(), Catch::Contains("parallel.nccl: 'on'") && Catch::Contains(missing.nodes[2].hostname) &&
                             Catch::Contains("accepted here: auto or off"));
  }

  // Ranks sharing a GPU: auto stages through Gloo, on uses NCCL with a warning.
  auto shared = t;
  for (auto& n : shared.nodes) n.devices.per_gpu = 2;
  spec.parallel.nccl = holmes::spec::NcclMode::kAuto;
  const hp::Plan shared_auto = hp::make_plan(spec, shared);
  CHECK(all_gloo(shared_auto));
  CHECK(warns(shared_auto, "ranks share a GPU"));
  spec.parallel.nccl = holmes::spec::NcclMode::kOn;
  const hp::Plan shared_on = hp::make_plan(spec, shared);
  CHECK(hp::uses_nccl(shared_on));
  CHECK(warns(shared_on, "NCCL_HOSTID"));

  // CPU plans ignore the key.
  auto cpu = t;
  for (auto& n : cpu.nodes) n.devices.kind = "cpu";
  spec.parallel.nccl = holmes::spec::NcclMode::kOff;
  const uint64_t off_hash = hp::plan_hash(hp::make_plan(spec, cpu));
  spec.parallel.nccl = holmes::spec::NcclMode::kOn;
  CHECK(hp::plan_hash(hp::make_plan(spec, cpu)) == off_hash);
}
