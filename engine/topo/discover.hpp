// Discovery of one node: its network ports from Linux sysfs (the root folder is injectable so
// tests read fixture trees) and its compute devices.
//
// Fixture roots (anything but "/") may hold two extra files that stand in for what the OS
// would say directly:
//   <root>/proc/sys/kernel/hostname   the host name (also read under "/")
//   <root>/fixture/addresses          one "IFNAME A.B.C.D/LEN" per line, '#' comments
// Under "/" the IPv4 addresses come from getifaddrs().
#pragma once

#include <map>
#include <string>
#include <vector>

#include "engine/topo/topology.hpp"

namespace holmes::topo {

// The CPU as the one compute device: model name, usable cores, memory (from /proc).
Devices detect_cpu_devices();

// Reads <root>/sys/class/infiniband and <root>/sys/class/net. Missing folders mean "no such
// ports"; a file with garbage in it throws UserError naming the file, the text and what is
// accepted. `devices` is copied into the report; a CUDA device without a peak figure gets the
// one of its model from known_peak_tflops (gpu_peaks.hpp) when the model is known.
NodeReport discover_node(const std::string& sysfs_root, const Devices& devices);

// The intra-node class of a node's GPUs as the node can tell (Devices::intra_node): nvswitch
// when <root>/sys/bus/pci/devices lists an NVSwitch (vendor 0x10de, class 0x0680xx); else
// nvlink or pcie by the driver's count of GPU 0's active NVLinks (devices.nvlinks, when known);
// "" when it cannot tell, and for CPU devices (shm). A vendor or class file with garbage in it
// throws UserError naming the file.
std::string discover_intra_class(const std::string& sysfs_root, const Devices& devices);

// Interface name -> IPv4 addresses "a.b.c.d/len", in the order the source lists them.
using AddressMap = std::map<std::string, std::vector<std::string>>;
AddressMap read_os_addresses();                         // getifaddrs()
AddressMap read_fixture_addresses(const std::string& file);  // missing file = empty map

// "10.1.2.3/16" -> "10.1.0.0/16"; throws UserError (naming `where`) when malformed.
std::string ipv4_subnet(const std::string& cidr, const std::string& where);

}  // namespace holmes::topo
