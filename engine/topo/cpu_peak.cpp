#include "engine/topo/cpu_peak.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

namespace holmes::topo {

namespace {

// Clock used when the OS says nothing usable: above any shipping CPU, so the bound holds.
constexpr double kUnknownClockGhz = 6.0;

std::set<std::string> flags_of(const std::string& cpuinfo) {
  std::istringstream in(cpuinfo);
  std::string line;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, line.find_first_of(" \t"));
    if (key != "flags" && key != "Features") continue;
    std::istringstream words(line.substr(colon + 1));
    std::set<std::string> out;
    for (std::string w; words >> w;) out.insert(w);
    return out;
  }
  return {};
}

}  // namespace

std::string CpuPeak::describe() const {
  return fmt::format("{:g} FLOP/cycle per core ({}) x {:.2f} GHz ({})", flops_per_cycle, simd, ghz, clock_source);
}

CpuPeak cpu_peak_from(const std::string& cpuinfo, const std::string& max_freq_khz) {
  CpuPeak p;
  const auto f = flags_of(cpuinfo);
  // fp32 lanes x 2 (multiply-add) x 2 pipes: the most any core of that generation issues.
  if (f.count("avx512f")) p.flops_per_cycle = 16 * 2 * 2, p.simd = "AVX-512 FMA, 2 pipes";
  else if (f.count("avx2") && f.count("fma")) p.flops_per_cycle = 8 * 2 * 2, p.simd = "AVX2 FMA, 2 pipes";
  else if (f.count("avx")) p.flops_per_cycle = 8 * 2, p.simd = "AVX, one add and one multiply";
  else if (f.count("sse2")) p.flops_per_cycle = 4 * 2, p.simd = "SSE2, one add and one multiply";
  else if (f.count("asimd")) p.flops_per_cycle = 4 * 2 * 4, p.simd = "NEON FMA, up to 4 pipes";
  else p.flops_per_cycle = 16 * 2 * 2, p.simd = "vector unit unknown: AVX-512 FMA assumed";

  double khz = 0;
  try {
    khz = max_freq_khz.empty() ? 0 : std::stod(max_freq_khz);
  } catch (const std::exception&) {
  }
  if (khz > 0) {
    p.ghz = khz / 1e6;
    p.clock_source = "cpufreq cpuinfo_max_freq";
    return p;
  }
  // The highest "cpu MHz" of any core, or the nominal clock in the model name.
  static const std::regex kMhz(R"(cpu MHz\s*:\s*([0-9.]+))"), kNominal(R"(@\s*([0-9.]+)\s*GHz)");
  double mhz = 0;
  for (auto it = std::sregex_iterator(cpuinfo.begin(), cpuinfo.end(), kMhz); it != std::sregex_iterator(); ++it)
    mhz = std::max(mhz, std::stod((*it)[1].str()));
  std::smatch m;
  const double nominal = std::regex_search(cpuinfo, m, kNominal) ? std::stod(m[1].str()) : 0;
  if (mhz > 0 && mhz / 1e3 >= nominal) {
    p.ghz = mhz / 1e3;
    p.clock_source = "/proc/cpuinfo cpu MHz";
  } else if (nominal > 0) {
    p.ghz = nominal;
    p.clock_source = "nominal clock of the model name";
  } else {
    p.ghz = kUnknownClockGhz;
    p.clock_source = "clock unknown: 6 GHz assumed";
  }
  return p;
}

CpuPeak cpu_peak() {
  auto slurp = [](const char* path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  };
  std::string khz = slurp("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq");
  khz.erase(std::remove_if(khz.begin(), khz.end(), [](char c) { return c == '\n' || c == ' '; }), khz.end());
  return cpu_peak_from(slurp("/proc/cpuinfo"), khz);
}

}  // namespace holmes::topo
