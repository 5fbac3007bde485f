#include "engine/topo/calibration_tables.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "engine/topo/calibration.hpp"
#include "engine/topo/calibration_yaml.hpp"
#include "engine/topo/yaml_read.hpp"

namespace holmes::topo {

double wire_factor(const std::string& op, int ranks) {
  const double d = std::max(1, ranks);
  if (op == "all_reduce") return 2 * (d - 1) / d;
  if (op == "send_recv") return 1;
  return (d - 1) / d;  // reduce_scatter, all_gather
}

void fit_curve(CollectiveCurve& c) {
  // t = alpha + w x / bus, x the bytes, w the wire factor: least squares in (alpha, 1 / bus) over
  // the points, each weighted by 1 / t^2 (relative errors: the small messages count as much as
  // the large ones). A negative alpha is clamped to 0 and the slope refitted through the origin.
  const double w = wire_factor(c.op, c.ranks);
  double s = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& [bytes, t] : c.points) {
    if (!(t > 0) || !(bytes > 0)) continue;
    const double x = w * bytes, q = 1 / (t * t);
    s += q, sx += q * x, sy += q * t, sxx += q * x * x, sxy += q * x * t;
  }
  double slope = 0, alpha = 0;
  const double det = s * sxx - sx * sx;
  if (det > 0) {
    slope = (s * sxy - sx * sy) / det;
    alpha = (sy - slope * sx) / s;
  }
  if (alpha < 0 || !(slope > 0)) {
    alpha = std::max(0.0, alpha);
    slope = sxx > 0 ? std::max(1e-30, (sxy - alpha * sx) / sxx) : 0;
  }
  c.alpha_us = alpha * 1e6;
  c.bus_gbps = slope > 0 ? 8.0 / slope / 1e9 : 0;
}

double curve_seconds(const CollectiveCurve& c, double bytes) {
  const auto& p = c.points;
  const double w = wire_factor(c.op, c.ranks);
  auto fit = [&](double b) { return c.alpha_us * 1e-6 + (c.bus_gbps > 0 ? w * b * 8 / (c.bus_gbps * 1e9) : 0); };
  if (p.empty() || bytes <= 0) return fit(std::max(0.0, bytes));
  if (bytes < p.front().first) return std::min(p.front().second, fit(bytes) + p.front().second - fit(p.front().first));
  if (bytes > p.back().first) return p.back().second + (fit(bytes) - fit(p.back().first));
  size_t i = 1;
  while (i < p.size() && p[i].first < bytes) ++i;
  if (i == p.size()) return p.back().second;
  const auto& [b0, t0] = p[i - 1];
  const auto& [b1, t1] = p[i];
  if (b1 <= b0 || t0 <= 0 || t1 <= 0) return t1;
  const double x = std::log(bytes / b0) / std::log(b1 / b0);
  return std::exp(std::log(t0) + x * (std::log(t1) - std::log(t0)));
}

namespace {

using namespace yaml_read;

double ms(const YAML::Node& n, const char* key, const Ctx& ctx) {
  const double v = get<double>(n, key, ctx, 0.0, "a number of milliseconds >= 0");
  if (v < 0) ctx.at(key).fail(n[key], fmt::format("expected a number of milliseconds >= 0, found {}", v));
  return v;
}

int positive(const YAML::Node& n, const char* key, const Ctx& ctx, int fallback, const char* what) {
  const int v = get<int>(n, key, ctx, fallback, what);
  if (v < 1) ctx.at(key).fail(n[key], fmt::format("expected {} >= 1, found {}", what, v));
  return v;
}

template <class T, class F>
std::vector<T> parse_list(const YAML::Node& n, const Ctx& ctx, F&& one) {
  std::vector<T> out;
  if (!n.IsDefined() || n.IsNull()) return out;
  if (!n.IsSequence()) ctx.fail(n, fmt::format("expected a list, found {}", describe(n)));
  for (size_t i = 0; i < n.size(); ++i) out.push_back(one(n[i], ctx.item(i)));
  return out;
}

EdgeTime parse_edge(const YAML::Node& n, const Ctx& ctx) {
  check_keys(n, ctx, {"tp", "micro_batch", "seq_len", "forward_ms", "backward_ms", "weights_ms"});
  return {positive(n, "tp", ctx, 1, "a tensor-parallel degree"), positive(n, "micro_batch", ctx, 1, "a micro-batch"),
          positive(n, "seq_len", ctx, 1, "a sequence length"), ms(n, "forward_ms", ctx), ms(n, "backward_ms", ctx),
          ms(n, "weights_ms", ctx)};
}

ComputeTable parse_table(const YAML::Node& n, const Ctx& ctx) {
  check_keys(n, ctx, {"device", "precision", "model", "layers", "embedding", "head", "gemms", "attention",
                      "optimizer_ns_per_param", "copy_gbps", "upload_gbps", "download_gbps", "launch_us"});
  ComputeTable t;
  DeviceRecord d;
  if (!n["device"].IsDefined()) ctx.fail(n, "missing key 'device': a table says what it was measured on");
  parse_device_record(n["device"], ctx.at("device"), d);
  t.device_kind = d.kind, t.device_name = d.name;
  t.precision = get<std::string>(n, "precision", ctx, "fp32", "fp32 or bf16");
  if (t.precision != "fp32" && t.precision != "bf16")
    ctx.at("precision").fail(n["precision"], fmt::format("expected fp32 or bf16, found '{}'", t.precision));
  t.model = get<std::string>(n, "model", ctx, "", "the model's shape");
  t.layers = parse_list<LayerTime>(n["layers"], ctx.at("layers"), [](const YAML::Node& x, const Ctx& c) {
    check_keys(x, c, {"tp", "micro_batch", "seq_len", "recompute", "forward_ms", "backward_ms", "weights_ms",
                      "backward_all_ms"});
    LayerTime l{positive(x, "tp", c, 1, "a tensor-parallel degree"), positive(x, "micro_batch", c, 1, "a micro-batch"),
                positive(x, "seq_len", c, 1, "a sequence length"), get<std::string>(x, "recompute", c, "none", "a mode"),
                ms(x, "forward_ms", c), ms(x, "backward_ms", c), ms(x, "weights_ms", c), ms(x, "backward_all_ms", c)};
    if (l.recompute != "none" && l.recompute != "selective" && l.recompute != "full")
      c.at("recompute").fail(x["recompute"], fmt::format("expected none, selective or full, found '{}'", l.recompute));
    return l;
  });
  t.embedding = parse_list<EdgeTime>(n["embedding"], ctx.at("embedding"), parse_edge);
  t.head = parse_list<EdgeTime>(n["head"], ctx.at("head"), parse_edge);
  t.gemms = parse_list<GemmTime>(n["gemms"], ctx.at("gemms"), [](const YAML::Node& x, const Ctx& c) {
    check_keys(x, c, {"name", "tp", "m", "n", "k", "forward_ms", "input_grad_ms", "weight_grad_ms"});
    return GemmTime{get<std::string>(x, "name", c, "", "a GEMM's name"), positive(x, "tp", c, 1, "a degree"),
                    positive(x, "m", c, 1, "rows"), positive(x, "n", c, 1, "columns"), positive(x, "k", c, 1, "depth"),
                    ms(x, "forward_ms", c), ms(x, "input_grad_ms", c), ms(x, "weight_grad_ms", c)};
  });
  t.attention = parse_list<AttentionTime>(n["attention"], ctx.at("attention"), [](const YAML::Node& x, const Ctx& c) {
    check_keys(x, c, {"tp", "micro_batch", "seq_len", "forward_ms", "backward_ms"});
    return AttentionTime{positive(x, "tp", c, 1, "a degree"), positive(x, "micro_batch", c, 1, "a micro-batch"),
                         positive(x, "seq_len", c, 1, "a sequence length"), ms(x, "forward_ms", c),
                         ms(x, "backward_ms", c)};
  });
  t.optimizer_ns_per_param = ms(n, "optimizer_ns_per_param", ctx);
  t.copy_gbps = ms(n, "copy_gbps", ctx);
  t.upload_gbps = ms(n, "upload_gbps", ctx);
  t.download_gbps = ms(n, "download_gbps", ctx);
  t.launch_us = ms(n, "launch_us", ctx);
  return t;
}

CollectiveCurve parse_curve(const YAML::Node& n, const Ctx& ctx) {
  check_keys(n, ctx, {"device", "link", "intra", "transport", "op", "ranks", "alpha_us", "bus_gbps", "points"});
  CollectiveCurve c;
  c.device = get<std::string>(n, "device", ctx, "", "a device name");
  c.link = get<std::string>(n, "link", ctx, "", "a link class");
  if (std::find(std::begin(kCalibratedLinks), std::end(kCalibratedLinks), c.link) == std::end(kCalibratedLinks))
    ctx.at("link").fail(n["link"], fmt::format("expected one of intra-node, ib, roce, ethernet, found '{}'", c.link));
  c.intra = get<std::string>(n, "intra", ctx, "", "an intra-node class");
  c.transport = get<std::string>(n, "transport", ctx, "", "nccl or gloo");
  if (c.transport != "nccl" && c.transport != "gloo")
    ctx.at("transport").fail(n["transport"], fmt::format("expected nccl or gloo, found '{}'", c.transport));
  c.op = get<std::string>(n, "op", ctx, "", "a collective");
  if (std::find(std::begin(kCollectiveOps), std::end(kCollectiveOps), c.op) == std::end(kCollectiveOps))
    ctx.at("op").fail(n["op"], fmt::format("expected all_reduce, reduce_scatter, all_gather or send_recv, found '{}'",
                                           c.op));
  c.ranks = positive(n, "ranks", ctx, 2, "a group size");
  c.points = parse_points(n["points"], ctx.at("points"), "a list of [bytes, seconds] pairs, both > 0");
  c.alpha_us = ms(n, "alpha_us", ctx);
  c.bus_gbps = ms(n, "bus_gbps", ctx);
  if (c.bus_gbps <= 0 && !c.points.empty()) fit_curve(c);
  return c;
}

}  // namespace

void parse_tables(const YAML::Node& tables, const YAML::Node& collectives, const std::string& source,
                  Calibration& c) {
  const Ctx root{source, ""};
  c.tables = parse_list<ComputeTable>(tables, root.at("tables"), parse_table);
  c.collectives = parse_list<CollectiveCurve>(collectives, root.at("collectives"), parse_curve);
}

std::string format_tables(const Calibration& c) {
  std::string out;
  auto num = [](double v) { return fmt::format("{:.6g}", v); };
  if (!c.tables.empty()) out += "tables:\n";
  for (const ComputeTable& t : c.tables) {
    out += fmt::format("  - device: {{kind: {}, name: \"{}\"}}\n    precision: {}\n    model: \"{}\"\n", t.device_kind,
                       t.device_name, t.precision, t.model);
    out += fmt::format("    layers:{}\n", t.layers.empty() ? " []" : "");
    for (const LayerTime& l : t.layers)
      out += fmt::format("      - {{tp: {}, micro_batch: {}, seq_len: {}, recompute: {}, forward_ms: {}, backward_ms: {}, "
                         "weights_ms: {}, backward_all_ms: {}}}\n", l.tp, l.micro_batch, l.seq_len, l.recompute,
                         num(l.forward_ms), num(l.backward_ms), num(l.weights_ms), num(l.backward_all_ms));
    for (const auto& [key, edges] : {std::pair<const char*, const std::vector<EdgeTime>*>{"embedding", &t.embedding},
                                     {"head", &t.head}}) {
      out += fmt::format("    {}:{}\n", key, edges->empty() ? " []" : "");
      for (const EdgeTime& e : *edges)
        out += fmt::format("      - {{tp: {}, micro_batch: {}, seq_len: {}, forward_ms: {}, backward_ms: {}, weights_ms: {}}}\n",
                           e.tp, e.micro_batch, e.seq_len, num(e.forward_ms), num(e.backward_ms), num(e.weights_ms));
    }
    out += fmt::format("    gemms:{}\n", t.gemms.empty() ? " []" : "");
    for (const GemmTime& g : t.gemms)
      out += fmt::format("      - {{name: {}, tp: {}, m: {}, n: {}, k: {}, forward_ms: {}, input_grad_ms: {}, "
                         "weight_grad_ms: {}}}\n", g.name, g.tp, g.m, g.n, g.k, num(g.forward_ms), num(g.input_grad_ms),
                         num(g.weight_grad_ms));
    out += fmt::format("    attention:{}\n", t.attention.empty() ? " []" : "");
    for (const AttentionTime& a : t.attention)
      out += fmt::format("      - {{tp: {}, micro_batch: {}, seq_len: {}, forward_ms: {}, backward_ms: {}}}\n", a.tp,
                         a.micro_batch, a.seq_len, num(a.forward_ms), num(a.backward_ms));
    out += fmt::format("    optimizer_ns_per_param: {}\n    copy_gbps: {}\n", num(t.optimizer_ns_per_param),
                       num(t.copy_gbps));
    if (t.upload_gbps > 0 || t.download_gbps > 0 || t.launch_us > 0)
      out += fmt::format("    upload_gbps: {}\n    download_gbps: {}\n    launch_us: {}\n", num(t.upload_gbps),
                         num(t.download_gbps), num(t.launch_us));
  }
  if (!c.collectives.empty()) out += "collectives:\n";
  for (const CollectiveCurve& k : c.collectives) {
    std::string pts;
    for (const auto& [b, s] : k.points) pts += fmt::format("{}[{}, {}]", pts.empty() ? "" : ", ", num(b), num(s));
    out += fmt::format("  - {{device: \"{}\", link: {}, {}transport: {}, op: {}, ranks: {}, alpha_us: {}, bus_gbps: {}, "
                       "points: [{}]}}\n", k.device, k.link, k.intra.empty() ? "" : fmt::format("intra: {}, ", k.intra),
                       k.transport, k.op, k.ranks, num(k.alpha_us), num(k.bus_gbps), pts);
  }
  return out;
}

}  // namespace holmes::topo
