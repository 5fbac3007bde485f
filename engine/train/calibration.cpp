#include "engine/train/calibration.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>

#include "backends/backends.hpp"
#include "common/format.hpp"
#include "engine/plan/model_size.hpp"
#include "engine/plan/replicas.hpp"
#include "engine/spec/model_config.hpp"
#include "common/errors.hpp"
#include "engine/parallel/cpu_clock.hpp"
#include "engine/parallel/trainer.hpp"

namespace holmes::train {

namespace {

constexpr int kTinyReps = 7, kBigReps = 3;
constexpr size_t kMaxProbeFloats = size_t{16} << 20;  // 64 MB: bounds the probe's time and memory
constexpr uint32_t kProbeTag = 0xC0000000u;           // above every pipeline tag (p2p_tag)
// link, latency, gbps, declared latency, declared gbps, message bytes, in-step sum seconds, probe gbps
constexpr int kSampleFloats = 8;
constexpr int kSlots = 3;                             // tp, pp, dp samples per rank
// stage, flops per step, steady steps, host seconds, params held, outer wire seconds, bytes, exchanges,
// CPU seconds of the training thread per step, the probe's host communication CPU seconds and bytes,
// the process's CPU seconds beyond the training thread's in the median step, the sums across the
// replicas before the exchanges (wall seconds in all, how many), the tensor-parallel sums' CPU
// seconds per step (the training thread's, the process's), the job-wide sum's seconds per step,
// the probe's one-float exchanges' CPU seconds and sends and receives, the optimizer update's seconds
// per step (a part of the host seconds)
constexpr int kComputeFloats = 20;

// Times of `reps` runs of op, sorted. Latency takes the fastest (a preempted process only adds
// to it), bandwidth the median.
template <class F>
std::vector<double> sorted_seconds(int reps, F&& op) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    op();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

const plan::Group& group_of(const plan::Plan& p, plan::GroupKind kind, int rank) {
  for (const auto& g : p.groups)
    if (g.kind == kind && std::find(g.ranks.begin(), g.ranks.end(), rank) != g.ranks.end()) return g;
  throw std::logic_error(fmt::format("calibration: rank {} is in no {} group of the plan", rank, plan::to_string(kind)));
}

// Bandwidth out of a measured time: `wire` bytes one rank sends over `steps` latencies.
double gbps_of(double seconds, double steps, double latency_s, double wire) {
  double t = seconds - steps * latency_s;
  if (t <= 0) t = seconds;
  return wire * 8 / t / 1e9;
}

// A probe buffer in the memory the steps use (device memory on a GPU), filled with `value`.
device::DeviceArray<float> probe_buffer(device::DeviceMemory& mem, size_t floats, float value) {
  device::DeviceArray<float> a(mem, floats);
  const std::vector<float> host(floats, value);
  a.upload(host);
  return a;
}

// One operation of a probe, ended: its result landed and, on a device group, the device idle
// (a device group queues work; the time is the device's).
template <class Op>
void ended(device::DeviceMemory& mem, Op&& op) {
  op();
  mem.synchronize();
}

// tp (all-reduce) and dp (reduce-scatter) groups: ring formulas of docs/cost-model.md, through
// the group the steps use (parallel::Group: NCCL on device buffers where the plan gives one).
// `host`: the process's CPU over the big operations and the bytes this rank sent in them.
LinkSample sample_collective(parallel::Group& g, device::DeviceMemory& mem, const plan::Group& pg, bool all_reduce,
                             size_t floats, HostComm* host = nullptr) {
  const int d = g.size();
  floats = std::max<size_t>(d, std::min(floats, kMaxProbeFloats) / d * d);
  device::DeviceArray<float> one = probe_buffer(mem, 1, 1.0f), in = probe_buffer(mem, floats, 1e-3f),
                             out = probe_buffer(mem, floats / d, 0.0f);
  const double tiny = sorted_seconds(kTinyReps, [&] {
    ended(mem, [&] { g.all_reduce(parallel::Buf::f32(one.data(), 1), comm::ReduceOp::kSum); });
  }).front();
  const double latency = tiny / (2.0 * (d - 1));
  const double cpu0 = parallel::process_cpu_ms();
  const double big = sorted_seconds(kBigReps, [&] {
    ended(mem, [&] {
      if (all_reduce) g.all_reduce(parallel::Buf::f32(in.data(), floats), comm::ReduceOp::kSum);
      else {
        parallel::Work work = g.reduce_scatter(parallel::Buf::f32(out.data(), floats / d),
                                               parallel::Buf::f32(in.data(), floats), comm::ReduceOp::kSum);
        work.land();
        if (const std::shared_future<void> read = work.inputs_free(); read.valid()) read.wait();
      }
    });
  })[kBigReps / 2];
  const double steps = all_reduce ? 2.0 * (d - 1) : d - 1.0;
  const double wire = steps * floats * sizeof(float) / d;
  if (host) host->cpu_s += 1e-3 * (parallel::process_cpu_ms() - cpu0), host->bytes += kBigReps * wire;
  return {static_cast<int>(pg.link), latency, gbps_of(big, steps, latency, wire), pg.latency_s, pg.gbps_per_rank,
          double(floats * sizeof(float) / d)};
}

// One pipeline hop, both directions at once as in the steady 1F1B phase, over the group the
// steps send it on (pp, or the plan's pp-hop group).
LinkSample sample_hop(parallel::ParallelGroups& groups, device::DeviceMemory& mem, int peer_stage, size_t floats,
                      const plan::LinkCost& declared, HostComm* host) {
  floats = std::max<size_t>(1, std::min(floats, kMaxProbeFloats));
  const auto [group, peer] = groups.pp_route(peer_stage);
  device::DeviceArray<float> send = probe_buffer(mem, floats, 1.0f), recv = probe_buffer(mem, floats, 0.0f);
  auto exchange = [&](size_t n) {
    ended(mem, [&] {
      const parallel::Transfer ops[] = {{parallel::Transfer::kSend, parallel::Buf::f32(send.data(), n), peer, kProbeTag},
                                        {parallel::Transfer::kRecv, parallel::Buf::f32(recv.data(), n), peer, kProbeTag}};
      // Ended: the receive landed and the send no longer reads its buffer (it goes out of scope).
      parallel::Work work = group->send_recv(ops);
      work.land();
      if (const std::shared_future<void> sent = work.inputs_free(); sent.valid()) sent.wait();
    });
  };
  const double tiny0 = parallel::process_cpu_ms();
  const double latency = sorted_seconds(kTinyReps, [&] { exchange(1); }).front();
  if (host) host->message_cpu_s += 1e-3 * (parallel::process_cpu_ms() - tiny0), host->messages += 2.0 * kTinyReps;
  const double cpu0 = parallel::process_cpu_ms();
  const double big = sorted_seconds(kBigReps, [&] { exchange(floats); })[kBigReps / 2];
  if (host) host->cpu_s += 1e-3 * (parallel::process_cpu_ms() - cpu0), host->bytes += kBigReps * floats * sizeof(float);
  return {static_cast<int>(declared.kind), latency, gbps_of(big, 1, latency, floats * sizeof(float)),
          declared.latency_s, declared.gbps_per_rank, double(floats * sizeof(float))};
}

std::vector<float> pack(const std::vector<LinkSample>& samples, const float compute[kComputeFloats]) {
  std::vector<float> v(kSlots * kSampleFloats + kComputeFloats, -1.0f);
  for (size_t i = 0; i < samples.size() && i < kSlots; ++i) {
    const LinkSample& s = samples[i];
    const float f[kSampleFloats] = {float(s.link),          float(s.latency_s),     float(s.gbps),
                                    float(s.declared_latency_s), float(s.declared_gbps), float(s.message_bytes),
                                    float(s.step_sum_s),    float(s.probe_gbps)};
    std::copy(f, f + kSampleFloats, v.begin() + i * kSampleFloats);
  }
  std::copy(compute, compute + kComputeFloats, v.end() - kComputeFloats);
  return v;
}

}  // namespace

std::vector<LinkSample> probe_links(runtime::Runtime& rt, const spec::JobSpec& spec, parallel::ParallelGroups& groups,
                                    device::DeviceMemory& mem, HostComm* host) {
  const plan::Plan& p = rt.plan;
  const plan::RankInfo& me = p.ranks.at(rt.rank);
  const size_t act = size_t(spec.train.micro_batch) * spec.train.seq_len * spec.model.hidden;
  // The steps' messages in bytes, as floats: the tensor sums in the activation precision where
  // NCCL sums them (fp32 through Gloo), the pipeline's boundary tensor (bf16 two values a
  // float) in each tensor-parallel rank's slice.
  const bool bf16 = spec.trains_bf16(p.device_kind == "cuda");
  const size_t tp_floats = bf16 && groups.group(schedule::Axis::kTp).mode() == parallel::Group::Mode::kDevice ? (act + 1) / 2 : act;
  const size_t boundary = bf16 ? (act + 1) / 2 : act;
  const size_t slice = (boundary + p.tp - 1) / p.tp;
  std::vector<LinkSample> out;
  comm::ProcessGroup& world = rt.world_group();
  world.barrier();
  if (groups.group(schedule::Axis::kTp).size() > 1) {  // every member takes part, the first one records
    LinkSample s = sample_collective(groups.group(schedule::Axis::kTp), mem, group_of(p, plan::kTpGroup, rt.rank), true, tp_floats);
    s.tp_sum = true;
    if (me.at[schedule::Axis::kTp] == 0) out.push_back(s);
  }
  world.barrier();
  const int stage = me.at[schedule::Axis::kPp];
  for (int parity = 0; parity < 2 && p.pp > 1; ++parity) {
    const bool lower = stage % 2 == parity && stage + 1 < p.pp, upper = stage % 2 != parity && stage > 0;
    const auto& ranks = group_of(p, plan::kPpGroup, rt.rank).ranks;
    if (lower)
      out.push_back(sample_hop(groups, mem, stage + 1, slice,
                               plan::rank_link(spec, rt.topology, p, rt.rank, ranks.at(stage + 1)), host));
    else if (upper)  // the lower end records the hop
      sample_hop(groups, mem, stage - 1, slice, plan::LinkCost{}, host);
    world.barrier();
  }
  if (groups.group(schedule::Axis::kDp).size() > 1) {
    const size_t params = static_cast<size_t>(p.memory.at(rt.rank).grads / sizeof(float));  // fp32 gradients
    LinkSample s = sample_collective(groups.group(schedule::Axis::kDp), mem, group_of(p, plan::kDpGroup, rt.rank), false, params, host);
    if (me.at[schedule::Axis::kDp] == 0) out.push_back(s);
  }
  world.barrier();
  return out;
}

void apply_step_sums(LinkSample& tp, const std::map<size_t, parallel::Group::SumTally>& sums, int d, size_t act_floats) {
  const auto it = sums.find(act_floats * sizeof(float));
  if (d < 2 || it == sums.end() || it->second.calls <= 0 || it->second.seconds <= 0 || tp.link < 0) return;
  const double per_sum = it->second.seconds / double(it->second.calls);
  const double steps = 2.0 * (d - 1);
  const double wire = steps * double(act_floats) * sizeof(float) / d;
  tp.step_sum_s = per_sum;
  tp.probe_gbps = tp.gbps;
  tp.gbps = gbps_of(per_sum, steps, tp.latency_s, wire);
  tp.message_bytes = double(act_floats) * sizeof(float) / d;  // a ring step's chunk, as the planner prices it
}

void summarize_links(const std::vector<LinkSample>& all, const topo::Calibration& previous, topo::Calibration& out) {
  std::map<int, std::vector<const LinkSample*>> by_link;
  for (const auto& s : all)
    if (s.link >= 0 && s.gbps > 0 && s.declared_gbps > 0) by_link[s.link].push_back(&s);
  for (const auto& [link, samples] : by_link) {
    const std::string kind = plan::to_string(plan::LinkKind(link));
    auto prev = previous.links.find(kind);
    // The plan's figure (a group's per-rank rate) already carries the previous calibration's
    // class efficiency (not its size curve, which only prices transfers): undo it.
    const double prev_eff = prev != previous.links.end() && prev->second.efficiency > 0 ? prev->second.efficiency : 1.0;
    std::vector<double> eff, lat, gbps, declared, step_sum;
    std::map<double, std::vector<double>> by_size;  // message bytes -> efficiencies
    for (const LinkSample* s : samples) {
      eff.push_back(s->gbps / s->declared_gbps * prev_eff);
      lat.push_back(s->latency_s * 1e6);
      gbps.push_back(s->gbps);
      declared.push_back(s->declared_gbps / prev_eff);
      if (s->message_bytes > 0) by_size[std::round(s->message_bytes)].push_back(eff.back());
      if (s->step_sum_s > 0) step_sum.push_back(s->step_sum_s * 1e3);
    }
    topo::LinkCalibration& l = out.links[kind];
    l = {median(eff), median(lat), median(gbps), median(declared), static_cast<int>(samples.size()), {}, median(step_sum)};
    // One point per message size the probes used (the tensor, pipeline and data-parallel
    // groups of a class send very different sizes; a shaped or shared link is not equally
    // efficient at each). A single size is written too: it prices the same as the one
    // efficiency, but a merge of files from other jobs (the lab's bench) needs to know which
    // size each efficiency was measured at: a tensor-parallel group's in-step figure at 128 KB
    // and a data-parallel one at 6 MB are both "intra-node".
    if (!by_size.empty())
      for (const auto& [bytes, e] : by_size) l.sizes.emplace_back(bytes, median(e));
  }
}

topo::DeviceRecord device_record(const std::string& kind, const topo::ClusterTopology& topology) {
  topo::DeviceRecord d;
  d.kind = kind;
  std::vector<std::string> names;
  for (const auto& n : topology.nodes)
    if (!n.devices.name.empty() && std::find(names.begin(), names.end(), n.devices.name) == names.end())
      names.push_back(n.devices.name);
  d.name = fmt::format("{}", fmt::join(names, ", "));
  if (kind == "cuda") {
    const backends::GpuVersions v = backends::gpu_versions();
    d.driver = v.driver, d.cuda = v.cuda, d.cublaslt = v.cublaslt, d.cudnn = v.cudnn, d.nccl = v.nccl;
  }
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  d.date = date;
  return d;
}

double outer_efficiency(const std::vector<OuterWire>& ranks, int members, double latency_s, double group_gbps,
                        double previous_efficiency) {
  std::vector<double> eff;
  for (const OuterWire& w : ranks) {
    if (w.exchanges <= 0 || w.bytes <= 0 || group_gbps <= 0) continue;
    double t = w.seconds - w.exchanges * 2.0 * (members - 1) * latency_s;
    if (t <= 0) t = w.seconds;
    if (t > 0) eff.push_back(w.bytes * 8 / t / 1e9 / group_gbps * previous_efficiency);
  }
  return median(eff);
}

namespace {

// The median over the ranks that spent CPU on some of `count` of their CPU seconds per unit, in `scale`ths.
double median_cpu_per(const std::vector<HostComm>& ranks, double HostComm::*cpu_s, double HostComm::*count,
                      double scale) {
  std::vector<double> per;
  for (const HostComm& h : ranks)
    if (h.*count > 0 && h.*cpu_s > 0) per.push_back(h.*cpu_s / h.*count * scale);
  return median(per);
}

}  // namespace

double host_comm_ns_per_byte(const std::vector<HostComm>& ranks) {
  return median_cpu_per(ranks, &HostComm::cpu_s, &HostComm::bytes, 1e9);
}

double host_comm_us_per_message(const std::vector<HostComm>& ranks) {
  return median_cpu_per(ranks, &HostComm::message_cpu_s, &HostComm::messages, 1e6);
}

double host_comm_steps_ns_per_byte(const std::vector<double>& other_cpu_s, const std::vector<double>& host_bytes) {
  std::vector<double> ns;
  for (size_t r = 0; r < other_cpu_s.size() && r < host_bytes.size(); ++r)
    if (host_bytes[r] >= kMinStepsHostBytes && other_cpu_s[r] > 0) ns.push_back(other_cpu_s[r] / host_bytes[r] * 1e9);
  return median(ns);
}

double tp_sums_ns_per_byte(const std::vector<double>& tp_cpu_s, const std::vector<double>& other_cpu_s,
                           const std::vector<double>& host_bytes, double host_ns_per_byte,
                           const std::vector<double>& tp_bytes) {
  std::vector<double> ns;
  for (size_t r = 0; r < tp_cpu_s.size() && r < tp_bytes.size(); ++r) {
    if (tp_bytes[r] <= 0 || tp_cpu_s[r] <= 0) continue;
    const double other = r < other_cpu_s.size() ? other_cpu_s[r] : 0.0;
    const double host = r < host_bytes.size() ? host_bytes[r] * host_ns_per_byte * 1e-9 : 0.0;
    ns.push_back((tp_cpu_s[r] + std::max(0.0, other - host)) / tp_bytes[r] * 1e9);
  }
  return median(ns);
}

TpSumsCpu tp_sums_cpu_per_step(const std::map<size_t, parallel::Group::SumTally>& sums, int steps) {
  TpSumsCpu out;
  if (steps <= 0) return out;
  for (const auto& [bytes, t] : sums) out.thread_s += t.thread_cpu_s, out.process_s += t.process_cpu_s;
  out.process_s = std::max(out.process_s, out.thread_s) / steps;  // the process's includes the thread's
  out.thread_s /= steps;
  return out;
}

double slowest_device_tflops(const std::vector<double>& measured, const std::vector<double>& planned) {
  double ratio = -1, slowest = -1;
  for (size_t i = 0; i < measured.size() && i < planned.size(); ++i) {
    if (planned[i] <= 0) continue;
    if (slowest < 0 || planned[i] < slowest) slowest = planned[i];
    if (measured[i] > 0 && (ratio < 0 || measured[i] / planned[i] < ratio)) ratio = measured[i] / planned[i];
  }
  if (ratio < 0 || slowest < 0) {  // nothing planned: the slowest measured stage, as it is
    double m = 0;
    for (double v : measured)
      if (v > 0 && (m <= 0 || v < m)) m = v;
    return m;
  }
  return ratio * slowest;
}

namespace {

// What rank 0 gathered: every rank's link samples, per stage its FLOPs per step and, step by
// step, the compute time of its slowest rank; every rank's host time, update and parameters.
struct Gathered {
  std::vector<LinkSample> samples;
  std::vector<double> stage_flops, stage_seconds;
  // per stage, the largest CPU seconds per step of its ranks' training threads, outside the
  // tensor-parallel sums
  std::vector<double> stage_cpu_s;
  std::vector<OuterWire> outer;  // per rank
  std::vector<HostComm> host;    // per rank, the probe's
  std::vector<int> stage;        // per rank
  std::vector<double> other_cpu;  // per rank, the median of StepShare::other_cpu_per_step
  std::vector<PresyncWait> presync;  // per rank
  std::vector<double> tp_cpu;  // per rank, the process's CPU seconds per step in tp sums
  std::vector<double> job_sum_s;  // per rank, its job-wide sum's seconds per step
  std::vector<HostWork> host_work;  // per rank
};

Gathered unpack(const std::vector<float>& all, size_t per_rank, const std::vector<float>& per_step, int world,
                int stages, size_t steps) {
  Gathered g;
  g.stage_flops.assign(stages, 0);
  g.stage_seconds.assign(stages, 0);
  g.stage_cpu_s.assign(stages, 0);
  std::vector<std::vector<float>> slowest(stages, std::vector<float>(steps, 0.0f));  // [stage][step]
  for (int r = 0; r < world; ++r) {
    const float* v = all.data() + r * per_rank;
    for (int i = 0; i < kSlots; ++i) {
      const float* f = v + i * kSampleFloats;
      if (f[0] >= 0) g.samples.push_back({static_cast<int>(f[0]), f[1], f[2], f[3], f[4], f[5], f[6], f[7]});
    }
    const float* c = v + kSlots * kSampleFloats;
    const int st = static_cast<int>(c[0]);
    g.stage_flops[st] = c[1];
    g.stage_cpu_s[st] = std::max(g.stage_cpu_s[st], std::max(0.0, double(c[8]) - double(c[14])));
    for (size_t i = 0; i < steps; ++i) slowest[st][i] = std::max(slowest[st][i], per_step[r * steps + i]);
    g.outer.push_back({c[5], c[6], static_cast<int>(c[7])});
    g.host.push_back({c[9], c[10], c[17], c[18]});
    g.stage.push_back(st);
    // Beyond the training thread and outside the tensor-parallel sums (the I/O threads' CPU
    // while the training thread was in one is the sums').
    g.other_cpu.push_back(std::max(0.0, double(c[11]) - std::max(0.0, double(c[15]) - double(c[14]))));
    g.presync.push_back({c[12], static_cast<int>(c[13])});
    g.tp_cpu.push_back(c[15]);
    g.job_sum_s.push_back(c[16]);
    g.host_work.push_back({c[3], c[19], c[4]});
  }
  for (int st = 0; st < stages; ++st)
    for (float t : slowest[st]) g.stage_seconds[st] += double(t) / double(steps);
  return g;
}

// The job-wide sum's hop as the steps ran it: the rank that waited least there per step (the
// last to arrive waits for the ring alone, the others also for it) over the ring's hops,
// 2 (d - 1) + 2 (t - 1) + 2 (p - 1) (ParallelGroups::sum_over_job: data-, tensor- and
// pipeline-parallel groups in turn).
void calibrate_job_sum(const plan::Plan& p, const Gathered& g, topo::Calibration& cal) {
  const int hops = 2 * (p.dp - 1) + 2 * (p.tp - 1) + 2 * (p.pp - 1);
  if (hops <= 0 || g.job_sum_s.empty()) return;
  const double least = *std::min_element(g.job_sum_s.begin(), g.job_sum_s.end());
  if (least <= 0) return;
  cal.job_sum_hop_us = least / hops * 1e6;
  fmt::print("calibration: the step's job-wide sum: {:.3g} ms at the rank that waited least, {:.3g} us per hop of "
             "its {} ring hops\n", least * 1e3, cal.job_sum_hop_us, hops);
}

// Per stage measured against planned; the device rate is the slowest device's (below).
void calibrate_compute(const plan::Plan& p, const Gathered& g, topo::Calibration& cal) {
  calibrate_host_work(g.host_work, cal);
  std::vector<double> measured_all, planned_all, cpu_all;
  for (const auto& s : p.stages) {
    const double cpu = g.stage_cpu_s[s.stage];
    cpu_all.push_back(cpu > 0 ? g.stage_flops[s.stage] / cpu / 1e12 : 0);
    cal.declared_tflops += s.tflops / p.pp;
    const double seconds = g.stage_seconds[s.stage];
    const double measured = seconds > 0 ? g.stage_flops[s.stage] / seconds / 1e12 : 0;
    cal.stages.push_back({s.stage, s.num_layers, measured});
    measured_all.push_back(measured);
    planned_all.push_back(s.tflops);
    fmt::print("calibration: stage {} ({}): {:.4g} TFLOP/s per device measured, {:.4g} planned (x{:.2f})\n",
               s.stage, count_of(s.num_layers, "layer"), measured, s.tflops, s.tflops > 0 ? measured / s.tflops : 0.0);
  }
  cal.device_tflops = slowest_device_tflops(measured_all, planned_all);
  // CPU devices: FLOPs per CPU second of the worker's training thread, whatever held it back (the quota
  // bound of plan::estimate_step): the stage that spent the most CPU per FLOP, as measured (a
  // CPU second does the same work on every node; plan::calibrate_compute gives it to all).
  // A GPU's host CPU time says nothing of its rate.
  if (p.device_kind != "cuda") {
    for (double c : cpu_all)
      if (c > 0 && (cal.cpu_tflops <= 0 || c < cal.cpu_tflops)) cal.cpu_tflops = c;
    if (cal.cpu_tflops > 0) cal.cpu_tensor = p.tp;
    cal.host_comm_ns_per_byte = host_comm_ns_per_byte(g.host);
    cal.host_comm_us_per_message = host_comm_us_per_message(g.host);
    std::vector<double> bytes, tp_bytes, beyond_messages;  // per rank, its stage's; its other CPU less its messages'
    for (size_t r = 0; r < g.stage.size(); ++r) {
      const int st = g.stage[r];
      bytes.push_back(st < int(p.estimate.host_bytes.size()) ? p.estimate.host_bytes[st] : 0.0);
      tp_bytes.push_back(st < int(p.estimate.tp_bytes.size()) ? p.estimate.tp_bytes[st] : 0.0);
      const double messages = st < int(p.estimate.host_messages.size()) ? p.estimate.host_messages[st] : 0.0;
      beyond_messages.push_back(std::max(0.0, g.other_cpu[r] - messages * cal.host_comm_us_per_message * 1e-6));
    }
    if (p.tp > 1)  // the other threads' CPU is mostly the sums': no steps' figure for the rest
      cal.host_comm_tp_ns_per_byte = tp_sums_ns_per_byte(g.tp_cpu, beyond_messages, bytes, cal.host_comm_ns_per_byte, tp_bytes);
    else
      cal.host_comm_steps_ns_per_byte = host_comm_steps_ns_per_byte(beyond_messages, bytes);
    if (cal.cpu_tflops > 0)
      fmt::print("calibration: {:.4g} TFLOP/s per CPU second of a worker (its passes' FLOPs over the CPU time of its "
                 "training thread in the step{})\n", cal.cpu_tflops,
                 cal.host_comm_tp_ns_per_byte > 0 ? ", its tensor-parallel sums apart" : "");
    if (cal.host_comm_tp_ns_per_byte > 0)
      fmt::print("calibration: tensor-parallel sums {:.3g} ns of CPU per byte sent in them (every thread of the "
                 "process while the training thread was in one, and the other threads' CPU beyond the probe's price "
                 "of the other groups' bytes)\n", cal.host_comm_tp_ns_per_byte);
    if (cal.host_comm_ns_per_byte > 0)
      fmt::print("calibration: host communication {:.3g} ns of CPU per byte sent over a host group (the probe's "
                 "pipeline and data-parallel transfers, every thread of the process){}\n", cal.host_comm_ns_per_byte,
                 cal.host_comm_steps_ns_per_byte > 0
                     ? fmt::format("; in the steps {:.3g} (the process's CPU beyond the training thread and its "
                                   "messages' over the plan's bytes; the planner prices with this one)",
                                   cal.host_comm_steps_ns_per_byte)
                     : "");
    if (cal.host_comm_us_per_message > 0)
      fmt::print("calibration: host communication {:.3g} us of CPU per pipeline send or receive besides its bytes "
                 "(the probe's one-float exchanges, every thread of the process)\n", cal.host_comm_us_per_message);
  }
  if (cal.host_us_per_step > 0)
    fmt::print("calibration: the optimizer's update {:.3g} ns per parameter held; other host work outside the passes "
               "and communication {:.3g} ms a rank per step\n", cal.update_ns_per_param, cal.host_us_per_step / 1e3);
  else
    fmt::print("calibration: host work per step outside the passes and communication: {:.3g} ns per parameter "
               "held\n", cal.update_ns_per_param);
}

// diloco: the outer exchange's rate inside the steps (topo::OuterCalibration).
void calibrate_outer(const plan::Plan& p, const Gathered& g, const topo::Calibration& previous, topo::Calibration& cal) {
  const plan::Group* outer = nullptr;
  for (const auto& grp : p.groups)
    if (grp.kind == plan::kOuterGroup && grp.ranks.size() > 1) outer = outer ? outer : &grp;
  if (!outer) return;
  const std::string kind = plan::to_string(outer->link);
  const auto prev = previous.links.find(kind);
  const double prev_eff = prev != previous.links.end() && prev->second.efficiency > 0 ? prev->second.efficiency : 1.0;
  const int members = static_cast<int>(outer->ranks.size());
  const double eff = outer_efficiency(g.outer, members, outer->latency_s, outer->gbps_per_rank, prev_eff);
  if (eff <= 0) return;
  std::vector<double> ms;
  int syncs = 0;
  for (const OuterWire& w : g.outer)
    if (w.exchanges > 0) ms.push_back(1e3 * w.seconds / w.exchanges), syncs += w.exchanges;
  const int frags = std::max(1, p.replicas.fragments);
  const double between = static_cast<double>(std::max(1, p.replicas.inner_steps)) / frags;
  const double drift = replica_drift_ms(g.presync, members, between, 2.0 * (members - 1) * outer->latency_s);
  cal.outer = {kind, eff, median(ms), syncs, drift};
  fmt::print("calibration: outer exchange over {}: {:.1f} ms each, {:.4g} Gb/s per member (x{:.2f} of the declared "
             "rate, where the plan priced it at x{:.2f}), {} exchanges: priced from the steps\n", kind,
             cal.outer.exchange_ms, eff * outer->gbps_per_rank / prev_eff, eff, prev_eff, syncs);
  if (drift > 0)
    fmt::print("calibration: replicas' drift {:.3g} ms per sqrt(step) (the ranks' mean wait at the sums across the "
               "replicas every {:.4g} steps: {:.1f} ms)\n", drift, between,
               drift * std::sqrt(between) * plan::expected_max_normal(members));
}

}  // namespace

void calibrate_host_work(const std::vector<HostWork>& ranks, topo::Calibration& cal) {
  double host = 0, update = 0, params = 0, rest = 0;
  for (const HostWork& r : ranks) host += r.host_s, update += r.update_s, params += r.params;
  cal.update_ns_per_param = cal.host_us_per_step = 0;
  if (params <= 0) return;
  if (update <= 0) {  // the update not timed apart: all of it per parameter
    cal.update_ns_per_param = host / params * 1e9;
    return;
  }
  cal.update_ns_per_param = update / params * 1e9;
  for (const HostWork& r : ranks) rest += std::max(0.0, r.host_s - r.update_s);
  cal.host_us_per_step = rest / double(ranks.size()) * 1e6;
}

double replica_drift_ms(const std::vector<PresyncWait>& ranks, int replicas, double steps_between, double ring_s) {
  const double e = plan::expected_max_normal(replicas);
  double wait = 0;
  int n = 0;
  for (const PresyncWait& r : ranks)
    if (r.sums > 0) wait += std::max(0.0, r.seconds / r.sums - ring_s), ++n;
  if (n == 0 || e <= 0 || steps_between <= 0) return 0;
  return 1e3 * wait / n / (std::sqrt(steps_between) * e);
}

namespace {

std::string or_unknown(const std::string& s) { return s.empty() ? "unknown" : s; }

}  // namespace

void write_calibration_file(const std::string& file, const topo::Calibration& cal, const char* who, const char* key) {
  fmt::print("{}: measured on {}{}\n", who, cal.device.describe(),
             cal.device.kind == "cuda" ? fmt::format(" (driver {}, CUDA {}, cuBLASLt {}, cuDNN {}, NCCL {})",
                                                     or_unknown(cal.device.driver), or_unknown(cal.device.cuda),
                                                     or_unknown(cal.device.cublaslt), or_unknown(cal.device.cudnn),
                                                     or_unknown(cal.device.nccl))
                                       : "");
  const std::filesystem::path path(file);
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  std::ofstream f(path);
  f << topo::format_calibration_yaml(cal);
  if (!f) throw UserError(fmt::format("{}: cannot write '{}'", key, file));
  fmt::print("{}: written to {} (plan with it: --set cluster.calibration={})\n", who, file, file);
}

void finish_calibration(runtime::Runtime& rt, const spec::JobSpec& spec, const std::vector<LinkSample>& mine,
                        const StepShare& times, const HostComm& host) {
  const plan::Plan& p = rt.plan;
  const plan::RankInfo& me = p.ranks.at(rt.rank);
  const plan::Stage& stage = p.stages.at(me.at[schedule::Axis::kPp]);
  const model::GptConfig shape = spec::model_config(spec.model);
  const double tokens = double(spec.train.micro_batch) * spec.train.seq_len * p.micro_batches;
  // The passes' compute time includes the replay of train.recompute: count its FLOPs too.
  const int act_bytes = static_cast<int>(dtype_bytes(spec.activation_dtype(p.device_kind == "cuda")));
  plan::ActivationMode mode = plan::ActivationMode::of(p.activation.recompute, p.activation.schedule);
  mode.document_mask = spec.data.document_mask;
  const double replay =
      stage.num_layers * tokens * plan::recompute_flops_per_token(shape, spec.train.seq_len, p.tp, act_bytes, mode);
  const double flops =
      plan::stage_train_flops(shape, stage.num_layers, stage.lm_head, p.tp, spec.train.seq_len, tokens) + replay;
  const double params = p.memory.at(rt.rank).grads / sizeof(float);  // one fp32 gradient per parameter held
  const size_t steps = times.compute_per_step.size();
  const TpSumsCpu tp_cpu = tp_sums_cpu_per_step(times.tp_sums, times.tp_sum_steps);
  const float compute[kComputeFloats] = {float(me.at[schedule::Axis::kPp]),          float(flops),
                                         float(steps),          float(times.host_s),
                                         float(params),         float(times.outer_wire_s),
                                         float(times.outer_wire_bytes), float(times.outer_exchanges),
                                         float(times.cpu_s),    float(host.cpu_s),
                                         float(host.bytes),
                                         float(median({times.other_cpu_per_step.begin(), times.other_cpu_per_step.end()})),
                                         float(times.presync_s), float(times.presync_sums),
                                         float(tp_cpu.thread_s),  float(tp_cpu.process_s),
                                         float(times.job_sum_s), float(host.message_cpu_s),
                                         float(host.messages),  float(times.update_s)};
  // Tensor-parallel sums are priced from what they cost in the steps, not at the idle probe.
  std::vector<LinkSample> samples = mine;
  const size_t act = size_t(spec.train.micro_batch) * spec.train.seq_len * spec.model.hidden;
  for (LinkSample& s : samples)
    if (s.tp_sum) apply_step_sums(s, times.tp_sums, p.tp, act);
  const std::vector<float> packed = pack(samples, compute);
  std::vector<float> all(packed.size() * rt.world), per_step(steps * rt.world);
  rt.world_group().all_gather(all, packed);
  for (int r = 0; r < rt.world; ++r)
    if (all[r * packed.size() + kSlots * kSampleFloats + 2] != float(steps))
      throw std::logic_error("calibration: the ranks timed different numbers of steps");
  rt.world_group().all_gather(per_step, times.compute_per_step);
  if (rt.rank != 0) return;

  topo::Calibration cal;
  cal.device = device_record(p.device_kind, rt.topology);
  cal.source = fmt::format("job '{}', {}, {} plan {:016x}", spec.job.name, count_of(rt.world, "rank"), p.placement,
                           rt.plan_hash);
  const Gathered g = unpack(all, packed.size(), per_step, rt.world, p.pp, steps);
  if (steps > 0) {
    calibrate_compute(p, g, cal);
    calibrate_job_sum(p, g, cal);
  }
  else fmt::print("calibration: no step after the first {} to time; compute not measured\n", parallel::Trainer::kWarmupSteps);
  summarize_links(g.samples, rt.topology.calibration, cal);
  calibrate_outer(p, g, rt.topology.calibration, cal);
  for (const auto& [kind, l] : cal.links)
    fmt::print("calibration: {} links: {:.4g} Gb/s per rank measured, {:.4g} declared (x{:.2f}); latency {:.0f} us "
               "({} samples)\n", kind, l.gbps_per_rank, l.declared_gbps_per_rank, l.efficiency, l.latency_us, l.groups);
  for (const LinkSample& s : g.samples)
    if (s.step_sum_s > 0)
      fmt::print("calibration: {} tensor-parallel sums in the steps: {:.3g} ms each ({:.4g} Gb/s per rank), the idle "
                 "probe {:.4g} Gb/s: priced from the steps\n", plan::to_string(plan::LinkKind(s.link)), s.step_sum_s * 1e3,
                 s.gbps, s.probe_gbps);
  write_calibration_file(spec.cluster.calibrate, cal, "calibration", "cluster.calibrate");
}

}  // namespace holmes::train
