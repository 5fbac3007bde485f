// NCCL opened with dlopen on first use instead of linked, as cuda/cublaslt_api does for
// cuBLASLt: a CUDA build of holmes-train then starts, and runs CPU jobs, on machines without
// libnccl. Only comm/nccl uses this table.
#pragma once

#include <nccl.h>

#include <stdexcept>
#include <string>

namespace holmes::comm {

// The NCCL entry points the NCCL group calls, with the library's own signatures.
struct NcclApi {
  decltype(&::ncclGetVersion) get_version;
  decltype(&::ncclGetUniqueId) get_unique_id;
  decltype(&::ncclCommInitRankConfig) comm_init_rank_config;
  decltype(&::ncclCommGetAsyncError) comm_get_async_error;
  decltype(&::ncclCommFinalize) comm_finalize;
  decltype(&::ncclCommDestroy) comm_destroy;
  decltype(&::ncclCommAbort) comm_abort;
  decltype(&::ncclGetErrorString) get_error_string;
  decltype(&::ncclGetLastError) get_last_error;
  decltype(&::ncclAllReduce) all_reduce;
  decltype(&::ncclReduceScatter) reduce_scatter;
  decltype(&::ncclAllGather) all_gather;
  decltype(&::ncclBroadcast) broadcast;
  decltype(&::ncclSend) send;
  decltype(&::ncclRecv) recv;
  decltype(&::ncclGroupStart) group_start;
  decltype(&::ncclGroupEnd) group_end;
};

// NCCL could not be loaded (missing, too old, a symbol absent): a runtime failure (exit 1)
// whose message names the file and the loader's words.
class NcclUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The oldest NCCL whose ncclConfig_t has every field the group sets (netName, blocking).
inline constexpr int kMinNcclVersion = 21900;  // 2.19.0

// The loaded table. The first call opens libnccl.so.<NCCL_MAJOR> (the dynamic loader's search
// path first, then the CUDA toolkit's lib folder seen at configure time) and checks its
// version. Throws NcclUnavailable naming the file and why when it cannot.
const NcclApi& nccl();

// Whether nccl() would succeed; `why` gets the reason when not. Never throws.
bool nccl_available(std::string* why = nullptr);

// Where the library was loaded from and its version code ("" / 0 before a successful load).
std::string nccl_path();
int nccl_version();

}  // namespace holmes::comm
