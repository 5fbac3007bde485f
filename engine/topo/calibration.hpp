// A calibration: the cost model's inputs as measured inside a real job (cluster.calibrate),
// for --plan-only and later runs to read (cluster.calibration). docs/cost-model.md,
// "Calibration", has the format:
//
//   format: holmes-calibration/1
//   source: "job 'holmes', 4 ranks, plan 9cdb1db7c7f65831"
//   compute: {device_tflops: 0.0187, declared_tflops: 0.025, update_ns_per_param: 12.5,
//             cpu_tflops: 0.06, cpu_tensor: 1, host_comm_ns_per_byte: 3.1, host_comm_us_per_message: 120,
//             stages: [{stage: 0, layers: 4, tflops: 0.019}, ...]}
//   links:
//     ethernet: {efficiency: 0.81, latency_us: 250, gbps_per_rank: 0.162, declared_gbps_per_rank: 0.2, groups: 2,
//                sizes: [[65536, 1.3], [3276800, 0.78]]}
//     intra-node: {efficiency: 0.0031, latency_us: 36, ..., tp_sum_ms: 4.9}
//   outer: {link: ethernet, efficiency: 0.72, exchange_ms: 570, syncs: 16, drift_ms: 40}
//
// The planner uses compute.device_tflops (the slowest stage's rate), compute.cpu_tflops (CPU
// devices: the passes' FLOPs per CPU second of the whole worker, what a CPU quota bounds),
// compute.host_comm_ns_per_byte and host_comm_us_per_message (CPU devices: the host
// communication path's CPU per byte sent and per pipeline send or receive, what the quota bound
// adds for a worker's host-group traffic), compute.update_ns_per_param (the optimizer's
// update per step, per parameter a rank holds; where host_us_per_step is absent, an older
// calibration's, all host time per step outside the passes and communication),
// compute.host_us_per_step (that other host time, per rank and step) and,
// per link class, efficiency (measured bandwidth
// over the bandwidth the plan declared), its efficiency by message size when measured, and
// latency_us, and with diloco outer.efficiency for the outer exchange; the rest is what was measured, kept
// for people to read. A figure of 0 (or a class not listed) was not measured.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/topo/calibration_tables.hpp"

namespace holmes::topo {

struct LinkCalibration {
  double efficiency = 0;   // measured per-rank bandwidth / declared; 0 = not measured
  double latency_us = 0;   // one message, alpha of the cost model; 0 = not measured
  double gbps_per_rank = 0;
  double declared_gbps_per_rank = 0;
  int groups = 0;          // groups the figures come from
  // Efficiency by message size (bytes of one message: a ring step's chunk, a pipeline send),
  // ascending, one point per size the probe measured; empty = one figure for every size.
  std::vector<std::pair<double, double>> sizes = {};
  // Milliseconds per tensor-parallel sum of the activations inside the steps (for people: the
  // efficiency already carries it; 0 = not measured). train::apply_step_sums.
  double tp_sum_ms = 0;
};

// diloco's outer exchange (parallel.outer: diloco) as it ran inside the steps: its two halves
// (the parts to their owners, the owners' averages all-gathered) moved 2 (N - 1) part payloads
// per member at `efficiency` x the declared rate of the outer groups' link class (`link`),
// waits for the other replicas included; the planner prices the exchange with it instead of
// the link's probed efficiency: in the steps the exchange moves slower than an idle probe of the
// same link sees (docs/diloco.md). 0 = not measured.
struct OuterCalibration {
  std::string link;        // a kCalibratedLinks name
  double efficiency = 0;   // measured per-member rate of the exchange / declared rate of the link
  double exchange_ms = 0;  // mean wall time of one exchange's two halves (for people)
  int syncs = 0;           // exchanges the figures come from (every rank's)
  // The replicas' drift: milliseconds per square root of a step. Between two meetings (the sums
  // across the replicas before each exchange) every replica runs its steps alone; at the sum
  // each waits for the one whose steps took longest. Measured as the ranks' mean wall time in
  // those sums over sqrt(steps between them) x the expected maximum of N standard normals
  // (plan::expected_max_normal): the standard deviation of one step's time, were the steps
  // independent, that would make that wait. The planner prices the wait at every meeting from
  // it (plan::drift_per_step_s). 0 = not measured.
  double drift_ms = 0;
};

// The devices a calibration was measured on: figures measured on one kind are never applied to
// another (check_device_kind). `kind` is cpu or cuda; `name` the device model as the topology
// names it (several, joined by ", ", when a job ran on more than one); for GPUs the library
// versions the measurement ran with; `date` when (UTC, ISO 8601). Files of format 1 carry none:
// every one of them came from a CPU job (no GPU job wrote one), so they read as kind cpu.
struct DeviceRecord {
  std::string kind;   // "cpu" | "cuda"
  std::string name;   // "" = not said
  std::string driver, cuda, cublaslt, cudnn, nccl;  // "" = not known (CPU devices: none)
  std::string date;
  // "cuda devices ('NVIDIA H200')", "cpu devices"
  std::string describe() const;
  // The names as a list ("" gives none).
  std::vector<std::string> names() const;
};

struct StageCalibration {
  int stage = 0;
  int layers = 0;
  double tflops = 0;  // model FLOPs of the stage / its measured compute time, per device
};

struct Calibration {
  std::string file;            // the file it was read from ("" when made in memory), for messages
  std::string source;          // where it was measured (free text)
  DeviceRecord device;         // what it was measured on
  double device_tflops = 0;    // sustained per device over the whole job; 0 = not measured
  double declared_tflops = 0;  // what the plan assumed when it was measured
  // The optimizer's update per step and held parameter; without host_us_per_step (older
  // calibrations) all host work outside the passes and communication per step and parameter.
  double update_ns_per_param = 0;
  // The rest of that host work (posting the passes and messages, the loss, the loader, the
  // step's bookkeeping), microseconds per rank and step, the ranks' mean; 0 = not measured.
  double host_us_per_step = 0;
  // One hop of the step's job-wide sum (the gradient norm, loss and stop flags: a small ring
  // all-reduce over the data-, tensor- and pipeline-parallel groups in turn) as it ran in the
  // steps, microseconds: the least a rank waited there per step over the ring's hops. The
  // probe's latency_us is one idle message; in the steps a hop also pays the ranks' wake-ups
  // on busy hosts (host emulation prices it: plan/host_emulation.hpp). 0 = not measured.
  double job_sum_hop_us = 0;
  // CPU devices: the passes' FLOPs per CPU second the worker's training thread spent in the
  // step (its compute, host work, and its tensor-parallel sums unless host_comm_tp_ns_per_byte
  // prices them apart), the least of the stages, for every
  // CPU node alike; 0 = not measured. Unlike device_tflops it does not count the time a
  // quota held the worker back, so plan::estimate_step can bound the step by the quota.
  double cpu_tflops = 0;
  // The tensor-parallel degree of the plan cpu_tflops was measured on (0 = not said): its
  // CPU seconds include that plan's tensor-parallel sums (hundreds a step, each copying and
  // adding in the worker), so the figure bounds only plans of that degree.
  int cpu_tensor = 0;
  // CPU devices: CPU nanoseconds the host communication path (the communication thread and
  // Gloo's I/O threads) spends per byte a rank sends over a host (Gloo) group, receiving as
  // many bytes included (every host transfer the planner prices is symmetric: ring steps, a
  // pipeline stage's sends and receives, the outer exchange's halves). Measured by the link
  // probe (process CPU time over its pipeline and data-parallel transfers, train::probe_links);
  // a CPU quota caps these threads too, so plan::quota_bound_s adds a worker's host bytes per
  // step times this to its CPU seconds. 0 = not measured (files of older binaries): the bound
  // then counts the training thread's CPU alone, as before.
  double host_comm_ns_per_byte = 0;
  // The same, as the steps spent it (train::host_comm_steps_ns_per_byte: a worker held by its
  // quota pays more wake-ups per byte than an idle one). 0 = not measured (older files, or ranks that moved
  // too few bytes a step for the figure to mean anything).
  double host_comm_steps_ns_per_byte = 0;
  // CPU devices, tp > 1: the tensor-parallel sums' CPU in the steps (every thread of the
  // process while the training thread was in a sum: its own copies and adds, Gloo's I/O
  // threads) per byte a rank sends in them (train::calibrate_compute). Where it is given,
  // cpu_tflops and host_comm_steps_ns_per_byte leave the sums out, and the planner prices them
  // with this at any tensor degree: the rate then holds for plans of every degree (cpu_tensor
  // says which one it was measured at). 0 = not measured (tp 1, or files of older binaries).
  double host_comm_tp_ns_per_byte = 0;
  // CPU devices: the host communication path's CPU per pipeline send or receive beside its
  // bytes, microseconds (the probe's one-float exchanges, train::host_comm_us_per_message):
  // each op wakes the communication and I/O threads of both ends, which costs the same for a
  // small message as for a large one. A pipeline of many small messages spends more CPU on
  // them than on its bytes; the quota bound adds a
  // worker's sends and receives per step times this, and the steps' figure per byte is what is
  // left of their CPU beyond it. 0 = not measured (files of older binaries).
  double host_comm_us_per_message = 0;
  // What the planner prices a host byte's CPU at: the steps' figure where there is one (it is
  // what the quota charged while training, as the outer exchange is priced from the steps),
  // else the probe's.
  double host_comm_ns() const {
    return host_comm_steps_ns_per_byte > 0 ? host_comm_steps_ns_per_byte : host_comm_ns_per_byte;
  }
  std::vector<StageCalibration> stages;
  std::map<std::string, LinkCalibration> links;  // by link class: intra-node, ib, roce, ethernet
  OuterCalibration outer;
  // What `holmes-train calibrate` measured (calibration_tables.hpp): compute by shape per kind of
  // device, collectives by link class, op and group size.
  std::vector<ComputeTable> tables;
  std::vector<CollectiveCurve> collectives;

  bool empty() const {
    return device_tflops <= 0 && update_ns_per_param <= 0 && links.empty() && outer.efficiency <= 0 && tables.empty() &&
           collectives.empty();
  }
};

// A class's efficiency for messages of `bytes`: its size curve interpolated linearly in
// log(bytes), held flat below the smallest size; beyond the largest (S1, E1) the message takes
// S1's time and its further bytes go at the declared rate, bytes / (S1 / E1 + bytes - S1),
// which tends to 1; its one efficiency without a curve.
double efficiency_at(const LinkCalibration& l, double bytes);

// The device-kind rule: a calibration measured on `cal.device.kind` devices may price a plan of
// `plan_kind` devices ("cpu" or "cuda") only when the two are the same; else a UserError (exit 2)
// naming the file, both kinds and what to do. (Within one kind, figures of one device model are
// applied only to nodes of that model: engine/plan, collect_facts.)
void check_device_kind(const Calibration& cal, const std::string& plan_kind);

// The link classes a calibration may name (the cost model's, plan::LinkKind).
inline const char* const kCalibratedLinks[] = {"intra-node", "ib", "roce", "ethernet"};

// Throws UserError naming the file, the line and the key for unknown keys, wrong types and
// figures out of range (efficiency > 0, everything else >= 0).
Calibration load_calibration_file(const std::string& path);
Calibration parse_calibration_yaml(const std::string& text, const std::string& source);
// The file text; parse_calibration_yaml reads it back to an equal Calibration.
std::string format_calibration_yaml(const Calibration& c);

}  // namespace holmes::topo
