// What `holmes-train calibrate` measures on one kind of device, for the cost model to price
// compute and communication from (docs/cost-model.md, "Calibration tables"): the step's
// kernels by shape, run through the project's own model and kernels, and the collectives swept
// over message and group size through the project's own groups. Part of a calibration file:
//
//   tables:
//     - device: {kind: cuda, name: "NVIDIA H200", driver: ..., date: ...}
//       precision: bf16
//       model: "gpt2 L=12 C=768 NH=12 KVH=12 F=3072 V=50257"
//       layers: [{tp: 1, micro_batch: 4, seq_len: 1024, recompute: none, forward_ms: 1.9,
//                 backward_ms: 2.1, weights_ms: 1.8, backward_all_ms: 3.8}, ...]
//       embedding: [{tp: 1, micro_batch: 4, seq_len: 1024, forward_ms: .., backward_ms: .., weights_ms: ..}]
//       head: [...]                      # the LM head and the loss, same keys
//       gemms: [{name: qkv, tp: 1, m: 4096, n: 2304, k: 768, forward_ms: .., input_grad_ms: .., weight_grad_ms: ..}]
//       attention: [{tp: 1, micro_batch: 4, seq_len: 1024, forward_ms: .., backward_ms: ..}]
//       optimizer_ns_per_param: 0.12
//       copy_gbps: 2900                  # device memory copy, GB/s
//       upload_gbps: 24, download_gbps: 25, launch_us: 4.5   # GPU only
//   collectives:
//     - {device: "NVIDIA H200", link: intra-node, intra: nvswitch, transport: nccl, op: all_reduce, ranks: 8,
//        alpha_us: 11, bus_gbps: 2900, points: [[65536, 2.1e-05], [1048576, 4.4e-05], ...]}
//
// Every time is one pass of one micro-batch on one device (a tp rank's slice). A table prices
// only the model it names (its shapes) in its precision, and only nodes of its device.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace holmes::topo {

struct DeviceRecord;

// One transformer block at one tensor-parallel slice, micro-batch, sequence and recompute mode:
// its forward (F), the backward's input gradients (B) and weight gradients (W) as a split
// backward runs them, and the whole backward in one pass (1F1B). Recomputation's replays are
// inside B and W (selective, full) as the model runs them.
struct LayerTime {
  int tp = 1, micro_batch = 1, seq_len = 0;
  std::string recompute = "none";  // none | selective | full
  double forward_ms = 0, backward_ms = 0, weights_ms = 0, backward_all_ms = 0;
};

// The embedding (first stage) or the LM head with the loss (last stage), same keys.
struct EdgeTime {
  int tp = 1, micro_batch = 1, seq_len = 0;
  double forward_ms = 0, backward_ms = 0, weights_ms = 0;
};

// One GEMM of a block (qkv, attn_out, mlp_in, mlp_out) or the head: out (m x n) = in (m x k) W,
// m the micro-batch's tokens, n and k a tp rank's slice.
struct GemmTime {
  std::string name;
  int tp = 1;
  long m = 0, n = 0, k = 0;
  double forward_ms = 0, input_grad_ms = 0, weight_grad_ms = 0;
  double flops() const { return 2.0 * double(m) * double(n) * double(k); }
};

// The attention core (scores, softmax, weighted sum) of one block's slice of heads.
struct AttentionTime {
  int tp = 1, micro_batch = 1, seq_len = 0;
  double forward_ms = 0, backward_ms = 0;
};

struct ComputeTable {
  std::string device_kind, device_name;  // the DeviceRecord's kind and name (versions: the file's)
  std::string precision = "fp32";        // fp32 | bf16
  std::string model;                     // plan::shape_key of the model measured
  std::vector<LayerTime> layers;
  std::vector<EdgeTime> embedding, head;
  std::vector<GemmTime> gemms;
  std::vector<AttentionTime> attention;
  double optimizer_ns_per_param = 0;  // the optimizer's update, per parameter a rank holds
  double copy_gbps = 0;               // device memory to device memory, GB/s
  double upload_gbps = 0, download_gbps = 0;  // host <-> device, GB/s (GPU; 0 on the CPU)
  double launch_us = 0;               // one small kernel, launched and run (GPU)
};

// One collective through the project's groups on one link class and group size: seconds by the
// bytes each rank holds (all-reduce, reduce-scatter input, all-gather output) or sends
// (send_recv), ascending, and its alpha + size / bus bandwidth fit, where the bus bandwidth is
// the algorithm's bytes on the wire per rank over the time (NCCL's busbw: 2 (d - 1) / d x S for
// an all-reduce, (d - 1) / d x S for the others, S for a send).
struct CollectiveCurve {
  std::string device;     // device name the curve was measured on
  std::string link;       // intra-node | ib | roce | ethernet
  std::string intra;      // intra-node class (nvswitch, nvlink, pcie, shm); "" for the others
  std::string transport;  // nccl | gloo
  std::string op;         // all_reduce | reduce_scatter | all_gather | send_recv
  int ranks = 2;
  std::vector<std::pair<double, double>> points;
  double alpha_us = 0, bus_gbps = 0;
};

// The bytes on the wire per rank of `op` over `ranks` for `bytes` (the factor of the bus bandwidth).
double wire_factor(const std::string& op, int ranks);
// Least-squares alpha + wire / bus fit of a curve's points (alpha >= 0, bus > 0).
void fit_curve(CollectiveCurve& c);
// Seconds of `c` at `bytes`: its points interpolated in log-log, beyond them its fit.
double curve_seconds(const CollectiveCurve& c, double bytes);

// The accepted op names.
inline constexpr const char* kCollectiveOps[] = {"all_reduce", "reduce_scatter", "all_gather", "send_recv"};

}  // namespace holmes::topo
