#include "engine/topo/calibration.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "engine/spec/yaml_text.hpp"
#include "engine/topo/calibration_yaml.hpp"
#include "engine/topo/yaml_read.hpp"

namespace holmes::topo {

namespace {

using namespace yaml_read;

constexpr const char* kFormat = "holmes-calibration/2";
constexpr const char* kFormat1 = "holmes-calibration/1";  // before the device record: CPU jobs only

double non_negative(const YAML::Node& n, const char* key, const Ctx& ctx, const char* what) {
  const double v = get<double>(n, key, ctx, 0.0, what);
  if (v < 0) ctx.at(key).fail(n[key], fmt::format("expected {} >= 0, found {}", what, v));
  return v;
}

void parse_compute(const YAML::Node& n, const Ctx& ctx, Calibration& c) {
  check_keys(n, ctx, {"device_tflops", "declared_tflops", "update_ns_per_param", "cpu_tflops", "cpu_tensor", "host_comm_ns_per_byte",
                     "host_comm_steps_ns_per_byte", "host_comm_tp_ns_per_byte", "host_comm_us_per_message", "job_sum_hop_us", "host_us_per_step",
                     "stages"});
  c.device_tflops = non_negative(n, "device_tflops", ctx, "a number of TFLOP/s");
  c.declared_tflops = non_negative(n, "declared_tflops", ctx, "a number of TFLOP/s");
  c.update_ns_per_param = non_negative(n, "update_ns_per_param", ctx, "a number of nanoseconds");
  c.cpu_tflops = non_negative(n, "cpu_tflops", ctx, "a number of TFLOP/s");
  c.cpu_tensor = get<int>(n, "cpu_tensor", ctx, 0, "a tensor-parallel degree");
  if (c.cpu_tensor < 0)
    ctx.at("cpu_tensor").fail(n["cpu_tensor"], fmt::format("expected a tensor-parallel degree >= 1, found {}", c.cpu_tensor));
  c.host_comm_ns_per_byte = non_negative(n, "host_comm_ns_per_byte", ctx, "a number of nanoseconds per byte");
  c.host_comm_steps_ns_per_byte = non_negative(n, "host_comm_steps_ns_per_byte", ctx, "a number of nanoseconds per byte");
  c.host_comm_tp_ns_per_byte = non_negative(n, "host_comm_tp_ns_per_byte", ctx, "a number of nanoseconds per byte");
  c.job_sum_hop_us = non_negative(n, "job_sum_hop_us", ctx, "a number of microseconds");
  c.host_us_per_step = non_negative(n, "host_us_per_step", ctx, "a number of microseconds");
  c.host_comm_us_per_message = non_negative(n, "host_comm_us_per_message", ctx, "a number of microseconds");
  const YAML::Node stages = n["stages"];
  if (!stages.IsDefined() || stages.IsNull()) return;
  if (!stages.IsSequence()) ctx.at("stages").fail(stages, fmt::format("expected a list, found {}", describe(stages)));
  for (size_t i = 0; i < stages.size(); ++i) {
    const Ctx sctx = ctx.at("stages").item(i);
    check_keys(stages[i], sctx, {"stage", "layers", "tflops"});
    StageCalibration s;
    s.stage = get<int>(stages[i], "stage", sctx, 0, "a stage number");
    s.layers = get<int>(stages[i], "layers", sctx, 0, "a number of layers");
    s.tflops = non_negative(stages[i], "tflops", sctx, "a number of TFLOP/s");
    c.stages.push_back(s);
  }
}

void parse_links(const YAML::Node& n, const Ctx& ctx, Calibration& c) {
  const std::set<std::string> classes(std::begin(kCalibratedLinks), std::end(kCalibratedLinks));
  check_keys(n, ctx, classes);
  for (const auto& kv : n) {
    const std::string kind = kv.first.Scalar();
    const Ctx lctx = ctx.at(kind);
    const YAML::Node& l = kv.second;
    check_keys(l, lctx, {"efficiency", "latency_us", "gbps_per_rank", "declared_gbps_per_rank", "groups", "sizes",
                        "tp_sum_ms"});
    LinkCalibration lc;
    lc.efficiency = get<double>(l, "efficiency", lctx, 0.0, "a number > 0");
    if (lc.efficiency < 0 || (l["efficiency"].IsDefined() && lc.efficiency == 0))
      lctx.at("efficiency").fail(l["efficiency"], fmt::format("expected a number > 0, found {}", lc.efficiency));
    lc.latency_us = non_negative(l, "latency_us", lctx, "a number of microseconds");
    lc.gbps_per_rank = non_negative(l, "gbps_per_rank", lctx, "a number of Gb/s");
    lc.declared_gbps_per_rank = non_negative(l, "declared_gbps_per_rank", lctx, "a number of Gb/s");
    lc.groups = get<int>(l, "groups", lctx, 0, "a number of groups");
    lc.sizes = parse_points(l["sizes"], lctx.at("sizes"), "a list of [message bytes, efficiency] pairs, both > 0");
    lc.tp_sum_ms = non_negative(l, "tp_sum_ms", lctx, "a number of milliseconds");
    c.links[kind] = lc;
  }
}

}  // namespace

void parse_device_record(const YAML::Node& n, const Ctx& ctx, DeviceRecord& d) {
  check_keys(n, ctx, {"kind", "name", "driver", "cuda", "cublaslt", "cudnn", "nccl", "date"});
  d.kind = get<std::string>(n, "kind", ctx, "", "cpu or cuda");
  if (d.kind != "cpu" && d.kind != "cuda")
    ctx.at("kind").fail(n["kind"], fmt::format("expected cpu or cuda (the devices it was measured on), found '{}'",
                                               d.kind));
  d.name = get<std::string>(n, "name", ctx, "", "a device model");
  d.driver = get<std::string>(n, "driver", ctx, "", "a version");
  d.cuda = get<std::string>(n, "cuda", ctx, "", "a version");
  d.cublaslt = get<std::string>(n, "cublaslt", ctx, "", "a version");
  d.cudnn = get<std::string>(n, "cudnn", ctx, "", "a version");
  d.nccl = get<std::string>(n, "nccl", ctx, "", "a version");
  d.date = get<std::string>(n, "date", ctx, "", "a date");
}

std::vector<std::pair<double, double>> parse_points(const YAML::Node& n, const Ctx& ctx, const char* want) {
  std::vector<std::pair<double, double>> out;
  if (!n.IsDefined() || n.IsNull()) return out;
  if (!n.IsSequence()) ctx.fail(n, fmt::format("expected {}, found {}", want, describe(n)));
  for (size_t i = 0; i < n.size(); ++i) {
    const YAML::Node& pt = n[i];
    double x = 0, y = 0;
    bool ok = pt.IsSequence() && pt.size() == 2;
    try {
      if (ok) {
        x = pt[0].as<double>();
        y = pt[1].as<double>();
      }
    } catch (const YAML::Exception&) {
      ok = false;
    }
    if (!ok || !(x > 0) || !(y > 0) || !std::isfinite(x) || !std::isfinite(y))
      ctx.item(i).fail(pt, fmt::format("expected {}, found {}", want, describe(pt)));
    out.emplace_back(x, y);
  }
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

void parse_outer(const YAML::Node& n, const Ctx& ctx, Calibration& c) {
  check_keys(n, ctx, {"link", "efficiency", "exchange_ms", "syncs", "drift_ms"});
  OuterCalibration& o = c.outer;
  o.link = get<std::string>(n, "link", ctx, "", "a link class");
  if (std::find(std::begin(kCalibratedLinks), std::end(kCalibratedLinks), o.link) == std::end(kCalibratedLinks))
    ctx.at("link").fail(n["link"], fmt::format("expected one of intra-node, ib, roce, ethernet, found '{}'", o.link));
  o.efficiency = get<double>(n, "efficiency", ctx, 0.0, "a number > 0");
  if (!(o.efficiency > 0))
    ctx.at("efficiency").fail(n["efficiency"], fmt::format("expected a number > 0, found {}", o.efficiency));
  o.exchange_ms = non_negative(n, "exchange_ms", ctx, "a number of milliseconds");
  o.syncs = get<int>(n, "syncs", ctx, 0, "a number of exchanges");
  o.drift_ms = non_negative(n, "drift_ms", ctx, "a number of milliseconds");
}

}  // namespace

double efficiency_at(const LinkCalibration& l, double bytes) {
  const auto& pts = l.sizes;
  if (pts.empty() || bytes <= 0) return l.efficiency;
  if (bytes <= pts.front().first) return pts.front().second;
  if (bytes >= pts.back().first) {
    // Beyond the largest size measured: that message's time, and the bytes beyond it at the
    // declared rate (efficiency 1). What made the largest message slower or faster than the
    // rate is per message (a wait to be scheduled, a token bucket's burst), so a larger one
    // tends to the rate the link was declared at; held flat, a large data-parallel sum would be
    // priced at a small tensor sum's in-step efficiency (docs/results/cost-model-history.md).
    const auto& [b1, e1] = pts.back();
    if (e1 <= 0) return e1;
    return bytes / (b1 / e1 + (bytes - b1));
  }
  size_t i = 1;
  while (pts[i].first < bytes) ++i;
  const auto& [b0, e0] = pts[i - 1];
  const auto& [b1, e1] = pts[i];
  const double x = std::log(bytes / b0) / std::log(b1 / b0);
  return e0 + x * (e1 - e0);
}

Calibration parse_calibration_yaml(const std::string& text, const std::string& source) {
  const spec::YamlText parsed = spec::parse_yaml_text(text, source, "not valid YAML");
  if (!parsed.issues.empty()) throw UserError(format_issues("invalid calibration", parsed.issues));
  YAML::Node root = parsed.root;  // a handle; non-const: a missing key reads as undefined, not invalid
  const Ctx ctx{source, ""};
  if (!root.IsMap())
    throw UserError(fmt::format("{}: expected a calibration (a mapping with format: {}), found {}", source, kFormat,
                                describe(root)));
  check_keys(root, ctx, {"format", "source", "device", "compute", "links", "outer", "tables", "collectives"});
  const std::string format = get<std::string>(root, "format", ctx, "", kFormat);
  if (format != kFormat && format != kFormat1)
    ctx.at("format").fail(root["format"], fmt::format("expected {} (or {}), found '{}'", kFormat, kFormat1, format));
  Calibration c;
  c.source = get<std::string>(root, "source", ctx, "", "a text");
  if (format == kFormat1) {
    c.device.kind = "cpu";  // every format-1 file came from a CPU job
    if (root["device"].IsDefined()) ctx.at("device").fail(root["device"], fmt::format("{} has no device record; "
                                                                                       "accepted: format {}", kFormat1, kFormat));
  } else if (!root["device"].IsDefined() || !root["device"].IsMap()) {
    ctx.at("device").fail(root["device"].IsDefined() ? root["device"] : root,
                          "missing or not a mapping: a calibration says what it was measured on (device: {kind: cpu|cuda, "
                          "name, ...})");
  } else {
    parse_device_record(root["device"], ctx.at("device"), c.device);
  }
  if (root["compute"].IsDefined() && !root["compute"].IsNull()) parse_compute(root["compute"], ctx.at("compute"), c);
  if (root["links"].IsDefined() && !root["links"].IsNull()) parse_links(root["links"], ctx.at("links"), c);
  if (root["outer"].IsDefined() && !root["outer"].IsNull()) parse_outer(root["outer"], ctx.at("outer"), c);
  parse_tables(root["tables"], root["collectives"], source, c);
  return c;
}

Calibration load_calibration_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UserError(fmt::format("cluster.calibration: cannot read the calibration file '{}'", path));
  std::stringstream ss;
  ss << in.rdbuf();
  Calibration c = parse_calibration_yaml(ss.str(), path);
  c.file = path;
  return c;
}

std::string DeviceRecord::describe() const {
  return name.empty() ? fmt::format("{} devices", kind) : fmt::format("{} devices ('{}')", kind, name);
}

std::vector<std::string> DeviceRecord::names() const {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= name.size() && !name.empty()) {
    const size_t comma = name.find(", ", at);
    out.push_back(name.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (comma == std::string::npos) break;
    at = comma + 2;
  }
  return out;
}

void check_device_kind(const Calibration& cal, const std::string& plan_kind) {
  if (cal.device.kind.empty() || cal.device.kind == plan_kind) return;  // in memory (tests), or the same kind
  throw UserError(fmt::format(
      "cluster.calibration: {} was measured on {} and this plan runs on {} devices: figures measured on one kind of "
      "device are never applied to another (a CPU job's TCP rates and CPU times say nothing of NCCL or a GPU); "
      "calibrate on these devices (holmes-train calibrate, or cluster.calibrate in a job on them) or leave "
      "cluster.calibration out", cal.file.empty() ? std::string("the calibration") : "'" + cal.file + "'",
      cal.device.describe(), plan_kind));
}

namespace {

// A YAML double-quoted scalar of free text (quotes, backslashes and line breaks made harmless).
std::string quoted(std::string text) {
  std::replace_if(text.begin(), text.end(), [](char ch) { return ch == '"' || ch == '\\' || ch == '\n'; }, '\'');
  return "\"" + text + "\"";
}

}  // namespace

std::string format_calibration_yaml(const Calibration& c) {
  std::string out = fmt::format("# holmes-train calibration (docs/cost-model.md)\nformat: {}\nsource: {}\n", kFormat,
                                quoted(c.source));
  const DeviceRecord& d = c.device;
  out += fmt::format("device: {{kind: {}", d.kind.empty() ? "cpu" : d.kind);
  for (const auto& [key, value] : {std::pair<const char*, const std::string*>{"name", &d.name}, {"driver", &d.driver},
                                   {"cuda", &d.cuda}, {"cublaslt", &d.cublaslt}, {"cudnn", &d.cudnn},
                                   {"nccl", &d.nccl}, {"date", &d.date}})
    if (!value->empty()) out += fmt::format(", {}: {}", key, quoted(*value));
  out += "}\n";
  out += fmt::format("compute:\n  device_tflops: {}\n  declared_tflops: {}\n  update_ns_per_param: {}\n", c.device_tflops,
                     c.declared_tflops, c.update_ns_per_param);
  if (c.cpu_tflops > 0) out += fmt::format("  cpu_tflops: {}\n", c.cpu_tflops);
  if (c.cpu_tflops > 0 && c.cpu_tensor > 0) out += fmt::format("  cpu_tensor: {}\n", c.cpu_tensor);
  if (c.host_comm_ns_per_byte > 0) out += fmt::format("  host_comm_ns_per_byte: {}\n", c.host_comm_ns_per_byte);
  if (c.host_comm_steps_ns_per_byte > 0)
    out += fmt::format("  host_comm_steps_ns_per_byte: {}\n", c.host_comm_steps_ns_per_byte);
  if (c.host_comm_tp_ns_per_byte > 0) out += fmt::format("  host_comm_tp_ns_per_byte: {}\n", c.host_comm_tp_ns_per_byte);
  if (c.job_sum_hop_us > 0) out += fmt::format("  job_sum_hop_us: {}\n", c.job_sum_hop_us);
  if (c.host_us_per_step > 0) out += fmt::format("  host_us_per_step: {}\n", c.host_us_per_step);
  if (c.host_comm_us_per_message > 0) out += fmt::format("  host_comm_us_per_message: {}\n", c.host_comm_us_per_message);
  out += fmt::format("  stages:{}\n", c.stages.empty() ? " []" : "");
  for (const auto& s : c.stages)
    out += fmt::format("    - {{stage: {}, layers: {}, tflops: {}}}\n", s.stage, s.layers, s.tflops);
  out += fmt::format("links:{}\n", c.links.empty() ? " {}" : "");
  for (const auto& [kind, l] : c.links) {
    std::string sizes;
    for (const auto& [bytes, eff] : l.sizes) sizes += fmt::format("{}[{}, {}]", sizes.empty() ? "" : ", ", bytes, eff);
    out += fmt::format("  {}: {{efficiency: {}, latency_us: {}, gbps_per_rank: {}, declared_gbps_per_rank: {}, groups: {}{}{}}}\n",
                       kind, l.efficiency, l.latency_us, l.gbps_per_rank, l.declared_gbps_per_rank, l.groups,
                       l.sizes.empty() ? "" : fmt::format(", sizes: [{}]", sizes),
                       l.tp_sum_ms > 0 ? fmt::format(", tp_sum_ms: {}", l.tp_sum_ms) : "");
  }
  const OuterCalibration& o = c.outer;
  if (o.efficiency > 0)
    out += fmt::format("outer: {{link: {}, efficiency: {}, exchange_ms: {}, syncs: {}{}}}\n", o.link, o.efficiency,
                       o.exchange_ms, o.syncs, o.drift_ms > 0 ? fmt::format(", drift_ms: {}", o.drift_ms) : "");
  return out + format_tables(c);
}

}  // namespace holmes::topo
