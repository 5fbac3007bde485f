#include "comm/nccl/nccl_api.hpp"

#include <fmt/format.h>

#include <vector>

#include "common/dl_library.hpp"

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

Library load() {
  Library lib;
  const std::string soname = fmt::format("libnccl.so.{}", NCCL_MAJOR);
  const std::vector<std::string> names = library_candidates(soname, nullptr, HOLMES_NCCL_LIBRARY_DIR);
  std::string tried;
  void* handle = open_first(names, tried);
  if (!handle) {
    lib.problem = fmt::format("cannot load {} (NCCL {}.x: install it, or add the folder holding it to "
                              "LD_LIBRARY_PATH): {}", soname, NCCL_MAJOR, tried);
    return lib;
  }
  lib.path = opened_path(handle, soname);
  NcclApi& a = lib.api;
  std::string missing;
  bind_symbol(handle, "ncclGetVersion", a.get_version, missing);
  bind_symbol(handle, "ncclGetUniqueId", a.get_unique_id, missing);
  bind_symbol(handle, "ncclCommInitRankConfig", a.comm_init_rank_config, missing);
  bind_symbol(handle, "ncclCommGetAsyncError", a.comm_get_async_error, missing);
  bind_symbol(handle, "ncclCommFinalize", a.comm_finalize, missing);
  bind_symbol(handle, "ncclCommDestroy", a.comm_destroy, missing);
  bind_symbol(handle, "ncclCommAbort", a.comm_abort, missing);
  bind_symbol(handle, "ncclGetErrorString", a.get_error_string, missing);
  bind_symbol(handle, "ncclGetLastError", a.get_last_error, missing);
  bind_symbol(handle, "ncclAllReduce", a.all_reduce, missing);
  bind_symbol(handle, "ncclReduceScatter", a.reduce_scatter, missing);
  bind_symbol(handle, "ncclAllGather", a.all_gather, missing);
  bind_symbol(handle, "ncclBroadcast", a.broadcast, missing);
  bind_symbol(handle, "ncclSend", a.send, missing);
  bind_symbol(handle, "ncclRecv", a.recv, missing);
  bind_symbol(handle, "ncclGroupStart", a.group_start, missing);
  bind_symbol(handle, "ncclGroupEnd", a.group_end, missing);
  if (!missing.empty()) {
    lib.problem = fmt::format("{} is unusable: {}", lib.path, missing);
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
