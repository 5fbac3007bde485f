// The cost model's compute and communication from what `holmes-train calibrate` measured
// (engine/topo/calibration_tables.hpp): a stage's passes from its device kind's table, a
// collective from its link class's curve. Where a table or curve does not hold what a plan
// asks, the answer says so, and the cost model falls back (docs/cost-model.md, "Terms").
//
// Compute, per stage and micro-batch, in this order:
//   1. the table's whole layers at the plan's (tensor slice, sequence, recompute), interpolated
//      linearly in the micro-batch between the sizes measured (outside them, the nearest
//      one's time per token), with the embedding and the head + loss from their own rows;
//   2. else from the table's GEMMs of that slice (their time per row, the nearest micro-batch)
//      plus the attention rows (or its FLOPs at the GEMMs' rate) and the memory-bound rest at
//      the table's copy rate: the analytic fallback;
//   3. else nothing: the declared rate (peak x efficiency) or a job's calibrated one prices it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/plan/model_size.hpp"
#include "engine/topo/calibration.hpp"

namespace holmes::plan {

// The key a table names its model by: "gpt2 L=12 C=768 NH=12 KVH=12 F=3072 V=50257".
std::string shape_key(const model::GptConfig& m);

// The table measured on `device_name` for this model in this precision (nullptr: none).
const topo::ComputeTable* table_for(const std::vector<topo::ComputeTable>& tables, const std::string& device_name,
                                    const std::string& precision, const std::string& model);

// One micro-batch of a stage's passes on one tensor-parallel rank, seconds: F, the backward's
// B and W as a split backward runs them, the whole backward in one pass, and of F + backward
// what replays recomputation (0 where the table has no recompute-free row to compare with).
struct MeasuredPasses {
  double forward_s = 0, backward_s = 0, weights_s = 0, backward_all_s = 0, replay_s = 0;
  std::string source;  // "table", "table (micro-batch interpolated)", "GEMMs of the table"
};
std::optional<MeasuredPasses> measured_passes(const topo::ComputeTable& t, const model::GptConfig& m, int tp, int micro_batch,
                                              int seq_len, spec::Recompute recompute, int layers, bool first, bool last,
                                              int act_bytes);

// The curves of one link as a group uses it: its class, the intra-node class for intra-node
// links, the transport (nccl or gloo) and the device the ranks run on.
struct LinkCurves {
  std::vector<const topo::CollectiveCurve*> curves;
  bool empty() const { return curves.empty(); }
  // Seconds of `op` over `ranks` for `bytes` (per rank, as the curve counts them): the curve of
  // that size of group; else one of another size, its alpha scaled by the ring's steps and its
  // bus bandwidth kept; nullopt when there is no curve for the op.
  std::optional<double> seconds(const std::string& op, int ranks, double bytes) const;
};
LinkCurves curves_for(const std::vector<topo::CollectiveCurve>& all, const std::string& link, const std::string& intra,
                      const std::string& transport, const std::string& device);

}  // namespace holmes::plan
