// Host emulation: what CPU workers that stand in for devices pay on the host they run on, for
// emulated clusters (the lab's network namespaces on one machine, containers on one box). A
// node is emulated only where it says so: a CPU node whose topology entry declares a CPU quota
// (cpu_quota_cores, cpu_quota_period_ms) or a machine its cores are shared on (machine,
// machine_cores), and the CPU nodes of a plan whose calibration was measured on CPU devices and
// carries CPU-time figures (cpu_tflops, host_comm_*, job_sum_hop_us). CUDA nodes never are: the
// topology file refuses those keys on them and a CPU calibration never reaches a CUDA plan
// (engine/topo/calibration.hpp, the device-kind rule). Every function here is the identity on
// stages without emulation, which is what a GPU plan's stages are.
//
// What it prices (docs/cost-model.md, "Host emulation"):
//   quota bound     a held worker runs at most its share of the wall time: its CPU seconds per
//                   step (passes at cpu_tflops, host communication per byte and per message,
//                   tensor-parallel sums per byte) over the share bound the step;
//   quota wait      a message that reaches a throttled rank waits for its next CFS period;
//   shared sends    a pipeline send's bytes move while both ends' cgroups run: at the part of
//                   the wall time they run at their load (throttled_share);
//   covered sync    compute covers the data-parallel sync only at the quota's share;
//   bursts          the fill and drain's passes run at a whole core while a period's quota lasts;
//   shared machine  on the pipeline's loop, a stage waiting for the bottleneck runs at a whole
//                   core only where the machine's other busy workers leave one;
//   message delays  each pipeline message waits an exponential delay of the measured mean hop
//                   of the steps' job-wide sum beyond its link's latency (wake-ups on a busy
//                   host); the step waits for the latest path (a fixed-seed Monte Carlo).
#pragma once

#include <functional>
#include <limits>
#include <span>
#include <vector>

#include "engine/schedule/timing.hpp"

namespace holmes::topo {
struct ClusterTopology;
struct Calibration;
}  // namespace holmes::topo

namespace holmes::plan {

struct Facts;
struct LinkCost;
struct StageCost;
struct StageTime;
struct Estimate;
struct Workload;

// The kernel's default CFS period (cpu.cfs_period_us, cgroup v2 cpu.max): a cgroup's quota is
// handed out per period of this length. A topology's cpu_quota_period_ms says another.
inline constexpr double kCfsPeriodS = 0.1;

// The pipeline loop's message delays: the steps that draw them, and the draws' seed (every
// estimate the same draws: layouts compare on them).
inline constexpr int kLoopSamples = 32;
inline constexpr unsigned kLoopSeed = 20261129;

// One node's emulation (NodeFacts::emu); the defaults are a node that is not emulated.
struct NodeEmulation {
  // Share of the wall time a worker runs while it computes under a quota: quota cores / the
  // cores it computes on, at most 1.
  double cpu_share = 1;
  double cpu_period_s = kCfsPeriodS;  // the quota's CFS period
  // The machine the node shares with other nodes (the index of the first node naming it; -1:
  // a machine of its own) and that machine's cores.
  int machine = -1;
  double machine_cores = 0;
  // FLOPs per CPU second of a worker's whole step (0 = unknown), and the tensor-parallel degree
  // it holds for (0 = any): with cpu_share < 1 its CPU seconds per step bound the step.
  double cpu_tflops = 0;
  int cpu_tensor = 0;
  // CPU seconds the host communication path spends per byte a worker sends over a host group,
  // its tensor-parallel sums per byte sent in them, and per pipeline send or receive (0 = unknown).
  double host_comm_s_per_byte = 0, tp_comm_s_per_byte = 0, host_comm_s_per_message = 0;
  // The mean hop of the steps' job-wide sum as measured (0 = not measured): a message's latency
  // on a busy host (the job-wide sum and the pipeline loop's delays).
  double job_sum_hop_s = 0;
};

// One stage's emulation (StageCost::emu), from its nodes (StageEmulationBuilder).
struct StageEmulation {
  double cpu_share = 1;               // smallest of its nodes'
  double cpu_period_s = kCfsPeriodS;  // longest of its held nodes'
  int machine = -1;                   // its first node's machine (-1: machines of their own)
  double machine_cores = 0;
  double cpu_tflops = 0;              // smallest usable of its nodes' (0 = unknown)
  double host_comm_s_per_byte = 0, tp_comm_s_per_byte = 0, host_comm_s_per_message = 0;  // largest
  // The smaller share of the two ends of hop_next's and hop_prev's hops (share_sends_at_load).
  double next_share = 1, prev_share = 1;
  double job_sum_hop_s = 0;           // largest of its nodes'
  bool held() const { return cpu_share < 1; }
};

// Fills each CPU node's NodeEmulation from its topology entry (quota, period, machine) and from
// `cpu` (the calibration's CPU-time figures; nullptr: none measured on CPU devices). CUDA nodes
// keep the defaults whatever they carry.
void emulate_nodes(const topo::ClusterTopology& topo, const topo::Calibration* cpu, Facts& f);

// Adds a stage's nodes one by one, then finish().
class StageEmulationBuilder {
 public:
  explicit StageEmulationBuilder(int tp) : tp_(tp) {}
  void add(const NodeEmulation& n);
  StageEmulation finish() const;

 private:
  int tp_;
  StageEmulation s_;
  double held_period_ = 0;
};
// Each stage's next_share and prev_share from its own cpu_share and its neighbours' (the
// last stage's next hop wraps to stage 0, for interleaved).
void share_sends_at_quota(std::vector<StageCost>& stages);

// A pipeline send of `send_s` seconds (latency included) over `link` whose ends run `share` of
// the wall time: its bytes take 1 / share as long, its latency does not. The probe that
// measured the link ran unthrottled, so this is not counted twice.
double send_at_share_s(const LinkCost& link, double send_s, double share);
// The fill and drain's compute over the steady state's for a held stage with a CPU-time
// figure (StageTime::burst_rate, burst_cap_s); nothing otherwise.
void set_bursts(const StageCost& stage, StageTime& t);
// What the fill and drain's bursts save of `idle` seconds of its p - 1 idle slots.
double burst_saving_s(const StageTime& t, double idle, int pipeline);

// The part of its unused share, 1 - share, that a cgroup under a CPU quota stands throttled
// for at `load` (its CPU seconds over its share of the step): load^12.
double throttled_share(double load);
// Sets each stage's next_share and prev_share from the loads of `e` (an estimate priced with
// these stages): 1 minus the unused share times throttled_share(CPU seconds over the share of
// the step); a stage without a CPU-time figure keeps its cpu_share.
void share_sends_at_load(std::vector<StageCost>& stages, const Estimate& e);
// Prices a layout whose sends move at their ends' load: `place()` prices the stages as they
// are; with a held stage in a pipeline, from free sends, then twice with the shares of the
// estimate before. Without one: place() once.
void place_at_load(std::vector<StageCost>& stages, const std::function<const Estimate&()>& place);

// The longest a held stage's worker needs per step (its CPU seconds per step over its share),
// the largest over the stages; 0 without held stages with a CPU-time figure. `keep` gets
// every stage's CPU seconds, share and period (Estimate::quota_cpu_s, quota_share,
// quota_period_s; share 1: not held).
double quota_bound_s(const Workload& w, const std::vector<StageCost>& stages, const std::vector<int>& layers,
                     const std::vector<StageTime>& times, Estimate* keep = nullptr);
double quota_bound_s(const Estimate& e);  // from the figures kept
// The expected wait for a throttled rank's next CFS period on a step of `step` seconds: half
// the throttled part of the period, (1 - share) P / 2, in the fraction of periods the rank
// spends its quota in; the largest over the stages; 0 for one stage (its peers are throttled
// together) and without held stages.
double quota_throttle_s(const Estimate& e, double step);
// The quota's part of a step whose other parts sum to `rest`: max(bound, rest + wait) - rest.
double quota_wait_s(const Estimate& e, double rest);
// Estimate::quota_s of a step priced as `e` (its parts summed in e.step_time_s), the stages'
// figures kept in `e`.
double quota_s(const Workload& w, const std::vector<StageCost>& stages, const std::vector<int>& layers,
               const std::vector<StageTime>& times, Estimate& e);

// The largest measured hop of the steps' job-wide sum over the stages (0 = none).
double job_sum_hop_s(const std::vector<StageCost>& stages);
// Per boundary of a one-chunk pipeline: the mean delay its messages wait beyond the hop's
// latency (`hops`, the links' alphas): the measured hop of either end beyond the longer alpha.
std::vector<double> message_delays(const std::vector<StageCost>& stages, std::span<const schedule::HopTimes> hops);
// The passes of the stages other than `bottleneck` as they run when they wait for it: a held
// stage with a CPU-time figure has quota to spare and runs faster, up to a whole core
// (burst_rate), or on a shared machine the cores the machine's other busy workers leave.
// `per_micro` is each stage's compute per micro-batch at the priced rate; `span_at` times the
// step's loop with the passes as given (the machine's busy parts are read from it).
void run_waiting_stages(const std::vector<StageCost>& stages, const std::vector<StageTime>& times, int bottleneck,
                        int micro_batches, std::span<const double> per_micro,
                        const std::function<double()>& span_at, std::vector<schedule::PassTimes>& passes);

}  // namespace holmes::plan
