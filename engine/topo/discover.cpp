#include "engine/topo/discover.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <regex>
#include <thread>

#include "common/errors.hpp"
#include "engine/topo/discover_parts.hpp"
#include "engine/topo/gpu_peaks.hpp"
#include "engine/topo/sysfs.hpp"

namespace holmes::topo {

namespace fs = std::filesystem;

namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    auto colon = line.find(':');
    if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
  }
  return "cpu";
}

double memory_gb() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kb = 0;
  while (in >> key >> kb) {
    if (key == "MemTotal:") return kb / (1024.0 * 1024.0);
    in.ignore(1 << 10, '\n');
  }
  return 0;
}

std::string hostname_of(const fs::path& root, bool real) {
  if (auto name = sysfs::read_line(root / "proc" / "sys" / "kernel" / "hostname"); name && !name->empty())
    return *name;
  char buf[256] = {};
  if (real && gethostname(buf, sizeof buf - 1) == 0) return buf;
  return "unknown";
}

}  // namespace

namespace {

// A sysfs hex figure ("0x10de", "0x068000"); UserError naming the file otherwise.
long read_hex(const std::string& text, const fs::path& file, const char* expected) {
  size_t used = 0;
  long v = -1;
  try {
    v = std::stol(text, &used, 16);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || v < 0)
    throw UserError(fmt::format("{}: expected {}, found '{}'", file.string(), expected, text));
  return v;
}

}  // namespace

std::string discover_intra_class(const std::string& sysfs_root, const Devices& devices) {
  if (devices.kind != "cuda") return "";  // CPU processes: shm, the default
  const fs::path bus = (sysfs_root.empty() ? fs::path("/") : fs::path(sysfs_root)) / "sys" / "bus" / "pci" / "devices";
  for (const std::string& dev : sysfs::list_dir(bus)) {
    const auto vendor = sysfs::read_line(bus / dev / "vendor");
    const auto cls = sysfs::read_line(bus / dev / "class");
    if (!vendor || !cls) continue;
    const long v = read_hex(*vendor, bus / dev / "vendor", "a PCI vendor id such as 0x10de");
    const long c = read_hex(*cls, bus / dev / "class", "a PCI class code such as 0x068000");
    // Every NVSwitch enumerates as an NVIDIA bridge of the "other" kind (class 0x0680).
    if (v == 0x10de && (c >> 8) == 0x0680) return "nvswitch";
  }
  if (devices.nvlinks > 0) return "nvlink";
  if (devices.nvlinks == 0) return "pcie";
  return "";  // the bus shows no switch and the driver was not asked: not said
}

Devices detect_cpu_devices() {
  Devices d;
  d.kind = "cpu";
  d.count = 1;
  d.name = cpu_model();
  d.memory_gb = memory_gb();
  cpu_set_t set;
  CPU_ZERO(&set);
  // Cores this process may run on (a container or taskset may give fewer than the machine has).
  d.cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set)
                                                        : static_cast<int>(std::thread::hardware_concurrency());
  return d;
}

std::string ipv4_subnet(const std::string& cidr, const std::string& where) {
  static const std::regex kCidr(R"(^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})/(\d{1,2})$)");
  std::smatch m;
  bool ok = std::regex_match(cidr, m, kCidr);
  unsigned ip = 0;
  for (int i = 1; ok && i <= 4; ++i) {
    int octet = std::stoi(m[i].str());
    ok = octet <= 255;
    ip = (ip << 8) | static_cast<unsigned>(octet);
  }
  int len = ok ? std::stoi(m[5].str()) : -1;
  if (!ok || len > 32)
    throw UserError(fmt::format("{}: expected an IPv4 address with prefix length such as '10.1.2.3/16', found '{}'",
                                where, cidr));
  unsigned mask = len == 0 ? 0u : ~0u << (32 - len);
  unsigned net = ip & mask;
  return fmt::format("{}.{}.{}.{}/{}", net >> 24, (net >> 16) & 255, (net >> 8) & 255, net & 255, len);
}

AddressMap read_os_addresses() {
  AddressMap out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET || !a->ifa_name) continue;
    char text[INET_ADDRSTRLEN] = {};
    auto* sin = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
    inet_ntop(AF_INET, &sin->sin_addr, text, sizeof text);
    int len = 32;
    if (a->ifa_netmask) len = __builtin_popcount(reinterpret_cast<const sockaddr_in*>(a->ifa_netmask)->sin_addr.s_addr);
    out[a->ifa_name].push_back(fmt::format("{}/{}", text, len));
  }
  freeifaddrs(list);
  return out;
}

AddressMap read_fixture_addresses(const std::string& file) {
  AddressMap out;
  std::ifstream in(file);
  std::string line;
  for (int lineno = 1; in && std::getline(in, line); ++lineno) {
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::string name, cidr, extra;
    if (!(words >> name)) continue;
    if (!(words >> cidr) || (words >> extra))
      throw UserError(fmt::format("{}:{}: expected 'IFNAME A.B.C.D/LEN', found '{}'", file, lineno, line));
    ipv4_subnet(cidr, fmt::format("{}:{}", file, lineno));  // validates
    out[name].push_back(cidr);
  }
  return out;
}

NodeReport discover_node(const std::string& sysfs_root, const Devices& devices) {
  fs::path root = sysfs_root.empty() ? fs::path("/") : fs::path(sysfs_root);
  bool real = fs::weakly_canonical(root) == fs::path("/");
  if (!real && !fs::is_directory(root))
    throw UserError(fmt::format("--sysfs-root '{}' is not a folder; give a folder that holds sys/class/...",
                                sysfs_root));
  AddressMap addresses = real ? read_os_addresses() : read_fixture_addresses((root / "fixture" / "addresses").string());
  NodeReport report;
  report.hostname = hostname_of(root, real);
  report.devices = devices;
  if (devices.kind == "cuda" && devices.peak_tflops <= 0) report.devices.peak_tflops = known_peak_tflops(devices.name);
  if (report.devices.intra_node.empty()) report.devices.intra_node = discover_intra_class(sysfs_root, devices);
  std::set<std::string> roce_netdevs;
  report.nics = detail::discover_rdma_ports(root, addresses, roce_netdevs);
  for (auto& nic : detail::discover_interfaces(root, addresses, roce_netdevs)) report.nics.push_back(std::move(nic));
  return report;
}

}  // namespace holmes::topo
