// The libraries cuda/ loads on first use instead of linking (cuBLASLt in cublaslt_api.cpp,
// cuDNN in cudnn_api.cpp), on the dlopen helpers of common/dl_library.hpp: their candidates
// with this build's toolkit lib folder, and the loaded table with CudaError on failure.
#pragma once

#include <string>
#include <vector>

#include "common/dl_library.hpp"

namespace holmes::cuda {

using holmes::bind_symbol;
using holmes::open_first;
using holmes::opened_path;

// holmes::library_candidates with the toolkit's lib folder seen at configure time
// (HOLMES_CUDA_LIBRARY_DIR) as the last place.
std::vector<std::string> library_candidates(const std::string& soname,
                                            const char* env_var = nullptr);

// Throws CudaError(code, error, "dlopen(<what>)").
[[noreturn]] void throw_library_error(const char* code, const std::string& error, const char* what);

// What loading one library gave: its entry points (Api, a table of function pointers), the
// file opened, or why it failed (`error` non-empty).
template <class Api>
struct LoadedLibrary {
  Api api{};
  std::string path;
  std::string error;
  long version = 0;

  // The table, or CudaError(code, error, "dlopen(<what>)") when loading failed.
  const Api& require(const char* code, const char* what) const {
    if (!error.empty()) throw_library_error(code, error, what);
    return api;
  }
  bool available(std::string* why) const {
    if (why) *why = error;
    return error.empty();
  }
  std::string loaded_path() const { return error.empty() ? path : ""; }
};

}  // namespace holmes::cuda
