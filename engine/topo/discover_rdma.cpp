// RDMA ports from <root>/sys/class/infiniband/<dev>/ports/<p>/:
//   link_layer  "InfiniBand" -> ib, "Ethernet" -> roce
//   state       "4: ACTIVE" is usable, anything else is down
//   rate        "200 Gb/sec (4X HDR)"
//   gids/<i>    128-bit GID "fe80:0000:0000:0000:0e42:a1ff:fe00:0001"; IB: GID 0's upper 64 bits
//               are the subnet prefix (the fabric); RoCE: an IPv4-mapped GID ends ":ffff:0a02:000b"
//   gid_attrs/types/<i>  "IB/RoCE v1" or "RoCE v2";  gid_attrs/ndevs/<i>  the carrying netdev
#include <fmt/format.h>

#include <optional>
#include <regex>

#include "common/errors.hpp"
#include "engine/topo/discover_parts.hpp"
#include "engine/topo/sysfs.hpp"

namespace holmes::topo::detail {

namespace {

namespace fs = std::filesystem;

struct Gid {
  int index = 0;
  int version = 1;       // RoCE v1 or v2
  std::string ipv4;      // "10.2.0.11" when the GID is IPv4-mapped, else ""
  std::string netdev;
};

// Splits a GID into its 8 groups of 4 hex digits; throws naming the file when malformed.
std::vector<std::string> gid_groups(const std::string& text, const fs::path& file) {
  static const std::regex kGid(R"(^[0-9a-fA-F]{4}(:[0-9a-fA-F]{4}){7}$)");
  if (!std::regex_match(text, kGid))
    throw UserError(fmt::format("{}: expected a GID of 8 groups of 4 hex digits "
                                "(fe80:0000:0000:0000:0e42:a1ff:fe00:0001), found '{}'",
                                file.string(), text));
  std::vector<std::string> groups;
  for (size_t i = 0; i < 8; ++i) groups.push_back(text.substr(i * 5, 4));
  for (auto& g : groups)
    for (auto& c : g) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return groups;
}

std::string ipv4_of_gid(const std::vector<std::string>& g) {
  for (int i = 0; i < 5; ++i)
    if (g[i] != "0000") return "";
  if (g[5] != "ffff") return "";
  unsigned hi = std::stoul(g[6], nullptr, 16), lo = std::stoul(g[7], nullptr, 16);
  return fmt::format("{}.{}.{}.{}", hi >> 8, hi & 255, lo >> 8, lo & 255);
}

// The populated GIDs of a RoCE port. Unpopulated slots read as EINVAL (or all zeros).
std::vector<Gid> read_roce_gids(const fs::path& port) {
  std::vector<Gid> gids;
  for (const auto& name : sysfs::list_dir(port / "gid_attrs" / "types")) {
    fs::path type_file = port / "gid_attrs" / "types" / name;
    auto type = sysfs::read_line(type_file);
    if (!type || type->empty()) continue;
    Gid gid;
    gid.index = static_cast<int>(sysfs::parse_int(name, type_file, "a numeric GID index as file name"));
    if (*type == "RoCE v2") gid.version = 2;
    else if (*type == "IB/RoCE v1" || *type == "RoCE v1") gid.version = 1;
    else
      throw UserError(fmt::format("{}: expected 'IB/RoCE v1' or 'RoCE v2', found '{}'", type_file.string(), *type));
    fs::path gid_file = port / "gids" / name;
    if (auto text = sysfs::read_line(gid_file)) {
      auto groups = gid_groups(*text, gid_file);
      if (*text == "0000:0000:0000:0000:0000:0000:0000:0000") continue;
      gid.ipv4 = ipv4_of_gid(groups);
    }
    gid.netdev = sysfs::read_line(port / "gid_attrs" / "ndevs" / name).value_or("");
    gids.push_back(gid);
  }
  return gids;
}

// Preference: RoCE v2 with an IPv4 address, then any v2, then v1 with IPv4, then v1 (the GID
// NCCL picks on its own when NCCL_IB_GID_INDEX is unset is of the first kind).
const Gid* pick_gid(const std::vector<Gid>& gids) {
  auto score = [](const Gid& g) { return (g.version == 2 ? 0 : 2) + (g.ipv4.empty() ? 1 : 0); };
  const Gid* best = nullptr;
  for (const auto& g : gids)
    if (!best || score(g) < score(*best)) best = &g;
  return best;
}

// RoCE fabric: the IPv4 subnet of the chosen GID's address on its netdev.
std::string roce_fabric(const Gid& gid, const AddressMap& addresses) {
  auto it = addresses.find(gid.netdev);
  if (it == addresses.end()) return "";
  for (const auto& cidr : it->second)
    if (cidr.substr(0, cidr.find('/')) == gid.ipv4) return ipv4_subnet(cidr, "address of " + gid.netdev);
  return gid.ipv4.empty() ? subnet_of(addresses, gid.netdev) : "";
}

void fill_roce(Nic& nic, const fs::path& port, const AddressMap& addresses, std::set<std::string>& netdevs) {
  auto gids = read_roce_gids(port);
  for (const auto& g : gids)
    if (!g.netdev.empty()) netdevs.insert(g.netdev);
  const Gid* best = pick_gid(gids);
  if (!best) return;  // a RoCE port without GIDs: no IP on it, fabric unknown
  nic.roce_version = best->version;
  nic.gid_index = best->index;
  nic.netdev = best->netdev;
  nic.fabric = roce_fabric(*best, addresses);
  if (auto it = addresses.find(best->netdev); it != addresses.end()) nic.addresses = it->second;
}

// nullopt for a port whose link layer the kernel calls "Unknown" (e.g. AWS EFA): it is
// neither IB nor RoCE, so NCCL's IB transport cannot use it.
std::optional<Nic> read_port(const fs::path& dev, const std::string& port_name, const AddressMap& addresses,
                             std::set<std::string>& roce_netdevs) {
  fs::path port = dev / "ports" / port_name;
  Nic nic;
  nic.name = dev.filename().string();
  nic.port = static_cast<int>(sysfs::parse_int(port_name, port, "a numeric port folder"));
  fs::path ll_file = port / "link_layer";
  std::string ll = sysfs::read_required(ll_file, "'InfiniBand' or 'Ethernet'");
  if (ll == "Unknown") return std::nullopt;
  if (ll == "InfiniBand") nic.kind = NicKind::kIb;
  else if (ll == "Ethernet") nic.kind = NicKind::kRoce;
  else throw UserError(fmt::format("{}: expected 'InfiniBand', 'Ethernet' or 'Unknown', found '{}'", ll_file.string(), ll));
  std::string state = sysfs::read_required(port / "state", "a port state such as '4: ACTIVE'");
  nic.active = state == "4: ACTIVE" || state == "ACTIVE";
  if (auto rate = sysfs::read_line(port / "rate")) nic.rate_gbps = sysfs::parse_ib_rate(*rate, port / "rate");
  nic.pci = sysfs::pci_address_of(dev / "device");
  if (auto numa = sysfs::read_line(dev / "device" / "numa_node"))
    nic.numa_node = static_cast<int>(sysfs::parse_int(*numa, dev / "device" / "numa_node", "a NUMA node number"));
  nic.is_virtual = !fs::exists(dev / "device");
  if (nic.kind == NicKind::kIb) {
    fs::path gid0 = port / "gids" / "0";
    if (auto text = sysfs::read_line(gid0)) {
      auto g = gid_groups(*text, gid0);
      nic.fabric = fmt::format("{}:{}:{}:{}", g[0], g[1], g[2], g[3]);
    }
  } else {
    fill_roce(nic, port, addresses, roce_netdevs);
  }
  return nic;
}

}  // namespace

std::vector<Nic> discover_rdma_ports(const fs::path& root, const AddressMap& addresses,
                                     std::set<std::string>& roce_netdevs) {
  std::vector<Nic> nics;
  fs::path cls = root / "sys" / "class" / "infiniband";
  for (const auto& dev : sysfs::list_dir(cls))
    for (const auto& port : sysfs::list_dir(cls / dev / "ports"))
      if (auto nic = read_port(cls / dev, port, addresses, roce_netdevs)) nics.push_back(std::move(*nic));
  return nics;
}

}  // namespace holmes::topo::detail
