// What holmes-train knows about the machines: one NodeReport per node (discovered from
// sysfs or read from a topology file) and the ClusterTopology built from all of them.
// These are plain data: the planner (engine/plan) reads them and nothing else.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/topo/calibration.hpp"

namespace holmes::topo {

enum class NicKind { kIb, kRoce, kEthernet, kIpoib, kLoopback };

const char* to_string(NicKind kind);  // "ib", "roce", "ethernet", "ipoib", "loopback"
std::optional<NicKind> nic_kind_from_string(const std::string& text);

// One usable (or down) network port: an RDMA port (`mlx5_0` port 1) or a network interface.
struct Nic {
  std::string name;     // RDMA device (`mlx5_0`) or interface (`eth0`)
  NicKind kind = NicKind::kEthernet;
  bool active = false;  // ACTIVE port / operstate up
  std::optional<double> rate_gbps;  // unknown when the OS does not say
  int port = 0;          // RDMA port number; 0 for a plain interface
  std::string netdev;    // interface that carries it (RoCE, IPoIB); the name itself for Ethernet
  std::string fabric;    // IB: subnet prefix of GID 0; RoCE/Ethernet: IPv4 subnet ("10.1.0.0/16")
  int roce_version = 0;  // 1 or 2 for RoCE ports
  int gid_index = -1;    // RoCE: GID index to use (v2 with an IPv4 address preferred)
  std::string pci;       // PCI address ("0000:17:00.0"), "" when virtual
  int numa_node = -1;
  bool is_virtual = false;  // no `device` link: bridge, docker, veth, bond master
  std::vector<std::string> addresses;  // IPv4 "a.b.c.d/len"
};

// Compute devices of a node: CUDA GPUs when the runtime finds any, else the CPU.
struct Devices {
  std::string kind = "cpu";  // "cuda" or "cpu"
  int count = 1;             // GPUs, or 1 for the CPU
  std::string name;          // GPU model or CPU model
  double memory_gb = 0;      // per device
  double peak_tflops = 0;    // per device, dense; GPUs: BF16 tensor cores (plan/links.cpp derives fp32); 0 = unknown
  int cores = 0;             // CPU cores (cpu kind)
  // CPU time a worker may use, in cores (a CPU quota: cgroup cpu.max over its period); 0 = no
  // quota. docs/topology.md; the cost model's overlap of communication with compute.
  double cpu_quota_cores = 0;
  // The quota's period (cpu.max's second figure, cfs_period_us) in ms: the quota is handed out
  // per period, and a worker that spent it sleeps to the period's end. The kernel's default,
  // 100 ms, unless the file says otherwise (the lab writes its own).
  double cpu_quota_period_ms = 100;
  // Emulated clusters (the lab's namespaces, containers on one box): the machine whose cores this
  // node's workers share with every node that names the same `machine`, and its cores. Empty /
  // 0: the node is a machine of its own. docs/topology.md; the cost model's pipeline loop
  // (a stage waiting for the bottleneck runs at a whole core only where the others leave one).
  std::string machine;
  double machine_cores = 0;
  // (The four keys above are host emulation's, kHostEmulationKeys: refused on a cuda node.)
  // How the node's devices reach each other (docs/topology.md, "Intra-node class"): nvswitch,
  // nvlink or pcie between GPUs, shm between the processes of a CPU node; "" = not said (the
  // planner then takes the device model's usual class, intra_class_of). Discovery reads it from
  // the PCI bus and the driver; a topology file may set it.
  std::string intra_node;
  // Discovery's count of GPU 0's active NVLinks as the driver reports them (-1: unknown); what
  // decides nvlink where no NVSwitch is on the bus.
  int nvlinks = -1;
  // cuda kind only: libnccl can be loaded on the node (assumed unless discovery or the
  // topology file's `nccl: false` says not), and how many worker processes share one GPU
  // (HOLMES_WORKERS_PER_GPU). The plan reads both to decide whether device buffers go over
  // NCCL (spec parallel.nccl).
  bool nccl = true;
  int per_gpu = 1;
};

// The intra-node classes (Devices::intra_node): those of GPUs, and of CPU processes.
inline constexpr const char* kGpuIntraClasses[] = {"nvswitch", "nvlink", "pcie"};
inline constexpr const char* kCpuIntraClass = "shm";
// The class of a node's devices: its own when said, else the model's usual one (an SXM or HGX
// board has NVSwitch; L40S, L4, A10, RTX and other PCIe cards talk over PCIe; an unknown GPU
// is taken as NVSwitch-class, the common datacenter case), shm for CPU devices.
std::string intra_class_of(const Devices& d);

// The topology keys of `devices` that only an emulated CPU node may declare (the planner's host
// emulation, engine/plan/host_emulation.hpp): a cuda node that names one is refused.
inline constexpr const char* kHostEmulationKeys[] = {"cpu_quota_cores", "cpu_quota_period_ms", "machine",
                                                     "machine_cores"};

struct NodeReport {
  std::string hostname;
  Devices devices;
  std::vector<Nic> nics;
};

// A set of nodes that share one RDMA fabric of one kind, or a lone node with no usable
// RDMA port (kind Ethernet). Every node belongs to exactly one island.
struct Island {
  int id = 0;
  NicKind kind = NicKind::kEthernet;  // Ib, Roce or Ethernet
  std::string fabric;                // subnet prefix / IP subnet / "" for Ethernet
  std::vector<int> nodes;            // indices into ClusterTopology::nodes, ascending
  double rdma_gbps_per_node = 0;     // aggregate RDMA bandwidth of one member (min over members)
};

struct ClusterTopology {
  std::vector<NodeReport> nodes;
  std::vector<Island> islands;
  std::vector<int> island_of;  // node index -> island id
  std::vector<std::string> warnings;  // what was assumed where reports disagreed
  Calibration calibration;            // measured figures the cost model prefers (cluster.calibration)

  // Interface to bind TCP traffic (Gloo) of `node` to: on the RDMA island's IP network when
  // `inside_island`, else on the Ethernet network that joins every node.
  std::string tcp_interface(int node, bool inside_island) const;
  // Ethernet rate of a node: the fastest active physical Ethernet-class NIC.
  double ethernet_gbps(int node) const;
};

}  // namespace holmes::topo
