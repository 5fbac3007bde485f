#include "cuda/cudnn_api.hpp"

#include <fmt/format.h>

#include <vector>

#include "cuda/check.hpp"
#include "cuda/dl_library.hpp"

namespace holmes::cuda {

namespace {

using Loaded = LoadedLibrary<CudnnApi>;

Loaded load() {
  Loaded out;
  const std::string soname = fmt::format("libcudnn.so.{}", CUDNN_MAJOR);
  const std::vector<std::string> candidates = library_candidates(soname, "HOLMES_CUDNN_PATH");
  std::string tried;
  void* lib = open_first(candidates, tried);
  if (!lib) {
    out.error = fmt::format(
        "{} not found (add the folder holding it to LD_LIBRARY_PATH or name the file in "
        "HOLMES_CUDNN_PATH): {}",
        soname, tried);
    return out;
  }
  CudnnApi& a = out.api;
  std::string& e = out.error;
  bind_symbol(lib, "cudnnGetVersion", a.get_version, e);
  bind_symbol(lib, "cudnnGetErrorString", a.get_error_string, e);
  bind_symbol(lib, "cudnnCreate", a.create, e);
  bind_symbol(lib, "cudnnDestroy", a.destroy, e);
  bind_symbol(lib, "cudnnSetStream", a.set_stream, e);
  bind_symbol(lib, "cudnnBackendCreateDescriptor", a.create_descriptor, e);
  bind_symbol(lib, "cudnnBackendDestroyDescriptor", a.destroy_descriptor, e);
  bind_symbol(lib, "cudnnBackendSetAttribute", a.set_attribute, e);
  bind_symbol(lib, "cudnnBackendGetAttribute", a.get_attribute, e);
  bind_symbol(lib, "cudnnBackendFinalize", a.finalize, e);
  bind_symbol(lib, "cudnnBackendExecute", a.execute, e);
  out.path = opened_path(lib, candidates.front());
  if (!e.empty()) {
    e = fmt::format("{} is unusable: {}", out.path, e);
    return out;
  }
  out.version = static_cast<long>(a.get_version());
  if (out.version / 10000 != CUDNN_MAJOR)
    e = fmt::format("{} is cuDNN {}, this build needs cuDNN {}.x", out.path, out.version,
                    CUDNN_MAJOR);
  // The library stays loaded for the life of the process (its handles may outlive us).
  return out;
}

const Loaded& loaded() {
  static const Loaded once = load();  // thread-safe one-time initialisation
  return once;
}

}  // namespace

const CudnnApi& cudnn() { return loaded().require("CUDNN_STATUS_NOT_INITIALIZED", "libcudnn"); }

bool cudnn_available(std::string* why) { return loaded().available(why); }

std::string cudnn_path() { return loaded().loaded_path(); }

long cudnn_version() { return loaded().error.empty() ? loaded().version : 0; }

void check_cudnn(cudnnStatus_t status, const char* expr, const char* file, int line) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  const Loaded& l = loaded();
  const char* text = l.error.empty() ? l.api.get_error_string(status) : "cuDNN not loaded";
  throw CudaError(text ? text : "CUDNN_STATUS_UNKNOWN", fmt::format("cuDNN status {}", int(status)),
                  expr, file, line);
}

}  // namespace holmes::cuda
