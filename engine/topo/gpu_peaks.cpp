#include "engine/topo/gpu_peaks.hpp"

#include <algorithm>
#include <cctype>

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

const Peak* find_peak(const std::string& gpu_name) {
  std::string upper = gpu_name;
  std::transform(upper.begin(), upper.end(), upper.begin(), [](unsigned char c) { return std::toupper(c); });
  for (const auto& p : kPeaks)
    if (upper.find(p.needle) != std::string::npos) return &p;
  return nullptr;
}

}  // namespace

double known_peak_tflops(const std::string& gpu_name) {
  const Peak* p = find_peak(gpu_name);
  return p ? p->bf16 : 0;
}

double known_fp32_peak_tflops(const std::string& gpu_name) {
  const Peak* p = find_peak(gpu_name);
  return p ? p->fp32 : 0;
}

}  // namespace holmes::topo
