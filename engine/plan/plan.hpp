// The parallel plan: where every rank runs, what it computes, which communicator groups
// exist and over which transport, and what a step is estimated to cost. make_plan is pure
// (no files, environment or clock) and deterministic, so every rank computes the same plan
// and checks plan_hash against rank 0's. JSON keys: docs/plan-format.md; formulas:
// docs/cost-model.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/plan/links.hpp"
#include "engine/schedule/axes.hpp"
#include "engine/schedule/rank_plan.hpp"
#include "engine/spec/job_spec.hpp"
#include "engine/topo/topology.hpp"

namespace holmes::plan {

using schedule::Axis;
using schedule::AxisSet;
using schedule::Coords;

// A group's kind: the axes it spans and what it is for (engine/schedule/axes.hpp).
using schedule::GroupKind;
using schedule::Purpose;
using schedule::kDpGroup, schedule::kEmbeddingGroup, schedule::kHopGroup, schedule::kOuterGroup, schedule::kPpGroup,
    schedule::kTpGroup, schedule::kWorldGroup, schedule::kGroupKinds;
using schedule::listing_order;
using schedule::to_string;
enum class Transport { kNcclIb, kNcclRoce, kIntraNode, kNcclSocket, kGlooTcp };
inline constexpr int kTransports = 5;
const char* to_string(Transport kind);   // "nccl-ib", "nccl-roce", "intra-node", "nccl-socket", "gloo-tcp"

// Global rank r runs on node `node`, device `local_rank`; ranks are numbered node by node
// in topology order (node 0's devices first), as launchers number them.
struct RankInfo {
  int rank = 0;
  int node = 0;
  int local_rank = 0;
  schedule::Coords at;  // on every axis (replica: parallel.replicas > 1, replicas.hpp)
};

// A run of consecutive layers: one model chunk of an interleaved stage.
using schedule::LayerRange;

struct Stage {
  int stage = 0;
  int first_layer = 0;
  int num_layers = 0;
  int island = 0;        // island of the stage's ranks (the first rank's when it straddles)
  bool straddles = false;  // its ranks are on more than one island (a fallback layout)
  bool embedding = false;  // holds token + position embeddings (first stage)
  bool lm_head = false;    // holds final norm + tied LM head (last stage)
  double tflops = 0;       // sustained TFLOP/s the cost model gives its devices (slowest one)
  // interleaved: model chunk c holds virtual stage c x pp + stage (first_layer is chunk 0's,
  // num_layers the sum); empty for the other schedules (one chunk: first_layer, num_layers).
  std::vector<LayerRange> chunks = {};
};
// The stage's layers as text: "4..7", or its chunks' ranges under interleaved ("0..1, 4..5").
std::string stage_layers(const Stage& s);

struct Group {
  GroupKind kind = kWorldGroup;
  int index = 0;                // index among the groups of its kind
  std::vector<int> ranks;       // ring / pipeline order (pp: by stage); group rank = index here
  Transport transport = Transport::kIntraNode;
  LinkKind link = LinkKind::kIntraNode;  // slowest link the group uses
  double gbps_per_rank = 0;     // what the cost model gives one member on that link (calibrated)
  double latency_s = 0;         // and its per-message latency
  std::string interface;        // TCP interface(s) to bind (comma-separated), "" for RDMA / intra-node
  std::vector<std::string> hcas;  // RDMA ports for nccl-ib / nccl-roce (NCCL_IB_HCA)
  int gid_index = -1;             // nccl-roce (NCCL_IB_GID_INDEX)
  bool crosses_nodes = false;
  bool crosses_islands = false;
};

// A baseline with the same degrees and micro-batch: `megatron` (Megatron-LM's rank order over
// the nodes as listed, uniform partition, every group over Ethernet: what a mixed cluster
// runs today) or `naive` (the same order and partition, the best transport per group).
struct Baseline {
  spec::Placement placement = spec::Placement::kMegatron;
  double step_time_s = 0;
};

// Per-step time of the bottleneck stage b and its parts (seconds):
//   step = compute + tp_comm + pp_comm + bubble + dp_comm + update + log + quota, where with m micro-batches and p
//   stages compute/tp/pp = m x per-micro-batch cost of b, bubble = (p-1) x its per-micro-batch
//   total, dp_comm = its data-parallel sync not hidden behind backward.
struct Estimate {
  double step_time_s = 0;
  double compute_s = 0;
  double recompute_s = 0;         // of compute_s: the replay of train.recompute
  double tp_comm_s = 0;
  double pp_comm_s = 0;
  // Of pp_comm_s: the pipeline's loop, neighbouring stages waiting for each other's messages'
  // latency every micro-batch (cost_model.cpp pipeline_loop_s).
  double pp_loop_s = 0;
  double bubble_s = 0;
  double dp_comm_s = 0;
  double update_s = 0;            // optimizer and host work per step (calibrated; 0 without)
  double log_s = 0;               // the log steps' job-wide maximum, per step (groups.hpp log_exchange_s)
  double sums_s = 0;              // the step's job-wide sum of norm, loss and stop flags (cost_model.cpp job_sums_s)
  // What a CPU quota adds: the largest CPU seconds per step of a stage's worker over its quota
  // share, less the rest of the step (0 when the step is longer; cost_model.cpp quota_bound_s),
  // plus the expected wait for a throttled rank's next CFS period (quota_throttle_s).
  double quota_s = 0;
  // Per stage: the CPU seconds per step of its worker (training thread + host communication)
  // and its quota share, for the stages under a quota with a CPU-time calibration (others: 0
  // and 1). quota_bound_s(Estimate).
  std::vector<double> quota_cpu_s, quota_share;
  std::vector<double> quota_period_s;  // per stage: its quota's CFS period (kCfsPeriodS when not held)
  // Per stage: the bytes one of its ranks sends per step over its groups other than the
  // tensor-parallel sums (StageCost::host_bytes; on CPU devices all Gloo), the outer exchange
  // aside. The calibration divides the steps' communication CPU by it.
  std::vector<double> host_bytes;
  // Per stage: the pipeline's sends and receives one of its ranks makes per step
  // (StageCost::Bytes::messages): the calibration takes their CPU out of the steps' per-byte figure.
  std::vector<double> host_messages;
  // Per stage: the bytes one of its ranks sends per step in the tensor-parallel sums
  // (StageCost::Bytes::tp): the calibration divides the sums' CPU by it.
  std::vector<double> tp_bytes;
  int bottleneck_stage = 0;
  double tokens_per_s = 0;
  double tflops_per_device = 0;   // model FLOPs / step time / devices
  double naive_step_time_s = 0;   // same degrees, naive placement, uniform partition
  std::vector<Baseline> baselines;  // megatron, naive
  double bytes_per_step[kLinkKinds] = {};  // by LinkKind, summed over all ranks (bytes sent)
  // Per term of the step (compute, tensor comm, pipeline comm, data-parallel sync, update): where
  // its figures came from on the bottleneck stage ("declared", "measured in a job", "measured
  // (calibrate table)", ...): --plan-only says which terms were measured.
  std::vector<std::pair<std::string, std::string>> sources;
};

struct RankMemory {
  int rank = 0;
  double params = 0;       // weights held by this rank (bytes): fp32, plus the bf16 copy in bf16 jobs
  double grads = 0;        // fp32: 4 bytes per parameter held
  double optimizer = 0;    // its shard of the Adam moments and of the reduce-scatter outputs
  double activations = 0;  // in-flight micro-batches
  double runtime = 0;      // CUDA context and library workspaces (Workload::runtime_bytes); 0 on the CPU
  double total() const { return params + grads + optimizer + activations + runtime; }
  double capacity = 0;     // usable device memory (bytes); 0 = unknown
};

// What NCCL needs to know of one node (nccl.hpp derives its environment from it): the
// interface its TCP traffic across islands binds to, and its island's RDMA ports.
// One setting of what the planner chooses beside the layout (train.recompute) and what the
// estimate gives it, for the chosen plan and its runner-up (--plan-only shows both).
struct ActivationChoice {
  spec::Recompute recompute = spec::Recompute::kNone;  // resolved: never auto
  spec::Schedule schedule = spec::Schedule::k1f1b;     // parallel.schedule resolved: never auto
  double bubble_s = 0;      // of step_time_s: the pipeline's fill and drain under `schedule`
  double step_time_s = 0;
  double recompute_s = 0;   // of it, replaying activations
  double activations = 0;   // bytes, on the stage with the largest memory need
  double memory = 0;        // that stage's total bytes per device
  double capacity = 0;      // its usable device memory (0 = unknown)
  bool fits = true;
  int virtual_stages = 1;   // interleaved: model chunks per stage (resolved: never auto); else 1
  bool document_mask = false;  // data.document_mask, as the memory model priced the attention
};

struct NodeNet {
  std::string ethernet_if;        // NodeFacts::ethernet_if
  LinkKind island_link = LinkKind::kEthernet;  // Ib / Roce when the node is on an RDMA island
  std::vector<std::string> hcas;  // "mlx5_0:1" ports of the island's kind and fabric, sorted
  int gid_index = -1;             // RoCE GID index (lowest of those ports)
};

struct IslandInfo {
  int id = 0;
  std::string kind;        // "ib", "roce", "ethernet"
  std::vector<int> nodes;  // ascending
  int devices = 0;
};

// One way of spanning the islands, priced for --plan-only (replicas.hpp: price_across).
struct AcrossMode {
  std::string name;          // "pipeline", "sync", "diloco"
  std::string what;          // "tensor 1 x pipeline 8 x data 1", ...
  bool feasible = true;
  std::string why;           // when not feasible: the planner's reason
  double step_time_s = 0;    // diloco: the outer sync amortized over inner_steps
  double ethernet_bytes_per_step = 0;  // all ranks together
};

// parallel.replicas > 1 (replicas.hpp).
struct Replicas {
  int count = 1;
  spec::OuterMode outer = spec::OuterMode::kSync;
  int inner_steps = 1, fragments = 1;
  spec::OuterDtype dtype = spec::OuterDtype::kFp32;
  double lr = 0.7, momentum = 0.9;      // the outer Nesterov step's (parallel.outer_lr, outer_momentum)
  std::vector<std::vector<int>> nodes;  // per replica, ascending
  // diloco: per outer sync (all fragments), the bottleneck member's exchange (seconds) and
  // the bytes all members send over their outer groups; of sync_s, what the steps wait for
  // (with overlap: max(0, exchange - overlap x step) per fragment, plus the data-parallel
  // all-gather); per step, what the estimate adds: exposed_s / inner_steps + agree_s + drift_s, where
  // agree_s is what the [loss, stop] sums across the replicas before the exchanges cost, per
  // step (replicas.hpp agree_per_step_s), and drift_s the wait at those sums for the replica
  // whose steps since the last took longest, per step (drift_per_step_s; 0 without a
  // calibration's outer.drift_ms).
  int overlap = 0;  // parallel.outer_overlap (tau)
  // parallel.elastic: the replicas train apart (a replica axis of their own, outer groups
  // across them). With outer sync (HSDP): the data-parallel group stays inside a replica and
  // every step the owned gradient shards are all-reduced over the outer groups; sync_s and
  // sync_bytes are then that all-reduce's, per step, agree_s the [loss, stop] sum across the
  // replicas every step and verdict_s the store's verdict before each update (per_step_s:
  // their sum). apart(): the replica axis is the RankPlan's (diloco, or elastic sync).
  bool elastic = false;
  double verdict_s = 0;
  bool apart() const { return count > 1 && (outer == spec::OuterMode::kDiloco || elastic); }
  bool hsdp() const { return count > 1 && outer == spec::OuterMode::kSync && elastic; }
  double sync_s = 0, sync_bytes = 0, exposed_s = 0, per_step_s = 0, agree_s = 0, drift_s = 0;
  // Per step, amortized: the small messages that cross Ethernet beside the payloads (diloco's
  // [loss, stop] sums over the outer groups, the log steps' job-wide maximum over the world
  // group; headers included, replicas.hpp) and the time the log steps' maximum takes.
  double small_bytes = 0, log_s = 0;
  std::vector<AcrossMode> across;  // pipeline, sync, diloco
  std::string proposal;            // the planner's advice ("" = none)
};

struct Plan {
  int world = 1;
  int tp = 1, pp = 1, dp = 1;
  int micro_batch = 1;      // sequences per micro-batch per DP rank
  int micro_batches = 1;    // m, per step per DP rank
  int global_batch = 1;
  int seq_len = 1;
  spec::Placement placement = spec::Placement::kHolmes;
  spec::PartitionKind partition = spec::PartitionKind::kAuto;
  spec::Precision precision = spec::Precision::kAuto;  // train.precision (auto: the backend resolves it)
  bool fp8_lm_head = false;                            // train.fp8_lm_head (precision fp8)
  std::string order;        // rank order the grid used (holmes always tp-dp-pp over islands)
  std::string device_kind;  // cuda | cpu
  int64_t params_total = 0;  // in memory, padded vocabulary rows included (model_size.hpp)
  int64_t params_model = 0;  // as users count them: real vocabulary rows
  std::string model;         // llama: "llama L=.. C=.. NH=../KVH=.. F=..", gpt2: "" (plans as before llama)
  int64_t vocab_padded = 0;
  std::vector<IslandInfo> islands;
  std::vector<std::string> hostnames;  // per node
  std::vector<NodeNet> node_nets;      // per node
  std::vector<int> island_order;  // islands in the order the pipeline visits them
  std::vector<RankInfo> ranks;
  std::vector<Stage> stages;
  std::vector<Group> groups;
  Estimate estimate;
  ActivationChoice activation;  // train.recompute and parallel.schedule as chosen (auto) or given
  bool activation_chosen = false;  // either was auto: runner_up holds the next best
  ActivationChoice runner_up;
  bool schedule_chosen = false, recompute_chosen = false;  // which of the two was auto
  // The chosen recompute mode under 1f1b, when the schedule is not 1f1b (the schedule's effect).
  bool has_one_f_one_b = false;
  ActivationChoice one_f_one_b;
  std::vector<RankMemory> memory;
  // parallel.pipe_fp8 as resolved: the pipeline's sends in FP8; and the estimated step with
  // the other choice (0 without a pipeline), so the plan can say what FP8 saves or costs.
  bool pipe_fp8 = false;
  double pipe_fp8_other_step_s = 0;
  std::vector<std::string> warnings;  // groups that cross slow links, assumptions made
  topo::Calibration calibration;      // the measured figures the estimate used (empty: none)
  Replicas replicas;                  // count 1: none
};

Plan make_plan(const spec::JobSpec& spec, const topo::ClusterTopology& topology);
// The plan of a job of one replica (parallel.replicas 1): the search, spelled out rank by rank.
// make_plan for such a job; make_replica_plan (replicas.hpp) plans each replica and the whole
// cluster with it, never through make_plan. std::invalid_argument for a spec of replicas.
Plan plan_one_replica(const spec::JobSpec& spec, const topo::ClusterTopology& topology);

// The cost model's link between the nodes of ranks a and b of `plan` (made from this spec and
// topology) as its estimate used it: calibrated, Ethernet between nodes under megatron, and
// as the pipeline group holding both carries it (link_in_group: Ethernet for every hop of a
// group that crosses islands). For measuring a calibration hop by hop.
LinkCost rank_link(const spec::JobSpec& spec, const topo::ClusterTopology& topology, const Plan& plan, int a, int b);
uint64_t plan_hash(const Plan& plan);

std::string format_plan_text(const Plan& plan);
std::string format_plan_json(const Plan& plan);
// The plan as one self-contained HTML page (inline SVG and style, no script; docs/pictures.md),
// and the part of it the run report embeds (`hash`: shown when not empty; a plan read back
// from JSON has no node_nets to hash). Every name from the topology or spec is escaped.
std::string format_plan_html(const Plan& plan);
std::string plan_html_section(const Plan& plan, const std::string& hash = "");

// Explicit parallel degrees (those not auto) must be able to make a job of `world`
// processes or devices: their product equals `world`, or divides it when some degree is
// auto. Else a UserError naming the parallel.* keys, the world size and `launched` (how the
// processes were started, e.g. "--nproc-per-node 3 on 1 node(s)"). The one such check: the
// search, the launcher, a single process, bench and start-up all call it.
void check_degrees_fit(const spec::JobSpec& spec, int world, const std::string& launched);

}  // namespace holmes::plan
