#include "engine/topo/gpu_peaks.hpp"

#include <algorithm>
#include <cctype>

namespace holmes::topo {

namespace {

struct Peak {
  const char* needle;  // upper-case substring of the device name; first match wins
  double tflops;
};

// Order matters: more specific names before the names they contain ("H100 PCIE" before
// "H100", "L40S" before "L40").
constexpr Peak kPeaks[] = {
    {"B200", 2250}, {"GH200", 989}, {"H200", 989}, {"H100 PCIE", 756}, {"H100 NVL", 835}, {"H100", 989},
    {"H800", 989},  {"A100", 312},  {"A800", 312}, {"L40S", 362},      {"L40", 181},      {"RTX 4090", 165},
};

}  // namespace

double known_peak_tflops(const std::string& gpu_name) {
  std::string upper = gpu_name;
  std::transform(upper.begin(), upper.end(), upper.begin(), [](unsigned char c) { return std::toupper(c); });
  for (const auto& p : kPeaks)
    if (upper.find(p.needle) != std::string::npos) return p.tflops;
  return 0;
}

}  // namespace holmes::topo
