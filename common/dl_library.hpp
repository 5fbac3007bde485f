// Opening a shared library at run time instead of linking it (cuBLASLt, cuDNN in cuda/, NCCL
// in comm/nccl/), so a CUDA build starts on machines without them: where to look, the first
// candidate that loads, the file it came from, and a table of entry points.
#pragma once

#include <dlfcn.h>

#include <string>
#include <vector>

namespace holmes {

// Where to look for a library: the file named by the environment variable `env_var` (when
// given and set), `soname` through the dynamic loader's search path, then
// `fallback_dir`/`soname` (when fallback_dir is not empty: the toolkit's lib folder seen at
// configure time).
std::vector<std::string> library_candidates(const std::string& soname, const char* env_var,
                                            const std::string& fallback_dir);

// Opens the first of `candidates` (names for the loader's search, or paths) that loads, with
// RTLD_NOW | RTLD_LOCAL; nullptr when none does, with every loader message in `tried`.
void* open_first(const std::vector<std::string>& candidates, std::string& tried);

// The file the loader actually opened for `lib` (its link map), or `fallback`.
std::string opened_path(void* lib, const std::string& fallback);

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

}  // namespace holmes
