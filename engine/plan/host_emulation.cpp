#include "engine/plan/host_emulation.hpp"

#include <algorithm>
#include <cmath>

#include "engine/plan/cost_model.hpp"
#include "engine/topo/topology.hpp"

namespace holmes::plan {

void emulate_nodes(const topo::ClusterTopology& topo, const topo::Calibration* cpu, Facts& f) {
  const int n = static_cast<int>(f.nodes.size());
  for (int i = 0; i < n; ++i) {
    NodeFacts& nf = f.nodes[i];
    nf.emu = NodeEmulation{};
    if (nf.cuda) continue;
    const topo::Devices& d = topo.nodes[i].devices;
    if (d.cpu_quota_cores > 0) nf.emu.cpu_share = std::min(1.0, d.cpu_quota_cores / std::max(1, d.cores));
    nf.emu.cpu_period_s = d.cpu_quota_period_ms * 1e-3;
    if (!d.machine.empty()) {
      nf.emu.machine = 0;
      for (int k = 0; k < i && topo.nodes[k].devices.machine != d.machine; ++k) ++nf.emu.machine;
      nf.emu.machine_cores = d.machine_cores;
    }
    if (!cpu) continue;
    // A CPU second does the same work on every CPU node: a node declared slower because a quota
    // holds it is slower by its share, not per CPU second (scaling it too would count the quota
    // twice), so every CPU node gets the one CPU-time rate.
    nf.emu.cpu_tflops = cpu->cpu_tflops;
    nf.emu.cpu_tensor = cpu->cpu_tensor;
    nf.emu.host_comm_s_per_byte = cpu->host_comm_ns() * 1e-9;
    nf.emu.tp_comm_s_per_byte = cpu->host_comm_tp_ns_per_byte * 1e-9;
    nf.emu.host_comm_s_per_message = cpu->host_comm_us_per_message * 1e-6;
    nf.emu.job_sum_hop_s = cpu->job_sum_hop_us * 1e-6;
  }
}

void StageEmulationBuilder::add(const NodeEmulation& n) {
  s_.cpu_share = std::min(s_.cpu_share, n.cpu_share);
  if (s_.machine < 0 && n.machine >= 0) s_.machine = n.machine, s_.machine_cores = n.machine_cores;
  if (n.cpu_share < 1) held_period_ = std::max(held_period_, n.cpu_period_s);
  // A CPU-time rate that counts the tensor-parallel sums of its step holds for that degree
  // only; one measured apart from them (a calibration that prices the sums' CPU,
  // tp_comm_s_per_byte) holds for every degree. A degree-1 rate has no sums to price a tp > 1
  // plan's with.
  if (n.cpu_tflops > 0 && (n.cpu_tensor == 0 || n.cpu_tensor == tp_ || n.tp_comm_s_per_byte > 0) &&
      (s_.cpu_tflops <= 0 || n.cpu_tflops < s_.cpu_tflops))
    s_.cpu_tflops = n.cpu_tflops;
  s_.host_comm_s_per_byte = std::max(s_.host_comm_s_per_byte, n.host_comm_s_per_byte);
  s_.tp_comm_s_per_byte = std::max(s_.tp_comm_s_per_byte, n.tp_comm_s_per_byte);
  s_.host_comm_s_per_message = std::max(s_.host_comm_s_per_message, n.host_comm_s_per_message);
  s_.job_sum_hop_s = std::max(s_.job_sum_hop_s, n.job_sum_hop_s);
}

StageEmulation StageEmulationBuilder::finish() const {
  StageEmulation out = s_;
  if (held_period_ > 0) out.cpu_period_s = held_period_;
  return out;
}

namespace {

// Each stage's next_share and prev_share: the smaller of its hops' two ends' `run` (the part of
// the wall time each stage's cgroup runs; hop_next of the last stage wraps to 0).
void set_hop_shares(std::vector<StageCost>& stages, const std::vector<double>& run) {
  const int p = static_cast<int>(stages.size());
  for (int s = 0; s < p; ++s) {
    StageEmulation& e = stages[s].emu;
    e.next_share = std::min(run[s], run[stages[s].last ? 0 : s + 1]);
    e.prev_share = std::min(run[s], run[stages[s].first ? p - 1 : s - 1]);
  }
}

}  // namespace

void share_sends_at_quota(std::vector<StageCost>& stages) {
  std::vector<double> shares;
  for (const StageCost& s : stages) shares.push_back(s.emu.cpu_share);
  set_hop_shares(stages, shares);
}

double send_at_share_s(const LinkCost& link, double send_s, double share) {
  // Under a CPU quota a send's bytes move only while both ends' communication threads run (the
  // sender writing as the socket drains, the receiver's Gloo loop reading): the per-byte time
  // scales with 1 / share, the latency does not.
  return link.gbps_per_rank > 0 ? link.latency_s + (send_s - link.latency_s) / share : send_s;
}

void set_bursts(const StageCost& stage, StageTime& t) {
  // The bubble's passes at a whole core: the calibrated wall rate, which the steady state's
  // throttling holds down, over the rate per CPU second, where both are known. A burst lasts one
  // CFS period's quota: a pass longer than that is throttled like the steady state's for the
  // rest, so each idle slot saves at most the period's throttled part.
  const StageEmulation& e = stage.emu;
  if (e.held() && e.cpu_tflops > 0 && stage.tflops > 0) {
    t.burst_rate = std::min(1.0, stage.tflops / e.cpu_tflops);
    t.burst_cap_s = (1 - e.cpu_share) * e.cpu_period_s;
  }
}

double burst_saving_s(const StageTime& t, double idle, int pipeline) {
  // The stages that run the fill and drain's passes have neighbours idle (a quota the idle left
  // unspent), so their compute goes at the rate of a CPU second, the slot's sums and exposed
  // sends as priced.
  if (t.burst_rate >= 1) return 0;
  const double slot = t.fill_slot_s();
  const double burst = slot > 0 ? 1 - (1 - t.burst_rate) * std::min(1.0, t.compute_s / slot) : 1.0;
  return std::min(idle * (1 - burst), (pipeline - 1) * t.burst_cap_s);
}

double throttled_share(double load) {
  const double u = std::clamp(load, 0.0, 1.0);
  const double u2 = u * u, u4 = u2 * u2;
  return u4 * u4 * u4;  // u^12
}

void share_sends_at_load(std::vector<StageCost>& stages, const Estimate& e) {
  // A cgroup under a quota stands throttled for a part of the wall time that grows with its
  // load: the whole unused share, 1 - share, only where it is held at its quota all step. A
  // stage without a CPU-time figure keeps its share.
  const int p = static_cast<int>(stages.size());
  std::vector<double> run(p, 1.0);
  for (int s = 0; s < p; ++s) {
    const double share = stages[s].emu.cpu_share;
    if (share >= 1) continue;
    const double cpu = s < static_cast<int>(e.quota_cpu_s.size()) ? e.quota_cpu_s[s] : 0.0;
    run[s] = cpu > 0 && e.step_time_s > 0 ? 1 - (1 - share) * throttled_share(cpu / share / e.step_time_s) : share;
  }
  set_hop_shares(stages, run);
}

void place_at_load(std::vector<StageCost>& stages, const std::function<const Estimate&()>& place) {
  const bool held = stages.size() > 1 &&
                    std::any_of(stages.begin(), stages.end(), [](const StageCost& c) { return c.emu.held(); });
  if (held)
    for (StageCost& c : stages) c.emu.next_share = c.emu.prev_share = 1;
  const Estimate* e = &place();
  for (int pass = 0; held && pass < 2; ++pass) {
    share_sends_at_load(stages, *e);
    e = &place();
  }
}

double quota_bound_s(const Workload& w, const std::vector<StageCost>& stages, const std::vector<int>& layers,
                     const std::vector<StageTime>& times, Estimate* keep) {
  // A worker under a CPU quota runs at most cpu_share of the wall time over the step as a whole
  // (CFS hands out the quota per period; a wait does not bank what it leaves unspent). Its CPU
  // seconds per step are its passes' FLOPs at the FLOPs per CPU second of its training thread,
  // the tensor-parallel sums' CPU (every thread) for their bytes, and the host communication
  // path's CPU for the bytes and messages its other groups move (the cgroup caps every thread).
  if (keep) keep->quota_cpu_s.clear(), keep->quota_share.clear(), keep->quota_period_s.clear();
  double bound = 0;
  for (size_t s = 0; s < stages.size(); ++s) {
    const StageCost& sc = stages[s];
    const StageEmulation& e = sc.emu;
    const bool held = e.held() && e.cpu_tflops > 0 && sc.tflops > 0;
    const StageCost::Bytes bytes = sc.bytes_per_step(w, layers[s]);
    const double comm_s = StageCost::host_bytes(bytes) * e.host_comm_s_per_byte + bytes.tp * e.tp_comm_s_per_byte +
                          bytes.messages * e.host_comm_s_per_message;
    const double cpu_s = held ? w.micro_batches * times[s].compute_s * sc.tflops / e.cpu_tflops + comm_s : 0.0;
    if (keep)
      keep->quota_cpu_s.push_back(cpu_s), keep->quota_share.push_back(held ? e.cpu_share : 1.0),
          keep->quota_period_s.push_back(held ? e.cpu_period_s : kCfsPeriodS);
    if (held) bound = std::max(bound, cpu_s / e.cpu_share);
  }
  return bound;
}

double quota_bound_s(const Estimate& e) {
  double bound = 0;
  for (size_t s = 0; s < e.quota_cpu_s.size() && s < e.quota_share.size(); ++s)
    if (e.quota_share[s] < 1) bound = std::max(bound, e.quota_cpu_s[s] / e.quota_share[s]);
  return bound;
}

double quota_throttle_s(const Estimate& e, double step) {
  double wait = 0;
  // One stage: its ranks are data-parallel peers of the same passes and quota, who meet at
  // every step's sync and spend their quota in step; none is throttled while another waits on
  // it. A pipeline's stages run different passes at different times: one's throttled stretch
  // falls in another's working time.
  if (step <= 0 || e.quota_cpu_s.size() < 2) return 0;
  for (size_t s = 0; s < e.quota_cpu_s.size() && s < e.quota_share.size(); ++s) {
    const double share = e.quota_share[s];
    if (share >= 1 || share <= 0 || e.quota_cpu_s[s] <= 0) continue;
    const double period = s < e.quota_period_s.size() ? e.quota_period_s[s] : kCfsPeriodS;
    // How many periods' quota the CPU a period can see fills: a step's CPU, or for steps
    // shorter than a period, the steps' of one period. Up to one no period's quota is ever
    // spent; from one to two the chance that a step bunches its CPU past a period's quota
    // rises to the load's.
    const double fills = e.quota_cpu_s[s] / (share * std::min(period, step));
    const double throttled = std::min(1.0, e.quota_cpu_s[s] / share / step) * std::clamp(fills - 1, 0.0, 1.0);
    wait = std::max(wait, throttled * (1 - share) * period / 2);
  }
  return wait;
}

double quota_wait_s(const Estimate& e, double rest) {
  // Where the bound holds the step, the throttled periods are how the quota holds it there, not
  // time beside it.
  const double bound = quota_bound_s(e);
  return std::max(bound, rest + quota_throttle_s(e, std::max(bound, rest))) - rest;
}

double quota_s(const Workload& w, const std::vector<StageCost>& stages, const std::vector<int>& layers,
               const std::vector<StageTime>& times, Estimate& e) {
  quota_bound_s(w, stages, layers, times, &e);
  return quota_wait_s(e, e.step_time_s);
}

double job_sum_hop_s(const std::vector<StageCost>& stages) {
  double measured = 0;
  for (const StageCost& s : stages) measured = std::max(measured, s.emu.job_sum_hop_s);
  return measured;
}

std::vector<double> message_delays(const std::vector<StageCost>& stages, std::span<const schedule::HopTimes> hops) {
  // On busy hosts a message waits for its threads' wake-ups, which the probe's idle messages do
  // not: each message's own delay, exponential of the measured mean beyond the link's alpha.
  std::vector<double> delays(hops.size(), 0.0);
  for (size_t s = 0; s < hops.size() && s + 1 < stages.size(); ++s) {
    const double measured = std::max(stages[s].emu.job_sum_hop_s, stages[s + 1].emu.job_sum_hop_s);
    delays[s] = std::max(0.0, measured - std::max(hops[s].activation_s, hops[s].gradient_s));
  }
  return delays;
}

void run_waiting_stages(const std::vector<StageCost>& stages, const std::vector<StageTime>& times, int bottleneck,
                        int micro_batches, std::span<const double> per_micro,
                        const std::function<double()>& span_at, std::vector<schedule::PassTimes>& passes) {
  const int p = static_cast<int>(times.size());
  // On a machine its nodes share, a waiting stage's pass meets the other ranks' at random: each
  // is on a core the part of the step its CPU seconds take (its passes at the rate per CPU
  // second, burst_rate, over the step the loop gives at the priced rates), and the pass gets the
  // machine's cores over it and those busy with it, at most a whole one.
  bool shared = false;
  for (int s = 0; s < p; ++s) shared = shared || (s != bottleneck && stages[s].emu.machine >= 0);
  const double span = shared ? span_at() : 0.0;
  for (int s = 0; s < p; ++s) {  // in place: the others' busy parts read per_micro, the unscaled passes
    if (s == bottleneck) continue;
    const StageTime& t = times[s];
    double share = 1;  // of a core, while its pass runs
    if (stages[s].emu.machine >= 0 && span > 0) {
      double others = 0;  // the machine's other ranks on a core at the same moment, on average
      for (int n = 0; n < p; ++n) {
        if (stages[n].emu.machine != stages[s].emu.machine) continue;
        const double ranks = double(stages[n].tp) * stages[n].dp - (n == s ? 1 : 0);
        others += ranks * std::min(1.0, micro_batches * per_micro[n] * times[n].burst_rate / span);
      }
      share = std::min(1.0, stages[s].emu.machine_cores / (1 + others));
    }
    const double rate = std::clamp(t.burst_rate / share, t.burst_rate, 1.0);
    passes[s] = {passes[s].forward_s * rate, passes[s].backward_s * rate, passes[s].weights_s * rate};
  }
}

}  // namespace holmes::plan
