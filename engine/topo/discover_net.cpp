// Network interfaces from <root>/sys/class/net/<if>/:
//   type       ARPHRD number: 1 Ethernet, 32 IPoIB (InfiniBand), 772 loopback; others skipped
//   operstate  "up" is usable; "unknown" (loopback, some virtual drivers) counts as up when
//              the IFF_UP bit of `flags` is set
//   speed      Mb/s; "-1", an unreadable file (EINVAL while down) -> rate unknown
//   device     link to the hardware; its absence marks a virtual interface (bridge, veth, bond)
#include <fmt/format.h>

#include "common/errors.hpp"
#include "engine/topo/discover_parts.hpp"
#include "engine/topo/sysfs.hpp"

namespace holmes::topo::detail {

namespace {

namespace fs = std::filesystem;

constexpr long kArphrdEther = 1;
constexpr long kArphrdInfiniband = 32;
constexpr long kArphrdLoopback = 772;
constexpr long kIffUp = 0x1;

bool interface_up(const fs::path& dir) {
  std::string state = sysfs::read_line(dir / "operstate").value_or("unknown");
  if (state == "up") return true;
  if (state != "unknown") return false;
  auto flags = sysfs::read_line(dir / "flags");
  if (!flags) return false;
  long value = 0;
  try {
    value = std::stol(*flags, nullptr, 0);  // "0x1003"
  } catch (const std::exception&) {
    throw UserError(fmt::format("{}: expected interface flags such as '0x1003', found '{}'",
                                (dir / "flags").string(), *flags));
  }
  return (value & kIffUp) != 0;
}

std::optional<double> interface_rate(const fs::path& dir) {
  fs::path file = dir / "speed";
  auto text = sysfs::read_line(file);
  if (!text) return std::nullopt;
  long mbps = sysfs::parse_int(*text, file, "a speed in Mb/s such as '25000' (or -1 when unknown)");
  if (mbps <= 0) return std::nullopt;  // -1 (and 0 from some drivers) mean the driver does not know
  return static_cast<double>(mbps) / 1000.0;
}

}  // namespace

std::vector<Nic> discover_interfaces(const fs::path& root, const AddressMap& addresses,
                                     const std::set<std::string>& skip) {
  std::vector<Nic> nics;
  fs::path cls = root / "sys" / "class" / "net";
  for (const auto& name : sysfs::list_dir(cls)) {
    fs::path dir = cls / name;
    std::error_code ec;
    if (!fs::is_directory(dir, ec) || skip.count(name)) continue;  // bonding_masters is a file
    fs::path type_file = dir / "type";
    long type = sysfs::parse_int(sysfs::read_required(type_file, "an ARPHRD number such as 1"), type_file,
                                 "an ARPHRD number (1 Ethernet, 32 InfiniBand, 772 loopback)");
    Nic nic;
    if (type == kArphrdEther) nic.kind = NicKind::kEthernet;
    else if (type == kArphrdInfiniband) nic.kind = NicKind::kIpoib;
    else if (type == kArphrdLoopback) nic.kind = NicKind::kLoopback;
    else continue;  // tunnels, CAN, ...: no use for training traffic
    nic.name = name;
    nic.netdev = name;
    nic.active = interface_up(dir);
    nic.rate_gbps = interface_rate(dir);
    nic.is_virtual = !fs::exists(dir / "device");
    if (!nic.is_virtual) {
      nic.pci = sysfs::pci_address_of(dir / "device");
      if (auto numa = sysfs::read_line(dir / "device" / "numa_node"))
        nic.numa_node = static_cast<int>(sysfs::parse_int(*numa, dir / "device" / "numa_node", "a NUMA node number"));
    }
    if (auto it = addresses.find(name); it != addresses.end()) nic.addresses = it->second;
    nic.fabric = subnet_of(addresses, name);
    nics.push_back(std::move(nic));
  }
  return nics;
}

std::string subnet_of(const AddressMap& addresses, const std::string& netdev) {
  auto it = addresses.find(netdev);
  if (it == addresses.end() || it->second.empty()) return "";
  return ipv4_subnet(it->second.front(), "address of " + netdev);
}

}  // namespace holmes::topo::detail
