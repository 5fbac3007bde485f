// cuBLASLt loaded with dlopen on first use instead of linked: a CUDA build of holmes-train
// then needs neither libcuda.so nor libcublasLt.so to start, so it runs CPU work on nodes
// that have no NVIDIA driver and no CUDA toolkit. Only cuda/ uses this table.
#pragma once

#include <cublasLt.h>

#include <string>

namespace holmes::cuda {

// The cuBLASLt entry points cuda/ calls, with the library's own signatures.
struct CublasLtApi {
  decltype(&::cublasLtGetVersion) get_version;
  decltype(&::cublasLtCreate) create;
  decltype(&::cublasLtDestroy) destroy;
  decltype(&::cublasLtMatmulDescCreate) matmul_desc_create;
  decltype(&::cublasLtMatmulDescDestroy) matmul_desc_destroy;
  decltype(&::cublasLtMatmulDescSetAttribute) matmul_desc_set_attribute;
  decltype(&::cublasLtMatrixLayoutCreate) matrix_layout_create;
  decltype(&::cublasLtMatrixLayoutDestroy) matrix_layout_destroy;
  decltype(&::cublasLtMatrixLayoutSetAttribute) matrix_layout_set_attribute;
  decltype(&::cublasLtMatmulPreferenceCreate) preference_create;
  decltype(&::cublasLtMatmulPreferenceDestroy) preference_destroy;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) preference_set_attribute;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) algo_get_heuristic;
  decltype(&::cublasLtMatmul) matmul;
};

// The loaded table. The first call opens libcublasLt.so.<major of the headers built against>
// (the dynamic loader's search path first, then the toolkit's lib folder seen at configure
// time). Throws CudaError naming the library and the loader's message when it cannot.
const CublasLtApi& cublaslt();

// Whether cublaslt() would succeed; `why` gets the loader's message when not. Never throws.
bool cublaslt_available(std::string* why = nullptr);

// Where the library was loaded from ("" before a successful load).
std::string cublaslt_path();

}  // namespace holmes::cuda
