#include "cuda/cublaslt_api.hpp"

#include <fmt/format.h>

#include <vector>

#include "cuda/check.hpp"
#include "cuda/dl_library.hpp"

namespace holmes::cuda {

namespace {

using Loaded = LoadedLibrary<CublasLtApi>;

Loaded load() {
  Loaded out;
  const std::string soname = fmt::format("libcublasLt.so.{}", CUBLAS_VER_MAJOR);
  const std::vector<std::string> candidates = library_candidates(soname);
  std::string tried;
  void* lib = open_first(candidates, tried);
  if (!lib) {
    out.error = fmt::format(
        "cannot load {} (install the CUDA {} toolkit or add its lib folder "
        "to LD_LIBRARY_PATH): {}",
        soname, CUBLAS_VER_MAJOR, tried);
    return out;
  }
  CublasLtApi& a = out.api;
  std::string& e = out.error;
  bind_symbol(lib, "cublasLtGetVersion", a.get_version, e);
  bind_symbol(lib, "cublasLtCreate", a.create, e);
  bind_symbol(lib, "cublasLtDestroy", a.destroy, e);
  bind_symbol(lib, "cublasLtMatmulDescCreate", a.matmul_desc_create, e);
  bind_symbol(lib, "cublasLtMatmulDescDestroy", a.matmul_desc_destroy, e);
  bind_symbol(lib, "cublasLtMatmulDescSetAttribute", a.matmul_desc_set_attribute, e);
  bind_symbol(lib, "cublasLtMatrixLayoutCreate", a.matrix_layout_create, e);
  bind_symbol(lib, "cublasLtMatrixLayoutDestroy", a.matrix_layout_destroy, e);
  bind_symbol(lib, "cublasLtMatrixLayoutSetAttribute", a.matrix_layout_set_attribute, e);
  bind_symbol(lib, "cublasLtMatmulPreferenceCreate", a.preference_create, e);
  bind_symbol(lib, "cublasLtMatmulPreferenceDestroy", a.preference_destroy, e);
  bind_symbol(lib, "cublasLtMatmulPreferenceSetAttribute", a.preference_set_attribute, e);
  bind_symbol(lib, "cublasLtMatmulAlgoGetHeuristic", a.algo_get_heuristic, e);
  bind_symbol(lib, "cublasLtMatmul", a.matmul, e);
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
  return loaded().require("CUBLAS_STATUS_NOT_INITIALIZED", "libcublasLt");
}

bool cublaslt_available(std::string* why) { return loaded().available(why); }

std::string cublaslt_path() { return loaded().loaded_path(); }

}  // namespace holmes::cuda
