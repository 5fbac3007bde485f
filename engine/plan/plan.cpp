// make_plan: validate what the planner relies on, then plan_one_replica (search, then spell the
// winner out rank by rank and group by group) or, for replicas, make_replica_plan (replicas.hpp).
#include "common/format.hpp"
#include "common/hash.hpp"
#include "engine/plan/plan.hpp"

#include <fmt/format.h>

#include <fmt/ranges.h>

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "engine/plan/groups.hpp"
#include "engine/plan/model_size.hpp"
#include "model/architecture.hpp"
#include "engine/plan/nccl.hpp"
#include "engine/plan/partition.hpp"
#include "engine/plan/replicas.hpp"
#include "engine/plan/search.hpp"
#include "common/errors.hpp"
#include "engine/spec/validate.hpp"

namespace holmes::plan {

const char* to_string(Transport kind) {
  switch (kind) {
    case Transport::kNcclIb: return "nccl-ib";
    case Transport::kNcclRoce: return "nccl-roce";
    case Transport::kIntraNode: return "intra-node";
    case Transport::kNcclSocket: return "nccl-socket";
    case Transport::kGlooTcp: return "gloo-tcp";
  }
  return "?";
}

namespace {

// The planner is called with specs that went through validation, but it is a public pure
// function: it checks what it divides by or indexes with, and says so as a user error.
void check_spec(const spec::JobSpec& s) {
  const auto& m = s.model;
  const auto& t = s.train;
  const auto& p = s.parallel;
  if (m.layers < 1 || m.hidden < 1 || m.heads < 1 || m.vocab_size < 1)
    throw UserError(fmt::format("model.layers, model.hidden, model.heads and model.vocab_size must be >= 1, got "
                                "{}, {}, {}, {}", m.layers, m.hidden, m.heads, m.vocab_size));
  if (t.seq_len < 1 || t.global_batch < 1 || t.micro_batch < 0)
    throw UserError(fmt::format("train.seq_len = {}, train.global_batch = {} and train.micro_batch = {} must be >= 1",
                                t.seq_len, t.global_batch, t.micro_batch));
  if (p.tensor < 0 || p.pipeline < 0 || p.data < 0)
    throw UserError(fmt::format("parallel degrees must be >= 1 or auto, got tensor={} pipeline={} data={}",
                                p.tensor, p.pipeline, p.data));
  parse_order(p.order);
  // The rules between keys are the spec's (each written once there).
  if (const auto problems = spec::cross_field_problems(s); !problems.empty())
    throw UserError(fmt::format("{}: {}", problems.front().key, problems.front().message));
}

bool cuda_devices(const spec::JobSpec& s, const topo::ClusterTopology& topo) {
  if (topo.nodes.empty()) return false;  // collect_facts says what is wrong
  bool cuda = topo.nodes.front().devices.kind == "cuda";
  for (const auto& n : topo.nodes)
    if ((n.devices.kind == "cuda") != cuda)
      throw UserError(fmt::format("the topology mixes device kinds: node '{}' has '{}' devices, node '{}' has '{}'; "
                                  "a job runs on one kind", topo.nodes.front().hostname,
                                  topo.nodes.front().devices.kind, n.hostname, n.devices.kind));
  if (s.job.device == spec::Device::kCuda && !cuda)
    throw UserError("job.device = cuda but the topology's nodes have no CUDA devices (accepted: auto or cpu)");
  return cuda && s.job.device != spec::Device::kCpu;
}

void add_crossing_warnings(const Plan& plan, std::vector<std::string>& out) {
  constexpr int kListed = 8;
  int listed = 0, total = 0;
  for (const auto& g : plan.groups) {
    bool bad = (g.kind == kTpGroup && g.crosses_nodes) || (g.kind == kDpGroup && g.crosses_islands);
    if (!bad) continue;
    ++total;
    if (listed++ < kListed)
      out.push_back(fmt::format("{} group {} (ranks {}..{}, {} members) crosses {} over {}", to_string(g.kind),
                                g.index, g.ranks.front(), g.ranks.back(), g.ranks.size(),
                                g.kind == kTpGroup ? "nodes" : "islands", to_string(g.link)));
  }
  if (total > kListed) out.push_back(fmt::format("... and {} more groups that cross slow links", total - kListed));
}

// The model line of a plan: "" for the default architecture (its plans, and so their hashes,
// are as before there were others), else "ARCH L=.. C=.. NH=..[/KVH=..][ F=..] V=..[ tied
// head]" with the options the architecture reads.
std::string model_label(const model::GptConfig& m) {
  if (m.arch == model::kDefaultArch) return "";
  std::string out = fmt::format("{} L={} C={} NH={}", m.arch, m.layers, m.hidden, m.heads);
  if (m.reads(model::kKvHeads)) out += fmt::format("/KVH={}", m.kv_heads);
  if (m.reads(model::kFfnHidden)) out += fmt::format(" F={}", m.ffn_hidden);
  out += fmt::format(" V={}", m.vocab);
  if (m.reads(model::kTieEmbeddings) && m.tie_embeddings) out += " tied head";
  return out;
}

void fill_islands(const SearchInput& in, const topo::ClusterTopology& topology, Plan& plan) {
  plan.islands.resize(in.facts.islands);
  for (int i = 0; i < in.facts.islands; ++i) plan.islands[i] = IslandInfo{i, "ethernet", {}, 0};
  for (int n = 0; n < static_cast<int>(in.facts.nodes.size()); ++n) {
    const NodeFacts& nf = in.facts.nodes[n];
    IslandInfo& isl = plan.islands[nf.island];
    isl.kind = to_string(nf.island_link);
    isl.nodes.push_back(n);
    isl.devices += nf.devices;
    plan.hostnames.push_back(topology.nodes[n].hostname);
    plan.node_nets.push_back(NodeNet{nf.ethernet_if, nf.island_link, nf.hcas, nf.gid_index});
  }
}

void fill_stages(const SearchInput& in, const Evaluated& best, Plan& plan) {
  auto island_of = [&](int t, int s, int d) {
    return in.facts.nodes[in.table.node_of[best.layout.rank(Coords{t, s, d})]].island;
  };
  int first_layer = 0;
  for (int s = 0; s < plan.pp; ++s) {
    Stage st{s, first_layer, best.layers[s], island_of(0, s, 0), false, s == 0, s == plan.pp - 1,
             best.stages[s].tflops};
    first_layer += best.layers[s];
    for (int t = 0; t < plan.tp; ++t)
      for (int d = 0; d < plan.dp; ++d) st.straddles |= island_of(t, s, d) != st.island;
    plan.stages.push_back(st);
  }
}

// interleaved: stage s holds virtual stages c x pp + s, c = 0 .. V-1, so chunk 0 of stage 0
// has the embedding and chunk V-1 of the last stage the head, as the one-chunk stages do. Each
// stage's layers (the searched partition: it follows the devices' speeds) are cut into its V
// chunks by StageCost::chunk_cut (equal chunk times: the head's chunk takes fewer layers; the
// memory model counts the same cut); the layer numbers follow the virtual stages' order.
void fill_chunks(const Evaluated& best, Plan& plan) {
  if (plan.activation.schedule != spec::Schedule::kInterleaved) return;
  const int v = plan.activation.virtual_stages;
  std::vector<int> count(plan.pp * v);
  for (const Stage& st : plan.stages) {
    const std::vector<int> cut = best.stages[st.stage].chunk_cut(best.work, st.num_layers);
    for (int c = 0; c < v; ++c) count[c * plan.pp + st.stage] = cut[c];
  }
  std::vector<int> first(count.size() + 1, 0);
  std::partial_sum(count.begin(), count.end(), first.begin() + 1);
  for (Stage& st : plan.stages) {
    st.chunks.clear();
    for (int c = 0; c < v; ++c) {
      const int vs = c * plan.pp + st.stage;
      st.chunks.push_back({first[vs], count[vs]});
    }
    st.first_layer = st.chunks.front().first_layer;
  }
}

// Every rank of a stage holds the same bytes; capacity is its own device's.
void fill_memory(const SearchInput& in, const Evaluated& best, Plan& plan) {
  std::vector<RankMemory> per_stage;
  for (int s = 0; s < plan.pp; ++s) per_stage.push_back(best.stages[s].memory(best.work, plan.pp, best.layers[s]));
  for (int r = 0; r < in.world; ++r) {
    RankMemory m = per_stage[plan.ranks[r].at[Axis::kPp]];
    m.rank = r;
    m.capacity = in.facts.nodes[in.table.node_of[r]].memory_bytes * kUsableMemoryFraction;
    plan.memory.push_back(m);
  }
}

// A TCP group inside an RDMA island binds to the island's IP interface; a node without one
// would send that traffic over Ethernet. The plan costs it so; say per node what to add.
void warn_island_tcp(const SearchInput& in, const topo::ClusterTopology& topology, std::vector<std::string>& out) {
  if (!in.facts.tcp_groups) return;
  for (int n = 0; n < static_cast<int>(in.facts.nodes.size()); ++n) {
    const NodeFacts& nf = in.facts.nodes[n];
    if (nf.island_link == LinkKind::kEthernet || nf.island_tcp) continue;
    if (topology.islands[nf.island].nodes.size() < 2) continue;  // no group stays inside it
    const bool ib = nf.island_link == LinkKind::kIb;
    out.push_back(fmt::format(
        "node {} ('{}') is on {} island {} but has no {} with an IPv4 address, so its gloo-tcp groups inside the "
        "island bind to {} and run at Ethernet speed (the estimate counts them so); add {} to its topology entry",
        n, topology.nodes[n].hostname, ib ? "an IB" : "a RoCE", nf.island,
        ib ? "IPoIB interface" : "RoCE netdev", nf.island_if,
        ib ? "the IPoIB interface ({kind: ipoib, name: ib0, addresses: [A.B.C.D/N]}) or configure IPoIB"
           : "the port's netdev and its address ({kind: roce, ..., netdev: IFACE, addresses: [A.B.C.D/N]})"));
  }
}

ActivationChoice activation_choice(const Evaluated& ev) {
  const RankMemory& m = ev.worst_memory;
  return ActivationChoice{ev.work.activation.recompute, ev.work.activation.schedule, ev.estimate.bubble_s,
                          ev.estimate.step_time_s, ev.estimate.recompute_s, m.activations, m.total(), m.capacity,
                          ev.fits, ev.work.activation.chunks, ev.work.activation.document_mask};
}

void fill_baselines(const SearchInput& in, const Evaluated& best, Plan& plan) {
  const spec::PartitionKind list_or_uniform =
      plan.partition == spec::PartitionKind::kList ? spec::PartitionKind::kList : spec::PartitionKind::kUniform;
  for (const spec::Placement baseline : {spec::Placement::kMegatron, spec::Placement::kNaive}) {
    const double t = plan.placement == baseline
                         ? best.estimate.step_time_s
                         : evaluate(in, best.deg, baseline, list_or_uniform, best.work.activation).estimate.step_time_s;
    plan.estimate.baselines.push_back(Baseline{baseline, t});
    if (baseline == spec::Placement::kNaive) plan.estimate.naive_step_time_s = t;
  }
}

// The facts every placement but megatron plans with. TCP groups (Gloo) on CPU plans and on
// CUDA plans without NCCL (their device buffers staged through host memory); those also move
// bytes between the processes of a node over loopback TCP, not NVLink.
Facts facts_of(const spec::JobSpec& spec, const topo::ClusterTopology& topology, bool cuda, bool nccl) {
  Facts f = collect_facts(spec, topology);
  f.tcp_groups = !cuda || !nccl;
  if (cuda && !nccl && spec.cluster.intra_node.bandwidth_gbps <= 0)
    for (NodeFacts& n : f.nodes) n.intra_gbps = kDefaultIntraGbpsCpu;
  return f;
}

}  // namespace

std::string stage_layers(const Stage& s) {
  if (s.chunks.empty()) return fmt::format("{}..{}", s.first_layer, s.first_layer + s.num_layers - 1);
  std::string out;
  for (const LayerRange& r : s.chunks)
    out += fmt::format("{}{}..{}", out.empty() ? "" : ", ", r.first_layer, r.first_layer + r.num_layers - 1);
  return out;
}

LinkCost rank_link(const spec::JobSpec& spec, const topo::ClusterTopology& topology, const Plan& plan, int a, int b) {
  Facts f = facts_of(spec, topology, plan.device_kind == "cuda", uses_nccl(plan));
  f.ethernet_only = plan.placement == spec::Placement::kMegatron;
  // The pipeline group both ranks are in carries the hop (on its one transport, or on a hop
  // group of its own: pipeline_hop); the nodes' ports are shared by the ranks every pipeline
  // group sends off them (nic_use), as the plan priced the hop (stage_costs).
  std::vector<std::vector<int>> pipes;
  int mine = -1;
  for (const Group& g : plan.groups) {
    if (g.kind != kPpGroup) continue;
    const auto has = [&](int r) { return std::find(g.ranks.begin(), g.ranks.end(), r) != g.ranks.end(); };
    if (has(a) && has(b)) mine = static_cast<int>(pipes.size());
    pipes.emplace_back();
    for (int r : g.ranks) pipes.back().push_back(plan.ranks.at(r).node);
  }
  if (mine < 0) return link_between(f, plan.ranks.at(a).node, plan.ranks.at(b).node);
  const NicUse use = nic_use(f, pipes, false, pipelines_on_own_links(f));
  return pipeline_hop(f, pipes[mine], plan.ranks.at(a).node, plan.ranks.at(b).node, &use);
}

Plan make_plan(const spec::JobSpec& spec, const topo::ClusterTopology& topology) {
  if (spec.parallel.replicas <= 1) return plan_one_replica(spec, topology);
  check_spec(spec);
  // Figures measured on one kind of device are never applied to another (exit 2).
  topo::check_device_kind(topology.calibration, cuda_devices(spec, topology) ? "cuda" : "cpu");
  return make_replica_plan(spec, topology);
}

Plan plan_one_replica(const spec::JobSpec& spec, const topo::ClusterTopology& topology) {
  check_spec(spec);
  if (spec.parallel.replicas > 1)
    throw std::invalid_argument(fmt::format("plan_one_replica: a spec of {} replicas (make_plan plans those)",
                                            spec.parallel.replicas));
  topo::check_device_kind(topology.calibration, cuda_devices(spec, topology) ? "cuda" : "cpu");
  SearchInput in;
  in.spec = &spec;
  in.cuda = cuda_devices(spec, topology);
  const NcclDecision nccl = decide_nccl(spec, topology, in.cuda);
  in.nccl = nccl.use;
  in.facts = facts_of(spec, topology, in.cuda, in.nccl);
  in.table = make_device_table(in.facts);
  in.world = static_cast<int>(in.table.node_of.size());
  in.ethernet_facts = in.facts;
  in.ethernet_facts.ethernet_only = true;
  Evaluated best = search(in);

  Plan plan;
  plan.world = in.world;
  plan.tp = best.deg.tp;
  plan.pp = best.deg.pp;
  plan.dp = best.deg.dp;
  plan.micro_batch = best.deg.micro_batch;
  plan.micro_batches = best.work.micro_batches;
  plan.global_batch = spec.train.global_batch;
  plan.seq_len = spec.train.seq_len;
  plan.placement = spec.parallel.placement;
  plan.partition = partition_for(spec.parallel.placement, spec.parallel.partition.kind);
  plan.precision = spec.train.precision;
  plan.fp8_lm_head = spec.train.fp8_lm_head;
  plan.order = best.layout.grid.order();
  plan.device_kind = in.cuda ? "cuda" : "cpu";
  plan.params_total = total_params(best.work.shape, plan.tp);
  plan.params_model = model_params(best.work.shape);
  plan.model = model_label(best.work.shape);
  plan.vocab_padded = padded_vocab(spec.model.vocab_size, plan.tp);
  plan.island_order = best.layout.island_order;
  fill_islands(in, topology, plan);
  for (int r = 0; r < in.world; ++r) {
    plan.ranks.push_back(RankInfo{r, in.table.node_of[r], in.table.local_of[r], best.layout.coords(r)});
  }
  fill_stages(in, best, plan);
  // auto chooses for the pipeline's message: a micro-batch's fp32 activations (B x T x C).
  const EthernetChoice ethernet{spec.parallel.cross_island,
                                4.0 * plan.micro_batch * spec.train.seq_len * spec.model.hidden};
  plan.groups = build_groups(in.facts_for(plan.placement), in.table, best.layout, in.cuda && in.nccl, ethernet);
  plan.estimate = best.estimate;
  plan.activation = activation_choice(best);
  if (const std::optional<Evaluated> next = runner_up(in, best)) {
    plan.activation_chosen = true;
    plan.runner_up = activation_choice(*next);
  }
  fill_chunks(best, plan);
  plan.schedule_chosen = spec.parallel.schedule == spec::Schedule::kAuto;
  plan.recompute_chosen = spec.train.recompute == spec::Recompute::kAuto;
  if (best.work.activation.schedule != spec::Schedule::k1f1b) {
    plan.has_one_f_one_b = true;
    plan.one_f_one_b = activation_choice(evaluate(in, best.deg, spec.parallel.placement, spec.parallel.partition.kind,
                                                  ActivationMode::of(best.work.activation.recompute, spec::Schedule::k1f1b)));
  }
  fill_baselines(in, best, plan);
  fill_memory(in, best, plan);
  plan.pipe_fp8 = best.work.pipe_fp8;
  if (best.deg.pp > 1)
    plan.pipe_fp8_other_step_s = with_pipe_fp8(in, best, spec.parallel.placement, spec.parallel.partition.kind,
                                               !best.work.pipe_fp8).estimate.step_time_s;
  plan.calibration = topology.calibration;
  plan.warnings = topology.warnings;
  plan.warnings.insert(plan.warnings.end(), in.facts.notes.begin(), in.facts.notes.end());
  if (spec.train.precision == spec::Precision::kFp8)
    plan.warnings.push_back(fmt::format(
        "train.precision fp8: the FP8 GEMMs are priced at {:g}x each device's bf16 rate plus their operands' casts "
        "(declared: no calibrate table measures FP8 GEMMs yet)",
        kFp8GemmRateFactor));
  warn_island_tcp(in, topology, plan.warnings);
  for (int n = 0; n < static_cast<int>(in.facts.nodes.size()) && in.facts.nodes.size() > 1; ++n)
    if (in.facts.nodes[n].ethernet_if == "lo")
      plan.warnings.push_back(fmt::format("node {} ('{}') has no active network interface to reach other nodes; "
                                          "its TCP traffic would bind to lo", n, plan.hostnames[n]));
  add_crossing_warnings(plan, plan.warnings);
  if (!nccl.why.empty()) plan.warnings.push_back(nccl.why);
  if (nccl.shared_gpu)
    plan.warnings.push_back("parallel.nccl on with ranks sharing a GPU: each process gets an NCCL_HOSTID of its own "
                            "(a test set-up; NCCL does not support it and it may hang)");
  return plan;
}

void check_degrees_fit(const spec::JobSpec& spec, int world, const std::string& launched) {
  const auto& p = spec.parallel;
  int fixed = p.replicas;
  bool any_auto = false;
  for (int d : {p.tensor, p.pipeline, p.data}) {
    if (d == spec::kAuto) any_auto = true;
    else fixed *= d;
  }
  if (any_auto ? world % fixed == 0 : world == fixed) return;
  auto text = [](int d) { return d == spec::kAuto ? std::string("auto") : std::to_string(d); };
  const std::string degrees = fmt::format("{} x {} x {}{}", text(p.tensor), text(p.pipeline), text(p.data),
                                          p.replicas > 1 ? fmt::format(" x {}", p.replicas) : "");
  const std::string why = any_auto ? fmt::format(" (explicit product {}) does not divide the cluster's {}", fixed,
                                                 count_of(world, "device"))
                                   : fmt::format(" = {} but the cluster has {}", fixed, count_of(world, "device"));
  throw UserError(fmt::format("parallel.tensor x parallel.pipeline x parallel.data{} = {}{}: {} cannot make the job's {} "
                              "workers ({}); the product of the explicit degrees must {} {}",
                              p.replicas > 1 ? " x parallel.replicas" : "", degrees, why, degrees, world, launched, any_auto ? "divide" : "equal", world));
}

uint64_t plan_hash(const Plan& plan) {
  // Over the JSON text: it holds every field, and formatting is deterministic.
  return fnv1a(format_plan_json(plan));
}

}  // namespace holmes::plan
