// Hand-written JSON of a plan (keys documented in docs/plan-format.md). Numbers are printed
// with fixed precision so the text, and plan_hash over it, is identical on every rank.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <string>

#include "engine/plan/nccl.hpp"
#include "engine/plan/plan.hpp"

namespace holmes::plan {

namespace {

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += char(c);
    else if (c < 0x20) out += fmt::format("\\u{:04x}", int(c));
    else out += char(c);
  }
  return out + "\"";
}

std::string num(double v) { return std::isfinite(v) ? fmt::format("{:.9g}", v) : "null"; }
// A count of bytes as an exact integer: 4294967296, not 4.2949673e+09 (which JSON readers turn
// into 4294967300.0). The model computes bytes as doubles; a fraction of a byte is rounded.
std::string bytes(double v) { return std::isfinite(v) ? fmt::format("{}", std::llround(v)) : "null"; }
const char* boolean(bool b) { return b ? "true" : "false"; }

template <class T, class F>
void array(std::string& out, const std::vector<T>& items, F each, const char* sep = ",\n    ") {
  out += "[";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    each(items[i]);
  }
  out += "]";
}

void append_groups(std::string& out, const Plan& p) {
  out += "  \"groups\": [\n    ";
  for (size_t i = 0; i < p.groups.size(); ++i) {
    const Group& g = p.groups[i];
    if (i) out += ",\n    ";
    out += fmt::format("{{\"kind\": \"{}\", \"index\": {}, \"transport\": \"{}\", \"link\": \"{}\", \"interface\": {}, "
                       "\"gid_index\": {}, \"crosses_nodes\": {}, \"crosses_islands\": {}, \"gbps_per_rank\": {}, "
                       "\"latency_us\": {}, \"hcas\": ",
                       to_string(g.kind), g.index, to_string(g.transport), to_string(g.link), quote(g.interface),
                       g.gid_index, boolean(g.crosses_nodes), boolean(g.crosses_islands), num(g.gbps_per_rank),
                       num(g.latency_s * 1e6));
    array(out, g.hcas, [&](const std::string& h) { out += quote(h); }, ", ");
    out += ", \"ranks\": ";
    array(out, g.ranks, [&](int r) { out += std::to_string(r); }, ", ");
    out += "}";
  }
  out += "\n  ],\n";
}

// Per node, the variables nccl_env() sets (empty objects on CPU plans).
void append_nccl_env(std::string& out, const Plan& p) {
  out += "  \"nccl_env\": [";
  for (int n = 0; n < static_cast<int>(p.hostnames.size()); ++n) {
    out += fmt::format("{}{{\"node\": {}, \"host\": {}, \"vars\": {{", n ? ",\n    " : "\n    ", n,
                       quote(p.hostnames[n]));
    bool first = true;
    for (const EnvVar& v : nccl_env(p, n)) {
      out += fmt::format("{}{}: {}", first ? "" : ", ", quote(v.name), quote(v.value));
      first = false;
    }
    out += "}}";
  }
  out += "\n  ],\n";
}

void append_estimate(std::string& out, const Plan& p) {
  const Estimate& e = p.estimate;
  double speedup = e.step_time_s > 0 ? e.naive_step_time_s / e.step_time_s : 0;
  out += fmt::format(
      "  \"estimate\": {{\"step_time_s\": {}, \"compute_s\": {}, \"recompute_s\": {}, \"tp_comm_s\": {}, "
      "\"pp_comm_s\": {}, \"pp_loop_s\": {}, \"bubble_s\": {}, \"dp_comm_s\": {}, \"update_s\": {}, \"log_s\": {}, \"sums_s\": {}, \"quota_s\": {}, \"bottleneck_stage\": {}, "
      "\"tokens_per_s\": {}, \"tflops_per_device\": {}, \"naive_step_time_s\": {}, \"speedup_over_naive\": {}, "
      "\"bytes_per_step\": {{",
      num(e.step_time_s), num(e.compute_s), num(e.recompute_s), num(e.tp_comm_s), num(e.pp_comm_s), num(e.pp_loop_s), num(e.bubble_s), num(e.dp_comm_s),
      num(e.update_s), num(e.log_s), num(e.sums_s), num(e.quota_s), e.bottleneck_stage, num(e.tokens_per_s), num(e.tflops_per_device), num(e.naive_step_time_s), num(speedup));
  for (int k = 0; k < kLinkKinds; ++k)
    out += fmt::format("{}\"{}\": {}", k ? ", " : "", to_string(LinkKind(k)), bytes(e.bytes_per_step[k]));
  out += "}, \"baselines\": {";
  for (size_t i = 0; i < e.baselines.size(); ++i) {
    const Baseline& b = e.baselines[i];
    out += fmt::format("{}\"{}\": {{\"step_time_s\": {}, \"speedup\": {}}}", i ? ", " : "", b.placement,
                       num(b.step_time_s), num(e.step_time_s > 0 ? b.step_time_s / e.step_time_s : 0));
  }
  out += "}, \"sources\": {";
  for (size_t i = 0; i < e.sources.size(); ++i)
    out += fmt::format("{}{}: {}", i ? ", " : "", quote(e.sources[i].first), quote(e.sources[i].second));
  out += "}},\n";
  out += fmt::format("  \"pipe_fp8\": {{\"on\": {}, \"other_step_time_s\": {}}},\n", p.pipe_fp8 ? "true" : "false",
                     num(p.pipe_fp8_other_step_s));
}

std::string activation_json(const ActivationChoice& a) {
  return fmt::format("{{\"schedule\": \"{}\", \"recompute\": \"{}\", \"step_time_s\": {}, \"bubble_s\": {}, "
                     "\"recompute_s\": {}, \"activations\": {}, \"memory\": {}, \"capacity\": {}, \"fits\": {}, "
                     "\"virtual_stages\": {}}}",
                     a.schedule, a.recompute, num(a.step_time_s), num(a.bubble_s), num(a.recompute_s),
                     bytes(a.activations), bytes(a.memory), bytes(a.capacity), boolean(a.fits), a.virtual_stages);
}

// parallel.schedule and train.recompute as planned, the next best setting when the planner
// chose either, and the chosen recompute mode under 1f1b when the schedule is another.
void append_activation(std::string& out, const Plan& p) {
  out += fmt::format("  \"activation\": {{\"chosen\": {}, \"schedule_chosen\": {}, \"recompute_chosen\": {}, "
                     "\"plan\": {}, \"runner_up\": {}, \"one_f_one_b\": {}}},\n",
                     boolean(p.activation_chosen), boolean(p.schedule_chosen), boolean(p.recompute_chosen),
                     activation_json(p.activation), p.activation_chosen ? activation_json(p.runner_up) : "null",
                     p.has_one_f_one_b ? activation_json(p.one_f_one_b) : "null");
}

void append_calibration(std::string& out, const topo::Calibration& c) {
  out += "  \"calibration\": ";
  if (c.empty()) {
    out += "null,\n";
    return;
  }
  out += fmt::format("{{\"source\": {}, \"device_tflops\": {}, \"update_ns_per_param\": {}, \"host_us_per_step\": {}, "
                     "\"links\": {{",
                     quote(c.source), num(c.device_tflops), num(c.update_ns_per_param), num(c.host_us_per_step));
  bool first = true;
  for (const auto& [kind, l] : c.links) {
    out += fmt::format("{}\"{}\": {{\"efficiency\": {}, \"latency_us\": {}}}", first ? "" : ", ", kind,
                       num(l.efficiency), num(l.latency_us));
    first = false;
  }
  out += "}";
  if (c.outer.efficiency > 0)  // diloco's exchange as it ran in the steps; absent otherwise (plan_hash as before)
    out += fmt::format(", \"outer\": {{\"link\": {}, \"efficiency\": {}{}}}", quote(c.outer.link), num(c.outer.efficiency),
                       c.outer.drift_ms > 0 ? fmt::format(", \"drift_ms\": {}", num(c.outer.drift_ms)) : "");
  out += "},\n";
}

// Only plans with replicas have the key: other plans' JSON, and so their plan_hash, is as before.
void append_replicas(std::string& out, const Replicas& r) {
  out += fmt::format(",\n  \"replicas\": {{\"count\": {}, \"outer\": \"{}\", \"inner_steps\": {}, \"fragments\": {}, "
                     "\"outer_dtype\": \"{}\", \"outer_overlap\": {}, \"sync_s\": {}, \"exposed_s\": {}, "
                     "\"sync_bytes\": {}, \"per_step_s\": {}, \"nodes\": ",
                     r.count, r.outer, r.inner_steps, r.fragments, r.dtype, r.overlap, num(r.sync_s), num(r.exposed_s),
                     bytes(r.sync_bytes), num(r.per_step_s));
  array(out, r.nodes, [&](const std::vector<int>& n) { out += fmt::format("[{}]", fmt::join(n, ", ")); }, ", ");
  if (r.drift_s > 0) out += fmt::format(", \"drift_s\": {}", num(r.drift_s));  // absent: plan_hash as before
  if (r.elastic)  // absent: plan_hash as before
    out += fmt::format(", \"elastic\": true, \"agree_s\": {}, \"verdict_s\": {}", num(r.agree_s), num(r.verdict_s));
  out += ", \"across\": ";
  array(out, r.across, [&](const AcrossMode& m) {
    out += fmt::format("{{\"mode\": \"{}\", \"degrees\": {}, \"feasible\": {}, \"why\": {}, \"step_time_s\": {}, "
                       "\"ethernet_bytes_per_step\": {}}}", m.name, quote(m.what), boolean(m.feasible), quote(m.why),
                       num(m.step_time_s), bytes(m.ethernet_bytes_per_step));
  }, ", ");
  out += fmt::format(", \"proposal\": {}}}", quote(r.proposal));
}

}  // namespace

std::string format_plan_json(const Plan& p) {
  std::string out = "{\n";
  out += fmt::format(
      "  \"format\": \"holmes-plan/1\",\n  \"world\": {}, \"tensor\": {}, \"pipeline\": {}, \"data\": {},\n"
      "  \"micro_batch\": {}, \"micro_batches\": {}, \"global_batch\": {}, \"seq_len\": {},\n"
      "  \"placement\": \"{}\", \"partition\": \"{}\", \"order\": \"{}\", \"device\": \"{}\",\n"
      "  \"params\": {}, \"params_in_memory\": {}, \"vocab_padded\": {},\n",
      p.world, p.tp, p.pp, p.dp, p.micro_batch, p.micro_batches, p.global_batch, p.seq_len, p.placement, p.partition,
      p.order, p.device_kind, p.params_model, p.params_total, p.vocab_padded);
  // Only llama plans name their model: a gpt2 plan's JSON, and so its plan_hash, is as before.
  if (!p.model.empty()) out += fmt::format("  \"model\": {},\n", quote(p.model));
  out += "  \"islands\": ";
  array(out, p.islands, [&](const IslandInfo& i) {
    out += fmt::format("{{\"id\": {}, \"kind\": \"{}\", \"devices\": {}, \"nodes\": [{}]}}", i.id, i.kind, i.devices,
                       fmt::join(i.nodes, ", "));
  });
  out += ",\n  \"island_order\": ";
  array(out, p.island_order, [&](int i) { out += std::to_string(i); }, ", ");
  out += ",\n  \"nodes\": ";
  array(out, p.hostnames, [&](const std::string& h) { out += quote(h); }, ", ");
  out += ",\n  \"ranks\": ";
  array(out, p.ranks, [&](const RankInfo& r) {
    out += fmt::format("{{\"rank\": {}, \"node\": {}, \"local_rank\": {}, \"tp\": {}, \"pp\": {}, \"dp\": {}{}}}",
                       r.rank, r.node, r.local_rank, r.at[Axis::kTp], r.at[Axis::kPp], r.at[Axis::kDp],
                       p.replicas.count > 1 ? fmt::format(", \"replica\": {}", r.at[Axis::kReplica]) : "");
  });
  out += ",\n  \"stages\": ";
  array(out, p.stages, [&](const Stage& s) {
    out += fmt::format("{{\"stage\": {}, \"first_layer\": {}, \"num_layers\": {}, \"island\": {}, \"straddles\": {}, "
                       "\"embedding\": {}, \"lm_head\": {}, \"tflops\": {}, \"chunks\": [",
                       s.stage, s.first_layer, s.num_layers, s.island, boolean(s.straddles), boolean(s.embedding),
                       boolean(s.lm_head), num(s.tflops));
    for (size_t c = 0; c < s.chunks.size(); ++c)
      out += fmt::format("{}{{\"first_layer\": {}, \"num_layers\": {}}}", c ? ", " : "", s.chunks[c].first_layer,
                         s.chunks[c].num_layers);
    out += "]}";
  });
  out += ",\n";
  append_groups(out, p);
  append_nccl_env(out, p);
  append_estimate(out, p);
  append_activation(out, p);
  append_calibration(out, p.calibration);
  out += "  \"memory\": ";
  array(out, p.memory, [&](const RankMemory& m) {
    // "bytes" is the sum of the parts as printed, each rounded to a whole byte.
    const long long parts[] = {std::llround(m.params), std::llround(m.grads), std::llround(m.optimizer),
                               std::llround(m.activations), std::llround(m.runtime)};
    out += fmt::format("{{\"rank\": {}, \"bytes\": {}, \"params\": {}, \"grads\": {}, \"optimizer\": {}, "
                       "\"activations\": {}, \"runtime\": {}, \"capacity\": {}}}",
                       m.rank, parts[0] + parts[1] + parts[2] + parts[3] + parts[4], parts[0], parts[1], parts[2],
                       parts[3], parts[4], bytes(m.capacity));
  });
  if (p.replicas.count > 1) append_replicas(out, p.replicas);
  out += ",\n  \"warnings\": ";
  array(out, p.warnings, [&](const std::string& w) { out += quote(w); });
  out += "\n}\n";
  return out;
}

}  // namespace holmes::plan
