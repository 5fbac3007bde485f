#include "cuda/cublaslt_api.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <link.h>

#include <mutex>
#include <vector>

#include "cuda/check.hpp"

#ifndef HOLMES_CUDA_LIBRARY_DIR
#define HOLMES_CUDA_LIBRARY_DIR ""
#endif

namespace holmes::cuda {

namespace {

struct Loaded {
  CublasLtApi api{};
  std::string path;   // file actually opened
  std::string error;  // non-empty when loading failed
};

template <class Fn>
bool bind(void* lib, const char* name, Fn& slot, std::string& error) {
  slot = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!slot && error.empty()) error = fmt::format("symbol {} missing: {}", name, dlerror());
  return slot != nullptr;
}

std::string opened_path(void* lib, const std::string& fallback) {
  link_map* map = nullptr;
  if (dlinfo(lib, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name)
    return map->l_name;
  return fallback;
}

Loaded load() {
  Loaded out;
  const std::string soname = fmt::format("libcublasLt.so.{}", CUBLAS_VER_MAJOR);
  std::vector<std::string> candidates = {soname};
  if (*HOLMES_CUDA_LIBRARY_DIR)
    candidates.push_back(std::string(HOLMES_CUDA_LIBRARY_DIR) + "/" + soname);
  void* lib = nullptr;
  std::string tried;
  for (const auto& name : candidates) {
    lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib) break;
    tried += fmt::format("{}{}", tried.empty() ? "" : "; ", dlerror());
  }
  if (!lib) {
    out.error = fmt::format(
        "cannot load {} (install the CUDA {} toolkit or add its lib folder "
        "to LD_LIBRARY_PATH): {}",
        soname, CUBLAS_VER_MAJOR, tried);
    return out;
  }
  CublasLtApi& a = out.api;
  std::string& e = out.error;
  bind(lib, "cublasLtGetVersion", a.get_version, e);
  bind(lib, "cublasLtCreate", a.create, e);
  bind(lib, "cublasLtDestroy", a.destroy, e);
  bind(lib, "cublasLtMatmulDescCreate", a.matmul_desc_create, e);
  bind(lib, "cublasLtMatmulDescDestroy", a.matmul_desc_destroy, e);
  bind(lib, "cublasLtMatmulDescSetAttribute", a.matmul_desc_set_attribute, e);
  bind(lib, "cublasLtMatrixLayoutCreate", a.matrix_layout_create, e);
  bind(lib, "cublasLtMatrixLayoutDestroy", a.matrix_layout_destroy, e);
  bind(lib, "cublasLtMatrixLayoutSetAttribute", a.matrix_layout_set_attribute, e);
  bind(lib, "cublasLtMatmulPreferenceCreate", a.preference_create, e);
  bind(lib, "cublasLtMatmulPreferenceDestroy", a.preference_destroy, e);
  bind(lib, "cublasLtMatmulPreferenceSetAttribute", a.preference_set_attribute, e);
  bind(lib, "cublasLtMatmulAlgoGetHeuristic", a.algo_get_heuristic, e);
  bind(lib, "cublasLtMatmul", a.matmul, e);
  out.path = opened_path(lib, soname);
  if (!e.empty()) e = fmt::format("{} is unusable: {}", out.path, e);
  // The library stays loaded for the life of the process (its handles may outlive us).
  return out;
}

const Loaded& loaded() {
  static const Loaded once = load();  // thread-safe one-time initialisation
  return once;
}

}  // namespace

const CublasLtApi& cublaslt() {
  const Loaded& l = loaded();
  if (!l.error.empty())
    throw CudaError("CUBLAS_STATUS_NOT_INITIALIZED", l.error, "dlopen(libcublasLt)", __FILE__,
                    __LINE__);
  return l.api;
}

bool cublaslt_available(std::string* why) {
  const Loaded& l = loaded();
  if (why) *why = l.error;
  return l.error.empty();
}

std::string cublaslt_path() { return loaded().error.empty() ? loaded().path : ""; }

}  // namespace holmes::cuda
