#include "comm/nccl/nccl_api.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <link.h>

#include <vector>

#ifndef HOLMES_NCCL_LIBRARY_DIR
#define HOLMES_NCCL_LIBRARY_DIR ""
#endif

namespace holmes::comm {

namespace {

struct Library {
  NcclApi api{};
  std::string path;     // the file the loader opened
  int version = 0;      // ncclGetVersion
  std::string problem;  // empty once usable
};

// Opens the first candidate the loader accepts; `tried` collects each refusal.
void* open_first(const std::vector<std::string>& names, std::string& tried) {
  for (const auto& name : names) {
    if (void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
    if (!tried.empty()) tried += "; ";
    tried += dlerror();
  }
  return nullptr;
}

// Fills every slot of the table; the first missing symbol is the problem.
class Binder {
 public:
  explicit Binder(void* handle) : handle_(handle) {}
  template <class Fn>
  void operator()(Fn& slot, const char* symbol) {
    slot = reinterpret_cast<Fn>(dlsym(handle_, symbol));
    if (!slot && missing_.empty()) missing_ = symbol;
  }
  const std::string& missing() const { return missing_; }

 private:
  void* handle_;
  std::string missing_;
};

Library load() {
  Library lib;
  const std::string soname = fmt::format("libnccl.so.{}", NCCL_MAJOR);
  std::vector<std::string> names{soname};
  if (*HOLMES_NCCL_LIBRARY_DIR) names.push_back(fmt::format("{}/{}", HOLMES_NCCL_LIBRARY_DIR, soname));
  std::string tried;
  void* handle = open_first(names, tried);
  if (!handle) {
    lib.problem = fmt::format("cannot load {} (NCCL {}.x: install it, or add the folder holding it to "
                              "LD_LIBRARY_PATH): {}", soname, NCCL_MAJOR, tried);
    return lib;
  }
  link_map* map = nullptr;
  lib.path = dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name ? map->l_name : soname;
  NcclApi& a = lib.api;
  Binder bind(handle);
  bind(a.get_version, "ncclGetVersion");
  bind(a.get_unique_id, "ncclGetUniqueId");
  bind(a.comm_init_rank_config, "ncclCommInitRankConfig");
  bind(a.comm_get_async_error, "ncclCommGetAsyncError");
  bind(a.comm_finalize, "ncclCommFinalize");
  bind(a.comm_destroy, "ncclCommDestroy");
  bind(a.comm_abort, "ncclCommAbort");
  bind(a.get_error_string, "ncclGetErrorString");
  bind(a.get_last_error, "ncclGetLastError");
  bind(a.all_reduce, "ncclAllReduce");
  bind(a.reduce_scatter, "ncclReduceScatter");
  bind(a.all_gather, "ncclAllGather");
  bind(a.broadcast, "ncclBroadcast");
  bind(a.send, "ncclSend");
  bind(a.recv, "ncclRecv");
  bind(a.group_start, "ncclGroupStart");
  bind(a.group_end, "ncclGroupEnd");
  if (!bind.missing().empty()) {
    lib.problem = fmt::format("{} is unusable: it has no symbol {}", lib.path, bind.missing());
    return lib;
  }
  if (a.get_version(&lib.version) != ncclSuccess || lib.version < kMinNcclVersion)
    lib.problem = fmt::format("{} is NCCL version code {}; holmes-train needs {} or newer (ncclConfig_t with netName "
                              "and non-blocking init)", lib.path, lib.version, kMinNcclVersion);
  // The library stays loaded for the life of the process (communicators may outlive us).
  return lib;
}

const Library& library() {
  static const Library once = load();  // thread-safe one-time initialisation
  return once;
}

}  // namespace

const NcclApi& nccl() {
  if (!library().problem.empty()) throw NcclUnavailable("NCCL: " + library().problem);
  return library().api;
}

bool nccl_available(std::string* why) {
  if (why) *why = library().problem;
  return library().problem.empty();
}

std::string nccl_path() { return library().problem.empty() ? library().path : ""; }
int nccl_version() { return library().problem.empty() ? library().version : 0; }

}  // namespace holmes::comm
