// Measuring a calibration inside a real job (cluster.calibrate; docs/cost-model.md,
// "Calibration"): what the cost model's inputs turned out to be under this job's traffic.
//
//   links:   after the groups exist, every rank probes its tensor, pipeline and data-parallel
//            groups, kind after kind, all groups of a kind at once (as the job runs them): a
//            one-float operation for the latency, then the job's own message size (activations
//            for tp and pp, the stage's parameters for dp) for the bandwidth, each inverted
//            through the cost model's formula for that operation. A pipeline is probed hop by
//            hop (even stages with the next, then odd ones), each hop against its own link.
//   compute: the model's FLOPs of a stage over its compute time per step, taking in every step
//            the slowest of the stage's ranks (they meet at every data-parallel sync, so the
//            job goes at their pace); the device rate written is the slowest stage's.
//   update:  per step, the host time a rank spends neither computing nor waiting on
//            communication (optimizer, gradient zeroing, norms), per parameter it holds
//            (Trainer::step_times).
//
// Rank 0 prints measured against declared and writes the file; every rank takes part.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "engine/parallel/group.hpp"
#include "engine/parallel/groups.hpp"
#include "engine/spec/job_spec.hpp"
#include "engine/topo/calibration.hpp"
#include "engine/runtime/startup.hpp"

namespace holmes::train {

// One measured link: the class the plan costs it as, and both figures.
struct LinkSample {
  int link = -1;  // plan::LinkKind, -1 = no sample
  double latency_s = 0, gbps = 0;                    // measured
  double declared_latency_s = 0, declared_gbps = 0;  // what the plan's estimate used
  double message_bytes = 0;  // one message of the probe: a ring step's chunk, a pipeline send
  // Tensor-parallel sums: seconds per sum of the activations inside the steps (0 = not
  // measured) and the idle probe's bandwidth it replaced (apply_step_sums).
  double step_sum_s = 0, probe_gbps = 0;
  bool tp_sum = false;  // the sample of a tensor-parallel group (not packed)
};

// The CPU seconds this process spent over the probe's pipeline and data-parallel transfers
// (every thread: the caller's and Gloo's I/O threads, which a CPU quota caps alike) and the
// bytes this rank sent in them, receiving as many (a hop's exchange both ways, a ring's
// steps): topo::Calibration::host_comm_ns_per_byte. Not the tensor-parallel probe: in the
// steps the training thread calls those sums itself (its CPU is in cpu_tflops).
struct HostComm {
  double cpu_s = 0, bytes = 0;
  // The probe's one-float pipeline exchanges: the process's CPU over them and how many sends
  // and receives this rank made (their bytes are nothing: each op's own cost).
  double message_cpu_s = 0, messages = 0;
};
// The probe of this rank (collective over the job; call once the training groups exist, before
// the steps). It measures the groups the steps use (`groups`: NCCL on device buffers where the
// plan gives them, Gloo otherwise) with buffers in the backend's memory `mem`, at the steps'
// message sizes. Samples of this rank's groups; a group is sampled by one member so that each
// counts once. `host`, when given, gets this rank's HostComm (each member measures its own
// process).
std::vector<LinkSample> probe_links(runtime::Runtime& rt, const spec::JobSpec& spec, parallel::ParallelGroups& groups,
                                    device::DeviceMemory& mem, HostComm* host = nullptr);
// The calibration's host_comm_ns_per_byte from every rank's HostComm: the median over the
// ranks that moved bytes of their CPU nanoseconds per byte sent; 0 when none did.
double host_comm_ns_per_byte(const std::vector<HostComm>& ranks);
// One rank's host time per step (the step less its compute and its communication waits), the
// optimizer update's part of it (StepStats::update_ms) and the parameters it holds.
struct HostWork {
  double host_s = 0, update_s = 0, params = 0;
};
// compute.update_ns_per_param: the updates' seconds over the parameters the ranks hold; and
// compute.host_us_per_step: the rest of the host time, the ranks' mean per step. That rest
// (posting the passes and their messages, the loss, the loader, the step's bookkeeping) does
// not follow the parameters nor the micro-batches: measured, it was about the same a rank
// across plans of other stage counts and micro-batches, and priced per parameter it sat on
// the stage holding the embedding (docs/results/cost-model-history.md). Ranks that did not
// time the update apart (update_s 0 everywhere): everything per parameter, host_us_per_step 0.
void calibrate_host_work(const std::vector<HostWork>& ranks, topo::Calibration& cal);
// The calibration's host_comm_us_per_message: the median over the ranks that sent and received
// the probe's one-float exchanges of their CPU microseconds per send or receive; 0 when none did.
double host_comm_us_per_message(const std::vector<HostComm>& ranks);
// The same path's CPU per byte as the steps spent it (topo::Calibration::host_comm_steps_ns_per_byte,
// which the planner prefers to the probe's): per rank, its process's CPU beyond the training
// thread per step (`other_cpu_s`) over the bytes the plan says it sends per step (`host_bytes`,
// plan::Estimate::host_bytes of its stage); the median over the ranks that send at least
// kMinStepsHostBytes a step. It counts every other thread (the data loader, the per-step sums'
// small messages), which would read as a high price per byte where the plan moves few bytes:
// those ranks are left out. 0 when none is left.
inline constexpr double kMinStepsHostBytes = 1 << 20;
double host_comm_steps_ns_per_byte(const std::vector<double>& other_cpu_s, const std::vector<double>& host_bytes);
// The tensor-parallel sums' CPU per step of one rank, from its tp group's tally over `steps`
// steps (parallel::Group::SumTally): the training thread's inside the sums, and the whole
// process's meanwhile (at least the thread's). Zeros without steps.
struct TpSumsCpu {
  double thread_s = 0, process_s = 0;
};
TpSumsCpu tp_sums_cpu_per_step(const std::map<size_t, parallel::Group::SumTally>& sums, int steps);
// topo::Calibration::host_comm_tp_ns_per_byte: per rank, the process's CPU seconds per step in
// the tensor-parallel sums (`tp_cpu_s`: every thread while the training thread was in one),
// plus its other threads' CPU outside them (`other_cpu_s`) beyond what its pipeline and
// data-parallel bytes cost at the probe's price (`host_bytes` x `host_ns_per_byte`), over the
// bytes the plan says it sends in the sums per step (plan::Estimate::tp_bytes of its stage);
// the median over the ranks with both. 0 when none. Gloo's I/O threads take in a peer's part
// of a sum as soon as it arrives, before this rank's training thread enters the sum when the
// peer is ahead: a window around the call misses that CPU (measured: several times the
// per-byte price of a tp-1 plan's other bytes left outside the windows). A tp > 1 calibration therefore writes no steps' figure for the other bytes (the planner uses
// the probe's for them). The training thread's share leaves cpu_tflops: each CPU second is
// priced once.
double tp_sums_ns_per_byte(const std::vector<double>& tp_cpu_s, const std::vector<double>& other_cpu_s,
                           const std::vector<double>& host_bytes, double host_ns_per_byte,
                           const std::vector<double>& tp_bytes);

// A tensor-parallel group's sample priced from what its sums cost inside the steps: at the
// start-up probe every member is idle and a sum takes tens of microseconds between CPU
// processes; in a step every member reaches each sum after its own compute (and, sharing a
// node's cores, after being scheduled again), which costs milliseconds. `sums` is the tp
// group's tally of the steady steps (parallel::Group::sums, bytes -> calls and seconds);
// the sums of `act_floats` (the [B, T, C] activations) are inverted through the ring
// all-reduce formula over `d` members with the probe's latency, so the class's efficiency at
// the sample's message size reproduces the in-step time. Unchanged when no such sum was timed.
void apply_step_sums(LinkSample& tp, const std::map<size_t, parallel::Group::SumTally>& sums, int d, size_t act_floats);

// Per link class over every rank's samples: bandwidth efficiency relative to the calibration-
// free declaration (`previous` is the calibration the plan already used), median latency.
void summarize_links(const std::vector<LinkSample>& all, const topo::Calibration& previous, topo::Calibration& out);

// The device rate a calibration writes (`device_tflops`), which the planner gives to the
// slowest declared kind of device, the others keeping their declared ratios to it
// (plan::calibrate_compute): each stage's measured rate over its planned one, the smallest of
// these ratios (the stage held back most: under a CPU quota or a shared device a stage that
// waits on the others computes in bursts, faster than when it is the busy one), times the
// slowest stage's planned rate (the slowest measured rate itself would give a fast device's
// rate to slower devices that sat in a waiting stage). 0 when nothing was measured.
double slowest_device_tflops(const std::vector<double>& measured, const std::vector<double>& planned);
// Writes `cal` to `file` (its folder made) and says where and on what it was measured, each
// line starting with `who` ("calibration", "calibrate"); UserError naming `key` (the option
// that named the file) when it cannot.
void write_calibration_file(const std::string& file, const topo::Calibration& cal, const char* who, const char* key);
// What a calibration records of the devices it was measured on (topo::DeviceRecord): the plan's
// device kind, the models the topology names, the GPU stack's versions on a cuda job, now.
topo::DeviceRecord device_record(const std::string& kind, const topo::ClusterTopology& topology);
// Collective: gathers the samples and each rank's compute time, and on rank 0 prints the
// comparison and writes spec.cluster.calibrate.
struct StepShare {
  double host_s = 0;                   // per step, this rank
  double cpu_s = 0;                    // CPU seconds of the training thread per step, this rank
  std::vector<float> compute_per_step;  // seconds of each steady step, this rank (same count on all)
  // CPU seconds of this process beyond the training thread's in each steady step
  // (Trainer::other_cpu_per_step): their median is the in-step figure beside the probe's HostComm.
  std::vector<float> other_cpu_per_step;
  std::map<size_t, parallel::Group::SumTally> tp_sums;  // this rank's tp sums in the steady steps
  int tp_sum_steps = 0;  // the steps tp_sums covers (Trainer::timed_steps)
  // diloco: this rank's outer exchanges over the wire (OuterSync::wire()): their halves' wall
  // seconds and bytes summed, and how many; the calibration's `outer` figure.
  double outer_wire_s = 0, outer_wire_bytes = 0;
  int outer_exchanges = 0;
  // diloco: this rank's sums across the replicas before an exchange (Trainer::presync_sums):
  // their wall seconds in all and how many; the calibration's `outer: drift_ms`.
  double presync_s = 0;
  int presync_sums = 0;
  double job_sum_s = 0;  // per step, this rank's job-wide sum (Trainer::StepTimes::job_sum_s)
  double update_s = 0;   // per step, this rank's optimizer update, a part of host_s (Trainer::StepTimes::update_s)
};
// The replicas' drift (topo::OuterCalibration::drift_ms) from every rank's sums before the
// exchanges (`seconds` in all over `sums` of them; ranks without any left out): the mean over
// the ranks of a sum's wall time less the ring's own (`ring_s`, 2 (N - 1) latencies), over
// sqrt(steps between two sums) x plan::expected_max_normal(replicas). A rank's wait there is
// the slowest replica's time since the last sum less its own replica's, so its mean over the
// replicas is what the slowest is behind the mean one, which plan::drift_per_step_s turns back
// into a wait for any number of replicas and steps. 0 when no rank summed.
struct PresyncWait {
  double seconds = 0;
  int sums = 0;
};
double replica_drift_ms(const std::vector<PresyncWait>& ranks, int replicas, double steps_between, double ring_s);
// The outer exchange's efficiency (topo::OuterCalibration): per rank that exchanged, the bytes
// it sent over its wall time less the ring's 2 (N - 1) latencies per exchange, over the outer
// group's declared rate (`group_gbps` / `previous_efficiency`, the class efficiency the plan
// already carried); the median over the ranks. 0 when no rank exchanged.
struct OuterWire {
  double seconds = 0, bytes = 0;
  int exchanges = 0;
};
double outer_efficiency(const std::vector<OuterWire>& ranks, int members, double latency_s, double group_gbps,
                        double previous_efficiency);
void finish_calibration(runtime::Runtime& rt, const spec::JobSpec& spec, const std::vector<LinkSample>& mine,
                        const StepShare& times, const HostComm& host = {});

}  // namespace holmes::train
