// The fp32 peak of a CPU, from what the OS says about it: cores x FLOP per cycle x clock.
// An upper bound by construction (the widest vector unit the flags show, two FMA pipes, the
// highest clock the OS reports), so that MFU against it cannot exceed 100%; a timing of a
// GEMM is not (it varies 30-200 GFLOP/s on a loaded machine).
#pragma once

#include <string>

namespace holmes::topo {

struct CpuPeak {
  double flops_per_cycle = 0;  // per core, fp32
  double ghz = 0;              // highest clock reported
  std::string simd;            // "AVX-512", "AVX2+FMA", "AVX", "SSE2", "NEON", ...
  std::string clock_source;    // where ghz came from
  double gflops_per_core() const { return flops_per_cycle * ghz; }
  // "64 FLOP/cycle (AVX-512 FMA, 2 pipes) x 2.60 GHz (/proc/cpuinfo cpu MHz)"
  std::string describe() const;
};

// From the text of /proc/cpuinfo and the content of cpufreq's cpuinfo_max_freq in kHz (""
// when absent). Pure, for tests.
CpuPeak cpu_peak_from(const std::string& cpuinfo, const std::string& max_freq_khz);
// This machine's (reads /proc/cpuinfo and /sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq).
CpuPeak cpu_peak();

}  // namespace holmes::topo
