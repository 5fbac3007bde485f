#include "engine/topo/topology_file.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <fstream>
#include <type_traits>
#include <map>
#include <set>
#include <sstream>

#include "engine/spec/errors.hpp"
#include "engine/topo/discover.hpp"
#include "engine/topo/hostlist.hpp"
#include "engine/topo/yaml_read.hpp"

namespace holmes::topo {

namespace {

using namespace yaml_read;

Devices parse_devices(const YAML::Node& n, const Ctx& ctx) {
  check_keys(n, ctx, {"kind", "count", "name", "memory_gb", "peak_tflops", "cores"});
  Devices d;
  d.kind = get<std::string>(n, "kind", ctx, "cpu", "'cuda' or 'cpu'");
  if (d.kind != "cuda" && d.kind != "cpu") ctx.at("kind").fail(n["kind"], fmt::format("expected 'cuda' or 'cpu', found '{}'", d.kind));
  d.count = get<int>(n, "count", ctx, 1, "a whole number >= 1");
  if (d.count < 1) ctx.at("count").fail(n["count"], fmt::format("expected a whole number >= 1, found {}", d.count));
  d.name = get<std::string>(n, "name", ctx, "", "a text");
  d.memory_gb = get<double>(n, "memory_gb", ctx, 0.0, "a number of GB");
  d.peak_tflops = get<double>(n, "peak_tflops", ctx, 0.0, "a number of TFLOP/s");
  d.cores = get<int>(n, "cores", ctx, 0, "a whole number");
  if (d.memory_gb < 0 || d.peak_tflops < 0 || d.cores < 0) ctx.fail(n, "memory_gb, peak_tflops and cores must be >= 0");
  return d;
}

// Hostlist or address checks throw UserError without the file; say where the value was.
std::vector<std::string> expand_at(const YAML::Node& v, const Ctx& ctx) {
  try {
    return expand_hostlist(v.Scalar());
  } catch (const UserError& e) {
    ctx.fail(v, e.what());
  }
}

std::vector<std::string> parse_strings(const YAML::Node& n, const Ctx& ctx) {
  std::vector<std::string> out;
  if (!n.IsDefined() || n.IsNull()) return out;
  if (!n.IsSequence()) ctx.fail(n, fmt::format("expected a list, found {}", describe(n)));
  for (size_t i = 0; i < n.size(); ++i) {
    if (!n[i].IsScalar()) ctx.item(i).fail(n[i], fmt::format("expected a text, found {}", describe(n[i])));
    out.push_back(n[i].Scalar());
  }
  return out;
}

// One NIC entry -> `count` NICs. `next_index[kind]` numbers generated names per node.
std::vector<Nic> parse_nic(const YAML::Node& n, const Ctx& ctx, std::map<NicKind, int>& next_index) {
  check_keys(n, ctx, {"name", "kind", "count", "state", "rate_gbps", "port", "netdev", "fabric", "numa_node", "pci",
                      "virtual", "roce_version", "gid_index", "addresses"});
  Nic proto;
  std::string kind = get<std::string>(n, "kind", ctx, "", "ib, roce, ethernet, ipoib or loopback");
  auto k = nic_kind_from_string(kind);
  if (!k) ctx.at("kind").fail(n["kind"], fmt::format("expected ib, roce, ethernet, ipoib or loopback, found '{}'", kind));
  proto.kind = *k;
  bool rdma = proto.kind == NicKind::Ib || proto.kind == NicKind::Roce;
  std::string state = get<std::string>(n, "state", ctx, "active", "'active' or 'down'");
  if (state != "active" && state != "down") ctx.at("state").fail(n["state"], fmt::format("expected 'active' or 'down', found '{}'", state));
  proto.active = state == "active";
  if (n["rate_gbps"].IsDefined() && !n["rate_gbps"].IsNull()) {
    proto.rate_gbps = get<double>(n, "rate_gbps", ctx, 0.0, "a number of Gb/s or null");
    if (*proto.rate_gbps <= 0) ctx.at("rate_gbps").fail(n["rate_gbps"], "expected a positive number of Gb/s or null (unknown)");
  }
  proto.port = get<int>(n, "port", ctx, rdma ? 1 : 0, "a port number");
  proto.fabric = get<std::string>(n, "fabric", ctx, "", "a fabric name");
  proto.numa_node = get<int>(n, "numa_node", ctx, -1, "a NUMA node number");
  proto.pci = get<std::string>(n, "pci", ctx, "", "a PCI address");
  proto.is_virtual = get<bool>(n, "virtual", ctx, false, "true or false");
  proto.roce_version = get<int>(n, "roce_version", ctx, proto.kind == NicKind::Roce ? 2 : 0, "1 or 2");
  proto.gid_index = get<int>(n, "gid_index", ctx, -1, "a GID index");
  proto.addresses = parse_strings(n["addresses"], ctx.at("addresses"));
  for (size_t i = 0; i < proto.addresses.size(); ++i) {
    try {
      ipv4_subnet(proto.addresses[i], "address");
    } catch (const UserError& e) {
      ctx.at("addresses").item(i).fail(n["addresses"][i], e.what());
    }
  }
  int count = get<int>(n, "count", ctx, 0, "a whole number >= 1");
  std::vector<std::string> names;
  if (n["name"].IsDefined()) {
    get<std::string>(n, "name", ctx, "", "a name");  // type check
    names = expand_at(n["name"], ctx.at("name"));
  }
  if (n["count"].IsDefined() && count < 1) ctx.at("count").fail(n["count"], fmt::format("expected a whole number >= 1, found {}", count));
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

void parse_node(const YAML::Node& n, const Ctx& ctx, std::vector<NodeReport>& out) {
  check_keys(n, ctx, {"names", "devices", "nics"});
  if (!n["names"].IsDefined()) ctx.fail(n, "missing key 'names' (a hostlist such as 'node[0-3]')");
  if (!n["devices"].IsDefined()) ctx.fail(n, "missing key 'devices' (kind, count, name, memory_gb, peak_tflops)");
  get<std::string>(n, "names", ctx, "", "a hostlist such as 'node[0-3]'");  // type check
  auto hosts = expand_at(n["names"], ctx.at("names"));
  NodeReport proto;
  proto.devices = parse_devices(n["devices"], ctx.at("devices"));
  YAML::Node nics = n["nics"];
  if (nics.IsDefined() && !nics.IsNull() && !nics.IsSequence()) ctx.at("nics").fail(nics, fmt::format("expected a list, found {}", describe(nics)));
  std::map<NicKind, int> next_index;
  // A missing key yields an invalid node whose type queries throw: test IsDefined first.
  for (size_t i = 0; nics.IsDefined() && nics.IsSequence() && i < nics.size(); ++i) {
    Ctx nctx = ctx.at("nics").item(i);
    for (auto& nic : parse_nic(nics[i], nctx, next_index)) {
      if (hosts.size() > 1 && !nic.addresses.empty())
        nctx.at("addresses").fail(nics[i]["addresses"], "addresses belong to one host; give them only in an entry whose names is a single host");
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
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw UserError(fmt::format("{}:{}: not valid YAML: {}", source, e.mark.line + 1, e.msg));
  }
  Ctx ctx{source, ""};
  if (!root.IsMap()) throw UserError(fmt::format("{}: expected a mapping with a 'nodes' list, found {}", source, describe(root)));
  check_keys(root, ctx, {"nodes"});
  YAML::Node nodes = root["nodes"];
  if (!nodes.IsSequence() || nodes.size() == 0)
    ctx.at("nodes").fail(nodes.IsDefined() ? nodes : root, "expected a non-empty list of node entries");
  std::vector<NodeReport> out;
  for (size_t i = 0; i < nodes.size(); ++i) parse_node(nodes[i], ctx.at("nodes").item(i), out);
  std::set<std::string> seen;
  for (const auto& r : out)
    if (!seen.insert(r.hostname).second)
      throw UserError(fmt::format("{}: host '{}' is named by more than one node entry", source, r.hostname));
  return out;
}

std::vector<NodeReport> load_topology_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UserError(fmt::format("cannot read topology file '{}'", path));
  std::stringstream text;
  text << in.rdbuf();
  return parse_topology_yaml(text.str(), path);
}

}  // namespace holmes::topo
