// The cost and memory model of one candidate plan (docs/cost-model.md has the formulas).
// A StageCost gives, for a stage holding n layers, its per-micro-batch compute, tensor and
// pipeline communication, and the data-parallel sync it cannot hide. The step couples the
// stages (estimate_step: the slowest pipelined part + the slowest exposed reduce-scatter + the
// slowest update + the slowest all-gather + the log exchange); the auto partition starts from
// the greedy balance of each stage's own F_s(n) = m t_s(n) + bubble_s(n) + dp_s(n) + update_s
// and moves layers while that coupled step drops (coupled_partition).
#pragma once

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "common/dtype.hpp"
#include "engine/plan/host_emulation.hpp"
#include "engine/plan/links.hpp"
#include "engine/plan/model_size.hpp"
#include "engine/plan/placement.hpp"
#include "engine/plan/plan.hpp"

namespace holmes::plan {

// Seconds to move `bytes` from a GPU of one node to a GPU of another over an Ethernet `link`
// (its per-rank Gb/s and per-message latency) with transport t (kNcclSocket or kGlooTcp):
// NCCL's socket transport copies through host memory in chunks that overlap the network, so
// the link sets the pace; the staged Gloo path downloads the whole buffer, sends it, then
// uploads it, adding two host copies at kHostCopyGBps. (Used to choose the transport of
// parallel.cross_island: auto; docs/cost-model.md.)
inline constexpr double kHostCopyGBps = 12.0;  // pageable cudaMemcpy over PCIe 4.0 x16, GB/s
// Seconds per value of one FP8 pack and one unpack of a pipeline boundary (parallel.pipe_fp8):
// on a GPU about 8 bytes of device memory traffic per value (the amax read, the cast's read
// and 1-byte write, the unpack's read and 2-byte write) at an effective 2 TB/s; on the CPU as
// measured for model/cpu/fp8.cpp on one core of the development VM: 4.9 ns (docs/cuda.md).
inline constexpr double kFp8CastSPerValueGpu = 8.0 / 2e12;
inline constexpr double kFp8CastSPerValueCpu = 5e-9;
// train.precision fp8 on a GPU: the FP8 tensor cores of Hopper and Ada peak at twice their
// bf16 rate (H100 SXM: 1979 against 989 dense TFLOP/s), so the linear layers' GEMM FLOPs are
// priced at this factor times the device's rate, plus the casts of their operands (current
// scaling: an amax read and a cast per tensor, about 5 bytes of device memory traffic per value
// at an effective 2 TB/s). No calibrate table measures FP8 GEMMs yet: the plan says so.
inline constexpr double kFp8GemmRateFactor = 2.0;
inline constexpr double kFp8OperandCastSPerValueGpu = 5.0 / 2e12;
// FP8 sends change the numbers a run computes: parallel.pipe_fp8 auto takes them, and a plan
// without them proposes them, only when the estimated step is at least this much faster.
inline constexpr double kPipeFp8MinGain = 0.02;
double ethernet_transfer_s(Transport t, double bytes, const LinkCost& link);

// What one step does, independent of placement.
struct Workload {
  model::GptConfig shape;  // the whole model (spec::model_config); model/counts.hpp counts it
  int seq_len = 0;       // T
  int micro_batch = 1;   // B per DP rank
  int micro_batches = 1; // m
  int global_batch = 1;
  DType act_dtype = DType::kF32;  // of the activations (JobSpec::activation_dtype): bf16 mixed precision or fp32
  ActivationMode activation;  // what blocks keep for backward (train.recompute, resolved)
  // A CUDA plan whose device buffers go through host memory into Gloo (engine/parallel/
  // group.hpp): kEthernet for parallel.cross_island gloo (pipeline sends over Ethernet pay the
  // staged path's two host copies, ethernet_transfer_s), kAll when the plan uses no NCCL
  // group (parallel.nccl): every transfer pays them, and tensor-parallel sums are widened to
  // fp32 for Gloo.
  enum class Staging { kNone, kEthernet, kAll };
  Staging staging = Staging::kNone;
  // The log steps' job-wide maximum over the world group, per step amortized (log_exchange_s,
  // groups.hpp): what the loop blocks on, so a diloco plan's only (elsewhere it runs in the
  // background: 0), whatever its layout.
  double log_s = 0;
  // Device memory the CUDA runtime and the libraries take on each GPU beside the job's buffers
  // (kCudaRuntimeBytes on a CUDA plan, 0 on the CPU): counted in every rank's memory.
  double runtime_bytes = 0;
  int act_bytes() const { return static_cast<int>(dtype_bytes(act_dtype)); }
  // Pipeline sends in FP8 (parallel.pipe_fp8): a byte per value on the links (E4M3
  // activations, E5M2 gradients) instead of act_bytes(), and a pack and an unpack of every
  // sent value, cast_s_per_value each pair.
  bool pipe_fp8 = false;
  double cast_s_per_value = 0;
  // train.precision fp8: the blocks' GEMMs (and the LM head's with fp8_lm_head) in FP8, each
  // operand value cast at operand_cast_s_per_value.
  bool fp8_gemms = false, fp8_lm_head = false;
  double operand_cast_s_per_value = 0;
  int boundary_bytes() const { return pipe_fp8 ? static_cast<int>(dtype_bytes(DType::kE4M3)) : act_bytes(); }
  // TP sums travel in the activation precision where NCCL sums them, as fp32 through Gloo.
  int tp_wire_bytes() const { return staging != Staging::kAll ? act_bytes() : 4; }
  // Weights a rank holds for its whole shard: the fp32 parameters (the optimizer updates them
  // and all-gathers them in place: they are not sharded) and, in bf16 jobs, the bf16 copy the
  // kernels read (model::Gpt params16_).
  int param_bytes() const { return act_dtype == DType::kF32 ? 4 : 4 + act_bytes(); }
  int grad_bytes() const { return 4; }               // fp32 gradient buffer, reduced in fp32
  // The distributed optimizer all-gathers the updated fp32 master weights (DistOptimizer::
  // update gathers Buf::f32 parameters; the bf16 compute copy is made from them), so the
  // all-gather moves 4 bytes per parameter in bf16 jobs too.
  int gather_bytes() const { return 4; }
  // Per parameter of the shard, held once over the data-parallel ranks (DistOptimizer): the
  // owned part's Adam m and v in fp32 and, with dp > 1, its reduce-scatter output (fp32), in
  // either precision (the master weights are param_bytes()).
  int optimizer_bytes(int dp) const { return 8 + (dp > 1 ? 4 : 0); }
};

// Where a stage's compute time came from (--plan-only says, per term).
enum class ComputeSource : unsigned char { kDeclared, kJob, kTable, kTableInterpolated, kGemms };
const char* to_string(ComputeSource s);

// Per-micro-batch parts and the exposed DP sync of one stage with n layers.
struct StageTime {
  double compute_s = 0;  // forward + backward (+ the replay of recomputation)
  double recompute_s = 0;  // of which the replay
  double weights_s = 0;  // of which the W passes a zero-bubble schedule moves (0 under 1f1b)
  double forward_s = 0;  // of which the forward pass (F; zb-h1's bubble needs it, bubble_s)
  double tp_s = 0;
  double pp_s = 0;       // the pipeline sends of one micro-batch: send_next_s + send_prev_s
  // Activation to the next stage, gradient to the previous. Interleaved: once per chunk, and
  // the last stage's activations of chunks 0..V-2 go on to stage 0 (the wrap-around hop).
  double send_next_s = 0, send_prev_s = 0;
  // Both leave the node through one port (the same class of link off the node): in the steady
  // state that port carries a micro-batch's activation and its gradient in each slot.
  bool sends_share_port = false;
  double dp_s = 0;       // per step, exposed: rs_exposed_s + ag_exposed_s + tied_s
  // Its parts: the gradients' reduce-scatter beyond what the stage's last backward (and its
  // drain waits) covers, the parameters' all-gather beyond the next step's first forward (and
  // its fill waits), the tied embedding's sum beyond what covers it (first stage; the last
  // stage's waits for nothing the step does not wait for anyway).
  double rs_exposed_s = 0, ag_exposed_s = 0, tied_s = 0;
  double update_s = 0;   // per step: optimizer update and other host work
  // Sends run on the communication thread beside the next pass: in the 1F1B steady state a
  // link costs a micro-batch slot only what it takes beyond the stage's own work (it carries
  // one message per micro-batch in each direction). The fill and drain of the pipeline wait
  // for every hop once forward and once backward (pp_fill_s).
  // Where both sends leave through one port (sends_share_port), a steady-state slot carries
  // both; a slot of the fill (activations only) or the drain (gradients only) one of them.
  double pp_exposed_s(bool steady = true) const {
    const double busy = compute_s + tp_s;
    const double port = steady && sends_share_port ? send_next_s + send_prev_s : std::max(send_next_s, send_prev_s);
    return std::max(0.0, port - busy);
  }
  double per_micro_batch() const { return compute_s + tp_s + pp_exposed_s(); }
  double fill_slot_s() const { return compute_s + tp_s + pp_exposed_s(false); }
  // This stage's share of the fill and drain: its sends (summed over the stages, each hop once
  // in each direction).
  double pp_fill_s() const { return send_next_s + send_prev_s; }
  // The idle slots of the fill and drain over p stages: (p - 1) micro-batch slots under 1F1B;
  // under zb-h1 the held-back W passes fill the slots, a W and as much again of each, but no
  // more than the shorter of the slot's F and B: (p - 1)(F + B - min(F, B, W)), the tables'
  // timing with free links (engine/schedule/schedule.hpp; schedule_test). With W <= F, B this
  // is the paper's (p - 1)(F + B - W); a W longer than F (full recomputation replays the
  // forward before each W) leaves (p - 1) B. weights_s is 0 under 1f1b.
  // Interleaved with V chunks per stage: a slot is a chunk's pass, 1/V of the stage's, so the
  // fill and drain idle (p - 1) / V micro-batch slots (Narayanan et al. 2021). Host emulation
  // may run the fill and drain's passes faster (burst_saving_s).
  double bubble_s(int p) const;
  // A slot's F and B beside its W (weights_s): the slot's sums and exposed sends split evenly
  // between F and B (a forward and a backward each carry half the tensor-parallel sums; each
  // pass waits for one of the two sends).
  std::pair<double, double> forward_backward_s() const {
    const double f = forward_s + (per_micro_batch() - compute_s) / 2;
    return {f, per_micro_batch() - weights_s - f};
  }
  // Of a slot, what the held-back W passes hide besides their own length: min(F, B, W).
  double weights_hidden_s() const {
    const auto [f, b] = forward_backward_s();
    return std::max(0.0, std::min({weights_s, f, b}));
  }
  // zb-h1: what a later stage idles at the end of a step per stage before it, B - min(F, B, W):
  // the gradient's B passes through the earlier stages less what this stage's held-back W's
  // fill of them (cost_model.cpp, the sync).
  double drain_wait_s() const { return std::max(0.0, forward_backward_s().second - weights_hidden_s()); }
  int chunks = 1;  // model chunks per stage (interleaved), else 1
  ComputeSource compute_source = ComputeSource::kDeclared;
  // Host emulation (host_emulation.hpp, set_bursts): the fill and drain's compute time over the
  // steady state's (1: the same), and the most one burst saves (unbounded).
  double burst_rate = 1;
  double burst_cap_s = std::numeric_limits<double>::infinity();
};

// The pipelined part of stage s's step: m t_s + bubble_s + 2 (p - 1) max(send) (objective
// without the sync and the update).
double pipelined_s(const StageTime& t, int micro_batches, int pipeline);

struct StageCost {
  int stage = 0;
  bool first = false, last = false;
  int tp = 1, dp = 1;
  double tflops = 0;           // slowest device of the stage, sustained
  bool tflops_calibrated = false;  // tflops is a job's calibrated rate (else declared)
  // The calibrate tables of the stage's devices (measured.hpp), one per device model; empty
  // unless every device of the stage has one: then they price its compute (the slowest).
  std::vector<const topo::ComputeTable*> tables;
  StageEmulation emu;          // host emulation (host_emulation.hpp); the defaults on GPUs
  LinkCost tp_link, dp_link, emb_link, next_link, prev_link;
  GroupSpan tp_span, dp_span;  // the hierarchical form of the tp and dp groups (NCCL plans; links.hpp)
  // The stage's sends in each kind of group by the class of link they take, over all of the
  // stage's groups of that kind (ring_shares; a pipeline hop or an embedding pair each send
  // over its own link): the links above are each kind's slowest, which prices its time, but
  // a group's bytes go where its members are (a data-parallel ring over nodes A A B sends a
  // third of them inside A). estimate_step splits bytes_per_step by them.
  struct SendKinds {
    LinkShares tp{}, dp{}, emb{}, next{}, prev{};
  } sends;
  double capacity = 0;         // smallest usable device memory of the stage (0 = unknown)
  double update_s_per_param = 0;  // Facts::update_s_per_param
  bool update_from_table = false; // Facts::update_from_table
  double host_s_per_step = 0;     // Facts::host_s_per_step

  // The link a micro-batch's activations leave this stage over, and how many times per
  // micro-batch with `chunks` model chunks (interleaved: once per chunk; the last stage's go on
  // to stage 0 between chunks over emb_link, which pairs the same tp and dp ranks); {nullptr,
  // 0} when none leave. hop_prev: the same for the gradients going back.
  std::pair<const LinkCost*, int> hop_next(int chunks) const;
  std::pair<const LinkCost*, int> hop_prev(int chunks) const;
  // The classes of link those hops' sends take (SendKinds: next or prev, emb for the wrap).
  const LinkShares& hop_next_kinds() const { return last ? sends.emb : sends.next; }
  const LinkShares& hop_prev_kinds() const { return first ? sends.emb : sends.prev; }
  StageTime time(const Workload& w, int layers) const;
  // train.precision fp8: the seconds of one micro-batch's training FLOPs of `layers` blocks (and
  // the head on the last stage) at this stage's rate, the GEMMs at kFp8GemmRateFactor times it
  // plus their operands' casts (the analytic form; no table measures FP8 GEMMs yet).
  double fp8_train_s(const Workload& w, int layers, double tokens) const;
  // Bytes one rank of the stage sends per step over each of its groups, receiving as many
  // (ring steps, a send and a receive per micro-batch each way, the tied sum over two ends):
  // the tensor-parallel sums (tp_link), the activations and gradients to the next and previous
  // stage (hop_next / hop_prev), the data-parallel reduce-scatter and all-gather (dp_link),
  // the tied embedding's sum (emb_link). estimate_step's bytes_per_step and the quota bound.
  struct Bytes {
    double tp = 0, next = 0, prev = 0, dp = 0, emb = 0;
    // The pipeline's sends and receives (each hop crossing: the activation one way, its
    // gradient the other): what host_comm_s_per_message prices beside the bytes.
    double messages = 0;
  };
  Bytes bytes_per_step(const Workload& w, int layers) const;
  // What of it the host communication path moves beside the training thread (the
  // communication thread and Gloo's I/O threads): every group but the tensor-parallel sums,
  // which the training thread calls itself (their CPU is priced apart, tp_comm_s_per_byte, or,
  // with older calibrations, in cpu_tflops measured at the same degree). On CPU devices every
  // group is Gloo.
  static double host_bytes(const Bytes& b) { return b.next + b.prev + b.dp + b.emb; }
  // m t_s(n) + bubble_s(n) + 2 (p - 1) max(send) + dp_s(n) + update_s(n): what the partition
  // balances (the fill and drain priced as if every hop were as slow as this stage's worst).
  double objective(const Workload& w, int pipeline, int layers) const;
  double params_per_rank(const Workload& w, int layers) const;  // count, not bytes
  RankMemory memory(const Workload& w, int pipeline, int layers) const;
  // interleaved: the stage's `layers` cut into its w.activation.chunks model chunks so that
  // their passes take equal time as near as whole layers allow: the last stage's last chunk
  // carries the LM head, so it takes fewer layers (balanced_partition over the chunks' FLOPs;
  // with no head, the even cut, earlier chunks taking the remainder). Every chunk >= 1 layer.
  // One chunk: {layers}. plan.cpp fill_chunks cuts the plan's chunks with it.
  std::vector<int> chunk_cut(const Workload& w, int layers) const;
};

// Micro-batches whose activations stage `stage` of `pipeline` holds at its peak under
// `schedule` with m micro-batches: min(m, p - s) under 1f1b, min(m, p) under zb-h1 (the
// step tables' max_in_flight, engine/schedule/schedule.hpp; schedule_trainer_test ties them).
// Not for interleaved: its chunks' slots come from the tables themselves (chunk_slots).
int in_flight_micro_batches(spec::Schedule schedule, int micro_batches, int pipeline, int stage);
// Interleaved: the activation slots each of the stage's `chunks` model chunks allocates, read
// from the step table the stage runs (engine/schedule/schedule.hpp: max_in_flight per chunk).
// Their sum exceeds the live peak (Megatron's p + (p - 1) / V micro-batches on stage 0): each
// chunk's model keeps its own slots.
std::vector<int> chunk_slots(int micro_batches, int pipeline, int stage, int chunks);

// Links and device speeds of every stage of a layout. O(world).
std::vector<StageCost> stage_costs(const Facts& f, const DeviceTable& d, const Layout& lay);

// Step estimate (everything but naive_step_time_s) for a partition, w.log_s included.
Estimate estimate_step(const Workload& w, const std::vector<StageCost>& stages, const std::vector<int>& layers,
                       int world);

// The auto partition, coupled: estimate_step's step is a sum of maxima over the stages (the
// pipelined part, the exposed reduce-scatter, the all-gather, the update), which the greedy
// balanced_partition of StageCost::objective (each stage on its own timeline) does not
// minimise. Steepest descent by single-layer moves from the stages that set a maximum, from
// `start`, from the pipelined parts alone balanced and from the uniform split; the best
// result. Every stage keeps at least `min_layers`. Never slower by estimate_step than
// `start`; on 300 random 2-4 stage cases it found the brute-force optimum in 298, within 2.6%
// in the other two (test/unit/plan/fidelity_test.cpp). About 3 L moves of O(p) candidates.
// Memory first: a partition whose every stage fits its devices (StageCost::memory against its
// capacity) wins over any that does not; no move takes a fitting partition out of memory, and
// the stages balanced by their share of memory are a start too.
std::vector<int> coupled_partition(const Workload& w, const std::vector<StageCost>& stages, std::vector<int> start,
                                   int min_layers = 1);

// Usable fraction of device memory (the rest: fragmentation, NCCL's buffers, what the runtime
// allocates beyond kCudaRuntimeBytes).
inline constexpr double kUsableMemoryFraction = 0.9;
// The CUDA context, cuBLASLt's and cuDNN's workspaces on each GPU of a CUDA plan: measured
// 0.92-1.66 GiB above the job's buffers on an H200 (one process, GPT-2 124M to a 7B Llama,
// docs/results, the H200 rows).
inline constexpr double kCudaRuntimeBytes = 1024.0 * 1024 * 1024;

}  // namespace holmes::plan
