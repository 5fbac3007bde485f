// The start-up phases of a rank (startup.hpp): store, node reports, plan, agreement, groups.
#include "common/format.hpp"
#include "common/hash.hpp"
#include "engine/runtime/startup.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <cstdlib>
#include <thread>

#include "comm/errors.hpp"
#include "comm/inproc_group.hpp"
#include "engine/launch/env_read.hpp"
#include "engine/plan/nccl.hpp"
#include "common/errors.hpp"
#include "engine/topo/cluster.hpp"
#include "engine/topo/discover.hpp"
#include "engine/topo/topology_file.hpp"
#include "engine/spec/load.hpp"
#include "engine/runtime/cluster_view.hpp"
#include "engine/runtime/elastic.hpp"
#include "engine/runtime/liveness.hpp"
#include "engine/runtime/nccl_env.hpp"
#include "engine/runtime/store_keeper.hpp"
#include "backends/backends.hpp"
#include "engine/launch/launch_env.hpp"

namespace holmes::runtime {

namespace {

using comm::Bytes;

Bytes to_bytes(const std::string& s) { return Bytes(s.begin(), s.end()); }
std::string to_text(const Bytes& b) { return std::string(b.begin(), b.end()); }


// This node's report as local rank 0 sees it: NICs from sysfs, and the CPU split into one
// device per local rank (each worker process is one "device" of the plan), so memory and
// cores are per worker.
topo::NodeReport discover_this_node(const spec::JobSpec& spec, int local_world, const std::string& node_name) {
  check_worker_device(spec);
  topo::NodeReport report = topo::discover_node(spec.cluster.sysfs_root, worker_devices(spec, local_world));
  if (!node_name.empty()) report.hostname = node_name;
  return report;
}

// Phase 4: this rank's groups, created in plan order (identical on every rank).
void create_groups(Runtime& rt, const spec::JobSpec& spec) {
  const bool single_machine = rt.plan.hostnames.size() <= 1;
  const plan::RankInfo& me = rt.plan.ranks.at(rt.rank);
  for (size_t i = 0; i < rt.plan.groups.size(); ++i) {
    const plan::Group& g = rt.plan.groups[i];
    if (g.ranks.size() < 2) continue;
    auto it = std::find(g.ranks.begin(), g.ranks.end(), rt.rank);
    if (it == g.ranks.end()) continue;
    // A rank that rejoins makes its groups across replicas when it is admitted (elastic.hpp).
    if (rt.joining && spans_replicas(g.kind)) continue;
    comm::GroupSpec gs;
    gs.name = rt.group_prefix + plan::group_name(g);
    gs.global_ranks = g.ranks;
    gs.global_rank = rt.rank;
    gs.timeout = group_timeout(spec, g.kind);
    if (beats(spec)) gs.known_gone = liveness_of(rt.store, spec.cluster.timeout_s);
    auto group = comm::make_gloo_group(rt.store, gs, group_net(g, single_machine));
    const int want = expected_group_rank(g, me);
    if (group->rank() != want)
      throw std::logic_error(fmt::format("group {}: rank {} has group rank {} but its {} coordinate is {}", gs.name,
                                         rt.rank, group->rank(), plan::to_string(g.kind), want));
    rt.comms.push_back({static_cast<int>(i), g.kind, std::move(group)});
    if (g.kind == plan::kOuterGroup && spec.parallel.outer_overlap > 0) {
      gs.name += "-side";
      rt.comms.push_back({static_cast<int>(i), schedule::GroupKind{g.kind.axes, schedule::Purpose::kSide},
                          comm::make_gloo_group(rt.store, gs, group_net(g, single_machine))});
    }
  }
}

// Which groups get an NCCL communicator for device buffers: not the world group (host values
// only), not the outer groups (the exchange works on host copies), not the pp-hop groups
// (they exist in TCP plans only).
bool carries_device_buffers(schedule::GroupKind kind) {
  return kind != plan::kWorldGroup && !kind.axes.contains(schedule::Axis::kReplica) &&
         kind.purpose != schedule::Purpose::kHop;
}

comm::ProcessGroup* find_group(const std::vector<RankComm>& comms, schedule::GroupKind kind) {
  for (const RankComm& c : comms)
    if (c.kind == kind) return c.group.get();
  return nullptr;
}

// Rank 0 hosts the store: it must not go on (and perhaps exit on an error every rank finds
// alike, such as a plan that does not fit the world) while others still read the values of
// all-gather `name`. Every rank counts itself in once it has them; rank 0 waits for all.
void all_have_read(comm::Store& store, const std::string& name, int rank, int world, comm::Millis timeout) {
  const std::string key = name + "/read";
  int64_t n = store.add(key, 1);
  if (rank != 0) return;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (n < world) {
    if (std::chrono::steady_clock::now() > deadline)
      throw comm::StoreError(fmt::format("start-up: only {} of {} ranks read '{}' within {} ms", n, world, name,
                                         timeout.count()));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    n = store.add(key, 0);
  }
}

}  // namespace

comm::Millis timeout_of(const spec::JobSpec& spec) {
  return comm::Millis(static_cast<int64_t>(spec.cluster.timeout_s * 1000));
}

bool spans_replicas(schedule::GroupKind kind) {
  return kind == plan::kWorldGroup || kind.axes.contains(schedule::Axis::kReplica);
}

bool beats(const spec::JobSpec& spec) { return spec.parallel.elastic && spec.parallel.replicas >= 2; }

comm::Millis group_timeout(const spec::JobSpec& spec, schedule::GroupKind kind) {
  if (!beats(spec) || spans_replicas(kind)) return timeout_of(spec);
  return comm::Millis(static_cast<int64_t>((2 * spec.cluster.timeout_s + 10) * 1000));
}

int expected_group_rank(const plan::Group& g, const plan::RankInfo& me) {
  switch (g.kind.purpose) {
    case schedule::Purpose::kEmbedding: return me.at[schedule::Axis::kPp] == 0 ? 0 : 1;
    case schedule::Purpose::kHop: return g.ranks.front() == me.rank ? 0 : 1;
    case schedule::Purpose::kAxes:
    case schedule::Purpose::kSide: break;
  }
  if (g.kind == plan::kWorldGroup) return me.rank;  // in rank order
  for (schedule::Axis a : schedule::kAllAxes)
    if (g.kind.axes == schedule::AxisSet{a}) return me.at[a];
  return -1;
}

comm::ProcessGroup* Runtime::group(schedule::GroupKind kind) const { return find_group(comms, kind); }

comm::ProcessGroup* Runtime::hop(int peer_stage) const {
  const int stage = plan.ranks.at(rank).at[schedule::Axis::kPp];
  for (const RankComm& c : comms) {
    if (c.kind != plan::kHopGroup) continue;
    const bool lower = c.group->rank() == 0;  // member 0: the hop to the stage after
    if (peer_stage == (lower ? stage + 1 : stage - 1)) return c.group.get();
  }
  return nullptr;
}

comm::ProcessGroup& Runtime::world_group() const {
  comm::ProcessGroup* g = group(plan::kWorldGroup);
  if (g == nullptr) throw std::logic_error(fmt::format("rank {} of {}: no world group", rank, world));
  return *g;
}

comm::ProcessGroup* DeviceComms::group(schedule::GroupKind kind) const { return find_group(comms, kind); }

const plan::Group* plan_group_of(const plan::Plan& plan, schedule::GroupKind kind, int rank) {
  for (const plan::Group& g : plan.groups)
    if (g.kind == kind && std::find(g.ranks.begin(), g.ranks.end(), rank) != g.ranks.end()) return &g;
  return nullptr;
}

std::unique_ptr<comm::ProcessGroup> make_job_group(const Runtime& rt, const spec::JobSpec& spec, const std::string& name) {
  comm::GroupSpec gs;
  gs.name = rt.group_prefix + name;
  for (int r = 0; r < rt.world; ++r) gs.global_ranks.push_back(r);
  gs.global_rank = rt.rank;
  gs.timeout = timeout_of(spec);
  if (rt.world == 1) return comm::make_inproc_group(std::make_shared<comm::InProcessHub>(), gs);
  const plan::Group* world = plan_group_of(rt.plan, plan::kWorldGroup, rt.rank);
  if (world == nullptr) throw std::logic_error("make_job_group: the plan has no world group");
  return comm::make_gloo_group(rt.store, gs, group_net(*world, rt.plan.hostnames.size() <= 1));
}

std::string rendezvous_url(const spec::JobSpec& spec, const launch::LaunchEnv& env) {
  if (!spec.cluster.rendezvous_is_auto()) return spec.cluster.rendezvous;
  if (env.master_port <= 0)
    throw UserError(fmt::format("cluster.rendezvous: 'auto' needs MASTER_PORT (rank {} of {} found none); set it, "
                                "or give tcp://HOST:PORT or file:///PATH",
                                env.rank, env.world_size));
  return fmt::format("tcp://{}:{}", env.master_addr, env.master_port);
}

std::string job_token(const spec::JobSpec& spec, const launch::LaunchEnv& env) {
  if (!env.job_token.empty()) return env.job_token;
  return fmt::format("{:016x}", fnv1a(fmt::format("{}@{}:{}/{}", spec.job.name, env.master_addr,
                                                                  env.master_port, env.world_size)));
}

std::string node_entry(int node_rank, int local_rank, const topo::NodeReport* report) {
  std::string out = fmt::format("node {} local {}\n", node_rank, local_rank);
  if (report) out += topo::encode_report(*report);
  return out;
}

GatheredNodes gather_nodes(const std::vector<std::string>& entries) {
  GatheredNodes out;
  std::map<int, topo::NodeReport> by_node;
  for (size_t r = 0; r < entries.size(); ++r) {
    std::istringstream in(entries[r]);
    std::string node_word, local_word;
    int node = -1, local = -1;
    in >> node_word >> node >> local_word >> local;
    if (node_word != "node" || local_word != "local" || node < 0 || local < 0)
      throw std::runtime_error(fmt::format("start-up: rank {} published a malformed node entry", r));
    out.node_of.push_back(node);
    out.local_of.push_back(local);
    if (local == 0) {
      std::string rest = entries[r].substr(entries[r].find('\n') + 1);
      by_node[node] = topo::decode_report(rest, fmt::format("node report of rank {}", r));
    }
  }
  std::vector<int> without;
  const int nodes = out.node_of.empty() ? 0 : *std::max_element(out.node_of.begin(), out.node_of.end()) + 1;
  for (int n = 0; n < nodes; ++n) {
    if (!by_node.count(n)) without.push_back(n);
    else out.reports.push_back(by_node[n]);
  }
  if (!without.empty())
    throw std::runtime_error(fmt::format("start-up: node(s) [{}] have no local rank 0, so nobody reported them; "
                                         "node ranks must be 0..{} with local ranks from 0 on each",
                                         fmt::join(without, ", "), nodes - 1));
  return out;
}

std::string agreement_line(uint64_t plan_hash, uint64_t spec_dig, uint64_t topo_dig) {
  return fmt::format("plan {:016x} spec {:016x} topology {:016x}", plan_hash, spec_dig, topo_dig);
}

void check_agreement(const std::vector<std::string>& lines) {
  // Field pairs "name value" in the order agreement_line writes them.
  auto fields = [](const std::string& line) {
    std::istringstream in(line);
    std::vector<std::pair<std::string, std::string>> out;
    std::string k, v;
    while (in >> k >> v) out.emplace_back(k, v);
    return out;
  };
  const auto ref = fields(lines.at(0));
  std::vector<std::string> problems;
  for (size_t f = 0; f < ref.size(); ++f) {
    std::vector<size_t> differ;
    for (size_t r = 1; r < lines.size(); ++r) {
      auto mine = fields(lines[r]);
      if (f >= mine.size() || mine[f] != ref[f]) differ.push_back(r);
    }
    const std::string& what = ref[f].first;
    const char* input = what == "plan" ? "the plan hash" : what == "spec" ? "the job spec" : "the cluster topology";
    if (!differ.empty())
      problems.push_back(fmt::format("{} differs from rank 0's on ranks [{}]", input, fmt::join(differ, ", ")));
  }
  if (!problems.empty())
    throw std::runtime_error(fmt::format("start-up: the ranks do not agree: {} (every rank must run the same "
                                         "binary with the same config, --set overrides and topology)",
                                         fmt::join(problems, "; ")));
}

uint64_t spec_digest(const spec::JobSpec& spec) { return fnv1a(spec::resolved_spec_text(spec)); }

uint64_t topology_digest(const topo::ClusterTopology& topology) {
  return fnv1a(topo::dump_topology_yaml(topology.nodes));
}

void check_plan_matches_job(const plan::Plan& plan, const spec::JobSpec& spec, const GatheredNodes& nodes) {
  const int world = static_cast<int>(nodes.node_of.size());
  if (plan.world != world)
    throw UserError(fmt::format("the plan has {}, one per device of the cluster topology, but the job was started "
                                "with world size {}: cluster.topology lists another device count for a node of this "
                                "job than the workers started on it", count_of(plan.world, "rank"), world));
  for (int r = 0; r < world; ++r) {
    const auto& ri = plan.ranks.at(r);
    if (ri.node != nodes.node_of[r] || ri.local_rank != nodes.local_of[r])
      throw std::runtime_error(fmt::format("start-up: the plan puts rank {} on node {} device {}, but it runs on node "
                                           "{} as local rank {}; launchers must number ranks node by node",
                                           r, ri.node, ri.local_rank, nodes.node_of[r], nodes.local_of[r]));
  }
}

comm::GlooNet group_net(const plan::Group& g, bool single_machine) {
  comm::GlooNet net;
  if (single_machine || !g.crosses_nodes) net.address = "127.0.0.1";
  else net.iface = g.interface;  // "" = this machine's host name
  return net;
}

Runtime start_runtime(const spec::JobSpec& spec, const launch::LaunchEnv& env) {
  Runtime rt;
  rt.rank = env.rank;
  rt.world = env.world_size;
  rt.local_rank = env.local_rank;
  rt.local_world = env.local_world_size;
  const comm::Millis timeout = timeout_of(spec);
  // What every rank refuses alike (job.device, NCCL_NET) is refused before the store, so a
  // rank does not first wait for one that already gave up.
  check_worker_device(spec);

  comm::StoreOptions so;
  so.url = rendezvous_url(spec, env);
  so.rank = env.rank;
  so.token = job_token(spec, env);
  so.timeout = timeout;
  so.source = spec.cluster.rendezvous_is_auto() ? "MASTER_ADDR/MASTER_PORT" : "cluster.rendezvous";
  so.hosted = env.store_hosted && spec.cluster.rendezvous_is_auto();
  // An elastic job's store must outlive rank 0's process: rank 0 has it served by a process of
  // its own rather than in-process (store_keeper.hpp). A rank 0 started again to rejoin finds
  // the running job's keeper on the port and connects to it.
  // A malformed address is left to open_store, which names it.
  const auto address = comm::parse_tcp_url(so.url);
  if (spec.parallel.elastic && env.rank == 0 && !so.hosted && address) {
    start_store_keeper(address->port, so.token, spec.cluster.timeout_s);
    so.hosted = true;
  }
  rt.store = comm::open_store(so);
  comm::PrefixStore boot(rt.store, "startup/");

  std::optional<topo::NodeReport> mine;
  if (env.local_rank == 0) mine = discover_this_node(spec, env.local_world_size, env.node_name);
  std::vector<std::string> entries;
  for (const auto& b : comm::store_all_gather(boot, "node", env.rank, env.world_size,
                                              to_bytes(node_entry(env.node_rank, env.local_rank, mine ? &*mine : nullptr)),
                                              timeout))
    entries.push_back(to_text(b));
  all_have_read(boot, "node", env.rank, env.world_size, timeout);
  GatheredNodes nodes = gather_nodes(entries);
  rt.node = nodes.node_of.at(env.rank);

  plan::check_degrees_fit(spec, env.world_size, fmt::format("{} ranks on {} node(s)", env.world_size,
                                                             nodes.reports.size()));
  rt.topology = assemble_cluster(spec, std::move(nodes.reports));
  rt.plan = plan::make_plan(spec, rt.topology);
  rt.plan_hash = plan::plan_hash(rt.plan);
  check_plan_matches_job(rt.plan, spec, nodes);

  std::vector<std::string> lines;
  const std::string line = agreement_line(rt.plan_hash, spec_digest(spec), topology_digest(rt.topology));
  for (const auto& b : comm::store_all_gather(boot, "agree", env.rank, env.world_size, to_bytes(line), timeout))
    lines.push_back(to_text(b));
  all_have_read(boot, "agree", env.rank, env.world_size, timeout);
  check_agreement(lines);
  rt.rank_plan = plan::rank_plan(rt.plan, rt.rank);

  // Before the groups, which only the ranks of the start make: every rank passes here before
  // any of them finishes its world group, so a rank that finds the job started is a late one.
  // It makes its groups once its whole replica was admitted, under the new generation's names.
  if (spec.parallel.elastic && spec.parallel.replicas > 1 && late_rank(*rt.store)) {
    rt.joining = true;
    rt.admission = await_admission(*rt.store, rt.plan, rt.rank, spec.cluster.timeout_s);
    rt.group_prefix = fmt::format("e{}/", rt.admission->generation);
  }
  create_groups(rt, spec);
  if (rt.joining) {
    schedule::Place& p = rt.rank_plan.place;
    rt.rank_plan.global_batch /= p.size[schedule::Axis::kReplica];
    p.at[schedule::Axis::kReplica] = 0;
    p.size[schedule::Axis::kReplica] = 1;
  }
  return rt;
}

void DeviceComms::abort_all() const noexcept {
  for (const RankComm& c : comms) c.group->abort();
}

void create_rank_groups(Runtime& rt, const spec::JobSpec& spec) { create_groups(rt, spec); }

void wait_all_have_read(comm::Store& store, const std::string& name, int rank, int world, comm::Millis timeout) {
  all_have_read(store, name, rank, world, timeout);
}

DeviceComms connect_device_groups(Runtime& rt, const spec::JobSpec& spec) {
  DeviceComms d;
  if (!plan::uses_nccl(rt.plan)) return d;
  for (const std::string& line : describe_nccl_env(apply_nccl_env(rt.plan, rt.node))) d.log.push_back(line);
  const topo::Devices& mine = rt.topology.nodes.at(rt.node).devices;
  const EnvMap env = launch::process_environment();
  if (mine.per_gpu > 1 && env.count("NCCL_HOSTID") == 0) {
    // Read by NCCL once, at its first communicator: each process becomes a host of its own, so
    // its duplicate-GPU check lets ranks share a GPU (parallel.nccl on; a test set-up).
    const std::string id = fmt::format("holmes-{}-rank{}", rt.plan.hostnames.at(rt.node), rt.rank);
    ::setenv("NCCL_HOSTID", id.c_str(), 1);
    d.log.push_back(fmt::format("nccl: NCCL_HOSTID={} ({} ranks share a GPU on this node)", id, mine.per_gpu));
  }
  const plan::RankInfo& me = rt.plan.ranks.at(rt.rank);
  for (const plan::NcclComm& c : plan::nccl_communicators(rt.plan, rt.rank)) {
    const plan::Group& g = rt.plan.groups.at(c.group);
    if (!carries_device_buffers(g.kind)) continue;
    comm::GroupSpec gs;
    gs.name = "nccl/" + rt.group_prefix + c.name;
    gs.global_ranks = c.ranks;
    gs.global_rank = rt.rank;
    gs.timeout = group_timeout(spec, g.kind);
    auto group = backends::make_nccl_group(rt.store, gs, c.net);
    const int want = expected_group_rank(g, me);
    if (group->rank() != want)
      throw std::logic_error(fmt::format("group {}: rank {} has NCCL group rank {} but its {} coordinate is {}",
                                         gs.name, rt.rank, group->rank(), plan::to_string(g.kind), want));
    d.log.push_back(fmt::format("nccl: {} over {} ({} members)", c.name, group->transport(), c.ranks.size()));
    d.comms.push_back({c.group, g.kind, std::move(group)});
  }
  return d;
}

std::unique_ptr<parallel::ParallelGroups> executor_groups(const Runtime& rt, const DeviceComms& device,
                                                          device::DeviceMemory& mem) {
  std::vector<parallel::GroupComms> comms;
  for (const RankComm& c : rt.comms)
    if (c.kind != plan::kWorldGroup) comms.push_back({c.kind, c.group.get(), device.group(c.kind)});
  return std::make_unique<parallel::ParallelGroups>(rt.rank_plan.place, comms, mem);
}

}  // namespace holmes::runtime
