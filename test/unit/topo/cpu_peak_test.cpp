// The CPU peak for MFU: from /proc/cpuinfo text and cpufreq, an upper bound per core.
#include <catch2/catch.hpp>

#include "engine/topo/cpu_peak.hpp"

using holmes::topo::cpu_peak_from;

namespace {

std::string cpuinfo(const std::string& flags, const std::string& model, const std::string& mhz0,
                    const std::string& mhz1) {
  std::string out;
  for (const auto& mhz : {mhz0, mhz1})
    out += "processor\t: 0\nmodel name\t: " + model + "\ncpu MHz\t\t: " + mhz + "\nflags\t\t: " + flags + "\n\n";
  return out;
}

}  // namespace

TEST_CASE("cpu peak: the widest vector unit in the flags, two FMA pipes") {
  CHECK(cpu_peak_from(cpuinfo("fpu sse2 avx avx2 fma avx512f avx512bw", "AMD EPYC", "2596.1", "2596.1"), "")
            .flops_per_cycle == 64);
  CHECK(cpu_peak_from(cpuinfo("fpu sse2 avx avx2 fma", "x", "3000", "3000"), "").flops_per_cycle == 32);
  CHECK(cpu_peak_from(cpuinfo("fpu sse2 avx", "x", "3000", "3000"), "").flops_per_cycle == 16);
  CHECK(cpu_peak_from(cpuinfo("fpu sse2", "x", "3000", "3000"), "").flops_per_cycle == 8);
  CHECK(cpu_peak_from("Features\t: fp asimd evtstrm\n", "").flops_per_cycle == 32);
  // Nothing known: the widest assumed, so the peak stays an upper bound.
  CHECK(cpu_peak_from("", "").flops_per_cycle == 64);
}

TEST_CASE("cpu peak: the highest clock the OS reports") {
  // cpufreq's maximum (turbo) wins over the current clocks.
  auto p = cpu_peak_from(cpuinfo("avx2 fma", "Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz", "1000.0", "2100.0"), "3700000");
  CHECK(p.ghz == Approx(3.7));
  CHECK(p.clock_source == "cpufreq cpuinfo_max_freq");
  CHECK(p.gflops_per_core() == Approx(32 * 3.7));
  // Else the fastest core's cpu MHz, or the nominal clock when that is higher.
  p = cpu_peak_from(cpuinfo("avx2 fma", "AMD EPYC", "2596.1", "2800.5"), "");
  CHECK(p.ghz == Approx(2.8005));
  p = cpu_peak_from(cpuinfo("avx2 fma", "Intel(R) Xeon(R) CPU @ 2.10GHz", "800.0", "1200.0"), "");
  CHECK(p.ghz == Approx(2.1));
  CHECK(p.clock_source == "nominal clock of the model name");
  p = cpu_peak_from("flags : avx2 fma\n", "");
  CHECK(p.ghz == Approx(6.0));
  CHECK_THAT(p.describe(), Catch::Contains("32 FLOP/cycle per core") && Catch::Contains("6 GHz assumed"));
}
