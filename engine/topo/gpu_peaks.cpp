#include "engine/topo/gpu_peaks.hpp"

#include <algorithm>
#include <cctype>

#include "engine/topo/topology.hpp"

namespace holmes::topo {

namespace {

struct Peak {
  const char* needle;  // upper-case substring of the device name; first match wins
  double bf16;         // dense BF16 tensor-core TFLOP/s
  double fp32;         // FP32 TFLOP/s on the CUDA cores (no TF32)
};

// Order matters: more specific names before the names they contain ("H100 PCIE" before
// "H100", "L40S" before "L40").
constexpr Peak kPeaks[] = {
    {"B200", 2250, 80},    {"GH200", 989, 67},    {"H200", 989, 67},    {"H100 PCIE", 756, 51},
    {"H100 NVL", 835, 60}, {"H100", 989, 67},     {"H800", 989, 67},    {"A100", 312, 19.5},
    {"A800", 312, 19.5},   {"L40S", 362, 91.6},   {"L40", 181, 90.5},   {"RTX 4090", 165, 82.6},
};

std::string upper(const std::string& name) {
  std::string out = name;
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::toupper(c); });
  return out;
}

const Peak* find_peak(const std::string& gpu_name) {
  const std::string u = upper(gpu_name);
  for (const auto& p : kPeaks)
    if (u.find(p.needle) != std::string::npos) return &p;
  return nullptr;
}

// PCIe cards without NVLink (vendor data sheets). "H100 PCIE" and "A100 PCIE" may carry an
// NVLink bridge: not listed (discovery or the topology file says).
constexpr const char* kPcieOnly[] = {"L40S", "L40", "L4", "A10", "A16", "A2", "T4", "RTX", "A40", "A30"};

// NVLink per GPU and direction, GB/s x 8 (first match wins).
struct Nvlink {
  const char* needle;
  double gbps;
};
constexpr Nvlink kNvlink[] = {{"B200", 7200}, {"GH200", 3600}, {"H200", 3600}, {"H100", 3600}, {"H800", 1600},
                              {"A100", 2400}, {"A800", 1600},  {"V100", 1200}};

}  // namespace

double known_peak_tflops(const std::string& gpu_name) {
  const Peak* p = find_peak(gpu_name);
  return p ? p->bf16 : 0;
}

double known_fp32_peak_tflops(const std::string& gpu_name) {
  const Peak* p = find_peak(gpu_name);
  return p ? p->fp32 : 0;
}

bool known_pcie_only(const std::string& gpu_name) {
  const std::string u = upper(gpu_name);
  // Whole names: "A10" must not match "A100", "L4" not "L40S" (a digit may not follow).
  for (const char* needle : kPcieOnly) {
    const std::string n = needle;
    for (size_t at = u.find(n); at != std::string::npos; at = u.find(n, at + 1)) {
      const bool start = at == 0 || !std::isalnum(static_cast<unsigned char>(u[at - 1]));
      const size_t end = at + n.size();
      const bool stop = end == u.size() || !std::isdigit(static_cast<unsigned char>(u[end]));  // A10G, not A100
      if (start && stop) return true;
    }
  }
  return false;
}

double known_nvlink_gbps(const std::string& gpu_name) {
  const std::string u = upper(gpu_name);
  for (const auto& l : kNvlink)
    if (u.find(l.needle) != std::string::npos) return l.gbps;
  return 0;
}

std::string intra_class_of(const Devices& d) {
  if (!d.intra_node.empty()) return d.intra_node;
  if (d.kind != "cuda") return kCpuIntraClass;
  return known_pcie_only(d.name) ? "pcie" : "nvswitch";
}

}  // namespace holmes::topo
