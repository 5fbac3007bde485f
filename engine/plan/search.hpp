// Candidate plans and the search over them: degrees (tensor within a node and dividing the
// heads, pipeline not beyond the layers, data = the rest), micro-batch sizes when the spec
// leaves them to the planner, island orders of the holmes placement, and the partition.
// Each candidate is scored with the cost model; the fastest that fits in memory wins.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/plan/cost_model.hpp"
#include "engine/plan/placement.hpp"

namespace holmes::plan {

struct Degrees {
  int tp = 1, pp = 1, dp = 1, micro_batch = 1;
};

struct Evaluated {
  Degrees deg;
  Layout layout;
  std::vector<StageCost> stages;
  std::vector<int> layers;  // per stage
  Workload work;
  Estimate estimate;
  bool fits = true;
  int worst_stage = 0;       // stage with the largest memory / capacity
  RankMemory worst_memory;   // of that stage
};

// Inputs shared by every candidate.
struct SearchInput {
  const spec::JobSpec* spec = nullptr;
  Facts facts;
  Facts ethernet_facts;  // the same cluster with every link between nodes on Ethernet
  DeviceTable table;
  bool cuda = false;
  bool nccl = false;  // cuda: device buffers on NCCL groups (decide_nccl), else staged through Gloo
  int world = 0;
  // The megatron placement runs every group over Ethernet; the others use the best link.
  const Facts& facts_for(spec::Placement placement) const {
    return placement == spec::Placement::kMegatron ? ethernet_facts : facts;
  }
};

// The partition a placement uses for the spec's parallel.partition: Megatron-LM (naive,
// megatron) splits layers evenly, so `auto` means `uniform` there; a list is used as given.
spec::PartitionKind partition_for(spec::Placement placement, spec::PartitionKind partition);

// Every feasible degree combination the spec allows on this cluster, in a fixed order.
// Throws UserError naming the constraint when there is none.
std::vector<Degrees> degree_candidates(const SearchInput& in);

// One candidate with the spec's placement and partition (`placement` and `partition` can be
// forced, e.g. for the baselines). naive and megatron lay Megatron-LM's order over the
// nodes as listed; megatron also puts every group on Ethernet. For holmes, island orders are tried and the one with
// fewest crossing tensor / data groups, then the fastest, is kept.
// `mode`: what blocks keep for backward (train.recompute resolved).
Evaluated evaluate(const SearchInput& in, const Degrees& deg, spec::Placement placement,
                   spec::PartitionKind partition, ActivationMode mode = {});
// The candidate `ev` (its degrees, layout and activation mode) priced again with the
// pipeline's sends in FP8 (on) or in the activation precision: what parallel.pipe_fp8 changes.
Evaluated with_pipe_fp8(const SearchInput& in, const Evaluated& ev, spec::Placement placement,
                        spec::PartitionKind partition, bool on);

// The modes train.recompute x parallel.schedule let the search try: the spec's, or for auto
// none, selective and full x 1f1b and zb-h1 (in that order: on equal estimates the one that
// replays less, then the one that holds less, wins).
std::vector<ActivationMode> activation_options(const spec::JobSpec& spec);
// parallel.virtual_stages: auto tries 2 .. this many model chunks per stage.
inline constexpr int kMaxAutoVirtualStages = 8;

// The best plan over all candidates (degrees x activation modes): fits first, then fastest.
// Throws UserError with the memory figures when no candidate fits.
Evaluated search(const SearchInput& in);

// For `best`'s degrees, the best of the other activation modes (fits first, then fastest);
// nullopt when the spec fixed both train.recompute and parallel.schedule.
std::optional<Evaluated> runner_up(const SearchInput& in, const Evaluated& best);

}  // namespace holmes::plan
