// Replica plans (replicas.hpp): split the cluster, plan one replica with today's planner,
// lay the others alike, add the outer groups and price the outer sync.
#include "engine/plan/replicas.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "common/errors.hpp"
#include "common/format.hpp"
#include "engine/plan/cost_model.hpp"
#include "engine/plan/groups.hpp"
#include "engine/plan/links.hpp"
#include "engine/plan/nccl.hpp"

namespace holmes::plan {

std::vector<std::vector<ReplicaPart>> split_replicas(const topo::ClusterTopology& topology, int replicas) {
  int devices = 0;
  for (const auto& n : topology.nodes) devices += n.devices.count;
  if (replicas < 1 || devices % replicas != 0)
    throw UserError(fmt::format("parallel.replicas = {} does not divide the cluster's {}: every replica is the same "
                                "plan, so each needs {} / {} devices; accepted: a divisor of {}", replicas,
                                count_of(devices, "device"), devices, replicas, devices));
  const int per = devices / replicas;
  // Nodes island by island (islands by id, nodes ascending), so a replica stays in one island
  // whenever the island's devices are a multiple of a replica's.
  std::vector<int> order;
  for (const auto& isl : topology.islands) order.insert(order.end(), isl.nodes.begin(), isl.nodes.end());
  for (int n = 0; n < static_cast<int>(topology.nodes.size()); ++n)
    if (std::find(order.begin(), order.end(), n) == order.end()) order.push_back(n);
  std::vector<std::vector<ReplicaPart>> out(1);
  int filled = 0;
  for (int n : order) {
    int local = 0;
    const int count = topology.nodes[n].devices.count;
    while (local < count) {
      if (filled == per) out.emplace_back(), filled = 0;
      const int take = std::min(count - local, per - filled);
      out.back().push_back(ReplicaPart{n, local, take});
      local += take;
      filled += take;
    }
  }
  for (auto& r : out)
    std::sort(r.begin(), r.end(), [](const ReplicaPart& a, const ReplicaPart& b) { return a.node < b.node; });
  return out;
}

topo::ClusterTopology sub_topology(const topo::ClusterTopology& t, const std::vector<ReplicaPart>& parts) {
  topo::ClusterTopology sub;
  sub.calibration = t.calibration;
  std::map<int, int> island_id;  // old -> new
  for (const ReplicaPart& part : parts) {
    const int old = t.island_of.at(part.node);
    auto [it, fresh] = island_id.emplace(old, static_cast<int>(sub.islands.size()));
    if (fresh) {
      topo::Island isl = t.islands.at(old);
      isl.id = it->second;
      isl.nodes.clear();
      sub.islands.push_back(isl);
    }
    sub.islands[it->second].nodes.push_back(static_cast<int>(sub.nodes.size()));
    sub.island_of.push_back(it->second);
    sub.nodes.push_back(t.nodes[part.node]);
    sub.nodes.back().devices.count = part.devices;
  }
  return sub;
}

double small_all_reduce_bytes(double floats, int members) {
  if (members < 2 || floats <= 0) return 0;
  const double segment = std::ceil(floats / (2.0 * members));  // floats a segment
  const double messages = std::min(2.0 * members, std::ceil(floats / segment));
  return 2.0 * (members - 1) * (4 * floats + messages * kSmallMessageOverhead);
}

double agreement_floats(int replicas) { return 2.0 * (2 + replicas); }

double agree_per_step_s(double ring_s, int inner_steps, int fragments) {
  return ring_s * std::max(1, fragments) / std::max(1, inner_steps);
}

double expected_max_normal(int n) {
  if (n <= 1) return 0;
  // Simpson's rule over [-9, 9] (the density beyond is below 1e-17).
  constexpr int kIntervals = 3600;
  constexpr double kLo = -9, kHi = 9, kH = (kHi - kLo) / kIntervals;
  auto f = [n](double x) {
    const double phi = std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
    return x * n * phi * std::pow(0.5 * std::erfc(-x / std::sqrt(2.0)), n - 1);
  };
  double sum = f(kLo) + f(kHi);
  for (int i = 1; i < kIntervals; ++i) sum += (i % 2 ? 4 : 2) * f(kLo + i * kH);
  return sum * kH / 3;
}

double drift_per_step_s(double drift_s, int replicas, int inner_steps, int fragments) {
  const int frags = std::max(1, fragments), steps = std::max(1, inner_steps);
  if (drift_s <= 0 || replicas < 2) return 0;
  const double between = static_cast<double>(steps) / frags;  // steps between two sums
  return expected_max_normal(replicas) * drift_s * std::sqrt(between) * frags / steps;
}

namespace {

// Steps per job-wide reduction of the log figures: every log line, but in a diloco job once per
// outer period at most (engine/train/run.cpp: the replicas meet over the slow links only there).
int log_reduction_steps(const spec::JobSpec& spec, spec::OuterMode mode) {
  const int interval = std::max(1, spec.log.interval);
  const bool diloco = mode == spec::OuterMode::kDiloco && spec.parallel.replicas > 1;
  return diloco ? std::max(interval, std::max(1, spec.parallel.inner_steps)) : interval;
}

}  // namespace

double small_ethernet_bytes_per_step(const spec::JobSpec& spec, const Plan& plan) {
  double bytes = 0;
  for (const Group& g : plan.groups) {
    const int m = static_cast<int>(g.ranks.size());
    if (m < 2 || g.link != LinkKind::kEthernet) continue;
    if (g.kind == kOuterGroup && plan.replicas.hsdp())
      bytes += small_all_reduce_bytes(4, m);  // [loss, stop] as two floats each, every step
    else if (g.kind == kOuterGroup)
      bytes += small_all_reduce_bytes(agreement_floats(m), m) * std::max(1, spec.parallel.fragments) /
               std::max(1, spec.parallel.inner_steps);
    if (g.kind == kWorldGroup)
      bytes += small_all_reduce_bytes(3 + 2 * m, m) / log_reduction_steps(spec, plan.replicas.outer);
  }
  // Elastic sync: every rank off the store's node (rank 0's) counts in, reads the verdict and
  // the announcements each step over TCP on the nodes' Ethernet: a request and a reply each.
  if (plan.replicas.hsdp())
    for (const RankInfo& r : plan.ranks)
      if (r.node != plan.ranks.front().node) bytes += 2 * kVerdictRoundTrips * kStoreMessageBytes;
  return bytes;
}

namespace {

spec::JobSpec one_replica_spec(const spec::JobSpec& spec) {
  spec::JobSpec s = spec;
  s.parallel.replicas = 1;
  s.parallel.outer = spec::OuterMode::kSync;
  s.parallel.outer_overlap = 0;
  s.parallel.elastic = false;  // the job's, not one replica's
  s.train.global_batch = spec.train.global_batch / spec.parallel.replicas;
  return s;
}

// Replica r's plan on its nodes, with the degrees of `first` (replica 0's) when given.
Plan plan_replica(const spec::JobSpec& spec, const topo::ClusterTopology& topology,
                  const std::vector<ReplicaPart>& parts, const Plan* first, int index) {
  spec::JobSpec s = one_replica_spec(spec);
  if (first) {
    s.parallel.tensor = first->tp;
    s.parallel.pipeline = first->pp;
    s.parallel.data = first->dp;
    s.train.micro_batch = first->micro_batch;
  }
  try {
    return plan_one_replica(s, sub_topology(topology, parts));
  } catch (const UserError& e) {
    throw UserError(fmt::format("parallel.replicas = {}: replica {} (nodes {}..{}): {}", spec.parallel.replicas,
                                index, parts.front().node, parts.back().node, e.what()));
  }
}

LinkCost link_of(const Group& g) { return LinkCost{g.link, g.gbps_per_rank, g.latency_s, g.crosses_islands}; }

// The outer group's link as the exchange uses it: at the rate a calibration measured the
// exchange at inside the steps (topo::OuterCalibration, over the link's declared rate), where
// there is one for its link class; else as the group's link (its probed efficiency).
LinkCost exchange_link(const topo::ClusterTopology& topology, const Facts& f, const Group& g) {
  LinkCost l = link_of(g);
  const topo::OuterCalibration& measured = topology.calibration.outer;
  const int k = static_cast<int>(g.link);
  if (measured.efficiency > 0 && measured.link == to_string(g.link) && f.efficiency[k] > 0)
    l.gbps_per_rank = g.gbps_per_rank / f.efficiency[k] * measured.efficiency;
  return l;
}

// The fp32 gradient floats of each stage's shard (one replica's rank at that stage).
std::vector<double> stage_params_of(const Plan& plan) {
  std::vector<double> stage_params(plan.pp, 0);
  for (const RankMemory& m : plan.memory) stage_params[plan.ranks[m.rank].at[Axis::kPp]] = m.grads / 4;
  return stage_params;
}

// The nodes of a group's members, in group-rank order.
std::vector<int> nodes_of(const Plan& plan, const Group& g) {
  std::vector<int> nodes;
  for (int r : g.ranks) nodes.push_back(plan.ranks[r].node);
  return nodes;
}

// Outer groups: one per tp x pp x dp coordinate, members in replica order, in (pp, dp, tp)
// order, indexed, their transports chosen with a node's ports shared by every group that sends
// off it (they all talk at once: nic_use). They carry host copies: Gloo, whatever the link.
std::vector<Group> outer_groups(const Facts& f, const Plan& plan, bool cuda) {
  std::map<std::tuple<int, int, int>, std::vector<int>> by_coord;
  for (const RankInfo& r : plan.ranks) by_coord[{r.at[Axis::kPp], r.at[Axis::kDp], r.at[Axis::kTp]}].push_back(r.rank);
  std::vector<int> replica_of(plan.ranks.size());
  for (const RankInfo& r : plan.ranks) replica_of[r.rank] = r.at[Axis::kReplica];
  std::vector<std::vector<int>> outer_nodes;
  for (auto& [coord, ranks] : by_coord) {
    std::sort(ranks.begin(), ranks.end(), [&](int a, int b) { return replica_of[a] < replica_of[b]; });
    outer_nodes.emplace_back();
    for (int r : ranks) outer_nodes.back().push_back(plan.ranks[r].node);
  }
  const NicUse use = nic_use(f, outer_nodes, true);
  std::vector<Group> out;
  for (auto& [coord, ranks] : by_coord) {
    Group g;
    g.kind = kOuterGroup;
    g.index = static_cast<int>(out.size());
    g.ranks = ranks;
    choose_transport(f, nodes_of(plan, g), cuda, true, g, {}, &use);
    g.transport = Transport::kGlooTcp;
    if (!g.crosses_nodes) g.interface = "lo";
    out.push_back(std::move(g));
  }
  return out;
}

// Outer groups (outer_groups), and the cost of one outer sync: the members of each outer group
// average their slices (1/dp of the shard) by the owner-slice exchange (outer_exchange_bytes),
// then the data-parallel group all-gathers the slices.
void add_outer(const spec::JobSpec& spec, const topo::ClusterTopology& topology, bool cuda, Plan& plan) {
  const Facts f = collect_facts(spec, topology);
  std::vector<int> replica_of(plan.ranks.size());
  for (const RankInfo& r : plan.ranks) replica_of[r.rank] = r.at[Axis::kReplica];
  Replicas& rep = plan.replicas;
  const int n = rep.count;
  const std::vector<double> stage_params = stage_params_of(plan);
  std::map<int, LinkCost> dp_link;  // by stage, replica 0
  for (const Group& g : plan.groups)
    if (g.kind == kDpGroup && !dp_link.count(plan.ranks[g.ranks[0]].at[Axis::kPp]) && replica_of[g.ranks[0]] == 0)
      dp_link[plan.ranks[g.ranks[0]].at[Axis::kPp]] = link_of(g);
  double worst = 0, exposed = 0, bytes = 0;
  // Overlapped (outer_overlap > 0): the exchange runs on the communication thread beside the
  // inner steps, so under a CPU quota its CPU (the bytes a member sends per sync, receiving as
  // many, x the calibrated CPU per byte, amortized over the period) takes from the quota the
  // steps run on. A blocking exchange is not added: its own time, calibrated inside the steps
  // (topo::OuterCalibration), already ran at the quota's share.
  if (rep.overlap > 0 && !cuda && plan.device_kind != "cuda") {
    Estimate& e = plan.estimate;
    const double per_byte = topology.calibration.host_comm_ns() * 1e-9;
    for (size_t s = 0; s < e.quota_cpu_s.size() && s < stage_params.size(); ++s)
      if (e.quota_share[s] < 1)
        e.quota_cpu_s[s] += schedule::outer_exchange_bytes(rep.dtype, std::ceil(stage_params[s] / plan.dp), n) /
                            std::max(1, rep.inner_steps) * per_byte;
    const double rest = e.step_time_s - e.quota_s;
    const double quota = quota_wait_s(e, rest);
    if (e.step_time_s > 0) e.tflops_per_device *= e.step_time_s / (rest + quota);
    e.step_time_s = rest + quota;
    e.quota_s = quota;
  }
  // A replica's step, before the outer sync and without the log steps' exchange (the job's is
  // priced once, over its whole world, in replica_core).
  const double step = plan.estimate.step_time_s - plan.estimate.log_s;
  const int frags = std::max(1, rep.fragments);
  double by_link[kLinkKinds] = {};
  for (Group& g : outer_groups(f, plan, cuda)) {
    const int stage = plan.ranks[g.ranks[0]].at[Axis::kPp];
    const double slice = std::ceil(stage_params[stage] / plan.dp);
    // Owner-slice exchange: the parts to their owners, then the owners' averages to every
    // member; each half moves (N - 1) part payloads per member, as a ring all-gather of N parts.
    const double part = schedule::outer_payload_bytes(rep.dtype, schedule::outer_part(slice, n));
    const double t_outer = 2 * ring_all_gather_s(exchange_link(topology, f, g), n, n * part);
    const double t_dp = plan.dp > 1 ? ring_all_gather_s(dp_link[stage], plan.dp, 4 * slice * plan.dp) : 0;
    worst = std::max(worst, t_outer + t_dp);
    // Overlapped (parallel.outer_overlap = tau): each fragment's exchange runs beside tau inner
    // steps; the steps wait for what is left of it, and for the data-parallel all-gather.
    exposed = std::max(exposed, frags * std::max(0.0, t_outer / frags - rep.overlap * step) + t_dp);
    const double sent = n * schedule::outer_exchange_bytes(rep.dtype, slice, n);  // all members
    bytes += sent;
    const LinkShares kinds = pair_shares(f, nodes_of(plan, g));
    for (int k = 0; k < kLinkKinds; ++k) by_link[k] += sent * kinds[k];
    plan.groups.push_back(std::move(g));
  }
  rep.sync_s = worst;
  rep.exposed_s = exposed;
  rep.sync_bytes = bytes;
  // Before each fragment's exchange each rank also sums [loss, stop flags, replicas' slots]
  // (a few bytes: latency) over its outer group, so that a stop signal reaches every replica at
  // the same step and no replica's non-finite loss reaches an exchange (agree_per_step_s).
  const Group* first = nullptr;
  for (const Group& g : plan.groups)
    if (g.kind == kOuterGroup) first = first ? first : &g;
  rep.agree_s = first ? agree_per_step_s(2.0 * (n - 1) * first->latency_s, rep.inner_steps, frags) : 0;
  // ... and waits there for the replica whose steps since the last sum took longest.
  rep.drift_s = drift_per_step_s(topology.calibration.outer.drift_ms * 1e-3, n, rep.inner_steps, frags);
  rep.per_step_s = exposed / rep.inner_steps + rep.agree_s + rep.drift_s;
  for (int k = 0; k < kLinkKinds; ++k) plan.estimate.bytes_per_step[k] += by_link[k] / rep.inner_steps;
}

// Elastic sync (HSDP): the outer groups (outer_groups), and per step the all-reduce of each
// rank's owned fp32 gradient shard (1/dp of its stage's gradients) over its outer group, after
// the data-parallel reduce-scatter inside the replica and before the update, so nothing
// overlaps it: a ring all-reduce of 4 x slice bytes over N members, each sending
// 2 (N - 1) / N of it. Then the [loss, stop] sum (two doubles as four floats: latency) over the
// outer group every step. The store's verdict before each update is priced in replica_core,
// beside the world group it talks over.
void add_hsdp(const spec::JobSpec& spec, const topo::ClusterTopology& topology, bool cuda, Plan& plan) {
  const Facts f = collect_facts(spec, topology);
  Replicas& rep = plan.replicas;
  const int n = rep.count;
  const std::vector<double> stage_params = stage_params_of(plan);
  double worst = 0, bytes = 0, latency = 0;
  for (Group& g : outer_groups(f, plan, cuda)) {
    const double slice = std::ceil(stage_params[plan.ranks[g.ranks[0]].at[Axis::kPp]] / plan.dp);
    worst = std::max(worst, ring_all_reduce_s(link_of(g), n, 4 * slice));
    const double sent = 2.0 * (n - 1) * 4 * slice;  // all members of the ring together
    bytes += sent;
    const LinkShares kinds = ring_shares(f, nodes_of(plan, g));
    for (int k = 0; k < kLinkKinds; ++k) plan.estimate.bytes_per_step[k] += sent * kinds[k];
    latency = std::max(latency, g.latency_s);
    plan.groups.push_back(std::move(g));
  }
  rep.sync_s = worst;
  rep.exposed_s = worst;
  rep.sync_bytes = bytes;
  rep.agree_s = 2.0 * (n - 1) * latency;
  rep.per_step_s = rep.sync_s + rep.agree_s;
}

// diloco: replica 0 planned by today's planner, the others laid alike on their nodes.
Plan diloco_plan(const spec::JobSpec& spec, const topo::ClusterTopology& topology,
                 const std::vector<std::vector<ReplicaPart>>& nodes) {
  const Plan first = plan_replica(spec, topology, nodes[0], nullptr, 0);
  Plan plan = first;
  plan.world = 0;
  plan.global_batch = spec.train.global_batch;
  plan.ranks.clear();
  plan.groups.clear();
  plan.memory.clear();
  plan.island_order.clear();
  plan.islands.clear();
  plan.hostnames.clear();
  plan.node_nets.clear();
  std::vector<int> first_rank(topology.nodes.size() + 1, 0);
  for (size_t n = 0; n < topology.nodes.size(); ++n) first_rank[n + 1] = first_rank[n] + topology.nodes[n].devices.count;
  plan.ranks.resize(first_rank.back());
  plan.memory.resize(first_rank.back());
  const int replicas = static_cast<int>(nodes.size());
  std::map<int, std::vector<Group>> per_kind;  // by listing_order
  double slowest = 0;
  Estimate bytes_sum;
  for (int r = 0; r < replicas; ++r) {
    const Plan rp = r == 0 ? first : plan_replica(spec, topology, nodes[r], &first, r);
    std::vector<int> to_global(rp.ranks.size());
    const std::vector<ReplicaPart>& parts = nodes[r];
    for (const RankInfo& ri : rp.ranks)
      to_global[ri.rank] = first_rank[parts[ri.node].node] + parts[ri.node].first_local + ri.local_rank;
    for (const RankInfo& ri : rp.ranks) {
      RankInfo g = ri;
      g.rank = to_global[ri.rank];
      g.node = parts[ri.node].node;
      g.local_rank = parts[ri.node].first_local + ri.local_rank;
      g.at[Axis::kReplica] = r;
      plan.ranks[g.rank] = g;
      RankMemory m = rp.memory[ri.rank];
      m.rank = g.rank;
      plan.memory[g.rank] = m;
    }
    for (const Group& g : rp.groups) {
      if (g.kind == kWorldGroup) continue;
      Group out = g;
      for (int& x : out.ranks) x = to_global[x];
      per_kind[listing_order(g.kind)].push_back(std::move(out));
    }
    for (int isl : rp.island_order) {
      const int global = topology.island_of.at(parts[rp.islands.at(isl).nodes.at(0)].node);
      if (std::find(plan.island_order.begin(), plan.island_order.end(), global) == plan.island_order.end())
        plan.island_order.push_back(global);
    }
    if (rp.estimate.step_time_s > slowest) slowest = rp.estimate.step_time_s, plan.estimate = rp.estimate;
    for (int k = 0; k < kLinkKinds; ++k) bytes_sum.bytes_per_step[k] += rp.estimate.bytes_per_step[k];
    for (const std::string& w : rp.warnings)
      if (std::find(plan.warnings.begin(), plan.warnings.end(), w) == plan.warnings.end()) plan.warnings.push_back(w);
    if (r > 0 && rp.islands.size() > 1)
      plan.warnings.push_back(fmt::format("replica {} spans {} islands: its groups cross Ethernet", r, rp.islands.size()));
  }
  if (first.islands.size() > 1)
    plan.warnings.push_back(fmt::format("replica 0 spans {} islands: its groups cross Ethernet", first.islands.size()));
  for (int k = 0; k < kLinkKinds; ++k) plan.estimate.bytes_per_step[k] = bytes_sum.bytes_per_step[k];
  plan.world = first_rank.back();
  // Groups in kind order (tp, pp, dp, embedding), replica after replica: the same on every rank.
  for (auto& [order, kind] : per_kind) {
    int index = 0;
    for (Group& g : kind) g.index = index++, plan.groups.push_back(std::move(g));
  }
  // The islands, host names and networks of the whole cluster.
  const Facts f = collect_facts(spec, topology);
  plan.islands.resize(f.islands);
  for (int i = 0; i < f.islands; ++i) plan.islands[i] = IslandInfo{i, "ethernet", {}, 0};
  for (int n = 0; n < static_cast<int>(f.nodes.size()); ++n) {
    const NodeFacts& nf = f.nodes[n];
    plan.islands[nf.island].kind = to_string(nf.island_link);
    plan.islands[nf.island].nodes.push_back(n);
    plan.islands[nf.island].devices += nf.devices;
    plan.hostnames.push_back(topology.nodes[n].hostname);
    plan.node_nets.push_back(NodeNet{nf.ethernet_if, nf.island_link, nf.hcas, nf.gid_index});
  }
  return plan;
}

// sync: today's plan with data degree dp x N over the whole cluster; the replica of a rank is
// its block of dp data-parallel ranks.
Plan sync_plan(const spec::JobSpec& spec, const topo::ClusterTopology& topology,
               const std::vector<std::vector<ReplicaPart>>& nodes) {
  const Plan first = plan_replica(spec, topology, nodes[0], nullptr, 0);
  spec::JobSpec s = spec;
  s.parallel.replicas = 1;
  s.parallel.outer = spec::OuterMode::kSync;
  s.parallel.outer_overlap = 0;
  s.parallel.elastic = false;  // the job's, not one replica's
  s.parallel.tensor = first.tp;
  s.parallel.pipeline = first.pp;
  s.parallel.data = first.dp * spec.parallel.replicas;
  s.train.micro_batch = first.micro_batch;
  Plan plan = plan_one_replica(s, topology);
  for (RankInfo& r : plan.ranks) r.at[Axis::kReplica] = r.at[Axis::kDp] / first.dp;
  return plan;
}

Plan replica_core(const spec::JobSpec& spec, const topo::ClusterTopology& topology, spec::OuterMode mode) {
  const std::vector<std::vector<ReplicaPart>> nodes = split_replicas(topology, spec.parallel.replicas);
  // Elastic sync replicas train apart as diloco's do (HSDP: a data-parallel group per replica).
  const bool apart = mode == spec::OuterMode::kDiloco || spec.parallel.elastic;
  Plan plan = apart ? diloco_plan(spec, topology, nodes) : sync_plan(spec, topology, nodes);
  Replicas& rep = plan.replicas;
  rep.count = spec.parallel.replicas;
  rep.outer = mode;
  rep.elastic = spec.parallel.elastic;
  rep.inner_steps = spec.parallel.inner_steps;
  rep.fragments = spec.parallel.fragments;
  rep.dtype = spec.parallel.outer_dtype;
  rep.lr = spec.parallel.outer_lr;
  rep.momentum = spec.parallel.outer_momentum;
  rep.overlap = spec.parallel.outer_overlap;
  for (const auto& parts : nodes) {
    rep.nodes.emplace_back();
    for (const ReplicaPart& part : parts)
      if (rep.nodes.back().empty() || rep.nodes.back().back() != part.node) rep.nodes.back().push_back(part.node);
  }
  if (apart) {
    const bool cuda = plan.device_kind == "cuda" && uses_nccl(plan);
    if (rep.hsdp()) add_hsdp(spec, topology, cuda, plan);
    else add_outer(spec, topology, cuda, plan);
    Estimate& e = plan.estimate;
    e.step_time_s += rep.per_step_s;
    e.tokens_per_s = e.step_time_s > 0 ? double(plan.global_batch) * plan.seq_len / e.step_time_s : 0;
    e.tflops_per_device *= (e.step_time_s - rep.per_step_s) / e.step_time_s;
    // The baselines lay out one replica otherwise; each would pay the same outer sync.
    for (Baseline& b : e.baselines) b.step_time_s += rep.per_step_s;
    e.naive_step_time_s += rep.per_step_s;
  }
  // The world group last, as build_groups has it.
  Group world;
  world.kind = kWorldGroup;
  for (int r = 0; r < plan.world; ++r) world.ranks.push_back(r);
  std::erase_if(plan.groups, [](const Group& g) { return g.kind == kWorldGroup; });
  std::vector<int> all_nodes;
  for (const RankInfo& r : plan.ranks) all_nodes.push_back(r.node);
  choose_transport(collect_facts(spec, topology), all_nodes, plan.device_kind == "cuda" && uses_nccl(plan), true,
                   world);
  plan.groups.push_back(std::move(world));
  const Group& w = plan.groups.back();
  // The small messages beside the payloads: their bytes over Ethernet (headers included) and
  // the log steps' job-wide maximum, a ring all-reduce of a few floats over the world group
  // (latency), every log.interval steps (diloco: once per outer period at most, blocking).
  rep.small_bytes = small_ethernet_bytes_per_step(spec, plan);
  // Its latency blocks the loop only in a diloco or elastic job; sync's runs in the background
  // (engine/train/job_figures.hpp), so only its bytes count.
  const bool blocking = apart && spec.parallel.replicas > 1;
  rep.log_s = blocking ? 2.0 * (w.ranks.size() - 1) * w.latency_s / log_reduction_steps(spec, mode) : 0;
  Estimate& e = plan.estimate;
  e.bytes_per_step[static_cast<int>(LinkKind::kEthernet)] += rep.small_bytes;
  // Elastic sync: before each update every rank counts itself in at the store (on rank 0's
  // node) and reads the verdict the first rank writes (engine/runtime/elastic.cpp
  // exchange_complete), and after it reads whether a failure was announced: three round trips
  // over the world's links, and the first rank's poll.
  if (rep.hsdp()) {
    rep.verdict_s = 2 * kVerdictRoundTrips * w.latency_s + kVerdictPollS;
    rep.per_step_s += rep.verdict_s;
  }
  // estimate_step priced the exchange over the world group of the plan it scored: the whole
  // cluster for sync (the same figure), one replica for diloco; the job's world is priced here.
  const double more = rep.log_s - e.log_s + rep.verdict_s;
  if (e.step_time_s > 0) e.tflops_per_device *= e.step_time_s / (e.step_time_s + more);
  e.step_time_s += more;
  e.log_s = rep.log_s;
  e.tokens_per_s = e.step_time_s > 0 ? double(plan.global_batch) * plan.seq_len / e.step_time_s : 0;
  for (Baseline& b : e.baselines) b.step_time_s += more;
  e.naive_step_time_s += more;
  return plan;
}

double ethernet_bytes(const Plan& p) { return p.estimate.bytes_per_step[static_cast<int>(LinkKind::kEthernet)]; }

AcrossMode priced(const char* name, const Plan& p) {
  const bool apart = p.replicas.apart();
  return AcrossMode{name, fmt::format("tensor {} x pipeline {} x data {}{}", p.tp, p.pp, p.dp,
                                      apart ? fmt::format(" x {} replicas", p.replicas.count) : ""),
                    true, "", p.estimate.step_time_s, ethernet_bytes(p)};
}

}  // namespace

std::vector<AcrossMode> price_across(const spec::JobSpec& spec, const topo::ClusterTopology& topology) {
  std::vector<AcrossMode> out;
  const int n = spec.parallel.replicas;
  const Plan sync = replica_core(spec, topology, spec::OuterMode::kSync);
  // The pipeline across: one plan, the replicas' islands joined by pipeline stages.
  spec::JobSpec s = spec;
  s.parallel.replicas = 1;
  s.parallel.outer = spec::OuterMode::kSync;
  s.parallel.outer_overlap = 0;
  s.parallel.elastic = false;  // the job's, not one replica's
  s.parallel.tensor = sync.tp;
  s.parallel.pipeline = sync.pp * n;
  s.parallel.data = sync.dp / n;
  s.train.micro_batch = sync.micro_batch;
  try {
    out.push_back(priced("pipeline", plan_one_replica(s, topology)));
  } catch (const UserError& e) {
    out.push_back(AcrossMode{"pipeline", fmt::format("tensor {} x pipeline {} x data {}", sync.tp, sync.pp * n,
                                                     sync.dp / n), false, e.what(), 0, 0});
  }
  out.push_back(priced("sync", sync));
  out.push_back(priced("diloco", replica_core(spec, topology, spec::OuterMode::kDiloco)));
  return out;
}

Plan make_replica_plan(const spec::JobSpec& spec, const topo::ClusterTopology& topology) {
  Plan plan = replica_core(spec, topology, spec.parallel.outer);
  Replicas& rep = plan.replicas;
  rep.across = price_across(spec, topology);
  // Propose diloco when it beats the best synchronous way by kMargin; never switch silently.
  constexpr double kMargin = 1.2;
  double best_sync = 0;
  for (const AcrossMode& m : rep.across)
    if (m.feasible && m.name != "diloco" && (best_sync == 0 || m.step_time_s < best_sync)) best_sync = m.step_time_s;
  const AcrossMode& d = rep.across.back();
  if (rep.outer != spec::OuterMode::kDiloco && best_sync > 0 && d.step_time_s * kMargin < best_sync)
    rep.proposal = fmt::format("diloco across the {} replicas would be {:.1f}x faster per step than the best "
                               "synchronous way ({:.4g} s vs {:.4g} s); it changes the optimisation, so it is not "
                               "turned on: set parallel.outer: diloco to opt in (docs/diloco.md)",
                               rep.count, best_sync / d.step_time_s, d.step_time_s, best_sync);
  return plan;
}

}  // namespace holmes::plan
