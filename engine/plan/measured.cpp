#include "engine/plan/measured.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace holmes::plan {

std::string shape_key(const model::GptConfig& m) {
  return fmt::format("{} L={} C={} NH={} KVH={} F={} V={}", m.arch, m.layers, m.hidden, m.heads,
                     m.kv_heads > 0 ? m.kv_heads : m.heads, m.ffn_hidden, m.vocab);
}

const topo::ComputeTable* table_for(const std::vector<topo::ComputeTable>& tables, const std::string& device_name,
                                    const std::string& precision, const std::string& model) {
  for (const topo::ComputeTable& t : tables)
    if (t.device_name == device_name && t.precision == precision && t.model == model) return &t;
  return nullptr;
}

namespace {

const char* recompute_name(spec::Recompute r) {
  switch (r) {
    case spec::Recompute::kSelective: return "selective";
    case spec::Recompute::kFull: return "full";
    default: return "none";
  }
}

// Rows of a table at one (tp, seq_len[, mode]) by micro-batch; the value at `mb`: the row
// itself, linear between the two around it, the nearest one's per-token figure outside them.
template <class Row, class Get>
std::optional<double> at_micro_batch(const std::vector<const Row*>& rows, int mb, Get&& get, bool* interpolated) {
  if (rows.empty()) return std::nullopt;
  std::map<int, const Row*> by;
  for (const Row* r : rows) by[r->micro_batch] = r;
  if (auto it = by.find(mb); it != by.end()) return get(*it->second);
  *interpolated = true;
  auto hi = by.lower_bound(mb);
  if (hi == by.begin()) return get(*hi->second) * mb / hi->first;
  if (hi == by.end()) {
    const auto& [b, r] = *by.rbegin();
    return get(*r) * mb / b;
  }
  const auto lo = std::prev(hi);
  const double x = double(mb - lo->first) / double(hi->first - lo->first);
  return get(*lo->second) + x * (get(*hi->second) - get(*lo->second));
}

struct Pass3 {
  double f = 0, b = 0, w = 0, ball = 0;
};

std::optional<Pass3> layer_at(const topo::ComputeTable& t, int tp, int mb, int seq, const char* mode, bool* interp) {
  std::vector<const topo::LayerTime*> rows;
  for (const auto& l : t.layers)
    if (l.tp == tp && l.seq_len == seq && l.recompute == mode) rows.push_back(&l);
  if (rows.empty()) return std::nullopt;
  Pass3 p;
  p.f = *at_micro_batch(rows, mb, [](const topo::LayerTime& l) { return l.forward_ms; }, interp);
  p.b = *at_micro_batch(rows, mb, [](const topo::LayerTime& l) { return l.backward_ms; }, interp);
  p.w = *at_micro_batch(rows, mb, [](const topo::LayerTime& l) { return l.weights_ms; }, interp);
  p.ball = *at_micro_batch(rows, mb, [](const topo::LayerTime& l) { return l.backward_all_ms; }, interp);
  return p;
}

std::optional<Pass3> edge_at(const std::vector<topo::EdgeTime>& edges, int tp, int mb, int seq, bool* interp) {
  std::vector<const topo::EdgeTime*> rows;
  for (const auto& e : edges)
    if (e.tp == tp && e.seq_len == seq) rows.push_back(&e);
  if (rows.empty()) return std::nullopt;
  Pass3 p;
  p.f = *at_micro_batch(rows, mb, [](const topo::EdgeTime& e) { return e.forward_ms; }, interp);
  p.b = *at_micro_batch(rows, mb, [](const topo::EdgeTime& e) { return e.backward_ms; }, interp);
  p.w = *at_micro_batch(rows, mb, [](const topo::EdgeTime& e) { return e.weights_ms; }, interp);
  p.ball = p.b + p.w;
  return p;
}

// A GEMM of the table at this slice scaled to `rows` rows (a GEMM's time is linear in its rows
// at the sizes a step has); nullopt when the table lacks it.
std::optional<Pass3> gemm_at(const topo::ComputeTable& t, const std::string& name, int tp, double rows,
                             double* flops = nullptr) {
  const topo::GemmTime* best = nullptr;
  for (const auto& g : t.gemms)
    if (g.name == name && g.tp == tp && (!best || std::abs(std::log(g.m / rows)) < std::abs(std::log(best->m / rows))))
      best = &g;
  if (!best) return std::nullopt;
  const double s = rows / double(best->m);
  if (flops) *flops += best->flops() * s;
  return Pass3{best->forward_ms * s, best->input_grad_ms * s, best->weight_grad_ms * s,
               (best->input_grad_ms + best->weight_grad_ms) * s};
}

// The analytic layer from the table's GEMMs (qkv, attn_out, mlp_in, mlp_out), attention rows
// (or its FLOPs at the GEMMs' rate) and the memory-bound rest (norms, activations, residuals:
// a few passes over the layer's activations) at the copy rate.
std::optional<Pass3> layer_from_gemms(const topo::ComputeTable& t, const model::GptConfig& m, int tp, int mb, int seq,
                                      int act_bytes) {
  const double rows = double(mb) * seq;
  Pass3 p;
  double gemm_flops = 0, gemm_ms = 0;
  for (const char* name : {"qkv", "attn_out", "mlp_in", "mlp_out"}) {
    const auto g = gemm_at(t, name, tp, rows, &gemm_flops);
    if (!g) return std::nullopt;
    p.f += g->f, p.b += g->b, p.w += g->w;
    gemm_ms += g->f;
  }
  bool interp = false;
  std::vector<const topo::AttentionTime*> att;
  for (const auto& a : t.attention)
    if (a.tp == tp && a.seq_len == seq) att.push_back(&a);
  if (!att.empty()) {
    p.f += *at_micro_batch(att, mb, [](const topo::AttentionTime& a) { return a.forward_ms; }, &interp);
    p.b += *at_micro_batch(att, mb, [](const topo::AttentionTime& a) { return a.backward_ms; }, &interp);
  } else if (gemm_ms > 0) {
    const double flops = 4.0 * rows * seq * m.hidden / tp;  // QK^T and the weighted sum
    const double ms_per_flop = gemm_ms / std::max(1.0, gemm_flops);
    p.f += flops * ms_per_flop, p.b += 2 * flops * ms_per_flop;
  }
  if (t.copy_gbps > 0) {
    // About six passes over the layer's (B, T, C) activations forward (two norms, the
    // residual adds, the MLP's activation) and twice that backward.
    const double bytes = 6.0 * rows * m.hidden * act_bytes;
    const double ms = bytes / (t.copy_gbps * 1e9) * 1e3;
    p.f += ms, p.b += 2 * ms;
  }
  p.ball = p.b + p.w;
  return p;
}

}  // namespace

std::optional<MeasuredPasses> measured_passes(const topo::ComputeTable& t, const model::GptConfig& m, int tp, int micro_batch,
                                              int seq_len, spec::Recompute recompute, int layers, bool first, bool last,
                                              int act_bytes) {
  bool interp = false;
  const char* mode = recompute_name(recompute);
  std::optional<Pass3> layer = layer_at(t, tp, micro_batch, seq_len, mode, &interp);
  std::optional<Pass3> plain = layer_at(t, tp, micro_batch, seq_len, "none", &interp);
  std::string source = "table";
  if (!layer) {
    layer = layer_from_gemms(t, m, tp, micro_batch, seq_len, act_bytes);
    if (!layer) return std::nullopt;
    plain = layer;
    source = "GEMMs of the table";
    // Recomputation on the analytic path: the replayed forward (full) or the norms and
    // activations (selective), on top.
    if (recompute == spec::Recompute::kFull) layer->b += layer->f, layer->ball += layer->f;
  } else if (interp) {
    source = "table (micro-batch interpolated)";
  }
  MeasuredPasses out;
  out.source = source;
  auto add = [&](const Pass3& p, double n) {
    out.forward_s += n * p.f * 1e-3, out.backward_s += n * p.b * 1e-3, out.weights_s += n * p.w * 1e-3;
    out.backward_all_s += n * p.ball * 1e-3;
  };
  add(*layer, layers);
  if (plain) out.replay_s = std::max(0.0, layers * ((layer->f + layer->ball) - (plain->f + plain->ball)) * 1e-3);
  // The embedding and the head with its loss: their own rows, else their GEMM (the head) or
  // nothing measurable (the embedding's lookup is memory-bound: the copy rate).
  auto edge = [&](const std::vector<topo::EdgeTime>& rows, const char* gemm) {
    if (auto e = edge_at(rows, tp, micro_batch, seq_len, &interp)) return add(*e, 1);
    if (auto g = gemm ? gemm_at(t, gemm, tp, double(micro_batch) * seq_len) : std::optional<Pass3>{}) return add(*g, 1);
    if (!gemm && t.copy_gbps > 0) {
      const double ms = 2.0 * micro_batch * seq_len * m.hidden * act_bytes / (t.copy_gbps * 1e9) * 1e3;
      return add(Pass3{ms, ms, 0, ms}, 1);
    }
  };
  if (first) edge(t.embedding, nullptr);
  if (last) edge(t.head, "head");
  return out;
}

std::optional<double> LinkCurves::seconds(const std::string& op, int ranks, double bytes) const {
  const topo::CollectiveCurve* same = nullptr;
  const topo::CollectiveCurve* other = nullptr;
  for (const topo::CollectiveCurve* c : curves) {
    if (c->op != op) continue;
    if (c->ranks == ranks) same = c;
    else if (!other || std::abs(c->ranks - ranks) < std::abs(other->ranks - ranks)) other = c;
  }
  if (same) return topo::curve_seconds(*same, bytes);
  if (!other || other->bus_gbps <= 0) return std::nullopt;
  // Another group size: a ring's steps grow with the group (its alpha per step), its bus
  // bandwidth is the link's.
  const double steps = op == "send_recv" ? 1.0 : double(ranks - 1) / std::max(1, other->ranks - 1);
  return other->alpha_us * 1e-6 * steps + topo::wire_factor(op, ranks) * bytes * 8 / (other->bus_gbps * 1e9);
}

LinkCurves curves_for(const std::vector<topo::CollectiveCurve>& all, const std::string& link, const std::string& intra,
                      const std::string& transport, const std::string& device) {
  LinkCurves out;
  for (const topo::CollectiveCurve& c : all)
    if (c.link == link && c.transport == transport && (c.device.empty() || c.device == device) &&
        (link != "intra-node" || c.intra.empty() || c.intra == intra))
      out.curves.push_back(&c);
  return out;
}

}  // namespace holmes::plan
