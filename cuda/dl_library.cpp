#include "cuda/dl_library.hpp"

#include "cuda/check.hpp"

#ifndef HOLMES_CUDA_LIBRARY_DIR
#define HOLMES_CUDA_LIBRARY_DIR ""
#endif

namespace holmes::cuda {

std::vector<std::string> library_candidates(const std::string& soname, const char* env_var) {
  return holmes::library_candidates(soname, env_var, HOLMES_CUDA_LIBRARY_DIR);
}

void throw_library_error(const char* code, const std::string& error, const char* what) {
  throw CudaError(code, error, std::string("dlopen(") + what + ")", __FILE__, __LINE__);
}

}  // namespace holmes::cuda
