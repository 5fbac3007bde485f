// dlopen helpers shared by the libraries cuda/ loads on first use instead of linking
// (cuBLASLt in cublaslt_api.cpp, cuDNN in cudnn_api.cpp), so a CUDA build starts on machines
// without them.
#pragma once

#include <dlfcn.h>

#include <string>
#include <vector>

namespace holmes::cuda {

// Where to look for a library: the file named by the environment variable `env_var` (when
// given and set), `soname` through the dynamic loader's search path, then the toolkit's lib
// folder seen at configure time (HOLMES_CUDA_LIBRARY_DIR).
std::vector<std::string> library_candidates(const std::string& soname,
                                            const char* env_var = nullptr);

// Opens the first of `candidates` (names for the loader's search, or paths) that loads, with
// RTLD_NOW | RTLD_LOCAL; nullptr when none does, with every loader message in `tried`.
void* open_first(const std::vector<std::string>& candidates, std::string& tried);

// The file the loader actually opened for `lib` (its link map), or `fallback`.
std::string opened_path(void* lib, const std::string& fallback);

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

// Looks up `name` in `lib` into `slot`; records the first failure in `error`.
template <class Fn>
bool bind_symbol(void* lib, const char* name, Fn& slot, std::string& error) {
  slot = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!slot && error.empty()) {
    const char* why = dlerror();
    error = std::string("symbol ") + name + " missing: " + (why ? why : "not found");
  }
  return slot != nullptr;
}

}  // namespace holmes::cuda
