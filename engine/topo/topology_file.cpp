#include "engine/topo/topology_file.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <type_traits>

#include "common/errors.hpp"
#include "engine/spec/yaml_text.hpp"
#include "engine/topo/discover.hpp"
#include "engine/topo/errors.hpp"
#include "engine/topo/hostlist.hpp"
#include "engine/topo/yaml_read.hpp"

namespace holmes::topo {

namespace {

// Where a value sits, and where its problems go: like the job-spec loader, every problem is
// collected with file, line, column and key path ('nodes[0].nics[1].rate_gbps'), and the file
// is refused once with all of them. After a problem the parse goes on with a fallback value.
struct Ctx {
  const std::string& source;
  std::vector<ConfigIssue>& issues;
  std::string path;

  Ctx at(const std::string& key) const { return {source, issues, path.empty() ? key : path + "." + key}; }
  Ctx item(size_t i) const { return {source, issues, fmt::format("{}[{}]", path, i)}; }
  void fail(const YAML::Node& node, const std::string& what) const {
    const bool known = node.IsDefined() && node.Mark().line >= 0;
    issues.push_back({source, path, known ? node.Mark().line + 1 : 0, known ? node.Mark().column + 1 : 0, what});
  }
};

std::string describe(const YAML::Node& n) {
  if (!n.IsDefined() || n.IsNull()) return "nothing";
  if (n.IsScalar()) return fmt::format("'{}'", n.Scalar());
  if (n.IsSequence()) return "a list";
  return "a mapping";
}

bool given(const YAML::Node& map, const char* key) { return map[key].IsDefined() && !map[key].IsNull(); }

// False (and a problem recorded) when `map` is not a mapping; unknown keys are recorded too.
bool check_keys(const YAML::Node& map, const Ctx& ctx, const std::set<std::string>& allowed) {
  if (!map.IsMap()) {
    ctx.fail(map, fmt::format("expected a mapping, found {}", describe(map)));
    return false;
  }
  for (const auto& kv : map) {
    std::string key = kv.first.Scalar();
    if (!allowed.count(key))
      ctx.at(key).fail(kv.first, fmt::format("unknown key '{}'; accepted: {}", key, fmt::join(allowed, ", ")));
  }
  return true;
}

template <typename T>
std::optional<T> scalar_as(const YAML::Node& v) {
  if (!v.IsScalar()) return std::nullopt;
  try {
    T value = v.as<T>();
    if constexpr (std::is_floating_point_v<T>)
      if (!std::isfinite(value)) return std::nullopt;  // .nan / .inf
    return value;
  } catch (const YAML::Exception&) {
    return std::nullopt;
  }
}

// A text or boolean under `key`; `fallback` when absent or (after recording the problem) wrong.
template <typename T>
T get(const YAML::Node& map, const char* key, const Ctx& ctx, T fallback, const char* expected) {
  if (!given(map, key)) return fallback;
  if (auto value = scalar_as<T>(map[key])) return *value;
  ctx.at(key).fail(map[key], fmt::format("expected {}, found {}", expected, describe(map[key])));
  return fallback;
}

// Accepted numbers: [lo, hi], or (lo, hi] when lo_open; hi = kNoUpper for no upper bound.
constexpr double kNoUpper = std::numeric_limits<double>::infinity();
struct Range {
  double lo;
  double hi = kNoUpper;
  bool lo_open = false;
};

std::string range_text(const char* what, Range r) {
  if (r.hi == kNoUpper) return fmt::format("{} {} {}", what, r.lo_open ? ">" : ">=", r.lo);
  return fmt::format("{} in {}{}, {}]", what, r.lo_open ? "(" : "[", r.lo, r.hi);
}

// A number under `key` in `range`; every rejection names the value seen and the range.
template <typename T>
T number(const YAML::Node& map, const char* key, const Ctx& ctx, T fallback, const char* what, Range range,
         const char* or_else = "") {
  if (!given(map, key)) return fallback;
  const std::string expected = range_text(what, range) + or_else;
  auto value = scalar_as<T>(map[key]);
  if (!value) {
    ctx.at(key).fail(map[key], fmt::format("expected {}, found {}", expected, describe(map[key])));
    return fallback;
  }
  const double x = static_cast<double>(*value);
  if (x < range.lo || (range.lo_open && x == range.lo) || x > range.hi) {
    ctx.at(key).fail(map[key], fmt::format("expected {}, found {}", expected, *value));
    return fallback;
  }
  return *value;
}

Devices parse_devices(const YAML::Node& n, const Ctx& ctx) {
  Devices d;
  if (!check_keys(n, ctx, {"kind", "count", "name", "memory_gb", "peak_tflops", "cores", "cpu_quota_cores", "cpu_quota_period_ms", "machine", "machine_cores", "nccl", "per_gpu", "intra_node"})) return d;
  d.kind = get<std::string>(n, "kind", ctx, "cpu", "'cuda' or 'cpu'");
  if (d.kind != "cuda" && d.kind != "cpu") {
    ctx.at("kind").fail(n["kind"], fmt::format("expected 'cuda' or 'cpu', found '{}'", d.kind));
    d.kind = "cpu";
  }
  d.count = number<int>(n, "count", ctx, 1, "a whole number", {1});
  d.name = get<std::string>(n, "name", ctx, "", "a text");
  d.memory_gb = number<double>(n, "memory_gb", ctx, 0.0, "a number of GB", {0});
  d.peak_tflops = number<double>(n, "peak_tflops", ctx, 0.0, "a number of TFLOP/s", {0});
  d.cores = number<int>(n, "cores", ctx, 0, "a whole number", {0});
  d.cpu_quota_cores = number<double>(n, "cpu_quota_cores", ctx, 0.0, "a number of cores (0 = no quota)", {0});
  // cgroup v2 accepts periods of 1 ms to 1 s.
  d.cpu_quota_period_ms = number<double>(n, "cpu_quota_period_ms", ctx, 100.0, "a period in ms", {1, 1000});
  d.machine = get<std::string>(n, "machine", ctx, "", "a text naming the machine");
  d.machine_cores = number<double>(n, "machine_cores", ctx, 0.0, "a number of cores", {0, kNoUpper, true});
  if (!d.machine.empty() && !n["machine_cores"].IsDefined())
    ctx.at("machine").fail(n["machine"], fmt::format("machine '{}' needs machine_cores (its cores, > 0) beside it",
                                                     d.machine));
  if (d.machine.empty() && n["machine_cores"].IsDefined())
    ctx.at("machine_cores").fail(n["machine_cores"], "machine_cores needs machine (the machine's name) beside it");
  // Host emulation keys describe CPU workers standing in for devices (plan/host_emulation.hpp):
  // a GPU node has none of them, and pricing one as if it had would be wrong without a word.
  if (d.kind == "cuda")
    for (const char* key : kHostEmulationKeys)
      if (given(n, key))
        ctx.at(key).fail(n[key], fmt::format("{} describes an emulated CPU node (a CPU quota or a machine shared by "
                                             "emulated nodes); a cuda node cannot declare it; accepted on kind cpu only",
                                             key));
  d.intra_node = get<std::string>(n, "intra_node", ctx, "", "an intra-node class");
  if (given(n, "intra_node")) {
    const bool gpu_class = std::find(std::begin(kGpuIntraClasses), std::end(kGpuIntraClasses), d.intra_node) !=
                           std::end(kGpuIntraClasses);
    if (d.kind == "cuda" && !gpu_class)
      ctx.at("intra_node").fail(n["intra_node"], fmt::format("expected nvswitch, nvlink or pcie for a cuda node, found "
                                                             "'{}'", d.intra_node));
    if (d.kind == "cpu" && d.intra_node != kCpuIntraClass)
      ctx.at("intra_node").fail(n["intra_node"], fmt::format("expected shm for a cpu node (its processes share "
                                                             "memory), found '{}'", d.intra_node));
  }
  // GPU nodes of a cluster are assumed to have NCCL unless the file says not.
  d.nccl = get<bool>(n, "nccl", ctx, true, "true or false");
  d.per_gpu = number<int>(n, "per_gpu", ctx, 1, "a whole number of workers per GPU", {1, 64});
  return d;
}

// Hostlist or address checks throw UserError without the file; say where the value was.
std::vector<std::string> expand_at(const YAML::Node& v, const Ctx& ctx) {
  if (!v.IsScalar()) return {};  // the type problem is recorded by the caller
  try {
    return expand_hostlist(v.Scalar());
  } catch (const UserError& e) {
    ctx.fail(v, e.what());
    return {};
  }
}

std::vector<std::string> parse_strings(const YAML::Node& n, const Ctx& ctx) {
  std::vector<std::string> out;
  if (!n.IsDefined() || n.IsNull()) return out;
  if (!n.IsSequence()) {
    ctx.fail(n, fmt::format("expected a list, found {}", describe(n)));
    return out;
  }
  for (size_t i = 0; i < n.size(); ++i) {
    if (n[i].IsScalar()) out.push_back(n[i].Scalar());
    else ctx.item(i).fail(n[i], fmt::format("expected a text, found {}", describe(n[i])));
  }
  return out;
}

// The NIC fields shared by every port of one entry.
Nic parse_nic_fields(const YAML::Node& n, const Ctx& ctx, const std::string& kind) {
  Nic proto;
  auto k = nic_kind_from_string(kind);
  if (!k) ctx.at("kind").fail(n["kind"], fmt::format("expected ib, roce, ethernet, ipoib or loopback, found '{}'", kind));
  proto.kind = k.value_or(NicKind::kEthernet);
  const bool rdma = proto.kind == NicKind::kIb || proto.kind == NicKind::kRoce;
  std::string state = get<std::string>(n, "state", ctx, "active", "'active' or 'down'");
  if (state != "active" && state != "down")
    ctx.at("state").fail(n["state"], fmt::format("expected 'active' or 'down', found '{}'", state));
  proto.active = state != "down";
  if (given(n, "rate_gbps"))
    proto.rate_gbps =
        number<double>(n, "rate_gbps", ctx, 0.0, "a number of Gb/s", {0, kNoUpper, true}, " or ~ (unknown)");
  proto.port = number<int>(n, "port", ctx, rdma ? 1 : 0, "a port number", {0, 255});
  proto.fabric = get<std::string>(n, "fabric", ctx, "", "a fabric name");
  proto.numa_node = number<int>(n, "numa_node", ctx, -1, "a NUMA node number (-1 = unknown)", {-1});
  proto.pci = get<std::string>(n, "pci", ctx, "", "a PCI address");
  proto.is_virtual = get<bool>(n, "virtual", ctx, false, "true or false");
  proto.roce_version = number<int>(n, "roce_version", ctx, proto.kind == NicKind::kRoce ? 2 : 0,
                                   "a RoCE version (0 = not RoCE)", {0, 2});
  proto.gid_index = number<int>(n, "gid_index", ctx, -1, "a GID index (-1 = none)", {-1});
  proto.addresses = parse_strings(n["addresses"], ctx.at("addresses"));
  for (size_t i = 0; i < proto.addresses.size(); ++i) {
    try {
      ipv4_subnet(proto.addresses[i], "address");
    } catch (const UserError& e) {
      ctx.at("addresses").item(i).fail(n["addresses"][i], e.what());
    }
  }
  return proto;
}

// One NIC entry -> `count` NICs. `next_index[kind]` numbers generated names per node.
std::vector<Nic> parse_nic(const YAML::Node& n, const Ctx& ctx, std::map<NicKind, int>& next_index) {
  if (!check_keys(n, ctx, {"name", "kind", "count", "state", "rate_gbps", "port", "netdev", "fabric", "numa_node",
                           "pci", "virtual", "roce_version", "gid_index", "addresses"}))
    return {};
  if (!given(n, "kind")) ctx.fail(n, "missing key 'kind' (ib, roce, ethernet, ipoib or loopback)");
  const std::string kind = get<std::string>(n, "kind", ctx, "ethernet", "ib, roce, ethernet, ipoib or loopback");
  Nic proto = parse_nic_fields(n, ctx, kind);
  const bool rdma = proto.kind == NicKind::kIb || proto.kind == NicKind::kRoce;
  const int count = number<int>(n, "count", ctx, 0, "a whole number", {1});
  std::vector<std::string> names;
  if (given(n, "name")) {
    get<std::string>(n, "name", ctx, "", "a hostlist of port names such as 'mlx5_[0-7]'");  // type check
    names = expand_at(n["name"], ctx.at("name"));
  }
  if (names.empty())
    for (int i = 0; i < std::max(count, 1); ++i) names.push_back(fmt::format("{}{}", kind, next_index[proto.kind]++));
  else if (count > 0 && static_cast<int>(names.size()) != count)
    ctx.at("count").fail(n["count"], fmt::format("count {} but name '{}' names {} ports; give a range such as "
                                                 "'mlx5_[0-{}]' or drop count", count, n["name"].Scalar(), names.size(), count - 1));
  std::string netdev = get<std::string>(n, "netdev", ctx, "", "an interface name");
  std::vector<Nic> out;
  for (const auto& name : names) {
    Nic nic = proto;
    nic.name = name;
    nic.netdev = !netdev.empty() || rdma || n["netdev"].IsDefined() ? netdev : name;
    out.push_back(nic);
  }
  return out;
}

// One node entry -> one report per host it names; each host is kept with the entry's index.
void parse_node(const YAML::Node& n, const Ctx& ctx, std::vector<NodeReport>& out) {
  if (!check_keys(n, ctx, {"names", "devices", "nics"})) return;
  if (!given(n, "names")) ctx.fail(n, "missing key 'names' (a hostlist such as 'node[0-3]')");
  if (!given(n, "devices")) ctx.fail(n, "missing key 'devices' (kind, count, name, memory_gb, peak_tflops)");
  std::vector<std::string> hosts;
  if (given(n, "names")) {
    get<std::string>(n, "names", ctx, "", "a hostlist such as 'node[0-3]'");  // type check
    hosts = expand_at(n["names"], ctx.at("names"));
  }
  NodeReport proto;
  if (given(n, "devices")) proto.devices = parse_devices(n["devices"], ctx.at("devices"));
  YAML::Node nics = n["nics"];
  if (given(n, "nics") && !nics.IsSequence())
    ctx.at("nics").fail(nics, fmt::format("expected a list, found {}", describe(nics)));
  std::map<NicKind, int> next_index;
  // A missing key yields an invalid node whose type queries throw: test IsDefined first.
  for (size_t i = 0; nics.IsDefined() && nics.IsSequence() && i < nics.size(); ++i) {
    Ctx nctx = ctx.at("nics").item(i);
    for (auto& nic : parse_nic(nics[i], nctx, next_index)) {
      if (hosts.size() > 1 && !nic.addresses.empty()) {
        nctx.at("addresses").fail(nics[i]["addresses"], "addresses belong to one host; give them only in an entry "
                                                        "whose names is a single host");
        nic.addresses.clear();  // reported once per entry, not once per port
      }
      proto.nics.push_back(std::move(nic));
    }
  }
  for (const auto& h : hosts) {
    NodeReport r = proto;
    r.hostname = h;
    out.push_back(std::move(r));
  }
}

}  // namespace

std::vector<NodeReport> parse_topology_yaml(const std::string& text, const std::string& source) {
  std::vector<ConfigIssue> issues;
  auto refuse = [&] { return TopologyError(format_issues("invalid topology", issues)); };
  spec::YamlText parsed = spec::parse_yaml_text(text, source, "not valid YAML");
  issues = parsed.issues;  // a parse error, or keys given twice: refused with what else is wrong
  if (!parsed.parsed) throw refuse();
  YAML::Node root = parsed.root;  // a handle; non-const: a missing key reads as undefined, not invalid
  Ctx ctx{source, issues, ""};
  if (!root.IsMap()) {
    issues.push_back(
        {source, "", 0, 0, fmt::format("expected a mapping with a 'nodes' list, found {}", describe(root))});
    throw refuse();
  }
  check_keys(root, ctx, {"nodes"});
  YAML::Node nodes = root["nodes"];
  if (!nodes.IsSequence() || nodes.size() == 0)
    ctx.at("nodes").fail(nodes.IsDefined() ? nodes : root, "expected a non-empty list of node entries");
  std::vector<NodeReport> out;
  std::vector<size_t> entry_of;  // out[i] came from nodes[entry_of[i]]
  for (size_t i = 0; nodes.IsSequence() && i < nodes.size(); ++i) {
    parse_node(nodes[i], ctx.at("nodes").item(i), out);
    entry_of.resize(out.size(), i);
  }
  std::map<std::string, size_t> entry_naming;  // host -> the entry that named it first
  for (size_t i = 0; i < out.size(); ++i) {
    const auto [first, fresh] = entry_naming.emplace(out[i].hostname, entry_of[i]);
    if (fresh) continue;
    const YAML::Node names = nodes[entry_of[i]]["names"];
    ctx.at("nodes").item(entry_of[i]).at("names").fail(
        names, first->second == entry_of[i]
                   ? fmt::format("host '{}' is named twice in this entry's names ({}); accepted: each host once",
                                 out[i].hostname, describe(names))
                   : fmt::format("host '{}' is named by more than one node entry (nodes[{}] and nodes[{}]); accepted: "
                                 "each host in one entry", out[i].hostname, first->second, entry_of[i]));
  }
  // Nodes that name one machine share its cores: one figure for it.
  std::map<std::string, size_t> machine_first;  // machine -> the first node that names it
  for (size_t i = 0; i < out.size(); ++i) {
    const Devices& d = out[i].devices;
    if (d.machine.empty()) continue;
    const auto [first, fresh] = machine_first.emplace(d.machine, i);
    const Devices& f = out[first->second].devices;
    if (!fresh && f.machine_cores != d.machine_cores && f.machine_cores > 0 && d.machine_cores > 0) {
      const YAML::Node dev = nodes[entry_of[i]]["devices"];
      ctx.at("nodes").item(entry_of[i]).at("devices").at("machine_cores").fail(
          dev["machine_cores"], fmt::format("machine '{}' has {:g} cores here and {:g} at host '{}'; accepted: one "
                                            "figure per machine", d.machine, d.machine_cores, f.machine_cores,
                                            out[first->second].hostname));
    }
  }
  if (!issues.empty()) throw refuse();
  return out;
}

std::vector<NodeReport> load_topology_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw TopologyError(fmt::format("cannot read topology file '{}': {}", path, std::strerror(errno)));
  std::stringstream text;
  text << in.rdbuf();
  return parse_topology_yaml(text.str(), path);
}

}  // namespace holmes::topo
