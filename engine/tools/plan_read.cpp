#include "engine/tools/plan_read.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "common/errors.hpp"

namespace holmes::tools {

namespace {

using nlohmann::json;

template <class E, int N>
E enum_named(const std::string& name, const char* (*to_str)(E), const char* key) {
  for (int i = 0; i < N; ++i)
    if (name == to_str(E(i))) return E(i);
  throw std::runtime_error(fmt::format("{}: '{}' is not a known value", key, name));
}

plan::GroupKind group_kind_named(const std::string& name) {
  for (const plan::GroupKind& k : plan::kGroupKinds)
    if (name == plan::to_string(k)) return k;
  throw std::runtime_error(fmt::format("groups.kind: '{}' is not a known value", name));
}

template <class E>
E choice_named(const std::string& name, const char* key) {
  if (auto e = spec::parse_choice<E>(name)) return *e;
  throw std::runtime_error(fmt::format("{}: '{}' is not a known value", key, name));
}

double number(const json& j, const char* key, double fallback = 0) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number()) throw std::runtime_error(fmt::format("'{}' is not a number", key));
  return it->get<double>();
}
int integer(const json& j, const char* key) { return static_cast<int>(number(j, key)); }
std::string text(const json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "";
  if (!it->is_string()) throw std::runtime_error(fmt::format("'{}' is not a string", key));
  return it->get<std::string>();
}
const json& array(const json& j, const char* key) {
  static const json empty = json::array();
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return empty;
  if (!it->is_array()) throw std::runtime_error(fmt::format("'{}' is not a list", key));
  return *it;
}

void read_estimate(const json& j, plan::Plan& p) {
  if (!j.is_object()) return;
  plan::Estimate& e = p.estimate;
  e.step_time_s = number(j, "step_time_s");
  e.compute_s = number(j, "compute_s");
  e.recompute_s = number(j, "recompute_s");
  e.tp_comm_s = number(j, "tp_comm_s");
  e.pp_comm_s = number(j, "pp_comm_s");
  e.pp_loop_s = number(j, "pp_loop_s");
  e.bubble_s = number(j, "bubble_s");
  e.dp_comm_s = number(j, "dp_comm_s");
  e.update_s = number(j, "update_s");
  e.log_s = number(j, "log_s");
  e.sums_s = number(j, "sums_s");
  e.quota_s = number(j, "quota_s");
  e.bottleneck_stage = integer(j, "bottleneck_stage");
  e.tokens_per_s = number(j, "tokens_per_s");
  e.tflops_per_device = number(j, "tflops_per_device");
  e.naive_step_time_s = number(j, "naive_step_time_s");
  if (const auto b = j.find("bytes_per_step"); b != j.end() && b->is_object())
    for (int k = 0; k < plan::kLinkKinds; ++k) e.bytes_per_step[k] = number(*b, plan::to_string(plan::LinkKind(k)));
  if (const auto b = j.find("baselines"); b != j.end() && b->is_object())
    for (const auto& [name, v] : b->items())
      e.baselines.push_back({choice_named<spec::Placement>(name, "estimate.baselines"), number(v, "step_time_s")});
}

plan::Plan read(const json& j) {
  if (!j.is_object()) throw std::runtime_error("not a JSON object");
  if (text(j, "format") != "holmes-plan/1")
    throw std::runtime_error(fmt::format("format is '{}', expected holmes-plan/1", text(j, "format")));
  plan::Plan p;
  p.world = integer(j, "world");
  p.tp = integer(j, "tensor"), p.pp = integer(j, "pipeline"), p.dp = integer(j, "data");
  p.micro_batch = integer(j, "micro_batch"), p.micro_batches = integer(j, "micro_batches");
  p.global_batch = integer(j, "global_batch"), p.seq_len = integer(j, "seq_len");
  p.placement = choice_named<spec::Placement>(text(j, "placement"), "placement");
  if (auto k = spec::parse_choice<spec::PartitionKind>(text(j, "partition"))) p.partition = *k;
  p.order = text(j, "order");
  p.device_kind = text(j, "device");
  p.params_model = static_cast<int64_t>(number(j, "params"));
  p.params_total = static_cast<int64_t>(number(j, "params_in_memory"));
  p.vocab_padded = static_cast<int64_t>(number(j, "vocab_padded"));
  p.model = text(j, "model");
  for (const json& i : array(j, "islands")) {
    plan::IslandInfo isl{integer(i, "id"), text(i, "kind"), {}, integer(i, "devices")};
    for (const json& n : array(i, "nodes")) isl.nodes.push_back(n.get<int>());
    p.islands.push_back(isl);
  }
  for (const json& i : array(j, "island_order")) p.island_order.push_back(i.get<int>());
  for (const json& h : array(j, "nodes")) p.hostnames.push_back(h.get<std::string>());
  for (const json& r : array(j, "ranks")) {
    plan::RankInfo info{integer(r, "rank"), integer(r, "node"), integer(r, "local_rank"), {}};
    for (const schedule::Axis a : {schedule::Axis::kTp, schedule::Axis::kPp, schedule::Axis::kDp})
      info.at[a] = integer(r, schedule::axis_name(a));
    info.at[schedule::Axis::kReplica] = r.value("replica", 0);
    p.ranks.push_back(info);
  }
  for (const json& s : array(j, "stages")) {
    plan::Stage st;
    st.stage = integer(s, "stage"), st.first_layer = integer(s, "first_layer"), st.num_layers = integer(s, "num_layers");
    st.island = integer(s, "island");
    st.straddles = s.value("straddles", false), st.embedding = s.value("embedding", false);
    st.lm_head = s.value("lm_head", false);
    st.tflops = number(s, "tflops");
    p.stages.push_back(st);
  }
  for (const json& g : array(j, "groups")) {
    plan::Group grp;
    grp.kind = group_kind_named(text(g, "kind"));
    grp.index = integer(g, "index");
    grp.transport = enum_named<plan::Transport, plan::kTransports>(text(g, "transport"), plan::to_string, "groups.transport");
    grp.link = enum_named<plan::LinkKind, plan::kLinkKinds>(text(g, "link"), plan::to_string, "groups.link");
    grp.interface = text(g, "interface");
    grp.gid_index = integer(g, "gid_index");
    grp.crosses_nodes = g.value("crosses_nodes", false), grp.crosses_islands = g.value("crosses_islands", false);
    grp.gbps_per_rank = number(g, "gbps_per_rank");
    grp.latency_s = number(g, "latency_us") / 1e6;
    for (const json& h : array(g, "hcas")) grp.hcas.push_back(h.get<std::string>());
    for (const json& r : array(g, "ranks")) grp.ranks.push_back(r.get<int>());
    p.groups.push_back(grp);
  }
  if (const auto e = j.find("estimate"); e != j.end()) read_estimate(*e, p);
  if (const auto a = j.find("activation"); a != j.end() && a->is_object()) {
    p.activation_chosen = a->value("chosen", false);
    p.schedule_chosen = a->value("schedule_chosen", false);
    p.recompute_chosen = a->value("recompute_chosen", false);
    if (const auto c = a->find("plan"); c != a->end() && c->is_object()) {
      if (auto r = spec::parse_choice<spec::Recompute>(text(*c, "recompute"))) p.activation.recompute = *r;
      if (auto s = spec::parse_choice<spec::Schedule>(text(*c, "schedule"))) p.activation.schedule = *s;
      p.activation.step_time_s = number(*c, "step_time_s");
    }
  }
  if (const auto c = j.find("calibration"); c != j.end() && c->is_object()) {
    p.calibration.source = text(*c, "source");
    p.calibration.device_tflops = number(*c, "device_tflops");
    p.calibration.update_ns_per_param = number(*c, "update_ns_per_param");
    p.calibration.host_us_per_step = number(*c, "host_us_per_step");
    if (const auto l = c->find("links"); l != c->end() && l->is_object())
      for (const auto& [kind, v] : l->items())
        p.calibration.links[kind] = {number(v, "efficiency"), number(v, "latency_us")};
  }
  for (const json& m : array(j, "memory")) {
    plan::RankMemory rm;
    rm.rank = integer(m, "rank");
    rm.params = number(m, "params"), rm.grads = number(m, "grads"), rm.optimizer = number(m, "optimizer");
    rm.activations = number(m, "activations"), rm.capacity = number(m, "capacity");
    rm.runtime = m.contains("runtime") ? number(m, "runtime") : 0;
    p.memory.push_back(rm);
  }
  for (const json& w : array(j, "warnings")) p.warnings.push_back(w.get<std::string>());
  return p;
}

// What the picture indexes by: rank i is entry i, on a node of the plan, in one of its stages.
void check(const plan::Plan& p) {
  if (p.world < 1 || p.ranks.size() != size_t(p.world))
    throw std::runtime_error(fmt::format("world {} but {} ranks listed", p.world, p.ranks.size()));
  if (p.pp < 1 || p.stages.size() != size_t(p.pp))
    throw std::runtime_error(fmt::format("pipeline {} but {} stages listed", p.pp, p.stages.size()));
  for (size_t i = 0; i < p.ranks.size(); ++i) {
    const plan::RankInfo& r = p.ranks[i];
    const int stage = r.at[schedule::Axis::kPp];
    if (r.rank != int(i) || r.node < 0 || size_t(r.node) >= p.hostnames.size() || stage < 0 || stage >= p.pp)
      throw std::runtime_error(fmt::format("ranks[{}] (rank {}, node {}, pp {}) is outside the plan's {} nodes and {} "
                                           "stages", i, r.rank, r.node, stage, p.hostnames.size(), p.pp));
  }
  for (const plan::Group& g : p.groups)
    for (int r : g.ranks)
      if (r < 0 || r >= p.world)
        throw std::runtime_error(fmt::format("a {} group lists rank {} of a {}-rank plan", plan::to_string(g.kind), r,
                                             p.world));
  for (const plan::IslandInfo& isl : p.islands)
    for (int n : isl.nodes)
      if (n < 0 || size_t(n) >= p.hostnames.size())
        throw std::runtime_error(fmt::format("island {} lists node {} of {}", isl.id, n, p.hostnames.size()));
}

}  // namespace

plan::Plan read_plan_json(const std::string& text, const std::string& source) {
  try {
    plan::Plan p = read(json::parse(text));
    check(p);
    return p;
  } catch (const std::exception& e) {
    throw UserError(fmt::format("{}: not a readable holmes-plan/1 plan: {}", source, e.what()));
  }
}

}  // namespace holmes::tools
