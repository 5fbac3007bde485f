// Readable summary of a plan for --plan-only: islands, a rank map per node, stages, groups
// with their transport, the estimate and its parts, memory per stage, warnings.
#include <fmt/format.h>

#include "common/format.hpp"

#include <map>
#include <string>
#include <tuple>

#include "engine/plan/cost_model.hpp"
#include "engine/plan/nccl.hpp"
#include "engine/plan/plan.hpp"

namespace holmes::plan {

namespace {

constexpr int kNodesShown = 16;
constexpr double kGiB = double(1 << 30);

std::string human_bytes(double b) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB", "PB"};
  int u = 0;
  while (b >= 1000 && u < 5) b /= 1000, ++u;
  return fmt::format("{:.1f} {}", b, units[u]);
}

// "0..3", "0, 2", "0..2, 5, 7..8": an island's nodes as they are, runs of consecutive ones
// shortened (the nodes of islands interleave when the launch order alternates them).
std::string node_list(const std::vector<int>& nodes) {
  std::string out;
  for (size_t i = 0; i < nodes.size();) {
    size_t j = i;
    while (j + 1 < nodes.size() && nodes[j + 1] == nodes[j] + 1) ++j;
    out += (out.empty() ? "" : ", ") +
           (j == i ? fmt::format("{}", nodes[i]) : fmt::format("{}{}{}", nodes[i], j == i + 1 ? ", " : "..", nodes[j]));
    i = j + 1;
  }
  return out;
}

void append_rank_map(std::string& out, const Plan& p) {
  out += p.replicas.count > 1 ? "Ranks per node (rank:tp,pp,dp,replica):\n" : "Ranks per node (rank:tp,pp,dp):\n";
  std::vector<std::vector<const RankInfo*>> by_node(p.hostnames.size());
  for (const auto& r : p.ranks) by_node[r.node].push_back(&r);
  int nodes = static_cast<int>(by_node.size());
  std::vector<int> island_of(nodes, 0);
  for (const auto& isl : p.islands)
    for (int n : isl.nodes) island_of[n] = isl.id;
  for (int n = 0; n < nodes && n < kNodesShown; ++n) {
    out += fmt::format("  node {:<3} {:<14} island {}:", n, p.hostnames[n], island_of[n]);
    for (const RankInfo* r : by_node[n])
      out += fmt::format(" {}:{},{},{}{}", r->rank, r->at[Axis::kTp], r->at[Axis::kPp], r->at[Axis::kDp],
                         p.replicas.count > 1 ? fmt::format(",r{}", r->at[Axis::kReplica]) : "");
    out += "\n";
  }
  if (nodes > kNodesShown) out += fmt::format("  ... {} more nodes (see --format json)\n", nodes - kNodesShown);
}

void append_groups(std::string& out, const Plan& p) {
  out += "Groups (kind: count x size, transport over link [interface / HCAs]):\n";
  using Key = std::tuple<int, std::string, std::string, std::string, size_t>;
  std::map<Key, int> counts;
  for (const auto& g : p.groups) {
    std::string where = g.interface;
    if (!g.hcas.empty()) {
      where.clear();
      for (const auto& h : g.hcas) where += (where.empty() ? "" : ",") + h;
      if (g.gid_index >= 0) where += fmt::format(" gid {}", g.gid_index);
    }
    std::string transport = fmt::format("{} over {}", to_string(g.transport), to_string(g.link));
    if (g.crosses_islands) transport += ", crosses islands";
    counts[Key{listing_order(g.kind), to_string(g.kind), transport, where, g.ranks.size()}]++;
  }
  for (const auto& [key, n] : counts) {
    const auto& [order, kind, transport, where, size] = key;
    out += fmt::format("  {:<9} {:>5} x {:<5} {}{}\n", kind, n, size, transport, where.empty() ? "" : " [" + where + "]");
  }
}

// Per node, what the processes set before their first NCCL communicator (CUDA plans only).
void append_nccl_env(std::string& out, const Plan& p) {
  if (p.device_kind != "cuda") return;
  out += "NCCL environment per node (set once per process before the first communicator; a value already in the "
         "environment wins):\n";
  const int nodes = static_cast<int>(p.hostnames.size());
  for (int n = 0; n < nodes && n < kNodesShown; ++n) {
    out += fmt::format("  node {:<3} {:<14}", n, p.hostnames[n]);
    for (const EnvVar& v : nccl_env(p, n)) out += fmt::format(" {}={}", v.name, v.value);
    out += "\n";
  }
  if (nodes > kNodesShown) out += fmt::format("  ... {} more nodes (see --format json)\n", nodes - kNodesShown);
}

void append_estimate(std::string& out, const Plan& p) {
  const Estimate& e = p.estimate;
  out += fmt::format("Estimate per step ({} micro-batches of {} x {} tokens per data-parallel rank):\n",
                     p.micro_batches, p.micro_batch, p.seq_len);
  out += fmt::format("  step time {:.4g} s = compute {:.4g} + tensor comm {:.4g} + pipeline comm {} + bubble "
                     "{:.4g} + data-parallel sync {:.4g}{}{}{}{} (bottleneck stage {})\n",
                     e.step_time_s, e.compute_s, e.tp_comm_s,
                     e.pp_loop_s > 0 ? fmt::format("{:.4g} (of which the stages' loop {:.4g})", e.pp_comm_s, e.pp_loop_s)
                                     : fmt::format("{:.4g}", e.pp_comm_s),
                     e.bubble_s, e.dp_comm_s,
                     e.update_s > 0 ? fmt::format(" + update {:.4g}", e.update_s) : "",
                     e.log_s > 0 ? fmt::format(" + log exchange {:.4g}", e.log_s) : "",
                     e.sums_s > 0 ? fmt::format(" + job sums {:.4g}", e.sums_s) : "",
                     e.quota_s > 0 ? fmt::format(" + CPU quota wait {:.4g}", e.quota_s) : "", e.bottleneck_stage);
  if (p.replicas.count > 1 && p.replicas.outer == spec::OuterMode::kDiloco)
    out += fmt::format("  + outer sync {:.4g} s per step (one sync every {} steps, amortized)\n", p.replicas.per_step_s,
                       p.replicas.inner_steps);
  if (p.replicas.hsdp())
    out += fmt::format("  + across the replicas {:.4g} s per step (gradient shard all-reduce {:.4g} + loss sum {:.4g} "
                       "+ store verdict {:.4g})\n", p.replicas.per_step_s, p.replicas.sync_s, p.replicas.agree_s,
                       p.replicas.verdict_s);
  out += fmt::format("  {:.4g} tokens/s, {:.4g} TFLOP/s per device\n", e.tokens_per_s, e.tflops_per_device);
  for (const Baseline& b : e.baselines) {
    const double speedup = e.step_time_s > 0 ? b.step_time_s / e.step_time_s : 0;
    out += fmt::format("  vs {:<8} ({}): {:.4g} s per step -> {} is {:.2f}x faster\n", b.placement,
                       b.placement == spec::Placement::kMegatron ? "Megatron-LM order, uniform partition, every group over Ethernet"
                                                 : "Megatron-LM order, uniform partition, best transport per group",
                       b.step_time_s, p.placement, speedup);
  }
  if (!e.sources.empty()) {
    out += "  figures:";
    for (size_t i = 0; i < e.sources.size(); ++i)
      out += fmt::format("{} {} {}", i ? ";" : "", e.sources[i].first, e.sources[i].second);
    out += "\n";
  }
  out += "  bytes sent per step:";
  for (int k = 0; k < kLinkKinds; ++k)
    out += fmt::format(" {} {}{}", to_string(LinkKind(k)), human_bytes(e.bytes_per_step[k]), k + 1 < kLinkKinds ? "," : "\n");
  // parallel.pipe_fp8: what the other choice would give, so off proposes FP8 where it pays.
  if (p.pipe_fp8_other_step_s > 0) {
    const double other = p.pipe_fp8_other_step_s;
    if (p.pipe_fp8)
      out += fmt::format("  pipeline sends in FP8 (parallel.pipe_fp8): {:.4g} s per step in the activation precision\n",
                         other);
    else if (other < (1 - kPipeFp8MinGain) * e.step_time_s)
      out += fmt::format("  pipeline sends in FP8 would take the step to {:.4g} s ({:.1f}% faster): parallel.pipe_fp8: on "
                         "or auto\n", other, 100 * (e.step_time_s / other - 1));
  }
}

std::string activation_text(const ActivationChoice& a) {
  return fmt::format("{}{}, recompute {} ({:.4g} s per step, bubble {:.4g} s{}, worst stage {:.2f} GiB with activations "
                     "{:.2f}{}{})", a.schedule,
                     a.schedule == spec::Schedule::kInterleaved ? fmt::format(" (virtual_stages {})", a.virtual_stages) : "",
                     a.recompute, a.step_time_s, a.bubble_s,
                     a.recompute_s > 0 ? fmt::format(", replay {:.4g} s", a.recompute_s) : "",
                     a.memory / kGiB, a.activations / kGiB,
                     a.capacity > 0 ? fmt::format(" of {:.1f} usable", a.capacity / kGiB) : "",
                     a.fits ? "" : ", does not fit");
}

void append_activation(std::string& out, const Plan& p) {
  out += fmt::format("Schedule and recomputation (parallel.schedule {}, train.recompute {}): {}\n",
                     p.schedule_chosen ? "auto" : "as given", p.recompute_chosen ? "auto" : "as given",
                     activation_text(p.activation));
  if (p.activation_chosen) out += fmt::format("  runner-up: {}\n", activation_text(p.runner_up));
  if (p.has_one_f_one_b) {
    const double gain = p.activation.step_time_s > 0 ? p.one_f_one_b.step_time_s / p.activation.step_time_s - 1 : 0;
    out += fmt::format("  {} gains {:+.1f}% throughput over {}\n", p.activation.schedule, 100 * gain,
                       activation_text(p.one_f_one_b));
  }
}

void append_calibration(std::string& out, const topo::Calibration& c) {
  if (c.empty()) return;
  out += fmt::format("Calibration ({}):", c.source.empty() ? "measured" : c.source);
  if (c.device_tflops > 0) out += fmt::format(" device {:.4g} TFLOP/s;", c.device_tflops);
  if (c.update_ns_per_param > 0) out += fmt::format(" update {:.3g} ns per parameter;", c.update_ns_per_param);
  if (c.host_us_per_step > 0) out += fmt::format(" other host work {:.3g} ms a rank per step;", c.host_us_per_step / 1e3);
  for (const auto& [kind, l] : c.links)
    out += fmt::format(" {} x{:.2f} bandwidth, {:.0f} us;", kind, l.efficiency, l.latency_us);
  if (c.outer.efficiency > 0) out += fmt::format(" outer exchange over {} x{:.2f};", c.outer.link, c.outer.efficiency);
  out.back() = '\n';
}

void append_memory(std::string& out, const Plan& p) {
  out += "Memory per device (GiB; every rank of a stage holds the same):\n";
  std::vector<int> first_rank(p.stages.size(), -1);
  for (const auto& r : p.ranks)
    if (first_rank[r.at[Axis::kPp]] < 0) first_rank[r.at[Axis::kPp]] = r.rank;
  for (size_t s = 0; s < p.stages.size(); ++s) {
    const RankMemory& m = p.memory[first_rank[s]];
    out += fmt::format("  stage {}: {:.2f} = params {:.2f} + grads {:.2f} + optimizer {:.2f} + activations {:.2f}",
                       s, m.total() / kGiB, m.params / kGiB, m.grads / kGiB, m.optimizer / kGiB,
                       m.activations / kGiB);
    if (m.runtime > 0) out += fmt::format(" + CUDA runtime {:.2f}", m.runtime / kGiB);
    out += m.capacity > 0 ? fmt::format(" of {:.1f} usable\n", m.capacity / kGiB) : " (device memory unknown)\n";
  }
}

void append_replicas(std::string& out, const Plan& p) {
  const Replicas& r = p.replicas;
  if (r.count < 2) return;
  out += fmt::format("Replicas: {} x (tensor {} x pipeline {} x data {}), outer {}{}", r.count, p.tp, p.pp,
                     r.apart() ? p.dp : p.dp / r.count, r.outer, r.elastic ? ", elastic" : "");
  if (r.outer == spec::OuterMode::kDiloco)
    out += fmt::format(" every {} steps, {} fragment{}, {} payload: one sync {:.4g} s and {} over the outer groups, "
                       "{}{:.4g} s per step amortized", r.inner_steps, r.fragments, r.fragments == 1 ? "" : "s", r.dtype,
                       r.sync_s, human_bytes(r.sync_bytes),
                       r.overlap > 0 ? fmt::format("overlapped with {} step{} ({:.4g} s exposed), ", r.overlap,
                                                   r.overlap == 1 ? "" : "s", r.exposed_s)
                                     : "",
                       r.per_step_s);
  if (r.outer == spec::OuterMode::kDiloco && r.drift_s > 0)
    out += fmt::format(" (of which {:.4g} s waiting at the sums across the replicas for the slowest, the calibration's "
                       "drift)", r.drift_s);
  else if (r.hsdp())
    out += fmt::format(" (HSDP: the optimizer sharded inside each replica; every step each rank's owned gradient shard "
                       "all-reduced over its outer group, {} over the outer groups, {:.4g} s)", human_bytes(r.sync_bytes),
                       r.sync_s);
  else if (r.outer != spec::OuterMode::kDiloco)
    out += " (one data-parallel all-reduce spans the replicas every step)";
  out += "\n";
  for (size_t i = 0; i < r.nodes.size(); ++i) out += fmt::format("  replica {}: nodes {}\n", i, node_list(r.nodes[i]));
  out += "Across the replicas (time per step, bytes over Ethernet per step, all ranks):\n";
  for (const AcrossMode& m : r.across) {
    if (!m.feasible) {
      out += fmt::format("  {:<9} {:<40} not possible: {}\n", m.name, m.what, m.why);
      continue;
    }
    out += fmt::format("  {:<9} {:<40} {:>10.4g} s {:>10}{}\n", m.name, m.what, m.step_time_s,
                       human_bytes(m.ethernet_bytes_per_step), m.name == to_string(r.outer) ? "  <- this plan" : "");
  }
  if (!r.proposal.empty()) out += "  proposal: " + r.proposal + "\n";
}

}  // namespace

std::string format_plan_text(const Plan& p) {
  std::string out;
  out += fmt::format("Plan: {} = tensor {} x pipeline {} x data {} on {} ({} placement, {} partition)\n",
                     count_of(p.world, "rank"), p.tp, p.pp, p.dp, p.device_kind, p.placement, p.partition);
  out += fmt::format("Model: {}{} parameters ({} in memory, vocabulary padded to {}), global batch {} x {} tokens\n",
                     p.model.empty() ? "" : p.model + ", ", human_count(static_cast<double>(p.params_model)),
                     human_count(static_cast<double>(p.params_total)),
                     p.vocab_padded, p.global_batch, p.seq_len);
  out += "Islands:\n";
  for (const auto& isl : p.islands)
    if (!isl.nodes.empty())
      out += fmt::format("  island {} ({}): {}, {} ({} {})\n", isl.id, isl.kind, count_of(isl.nodes.size(), "node"),
                         count_of(isl.devices, "device"), isl.nodes.size() == 1 ? "node" : "nodes",
                         node_list(isl.nodes));
  out += "  pipeline visits islands:";
  for (int i : p.island_order) out += fmt::format(" {}", i);
  out += "\n";
  append_rank_map(out, p);
  out += "Stages:\n";
  for (const auto& s : p.stages)
    out += fmt::format("  stage {:<3} layers {:>8} ({:>3} layers{}) island {}{}{}{}\n", s.stage, stage_layers(s),
                       s.num_layers, s.chunks.empty() ? "" : fmt::format(" in {} chunks", s.chunks.size()), s.island,
                       s.straddles ? " (straddles islands)" : "",
                       s.embedding ? " +embedding" : "", s.lm_head ? " +final-norm+lm-head" : "");
  append_groups(out, p);
  append_nccl_env(out, p);
  append_estimate(out, p);
  append_replicas(out, p);
  append_activation(out, p);
  append_calibration(out, p.calibration);
  append_memory(out, p);
  if (!p.warnings.empty()) {
    out += "Warnings:\n";
    for (const auto& w : p.warnings) out += "  " + w + "\n";
  }
  return out;
}

}  // namespace holmes::plan
