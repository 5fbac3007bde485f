// OpenBLAS built with DYNAMIC_ARCH picks its kernels from CPUID at load time. On CPUs newer
// than the library (here a Sapphire Rapids VM that reports a generic model) it falls back to
// the SSE3 "Prescott" kernels, about 3.5x slower than its AVX-512 ones. When that happened,
// and the user did not choose OPENBLAS_CORETYPE, we re-run OpenBLAS's own core selection with
// the best core the CPU's feature flags support.
#include "model/cpu/blas_core.hpp"

#include <cstdlib>
#include <cstring>
#include <mutex>

extern "C" {
// Exported by DYNAMIC_ARCH builds of OpenBLAS; absent (weak = nullptr) in single-core builds.
char* openblas_get_corename() __attribute__((weak));
void gotoblas_dynamic_init() __attribute__((weak));
void gotoblas_dynamic_quit() __attribute__((weak));
}

namespace holmes::model::cpu {
namespace {

const char* best_core() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")) {
    return "SKYLAKEX";
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "HASWELL";
#endif
  return nullptr;
}

std::string select_once() {
  if (openblas_get_corename == nullptr) return "unknown";
  const std::string detected = openblas_get_corename();
  const bool generic = detected == "Prescott" || detected == "Core2" || detected == "Nehalem";
  const char* best = best_core();
  if (!generic || best == nullptr || std::getenv("OPENBLAS_CORETYPE") != nullptr ||
      gotoblas_dynamic_init == nullptr || gotoblas_dynamic_quit == nullptr) {
    return detected;
  }
  setenv("OPENBLAS_CORETYPE", best, 0);
  gotoblas_dynamic_quit();
  gotoblas_dynamic_init();
  return std::string(openblas_get_corename()) + " (OpenBLAS detected " + detected + ")";
}

}  // namespace

const std::string& ensure_fast_blas() {
  static std::once_flag once;
  static std::string core;
  std::call_once(once, [] { core = select_once(); });
  return core;
}

}  // namespace holmes::model::cpu
